//! One event trail across hosts: the bridge publishes each complete line of
//! this host's `events.jsonl` (offsets counted across rotations, so one
//! offset names one line for good) with `Nats-Msg-Id`
//! `ev:<host>:<offset>:<digest>`,
//! and mirrors every host's lines into `.swarmforge/bridge/events/<host>.jsonl`
//! as `{"host":…,"offset":…,"len":…,"event":{…}}`, skipping a line it
//! already holds.
//!
//! One offset names one line for good only if the line outlives a power
//! cut: the daemon appends without an fsync, and a cut loses the unsynced
//! tail, so the next lines would be written at offsets already published.
//! So the bridge publishes only what is durable ([`durable_end`]: it
//! fsyncs the journal itself, and without that only up to handoffd's
//! progress mark, which handoffd fsyncs the journal for). A mirror keeps
//! one line per offset range: a line at an offset it holds with other
//! content, or overlapping a line it holds, is a rewritten range (a journal
//! that lost published lines, or a line published in that host's name by
//! someone else). It keeps the line it holds, refuses the other and records
//! both (bridge::refusals), so `swarm audit --check` fails instead of the
//! mirror silently keeping either.

use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::fsx;
use crate::protocol::layout::Project;
use crate::sys::logfile;

/// Largest event line published (a longer one is skipped, never split).
pub const MAX_LINE: usize = 256 * 1024;

/// One complete line of `events.jsonl` and where it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub offset: u64,
    pub text: String,
}

impl Line {
    /// Its `Nats-Msg-Id`, `ev:<host>:<offset>:<digest>`: the digest (of
    /// the line, 16 hex digits of its SHA-256) because a line written at
    /// an offset whose published line a power cut took is another line,
    /// which JetStream must not drop as a repeat of the first.
    pub fn msg_id(&self, host: &str) -> String {
        let digest = crate::protocol::audit_pending::sha256_hex(self.text.as_bytes());
        format!("ev:{host}:{}:{}", self.offset, &digest[..16])
    }
}

/// Up to `max` complete lines from absolute offset `from` that end at or
/// before `until`, and the offset after the last one returned.
pub fn read_from(
    project: &Project,
    from: u64,
    until: u64,
    max: usize,
) -> io::Result<(Vec<Line>, u64)> {
    let live = project.events_file();
    let mut sources: Vec<(PathBuf, u64)> = logfile::rotated(&live)?
        .into_iter()
        .filter(|p| p.end() > from)
        .map(|p| (p.path, p.start))
        .collect();
    sources.push((live.clone(), logfile::live_start(&live)?));
    let mut out = Vec::new();
    let mut pos = from;
    for (path, start) in sources {
        if out.len() >= max {
            break;
        }
        // Lines removed by pruning are gone; carry on from what is kept.
        pos = pos.max(start);
        if pos >= until {
            break;
        }
        let mut f = match fsx::open_regular(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        f.seek(SeekFrom::Start(pos - start))?;
        let mut buf = Vec::new();
        // A line that ends after `until` lacks its newline here.
        f.take((until - pos).min(4 * 1024 * 1024))
            .read_to_end(&mut buf)?;
        let mut at = 0;
        while let Some(nl) = buf[at..].iter().position(|&b| b == b'\n') {
            let line = &buf[at..at + nl];
            if line.len() <= MAX_LINE && !line.is_empty() {
                out.push(Line {
                    offset: pos,
                    text: String::from_utf8_lossy(line).into_owned(),
                });
            }
            pos += nl as u64 + 1;
            at += nl + 1;
            if out.len() >= max {
                break;
            }
        }
    }
    Ok((out, pos))
}

/// The offset after the last line of this host's events now (offsets
/// counted across rotations): every event at a smaller offset was written.
pub fn end_offset(project: &Project) -> io::Result<u64> {
    let live = project.events_file();
    let len = match std::fs::metadata(&live) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e),
    };
    Ok(logfile::live_start(&live)? + len)
}

