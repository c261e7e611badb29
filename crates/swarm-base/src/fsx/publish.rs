//! Publishing a file: written whole into a temp file beside nothing that
//! watches it, fsynced, renamed into place, and the folder fsynced
//! (docs/protocol.md §8). The invariant: a reader finds the file complete
//! or absent, never part of it, and a temp file a killed writer left is
//! named so that `clean_stale_temps` can tell it from anything else.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::{parent, remove_file, rename_noreplace_raw, sync_dir, sync_file, TEMP_COUNTER};

pub(super) fn temp_name(hint: &str) -> String {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(".{hint}.{}.{n}.{nanos}.tmp", std::process::id())
}

pub(super) fn write_temp(
    tmp_dir: &Path,
    hint: &str,
    bytes: &[u8],
    mode: u32,
) -> io::Result<PathBuf> {
    write_temp_with(tmp_dir, hint, bytes, mode, true)
}

pub(super) fn write_temp_with(
    tmp_dir: &Path,
    hint: &str,
    bytes: &[u8],
    mode: u32,
    durable: bool,
) -> io::Result<PathBuf> {
    let tmp = tmp_dir.join(temp_name(hint));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    let res = f
        .write_all(bytes)
        .and_then(|_| f.set_permissions(fs::Permissions::from_mode(mode)))
        .and_then(|_| if durable { sync_file(&f) } else { Ok(()) });
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Publishes `bytes` at `dest` (which must not exist): written to a temp file
/// in `tmp_dir` (same filesystem, a folder nobody lists as a queue), fsynced,
/// renamed without clobbering, directory fsynced. `dest` is never visible
/// half-written.
pub fn publish(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let hint = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = write_temp(tmp_dir, &hint, bytes, 0o644)?;
    match rename_noreplace_raw(&tmp, dest) {
        Ok(()) => {}
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    }
    sync_dir(parent(dest))
}

/// [`publish`] without the fsync of `dest`'s folder: the file is fsynced and
/// renamed into place (complete-or-absent for every reader), but its entry is
/// durable only once the caller runs [`sync_dir`] on that folder. Lets a
/// group of copies into one folder share that fsync (group commit); the
/// caller must not treat the copy as delivered before it.
pub fn publish_without_dir_sync(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let hint = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = write_temp(tmp_dir, &hint, bytes, 0o644)?;
    if let Err(e) = rename_noreplace_raw(&tmp, dest) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// A file copied from a reader into a temp file, fsynced, not yet visible
/// under any name of its own: the caller judges what was copied (hashes it
/// while it streams by) and only then [`Staged::publish`]es it, or drops it
/// (the temp file is removed). What is published is exactly what was judged,
/// whatever the source does afterwards.
#[derive(Debug)]
pub struct Staged {
    tmp: Option<PathBuf>,
}

/// Copies `from` into a temp file in `tmp_dir` (same filesystem as where it
/// will be published) of mode `mode`, fsynced.
pub fn stage(tmp_dir: &Path, hint: &str, from: &mut dyn Read, mode: u32) -> io::Result<Staged> {
    let tmp = tmp_dir.join(temp_name(hint));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    let staged = Staged {
        tmp: Some(tmp.clone()),
    };
    io::copy(from, &mut f)?;
    f.set_permissions(fs::Permissions::from_mode(mode))?;
    sync_file(&f)?;
    Ok(staged)
}

impl Staged {
    /// Renames the copy to `dest` without clobbering, then fsyncs `dest`'s
    /// folder. An existing `dest` is `AlreadyExists` (the copy is removed).
    pub fn publish(mut self, dest: &Path) -> io::Result<()> {
        let Some(tmp) = self.tmp.take() else {
            return Err(io::Error::other("published already"));
        };
        if let Err(e) = rename_noreplace_raw(&tmp, dest) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        sync_dir(parent(dest))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = fs::remove_file(tmp);
        }
    }
}

/// Atomically replaces the content of an existing file, keeping its mode: temp
/// file in `tmp_dir`, fsync, rename(2) over the target, fsync(dir). The target
/// never disappears, not even for an instant.
pub fn replace(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(tmp_dir, dest, bytes, true, true)
}

/// [`replace`] without the fsync of `dest`'s folder: the new content is
/// durable (the temp file was fsynced), the name pointing at it only once
/// the caller fsyncs a folder holding it, e.g. after moving it on (the
/// completion stamp, then the move to `completed/`: docs/protocol.md §8).
pub fn replace_without_dir_sync(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(tmp_dir, dest, bytes, true, false)
}

/// [`replace`] without its two fsyncs: still atomic for every reader (temp +
/// rename), but an OS crash may bring back the old content, or an empty
/// file. Only for state whose loss the caller can repair (the sequence).
pub fn replace_unsynced(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(tmp_dir, dest, bytes, false, false)
}

/// Writes `bytes` over the start of `dest` in place, then cuts the file to
/// their length, when `dest` is a regular file with one name; otherwise (no
/// file yet, a symlink, a FIFO, a second hard link) as [`replace_unsynced`].
///
/// Why: a replace creates an inode and frees one, and on ext4 without a
/// journal every creation scans past the inodes freed in the last minutes,
/// so under a busy swarm each replace grew dearer (docs/benchmarks.md, "Where
/// a hop's time goes"). The invariant the caller must keep: every reader and
/// writer of `dest` holds one lock, because an in-place write is not atomic
/// for a reader; and the reader rejects what a kill between the write and
/// the cut leaves (the new bytes followed by old ones) and repairs it.
pub fn overwrite_unsynced(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let opened = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(dest);
    if let Ok(f) = opened {
        let m = f.metadata()?;
        if m.file_type().is_file() && m.nlink() == 1 {
            f.write_all_at(bytes, 0)?;
            if m.len() > bytes.len() as u64 {
                f.set_len(bytes.len() as u64)?;
            }
            return Ok(());
        }
    }
    replace_unsynced(tmp_dir, dest, bytes)
}

pub(super) fn replace_with(
    tmp_dir: &Path,
    dest: &Path,
    bytes: &[u8],
    durable: bool,
    dir_sync: bool,
) -> io::Result<()> {
    let mode = match fs::metadata(dest) {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0o644,
        Err(e) => return Err(e),
    };
    let hint = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = write_temp_with(tmp_dir, &hint, bytes, mode, durable)?;
    if let Err(e) = fs::rename(&tmp, dest) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if durable && dir_sync {
        sync_dir(parent(dest))
    } else {
        Ok(())
    }
}

/// Writes a secret (mode 0600 from its first byte: never readable by others,
/// not even for an instant), replacing `dest`: temp file in `tmp_dir`, fsync,
/// rename(2), fsync(dir). For `swarm serve`'s token.
pub fn write_private(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let hint = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = write_temp(tmp_dir, &hint, bytes, 0o600)?;
    if let Err(e) = fs::rename(&tmp, dest) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(parent(dest))
}

/// Removes the temp files [`publish`] and [`replace`] leave behind when
/// killed mid-write: regular files (never a symlink, a folder or anything
/// else) named `.<hint>.<pid>.<n>.<nanos>.tmp`, last modified more than
/// `older_than` ago, so a writer still in flight keeps its file. Returns how
/// many were removed.
pub fn clean_stale_temps(dir: &Path, older_than: std::time::Duration) -> io::Result<usize> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with('.') && name.ends_with(".tmp")) {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(e.path()) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > older_than);
        if meta.file_type().is_file() && old && remove_file(&e.path()).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        sync_dir(dir)?;
    }
    Ok(removed)
}
