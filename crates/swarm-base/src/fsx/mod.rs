//! The only module that writes, renames, fsyncs or locks.
//!
//! Every publish is temp file + fsync + rename + fsync(dir) (docs/protocol.md
//! §8); every state change is a rename that cannot clobber
//! (`renameat2(RENAME_NOREPLACE)`); locks are `flock(2)` locks on plain files,
//! released by the kernel when the holder dies, so a killed process never
//! leaves a stale lock behind.
//!
//! The parts: publishing a whole file (`publish`), a folder another party
//! may write, held open (`held`), reading what someone else may have planted
//! (`read`), and locks (`lock`); here, fsync and the renames that cannot
//! clobber, folders, removal and appends. Every item is reached as
//! `fsx::<name>`, whichever part holds it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

mod held;
mod lock;
mod publish;
mod read;

pub use held::{Entry, HeldDir};
pub use lock::{
    fd_limit, flock_holders, lock, lock_holder, raise_fd_limit, rewrite_locked, try_lock,
    try_lock_dir, Lock,
};
pub use publish::{
    clean_stale_temps, overwrite_unsynced, publish, publish_without_dir_sync, replace,
    replace_unsynced, replace_without_dir_sync, stage, write_private, Staged,
};
pub use read::{open_regular, read_bounded, ReadRefusal};

use read::regular;

static FSYNC: AtomicBool = AtomicBool::new(true);
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Turns fsync on or off for this process (project config `daemon.fsync`).
/// Renames stay atomic either way; only durability across power loss changes.
pub fn set_fsync(on: bool) {
    FSYNC.store(on, Ordering::Relaxed);
}

pub fn fsync_enabled() -> bool {
    FSYNC.load(Ordering::Relaxed)
}

fn sync_file(f: &File) -> io::Result<()> {
    if fsync_enabled() {
        f.sync_all()?;
    }
    Ok(())
}

/// fsync a directory so a rename or create inside it survives a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    if fsync_enabled() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// fsync a file already written in place (an append-only log) so what was
/// appended to it survives a crash; opened without following a symlink and
/// never blocking on a FIFO planted at the path.
pub fn sync_file_at(path: &Path) -> io::Result<()> {
    if !fsync_enabled() {
        return Ok(());
    }
    open_regular(path)?.sync_all()
}

fn parent(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// rename(2) that fails with `AlreadyExists` instead of replacing `to`.
/// Works for files and directories. Falls back to link+unlink for files on
/// filesystems without RENAME_NOREPLACE.
pub fn rename_noreplace_raw(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    use rustix::io::Errno;
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if (e == Errno::INVAL || e == Errno::NOSYS) && !from.is_dir() => {
            fs::hard_link(from, to)?;
            fs::remove_file(from)
        }
        Err(e) => Err(e.into()),
    }
}

/// Moves `from` to `to` without clobbering, then makes both directory entries
/// durable.
pub fn move_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    rename_noreplace_raw(from, to)?;
    sync_dir(parent(to))?;
    if parent(from) != parent(to) {
        sync_dir(parent(from))?;
    }
    Ok(())
}

/// The error of a move whose rename happened but whose directory fsync after
/// it failed: the file *is* at `target` (durability is what is in doubt).
#[derive(Debug)]
pub struct MovedButNotSynced {
    pub target: PathBuf,
    pub source: io::Error,
}

impl std::fmt::Display for MovedButNotSynced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "moved to {}, but the folder fsync failed: {}",
            self.target.display(),
            self.source
        )
    }
}

impl std::error::Error for MovedButNotSynced {}

/// Where the file went when `e` is a [`MovedButNotSynced`] error.
pub fn moved_to(e: &io::Error) -> Option<&Path> {
    e.get_ref()
        .and_then(|i| i.downcast_ref::<MovedButNotSynced>())
        .map(|m| m.target.as_path())
}

