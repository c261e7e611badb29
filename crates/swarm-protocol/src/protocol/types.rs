//! The message types and what each may carry: the one table that the draft
//! validator, the daemon's re-check, the help text and `allowed_types` read.

use crate::protocol::grammar::MessageType;
use crate::protocol::header::Header;

/// Headers only the tools write (docs/protocol.md §5.4, plus the stamped
/// collaboration headers); a draft that sets one is refused.
pub const RESERVED: &[&str] = &[
    "id",
    "from",
    "role",
    "recipient",
    "created_at",
    "enqueued_at",
    "dequeued_at",
    "completed_at",
    "hop",
    "mentions",
    "session",
];

/// Longest `task` / `message` value (UTF-16 units, as SwarmForge counts).
pub const MAX_LINE_CHARS: usize = 80;

/// Most recipients one message may name (keeps file names under NAME_MAX).
pub const MAX_RECIPIENTS: usize = 32;

/// Longest `subject` (post, digest).
pub const MAX_SUBJECT_CHARS: usize = 120;
/// Longest clarify `question`.
pub const MAX_QUESTION_CHARS: usize = 500;
/// Longest close `reason`.
pub const MAX_REASON_CHARS: usize = 200;
/// Longest clarify option (one body line).
pub const MAX_OPTION_CHARS: usize = 200;
/// Most options one clarify may offer.
pub const MAX_OPTIONS: usize = 20;
/// Most `artifact` headers one message may carry.
pub const MAX_ARTIFACTS: usize = 32;
/// Largest body of a post, clarify, answer, close or digest request.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// Largest digest body.
pub const MAX_DIGEST_BYTES: usize = 4 * 1024;

/// Draft headers every type has.
const BASE: &[&str] = &["type", "to", "priority"];

/// Draft headers any type may carry (docs/message-model.md, "Headers any type
/// may carry").
pub const COMMON: &[&str] = &[
    "in_reply_to",
    "thread",
    "cc",
    "wake",
    "artifact",
    "discussion",
];

/// The rules of one message type.
#[derive(Debug)]
pub struct TypeRule {
    pub kind: MessageType,
    /// `kind.name()`, kept as a field for the many places that print it.
    pub name: &'static str,
    /// Draft headers of this type besides `type`, `to`, `priority` and `COMMON`.
    pub own: &'static [&'static str],
    /// Whether the draft may carry a body after the blank line.
    pub body: bool,
    /// Largest body in bytes (types with a body).
    pub max_body: usize,
    /// Whether a role may send it (`digest_request` is the daemon's own).
    pub sendable: bool,
}

impl TypeRule {
    /// Whether a draft of this type may write `field`.
    pub fn allows(&self, field: &str) -> bool {
        BASE.contains(&field) || self.own.contains(&field) || COMMON.contains(&field)
    }

    /// [`TypeRule::own`] as [`Header`]s (every name there is one).
    pub fn own_headers(&self) -> impl Iterator<Item = Header> + '_ {
        self.own.iter().filter_map(|n| Header::parse(n))
    }
}

pub const GIT_HANDOFF: TypeRule = TypeRule {
    kind: MessageType::GitHandoff,
    name: MessageType::GitHandoff.name(),
    own: &["task", "commit"],
    body: false,
    max_body: 0,
    sendable: true,
};

pub const NOTE: TypeRule = TypeRule {
    kind: MessageType::Note,
    name: MessageType::Note.name(),
    own: &["message"],
    body: false,
    max_body: 0,
    sendable: true,
};

pub const POST: TypeRule = TypeRule {
    kind: MessageType::Post,
    name: MessageType::Post.name(),
    own: &["subject"],
    body: true,
    max_body: MAX_BODY_BYTES,
    sendable: true,
};

pub const CLARIFY: TypeRule = TypeRule {
    kind: MessageType::Clarify,
    name: MessageType::Clarify.name(),
    own: &["question", "allow_multiple", "allow_custom"],
    body: true,
    max_body: MAX_BODY_BYTES,
    sendable: true,
};

pub const ANSWER: TypeRule = TypeRule {
    kind: MessageType::Answer,
    name: MessageType::Answer.name(),
    own: &["choices"],
    body: true,
    max_body: MAX_BODY_BYTES,
    sendable: true,
};

