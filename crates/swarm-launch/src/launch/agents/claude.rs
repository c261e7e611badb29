//! Claude Code (written against 2.1.x; docs: code.claude.com/docs/en/cli-reference,
//! /settings, /hooks). The primer goes in with `--append-system-prompt-file`,
//! so it survives compaction and leaves the default system prompt intact;
//! the turn-end hook is a `Stop` hook in the worktree's
//! `.claude/settings.local.json` (local settings: never committed, never the
//! user's global file), which also allows the protocol's wrappers to run
//! without a permission prompt.

use serde_json::{json, Value};

use std::path::{Path, PathBuf};

use super::mcp::{merge_server, read_object, write_json, Server, SERVER};
use super::{merge_hook, model_flag, Launch, Preset};
use crate::error::Result;
use crate::protocol::config::Permission;
use crate::sys::shell::{quote as sq, quote_path as sqp};

pub struct Claude;

/// Primer, permission mode, model and `args:`, shared by both runtimes.
fn common(l: &Launch) -> String {
    let mode = match l.permission {
        Permission::Ask => "default",
        Permission::Edits => "acceptEdits",
        Permission::Full => "bypassPermissions",
    };
    format!(
        "--append-system-prompt-file {} --permission-mode {mode}{}{}",
        sqp(l.prompt_file),
        model_flag(l),
        l.extra()
    )
}

/// The wrappers an agent runs for the protocol, allowed in its settings.
pub const ALLOWED: &[&str] = &[
    "Bash(ready_for_next.sh:*)",
    "Bash(done_with_current.sh:*)",
    "Bash(swarm_handoff.sh:*)",
];

impl Preset for Claude {
    fn program(&self) -> &'static str {
        "claude"
    }

    fn command(&self, l: &Launch) -> String {
        format!("claude {} {}", common(l), l.first_prompt())
    }

    /// `-p` (print mode: no terminal, no trust dialog) with the stream-json
    /// output, which needs `--verbose` (docs: code.claude.com/docs/en/headless).
    fn turn(&self, l: &Launch, resume: Option<&str>, prompt: &str) -> String {
        let resume = resume
            .map(|id| format!(" --resume {}", sq(id)))
            .unwrap_or_default();
        format!(
            "claude -p --output-format stream-json --verbose {}{resume} {}",
            common(l),
            sq(prompt)
        )
    }

    fn instruction_file(&self) -> Option<&'static str> {
        None
    }

    fn hook_file(&self) -> &'static str {
        ".claude/settings.local.json"
    }

    fn turn_end_event(&self) -> &'static str {
        "Stop"
    }

    fn with_hook(&self, existing: Value, hook_command: &str) -> Value {
        let mut v = merge_hook(
            existing,
            "Stop",
            json!({"type": "command", "command": hook_command, "timeout": 30}),
        );
        let root = v.as_object_mut().expect("merge_hook returns an object");
        let perms = root.entry("permissions").or_insert_with(|| json!({}));
        if !perms.is_object() {
            *perms = json!({});
        }
        let allow = perms
            .as_object_mut()
            .expect("an object")
            .entry("allow")
            .or_insert_with(|| json!([]));
        if !allow.is_array() {
            *allow = json!([]);
        }
        let list = allow.as_array_mut().expect("an array");
        for a in ALLOWED {
            if !list.iter().any(|x| x == a) {
                list.push(json!(a));
            }
        }
        v
    }

    /// Stop hook output: `decision: block` keeps Claude working with
    /// `reason` as its instruction; `{}` lets it stop.
    fn reply(&self, keep_going: Option<&str>) -> Value {
        match keep_going {
            Some(r) => json!({"decision": "block", "reason": r}),
            None => json!({}),
        }
    }

    fn write_mcp(&self, wt: &Path, _role: &str, server: &Server) -> Result<Vec<PathBuf>> {
        let mut entry = server.stdio();
        entry["type"] = json!("stdio");
        let mcp = wt.join(".mcp.json");
        merge_server(&mcp, "mcpServers", entry)?;
        // Approves the project server, so the agent is not asked.
        let local = wt.join(".claude/settings.local.json");
        let mut obj = read_object(&local)?;
        let list = obj
            .entry("enabledMcpjsonServers".to_string())
            .or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        if let Some(a) = list.as_array_mut() {
            if !a.iter().any(|v| v == SERVER) {
                a.push(json!(SERVER));
            }
        }
        // Approving the server does not permit its tools: without this rule
        // Claude Code asks before every call (found with the real CLI,
        // tests/cli/real_agents.rs).
        let perms = obj
            .entry("permissions".to_string())
            .or_insert_with(|| json!({}));
        if !perms.is_object() {
            *perms = json!({});
        }
        let allow = perms
            .as_object_mut()
            .map(|p| p.entry("allow").or_insert_with(|| json!([])));
        if let Some(allow) = allow {
            if !allow.is_array() {
                *allow = json!([]);
            }
            if let Some(a) = allow.as_array_mut() {
                let rule = format!("mcp__{SERVER}");
                if !a.iter().any(|v| *v == rule.as_str()) {
                    a.push(json!(rule));
                }
            }
        }
        write_json(&local, &Value::Object(obj))?;
        Ok(vec![mcp, local])
    }
}
