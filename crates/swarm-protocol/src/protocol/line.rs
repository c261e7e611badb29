//! One message as one line: `[FROM -> TO] <type> <summary>`, shared by
//! `forum.log` (which the daemon writes, with the full date in front) and the
//! transcript. Control characters and backslashes are escaped, so one message
//! is one line.

use crate::protocol::clock::{self, Instant};
use crate::protocol::header::names;
use crate::protocol::header::{Header, Message};

/// Longest summary, in characters, before it is cut with `…`.
pub const MAX_SUMMARY: usize = 200;

/// SwarmForge's generated first body line; it says nothing about the message.
/// The line the sender helper puts first in every body (not what was said).
pub const PREAMBLE: &str = "Re-read your role and constitution.";

/// Headers that name what a message is about, in order of preference.
const SUMMARY_HEADERS: &[Header] = &[
    Header::Task,
    Header::Message,
    Header::Subject,
    Header::Question,
    Header::Reason,
];

/// What the line says about the message: its `task`, else `message`,
/// `subject`, `question` or `reason`, else the first non-blank body line (skipping the
/// generated preamble); escaped and capped at `MAX_SUMMARY` characters.
pub fn summary(msg: &Message) -> String {
    let from_header = SUMMARY_HEADERS
        .iter()
        .filter_map(|h| msg.get(*h))
        .find(|v| !v.trim().is_empty());
    let text = match from_header {
        Some(v) => v,
        None => msg
            .body
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && *l != PREAMBLE)
            .unwrap_or(""),
    };
    let mut cut: String = text.chars().take(MAX_SUMMARY).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    crate::text::escape(&cut)
}

/// `[FROM -> TO] <type> <summary>`: the part after the time, shared by the
/// transcript and forum.log.
pub fn speech(msg: &Message) -> String {
    let h = |n: Header| crate::text::escape(msg.get(n).unwrap_or("?"));
    let s = summary(msg);
    let mut line = format!(
        "[{} -> {}] {}",
        h(Header::From),
        h(Header::To),
        h(Header::Type)
    );
    if !s.is_empty() {
        line.push(' ');
        line.push_str(&s);
    }
    line
}

/// When a message was said: `created_at`, else the second in its id.
pub fn when(msg: &Message) -> Option<Instant> {
    msg.get(names::CREATED_AT)
        .and_then(clock::parse)
        .or_else(|| crate::protocol::grammar::id_time(msg.id().unwrap_or("")))
}

/// `2026-06-15 14:05:31` (UTC), or `????-??-?? ??:??:??` without a time.
pub fn full_time(t: Option<Instant>) -> String {
    match t {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S").to_string(),
        None => "????-??-?? ??:??:??".to_string(),
    }
}

/// One `.swarmforge/forum.log` line for a delivered message, ending in `\n`:
/// `[2026-06-15 14:05:31] [coder -> cleaner] git_handoff fix-login`.
/// The time is the message's `created_at` (UTC), the same as its transcript
/// line, so both logs agree on every message.
pub fn forum_line(msg: &Message) -> String {
    format!("[{}] {}\n", full_time(when(msg)), speech(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> Message {
        Message::parse(text).unwrap()
    }

    #[test]
    fn forum_line_has_the_full_date() {
        let m = msg("id: 20260615T140531Z_000001_from_coder\nfrom: coder\nto: cleaner\n\
                     type: git_handoff\ntask: fix-login\ncreated_at: 2026-06-15T14:05:31.123456Z\n\nx\n");
        assert_eq!(
            forum_line(&m),
            "[2026-06-15 14:05:31] [coder -> cleaner] git_handoff fix-login\n"
        );
    }

    #[test]
    fn summary_falls_back_to_the_body_and_escapes() {
        let m = msg("from: a\nto: all\ntype: post\n\nRe-read your role and constitution.\n\n\tfirst\\line\tend\nsecond\n");
        assert_eq!(summary(&m), "first\\\\line\\tend");
        let long = format!("type: note\nmessage: {}\n\n", "é".repeat(250));
        let s = summary(&msg(&long));
        assert_eq!(s.chars().count(), MAX_SUMMARY + 1);
        assert!(s.ends_with('…'));
        let m = msg("id: 20260615T140531Z_000001_from_a\n\n");
        assert_eq!(forum_line(&m), "[2026-06-15 14:05:31] [? -> ?] ?\n");
    }
}
