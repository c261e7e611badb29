//! The delivered originals of a project (every worktree's `sent/`), read
//! once when the daemon starts so forum state (contributions awaiting a digest,
//! session activity, discussion turns) is derived from the files, not kept
//! only in memory.

use crate::protocol::header::{Header, Message};
use crate::protocol::layout::Worktree;
use crate::protocol::roles::Roles;
use crate::protocol::store;

/// What one delivered original said, as far as the forum cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Said {
    pub created_at: String,
    pub id: String,
    pub from: String,
    pub kind: String,
    pub session: Option<String>,
    pub discussion: Option<String>,
    pub body: String,
}

impl Said {
    pub fn from_message(m: &Message) -> Option<Said> {
        let get = |n: Header| m.get(n).map(str::to_string);
        Some(Said {
            created_at: get(Header::CreatedAt).unwrap_or_default(),
            id: get(Header::Id)?,
            from: get(Header::From).unwrap_or_default(),
            kind: get(Header::Type).unwrap_or_default(),
            session: get(Header::Session).filter(|s| !s.is_empty()),
            discussion: get(Header::Discussion).filter(|s| !s.is_empty()),
            body: m.body.clone(),
        })
    }
}

/// Every readable original in every worktree's `sent/`, by (created_at, id).
pub fn delivered(roles: &Roles, max_bytes: u64) -> Vec<Said> {
    let mut out = Vec::new();
    for wt in roles.worktrees() {
        let sent = Worktree::new(&wt).sent();
        for e in store::each(&sent).filter(|e| e.is_handoff_named()) {
            if let Some(s) = e.message(max_bytes).and_then(|m| Said::from_message(&m)) {
                out.push(s);
            }
        }
    }
    out.sort_by(|a, b| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
    out
}
