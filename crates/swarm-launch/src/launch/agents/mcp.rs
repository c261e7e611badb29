//! `mcp: true` on a role in swarm.yaml: `swarm up` writes the agent CLI's
//! MCP configuration into the role's worktree, so the agent starts with the
//! `swarm mcp` tools. Project-local files only, never the user's own config;
//! which files is each preset's (`Preset::write_mcp`, `Preset::mcp_env`):
//! Claude Code's `.mcp.json` and `.claude/settings.local.json`, Codex's
//! `.codex/config.toml` with `CODEX_HOME` pointed there, Gemini CLI's
//! `.gemini/settings.json`. This module holds what the presets share: the
//! server's name and command, and merging it into a JSON file (other keys
//! kept). Which roles get it, and the checks on the plan, are
//! `launch::role_mcp`'s.

use std::path::Path;

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::fsx;
use crate::launch::repo::write_if_changed;

/// The server's name in every agent's configuration.
pub const SERVER: &str = "swarm";

/// How the agent starts the `swarm` server.
pub struct Server {
    pub command: String,
    pub args: Vec<String>,
}

impl Server {
    /// `{"command": …, "args": […]}`, the stdio entry JSON configs share.
    pub fn stdio(&self) -> Value {
        json!({"command": self.command, "args": self.args})
    }
}

/// Reads a JSON object to merge into; a missing file is an empty object.
pub(crate) fn read_object(path: &Path) -> Result<serde_json::Map<String, Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(Error::io(path, e)),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(Error::bad_file_hint(
            path,
            "not a JSON object, so the swarm MCP server cannot be added to it.",
            "fix or remove the file, then run `swarm up` again",
        )),
    }
}

pub(crate) fn write_json(path: &Path, v: &Value) -> Result<()> {
    if let Some(dir) = path.parent() {
        fsx::ensure_dirs(&[dir]).map_err(|e| Error::io(dir, e))?;
    }
    let mut text = serde_json::to_string_pretty(v).unwrap_or_default();
    text.push('\n');
    write_if_changed(path, text.as_bytes()).map(|_| ())
}

/// Sets `obj[key][SERVER] = entry`, keeping the other servers.
pub(crate) fn merge_server(path: &Path, key: &str, entry: Value) -> Result<()> {
    let mut obj = read_object(path)?;
    let servers = obj.entry(key.to_string()).or_insert_with(|| json!({}));
    if !servers.is_object() {
        *servers = json!({});
    }
    servers[SERVER] = entry;
    write_json(path, &Value::Object(obj))
}
