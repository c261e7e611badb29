//! The id index of `completed/`: finding a completed copy by its message id
//! without listing the history (docs/protocol.md §1.2, `inbox/completed-ids/`).
//!
//! `inbox/completed-ids/<id>` is a symbolic link whose text is the copy's place
//! under `completed/` (`<name>` or `batch_…/<name>`), made when the copy is
//! completed. The link is a hint and never followed: its text is checked
//! against the grammar, the file is read under `completed/` through the
//! bounded reader, and its `id` header must match. A link missing (a call
//! killed between the move and the link, an older version, `swarm archive`
//! having moved the copy) or wrong sends the caller to the listing, which
//! then writes the link again, so the index is rebuilt from the files as
//! it is used. It is never fsynced: nothing depends on it surviving.

use std::io;
use std::path::{Path, PathBuf};

use super::Item;
use crate::fsx;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::Worktree;

/// The index folder, beside `completed/` rather than in it, so whatever
/// lists `completed/` (ours, SwarmForge's, a person's) sees only the queue.
pub fn dir(wt: &Worktree) -> PathBuf {
    wt.inbox().join("completed-ids")
}

/// Records that message `id`'s copy is at `completed/<place>`. Best effort:
/// a link that cannot be made only costs the next look-up a listing.
pub fn record(wt: &Worktree, id: &str, place: &Path) {
    if !grammar::valid_message_id(id) || parse_place(place).is_none() {
        return;
    }
    let ids = dir(wt);
    // Never written through a link planted in the folder's place.
    if std::fs::symlink_metadata(&ids).is_ok_and(|m| !m.is_dir()) {
        return;
    }
    let link = ids.join(id);
    let made = match std::os::unix::fs::symlink(place, &link) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fsx::ensure_dirs(&[&ids]).and_then(|_| std::os::unix::fs::symlink(place, &link))
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // Stale (the copy archived, or an id completed twice in two
            // worktree-sharing roles): the newest place wins.
            fsx::remove_file(&link).and_then(|_| std::os::unix::fs::symlink(place, &link))
        }
        other => other,
    };
    let _ = made;
}

/// The place a link names, if it is one we could have written: a handoff
/// name, or a batch folder's name and a handoff name; nothing else.
fn parse_place(place: &Path) -> Option<(Option<&str>, &str)> {
    let s = place.to_str()?;
    let (batch, name) = match s.split_once('/') {
        Some((b, n)) => (Some(b), n),
        None => (None, s),
    };
    let ok = grammar::valid_handoff_name(name) && batch.is_none_or(grammar::is_batch_dir_name);
    ok.then_some((batch, name))
}

/// Message `id`'s completed copy by its link, or `None` (then list).
pub fn find(wt: &Worktree, id: &str, max_bytes: u64) -> Option<Item> {
    if !grammar::valid_message_id(id) {
        return None;
    }
    let place = std::fs::read_link(dir(wt).join(id)).ok()?;
    let (batch, name) = parse_place(&place)?;
    let base = wt.completed();
    let path = match batch {
        // A real folder, not a link planted under a batch's name.
        Some(b) => {
            let folder = base.join(b);
            if !std::fs::symlink_metadata(&folder).is_ok_and(|m| m.is_dir()) {
                return None;
            }
            folder.join(name)
        }
        None => base.join(name),
    };
    let bytes = fsx::read_bounded(&path, max_bytes).ok()?;
    let msg = Message::parse_bytes(&bytes).ok()?;
    (msg.id() == Some(id)).then_some(Item { path, msg })
}

/// Records `item` (a path under `completed/`) by its id.
pub fn record_item(wt: &Worktree, item: &Item) {
    let base = wt.completed();
    if let (Some(id), Ok(place)) = (item.msg.id(), item.path.strip_prefix(&base)) {
        record(wt, id, place);
    }
}