/// The end of this host's events that a power cut cannot take back, at
/// least `published` (what was published already): the end now, once the
/// journal is fsynced (a rotated part was fsynced whole before its rename,
/// daemon/journal.rs). When the fsync fails, handoffd's progress mark,
/// which it fsyncs the journal for before writing it (daemon/progress.rs),
/// and the error.
pub fn durable_end(project: &Project, published: u64) -> (u64, Option<io::Error>) {
    let end = match end_offset(project) {
        Ok(e) => e,
        Err(e) => return (published, Some(e)),
    };
    if end <= published {
        return (end, None);
    }
    match fsx::sync_file_at(&project.events_file()) {
        Ok(()) => (end, None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => (end, None),
        Err(e) => {
            let mark = crate::daemon::progress::read_mark(project).map_or(0, |m| m.offset);
            (mark.clamp(published, end), Some(e))
        }
    }
}

/// Where a bridge that finds its journal ending at `end`, before what it
/// published, publishes from again: the live file's start when that is
/// within [`REWIND`], else the first line starting at least `REWIND`
/// before `end`.
pub fn rewind_point(project: &Project, end: u64) -> io::Result<u64> {
    let live = project.events_file();
    let start = logfile::live_start(&live)?;
    let from = end.saturating_sub(REWIND);
    if from <= start {
        return Ok(start);
    }
    // The byte before `from` tells whether a line starts there.
    let mut f = fsx::open_regular(&live)?;
    f.seek(SeekFrom::Start(from - 1 - start))?;
    let mut buf = Vec::new();
    f.take(MAX_LINE as u64 + 2).read_to_end(&mut buf)?;
    match buf.iter().position(|&b| b == b'\n') {
        Some(nl) => Ok(from + nl as u64),
        None => Ok(end),
    }
}

/// How far this host's events were published.
pub fn load_offset(project: &Project) -> u64 {
    load_published(project).0
}

/// How far this host's events were published, and the fingerprint of the
/// bytes just before that offset when it was saved ([`tail_fingerprint`];
/// `None` in a file saved before fingerprints were kept).
pub fn load_published(project: &Project) -> (u64, Option<String>) {
    let text = std::fs::read_to_string(project.bridge_events_offset()).unwrap_or_default();
    let mut words = text.split_whitespace();
    let offset = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    (offset, words.next().map(str::to_string))
}

/// Saves `offset` as published, with the fingerprint of the bytes before it.
pub fn save_offset(project: &Project, offset: u64) -> io::Result<()> {
    fsx::ensure_dirs(&[project.bridge_tmp()])?;
    let text = match tail_fingerprint(project, offset)? {
        Some(t) => format!("{offset} {t}\n"),
        None => format!("{offset}\n"),
    };
    fsx::replace(
        &project.bridge_tmp(),
        &project.bridge_events_offset(),
        text.as_bytes(),
    )
}

/// How many bytes before a published offset its fingerprint covers.
const TAIL: u64 = 256;

/// The SHA-256 (16 hex digits) of up to [`TAIL`] bytes of the live
/// journal just before `offset` (`None` when none of them is in the live
/// file, since the rotated parts were fsynced whole and a power cut cannot
/// rewrite them; or when the journal ends before `offset`).
///
/// Why: a journal that lost published lines to a power cut and was
/// written again past the old end before the bridge looked is no shorter
/// than what was published, only different; its bytes before the
/// published offset tell.
pub fn tail_fingerprint(project: &Project, offset: u64) -> io::Result<Option<String>> {
    let live = project.events_file();
    let start = logfile::live_start(&live)?;
    let from = offset.saturating_sub(TAIL).max(start);
    if from >= offset {
        return Ok(None);
    }
    let mut f = match fsx::open_regular(&live) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    f.seek(SeekFrom::Start(from - start))?;
    let mut buf = Vec::new();
    f.take(offset - from).read_to_end(&mut buf)?;
    if (buf.len() as u64) < offset - from {
        // The journal ends before the offset: its length tells that.
        return Ok(None);
    }
    let digest = crate::protocol::audit_pending::sha256_hex(&buf);
    Ok(Some(digest[..16].to_string()))
}

/// Why a journal ending at `end` lost lines published up to `offset`.
pub fn shorter_than_published(end: u64, offset: u64) -> String {
    format!("ends at offset {end}, before offset {offset} already published")
}

/// How the journal lost lines published up to `offset` (`tail`: the
/// fingerprint saved with it), and where to rewind from: `None` when it
/// still holds them, or when nothing can be told (no fingerprint, the live
/// file rotated past them, unreadable now).
pub fn lost_since_published(
    project: &Project,
    offset: u64,
    tail: Option<&str>,
) -> Option<(String, u64)> {
    let end = end_offset(project).ok()?;
    if end < offset {
        return Some((shorter_than_published(end, offset), end));
    }
    match tail_fingerprint(project, offset) {
        Ok(Some(now)) if tail.is_some_and(|t| t != now) => Some((
            format!("holds other bytes before offset {offset} than were published"),
            offset,
        )),
        _ => None,
    }
}

/// The mirror of every host's events on this host.
#[derive(Debug, Default)]
pub struct Mirror {
    /// Per host, what its mirror holds (read back at first use).
    held: HashMap<String, Held>,
}

/// How many of the newest lines of a host's mirror are remembered, so a
/// redelivery (or a republished range, [`REWIND`]) is told from a rewrite
/// without reading the file.
const RECENT: usize = 8192;

/// How far back a bridge that finds its journal shorter than what it
/// published publishes again (at least to the live file's start when that
/// is nearer): the lines written since the loss lie in it, and the mirrors
/// tell a line they hold from a rewritten one.
pub const REWIND: u64 = 1024 * 1024;

/// One mirrored line: its offset, its length in its host's journal (None
/// in lines mirrored before lengths were kept) and its event.
type Held1 = (u64, Option<u64>, serde_json::Value);

/// What is remembered of a held line: offset, length, event digest.
type Seen = (u64, Option<u64>, u64);

fn digest(event: &serde_json::Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    event.to_string().hash(&mut h);
    h.finish()
}

/// What one host's mirror holds.
#[derive(Debug, Default)]
struct Held {
    /// Where the next line of that host's journal starts, as far as the
    /// mirror knows: the end of its newest line.
    end: u64,
    recent: std::collections::VecDeque<Seen>,
}

impl Held {
    fn push(&mut self, h: &Held1) {
        self.end = self.end.max(h.0 + h.1.map_or(1, |l| l + 1));
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((h.0, h.1, digest(&h.2)));
    }
}

/// A mirrored line of the file `{"host","offset","len","event"}`.
fn parse_held(line: &str) -> Option<Held1> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let offset = v["offset"].as_u64()?;
    Some((offset, v["len"].as_u64(), v["event"].clone()))
}

