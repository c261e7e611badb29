//! Reading header values: yes/no flags, a clarify's options and choices, the
//! hop count, mentions, stamped artifacts, lengths as SwarmForge counts them.

use crate::protocol::grammar;
use crate::protocol::header::names;
use crate::protocol::header::{Header, Message};

/// Header lookup used by the validator: a draft (first value wins) or a parsed file.
pub trait Fields {
    fn field(&self, name: &str) -> Option<&str>;
    /// Field names in their original order.
    fn names(&self) -> Vec<&str>;
    /// The body when it is known (a draft, a whole file); body rules are
    /// skipped without it.
    fn body(&self) -> Option<&str> {
        None
    }
}

impl Fields for Vec<(String, String)> {
    fn field(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn names(&self) -> Vec<&str> {
        self.iter().map(|(n, _)| n.as_str()).collect()
    }
}

impl Fields for Message {
    fn field(&self, name: &str) -> Option<&str> {
        self.get_named(name)
    }
    fn names(&self) -> Vec<&str> {
        self.headers.iter().map(|(n, _)| n.as_str()).collect()
    }
    fn body(&self) -> Option<&str> {
        Some(&self.body)
    }
}

pub fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// UTF-16 length, as SwarmForge measures header values.
pub fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

pub fn valid_priority(p: &str) -> bool {
    p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit())
}

/// `yes` / `no` headers; `None` for anything else.
pub fn yes_no(v: &str) -> Option<bool> {
    match v {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

/// A clarify's `allow_multiple` (default no) or `allow_custom` (default yes).
pub fn flag(f: &impl Fields, h: Header) -> bool {
    let default = h == Header::AllowCustom;
    f.field(h.as_str()).and_then(yes_no).unwrap_or(default)
}

/// A clarify's options: the non-blank body lines, trimmed.
pub fn options(body: &str) -> Vec<&str> {
    body.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// An answer's `choices` (`1,3`): 1-based option numbers; `None` when malformed.
pub fn parse_choices(v: &str) -> Option<Vec<usize>> {
    v.split(',')
        .map(|c| {
            let c = c.trim();
            if c.is_empty() || c.len() > 3 || !c.bytes().all(|b| b.is_ascii_digit()) {
                None
            } else {
                c.parse().ok()
            }
        })
        .collect()
}

/// A `hop` header that is not a number of at most nine digits (the repair:
/// leave `hop` to the helpers, which count it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Header 'hop' must be a number; got '{0}'.")]
pub struct BadHop(pub String);

/// The `hop` header: 0 when absent, `Err` with the message when malformed.
pub fn hop(f: &impl Fields) -> Result<u32, BadHop> {
    match f.field("hop") {
        None => Ok(0),
        Some(h) if !h.is_empty() && h.len() <= 9 && h.bytes().all(|b| b.is_ascii_digit()) => {
            h.parse().map_err(|_| BadHop(h.to_string()))
        }
        Some(h) => Err(BadHop(h.to_string())),
    }
}

/// Whether delivering `msg` to `recipient` should wake it: not with
/// `wake: no`, never for a `cc` copy, and a `react` only with `wake: yes`
/// (a reaction is an annotation, not work; human roles are never woken
/// either, that is the daemon's check).
pub fn wakes(msg: &Message, recipient: &str) -> bool {
    let default = msg.kind() != Some(grammar::MessageType::React);
    let asked = match msg.get(names::WAKE) {
        Some("no") => false,
        Some("yes") => true,
        _ => default,
    };
    asked && !grammar::role_list(msg.get(names::CC)).contains(&recipient)
}

/// `@role` words in `texts` naming known roles other than `sender`, in order
/// of first appearance. A word starts after a character that is not a
/// letter, digit, `-`, `_` or `.` (so `me@example.com` mentions nobody) and may be
/// followed by punctuation (`@qa,`, `@qa.`).
pub fn mentions(texts: &[&str], sender: &str, is_role: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for text in texts {
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let boundary = i == 0 || {
                let p = chars[i - 1];
                !(p.is_alphanumeric() || matches!(p, '-' | '_' | '.' | '@'))
            };
            if chars[i] != '@' || !boundary {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '-') {
                j += 1;
            }
            let mut word: String = chars[i + 1..j].iter().collect();
            while word.ends_with('-') {
                word.pop();
            }
            if !word.is_empty() && word != sender && is_role(&word) && !out.contains(&word) {
                out.push(word);
            }
            i = j.max(i + 1);
        }
    }
    out
}

/// A stamped `artifact: <sha256> <size> <path>` value, split.
pub fn parse_artifact(v: &str) -> Option<(&str, u64, &str)> {
    let (sha, rest) = v.split_once(' ')?;
    let (size, path) = rest.split_once(' ')?;
    let ok = sha.len() == 64
        && sha
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        && !size.is_empty()
        && size.bytes().all(|b| b.is_ascii_digit())
        && !path.is_empty();
    if !ok {
        return None;
    }
    Some((sha, size.parse().ok()?, path))
}
