//! Reading a file someone else may have planted: never through a symlink,
//! never blocked on a FIFO, never more than a bound. The invariant: what
//! is read is a regular file's bytes, at most `max` of them.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` for reading without following a symlink and without blocking
/// on a FIFO; anything but a regular file is refused.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    regular(f)
}

pub(super) fn regular(f: File) -> io::Result<File> {
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

impl std::error::Error for ReadRefusal {}

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