/// Calls `f` with every line of a mirror file, in order, until it says stop.
fn each_held(path: &Path, mut f: impl FnMut(Held1) -> bool) {
    use std::io::BufRead;
    let Ok(file) = fsx::open_regular(path) else {
        return;
    };
    for line in io::BufReader::new(file).split(b'\n').map_while(Result::ok) {
        if let Some(h) = parse_held(&String::from_utf8_lossy(&line)) {
            if !f(h) {
                return;
            }
        }
    }
}

/// The line of a mirror file at `offset`, if it holds one.
fn find_held(path: &Path, offset: u64) -> Option<Held1> {
    let mut found = None;
    each_held(path, |h| {
        let before = h.0 < offset;
        if h.0 == offset {
            found = Some(h);
        }
        found.is_none() && before
    });
    found
}

impl Mirror {
    pub fn file(project: &Project, host: &str) -> PathBuf {
        project.bridge_events().join(format!("{host}.jsonl"))
    }

    /// Appends one received line unless the mirror already holds it (lines
    /// of one host arrive in offset order through one consumer). A line
    /// that claims bytes of that host's journal the mirror holds another
    /// line for is refused (InvalidData) and recorded.
    pub fn apply(
        &mut self,
        project: &Project,
        host: &str,
        offset: u64,
        text: &str,
    ) -> io::Result<bool> {
        let path = Mirror::file(project, host);
        let held = self.held.entry(host.to_string()).or_insert_with(|| {
            let mut h = Held::default();
            each_held(&path, |l| {
                h.push(&l);
                true
            });
            h
        });
        let event: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let len = text.len() as u64;
        if offset < held.end {
            let same = |l: Option<u64>, d: u64| d == digest(&event) && l.is_none_or(|l| l == len);
            if held.recent.iter().any(|h| h.0 == offset && same(h.1, h.2)) {
                return Ok(false);
            }
            // Older than what is remembered, or held there with other
            // content: read the held line from the file.
            let older = held.recent.front().is_none_or(|f| offset < f.0);
            let found = (older || held.recent.iter().any(|h| h.0 == offset))
                .then(|| find_held(&path, offset))
                .flatten();
            return match found {
                Some((_, l, ev)) if same(l, digest(&ev)) => Ok(false),
                found => Err(rewritten(project, host, offset, found.as_ref(), &event)),
            };
        }
        let line = serde_json::json!({"host": host, "offset": offset, "len": len, "event": event})
            .to_string()
            + "\n";
        fsx::ensure_dirs(&[project.bridge_events()])?;
        fsx::append(&path, line.as_bytes())?;
        // Durable before it is acknowledged: a trail record cites its
        // offset (bridge::vouch), and a line a power cut took from here
        // would never come again.
        fsx::sync_file_at(&path)?;
        held.push(&(offset, Some(len), event));
        Ok(true)
    }
}

