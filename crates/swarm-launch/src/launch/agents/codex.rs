//! OpenAI Codex CLI (written against 0.5x–0.6x; docs: developers.openai.com/codex/cli/reference,
//! /codex/guides/agents-md, /codex/hooks). The primer goes into the
//! worktree's `AGENTS.md` (a block of ours; the rest of the file is kept),
//! which Codex reads at the start of every session; `--sandbox` and
//! `--ask-for-approval` carry the permission; the turn-end hook is a `Stop`
//! hook in the worktree's `.codex/hooks.json`.

use serde_json::{json, Value};

use std::path::{Path, PathBuf};

use super::mcp::{Server, SERVER};
use super::{merge_hook, model_flag, Launch, Preset};
use crate::error::{Error, Result};
use crate::fsx;
use crate::launch::repo::write_if_changed;
use crate::protocol::config::Permission;
use crate::sys::shell::{quote as sq, quote_path as sqp};

pub struct Codex;

/// `<worktree>/.codex`, the `CODEX_HOME` of a Codex role with `mcp: true`.
fn codex_home(wt: &Path) -> PathBuf {
    wt.join(".codex")
}

/// The permission as `-c` overrides (no login shell, the sandbox mode,
/// the approval policy, the project root writable unless confined): what a
/// headless turn and the ACP adapter (`codex-acp`, launch/acp/command.rs)
/// both take, neither reading `--sandbox`/`--cd`/`--add-dir`.
pub(crate) fn overrides(l: &Launch) -> String {
    let (sandbox, approval) = match l.permission {
        Permission::Ask => ("workspace-write", "untrusted"),
        Permission::Edits => ("workspace-write", "on-request"),
        Permission::Full => ("danger-full-access", "never"),
    };
    let roots = if l.worktree != l.root && !l.confined {
        format!(
            " -c {}",
            sq(&format!(
                "sandbox_workspace_write.writable_roots=[{}]",
                toml_str(&l.root.to_string_lossy())
            ))
        )
    } else {
        String::new()
    };
    format!(" -c allow_login_shell=false -c sandbox_mode={sandbox} -c approval_policy={approval}{roots}")
}

/// TOML basic string.
pub(crate) fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The `[projects."<path>"]` tables (folder trust) and `[hooks…]` tables
/// (hook trust) of the Codex config at `path`, as TOML text (empty when
/// there are none or the file does not parse).
fn kept_projects(path: &Path) -> String {
    let Ok(old) = std::fs::read_to_string(path) else {
        return String::new();
    };
    let Ok(doc) = old.parse::<toml_edit::DocumentMut>() else {
        return String::new();
    };
    let mut keep = toml_edit::DocumentMut::new();
    for name in ["projects", "hooks"] {
        if let Some(table) = doc.get(name).and_then(|p| p.as_table()) {
            let mut t = table.clone();
            t.set_implicit(true);
            keep.insert(name, toml_edit::Item::Table(t));
        }
    }
    if keep.is_empty() {
        return String::new();
    }
    format!("\n{keep}")
}

/// The first line of a Codex config we wrote (rewritten freely; any other
/// file is left alone).
const CODEX_MARK: &str = "# Written by `swarm up` for role ";

