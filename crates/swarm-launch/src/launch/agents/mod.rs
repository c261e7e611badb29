//! Agent presets: `agent: claude | codex | gemini` in `swarm.yaml`. Each
//! CLI's specifics (its command line, where it reads instructions, which
//! settings file carries its turn-end hook and what that hook must answer)
//! live in one small module behind [`Preset`], so supporting another CLI, or
//! another per-CLI file (an MCP config), only adds to it.

pub mod claude;
pub mod claude_root;
pub mod codex;
pub mod codex_hooks;
pub mod codex_sandbox;
pub mod gemini;
pub mod gemini_sandbox;
pub mod hook_input;
pub mod mcp;
pub mod recording;
pub mod setup;
pub mod stream;
pub mod transcript;
pub mod turn_end;

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::error::Result;
use crate::protocol::config::Permission;
use crate::sys::shell::{quote as sq, quote_path as sqp};

/// The CLIs with a preset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cli {
    Claude,
    Codex,
    Gemini,
}

pub const ALL: &[Cli] = &[Cli::Claude, Cli::Codex, Cli::Gemini];

impl Cli {
    /// The preset an `agent:` value names: exactly the CLI's name, so
    /// `claude --foo` stays a plain command line.
    pub fn from_agent(agent: &str) -> Option<Cli> {
        match agent.trim() {
            "claude" => Some(Cli::Claude),
            "codex" => Some(Cli::Codex),
            "gemini" => Some(Cli::Gemini),
            _ => None,
        }
    }

    pub fn parse(name: &str) -> Option<Cli> {
        ALL.iter().copied().find(|c| c.name() == name)
    }

    pub fn name(self) -> &'static str {
        self.preset().program()
    }

    pub fn preset(self) -> &'static dyn Preset {
        match self {
            Cli::Claude => &claude::Claude,
            Cli::Codex => &codex::Codex,
            Cli::Gemini => &gemini::Gemini,
        }
    }
}

/// What a preset needs to build a role's command line.
#[derive(Clone, Debug)]
pub struct Launch<'a> {
    pub role: &'a str,
    pub root: &'a Path,
    pub worktree: &'a Path,
    /// `.swarmforge/prompts/<role>.md`: the primer (and the role's job).
    pub prompt_file: &'a Path,
    pub model: Option<&'a str>,
    pub args: &'a [String],
    pub permission: Permission,
    /// The CLI reads the primer from its instruction file in the worktree
    /// (or its system-prompt flag); otherwise the first prompt carries it.
    pub instructions_in_file: bool,
    /// `mcp: true`: the agent takes work with the `swarm` server's `next`.
    pub mcp: bool,
    /// The swarm's sandbox confines the agent (launch/confine/): the
    /// project root is read-only there, so the CLI's own sandbox is not
    /// asked to make it writable (Codex would try to make its protected
    /// `.agents` folder in it, and fail every command).
    pub confined: bool,
}

impl Launch<'_> {
    /// The extra words, each single-quoted: `args:` is a list of words, never
    /// re-split or expanded by the shell.
    pub fn extra(&self) -> String {
        self.args.iter().map(|a| format!(" {}", sq(a))).collect()
    }

    /// The first message the agent gets: a nudge to start when it already
    /// has its instructions, the whole primer otherwise.
    pub fn first_prompt(&self) -> String {
        if self.instructions_in_file {
            sq(&format!(
                "You are the agent of role {} in this swarm; your instructions are loaded. Start now: {}.",
                self.role,
                if self.mcp {
                    "call the swarm tool `next`"
                } else {
                    "run ready_for_next.sh"
                }
            ))
        } else {
            format!("\"$(cat {})\"", sqp(self.prompt_file))
        }
    }

    /// A headless turn's prompt (unquoted): the nudge of [`first_prompt`],
    /// after the primer when the CLI has no instructions of its own yet
    /// (a new conversation whose primer is not in a file).
    ///
    /// [`first_prompt`]: Launch::first_prompt
    pub fn turn_prompt(&self, resumed: bool, primer: &str) -> String {
        let start = if self.mcp {
            "call the swarm tool `next`"
        } else {
            "run ready_for_next.sh"
        };
        if resumed {
            format!(
                "New work waits for you (role {}). Start now: {start}, and handle it as your instructions say.",
                self.role
            )
        } else if self.instructions_in_file {
            format!(
                "You are the agent of role {} in this swarm; your instructions are loaded. Start now: {start}.",
                self.role
            )
        } else {
            format!("{primer}\n\nStart now: {start}.")
        }
    }
}

