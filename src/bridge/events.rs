//! One event trail across hosts: the bridge publishes each complete line of
//! this host's `events.jsonl` (offsets counted across rotations, so one
//! offset names one line for good) with `Nats-Msg-Id` `ev:<host>:<offset>`,
//! and mirrors every host's lines into `.swarmforge/bridge/events/<host>.jsonl`
//! as `{"host":…,"offset":…,"event":{…}}`, skipping a line it already holds.

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

/// Up to `max` complete lines from absolute offset `from`, and the offset
/// after the last one returned.
pub fn read_from(project: &Project, from: u64, max: usize) -> io::Result<(Vec<Line>, u64)> {
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
        let mut f = match fsx::open_regular(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        f.seek(SeekFrom::Start(pos - start))?;
        let mut buf = Vec::new();
        f.take(4 * 1024 * 1024).read_to_end(&mut buf)?;
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

/// How far this host's events were published.
pub fn load_offset(project: &Project) -> u64 {
    std::fs::read_to_string(project.bridge_events_offset())
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

pub fn save_offset(project: &Project, offset: u64) -> io::Result<()> {
    fsx::ensure_dirs(&[project.bridge_tmp()])?;
    fsx::replace(
        &project.bridge_tmp(),
        &project.bridge_events_offset(),
        format!("{offset}\n").as_bytes(),
    )
}

/// The mirror of every host's events on this host.
#[derive(Debug, Default)]
pub struct Mirror {
    /// Per host, the offset of the newest line held (read back at start).
    applied: HashMap<String, u64>,
}

impl Mirror {
    pub fn file(project: &Project, host: &str) -> PathBuf {
        project.bridge_events().join(format!("{host}.jsonl"))
    }

    /// Appends one received line unless the mirror already holds it (lines
    /// of one host arrive in offset order through one consumer).
    pub fn apply(
        &mut self,
        project: &Project,
        host: &str,
        offset: u64,
        text: &str,
    ) -> io::Result<bool> {
        let path = Mirror::file(project, host);
        let last = match self.applied.get(host) {
            Some(&o) => Some(o),
            None => last_offset(&path),
        };
        if last.is_some_and(|l| offset <= l) {
            self.applied.insert(host.to_string(), last.unwrap_or(0));
            return Ok(false);
        }
        let event: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let line =
            serde_json::json!({"host": host, "offset": offset, "event": event}).to_string() + "\n";
        fsx::ensure_dirs(&[project.bridge_events()])?;
        fsx::append(&path, line.as_bytes())?;
        self.applied.insert(host.to_string(), offset);
        Ok(true)
    }
}

fn last_offset(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let last = text.lines().rev().find(|l| !l.trim().is_empty())?;
    serde_json::from_str::<serde_json::Value>(last).ok()?["offset"].as_u64()
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
