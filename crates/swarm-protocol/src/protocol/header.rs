//! The one header parser and renderer (docs/protocol.md §5.1), used by every
//! tool.
//!
//! A handoff file is `name: value` lines, one empty line, then the body. The
//! parser is strict where SwarmForge's four parsers disagreed: a missing blank
//! line, a line without `": "`, a duplicate header (except `artifact`) or a
//! control character anywhere but newline/tab in the body makes the file
//! malformed. Rendering puts headers in the delivered order (docs/protocol.md
//! §5.2), then the rest sorted by name, and keeps the body byte for byte.

use crate::text::{body_control, escape, is_control};
use std::fmt;

/// Every header name the tools read or write, spelled once. Code outside
/// the protocol layer names a header through these (or through the typed
/// accessors of [`Message`]), never as a string literal, so a header's name
/// and its readers cannot drift apart.
pub mod names {
    pub const ID: &str = "id";
    pub const FROM: &str = "from";
    pub const TO: &str = "to";
    pub const CC: &str = "cc";
    pub const MENTIONS: &str = "mentions";
    /// The role a delivered copy is for (written by the daemon).
    pub const RECIPIENT: &str = "recipient";
    pub const PRIORITY: &str = "priority";
    pub const TYPE: &str = "type";
    pub const ROLE: &str = "role";
    pub const TASK: &str = "task";
    pub const COMMIT: &str = "commit";
    pub const MESSAGE: &str = "message";
    pub const SUBJECT: &str = "subject";
    pub const TITLE: &str = "title";
    pub const QUESTION: &str = "question";
    pub const CHOICES: &str = "choices";
    pub const REACTION: &str = "reaction";
    pub const IN_REPLY_TO: &str = "in_reply_to";
    pub const THREAD: &str = "thread";
    pub const SESSION: &str = "session";
    pub const DISCUSSION: &str = "discussion";
    pub const ARTIFACT: &str = "artifact";
    pub const HOP: &str = "hop";
    pub const WAKE: &str = "wake";
    /// Why a discussion was closed.
    pub const REASON: &str = "reason";
    /// Why an item failed (`swarm run-api`).
    pub const FAILED: &str = "failed";
    pub const CREATED_AT: &str = "created_at";
    pub const ENQUEUED_AT: &str = "enqueued_at";
    pub const DEQUEUED_AT: &str = "dequeued_at";
    pub const COMPLETED_AT: &str = "completed_at";
    /// The thread's W3C trace id (telemetry::trace).
    pub const TRACE_ID: &str = "trace_id";
}

/// Headers rendered first, in this order (docs/protocol.md §5.2).
pub const ORDER: &[&str] = &[
    names::ID,
    names::FROM,
    names::TO,
    names::RECIPIENT,
    names::PRIORITY,
    names::TYPE,
    names::ROLE,
    names::TASK,
    names::COMMIT,
    names::MESSAGE,
    names::CREATED_AT,
    names::ENQUEUED_AT,
    names::DEQUEUED_AT,
    names::COMPLETED_AT,
];

/// The one header that may repeat (docs/message-model.md, "Artifacts").
pub const REPEATABLE: &[&str] = &[names::ARTIFACT];

/// The life stamps of a copy: created by the sender, enqueued by the
/// daemon, dequeued and completed by the recipient's helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    Created,
    Enqueued,
    Dequeued,
    Completed,
}

impl Stamp {
    pub const fn header(self) -> &'static str {
        match self {
            Stamp::Created => names::CREATED_AT,
            Stamp::Enqueued => names::ENQUEUED_AT,
            Stamp::Dequeued => names::DEQUEUED_AT,
            Stamp::Completed => names::COMPLETED_AT,
        }
    }
}

/// Longest header name accepted.
pub const MAX_NAME: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    NotUtf8,
    NoBlankLine,
    NotAField(usize),
    BadName(usize, String),
    Duplicate(usize, String),
    ControlInValue(usize, String),
    ControlInBody(u32),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::NotUtf8 => write!(f, "malformed: not valid UTF-8"),
            ParseError::NoBlankLine => write!(f, "malformed: no blank line after the headers"),
            ParseError::NotAField(l) => write!(f, "malformed: line {l}: expected 'field: value'"),
            ParseError::BadName(l, n) => write!(
                f,
                "malformed: line {l}: invalid header name '{}'",
                escape(n)
            ),
            ParseError::Duplicate(l, n) => {
                write!(f, "malformed: line {l}: duplicate header '{n}'")
            }
            ParseError::ControlInValue(l, n) => write!(
                f,
                "malformed: line {l}: header '{n}' contains a control character"
            ),
            ParseError::ControlInBody(c) => {
                write!(f, "malformed: body contains control character U+{c:04X}")
            }
        }
    }
}

