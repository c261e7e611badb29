//! The protocol's grammar (docs/protocol.md §4): role names, message
//! ids, queue file names, batch folders, recipients and message types. Every
//! other module builds and parses these through here, so the shapes are
//! written down once.

use chrono::{DateTime, Utc};

use crate::protocol::clock;

/// Longest role name accepted (keeps file names under NAME_MAX).
pub const MAX_ROLE: usize = 64;

/// The daemon's own sender name (digest requests come `from: handoffd`).
pub const DAEMON: &str = "handoffd";

/// The `to` value that addresses every role but the sender.
pub const ALL: &str = "all";

/// Role names match `[A-Za-z0-9][A-Za-z0-9-]*` (docs/protocol.md §4); case is
/// kept.
pub fn valid_role(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_ROLE
        && b[0].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

/// Why `name` cannot be a role although it is well formed: `all` addresses
/// every role (`to: all`) and `handoffd` is the daemon's own sender name, so a
/// role called either could never be addressed alone or never send.
pub fn reserved_role(name: &str) -> Option<&'static str> {
    match name {
        ALL => Some("'all' addresses every role"),
        DAEMON => Some("'handoffd' is the daemon's own sender name"),
        _ => None,
    }
}

/// Sessions and discussions are named like roles (`s<IDTS>`, `s<IDTS>-2`).
pub fn valid_session_id(id: &str) -> bool {
    valid_role(id)
}

/// Discussion ids also allow `_` and `.` (they are chosen by people).
pub fn valid_discussion_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

// ---------------------------------------------------------------- message types

/// Every message type (docs/protocol.md §5.3 and docs/message-model.md), in the
/// order the docs and messages list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageType {
    GitHandoff,
    Note,
    Post,
    Clarify,
    Answer,
    DigestRequest,
    Digest,
    Close,
    React,
    /// A coordinator asks for a seat to be added or removed (docs/lineups.md).
    SeatRequest,
}

impl MessageType {
    pub const ALL: [MessageType; 10] = [
        MessageType::GitHandoff,
        MessageType::Note,
        MessageType::Post,
        MessageType::Clarify,
        MessageType::Answer,
        MessageType::DigestRequest,
        MessageType::Digest,
        MessageType::Close,
        MessageType::React,
        MessageType::SeatRequest,
    ];

    /// The `type:` value.
    pub const fn name(self) -> &'static str {
        match self {
            MessageType::GitHandoff => "git_handoff",
            MessageType::Note => "note",
            MessageType::Post => "post",
            MessageType::Clarify => "clarify",
            MessageType::Answer => "answer",
            MessageType::DigestRequest => "digest_request",
            MessageType::Digest => "digest",
            MessageType::Close => "close",
            MessageType::React => "react",
            MessageType::SeatRequest => "seat_request",
        }
    }

    pub fn parse(name: &str) -> Option<MessageType> {
        MessageType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Types that count toward a forum session's next digest.
    pub fn is_contribution(self) -> bool {
        matches!(
            self,
            MessageType::Post | MessageType::Note | MessageType::GitHandoff
        )
    }
}

impl std::fmt::Display for MessageType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

// ---------------------------------------------------------------- message ids

/// Digits of a sequence number as written: six, wider only past 999999
/// (SwarmForge's width). Order between widths is kept by [`sort_key`].
pub fn format_seq(n: u64) -> String {
    format!("{n:06}")
}

/// A message id `<IDTS>_<SEQ>_from_<sender>` (docs/protocol.md §4), parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageId<'a> {
    /// `20260615T140531Z`
    pub idts: &'a str,
    pub seq: u64,
    pub sender: &'a str,
}

