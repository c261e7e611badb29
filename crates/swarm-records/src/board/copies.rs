//! Merge-only copies (today's SwarmForge's `back-one` / `back-all`,
//! docs/swarmforge-compat.md §4): when a role with that propagation token
//! queues a forward `git_handoff`, the same commit also goes to the role
//! before it (`back-one`) or every role before it (`back-all`) on the card's
//! route, one message each, priority `00`, marked `non-forwarding: true`.
//! A copy never moves the card ([`super::derive`] skips it) and is never
//! made for a terminal handoff; its recipient merges it and keeps working.
//!
//! Which roles count as "before" is [`super::Routes::copy_targets`]: the
//! card's route, as upstream's README and protocol text say (its older
//! script used window order; a project without cards still does). Changing
//! that choice is changing that one function.

use std::path::PathBuf;

use super::{Routes, NON_FORWARDING};
use crate::error::Result;
use crate::protocol::clock;
use crate::protocol::grammar::{self, MessageType};
use crate::protocol::header::{names, Message};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::store;

/// Priority of a merge-only copy (upstream's `"00"`): merged before new work.
pub const PRIORITY: &str = "00";

/// The line added to a copy's body, so the agent reading it knows.
pub const NOTICE: &str = "Merge-only copy: merge this commit and keep working; do not hand it on.";

/// Queues the merge-only copies of `msg`, the `git_handoff` `sender` just
/// queued from `wt` (taken as built: the daemon may have moved its file
/// already); returns their paths (none for most).
pub fn queue(
    project: &Project,
    wt: &Worktree,
    sender: &str,
    msg: &Message,
) -> Result<Vec<PathBuf>> {
    let routes = Routes::load(project)?;
    if !routes.propagation.contains_key(sender) {
        return Ok(Vec::new());
    }
    if msg.kind() != Some(MessageType::GitHandoff) || msg.get(NON_FORWARDING).is_some() {
        return Ok(Vec::new());
    }
    // The send stamped the card's type (`card_type`) when the task is a card.
    let kind = msg.get(super::CARD_TYPE).map(str::to_string);
    let route = kind.as_deref().and_then(|k| routes.route(k));
    let to = grammar::role_list(msg.to());
    let mut out = Vec::new();
    for target in routes.copy_targets(route, sender, &to) {
        let queued = store::enqueue(wt, sender, |id, now| {
            let mut copy = msg.clone();
            copy.set(names::ID, id);
            copy.set(names::TO, &target);
            copy.set(names::PRIORITY, PRIORITY);
            copy.set(NON_FORWARDING, "true");
            if kind.is_some() {
                copy.set(super::DELIVERY_KIND, super::REVERSE);
            }
            copy.set(names::CREATED_AT, clock::iso(now));
            copy.remove(names::MENTIONS);
            copy.body = format!("{}\n{NOTICE}\n", msg.body.trim_end_matches('\n'));
            copy
        })?;
        out.push(queued.path);
    }
    Ok(out)
}
