//! Reading the telemetry's JSON Lines files (the usage journal, budget
//! raises), which anyone with write access to the project can append to:
//! a line longer than the limit, not UTF-8 or not a record is skipped and
//! counted, never fatal, and never read whole into memory.

use std::io::{BufRead, BufReader, Read as _};
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::fsx;

/// Every record of `path` that parses and that `keep` accepts, oldest
/// first, and how many lines were skipped. A missing file has none.
pub fn read<T: DeserializeOwned>(
    path: &Path,
    max_line: usize,
    keep: impl Fn(&T) -> bool,
) -> Result<(Vec<T>, usize)> {
    read_from(path, 0, max_line, keep).map(|(v, s, _)| (v, s))
}

/// [`read`] from byte `offset` on (the start of a line); also returns the
/// offset just past the last complete line, where the next read starts (a
/// line still being written is left for it).
pub fn read_from<T: DeserializeOwned>(
    path: &Path,
    offset: u64,
    max_line: usize,
    keep: impl Fn(&T) -> bool,
) -> Result<(Vec<T>, usize, u64)> {
    use std::io::Seek as _;
    let mut file = match fsx::open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0, 0)),
        Err(e) => return Err(Error::io(path, e)),
    };
    file.seek(std::io::SeekFrom::Start(offset))
        .map_err(|e| Error::io(path, e))?;
    let mut at = offset;
    let mut out = Vec::new();
    let mut skipped = 0;
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut reader)
            .take(max_line as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(path, e))?;
        if n == 0 || (buf.last() != Some(&b'\n') && n <= max_line) {
            // The end, or a last line still being written: left for later.
            break;
        }
        at += n as u64;
        if buf.last() != Some(&b'\n') && n > max_line {
            // An overlong line: skip the rest of it.
            skipped += 1;
            let mut rest = Vec::new();
            at += reader
                .read_until(b'\n', &mut rest)
                .map_err(|e| Error::io(path, e))? as u64;
            continue;
        }
        match std::str::from_utf8(&buf)
            .ok()
            .and_then(|s| serde_json::from_str::<T>(s.trim_end()).ok())
            .filter(|r| keep(r))
        {
            Some(r) => out.push(r),
            None => skipped += 1,
        }
    }
    Ok((out, skipped, at))
}
