//! What a reply is sent as and says: its type, recipient and subject
//! chosen from the item (`ReplyPlan`), and the model's text made fit for a
//! draft that passes the same validation as a person's. The invariant: the
//! runner never sends a text the draft rules refuse; it says why instead.

use crate::agent::queue::Item;
use crate::protocol::types;

use super::NOTE_MAX_CHARS;

/// What a reply is sent as.
#[derive(Debug)]
pub(super) struct ReplyPlan {
    pub(super) ty: &'static str,
    pub(super) to: String,
    pub(super) priority: String,
    pub(super) discussion: Option<String>,
    pub(super) subject: Option<String>,
}

pub(super) fn kind_name(item: &Item) -> &str {
    item.msg.type_name().unwrap_or("?")
}

/// The model's text made fit for a draft: CRLF to LF, other control
/// characters (but tab) dropped, trimmed.
pub fn clean(answer: &str) -> String {
    answer
        .replace("\r\n", "\n")
        .chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect::<String>()
        .trim()
        .to_string()
}

/// `s` cut to at most `max` bytes on a character boundary.
pub(super) fn cut_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A model's answer with nothing left to send once cleaned (the item is
/// finished `--failed` with this reason).
#[derive(Debug, thiserror::Error)]
#[error("the model's answer was empty")]
pub(super) struct EmptyAnswer;

/// The draft for `answer` sent as `plan`. A long answer is cut to the
/// type's limit (a body's bytes, a note's one line of 80 characters).
pub(super) fn draft_text(
    plan: &ReplyPlan,
    answer: &str,
) -> std::result::Result<String, EmptyAnswer> {
    let text = clean(answer);
    if text.is_empty() {
        return Err(EmptyAnswer);
    }
    let mut d = format!(
        "type: {}\nto: {}\npriority: {}\n",
        plan.ty, plan.to, plan.priority
    );
    if let Some(id) = &plan.discussion {
        d.push_str(&format!("discussion: {id}\n"));
    }
    if let Some(s) = &plan.subject {
        d.push_str(&format!("subject: {s}\n"));
    }
    if plan.ty == types::NOTE.name {
        let line = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        // Counted in UTF-16 units, as the note rule (SwarmForge's Java) counts.
        let units = |s: &str| s.encode_utf16().count();
        let mut msg = line.to_string();
        if units(line) > NOTE_MAX_CHARS {
            msg.clear();
            for c in line.chars() {
                if units(&msg) + c.len_utf16() > NOTE_MAX_CHARS - 1 {
                    break;
                }
                msg.push(c);
            }
            msg.push('…');
        }
        d.push_str(&format!("message: {msg}\n"));
    } else {
        let max = types::type_rule(plan.ty).map_or(4096, |r| r.max_body);
        // Room for the newline the draft parser adds.
        d.push('\n');
        d.push_str(cut_bytes(&text, max.saturating_sub(1)));
        d.push('\n');
    }
    Ok(d)
}