/// Records a line of `host` at `offset` that the mirror holds another line
/// for (`held`; None: a held line covers that offset) and says why it is
/// refused.
fn rewritten(
    project: &Project,
    host: &str,
    offset: u64,
    held: Option<&Held1>,
    event: &serde_json::Value,
) -> io::Error {
    let said = |e: &serde_json::Value| {
        format!(
            "'{} {}'",
            e["kind"].as_str().unwrap_or("?"),
            e["id"].as_str().unwrap_or("-")
        )
    };
    let why = match held {
        Some((_, _, h)) => format!(
            "a line {} at offset {offset} of host {host}'s journal, where the mirror holds {}: a rewritten range (that host lost lines it had published, or someone published in its name); the mirror keeps the line it holds",
            said(event),
            said(h)
        ),
        None => format!(
            "a line {} at offset {offset} of host {host}'s journal, inside a line the mirror holds: a rewritten range (that host lost lines it had published, or someone published in its name); the mirror keeps the line it holds",
            said(event)
        ),
    };
    let file = Mirror::file(project, host).display().to_string();
    let r = super::refusals::Refusal::new("journal_rewritten", host, Some(offset), &file, &why);
    if let Err(e) = super::refusals::record(project, &r) {
        // Not acknowledged then: redelivered, and recorded next time.
        return io::Error::other(format!("{}: {e}", project.bridge_refused().display()));
    }
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Every mirrored event of every host, in time order (ties by host, offset).
pub fn all(project: &Project) -> Vec<serde_json::Value> {
    let dir = project.bridge_events();
    let mut v: Vec<serde_json::Value> = crate::protocol::layout::names_in(&dir)
        .into_iter()
        .filter(|n| n.ends_with(".jsonl"))
        .filter_map(|n| std::fs::read_to_string(dir.join(n)).ok())
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .collect::<Vec<_>>()
        })
        .collect();
    v.sort_by(|a, b| {
        let k = |x: &serde_json::Value| {
            (
                x["event"]["time"].as_str().unwrap_or("").to_string(),
                x["host"].as_str().unwrap_or("").to_string(),
                x["offset"].as_u64().unwrap_or(0),
            )
        };
        k(a).cmp(&k(b))
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = r#"{"kind":"delivered","id":"x1"}"#;
    const B: &str = r#"{"kind":"delivered","id":"x2"}"#;

    #[test]
    fn a_line_at_an_offset_the_mirror_holds_otherwise_is_refused_and_recorded() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let mut m = Mirror::default();
        assert!(m.apply(&p, "a", 0, A).unwrap());
        let next = A.len() as u64 + 1;
        assert!(m.apply(&p, "a", next, B).unwrap());
        // A redelivery of either changes nothing, also to a fresh reader
        // of the file (a restarted bridge).
        assert!(!m.apply(&p, "a", 0, A).unwrap());
        let mut fresh = Mirror::default();
        assert!(!fresh.apply(&p, "a", next, B).unwrap());
        assert!(p.bridge_refused().metadata().is_err());
        // Other content at a held offset, or a line inside a held one: a
        // rewritten range, refused and recorded; the held line stays.
        let e = fresh.apply(&p, "a", 0, B).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("rewritten range"), "{e}");
        let e = m.apply(&p, "a", 5, B).unwrap_err();
        assert!(e.to_string().contains("inside a line"), "{e}");
        let kept = super::super::refusals::read(&p);
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert_eq!(kept[0].kind, "journal_rewritten");
        assert_eq!((kept[0].host.as_str(), kept[0].offset), ("a", Some(0)));
        let text = std::fs::read_to_string(Mirror::file(&p, "a")).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.lines().next().unwrap().contains("\"x1\""), "{text}");
        // A gap (lines pruned or skipped there) is no rewrite.
        assert!(m.apply(&p, "a", next + 1000, A).unwrap());
    }

    #[test]
    fn only_lines_that_end_before_the_bound_are_read() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        std::fs::create_dir_all(p.daemon_dir()).unwrap();
        std::fs::write(p.events_file(), format!("{A}\n{B}\n")).unwrap();
        let first = A.len() as u64 + 1;
        let (lines, next) = read_from(&p, 0, first + 3, 10).unwrap();
        assert_eq!((lines.len(), next), (1, first));
        let (lines, next) = read_from(&p, 0, u64::MAX, 10).unwrap();
        assert_eq!((lines.len(), next), (2, first + B.len() as u64 + 1));
        // Nothing to sync past what was published: the end as it is.
        assert_eq!(durable_end(&p, next).0, next);
        assert_eq!(durable_end(&p, 0).0, next);
        // A rewind lands on a line's start: the live file's within reach.
        assert_eq!(rewind_point(&p, next).unwrap(), 0);
    }

    #[test]
    fn a_rewind_from_far_lands_on_the_next_line_start() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        std::fs::create_dir_all(p.daemon_dir()).unwrap();
        let line = format!("{}\n", "x".repeat(999));
        std::fs::write(p.events_file(), line.repeat(2000)).unwrap();
        let end = 2000 * 1000;
        let at = rewind_point(&p, end).unwrap();
        assert_eq!(at % 1000, 0, "{at}");
        assert!(at >= end - REWIND && at < end - REWIND + 1000, "{at}");
    }
}
