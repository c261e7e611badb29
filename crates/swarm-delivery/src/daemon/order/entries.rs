//! What one folder holds, in the two orders callers ask for (hand-out
//! order and age), kept from one listing and then from the folder's
//! events. The invariant: a head read belongs to the item as it was added
//! (each add is numbered), so a read of an item replaced meanwhile is
//! dropped and the new one stays unread.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustix::fs::inotify::ReadFlags;
use rustix::fs::{AtFlags, FileType};

use crate::protocol::grammar::{self, QueueEntry, SortKey};
use crate::protocol::order;

/// Numbers each add of an item, so a read can tell whether it is still the
/// item's (see the module doc).
pub(super) static ADDED: AtomicU64 = AtomicU64::new(0);

pub(super) type Name = Arc<str>;

/// What one listing (and the events after it) says a folder holds.
#[derive(Default)]
pub(super) struct Entries {
    pub(super) items: BTreeSet<(SortKey, Name)>,
    /// Item → its modification time (ns since the epoch): when it was
    /// placed, as the re-wake sweep reads it.
    pub(super) ages: HashMap<Name, i64>,
    pub(super) by_age: BTreeSet<(i64, Name)>,
    /// Entries named `*.handoff` that are not items (raw names).
    pub(super) odd: HashSet<Box<[u8]>>,
    /// Items whose head is not read yet → the number of their add.
    pub(super) unread: HashMap<Name, u64>,
    /// Read items that may be answers.
    pub(super) answers: BTreeSet<(SortKey, Name)>,
}

impl Entries {
    pub(super) fn add(&mut self, name: &[u8], kind: FileType, mtime: i64) {
        let text = String::from_utf8_lossy(name);
        let is_dir = kind == FileType::Directory;
        match grammar::queue_entry(&text, is_dir, kind == FileType::RegularFile) {
            QueueEntry::Item => {
                let n: Name = text.into();
                self.items.insert((grammar::sort_key(&n), n.clone()));
                self.by_age.insert((mtime, n.clone()));
                self.unread
                    .insert(n.clone(), ADDED.fetch_add(1, Ordering::Relaxed));
                self.ages.insert(n, mtime);
            }
            QueueEntry::Odd => {
                self.odd.insert(name.into());
            }
            QueueEntry::Batch | QueueEntry::Other => {}
        }
    }

    pub(super) fn remove(&mut self, name: &[u8]) {
        if let Ok(text) = std::str::from_utf8(name) {
            if let Some((n, t)) = self.ages.remove_entry(text) {
                self.by_age.remove(&(t, n.clone()));
                self.unread.remove(&n);
                let key = (grammar::sort_key(text), n);
                self.answers.remove(&key);
                self.items.remove(&key);
            }
        }
        self.odd.remove(name);
    }

    /// Brings `name` up to date with what the folder holds now (looked at
    /// through the folder itself: its path may name another by now).
    pub(super) fn refresh(&mut self, dir: &OwnedFd, name: &[u8]) {
        self.remove(name);
        if let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            self.add(name, FileType::from_raw_mode(st.st_mode), mtime_ns(&st));
        }
    }

    pub(super) fn apply(&mut self, dir: &OwnedFd, mask: ReadFlags, name: &[u8]) {
        if mask.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
            self.remove(name);
        }
        if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
            // Gone already means a later event says so.
            self.refresh(dir, name);
        }
    }

    /// Records what reading `name`'s head (as of its add number `added`)
    /// said; a read of an item added again since is dropped.
    pub(super) fn read(&mut self, name: &Name, added: u64, may_be_answer: bool) {
        if self.unread.get(name) != Some(&added) {
            return;
        }
        self.unread.remove(name);
        if may_be_answer {
            self.answers.insert((grammar::sort_key(name), name.clone()));
        }
    }

    /// Keeps what `old` read of the items both hold (called on a fresh
    /// listing, after the events since it began are replayed onto it: an
    /// item `old` had read and this one saw added again is unread here and
    /// there alike, since both saw the same event).
    pub(super) fn inherit(&mut self, old: &Entries) {
        let read_in_old = |n: &Name| old.ages.contains_key(n) && !old.unread.contains_key(n);
        let mut answers = Vec::new();
        self.unread.retain(|n, _| {
            if !read_in_old(n) {
                return true;
            }
            let key = (grammar::sort_key(n), n.clone());
            if old.answers.contains(&key) {
                answers.push(key);
            }
            false
        });
        self.answers.extend(answers);
    }

    /// The items that may be answers, in hand-out order: named only when
    /// there are at most [`order::HEAD`] of them.
    pub(super) fn may_be_answers(&self) -> Vec<Name> {
        if self.answers.len() + self.unread.len() > order::HEAD {
            return Vec::new();
        }
        let mut all: Vec<(SortKey, Name)> = self.answers.iter().cloned().collect();
        all.extend(
            self.unread
                .keys()
                .map(|n| (grammar::sort_key(n), n.clone())),
        );
        all.sort();
        all.into_iter().map(|(_, n)| n).collect()
    }

    /// Lists the folder through `dir` (a fresh descriptor, so the held one
    /// keeps no offset).
    pub(super) fn list(dir: &OwnedFd) -> io::Result<Entries> {
        let mut e = Entries::default();
        for entry in rustix::fs::Dir::read_from(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            match entry.file_type() {
                // Only items need a stat (their age); d_type says the rest.
                FileType::RegularFile | FileType::Unknown => e.refresh(dir, name),
                kind => e.add(name, kind, 0),
            }
        }
        Ok(e)
    }
}

pub(super) fn mtime_ns(st: &rustix::fs::Stat) -> i64 {
    st.st_mtime
        .saturating_mul(1_000_000_000)
        .saturating_add(st.st_mtime_nsec as i64)
}

pub(super) fn system_time(ns: i64) -> SystemTime {
    match u64::try_from(ns) {
        Ok(ns) => SystemTime::UNIX_EPOCH + Duration::from_nanos(ns),
        Err(_) => SystemTime::UNIX_EPOCH,
    }
}