pub const DIGEST_REQUEST: TypeRule = TypeRule {
    kind: MessageType::DigestRequest,
    name: MessageType::DigestRequest.name(),
    own: &[],
    body: true,
    max_body: MAX_BODY_BYTES,
    sendable: false,
};

pub const DIGEST: TypeRule = TypeRule {
    kind: MessageType::Digest,
    name: MessageType::Digest.name(),
    own: &["subject"],
    body: true,
    max_body: MAX_DIGEST_BYTES,
    sendable: true,
};

pub const CLOSE: TypeRule = TypeRule {
    kind: MessageType::Close,
    name: MessageType::Close.name(),
    own: &["reason"],
    body: true,
    max_body: MAX_BODY_BYTES,
    sendable: true,
};

pub const REACT: TypeRule = TypeRule {
    kind: MessageType::React,
    name: MessageType::React.name(),
    own: &["reaction"],
    body: false,
    max_body: 0,
    sendable: true,
};

pub const SEAT_REQUEST: TypeRule = TypeRule {
    kind: MessageType::SeatRequest,
    name: MessageType::SeatRequest.name(),
    own: &["seat", "seat_role", "definition", "reason"],
    body: false,
    max_body: 0,
    sendable: true,
};

/// What a `seat_request` asks for.
pub const SEAT_ACTIONS: &[&str] = &["add", "remove"];

/// The reactions a `react` may carry (the group chat's set), in the order
/// messages list them.
pub const REACTIONS: &[&str] = &["thumbs_up", "thumbs_down", "fire", "check", "x", "thinking"];

/// Every type, in the order the docs and messages list them.
pub const TYPES: &[&TypeRule] = &[
    &GIT_HANDOFF,
    &NOTE,
    &POST,
    &CLARIFY,
    &ANSWER,
    &DIGEST_REQUEST,
    &DIGEST,
    &CLOSE,
    &REACT,
    &SEAT_REQUEST,
];

pub fn type_rule(name: &str) -> Option<&'static TypeRule> {
    MessageType::parse(name).map(rule_of)
}

pub fn rule_of(kind: MessageType) -> &'static TypeRule {
    TYPES
        .iter()
        .copied()
        .find(|t| t.kind == kind)
        .expect("every type has a rule")
}

/// Every header a draft may write for some type.
pub fn known_draft_field(name: &str) -> bool {
    BASE.contains(&name) || COMMON.contains(&name) || TYPES.iter().any(|t| t.own.contains(&name))
}

/// Every type a role may send, in `TYPES` order (the default `allowed_types`).
pub fn sendable_types() -> Vec<&'static str> {
    TYPES
        .iter()
        .filter(|t| t.sendable)
        .map(|t| t.name)
        .collect()
}

/// What a role may send unless swarm.yaml says otherwise: every sendable
/// type but `seat_request`, which only the roles `lineup.may_change` names
/// get (docs/lineups.md).
pub fn default_types() -> Vec<&'static str> {
    sendable_types()
        .into_iter()
        .filter(|t| *t != SEAT_REQUEST.name)
        .collect()
}

/// The types a role may send: its configured `allowed_types` (unknown and
/// daemon-only names never count), or the default ones.
pub fn allowed_for(configured: Option<&[String]>) -> Vec<&'static str> {
    match configured {
        None => default_types(),
        Some(list) => TYPES
            .iter()
            .filter(|t| t.sendable && list.iter().any(|n| n == t.name))
            .map(|t| t.name)
            .collect(),
    }
}

/// `git_handoff or note` in SwarmForge's words; longer lists as
/// `a, b, c or d`.
pub fn list_in_words(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.to_string(),
        None => String::new(),
    }
}

/// The default types in words (the message for a role with the default list).
pub fn type_list() -> String {
    list_in_words(&default_types())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_of_the_table_is_a_header() {
        let own = TYPES.iter().flat_map(|t| t.own.iter());
        for n in RESERVED.iter().chain(BASE).chain(COMMON).chain(own) {
            assert!(Header::parse(n).is_some(), "{n}");
        }
    }
}