impl<'a> MessageId<'a> {
    /// Parses a whole id; `None` unless every part has its shape.
    pub fn parse(id: &'a str) -> Option<MessageId<'a>> {
        let (left, sender) = id.split_once("_from_")?;
        let (idts, seq) = left.split_once('_')?;
        let ok = idts.len() == 16
            && clock::parse_idts(idts).is_some()
            && (6..=18).contains(&seq.len())
            && seq.bytes().all(|b| b.is_ascii_digit())
            && valid_role(sender);
        ok.then(|| MessageId {
            idts,
            seq: seq.parse().unwrap_or(u64::MAX),
            sender,
        })
    }

    /// The second the sender took the id in.
    pub fn time(&self) -> Option<DateTime<Utc>> {
        clock::parse_idts(self.idts)
    }
}

/// Builds the id of a message `sender` sends at `now` with number `seq`.
pub fn message_id(now: DateTime<Utc>, seq: u64, sender: &str) -> String {
    format!("{}_{}_from_{sender}", clock::idts(now), format_seq(seq))
}

pub fn valid_message_id(id: &str) -> bool {
    MessageId::parse(id).is_some()
}

/// Whether `id` ends in `_from_<sender>` (the daemon's check of a file's own
/// claim; the shape of the rest was checked with the headers).
pub fn id_names_sender(id: &str, sender: &str) -> bool {
    id.strip_suffix(sender)
        .is_some_and(|rest| rest.ends_with("_from_"))
}

/// Whether a file name starts as its `priority` and `id` headers say.
pub fn name_matches(name: &str, priority: &str, id: &str) -> bool {
    name.strip_prefix(priority)
        .and_then(|r| r.strip_prefix('_'))
        .and_then(|r| r.strip_prefix(id))
        .is_some_and(|r| r.starts_with("_to_"))
}

/// The sender named by an id (`None` for anything that is not an id).
pub fn id_sender(id: &str) -> Option<&str> {
    MessageId::parse(id).map(|m| m.sender)
}

/// The second in an id; also accepts a prefix of one (only the IDTS is read).
pub fn id_time(id: &str) -> Option<DateTime<Utc>> {
    clock::parse_idts(id.get(..16)?)
}

// ---------------------------------------------------------------- file names

/// Longest file name we build (NAME_MAX is 255; collision prefixes need room).
const MAX_BUILT_NAME: usize = 240;

/// A queue entry we are willing to touch: `*.handoff`, plain ASCII, no leading
/// dot, no path separators, short enough for every filesystem.
pub fn valid_handoff_name(name: &str) -> bool {
    let b = name.as_bytes();
    name.ends_with(".handoff")
        && b.len() <= 255
        && b[0] != b'.'
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b':'))
}

/// File name `<NN>_<IDTS>_<SEQ>_from_<sender>_to_<r1>_<r2>.handoff`, the
/// recipient part shortened when it would exceed NAME_MAX (docs/protocol.md
/// §4).
pub fn file_name(priority: &str, id: &str, recipients: &[String]) -> String {
    let full = format!("{priority}_{id}_to_{}.handoff", recipients.join("_"));
    if full.len() <= MAX_BUILT_NAME || recipients.is_empty() {
        return full;
    }
    format!(
        "{priority}_{id}_to_{}_and_{}_more.handoff",
        recipients[0],
        recipients.len() - 1
    )
}

/// A queue file name, parsed: `<NN>_<id>_to_<recipients>.handoff`, with any
/// collision prefix (see [`collision_names`]) already removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileName<'a> {
    pub priority: &'a str,
    pub id: &'a str,
    /// The `_`-joined recipient part (possibly `<r1>_and_<n>_more`).
    pub to: &'a str,
}

impl<'a> FileName<'a> {
    pub fn parse(name: &'a str) -> Option<FileName<'a>> {
        let name = strip_collision_prefix(name);
        let stem = name.strip_suffix(".handoff")?;
        let (priority, rest) = stem.split_once('_')?;
        if priority.len() != 2 || !priority.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // A sender has no `_`, so the id ends at the first `_to_` after `_from_`.
        let from_at = rest.find("_from_")?;
        let to_at = from_at + 6 + rest[from_at + 6..].find("_to_")?;
        let (id, to) = (&rest[..to_at], &rest[to_at + 4..]);
        MessageId::parse(id)?;
        Some(FileName { priority, id, to })
    }

    pub fn message_id(&self) -> MessageId<'a> {
        // `parse` checked the id's shape.
        MessageId::parse(self.id).expect("checked in FileName::parse")
    }
}

/// The order items are handed out in (docs/protocol.md §4): priority, then the
/// second, then the sequence number compared as a number (so `1000000` follows
/// `999999`), then the name. A name of another shape sorts by its text, after
/// the well-formed names of the same first two characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SortKey {
    priority: [u8; 2],
    odd: bool,
    idts: [u8; 16],
    seq: u64,
}

pub fn sort_key(name: &str) -> SortKey {
    let first2 = |s: &str| {
        let b = s.as_bytes();
        [
            b.first().copied().unwrap_or(0),
            b.get(1).copied().unwrap_or(0),
        ]
    };
    match FileName::parse(name) {
        Some(f) => {
            let id = f.message_id();
            let mut idts = [0u8; 16];
            idts.copy_from_slice(id.idts.as_bytes());
            SortKey {
                priority: first2(f.priority),
                odd: false,
                idts,
                seq: id.seq,
            }
        }
        None => SortKey {
            priority: first2(name),
            odd: true,
            idts: [0; 16],
            seq: 0,
        },
    }
}

/// Sorts queue file names into hand-out order ([`sort_key`], then the name).
pub fn sort_names(names: &mut Vec<String>) {
    let mut keyed: Vec<(SortKey, String)> = names.drain(..).map(|n| (sort_key(&n), n)).collect();
    keyed.sort_unstable();
    names.extend(keyed.into_iter().map(|(_, n)| n));
}

