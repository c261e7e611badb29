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

/// Declares [`Header`], the closed set of header names, each spelled once.
macro_rules! header_set {
    ($($(#[$doc:meta])* $v:ident = $s:literal,)*) => {
        /// Every header name the tools read or write, spelled once: the
        /// header set. [`Message`] and `Draft` take a `Header`, not a string,
        /// so code outside the protocol crate cannot name a header by a
        /// string literal, and a header's name and its readers cannot drift
        /// apart. A name that comes from a file or an agent becomes a
        /// `Header` through [`Header::parse`] (`None`: a header no tool
        /// knows, which a file may carry and rendering keeps).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Header {
            $($(#[$doc])* $v,)*
        }

        impl Header {
            /// Every header, in declaration order.
            pub const ALL: &'static [Header] = &[$(Header::$v,)*];

            /// The name as written in a file.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Header::$v => $s,)*
                }
            }
        }
    };
}

header_set! {
    Id = "id",
    From = "from",
    To = "to",
    Cc = "cc",
    Mentions = "mentions",
    /// The role a delivered copy is for (written by the daemon).
    Recipient = "recipient",
    Priority = "priority",
    Type = "type",
    Role = "role",
    Task = "task",
    Commit = "commit",
    Message = "message",
    Subject = "subject",
    Title = "title",
    Question = "question",
    /// A clarify's: whether several options may be chosen.
    AllowMultiple = "allow_multiple",
    /// A clarify's: whether an answer of one's own is allowed.
    AllowCustom = "allow_custom",
    Choices = "choices",
    Reaction = "reaction",
    InReplyTo = "in_reply_to",
    Thread = "thread",
    Session = "session",
    Discussion = "discussion",
    Artifact = "artifact",
    Hop = "hop",
    Wake = "wake",
    /// Why a discussion was closed, or why a seat is asked for.
    Reason = "reason",
    /// Why an item failed (`swarm run-api`).
    Failed = "failed",
    CreatedAt = "created_at",
    EnqueuedAt = "enqueued_at",
    DequeuedAt = "dequeued_at",
    CompletedAt = "completed_at",
    /// The thread's W3C trace id (telemetry::trace).
    TraceId = "trace_id",
    /// The task a held handoff belongs to, as upstream writes it (before
    /// `task`; rejected_tasks).
    TaskId = "task_id",
    /// A held handoff's base commit (rejected_tasks).
    TaskBaseCommit = "task_base_commit",
    /// The header naming a card's type (upstream's New Task note carries it).
    CardType = "card_type",
    /// How a card's `git_handoff` moves it (upstream's reserved header).
    DeliveryKind = "delivery_kind",
    /// The cards one `git_handoff` carries besides its `task`, as an EDN
    /// vector (`["a" "b"]`): a batch role's one result for several cards.
    BatchTaskIds = "batch_task_ids",
    /// The header marking a merge-only copy (upstream's name, hyphen and
    /// all: docs/swarmforge-compat.md §4).
    NonForwarding = "non-forwarding",
    /// A seat request's seat (`add` or `remove`).
    Seat = "seat",
    /// A seat request's role.
    SeatRole = "seat_role",
    /// A seat request's agent definition.
    Definition = "definition",
}

impl Header {
    /// The known header of this name; `None` for one no tool knows.
    pub fn parse(name: &str) -> Option<Header> {
        Header::ALL.iter().copied().find(|h| h.as_str() == name)
    }
}

impl fmt::Display for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for Header {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for Header {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Header> for str {
    fn eq(&self, other: &Header) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Header> for String {
    fn eq(&self, other: &Header) -> bool {
        self == other.as_str()
    }
}

/// The headers of [`Header`] under the names the code has always used
/// (`names::IN_REPLY_TO` is `Header::InReplyTo`).
pub mod names {
    use super::Header;
    pub const ID: Header = Header::Id;
    pub const FROM: Header = Header::From;
    pub const TO: Header = Header::To;
    pub const CC: Header = Header::Cc;
    pub const MENTIONS: Header = Header::Mentions;
    pub const RECIPIENT: Header = Header::Recipient;
    pub const PRIORITY: Header = Header::Priority;
    pub const TYPE: Header = Header::Type;
    pub const ROLE: Header = Header::Role;
    pub const TASK: Header = Header::Task;
    pub const COMMIT: Header = Header::Commit;
    pub const MESSAGE: Header = Header::Message;
    pub const SUBJECT: Header = Header::Subject;
    pub const TITLE: Header = Header::Title;
    pub const QUESTION: Header = Header::Question;
    pub const ALLOW_MULTIPLE: Header = Header::AllowMultiple;
    pub const ALLOW_CUSTOM: Header = Header::AllowCustom;
    pub const CHOICES: Header = Header::Choices;
    pub const REACTION: Header = Header::Reaction;
    pub const IN_REPLY_TO: Header = Header::InReplyTo;
    pub const THREAD: Header = Header::Thread;
    pub const SESSION: Header = Header::Session;
    pub const DISCUSSION: Header = Header::Discussion;
    pub const ARTIFACT: Header = Header::Artifact;
    pub const HOP: Header = Header::Hop;
    pub const WAKE: Header = Header::Wake;
    pub const REASON: Header = Header::Reason;
    pub const FAILED: Header = Header::Failed;
    pub const CREATED_AT: Header = Header::CreatedAt;
    pub const ENQUEUED_AT: Header = Header::EnqueuedAt;
    pub const DEQUEUED_AT: Header = Header::DequeuedAt;
    pub const COMPLETED_AT: Header = Header::CompletedAt;
    pub const TRACE_ID: Header = Header::TraceId;
    pub const TASK_ID: Header = Header::TaskId;
    pub const TASK_BASE_COMMIT: Header = Header::TaskBaseCommit;
    pub const CARD_TYPE: Header = Header::CardType;
    pub const DELIVERY_KIND: Header = Header::DeliveryKind;
    pub const BATCH_TASK_IDS: Header = Header::BatchTaskIds;
    pub const NON_FORWARDING: Header = Header::NonForwarding;
    pub const SEAT: Header = Header::Seat;
    pub const SEAT_ROLE: Header = Header::SeatRole;
    pub const DEFINITION: Header = Header::Definition;
}

/// Headers rendered first, in this order (docs/protocol.md §5.2).
pub const ORDER: &[Header] = &[
    Header::Id,
    Header::From,
    Header::To,
    Header::Recipient,
    Header::Priority,
    Header::Type,
    Header::Role,
    Header::Task,
    Header::Commit,
    Header::Message,
    Header::CreatedAt,
    Header::EnqueuedAt,
    Header::DequeuedAt,
    Header::CompletedAt,
];

/// The one header that may repeat (docs/message-model.md, "Artifacts").
pub const REPEATABLE: &[Header] = &[Header::Artifact];

/// Whether a header of this name may repeat.
pub fn repeatable(name: &str) -> bool {
    REPEATABLE.iter().any(|h| h.as_str() == name)
}

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
    pub const fn header(self) -> Header {
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

    pub fn get(&self, h: Header) -> Option<&str> {
        self.get_named(h.as_str())
    }

    /// The first value of a header named by data: a name read from a file
    /// or given by an agent, known to the tools or not, or a key of a store
    /// of its own that borrows this format (an ingest cursor, a forum
    /// record). Never a mail header the code knows: that is a [`Header`]
    /// (scripts/protocol-literals.sh counts the calls outside this crate).
    pub fn get_named(&self, name: impl AsRef<str>) -> Option<&str> {
        let name = name.as_ref();
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn get_all(&self, h: Header) -> impl Iterator<Item = &str> + '_ {
        self.headers
            .iter()
            .filter(move |(n, _)| n == h.as_str())
            .map(|(_, v)| v.as_str())
    }

    /// Sets a single-valued header, replacing any existing value.
    pub fn set(&mut self, h: Header, value: impl Into<String>) {
        self.set_name(h.as_str(), value.into())
    }

    fn set_name(&mut self, name: &str, value: String) {
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

    /// [`Message::set`] for a header named by data (see
    /// [`Message::get_named`]).
    pub fn set_named(&mut self, name: impl AsRef<str>, value: impl Into<String>) {
        self.set_name(name.as_ref(), value.into())
    }

    /// [`Message::push`] for a header named by data (see
    /// [`Message::get_named`]).
    pub fn push_named(&mut self, name: impl AsRef<str>, value: impl Into<String>) {
        self.headers.push((name.as_ref().to_string(), value.into()));
    }

    /// Adds a value (for the repeatable `artifact`).
    pub fn push(&mut self, h: Header, value: impl Into<String>) {
        self.headers.push((h.as_str().to_string(), value.into()));
    }

    pub fn remove(&mut self, h: Header) {
        self.headers.retain(|(n, _)| n != h.as_str());
    }

    /// Renders in the order of docs/protocol.md §5.2, then other headers sorted
    /// by name (stable, so repeated `artifact` values keep their order), a
    /// blank line, the body.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(256 + self.body.len());
        for key in ORDER {
            for (n, v) in self.headers.iter().filter(|(n, _)| n == key.as_str()) {
                line(&mut out, n, v);
            }
        }
        let mut others: Vec<&(String, String)> = self
            .headers
            .iter()
            .filter(|(n, _)| !ORDER.iter().any(|h| h.as_str() == n))
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
    if !repeatable(name) && headers.iter().any(|(n, _)| n == name) {
        return Err(ParseError::Duplicate(line_no, name.to_string()));
    }
    headers.push((name.to_string(), value.to_string()));
    Ok(())
}

#[cfg(test)]
mod tests;
