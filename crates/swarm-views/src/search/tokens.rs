//! What a message is found by: its words (lower-cased runs of letters and
//! digits) and the filter keys (sender, recipients, type, id), each reduced
//! to a 64-bit hash. The index stores only hashes, so no query text ever
//! becomes a path or a file name (docs/search.md).

use std::collections::HashMap;

use crate::protocol::header::{names, Header, Message};
use crate::protocol::line::PREAMBLE;

/// Longest word kept, in characters (longer runs are hashes, keys, noise).
pub const MAX_WORD_CHARS: usize = 64;

/// Headers that are times or routing stamps, never searched as words.
const SKIPPED: &[Header] = &[
    names::ID,
    names::CREATED_AT,
    names::ENQUEUED_AT,
    names::DEQUEUED_AT,
    names::COMPLETED_AT,
    names::PRIORITY,
    names::HOP,
    names::WAKE,
];

/// FNV-1a, 64 bits: stable across builds and hosts (the index outlives the
/// binary that wrote it).
pub fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The filter keys: a leading 0x01 keeps them apart from every word.
pub fn from_key(role: &str) -> u64 {
    hash(format!("\u{1}from:{role}").as_bytes())
}
pub fn to_key(role: &str) -> u64 {
    hash(format!("\u{1}to:{role}").as_bytes())
}
pub fn type_key(kind: &str) -> u64 {
    hash(format!("\u{1}type:{kind}").as_bytes())
}
pub fn id_key(id: &str) -> u64 {
    hash(format!("\u{1}id:{id}").as_bytes())
}

/// A body's lines but the preamble every message starts with.
pub fn said(body: &str) -> impl Iterator<Item = &str> {
    body.lines().filter(|l| l.trim() != PREAMBLE)
}

/// The words of `text`, lower-cased, in order.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && w.chars().count() <= MAX_WORD_CHARS)
        .map(str::to_lowercase)
}

/// Word hashes of a message with their counts, and its length in words.
pub struct Terms {
    pub counts: HashMap<u64, u32>,
    pub len: u32,
    /// Bytes of text the words were read from.
    pub bytes: u64,
    /// The text went on past the bound: the rest is not indexed.
    pub cut: bool,
}

/// The longest start of `t` of at most `n` bytes that ends on a character.
fn prefix(t: &str, n: usize) -> &str {
    let mut end = n.min(t.len());
    while !t.is_char_boundary(end) {
        end -= 1;
    }
    &t[..end]
}

/// Everything a message is found by: its words (header values but stamps,
/// and the body, read up to `max_bytes` of text in all: search/bounds.rs),
/// then its keys (counted once, not in its length).
pub fn of_message(msg: &Message, recipients: &[String], max_bytes: u64) -> Terms {
    let mut counts: HashMap<u64, u32> = HashMap::new();
    let mut len: u32 = 0;
    let mut bytes: u64 = 0;
    let mut cut = false;
    let texts = msg
        .headers
        .iter()
        .filter(|(n, _)| !SKIPPED.iter().any(|h| h == n.as_str()))
        .map(|(_, v)| v.as_str())
        .chain(said(&msg.body));
    for t in texts {
        // Each text counts its separator (a line end), so many short
        // lines cannot slip past the bound.
        let room = max_bytes.saturating_sub(bytes);
        let t = if t.len() as u64 + 1 > room {
            cut = true;
            prefix(t, room as usize)
        } else {
            t
        };
        bytes += t.len() as u64 + 1;
        for w in words(t) {
            *counts.entry(hash(w.as_bytes())).or_default() += 1;
            len = len.saturating_add(1);
        }
        if cut {
            break;
        }
    }
    let mut keys = Vec::new();
    if let Some(f) = msg.sender() {
        keys.push(from_key(f));
    }
    keys.extend(recipients.iter().map(|r| to_key(r)));
    if let Some(k) = msg.type_name() {
        keys.push(type_key(k));
    }
    if let Some(id) = msg.id() {
        keys.push(id_key(id));
    }
    for k in keys {
        counts.insert(k, 1);
    }
    Terms {
        counts,
        len,
        bytes: bytes.min(max_bytes),
        cut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lowercased_runs_of_letters_and_digits() {
        let w: Vec<String> = words("Fix the Parser: v2_beta, ÜBER-fast!").collect();
        assert_eq!(w, ["fix", "the", "parser", "v2", "beta", "über", "fast"]);
    }

    #[test]
    fn a_message_is_read_up_to_its_bound() {
        let text = "type: note\nto: b\nmessage: alpha\n\nbeta gamma delta\népsilon zeta\n";
        let msg = crate::protocol::header::Message::parse(text).unwrap();
        let all = of_message(&msg, &[], 1 << 20);
        assert!(!all.cut);
        let some = of_message(&msg, &[], 24);
        assert!(some.cut && some.bytes <= 24, "{}", some.bytes);
        assert!(some.len < all.len && some.len > 0);
        assert!(!some.counts.contains_key(&hash("zeta".as_bytes())));
    }

    #[test]
    fn keys_never_collide_with_words() {
        assert_ne!(from_key("coder"), hash(b"coder"));
        assert_ne!(from_key("coder"), to_key("coder"));
    }
}
