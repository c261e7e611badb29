//! What a CLI's turn-end hook hands over on stdin (Claude Code's, Codex's
//! and Gemini CLI's hook JSON), read leniently: the hook runtime
//! (`doors::hook`) and the daemon's reading of tmux turn ends (`turn_end`)
//! both take it from here.

use serde_json::Value;

/// Largest hook input read from stdin (Claude sends the last message too).
pub const MAX_INPUT: usize = 1024 * 1024;

/// What we read from the hook's JSON input.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Input {
    /// The CLI is already continuing because of a stop hook.
    pub stop_hook_active: bool,
    /// Claude Code's transcript of the session (`transcript_path`).
    pub transcript_path: Option<String>,
    /// The text the turn ended with (`last_assistant_message`).
    pub last_message: Option<String>,
}

/// Lenient by design: invalid or oversized input is read as `{}`.
pub fn parse_input(bytes: &[u8]) -> Input {
    if bytes.len() > MAX_INPUT {
        return Input::default();
    }
    let v: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    Input {
        stop_hook_active: v
            .get("stop_hook_active")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        transcript_path: v
            .get("transcript_path")
            .and_then(Value::as_str)
            .filter(|p| p.len() <= 4096 && !p.chars().any(char::is_control))
            .map(str::to_string),
        last_message: v
            .get("last_assistant_message")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_string),
    }
}
