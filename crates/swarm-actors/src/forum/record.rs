//! Small state records (forum sessions, discussions): header-format files read
//! with the one parser and written whole by atomic replace.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::header::Message;

/// Largest record read.
pub const MAX_BYTES: u64 = 64 * 1024;

/// A header's value when present and non-empty.
pub fn field(m: &Message, name: impl AsRef<str>) -> Option<String> {
    m.get_named(name)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// Writes a header only when it has a value: the counterpart of `field`.
pub fn push_some(m: &mut Message, name: impl AsRef<str>, value: Option<impl Into<String>>) {
    if let Some(v) = value {
        m.push_named(name, v);
    }
}

/// One record; `Ok(None)` when the file does not exist.
pub fn read(path: &Path) -> Result<Option<Message>> {
    let bytes = match fsx::read_bounded(path, MAX_BYTES) {
        Ok(b) => b,
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::bad_file(path, e)),
    };
    Message::parse_bytes(&bytes)
        .map(Some)
        .map_err(|e| Error::bad_file(path, e))
}

/// Every readable `*.<ext>` record in `dir` (a missing folder is empty);
/// unreadable ones are skipped, so one bad file cannot hide the others.
pub fn list(dir: &Path, ext: &str) -> Result<Vec<(PathBuf, Message)>> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != ext) {
            continue;
        }
        if let Ok(Some(m)) = read(&p) {
            out.push((p, m));
        }
    }
    Ok(out)
}

/// Writes a record whole (temp + rename), creating its folder.
pub fn write(path: &Path, m: &Message) -> Result<()> {
    if let Some(d) = path.parent() {
        fsx::ensure_dirs(&[d]).map_err(|e| Error::io(d, e))?;
    }
    fsx::write_file(path, m.render().as_bytes()).map_err(|e| Error::io(path, e))
}