/// The names `fsx::move_into_unique` tries for the file at `path` in a folder
/// that may already hold its name: the name itself, then `<stamp>_<name>`,
/// then `<stamp>_<n>_<name>` (the stamp is the time of the move). Built
/// lazily: the first one almost always succeeds.
pub fn collision_names(path: &std::path::Path) -> impl Iterator<Item = String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stamp = clock::iso_now();
    let first = std::iter::once(name.clone());
    let second = std::iter::once_with({
        let (name, stamp) = (name.clone(), stamp.clone());
        move || format!("{stamp}_{name}")
    });
    first
        .chain(second)
        .chain((2..1000).map(move |n| format!("{stamp}_{n}_{name}")))
}

/// A file name without the `<ISO>_` (and `<n>_`) prefix a collision move adds.
pub fn strip_collision_prefix(name: &str) -> &str {
    let b = name.as_bytes();
    let stamped = b.len() > 11
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T';
    if !stamped {
        return name;
    }
    let Some(us) = name.find('_') else {
        return name;
    };
    let rest = &name[us + 1..];
    if let Some((n, tail)) = rest.split_once('_') {
        let t = tail.as_bytes();
        if !n.is_empty()
            && n.bytes().all(|c| c.is_ascii_digit())
            && t.len() > 3
            && t[..2].iter().all(u8::is_ascii_digit)
            && t[2] == b'_'
        {
            return tail;
        }
    }
    rest
}

/// `batch_<IDTS>_<NNNNNN>`: the folder one batch is accepted into.
pub fn batch_dir_name(now: DateTime<Utc>, n: u32) -> String {
    format!("batch_{}_{n:06}", clock::idts(now))
}

/// `batch_*` directories in `in_process/` and `completed/`.
/// Only names of the shape we create (`batch_<IDTS>_<NNNNNN>` and SwarmForge's
/// alike): anything else is ignored, so a planted name can never reach a
/// terminal or a path unescaped.
pub fn is_batch_dir_name(name: &str) -> bool {
    name.strip_prefix("batch_").is_some_and(|rest| {
        !rest.is_empty()
            && rest.len() <= 64
            && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
}

/// What an entry of a queue folder is, from its name and type: the one
/// classification the helpers' listings and the daemon's order index share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueEntry {
    /// A regular file with a valid handoff name: an item.
    Item,
    /// A `batch_*` folder.
    Batch,
    /// Named `*.handoff` but not an item (a bad name, a symlink, a FIFO):
    /// refused before anything is handed out.
    Odd,
    /// Anything else (temp files, other folders): ignored.
    Other,
}

/// Classifies `name` (`is_dir` / `is_file` as the folder entry says, never
/// following a symlink).
pub fn queue_entry(name: &str, is_dir: bool, is_file: bool) -> QueueEntry {
    if is_dir {
        return if is_batch_dir_name(name) {
            QueueEntry::Batch
        } else {
            QueueEntry::Other
        };
    }
    if !name.ends_with(".handoff") {
        QueueEntry::Other
    } else if is_file && valid_handoff_name(name) {
        QueueEntry::Item
    } else {
        QueueEntry::Odd
    }
}

// ---------------------------------------------------------------- worktrees

/// `master` and `none`: the project's main checkout, shared by every role
/// that names it.
pub fn is_shared_worktree(name: &str) -> bool {
    matches!(name, "master" | "none")
}

/// A worktree name is a directory under `.worktrees/` and part of a branch
/// name, so it keeps to a small safe alphabet. The one validator: swarm.yaml,
/// swarmforge.conf and the names other hosts publish are checked by it.
pub fn valid_worktree_name(w: &str) -> bool {
    if is_shared_worktree(w) {
        return true;
    }
    let b = w.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && !w.contains("..")
        && !w.ends_with(".lock")
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

// ---------------------------------------------------------------- recipients

/// The items of a comma list header (`to`, `cc`, `mentions`), empties dropped.
pub fn role_list(v: Option<&str>) -> Vec<&str> {
    v.map(|v| v.split(',').filter(|r| !r.is_empty()).collect())
        .unwrap_or_default()
}

/// `to` as the roles it addresses: `all` means every role in `roles` but the
/// sender; duplicates are dropped, order is kept.
pub fn recipients<'a>(
    to: &str,
    from: &str,
    roles: impl IntoIterator<Item = &'a str> + Clone,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in to.split(',') {
        if item == ALL {
            for r in roles.clone() {
                if r != from && !out.iter().any(|o| o == r) {
                    out.push(r.to_string());
                }
            }
        } else if !item.is_empty() && !out.iter().any(|o| o == item) {
            out.push(item.to_string());
        }
    }
    out
}

/// True when `recipient` is addressed by `to` (sent by `from`).
pub fn addressed(to: &str, from: &str, recipient: &str) -> bool {
    to.split(',')
        .any(|item| item == recipient || (item == ALL && recipient != from))
}

