//! What one folder holds, in the two orders callers ask for (hand-out
//! order and age), kept from one listing and then from the folder's
//! events. The invariant: a head read belongs to the item as it was added
//! (each add is numbered), so a read of an item replaced meanwhile is
//! dropped and the new one stays unread.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use rustix::fs::inotify::ReadFlags;
use rustix::fs::{AtFlags, FileType};

use super::name::{Name, Tails};
use crate::protocol::grammar::{self, QueueEntry};
use crate::protocol::order;

/// Numbers each add of an item, so a read can tell whether it is still the
/// item's (see the module doc).
pub(super) static ADDED: AtomicU64 = AtomicU64::new(0);

/// What one listing (and the events after it) says a folder holds. Each
/// item is held in two B-trees (32 bytes an entry, nodes filled when built
/// from a listing) beside its name's shared tail; the sets of unread items
/// and of answers are empty once the heads are read.
#[derive(Default)]
pub(super) struct Entries {
    /// Items in hand-out order → their modification time (ns since the
    /// epoch): when they were placed, as the re-wake sweep reads it.
    pub(super) items: BTreeMap<Name, i64>,
    pub(super) by_age: BTreeSet<(i64, Name)>,
    /// Entries named `*.handoff` that are not items (raw names).
    pub(super) odd: HashSet<Box<[u8]>>,
    /// Items whose head is not read yet → the number of their add.
    pub(super) unread: BTreeMap<Name, u64>,
    /// Read items that may be answers.
    pub(super) answers: BTreeSet<Name>,
    pub(super) tails: Tails,
}

/// What an entry is, from its name and type.
fn kind(name: &[u8], kind: FileType) -> QueueEntry {
    let text = String::from_utf8_lossy(name);
    grammar::queue_entry(
        &text,
        kind == FileType::Directory,
        kind == FileType::RegularFile,
    )
}

impl Entries {
    pub(super) fn add(&mut self, name: &[u8], kind: FileType, mtime: i64) {
        match self::kind(name, kind) {
            QueueEntry::Item => {
                // An item's name is ASCII (`grammar::valid_handoff_name`).
                let n = Name::intern(&String::from_utf8_lossy(name), &mut self.tails);
                if let Some(old) = self.items.insert(n.clone(), mtime) {
                    self.by_age.remove(&(old, n.clone()));
                }
                self.by_age.insert((mtime, n.clone()));
                self.unread.insert(n, ADDED.fetch_add(1, Ordering::Relaxed));
            }
            QueueEntry::Odd => {
                self.odd.insert(name.into());
            }
            QueueEntry::Batch | QueueEntry::Other => {}
        }
    }

    /// The key of the item named `name`, if it may be one held here.
    pub(super) fn key(&self, name: &[u8]) -> Option<Name> {
        Name::find(std::str::from_utf8(name).ok()?, &self.tails)
    }

    pub(super) fn remove(&mut self, name: &[u8]) {
        if let Some(key) = self.key(name) {
            if let Some((n, t)) = self.items.remove_entry(&key) {
                self.by_age.remove(&(t, n.clone()));
                self.unread.remove(&n);
                self.answers.remove(&n);
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
            self.answers.insert(name.clone());
        }
    }

    /// Keeps what `old` read of the items both hold (called on a fresh
    /// listing, after the events since it began are replayed onto it: an
    /// item `old` had read and this one saw added again is unread here and
    /// there alike, since both saw the same event).
    pub(super) fn inherit(&mut self, old: &Entries) {
        let mut answers = Vec::new();
        // Names compare by their text, whichever folder's tails they hold.
        self.unread.retain(|n, _| {
            if !old.items.contains_key(n) || old.unread.contains_key(n) {
                return true;
            }
            if old.answers.contains(n) {
                answers.push(n.clone());
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
        let mut all: Vec<Name> = self.answers.iter().cloned().collect();
        all.extend(self.unread.keys().cloned());
        all.sort();
        all
    }

    /// Lists the folder through `dir` (a fresh descriptor, so the held one
    /// keeps no offset). The trees are built from the sorted listing, so
    /// their nodes are full.
    pub(super) fn list(dir: &OwnedFd) -> io::Result<Entries> {
        let mut e = Entries::default();
        let mut items = Vec::new();
        for entry in rustix::fs::Dir::read_from(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let (kind, mtime) = match entry.file_type() {
                // Only items need a stat (their age); d_type says the rest.
                FileType::RegularFile | FileType::Unknown => {
                    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) => (FileType::from_raw_mode(st.st_mode), mtime_ns(&st)),
                        // Gone since: an event says so.
                        Err(_) => continue,
                    }
                }
                kind => (kind, 0),
            };
            match self::kind(name, kind) {
                QueueEntry::Item => items.push((
                    Name::intern(&String::from_utf8_lossy(name), &mut e.tails),
                    mtime,
                )),
                _ => e.add(name, kind, mtime),
            }
        }
        // One entry per name (a folder holds each once).
        items.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        e.by_age = items.iter().map(|(n, t)| (*t, n.clone())).collect();
        e.unread = items
            .iter()
            .map(|(n, _)| (n.clone(), ADDED.fetch_add(1, Ordering::Relaxed)))
            .collect();
        e.items = items.into_iter().collect();
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
