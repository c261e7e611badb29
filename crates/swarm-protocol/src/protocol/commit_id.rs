//! A commit id as the protocol carries it: a draft's or a handoff's
//! `commit`, a held handoff's `task_base_commit`, the commit a peer host's
//! copy names. Each is written by an agent or a peer, so each reaches git
//! only as a [`CommitId`].
//!
//! The invariant (the one rule, [`CommitId::parse`]): 1 to [`MAX_LEN`] ASCII
//! hex digits, either case, nothing else. git then reads it as an object
//! name or a prefix of one: never as an option, a revision expression
//! (`HEAD~3`, `@{-1}`, `:/text`) or a path, and never longer than a SHA-256
//! id. A caller that needs more says so on top of it, by name:
//!
//! - a draft's and a handoff's `commit` is exactly [`HANDOFF_LEN`] digits
//!   (SwarmForge's `git rev-parse --short=10`; [`CommitId::is_handoff`]);
//! - a held handoff's commits are snapshotted only when git could take them
//!   as an abbreviation, [`MIN_ABBREV`] digits or more
//!   ([`CommitId::is_abbrev`]);
//! - a ref git wrote itself (a worktree's `refs/worktree/swarmforge`) is
//!   taken only as a full object name, [`FULL_LEN`] digits or more
//!   ([`CommitId::is_full`]);
//! - the bridge takes a peer's commit as it is (1 to 64 digits) and asks
//!   git, and pushes its own the same way: one that is no `CommitId` waits
//!   with the same words both ways ([`NotACommitId::in_commit_header`]).
//!
//! No other text reaches git as a commit: a check of a commit id anywhere
//! is `CommitId::parse` and, at most, one of these.

use std::fmt;

/// The longest commit id: a full SHA-256 object name in hex.
pub const MAX_LEN: usize = 64;

/// The length of a `git_handoff`'s `commit` (docs/protocol.md §7.1).
pub const HANDOFF_LEN: usize = 10;

/// git's shortest abbreviation of an object name (`core.abbrev`'s minimum).
pub const MIN_ABBREV: usize = 4;

/// A full SHA-1 object name (a SHA-256 one is [`MAX_LEN`]).
pub const FULL_LEN: usize = 40;

/// 1 to [`MAX_LEN`] hex digits, as written (the case is kept).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommitId(String);

/// Why a text is no [`CommitId`]; the callers word their own refusals.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{}' is not a commit id (1 to {MAX_LEN} hexadecimal digits)", crate::text::escape(.0))]
pub struct NotACommitId(pub String);

impl NotACommitId {
    /// The refusal of a message whose `commit` header is no commit id, in
    /// the same words wherever one is met (the bridge, both ways).
    pub fn in_commit_header(&self) -> String {
        format!(
            "commit '{}' is not a commit id",
            crate::text::escape(&self.0)
        )
    }
}

impl CommitId {
    /// The one rule (see the module doc).
    pub fn parse(s: &str) -> Result<CommitId, NotACommitId> {
        let ok = !s.is_empty() && s.len() <= MAX_LEN && s.bytes().all(|b| b.is_ascii_hexdigit());
        match ok {
            true => Ok(CommitId(s.to_string())),
            false => Err(NotACommitId(s.to_string())),
        }
    }

    /// A `git_handoff`'s `commit`: exactly [`HANDOFF_LEN`] digits.
    pub fn is_handoff(&self) -> bool {
        self.0.len() == HANDOFF_LEN
    }

    /// Long enough for git to take as an abbreviation ([`MIN_ABBREV`]).
    pub fn is_abbrev(&self) -> bool {
        self.0.len() >= MIN_ABBREV
    }

    /// A full object name, SHA-1 or SHA-256 ([`FULL_LEN`] digits or more).
    pub fn is_full(&self) -> bool {
        self.0.len() >= FULL_LEN
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The revision git resolves to the commit itself, and to nothing when
    /// the id names another kind of object: `<id>^{commit}`.
    pub fn peeled(&self) -> String {
        format!("{}^{{commit}}", self.0)
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for CommitId {
    type Err = NotACommitId;

    fn from_str(s: &str) -> Result<CommitId, NotACommitId> {
        CommitId::parse(s)
    }
}

impl AsRef<str> for CommitId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for CommitId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_rule() {
        for ok in ["a", "0123456789", "ABCDEF0123", &"f".repeat(MAX_LEN)] {
            assert_eq!(CommitId::parse(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            &"f".repeat(MAX_LEN + 1),
            "HEAD",
            "abc~1",
            "--output=x",
            "abcdef012 ",
            " abcdef0123",
            "abcdef012\n",
            "abcdeg0123",
            "é",
        ] {
            let e = CommitId::parse(bad).unwrap_err();
            assert_eq!(e.0, bad);
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn what_callers_ask_on_top() {
        let c = |s: &str| CommitId::parse(s).unwrap();
        assert!(c("0123456789").is_handoff());
        assert!(!c("012345678").is_handoff() && !c("0123456789a").is_handoff());
        assert!(c("abcd").is_abbrev() && !c("abc").is_abbrev());
        assert!(c(&"a".repeat(40)).is_full() && c(&"a".repeat(64)).is_full());
        assert!(!c(&"a".repeat(39)).is_full());
        let e = CommitId::parse("--x").unwrap_err();
        assert_eq!(e.in_commit_header(), "commit '--x' is not a commit id");
        assert_eq!(c("abcd").peeled(), "abcd^{commit}");
        assert_eq!(c("abcd").to_string(), "abcd");
        assert_eq!("abcd".parse::<CommitId>(), Ok(c("abcd")));
    }
}
