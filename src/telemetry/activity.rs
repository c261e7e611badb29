//! A role's activity: what its agent did between handoffs, one JSON object
//! per line in `.swarmforge/telemetry/activity/<role>.jsonl` (turn start and
//! end, assistant text, thinking, tool calls with a bounded input, tool
//! results, errors, usage), each with the handoff being worked on.
//!
//! Written by whoever watches the agent (the headless supervisor, hooks),
//! read by `swarm activity`, liveness and the cockpit. Every field that
//! came from a CLI's stream is bounded to [`MAX_TEXT`] characters and has
//! its control characters escaped before it is stored, so a reader can
//! print it; readers still skip a line that is not a record.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::Project;

/// The longest text kept from one event (assistant text, a tool's input).
pub const MAX_TEXT: usize = 2000;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    TurnStart,
    TurnEnd,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    Error,
    Usage,
    /// The agent waits for work (`ready-next --wait`, MCP `next`).
    Listening,
    /// Something the supervisor itself says (a refused resume, skipped lines).
    Note,
}

/// One event of a role's agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    pub time: String,
    pub role: String,
    pub kind: Kind,
    /// The handoff in process, if any.
    pub id: Option<String>,
    /// A tool's name, a model's name: short, single-line.
    pub name: Option<String>,
    /// Bounded, escaped text (see the module doc).
    pub text: Option<String>,
    /// A tool result's or a turn's outcome (`ok`, `error`, an exit code).
    pub status: Option<String>,
}

impl Activity {
    pub fn now(role: &str, kind: Kind) -> Activity {
        Activity {
            time: clock::iso_now(),
            role: role.to_string(),
            kind,
            id: None,
            name: None,
            text: None,
            status: None,
        }
    }

    /// Sets the text, bounded and escaped.
    pub fn text(mut self, t: &str) -> Activity {
        self.text = Some(bound(t));
        self
    }
}

/// `t` cut to [`MAX_TEXT`] characters (marked with `…`), control characters
/// escaped.
pub fn bound(t: &str) -> String {
    let mut cut: String = t.chars().take(MAX_TEXT).collect();
    if cut.len() < t.len() {
        cut.push('…');
    }
    crate::text::escape(&cut)
}

/// Appends one event to the role's file (single O_APPEND write).
pub fn append(project: &Project, ev: &Activity) -> Result<()> {
    let path = project.activity_file(&ev.role);
    if let Some(dir) = path.parent() {
        fsx::ensure_dirs(&[dir]).map_err(|e| Error::io(dir, e))?;
    }
    let mut line =
        serde_json::to_string(ev).map_err(|e| Error::env(format!("activity record: {e}")))?;
    line.push('\n');
    fsx::append(&path, line.as_bytes()).map_err(|e| Error::io(&path, e))
}
