//! The only module that writes, renames, fsyncs or locks.
//!
//! Every publish is temp file + fsync + rename + fsync(dir) (docs/protocol.md
//! §8); every state change is a rename that cannot clobber
//! (`renameat2(RENAME_NOREPLACE)`); locks are `flock(2)` locks on plain files,
//! released by the kernel when the holder dies, so a killed process never
//! leaves a stale lock behind.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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

fn temp_name(hint: &str) -> String {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(".{hint}.{}.{n}.{nanos}.tmp", std::process::id())
}

fn write_temp(tmp_dir: &Path, hint: &str, bytes: &[u8], mode: u32) -> io::Result<PathBuf> {
    write_temp_with(tmp_dir, hint, bytes, mode, true)
}

fn write_temp_with(
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

fn replace_with(
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

/// A folder another party may write (a confined agent's own requests
/// folder), held open: opened once without following a symlink, and every
/// later listing, look, move, removal and publish names an entry relative
/// to that handle, so swapping the folder for a symlink after the open
/// reaches nothing outside it. The invariant the caller keeps: the folder's
/// *parent* is not that party's to write (else it could swap the folder
/// before the open; a sandbox's bind-mount point cannot be renamed).
pub struct HeldDir {
    fd: std::os::fd::OwnedFd,
    path: PathBuf,
}

fn entry_name(name: &str) -> io::Result<&str> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a file name: {name:?}"),
        ));
    }
    Ok(name)
}

/// What [`HeldDir::look`] found under a name (never through a symlink).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A regular file of this many bytes.
    File(u64),
    /// Anything else (a symlink, a folder, a FIFO, …).
    Other,
}