impl Preset for Codex {
    fn program(&self) -> &'static str {
        "codex"
    }

    fn command(&self, l: &Launch) -> String {
        let perm = match l.permission {
            Permission::Ask => "--sandbox workspace-write --ask-for-approval untrusted",
            Permission::Edits => "--sandbox workspace-write --ask-for-approval on-request",
            Permission::Full => "--sandbox danger-full-access --ask-for-approval never",
        };
        // The queue folders live under the project root; a role in its own
        // worktree must be able to write there under the sandbox (unless
        // the swarm confines it: its queue is in its worktree, and the
        // root is read-only anyway).
        let add_dir = if l.worktree != l.root && !l.confined {
            format!(" --add-dir {}", sqp(l.root))
        } else {
            String::new()
        };
        let model = model_flag(l);
        // Codex runs commands in a login shell by default, whose profile
        // (/etc/profile on Debian) resets PATH: the wrappers in
        // `.swarmforge/bin` were "command not found" with the real Codex
        // 0.171 (tests/cli/real_agents.rs). A plain shell keeps our PATH.
        // The turn-end hook, on the command line unless the role's own
        // CODEX_HOME (`mcp: true`) holds it (agents/codex_hooks.rs says why).
        let hook = match crate::launch::shims::own_bin_dir() {
            Ok(bin) if !l.mcp => format!(
                " -c {}",
                sq(&super::codex_hooks::session_hook(&super::hook_command(
                    &bin,
                    super::Cli::Codex
                )))
            ),
            _ => String::new(),
        };
        format!(
            "codex --cd {} -c allow_login_shell=false{hook} {perm}{add_dir}{model}{} {}",
            sqp(l.worktree),
            l.extra(),
            l.first_prompt()
        )
    }

    /// `codex exec --json` (docs: developers.openai.com/codex/noninteractive),
    /// or `codex exec resume <id>`, which takes no `--sandbox`/`--cd`/
    /// `--add-dir`: the permission goes in as `-c` overrides for both, and
    /// the turn runs in the worktree. exec never asks: what `ask` would ask
    /// is refused.
    fn turn(&self, l: &Launch, resume: Option<&str>, prompt: &str) -> String {
        let model = model_flag(l);
        // `resume`'s options come before the session id and the prompt.
        let (head, id) = match resume {
            Some(id) => (" resume", format!(" {}", sq(id))),
            None => ("", String::new()),
        };
        format!(
            "codex exec{head} --json{}{model}{}{id} {}",
            overrides(l),
            l.extra(),
            sq(prompt)
        )
    }

    fn instruction_file(&self) -> Option<&'static str> {
        Some("AGENTS.md")
    }

    fn hook_file(&self) -> &'static str {
        ".codex/hooks.json"
    }

    fn turn_end_event(&self) -> &'static str {
        "Stop"
    }

    fn with_hook(&self, existing: Value, hook_command: &str) -> Value {
        merge_hook(
            existing,
            "Stop",
            json!({"type": "command", "command": hook_command, "timeout": 30}),
        )
    }

    /// Codex's Stop hook takes Claude Code's shape: `decision: block` with a
    /// `reason` continues the turn with that reason as the next prompt.
    fn reply(&self, keep_going: Option<&str>) -> Value {
        match keep_going {
            Some(r) => json!({"decision": "block", "reason": r}),
            None => json!({}),
        }
    }

    fn write_mcp(&self, wt: &Path, role: &str, server: &Server) -> Result<Vec<PathBuf>> {
        let home = codex_home(wt);
        let path = home.join("config.toml");
        if let Ok(old) = std::fs::read_to_string(&path) {
            // `swarm trust` may have written only the folder trust here.
            let only_trust = old
                .parse::<toml_edit::DocumentMut>()
                .is_ok_and(|d| d.iter().all(|(k, _)| k == "projects" || k == "hooks"));
            if !old.starts_with(CODEX_MARK) && !only_trust {
                return Err(Error::conflict(format!(
                    "{} exists and was not written by swarm up; it is CODEX_HOME's config for role {role}.\n  hint: move it away, or add [mcp_servers.{SERVER}] yourself and remove `mcp: true`",
                    path.display(),
                )));
            }
        }
        let args: Vec<String> = server.args.iter().map(|a| toml_str(a)).collect();
        let mut text = format!(
            "{CODEX_MARK}{role}: CODEX_HOME points here.\n[mcp_servers.{SERVER}]\ncommand = {}\nargs = [{}]\n# The role's own tools: approved, or each call waits for a person.\ndefault_tools_approval_mode = \"approve\"\n",
            toml_str(&server.command),
            args.join(", ")
        );
        // The folder trust `swarm trust` (or Codex itself) recorded here stays.
        text.push_str(&kept_projects(&path));
        fsx::ensure_dirs(&[&home]).map_err(|e| Error::io(&home, e))?;
        write_if_changed(&path, text.as_bytes())?;
        Ok(vec![path])
    }

    fn mcp_env(&self, wt: &Path) -> Vec<(&'static str, PathBuf)> {
        vec![("CODEX_HOME", codex_home(wt))]
    }
}