impl std::error::Error for ParseError {}

/// `[a-z][a-z0-9_-]*`: the hyphen because today's SwarmForge writes
/// `non-forwarding` (docs/swarmforge-compat.md §4).
fn valid_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// A parsed handoff file: ordered headers and the verbatim body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// The typed readers of the headers every tool asks about, for each type
/// holding headers (a [`Message`], a `Draft`): one spelling of each name.
macro_rules! header_accessors {
    ($t:ty) => {
        impl $t {
            /// The `type:` header as written.
            pub fn type_name(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::TYPE)
            }

            pub fn id(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::ID)
            }

            /// The `from:` header: the sending role (or `handoffd`).
            pub fn sender(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::FROM)
            }

            /// The `to:` header as written (a comma list, or `all`); see
            /// `grammar::recipients` for the roles it names.
            pub fn to(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::TO)
            }

            /// The roles of the `cc:` header.
            pub fn cc(&self) -> Vec<&str> {
                $crate::protocol::grammar::role_list(self.get($crate::protocol::header::names::CC))
            }

            /// The role a delivered copy is for.
            pub fn recipient(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::RECIPIENT)
            }

            pub fn priority(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::PRIORITY)
            }

            pub fn in_reply_to(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::IN_REPLY_TO)
            }

            pub fn thread(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::THREAD)
            }

            pub fn session(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::SESSION)
            }

            pub fn discussion(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::DISCUSSION)
            }

            /// The thread's W3C trace id, as written (telemetry::trace).
            pub fn trace_id(&self) -> Option<&str> {
                self.get($crate::protocol::header::names::TRACE_ID)
            }

            /// One of the life stamps, as written.
            pub fn stamp(&self, s: $crate::protocol::header::Stamp) -> Option<&str> {
                self.get(s.header())
            }
        }
    };
}
pub(crate) use header_accessors;

header_accessors!(Message);

impl Message {
    pub fn parse_bytes(bytes: &[u8]) -> Result<Message, ParseError> {
        let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
        Message::parse(text)
    }

    pub fn parse(text: &str) -> Result<Message, ParseError> {
        let mut headers: Vec<(String, String)> = Vec::new();
        let mut rest = text;
        let mut line_no = 0;
        loop {
            line_no += 1;
            let Some(nl) = rest.find('\n') else {
                return Err(ParseError::NoBlankLine);
            };
            let line = &rest[..nl];
            rest = &rest[nl + 1..];
            if line.is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(": ") else {
                // A line "name:" with nothing after it carries an empty value.
                if let Some(name) = line.strip_suffix(':') {
                    if valid_name(name) {
                        push_header(&mut headers, line_no, name, "")?;
                        continue;
                    }
                }
                return Err(ParseError::NotAField(line_no));
            };
            if !valid_name(name) {
                return Err(ParseError::BadName(line_no, name.to_string()));
            }
            if value.chars().any(is_control) {
                return Err(ParseError::ControlInValue(line_no, name.to_string()));
            }
            push_header(&mut headers, line_no, name, value)?;
        }
        if let Some(c) = body_control(rest) {
            return Err(ParseError::ControlInBody(c as u32));
        }
        Ok(Message {
            headers,
            body: rest.to_string(),
        })
    }

    /// The `type:` header as a known type (`None` when absent or unknown).
    pub fn kind(&self) -> Option<crate::protocol::grammar::MessageType> {
        self.type_name()
            .and_then(crate::protocol::grammar::MessageType::parse)
    }

    pub fn set_stamp(&mut self, s: Stamp, value: impl Into<String>) {
        self.set(s.header(), value)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Sets a single-valued header, replacing any existing value.
    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        let value = value.into();
        if let Some(slot) = self.headers.iter_mut().find(|(n, _)| n == name) {
            slot.1 = value;
            self.headers.retain({
                let mut seen = false;
                move |(n, _)| {
                    if n != name {
                        return true;
                    }
                    let keep = !seen;
                    seen = true;
                    keep
                }
            });
        } else {
            self.headers.push((name.to_string(), value));
        }
    }

