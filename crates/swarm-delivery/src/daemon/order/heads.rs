//! The reader thread: which unread items may be `answer`s, from each one's
//! head, read once at the lowest CPU priority so a large inbox's reads do
//! not compete with the callers. The index is locked only to take a round
//! of unread items and to record what they said (`Index::record` drops a
//! read of an item added again meanwhile).

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::fs::FileType;

use super::name::Name;
use super::{Shared, READS_PER_ROUND, READ_TICK};
use crate::protocol::order;

/// Head reads after which, once nothing is left unread, freed memory is
/// given back.
const RELEASE_AFTER: usize = 4096;

/// The reader: the heads of unread items, at the lowest CPU priority (this
/// thread's own nice value), until `stop`.
pub(super) fn reader(shared: &Shared, stop: &AtomicBool) {
    crate::sys::background::lowest_priority();
    let mut read = 0;
    while !stop.load(Ordering::Relaxed) {
        let n = read_heads(shared);
        if n > 0 {
            read += n;
            continue;
        }
        // Every head of a listing read: the unread set's memory is free
        // (not after every few items delivered: the walk is not free).
        if std::mem::take(&mut read) >= RELEASE_AFTER {
            crate::sys::memory::release_free();
        }
        std::thread::sleep(READ_TICK);
    }
}

/// Reads the heads of up to [`READS_PER_ROUND`] unread items (the index
/// unlocked meanwhile) and records what each said; returns how many.
pub(super) fn read_heads(shared: &Shared) -> usize {
    let todo = shared.index().unread(READS_PER_ROUND);
    let said = heads(&todo);
    shared.index().record(&todo, &said);
    todo.len()
}

pub(super) type Unread = (PathBuf, Arc<OwnedFd>, Name, u64);

/// What reading each head said (`None`: it could not be read).
pub(super) fn heads(todo: &[Unread]) -> Vec<Option<bool>> {
    todo.iter()
        .map(|(_, fd, name, _)| head_may_be_answer(fd, &name.text()))
        .collect()
}

/// Whether the item `name` in the folder `dir` may be an answer; `None`
/// when it cannot be read.
pub(super) fn head_may_be_answer(dir: &OwnedFd, name: &str) -> Option<bool> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    if FileType::from_raw_mode(rustix::fs::fstat(&fd).ok()?.st_mode) != FileType::RegularFile {
        return None;
    }
    let mut buf = Vec::with_capacity(4096);
    let mut file = std::fs::File::from(fd);
    (&mut file)
        .take(order::HEAD_BYTES as u64)
        .read_to_end(&mut buf)
        .ok()?;
    let whole = buf.len() < order::HEAD_BYTES;
    Some(order::may_be_answer(&buf, whole))
}