/// True when `recipient` gets a context copy through the `cc` header.
pub fn in_cc(cc: Option<&str>, recipient: &str) -> bool {
    role_list(cc).contains(&recipient)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names() {
        for ok in ["QA", "coder", "code-reviewer", "a1", "9x"] {
            assert!(valid_role(ok), "{ok}");
            assert!(reserved_role(ok).is_none());
        }
        for bad in ["", "-a", "a_b", "a,b", "a/b", "é", "a b", &"x".repeat(65)] {
            assert!(!valid_role(bad), "{bad}");
        }
        assert!(reserved_role("handoffd").is_some() && reserved_role("all").is_some());
    }

    #[test]
    fn handoff_names() {
        assert!(valid_handoff_name(
            "00_20260615T140531Z_000042_from_architect_to_coder.handoff"
        ));
        assert!(valid_handoff_name("2026-06-15T14:05:32.123Z_50_x.handoff"));
        assert!(!valid_handoff_name(".x.handoff"));
        assert!(!valid_handoff_name("a b.handoff"));
        assert!(!valid_handoff_name("a.handoff.tmp"));
        assert!(!valid_handoff_name("a\n.handoff"));
    }

    #[test]
    fn ids_build_and_parse() {
        let now = clock::parse_idts("20260615T140531Z").unwrap();
        let id = message_id(now, 42, "QA");
        assert_eq!(id, "20260615T140531Z_000042_from_QA");
        let m = MessageId::parse(&id).unwrap();
        assert_eq!((m.idts, m.seq, m.sender), ("20260615T140531Z", 42, "QA"));
        assert_eq!(m.time(), Some(now));
        assert!(valid_message_id("20260615T140531Z_1000000_from_QA"));
        assert!(!valid_message_id("20260615T140531Z_1_from_QA"));
        assert!(!valid_message_id("x_000001_from_QA"));
        assert!(!valid_message_id("20260615T140531Z_000001_from_a_b"));
        assert_eq!(id_sender("20260615T140531Z_000001_from_a"), Some("a"));
        assert_eq!(id_sender("nonsense"), None);
    }

    #[test]
    fn file_names_build_and_parse() {
        let id = "20260615T140531Z_000042_from_architect";
        let name = file_name("00", id, &["coder".into(), "qa".into()]);
        assert_eq!(name, format!("00_{id}_to_coder_qa.handoff"));
        let f = FileName::parse(&name).unwrap();
        assert_eq!((f.priority, f.id, f.to), ("00", id, "coder_qa"));
        let stamped = format!("2026-06-15T14:05:32.123Z_2_{name}");
        assert_eq!(FileName::parse(&stamped).unwrap().id, id);
        let many: Vec<String> = (0..40).map(|i| format!("role-number-{i}")).collect();
        let long = file_name("50", id, &many);
        assert!(long.len() <= 255 && long.ends_with("_and_39_more.handoff"));
        assert!(FileName::parse("50_junk_to_a.handoff").is_none());
    }

    #[test]
    fn sequence_order_survives_a_seventh_digit() {
        let a = "50_20260615T140531Z_999999_from_a_to_b.handoff";
        let b = "50_20260615T140531Z_1000000_from_a_to_b.handoff";
        assert!(b < a, "as strings the seventh digit sorts first");
        assert!(sort_key(a) < sort_key(b));
        let earlier = "10_20260615T140531Z_1000000_from_a_to_b.handoff";
        assert!(sort_key(earlier) < sort_key(a), "priority first");
        let mut names = vec![b.to_string(), "50_odd.handoff".into(), a.to_string()];
        sort_names(&mut names);
        assert_eq!(names, [a, b, "50_odd.handoff"]);
    }

    #[test]
    fn collision_prefixes() {
        let n = "00_20260615T140531Z_000001_from_a_to_b.handoff";
        assert_eq!(strip_collision_prefix(n), n);
        let mut names = collision_names(std::path::Path::new(n));
        assert_eq!(names.next().unwrap(), n);
        for built in names.take(3) {
            assert_eq!(strip_collision_prefix(&built), n);
        }
    }

    #[test]
    fn recipients_expand() {
        let roles = ["a", "b", "c"];
        assert_eq!(recipients("all", "b", roles), vec!["a", "c"]);
        assert_eq!(recipients("c,a,c", "b", roles), vec!["c", "a"]);
        assert!(addressed("all", "b", "a"));
        assert!(!addressed("all", "b", "b"));
        assert!(in_cc(Some("x,y"), "y"));
        assert!(!in_cc(None, "y"));
    }

    #[test]
    fn types_round_trip() {
        for t in MessageType::ALL {
            assert_eq!(MessageType::parse(t.name()), Some(t));
        }
        assert_eq!(MessageType::parse("nope"), None);
    }
}