    /// Adds a value (for the repeatable `artifact`).
    pub fn push(&mut self, name: &str, value: impl Into<String>) {
        self.headers.push((name.to_string(), value.into()));
    }

    pub fn remove(&mut self, name: &str) {
        self.headers.retain(|(n, _)| n != name);
    }

    /// Renders in the order of docs/protocol.md §5.2, then other headers sorted
    /// by name (stable, so repeated `artifact` values keep their order), a
    /// blank line, the body.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(256 + self.body.len());
        for key in ORDER {
            for (n, v) in self.headers.iter().filter(|(n, _)| n == key) {
                line(&mut out, n, v);
            }
        }
        let mut others: Vec<&(String, String)> = self
            .headers
            .iter()
            .filter(|(n, _)| !ORDER.contains(&n.as_str()))
            .collect();
        others.sort_by(|a, b| a.0.cmp(&b.0));
        for (n, v) in others {
            line(&mut out, n, v);
        }
        out.push('\n');
        out.push_str(&self.body);
        out
    }
}

fn line(out: &mut String, n: &str, v: &str) {
    out.push_str(n);
    out.push_str(": ");
    out.push_str(v);
    out.push('\n');
}

fn push_header(
    headers: &mut Vec<(String, String)>,
    line_no: usize,
    name: &str,
    value: &str,
) -> Result<(), ParseError> {
    if !REPEATABLE.contains(&name) && headers.iter().any(|(n, _)| n == name) {
        return Err(ParseError::Duplicate(line_no, name.to_string()));
    }
    headers.push((name.to_string(), value.to_string()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_renders_in_d5_order() {
        let text = "task: t\nid: x\nfrom: a\nzeta: 1\nalpha: 2\n\nbody\n";
        let m = Message::parse(text).unwrap();
        assert_eq!(m.get("task"), Some("t"));
        assert_eq!(
            m.render(),
            "id: x\nfrom: a\ntask: t\nalpha: 2\nzeta: 1\n\nbody\n"
        );
    }

    #[test]
    fn refuses_ambiguous_files() {
        assert_eq!(Message::parse("a: 1\n"), Err(ParseError::NoBlankLine));
        assert_eq!(
            Message::parse("a: 1\na: 2\n\n"),
            Err(ParseError::Duplicate(2, "a".into()))
        );
        assert_eq!(Message::parse("a 1\n\n"), Err(ParseError::NotAField(1)));
        assert_eq!(
            Message::parse("a: x\ry\n\n"),
            Err(ParseError::ControlInValue(1, "a".into()))
        );
        assert_eq!(
            Message::parse("a: 1\n\n\x1b[2J"),
            Err(ParseError::ControlInBody(0x1b))
        );
        assert!(Message::parse("artifact: 1\nartifact: 2\n\n").is_ok());
    }

    #[test]
    fn set_replaces_or_appends() {
        let mut m = Message::parse("id: 1\n\nb").unwrap();
        m.set("dequeued_at", "t1");
        m.set("dequeued_at", "t2");
        assert_eq!(m.render(), "id: 1\ndequeued_at: t2\n\nb");
    }

    #[test]
    fn escape_keeps_one_line() {
        assert_eq!(escape("a\nb\x1b[31m\\"), "a\\nb\\e[31m\\\\");
        assert_eq!(escape("\u{85}"), "\\u{85}");
    }

    fn name() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9_]{0,12}"
    }

    fn value() -> impl Strategy<Value = String> {
        "[^\\x00-\\x1f\\x7f-\\x9f]{0,40}"
    }

    proptest! {
        #[test]
        fn render_parse_round_trip(
            pairs in proptest::collection::btree_map(name(), value(), 0..10),
            body in "[^\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]{0,200}",
        ) {
            let m = Message { headers: pairs.into_iter().collect(), body };
            let rendered = m.render();
            let back = Message::parse(&rendered).unwrap();
            prop_assert_eq!(back.render(), rendered);
            for (n, v) in &m.headers {
                prop_assert_eq!(back.get(n), Some(v.as_str()));
            }
            prop_assert_eq!(back.body, m.body);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = Message::parse_bytes(&bytes);
        }
    }
}
