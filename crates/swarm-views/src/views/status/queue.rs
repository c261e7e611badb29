//! How `swarm status` counts a queue folder: waiting items, the oldest
//! wait, the item in process, completed items in batch folders.
//!
//! Why a module: the cockpit (serve/folders.rs) counts the same folders and
//! must agree with `swarm status` to the item. Invariant: a folder is listed
//! only through the store (`protocol::store`), only handoff-named entries
//! count, and a waiting copy's age is its `enqueued_at` (the one definition
//! `swarm audit` uses), its mtime only for a copy without a readable stamp.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::fsx::read_bounded;
use crate::protocol::clock;
use crate::protocol::header::{names, Message};
use crate::protocol::store::{self, Entry, Kind};

pub(super) fn age(t: SystemTime) -> u64 {
    SystemTime::now()
        .duration_since(t)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// Since when a copy in `inbox/new` has waited: its `enqueued_at`, the one
/// definition `swarm audit` uses too; its mtime only for a copy without a
/// readable stamp (a file planted by hand), since a copy, a backup or `touch`
/// changes the mtime. Read up to the copy limit of `limits.max_file_bytes`.
pub fn waiting_since(
    path: &Path,
    mtime: Option<SystemTime>,
    max_file_bytes: u64,
) -> Option<SystemTime> {
    read_bounded(path, store::copy_limit(max_file_bytes))
        .ok()
        .and_then(|b| Message::parse_bytes(&b).ok())
        .and_then(|m| m.get(names::ENQUEUED_AT).and_then(clock::parse))
        .map(SystemTime::from)
        .or(mtime)
}

/// (count of waiting items, since when the oldest has waited) in `new/`.
pub(crate) fn waiting(dir: &Path, max_file_bytes: u64) -> (usize, Option<SystemTime>) {
    count_oldest(dir, |e| {
        waiting_since(&e.path, e.modified(), max_file_bytes)
    })
}

/// (count of items, oldest mtime) directly in `dir`.
pub(crate) fn items(dir: &Path) -> (usize, Option<SystemTime>) {
    count_oldest(dir, Entry::modified)
}

/// (count of items, the earliest `since` of them) directly in `dir`.
fn count_oldest(
    dir: &Path,
    since: impl Fn(&Entry) -> Option<SystemTime>,
) -> (usize, Option<SystemTime>) {
    let mut n = 0;
    let mut oldest: Option<SystemTime> = None;
    each_entry(dir, |e| {
        if !e.is_handoff_named() {
            return;
        }
        n += 1;
        if let Some(t) = since(&e) {
            oldest = Some(oldest.map_or(t, |o| o.min(t)));
        }
    });
    (n, oldest)
}

/// Calls `f` with each entry of the queue folder `dir` (none when it cannot
/// be listed): the views' one listing of a queue folder, through the store.
pub fn each_entry(dir: &Path, f: impl FnMut(Entry)) {
    store::each(dir).for_each(f);
}

pub(super) fn completed_count(dir: &Path) -> usize {
    store::each(dir)
        .map(|e| match e.kind {
            Kind::Handoff | Kind::Odd => 1,
            Kind::Batch => items(&e.path).0,
            Kind::Sidecar | Kind::Temp | Kind::Stray => 0,
        })
        .sum()
}

/// The entry in process (an item or a batch folder; the first by name
/// should there be more, as the cockpit's `Folders::first`) and its mtime.
pub(crate) fn in_process(dir: &Path) -> Option<(PathBuf, Option<SystemTime>)> {
    store::each(dir)
        .filter(|e| e.is_handoff_named() || e.kind == Kind::Batch)
        .min_by(|a, b| a.path.cmp(&b.path))
        .map(|e| {
            let at = e.modified();
            (e.path, at)
        })
}