/// Moves `from` into `dir` under the first of `names` that is free there (the
/// caller's grammar decides the names). Never overwrites.
/// When the rename succeeded but a directory fsync after it failed, the error
/// is a [`MovedButNotSynced`] (see [`moved_to`]).
pub fn move_into_unique(
    from: &Path,
    dir: &Path,
    names: impl IntoIterator<Item = String>,
) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    for target in names.into_iter().map(|n| dir.join(n)) {
        match rename_noreplace_raw(from, &target) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        let synced = sync_dir(dir).and_then(|_| match parent(from) {
            p if p != dir => sync_dir(p),
            _ => Ok(()),
        });
        return match synced {
            Ok(()) => Ok(target),
            Err(source) => Err(io::Error::new(
                source.kind(),
                MovedButNotSynced { target, source },
            )),
        };
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free name left to move to",
    ))
}

/// [`move_into_unique`] without the folder fsyncs: the rename is atomic and
/// never clobbers, but it is durable only once the caller syncs `dir` and
/// the source folder (group commit shares those fsyncs among many moves).
pub fn move_into_unique_without_sync(
    from: &Path,
    dir: &Path,
    names: impl IntoIterator<Item = String>,
) -> io::Result<PathBuf> {
    if !dir.is_dir() {
        fs::create_dir_all(dir)?;
    }
    for target in names.into_iter().map(|n| dir.join(n)) {
        match rename_noreplace_raw(from, &target) {
            Ok(()) => return Ok(target),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free name left to move to",
    ))
}

/// Creates a directory that must not exist yet (`AlreadyExists` otherwise).
pub fn create_dir_new(dir: &Path) -> io::Result<()> {
    fs::create_dir(dir)?;
    sync_dir(parent(dir))
}

/// Creates every listed directory (and parents) if missing.
/// Each folder created is made durable in its parent: a message
/// published into a brand-new `outbox/` must not lose that folder on a crash.
pub fn ensure_dirs<P: AsRef<Path>>(dirs: &[P]) -> io::Result<()> {
    for d in dirs {
        let d = d.as_ref();
        if d.is_dir() {
            continue;
        }
        let mut created: Vec<&Path> = Vec::new();
        let mut p = d;
        while !p.exists() {
            created.push(p);
            match p.parent() {
                Some(q) if !q.as_os_str().is_empty() => p = q,
                _ => break,
            }
        }
        fs::create_dir_all(d)?;
        for c in created.iter().rev() {
            sync_dir(parent(c))?;
        }
    }
    Ok(())
}

/// Whether the folder `dir` holds no entry at all (an error when it cannot
/// be listed, or does not exist). Reads one entry, never the whole folder.
pub fn is_empty_dir(dir: &Path) -> io::Result<bool> {
    Ok(fs::read_dir(dir)?.next().is_none())
}

/// Removes an empty directory.
pub fn remove_empty_dir(dir: &Path) -> io::Result<()> {
    fs::remove_dir(dir)?;
    sync_dir(parent(dir))
}

/// Removes a file; a missing file is not an error.
pub fn remove_file(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Writes a small file in place (not for queue items): pid files, pointers,
/// config written by `swarm init`. Goes through temp + rename too.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(parent(path), path, bytes)
}

/// Appends one record with a single write(2) on an O_APPEND descriptor, so
/// concurrent appenders never interleave within a line and nothing is ever
/// truncated or rewritten.
///
/// Never follows a symlink and never blocks: a FIFO or device planted at the
/// path is refused, so a log can neither hang nor feed its writer.
pub fn append(path: &Path, bytes: &[u8]) -> io::Result<()> {
    append_len(path, bytes).map(|_| ())
}

/// [`append`], returning the file's length just after the write (what a
/// rotating writer compares with its limit).
pub fn append_len(path: &Path, bytes: &[u8]) -> io::Result<u64> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let mut f = regular(f)?;
    f.write_all(bytes)?;
    Ok(f.metadata()?.len())
}

/// Sets a file's permission bits (`swarm shims` makes its wrappers executable).
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}
