//! The command line that starts a preset CLI as an ACP agent
//! (`runtime: acp`): JSON-RPC on its stdin and stdout, no terminal; and
//! what the session is opened with where the command line cannot say it.
//!
//! - Gemini CLI speaks the protocol itself: `gemini --acp` (0.61 reads
//!   `--acp`; `--experimental-acp` is its deprecated spelling, read from
//!   its `--help`). The approval mode, model and `args:` are the other
//!   runtimes' (agents/gemini.rs), and `GEMINI_CLI_TRUST_WORKSPACE=true`
//!   trusts the worktree for this run, as a headless turn does: a
//!   folder-trust dialog has no screen here.
//! - Claude Code through its adapter, `claude-agent-acp`
//!   (`@zed-industries/claude-agent-acp`), which runs Claude Code through
//!   the Agent SDK: the `claude` on PATH when there is one
//!   (`CLAUDE_CODE_EXECUTABLE`; the same Claude Code the other runtimes
//!   run, reading the same settings), else the one the SDK bundles. The
//!   adapter takes no flags: the primer goes in as the session's
//!   `_meta.systemPrompt.append` (as `--append-system-prompt-file` does,
//!   it survives compaction), the permission as the session's mode
//!   (`session/set_mode`), the model as `ANTHROPIC_MODEL`; `args:` (Claude
//!   Code's flags) have nowhere to go and are refused. An `IS_SANDBOX`
//!   other than `1` is unset: the adapter reads any value as "bypass is
//!   allowed as root" and passes Claude Code the flag, which then reads
//!   only `1` and exits (found as root in a container that sets
//!   `IS_SANDBOX=yes`).
//! - Codex through its adapter, `codex-acp` (`@zed-industries/codex-acp`,
//!   Codex's own core built in): the permission as the `-c` overrides a
//!   headless turn takes (agents/codex.rs), the model as `-c model=…`, and
//!   `args:` as they are (`-c key=value` overrides, which it reads as
//!   Codex does). Codex's turn-end hook is not given: the client prompts
//!   when a turn ends.

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::launch::agents::{codex, gemini, Cli, Launch};
use crate::protocol::config::Permission;
use crate::sys::shell::quote as sq;

/// The shell command that starts `cli` as an ACP agent for `l`.
pub fn acp_command(cli: Cli, l: &Launch) -> Result<String> {
    match cli {
        Cli::Gemini => Ok(format!(
            "GEMINI_CLI_TRUST_WORKSPACE=true exec gemini --acp {}",
            gemini::common(l)
        )),
        Cli::Claude => {
            if !l.args.is_empty() {
                return Err(Error::bad_input(format!(
                    "role '{}': `args:` are Claude Code's flags, which its ACP adapter does not take\n  hint: remove `args:` from the role, or use `runtime: headless` or `tmux` for it (docs/agents.md, \"The ACP runtime\")",
                    l.role
                )));
            }
            let model = l
                .model
                .map(|m| format!("ANTHROPIC_MODEL={} ", sq(m)))
                .unwrap_or_default();
            Ok(format!(
                "[ \"${{IS_SANDBOX:-1}}\" = 1 ] || unset IS_SANDBOX; c=$(command -v claude) && export CLAUDE_CODE_EXECUTABLE=\"$c\"; {model}exec claude-agent-acp"
            ))
        }
        Cli::Codex => {
            let model = l
                .model
                .map(|m| format!(" -c {}", sq(&format!("model={}", codex::toml_str(m)))))
                .unwrap_or_default();
            Ok(format!(
                "exec codex-acp{}{model}{}",
                codex::overrides(l),
                l.extra()
            ))
        }
    }
}

/// The program the command runs (what must be on PATH).
pub fn program(cli: Cli) -> &'static str {
    match cli {
        Cli::Gemini => "gemini",
        Cli::Claude => "claude-agent-acp",
        Cli::Codex => "codex-acp",
    }
}

/// The `_meta` of `session/new` and `session/load` for `cli`: Claude
/// Code's adapter takes the primer as its system prompt's addition.
pub fn session_meta(cli: Cli, primer: &str) -> Option<Value> {
    (cli == Cli::Claude).then(|| json!({"systemPrompt": {"append": primer}}))
}

/// The session mode to set once a session is open (`session/set_mode`),
/// where the command line cannot carry the permission: Claude Code's
/// adapter starts in `default` (asks before edits and commands).
pub fn session_mode(cli: Cli, permission: Permission) -> Option<&'static str> {
    match (cli, permission) {
        (Cli::Claude, Permission::Edits) => Some("acceptEdits"),
        (Cli::Claude, Permission::Full) => Some("bypassPermissions"),
        _ => None,
    }
}