impl HeldDir {
    /// Opens `path` (O_DIRECTORY|O_NOFOLLOW): a symlink there is refused.
    pub fn open(path: &Path) -> io::Result<HeldDir> {
        use rustix::fs::{openat, Mode, OFlags, CWD};
        let fd = openat(
            CWD,
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(HeldDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The path it was opened at (for messages only).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The names in the folder (not `.` and `..`; names that are not UTF-8
    /// are left out).
    pub fn names(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in rustix::fs::Dir::read_from(&self.fd)? {
            let e = e?;
            if let Ok(n) = e.file_name().to_str() {
                if n != "." && n != ".." {
                    out.push(n.to_string());
                }
            }
        }
        Ok(out)
    }

    /// What `name` is, without following a symlink (None: no such entry).
    pub fn look(&self, name: &str) -> io::Result<Option<Entry>> {
        use rustix::fs::{statat, AtFlags, FileType};
        match statat(&self.fd, entry_name(name)?, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                Ok(Some(Entry::File(st.st_size.max(0) as u64)))
            }
            Ok(_) => Ok(Some(Entry::Other)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Moves the entry `name` (whatever it is; a symlink moves as itself) to
    /// `to`, in a folder of the caller's own, without clobbering, then
    /// makes both entries durable.
    pub fn move_out(&self, name: &str, to: &Path) -> io::Result<()> {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        let name = entry_name(name)?;
        renameat_with(&self.fd, name, CWD, to, RenameFlags::NOREPLACE)?;
        sync_dir(parent(to))?;
        self.sync()
    }

    /// The folder `name` inside, held in turn (a symlink there is refused).
    pub fn open_dir(&self, name: &str) -> io::Result<HeldDir> {
        use rustix::fs::{openat, Mode, OFlags};
        let fd = openat(
            &self.fd,
            entry_name(name)?,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(HeldDir {
            fd,
            path: self.path.join(name),
        })
    }

    /// The regular file `name`, opened for reading without following a
    /// symlink and without blocking on a FIFO; anything else is refused.
    pub fn open_file(&self, name: &str) -> io::Result<File> {
        use rustix::fs::{openat, Mode, OFlags};
        let fd = openat(
            &self.fd,
            entry_name(name)?,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        regular(File::from(fd))
    }

    /// Removes the folder `name` when it is empty; false when it is not
    /// (or is gone already).
    pub fn remove_empty_dir(&self, name: &str) -> io::Result<bool> {
        use rustix::fs::{unlinkat, AtFlags};
        match unlinkat(&self.fd, entry_name(name)?, AtFlags::REMOVEDIR) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// When `name` last changed, without following a symlink.
    pub fn modified(&self, name: &str) -> io::Result<std::time::SystemTime> {
        use rustix::fs::{statat, AtFlags};
        let st = statat(&self.fd, entry_name(name)?, AtFlags::SYMLINK_NOFOLLOW)?;
        let secs = u64::try_from(st.st_mtime).unwrap_or(0);
        Ok(std::time::UNIX_EPOCH + std::time::Duration::new(secs, st.st_mtime_nsec as u32))
    }

    /// Removes the entry `name` (a file or a symlink; gone already is fine).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        use rustix::fs::{unlinkat, AtFlags};
        match unlinkat(&self.fd, entry_name(name)?, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Publishes `bytes` as `name` (which must not exist): a temp file made
    /// in the folder (never through a symlink), fsynced, renamed without
    /// clobbering, the folder fsynced.
    pub fn publish(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        use rustix::fs::{openat, renameat_with, Mode, OFlags, RenameFlags};
        let name = entry_name(name)?;
        let tmp = temp_name(name);
        let fd = openat(
            &self.fd,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        let mut f = File::from(fd);
        let res = f
            .write_all(bytes)
            .and_then(|_| sync_file(&f))
            .and_then(|_| {
                renameat_with(
                    &self.fd,
                    tmp.as_str(),
                    &self.fd,
                    name,
                    RenameFlags::NOREPLACE,
                )
                .map_err(io::Error::from)
            });
        if let Err(e) = res {
            let _ = self.remove(&tmp);
            return Err(e);
        }
        self.sync()
    }

    fn sync(&self) -> io::Result<()> {
        if fsync_enabled() {
            rustix::fs::fsync(&self.fd)?;
        }
        Ok(())
    }
}

/// Opens `path` for reading without following a symlink and without blocking
/// on a FIFO; anything but a regular file is refused.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    regular(f)
}

fn regular(f: File) -> io::Result<File> {
    if !f.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// Why a bounded read refused a file.
#[derive(Debug)]
pub enum ReadRefusal {
    Symlink,
    NotRegular,
    TooLarge(u64),
    Io(io::Error),
}

impl std::fmt::Display for ReadRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadRefusal::Symlink => write!(f, "symlink"),
            ReadRefusal::NotRegular => write!(f, "not a regular file"),
            ReadRefusal::TooLarge(n) => write!(f, "file too large ({n} bytes)"),
            ReadRefusal::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Reads a queue file without following a symlink, without blocking on a FIFO,
/// and without reading more than `max` bytes.
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, ReadRefusal> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let f = match f {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(ReadRefusal::Symlink),
        Err(e) => return Err(ReadRefusal::Io(e)),
    };
    let meta = f.metadata().map_err(ReadRefusal::Io)?;
    if !meta.file_type().is_file() {
        return Err(ReadRefusal::NotRegular);
    }
    if meta.len() > max {
        return Err(ReadRefusal::TooLarge(meta.len()));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    f.take(max.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(ReadRefusal::Io)?;
    if buf.len() as u64 > max {
        return Err(ReadRefusal::TooLarge(buf.len() as u64));
    }
    Ok(buf)
}

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

fn open_lock_file(path: &Path) -> io::Result<File> {
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

/// Rewrites the content of a held lock file in place (the pid file): the file
/// must stay the same inode because the lock lives on it.
pub fn rewrite_locked(lock: &Lock, bytes: &[u8]) -> io::Result<()> {
    let mut f = &lock.file;
    f.set_len(0)?;
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(0))?;
    f.write_all(bytes)?;
    sync_file(&lock.file)
}

/// Sets a file's permission bits (`swarm shims` makes its wrappers executable).
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noreplace_refuses_existing_target() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let b = d.path().join("b");
        fs::write(&a, "a").unwrap();
        fs::write(&b, "b").unwrap();
        let e = move_noreplace(&a, &b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&b).unwrap(), "b");
        assert!(a.exists());
    }

    #[test]
    fn replace_keeps_mode() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        fs::write(&a, "old").unwrap();
        fs::set_permissions(&a, fs::Permissions::from_mode(0o640)).unwrap();
        replace(d.path(), &a, b"new").unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "new");
        assert_eq!(
            fs::metadata(&a).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn read_bounded_refuses_symlink_fifo_and_big() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        fs::write(&f, "0123456789").unwrap();
        assert!(matches!(
            read_bounded(&f, 5),
            Err(ReadRefusal::TooLarge(10))
        ));
        let l = d.path().join("l");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        assert!(matches!(read_bounded(&l, 100), Err(ReadRefusal::Symlink)));
        let p = d.path().join("p");
        rustix::fs::mkfifoat(rustix::fs::CWD, &p, rustix::fs::Mode::from(0o644)).unwrap();
        assert!(matches!(
            read_bounded(&p, 100),
            Err(ReadRefusal::NotRegular)
        ));
    }

    #[test]
    fn stale_temps_go_fresh_and_foreign_entries_stay() {
        let d = tempfile::tempdir().unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        let stale = d.path().join(".a.handoff.1.0.2.tmp");
        let fresh = d.path().join(".b.handoff.1.1.2.tmp");
        let other = d.path().join("planted.tmp");
        for p in [&stale, &fresh, &other] {
            fs::write(p, "x").unwrap();
        }
        for p in [&stale, &other] {
            File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        let link = d.path().join(".c.handoff.1.2.2.tmp");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let n = clean_stale_temps(d.path(), std::time::Duration::from_secs(3600)).unwrap();
        assert_eq!(n, 1);
        assert!(!stale.exists() && fresh.exists() && other.exists());
        assert!(fs::symlink_metadata(&link).is_ok());
    }

    #[test]
    fn a_folder_lock_is_exclusive_and_names_its_holder() {
        let d = tempfile::tempdir().unwrap();
        let held = try_lock_dir(d.path()).unwrap().unwrap();
        assert!(try_lock_dir(d.path()).unwrap().is_none());
        assert_eq!(lock_holder(d.path()), Some(std::process::id()));
        drop(held);
        assert!(try_lock_dir(d.path()).unwrap().is_some());
    }

    #[test]
    fn try_lock_sees_holder() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("l");
        let held = lock(&p).unwrap();
        assert!(try_lock(&p).unwrap().is_none());
        drop(held);
        assert!(try_lock(&p).unwrap().is_some());
    }
}
