//! What a message is found by: its words (lower-cased runs of letters and
//! digits) and the filter keys (sender, recipients, type, id), each reduced
//! to a 64-bit hash. The index stores only hashes, so no query text ever
//! becomes a path or a file name (docs/search.md).

use std::collections::HashMap;

use crate::protocol::header::{names, Message};

/// Longest word kept, in characters (longer runs are hashes, keys, noise).
pub const MAX_WORD_CHARS: usize = 64;

/// Headers that are times or routing stamps, never searched as words.
const SKIPPED: &[&str] = &[
    names::ID,
    names::CREATED_AT,
    names::ENQUEUED_AT,
    "dequeued_at",
    "completed_at",
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
    body.lines()
        .filter(|l| l.trim() != crate::protocol::line::PREAMBLE)
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
}

/// Everything a message is found by: its words (header values but stamps,
/// and the body), then its keys (counted once, not in its length).
pub fn of_message(msg: &Message, recipients: &[String]) -> Terms {
    let mut counts: HashMap<u64, u32> = HashMap::new();
    let mut len: u32 = 0;
    let texts = msg
        .headers
        .iter()
        .filter(|(n, _)| !SKIPPED.contains(&n.as_str()))
        .map(|(_, v)| v.as_str())
        .chain(said(&msg.body));
    for t in texts {
        for w in words(t) {
            *counts.entry(hash(w.as_bytes())).or_default() += 1;
            len = len.saturating_add(1);
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
    Terms { counts, len }
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
    fn keys_never_collide_with_words() {
        assert_ne!(from_key("coder"), hash(b"coder"));
        assert_ne!(from_key("coder"), to_key("coder"));
    }
}
