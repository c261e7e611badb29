//! A folder another party may write, held open so that every later look,
//! move, removal and publish names an entry relative to the handle. The
//! invariant: swapping the folder for a symlink after the open reaches
//! nothing outside it.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::publish::temp_name;
use super::read::regular;
use super::{fsync_enabled, parent, sync_dir, sync_file};

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

pub(super) fn entry_name(name: &str) -> io::Result<&str> {
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

    pub(super) fn sync(&self) -> io::Result<()> {
        if fsync_enabled() {
            rustix::fs::fsync(&self.fd)?;
        }
        Ok(())
    }
}
