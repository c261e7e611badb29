//! Finding one message's item by id in an inbox (names embed the id, so
//! only matching names are read).

use std::path::{Path, PathBuf};

use super::{ids, list, Item};
use crate::fsx;
use crate::protocol::header::Message;
use crate::protocol::layout::Worktree;
use crate::protocol::store;

/// The item for message `id` directly in `dir` (names embed the id, so only
/// matching names are read); unreadable files are skipped.
pub(super) fn find_in(dir: &Path, id: &str, max_bytes: u64) -> Option<Item> {
    let needle = format!("_{id}_to_");
    let mut names: Vec<String> = store::entries(dir)
        .ok()?
        .flatten()
        .filter(|e| e.is_handoff_named() && e.name.contains(&needle))
        .map(|e| e.name)
        .collect();
    names.sort_unstable();
    names.into_iter().find_map(|n| {
        let path = dir.join(n);
        let bytes = fsx::read_bounded(&path, max_bytes).ok()?;
        let msg = Message::parse_bytes(&bytes).ok()?;
        (msg.id() == Some(id)).then_some(Item { path, msg })
    })
}

/// The copy of message `id` in this worktree's inbox, if any (read-only, no
/// lock: for look-ups, never for transitions). Looks where a reply's parent
/// usually is first (in process, then waiting), then follows the id index
/// of `completed/` (`ids`), and lists `completed/`, which grows with
/// history, only when the copy is in none of those.
pub fn find_copy(wt: &Worktree, id: &str, max_bytes: u64) -> Option<Item> {
    let in_batches = |base: PathBuf| -> Option<Item> {
        let l = list(&base).ok()?;
        l.batches
            .iter()
            .find_map(|b| find_in(&base.join(b), id, max_bytes))
    };
    let listed_completed = || {
        let found = find_in(&wt.completed(), id, max_bytes).or_else(|| in_batches(wt.completed()));
        // Found by listing: its link was missing or stale; write it again.
        if let Some(item) = &found {
            ids::record_item(wt, item);
        }
        found
    };
    find_in(&wt.in_process(), id, max_bytes)
        .or_else(|| in_batches(wt.in_process()))
        .or_else(|| find_in(&wt.inbox_new(), id, max_bytes))
        .or_else(|| ids::find(wt, id, max_bytes))
        .or_else(listed_completed)
}

/// Message `id` as this worktree knows it: a copy in its inbox, else its own
/// original in `sent/` or the outbox (a follow-up to one's own message).
pub fn find_item(wt: &Worktree, id: &str, max_bytes: u64) -> Option<Item> {
    find_copy(wt, id, max_bytes).or_else(|| {
        [wt.sent(), wt.outbox()]
            .iter()
            .find_map(|d| find_in(d, id, max_bytes))
    })
}

/// Message `id`'s original in this (its sender's) worktree: `sent/`, then
/// the outbox, then `failed/` (read-only, no lock).
pub fn find_original(wt: &Worktree, id: &str, max_bytes: u64) -> Option<Item> {
    [wt.sent(), wt.outbox(), wt.failed()]
        .iter()
        .find_map(|d| find_in(d, id, max_bytes))
}

/// The item in process: the file in `in_process/`, or the first item of the
/// in-process batch (read-only, no lock).
pub fn current_item(wt: &Worktree, max_bytes: u64) -> Option<Item> {
    let ip = wt.in_process();
    let l = list(&ip).ok()?;
    let path = match (l.files.first(), l.batches.first()) {
        (Some(f), _) => ip.join(f),
        (None, Some(b)) => {
            let dir = ip.join(b);
            dir.join(list(&dir).ok()?.files.first()?)
        }
        _ => return None,
    };
    let bytes = fsx::read_bounded(&path, max_bytes).ok()?;
    let msg = Message::parse_bytes(&bytes).ok()?;
    Some(Item { path, msg })
}

/// Every item in process, in order: the file in `in_process/` and every
/// item of the in-process batch (read-only, no lock; unreadable files are
/// skipped).
pub fn current_items(wt: &Worktree, max_bytes: u64) -> Vec<Item> {
    let ip = wt.in_process();
    let Ok(l) = list(&ip) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = l.files.iter().map(|f| ip.join(f)).collect();
    for b in &l.batches {
        let dir = ip.join(b);
        if let Ok(inner) = list(&dir) {
            paths.extend(inner.files.iter().map(|f| dir.join(f)));
        }
    }
    paths
        .into_iter()
        .filter_map(|path| {
            let bytes = fsx::read_bounded(&path, max_bytes).ok()?;
            let msg = Message::parse_bytes(&bytes).ok()?;
            Some(Item { path, msg })
        })
        .collect()
}
