//! Locks: `flock(2)` on plain files, released by the kernel when the
//! holder dies, so a killed process never leaves a stale lock; who holds
//! one is read from /proc/locks, which never takes it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::sync_file;

/// An exclusive `flock(2)` lock held until dropped (or the process dies).
#[derive(Debug)]
pub struct Lock {
    file: File,
}

impl Lock {
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Another descriptor of the same lock (one open file, one lock): a
    /// child process given it (as its stdin) holds the lock until it
    /// exits, past the death of the process that took it.
    pub fn share(&self) -> io::Result<File> {
        self.file.try_clone()
    }
}

pub(super) fn open_lock_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Blocks until the exclusive lock on `path` is ours.
pub fn lock(path: &Path) -> io::Result<Lock> {
    let file = open_lock_file(path)?;
    file.lock()?;
    Ok(Lock { file })
}

/// Takes the lock if free; `Ok(None)` when another process holds it.
pub fn try_lock(path: &Path) -> io::Result<Option<Lock>> {
    let file = open_lock_file(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(Lock { file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Takes an exclusive `flock(2)` on a directory itself (opened O_DIRECTORY,
/// never through a symlink) if free; `Ok(None)` when another process holds
/// it. A lock on the folder, not on a file in it, cannot be deleted away
/// while the folder is in use, and every spelling of the path reaches the
/// same inode.
pub fn try_lock_dir(dir: &Path) -> io::Result<Option<Lock>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(Lock { file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// This process's soft limit on open descriptors (each held folder lock
/// keeps one open); 1024 when unknown.
pub fn fd_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1024)
}

/// Raises the soft limit on open descriptors to the hard one (at most
/// 2^20): the daemon keeps one folder open per served worktree (its lock).
pub fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut r = getrlimit(Resource::Nofile);
    let want = r.maximum.unwrap_or(1 << 20).min(1 << 20);
    if r.current.is_some_and(|c| c < want) {
        r.current = Some(want);
        let _ = setrlimit(Resource::Nofile, r);
    }
}

/// The pid holding an flock on the file or folder at `path`; `None` when
/// unknown.
pub fn lock_holder(path: &Path) -> Option<u32> {
    flock_holders(path).first().copied()
}

/// Rewrites the content of a held lock file in place (the pid file): the file
/// must stay the same inode because the lock lives on it.
pub fn rewrite_locked(lock: &Lock, bytes: &[u8]) -> io::Result<()> {
    let mut f = &lock.file;
    f.set_len(0)?;
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(0))?;
    f.write_all(bytes)?;
    sync_file(&lock.file)
}

/// Pids holding a flock(2) lock on the file at `path`, per /proc/locks
/// (`MAJ:MIN:INODE`, device in hex). Device and inode both must match, so a
/// same-numbered inode on another filesystem is never taken for this file;
/// reading /proc/locks never takes the lock, so probing cannot make a
/// starting process believe another one holds it.
pub fn flock_holders(path: &Path) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::metadata(path) else {
        return Vec::new();
    };
    let dev = meta.dev();
    let key = format!(
        "{:02x}:{:02x}:{}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev),
        meta.ino()
    );
    let text = fs::read_to_string("/proc/locks").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 6 && f[1] == "FLOCK" && f[5] == key)
                .then(|| f[4].parse().ok())
                .flatten()
        })
        .collect()
}
