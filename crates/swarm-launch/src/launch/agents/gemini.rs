//! Google Gemini CLI (written against 0.2x–0.4x; docs: geminicli.com/docs/cli/cli-reference,
//! /docs/cli/gemini-md, /docs/hooks/reference). The primer goes into the
//! worktree's `GEMINI.md` (a block of ours; the rest is kept), the
//! permission into `--approval-mode`, the first prompt into
//! `--prompt-interactive` (run it, then stay interactive); the turn-end hook
//! is an `AfterAgent` hook in the worktree's `.gemini/settings.json`, which
//! also allows the protocol's wrappers to run without a confirmation.

use serde_json::{json, Value};

use std::path::{Path, PathBuf};

use super::mcp::{merge_server, Server};
use super::{merge_hook, model_flag, Launch, Preset};
use crate::error::Result;
use crate::protocol::config::Permission;
use crate::sys::shell::quote as sq;

pub struct Gemini;

/// Approval mode, model and `args:`, shared by both runtimes.
pub(crate) fn common(l: &Launch) -> String {
    let mode = match l.permission {
        Permission::Ask => "default",
        Permission::Edits => "auto_edit",
        Permission::Full => "yolo",
    };
    format!("--approval-mode {mode}{}{}", model_flag(l), l.extra())
}

/// The wrappers an agent runs for the protocol, allowed without a
/// confirmation (`tools.allowed`): under `auto_edit` the real Gemini CLI
/// 0.61 asked before `swarm_handoff.sh` (tests/cli/real_agents.rs).
pub const ALLOWED: &[&str] = &[
    "run_shell_command(ready_for_next.sh)",
    "run_shell_command(done_with_current.sh)",
    "run_shell_command(swarm_handoff.sh)",
];

impl Preset for Gemini {
    fn program(&self) -> &'static str {
        "gemini"
    }

    fn command(&self, l: &Launch) -> String {
        format!(
            "gemini {} --prompt-interactive {}",
            common(l),
            l.first_prompt()
        )
    }

    /// `--prompt` (headless) with `--output-format stream-json` (docs:
    /// geminicli.com/docs/cli/headless). `GEMINI_CLI_TRUST_WORKSPACE=true`
    /// trusts the worktree for this run only (docs/cli/trusted-folders,
    /// "Headless and automated environments"): a headless run cannot show
    /// the trust dialog, and the worktree is the swarm's own. Not
    /// `--skip-trust`: 0.61 applies it after reading the workspace's
    /// settings, so their auth and hook were ignored (tests/cli/headless.rs).
    fn turn(&self, l: &Launch, resume: Option<&str>, prompt: &str) -> String {
        let resume = resume
            .map(|id| format!(" --resume {}", sq(id)))
            .unwrap_or_default();
        format!(
            "GEMINI_CLI_TRUST_WORKSPACE=true gemini --output-format stream-json {}{resume} --prompt {}",
            common(l),
            sq(prompt)
        )
    }

    fn instruction_file(&self) -> Option<&'static str> {
        Some("GEMINI.md")
    }

    fn hook_file(&self) -> &'static str {
        ".gemini/settings.json"
    }

    fn turn_end_event(&self) -> &'static str {
        "AfterAgent"
    }

    fn with_hook(&self, existing: Value, hook_command: &str) -> Value {
        // Gemini's hook timeout is in milliseconds.
        let mut v = merge_hook(
            existing,
            "AfterAgent",
            json!({"name": "swarm-handoff", "type": "command", "command": hook_command, "timeout": 30000}),
        );
        let root = v.as_object_mut().expect("merge_hook returns an object");
        let tools = root.entry("tools").or_insert_with(|| json!({}));
        if !tools.is_object() {
            *tools = json!({});
        }
        let allowed = tools
            .as_object_mut()
            .expect("an object")
            .entry("allowed")
            .or_insert_with(|| json!([]));
        if !allowed.is_array() {
            *allowed = json!([]);
        }
        let list = allowed.as_array_mut().expect("an array");
        for a in ALLOWED {
            if !list.iter().any(|x| x == a) {
                list.push(json!(a));
            }
        }
        v
    }

    /// AfterAgent output: `decision: deny` rejects the turn's end and sends
    /// `reason` back to the model as its next prompt; `{}` lets it end.
    fn reply(&self, keep_going: Option<&str>) -> Value {
        match keep_going {
            Some(r) => json!({"decision": "deny", "reason": r}),
            None => json!({}),
        }
    }

    fn write_mcp(&self, wt: &Path, _role: &str, server: &Server) -> Result<Vec<PathBuf>> {
        let p = wt.join(".gemini/settings.json");
        let mut entry = server.stdio();
        entry["cwd"] = json!(wt.display().to_string());
        // The role's own tools: no confirmation per call, or the agent waits
        // in its pane for a person at every step (found with the real CLI,
        // tests/cli/real_agents.rs), as Claude Code's allow rule does.
        entry["trust"] = json!(true);
        merge_server(&p, "mcpServers", entry)?;
        Ok(vec![p])
    }
}
