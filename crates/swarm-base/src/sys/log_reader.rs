//! Reading a rotated log (the daemon's `events.jsonl`) from a byte offset,
//! so a consumer can stop and resume exactly where it was, across
//! rotations.
//!
//! An offset is a log offset (sys::logfile): a byte position counted
//! from the first line the log ever had, through every rotated part and the
//! live file, at the start of a line. Only complete lines (ending in `\n`)
//! are handed out; a line still being written waits for its newline. Each
//! line comes with the offset just past it, which is where the next read
//! resumes. A file that never rotated has the same offsets as before.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::sys::logfile;
use crate::text::{escape, is_control};

/// The file being read and where it sits in the log.
struct Open {
    file: File,
    /// Log offset of its first byte.
    start: u64,
    /// (device, inode), to notice the live file being rotated away.
    identity: (u64, u64),
    /// Opened as the live file (a rotated part never grows).
    live: bool,
}

/// Follows one rotated log from an offset.
pub struct EventReader {
    path: PathBuf,
    cur: Option<Open>,
    /// Start of the next unread line.
    pub offset: u64,
}

fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

fn open(path: &Path) -> io::Result<Option<(File, (u64, u64))>> {
    match File::open(path) {
        Ok(f) => {
            let m = f.metadata()?;
            Ok(Some((f, identity(&m))))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// What [`EventReader::poll`] does next.
enum Next {
    /// Read the open file.
    Read,
    /// Look again for the file that holds the offset.
    Again,
    /// Nothing more to read now.
    Done,
}

/// Where an offset is.
enum Found {
    At(Open),
    /// In the live file, which does not exist (yet).
    Nothing,
    /// Before everything still kept: rotated away and removed; the oldest
    /// kept line starts here.
    Removed(u64),
}

/// Finds the file holding `offset`. The live file's start is read before
/// and after opening it: equal, no rotation came in between, so the file
/// opened is the one that starts there.
fn locate(live: &Path, offset: u64) -> io::Result<Found> {
    loop {
        let before = logfile::live_start(live)?;
        let parts = logfile::rotated(live)?;
        if let Some(p) = parts.iter().find(|p| p.start <= offset && offset < p.end()) {
            match open(&p.path)? {
                Some((file, identity)) => {
                    return Ok(Found::At(Open {
                        file,
                        start: p.start,
                        identity,
                        live: false,
                    }))
                }
                // Removed by retention meanwhile: look again.
                None => continue,
            }
        }
        if offset < before {
            let oldest = parts
                .iter()
                .find(|p| p.end() > offset && p.len > 0)
                .map_or(before, |p| p.start);
            return Ok(Found::Removed(oldest));
        }
        let opened = open(live)?;
        if logfile::live_start(live)? != before {
            continue;
        }
        return Ok(match opened {
            Some((file, identity)) => Found::At(Open {
                file,
                start: before,
                identity,
                live: true,
            }),
            None => Found::Nothing,
        });
    }
}

/// The start of the first line at or after `offset` (the oldest kept line
/// when `offset` was rotated away; the end when no line starts after it):
/// where a reader of a log's last bytes begins. Reads at most 1 MiB past
/// `offset` looking for the end of the line it falls in.
pub fn line_at_or_after(path: &Path, offset: u64) -> u64 {
    const LOOK: u64 = 1024 * 1024;
    let found = match locate(path, offset) {
        Ok(f) => f,
        Err(_) => return offset,
    };
    match found {
        Found::Removed(oldest) => oldest,
        Found::Nothing => offset,
        Found::At(o) if offset == o.start => offset,
        Found::At(o) => {
            let len = o.file.metadata().map(|m| m.len()).unwrap_or(0);
            // The byte before `offset`: a newline there means a line starts at it.
            let mut at = offset - o.start - 1;
            let mut buf = vec![0u8; 64 * 1024];
            while at < len && at < offset - o.start + LOOK {
                let n = match o.file.read_at(&mut buf, at) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if let Some(i) = buf[..n].iter().position(|&b| b == b'\n') {
                    return o.start + at + i as u64 + 1;
                }
                at += n as u64;
            }
            o.start + len
        }
    }
}

/// Why [`EventReader::new`] refused an offset, worded for the command's
/// error message (the path as shown, control characters escaped).
#[derive(Debug, thiserror::Error)]
pub enum OffsetError {
    /// The log (or a part of it) could not be read.
    #[error("{shown}: {source}")]
    Io { shown: String, source: io::Error },
    #[error("offset {offset} is beyond the end of {shown} (the file does not exist)")]
    NoFile { offset: u64, shown: String },
    /// In a part retention has removed: where to resume instead.
    #[error(
        "offset {offset} of {shown} is no longer kept: its rotated file was removed \
         (the oldest kept line starts at {oldest})\n  \
         hint: resume with --since {oldest}, or keep more files (swarm.yaml logs.keep)"
    )]
    Removed {
        offset: u64,
        shown: String,
        oldest: u64,
    },
    #[error("offset {offset} is beyond the end of {shown} ({end} bytes so far)")]
    BeyondEnd {
        offset: u64,
        shown: String,
        end: u64,
    },
    #[error("offset {offset} is not at the start of a line in {shown}")]
    MidLine { offset: u64, shown: String },
}

impl EventReader {
    /// Opens the log `path` at `offset`; refuses an offset past the end,
    /// inside a line, or in a part retention has removed (the text says
    /// which, for the command's error message).
    pub fn new(path: &Path, offset: u64) -> Result<EventReader, OffsetError> {
        let shown = escape(&path.display().to_string());
        let err = |source: io::Error| OffsetError::Io {
            shown: shown.clone(),
            source,
        };
        let mut r = EventReader {
            path: path.to_path_buf(),
            cur: None,
            offset,
        };
        let open = match locate(path, offset).map_err(err)? {
            Found::At(o) => o,
            Found::Nothing if offset == logfile::live_start(path).map_err(err)? => return Ok(r),
            Found::Nothing => return Err(OffsetError::NoFile { offset, shown }),
            Found::Removed(oldest) => {
                return Err(OffsetError::Removed {
                    offset,
                    shown,
                    oldest,
                })
            }
        };
        let len = open.file.metadata().map_err(err)?.len();
        let end = open.start + len;
        if offset > end {
            return Err(OffsetError::BeyondEnd { offset, shown, end });
        }
        if offset > open.start {
            let mut b = [0u8; 1];
            open.file
                .read_exact_at(&mut b, offset - open.start - 1)
                .map_err(err)?;
            if b[0] != b'\n' {
                return Err(OffsetError::MidLine { offset, shown });
            }
        }
        r.cur = Some(open);
        Ok(r)
    }

    /// Hands every complete line from the offset on to `emit`, with the
    /// offset just past it, and advances; moves on through rotated parts to
    /// the live file. Returns a notice for stderr when lines were lost (a
    /// part removed before it was read, a truncated file).
    pub fn poll(
        &mut self,
        emit: &mut dyn FnMut(&[u8], u64) -> io::Result<()>,
    ) -> io::Result<Option<String>> {
        let shown = escape(&self.path.display().to_string());
        let mut notice = None;
        loop {
            if self.cur.is_none() {
                match self.open_at_offset(&shown, &mut notice)? {
                    Next::Done => return Ok(notice),
                    Next::Again => continue,
                    Next::Read => {}
                }
            }
            let Some((cur_live, cur_id)) = self.cur.as_ref().map(|c| (c.live, c.identity)) else {
                return Ok(notice);
            };
            self.read_lines(emit)?;
            if cur_live {
                match self.after_live(cur_id, &shown, emit, &mut notice)? {
                    Next::Done => return Ok(notice),
                    Next::Again => continue,
                    Next::Read => {}
                }
            }
            self.finish_part(&shown, &mut notice)?;
        }
    }

    /// Opens the file that holds the offset (a part or the live file).
    fn open_at_offset(&mut self, shown: &str, notice: &mut Option<String>) -> io::Result<Next> {
        match locate(&self.path, self.offset)? {
            // A live file shorter than where we are was replaced or
            // truncated by hand (a rotation starts it at our offset).
            Found::At(o) if o.live && self.offset > o.start + o.file.metadata()?.len() => {
                self.offset = o.start;
                self.cur = Some(o);
                *notice = Some(format!(
                    "notice: {shown} was replaced or truncated; continuing at offset {}",
                    self.offset
                ));
            }
            Found::At(o) => self.cur = Some(o),
            Found::Nothing => return Ok(Next::Done),
            Found::Removed(oldest) => {
                *notice = Some(format!(
                    "notice: {shown}: lines from offset {} to {oldest} were rotated and removed before they were read; continuing at {oldest}",
                    self.offset
                ));
                self.offset = oldest;
                return Ok(Next::Again);
            }
        }
        Ok(Next::Read)
    }

    /// The live file read to its end: done while it is still the live file
    /// (starting over when truncated); read to its end once more when it was
    /// rotated away; started over when it was replaced or removed by hand.
    fn after_live(
        &mut self,
        cur_id: (u64, u64),
        shown: &str,
        emit: &mut dyn FnMut(&[u8], u64) -> io::Result<()>,
        notice: &mut Option<String>,
    ) -> io::Result<Next> {
        match std::fs::metadata(&self.path) {
            Ok(m) if identity(&m) == cur_id => {
                let start = self.cur.as_ref().map_or(0, |c| c.start);
                if m.len() < self.offset - start {
                    self.offset = start;
                    *notice = Some(format!(
                        "notice: {shown} was truncated; continuing at offset {start}"
                    ));
                }
                return Ok(Next::Done);
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // Rotated away: its last lines were appended before the
        // rename, so they are there now.
        self.read_lines(emit)?;
        // A rotation moves the live start past this file; a file
        // deleted or replaced by hand leaves it: the next file
        // starts over at the same offset.
        let start = self.cur.as_ref().map_or(0, |c| c.start);
        if logfile::live_start(&self.path)? == start {
            self.cur = None;
            self.offset = start;
            *notice = Some(format!(
                "notice: {shown} was replaced or removed by hand; continuing with the new file at offset {start}"
            ));
            return Ok(Next::Again);
        }
        Ok(Next::Read)
    }

    /// A part read to its end. A torn last line (a writer killed in
    /// mid-write) can never complete: skip it.
    fn finish_part(&mut self, shown: &str, notice: &mut Option<String>) -> io::Result<()> {
        if let Some(c) = self.cur.take() {
            let end = c.start + c.file.metadata()?.len();
            if self.offset < end {
                *notice = Some(format!(
                    "notice: {shown}: skipped an incomplete last line at offset {} of a rotated file",
                    self.offset
                ));
                self.offset = end;
            }
        }
        Ok(())
    }

    /// The complete lines of the open file from the offset on.
    fn read_lines(&mut self, emit: &mut dyn FnMut(&[u8], u64) -> io::Result<()>) -> io::Result<()> {
        let Some(cur) = self.cur.as_ref() else {
            return Ok(());
        };
        let mut chunk = vec![0u8; 64 * 1024];
        let mut pending: Vec<u8> = Vec::new();
        let mut read_pos = self.offset - cur.start;
        loop {
            let n = cur.file.read_at(&mut chunk, read_pos)?;
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
}

/// Escapes control characters only: a JSON line (which never holds raw
/// control characters) passes through byte for byte, anything else cannot
/// drive the terminal.
pub fn printable(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(line);
    if !s.chars().any(is_control) {
        return s.into_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut buf = [0u8; 4];
    for c in s.chars() {
        if is_control(c) {
            out.push_str(&escape(c.encode_utf8(&mut buf)));
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
    fn reads_on_across_rotations_with_offsets_that_keep_counting() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("events.jsonl");
        std::fs::write(&p, "{\"a\":1}\n{\"b\":2}\n").unwrap();
        let mut r = EventReader::new(&p, 0).unwrap();
        assert_eq!(lines(&mut r).len(), 2);
        logfile::rotate(&p, 4).unwrap();
        std::fs::write(&p, "{\"c\":3}\n").unwrap();
        logfile::rotate(&p, 4).unwrap();
        std::fs::write(&p, "{\"d\":4}\n").unwrap();
        assert_eq!(
            lines(&mut r),
            vec![("{\"c\":3}".into(), 24), ("{\"d\":4}".into(), 32)]
        );
        // Resuming in a rotated part, and refusing a removed one.
        let mut again = EventReader::new(&p, 8).unwrap();
        assert_eq!(lines(&mut again).len(), 3);
        logfile::prune(&p, 1).unwrap();
        let e = EventReader::new(&p, 8).err().unwrap();
        assert!(matches!(e, OffsetError::Removed { oldest: 16, .. }), "{e}");
        let e = e.to_string();
        assert!(
            e.contains("no longer kept") && e.contains("starts at 16"),
            "{e}"
        );
        assert!(EventReader::new(&p, 20).is_err());
        assert!(EventReader::new(&p, 33).is_err());
        assert_eq!(lines(&mut EventReader::new(&p, 24).unwrap()).len(), 1);
    }

    #[test]
    fn a_live_file_replaced_by_hand_is_read_from_its_start() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("events.jsonl");
        std::fs::write(&p, "{\"a\":1}\n{\"b\":2}\n").unwrap();
        let mut r = EventReader::new(&p, 0).unwrap();
        assert_eq!(lines(&mut r).len(), 2);
        std::fs::remove_file(&p).unwrap();
        assert!(lines(&mut r).is_empty());
        std::fs::write(&p, "{\"c\":3}\n{\"d\":4}\n{\"e\":5}\n").unwrap();
        assert_eq!(lines(&mut r).len(), 3);
    }

    #[test]
    fn printable_keeps_json_and_escapes_controls() {
        assert_eq!(printable(b"{\"a\":\"\\n\"}"), "{\"a\":\"\\n\"}");
        assert_eq!(printable(b"x\x1b[2Jy"), "x\\e[2Jy");
    }
}