/// ` --model <m>` when the role names a model (every CLI spells it so).
pub fn model_flag(l: &Launch) -> String {
    l.model
        .map(|m| format!(" --model {}", sq(m)))
        .unwrap_or_default()
}

/// One CLI's specifics.
pub trait Preset: Sync {
    /// The program (and the `agent:` word).
    fn program(&self) -> &'static str;
    /// The shell command line that starts the agent in its worktree.
    fn command(&self, l: &Launch) -> String;
    /// The shell command line of one headless turn: non-interactive, its
    /// JSON event stream on stdout (agents/stream.rs reads it), resuming
    /// `resume` (a session id already checked by launch::agent_session).
    fn turn(&self, l: &Launch, resume: Option<&str>, prompt: &str) -> String;
    /// The worktree file the CLI reads project instructions from, when the
    /// preset injects the primer that way (None: a system-prompt flag).
    fn instruction_file(&self) -> Option<&'static str>;
    /// The worktree-local settings file that carries the turn-end hook.
    fn hook_file(&self) -> &'static str;
    /// The hook event that fires when a turn ends.
    fn turn_end_event(&self) -> &'static str;
    /// `existing` settings with our hook (running `hook_command`) merged in;
    /// everything else in the file is kept.
    fn with_hook(&self, existing: Value, hook_command: &str) -> Value;
    /// The hook's answer on stdout: `Some(reason)` keeps the agent going with
    /// `reason` as its next instruction; None lets the turn end.
    fn reply(&self, keep_going: Option<&str>) -> Value;
    /// Writes the MCP configuration that starts `server` as `mcp::SERVER`
    /// for `role` into its worktree `wt` (merged into the CLI's own files,
    /// their other keys kept); returns the files written.
    fn write_mcp(&self, wt: &Path, role: &str, server: &mcp::Server) -> Result<Vec<PathBuf>>;
    /// The environment the CLI needs to find that configuration.
    fn mcp_env(&self, _wt: &Path) -> Vec<(&'static str, PathBuf)> {
        Vec::new()
    }
}

/// Whether a hook entry's command is ours (so a re-install replaces it).
pub fn is_our_hook(command: &str) -> bool {
    command.contains("swarm' hook ") || command.starts_with("swarm hook ")
}

