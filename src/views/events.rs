//! Reading the daemon's `events.jsonl` from a byte offset, so a consumer can
//! stop and resume exactly where it was.
//!
//! An offset is a byte position in the file at the start of a line. Only
//! complete lines (ending in `\n`) are handed out; a line still being written
//! waits for its newline. Each line comes with the offset just past it, which
//! is where the next read resumes.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Follows one append-only file from an offset.
pub struct EventReader {
    path: PathBuf,
    file: Option<File>,
    /// (device, inode) of the open file, to notice a rotation.
    identity: Option<(u64, u64)>,
    /// Start of the next unread line.
    pub offset: u64,
}

fn open(path: &Path) -> io::Result<Option<(File, (u64, u64))>> {
    match File::open(path) {
        Ok(f) => {
            let m = f.metadata()?;
            Ok(Some((f, (m.dev(), m.ino()))))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl EventReader {
    /// Opens `path` at `offset`; refuses an offset past the end or inside a
    /// line (the text says which, for the command's error message).
    pub fn new(path: &Path, offset: u64) -> Result<EventReader, String> {
        let shown = crate::text::escape(&path.display().to_string());
        let opened = open(path).map_err(|e| format!("{shown}: {e}"))?;
        let mut r = EventReader {
            path: path.to_path_buf(),
            file: None,
            identity: None,
            offset,
        };
        let Some((f, id)) = opened else {
            if offset > 0 {
                return Err(format!(
                    "offset {offset} is beyond the end of {shown} (the file does not exist)"
                ));
            }
            return Ok(r);
        };
        let len = f.metadata().map_err(|e| format!("{shown}: {e}"))?.len();
        if offset > len {
            return Err(format!(
                "offset {offset} is beyond the end of {shown} ({len} bytes); was the file rotated?"
            ));
        }
        if offset > 0 {
            let mut b = [0u8; 1];
            f.read_exact_at(&mut b, offset - 1)
                .map_err(|e| format!("{shown}: {e}"))?;
            if b[0] != b'\n' {
                return Err(format!(
                    "offset {offset} is not at the start of a line in {shown}"
                ));
            }
        }
        r.file = Some(f);
        r.identity = Some(id);
        Ok(r)
    }

    /// Hands every complete line from the offset on to `emit`, with the offset
    /// just past it, and advances.
    pub fn poll(&mut self, emit: &mut dyn FnMut(&[u8], u64) -> io::Result<()>) -> io::Result<()> {
        if self.file.is_none() {
            match open(&self.path)? {
                Some((f, id)) => {
                    self.file = Some(f);
                    self.identity = Some(id);
                }
                None => return Ok(()),
            }
        }
        let Some(f) = self.file.as_ref() else {
            return Ok(());
        };
        let mut chunk = vec![0u8; 64 * 1024];
        let mut pending: Vec<u8> = Vec::new();
        let mut read_pos = self.offset;
        loop {
            let n = f.read_at(&mut chunk, read_pos)?;
            if n == 0 {
                return Ok(());
            }
            read_pos += n as u64;
            let mut start = 0;
            while let Some(i) = chunk[start..n].iter().position(|&b| b == b'\n') {
                let end = start + i;
                let line: &[u8] = if pending.is_empty() {
                    &chunk[start..end]
                } else {
                    pending.extend_from_slice(&chunk[start..end]);
                    &pending
                };
                let next = self.offset + line.len() as u64 + 1;
                emit(line, next)?;
                self.offset = next;
                pending.clear();
                start = end + 1;
            }
            pending.extend_from_slice(&chunk[start..n]);
        }
    }

    /// Notices a rotated (replaced) or truncated file: finishes the old file's
    /// complete lines, then starts the new one at offset 0. Returns a notice
    /// for stderr when that happened.
    pub fn reopen_if_replaced(
        &mut self,
        emit: &mut dyn FnMut(&[u8], u64) -> io::Result<()>,
    ) -> io::Result<Option<String>> {
        let shown = crate::text::escape(&self.path.display().to_string());
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let now = (meta.dev(), meta.ino());
        if self.identity.is_some_and(|id| id != now) {
            self.poll(emit)?;
            self.file = None;
            self.identity = None;
            self.offset = 0;
            return Ok(Some(format!(
                "notice: {shown} was replaced (rotated); continuing with the new file at offset 0"
            )));
        }
        if self.identity.is_some() && meta.len() < self.offset {
            self.offset = 0;
            return Ok(Some(format!(
                "notice: {shown} was truncated; continuing at offset 0"
            )));
        }
        Ok(None)
    }
}

/// Escapes control characters only: a JSON line (which never holds raw
/// control characters) passes through byte for byte, anything else cannot
/// drive the terminal.
pub fn printable(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(line);
    if !s.chars().any(crate::text::is_control) {
        return s.into_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut buf = [0u8; 4];
    for c in s.chars() {
        if crate::text::is_control(c) {
            out.push_str(&crate::text::escape(c.encode_utf8(&mut buf)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(r: &mut EventReader) -> Vec<(String, u64)> {
        let mut v = Vec::new();
        r.poll(&mut |l, o| {
            v.push((String::from_utf8_lossy(l).into_owned(), o));
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn resumes_exactly_and_holds_back_partial_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("events.jsonl");
        std::fs::write(&p, "{\"a\":1}\n{\"b\":2}\n{\"c\"").unwrap();
        let mut r = EventReader::new(&p, 0).unwrap();
        assert_eq!(
            lines(&mut r),
            vec![("{\"a\":1}".into(), 8), ("{\"b\":2}".into(), 16)]
        );
        assert!(lines(&mut r).is_empty());
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b":3}\n").unwrap();
        assert_eq!(lines(&mut r), vec![("{\"c\":3}".into(), 24)]);
        let mut again = EventReader::new(&p, 8).unwrap();
        assert_eq!(lines(&mut again).len(), 2);
        assert!(EventReader::new(&p, 3).is_err());
        assert!(EventReader::new(&p, 99).is_err());
    }

    #[test]
    fn printable_keeps_json_and_escapes_controls() {
        assert_eq!(printable(b"{\"a\":\"\\n\"}"), "{\"a\":\"\\n\"}");
        assert_eq!(printable(b"x\x1b[2Jy"), "x\\e[2Jy");
    }
}