/// `settings.hooks[event]` with every group running our command removed and
/// one group `{"hooks": [hook]}` added. A non-object anywhere is replaced:
/// the file is ours to repair only where our key lives.
pub fn merge_hook(settings: Value, event: &str, hook: Value) -> Value {
    let mut root = match settings {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    if !hooks.is_object() {
        *hooks = Value::Object(Map::new());
    }
    let groups = hooks
        .as_object_mut()
        .map(|h| h.entry(event).or_insert_with(|| Value::Array(Vec::new())))
        .expect("an object");
    if !groups.is_array() {
        *groups = Value::Array(Vec::new());
    }
    let list = groups.as_array_mut().expect("an array");
    list.retain(|g| {
        !g.get("hooks").and_then(Value::as_array).is_some_and(|hs| {
            hs.iter().any(|h| {
                h.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(is_our_hook)
            })
        })
    });
    list.push(json!({ "hooks": [hook] }));
    Value::Object(root)
}

/// The flag a CLI plugin's copy of the hook carries (plugins/*/hooks):
/// `swarm hook <cli> <event> --plugin`.
pub const PLUGIN_FLAG: &str = "--plugin";

/// Set by `swarm up` in a preset agent's environment, to the CLI's name:
/// the session runs the swarm's own turn-end hook (from the worktree's
/// settings or Codex's command line), so a plugin's copy stands aside.
pub const OWN_HOOK_ENV: &str = "SWARMFORGE_TURN_HOOK";

/// Whether the swarm's own turn-end hook runs in a session of `cli` in
/// `dir`: `swarm up` started it ([`OWN_HOOK_ENV`] names `cli`), or `dir`'s
/// settings file for `cli` holds our hook (a person started the CLI in a
/// role's worktree). The file is the agent's to write; what it says can
/// only make the plugin's copy stand aside, which ends the agent's own
/// turn as the swarm's hook would, so it is read bounded, not trusted.
pub fn own_hook_runs(cli: Cli, dir: &Path) -> bool {
    if std::env::var(OWN_HOOK_ENV).is_ok_and(|v| v == cli.name()) {
        return true;
    }
    let p = cli.preset();
    let Ok(bytes) = crate::fsx::read_bounded(&dir.join(p.hook_file()), setup::MAX_FILE) else {
        return false;
    };
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let groups = v["hooks"][p.turn_end_event()]
        .as_array()
        .cloned()
        .unwrap_or_default();
    groups.iter().any(|g| {
        g["hooks"].as_array().is_some_and(|hs| {
            hs.iter().any(|h| {
                h["command"]
                    .as_str()
                    .is_some_and(|c| is_our_hook(c) && !c.contains(PLUGIN_FLAG))
            })
        })
    })
}

/// The command a CLI's hook runs: our `swarm` binary by absolute path (the
/// CLI may run hooks with another PATH).
pub fn hook_command(bin_dir: &Path, cli: Cli) -> String {
    format!(
        "{} hook {} {}",
        sqp(&bin_dir.join("swarm")),
        cli.name(),
        cli.preset().turn_end_event()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_keeps_other_hooks_and_replaces_ours() {
        let ours = "'/b/swarm' hook claude Stop";
        let theirs = json!({"hooks": [{"type": "command", "command": "lint"}]});
        let start = json!({"model": "x", "hooks": {"Stop": [theirs.clone()]}});
        let once = merge_hook(start, "Stop", json!({"type": "command", "command": ours}));
        let twice = merge_hook(
            once.clone(),
            "Stop",
            json!({"type": "command", "command": ours}),
        );
        assert_eq!(once, twice);
        assert_eq!(twice["model"], "x");
        assert_eq!(twice["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(twice["hooks"]["Stop"][0], theirs);
        let broken = merge_hook(json!([1]), "Stop", json!({"command": ours}));
        assert_eq!(broken["hooks"]["Stop"][0]["hooks"][0]["command"], ours);
    }

    #[test]
    fn a_headless_turn_is_each_clis_non_interactive_command_with_its_stream() {
        let args = vec!["--x".to_string()];
        let l = Launch {
            role: "coder",
            root: Path::new("/p"),
            worktree: Path::new("/p/.worktrees/coder"),
            prompt_file: Path::new("/p/.swarmforge/prompts/coder.md"),
            model: Some("m1"),
            args: &args,
            permission: Permission::Edits,
            instructions_in_file: true,
            mcp: false,
            confined: false,
        };
        let p = l.turn_prompt(true, "primer");
        assert!(p.starts_with("New work waits for you (role coder)"), "{p}");
        assert_eq!(
            Cli::Claude.preset().turn(&l, Some("s-1"), "go"),
            "claude -p --output-format stream-json --verbose --append-system-prompt-file '/p/.swarmforge/prompts/coder.md' --permission-mode acceptEdits --model 'm1' '--x' --resume 's-1' 'go'"
        );
        assert_eq!(
            Cli::Codex.preset().turn(&l, Some("s-1"), "go"),
            "codex exec resume --json -c allow_login_shell=false -c sandbox_mode=workspace-write -c approval_policy=on-request -c 'sandbox_workspace_write.writable_roots=[\"/p\"]' --model 'm1' '--x' 's-1' 'go'"
        );
        assert_eq!(
            Cli::Codex.preset().turn(&l, None, "go"),
            "codex exec --json -c allow_login_shell=false -c sandbox_mode=workspace-write -c approval_policy=on-request -c 'sandbox_workspace_write.writable_roots=[\"/p\"]' --model 'm1' '--x' 'go'"
        );
        assert_eq!(
            Cli::Gemini.preset().turn(&l, None, "go"),
            "GEMINI_CLI_TRUST_WORKSPACE=true gemini --output-format stream-json --approval-mode auto_edit --model 'm1' '--x' --prompt 'go'"
        );
        let fresh = Launch {
            instructions_in_file: false,
            ..l
        };
        assert_eq!(
            fresh.turn_prompt(false, "PRIMER"),
            "PRIMER\n\nStart now: run ready_for_next.sh."
        );
    }

    #[test]
    fn presets_are_exact_words() {
        assert_eq!(Cli::from_agent(" claude "), Some(Cli::Claude));
        assert_eq!(Cli::from_agent("claude --x"), None);
        assert_eq!(Cli::from_agent("Gemini"), None);
        assert_eq!(Cli::parse("codex"), Some(Cli::Codex));
    }
}
