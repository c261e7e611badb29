//! Size-rotated logs: `handoffd.log`, `events.jsonl`, `forum.log` and the
//! bridge's `bridge.log`.
//!
//! The live file keeps its name, so SwarmForge's tools and `tail -F` go on
//! working. A full file is renamed, in one step, to `<name>.<start>`, where
//! `start` is the log offset of its first byte (12 digits, zero-padded so `ls`
//! and shell globs list the parts oldest first). Offsets keep counting across
//! files: the live file starts where the newest rotated part ends, so a byte
//! offset names one line for the life of the log, whatever was rotated.
//! `<name>.base` records where the live file starts, for when retention has
//! removed every rotated part.
//!
//! Only the daemon writes these logs (and rotates them, under the same lock as
//! its appends), the bridge its own; every other process only reads.

use std::io;
use std::path::{Path, PathBuf};

use crate::fsx;

/// One rotated part of a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub path: PathBuf,
    /// The log offset of its first byte.
    pub start: u64,
    pub len: u64,
}

impl Part {
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

fn name_of(live: &Path) -> String {
    live.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn dir_of(live: &Path) -> &Path {
    match live.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Where the part starting at `start` is kept.
pub fn part_path(live: &Path, start: u64) -> PathBuf {
    dir_of(live).join(format!("{}.{start:012}", name_of(live)))
}

/// The file recording where the live file starts.
pub fn base_file(live: &Path) -> PathBuf {
    dir_of(live).join(format!("{}.base", name_of(live)))
}

/// The rotated parts still kept, oldest first. Only regular files named
/// `<name>.<digits>` count; anything else in the folder is left alone.
pub fn rotated(live: &Path) -> io::Result<Vec<Part>> {
    let prefix = format!("{}.", name_of(live));
    let entries = match std::fs::read_dir(dir_of(live)) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut parts = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(digits) = name.strip_prefix(&prefix) else {
            continue;
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(start) = digits.parse::<u64>() else {
            continue;
        };
        // A part removed between the listing and here is simply gone.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.file_type().is_file() {
            parts.push(Part {
                path: entry.path(),
                start,
                len: meta.len(),
            });
        }
    }
    parts.sort_by_key(|p| p.start);
    Ok(parts)
}

/// The recorded start of the live file (0 when never rotated or unreadable:
/// the parts then decide).
fn recorded_base(live: &Path) -> u64 {
    fsx::read_bounded(&base_file(live), 64)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Where the live file starts: the end of the newest part, or the recorded
/// base when that is further (every part removed). Taking the larger of the
/// two is what makes a rotation crash-safe: the rename alone commits it.
pub fn live_start(live: &Path) -> io::Result<u64> {
    let parts = rotated(live)?;
    Ok(parts.last().map_or(0, Part::end).max(recorded_base(live)))
}

/// Where the log ends now (the next line's offset): 0 for no log.
pub fn end(live: &Path) -> u64 {
    files(live)
        .ok()
        .and_then(|f| f.last().map(Part::end))
        .or_else(|| live_start(live).ok())
        .unwrap_or(0)
}

/// How a log is bounded (swarm.yaml `logs:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Rotate once the live file has this many bytes (0: never).
    pub max_bytes: u64,
    /// Rotated parts kept; older ones are removed (0: none kept).
    pub keep: usize,
}

/// Rotates `live` if it has reached `policy.max_bytes`. Steps, each safe to
/// be killed after: (1) rename the live file to its part name (through fsx:
/// no clobber, folder fsynced) — this alone commits the rotation; (2) record
/// the new base; (3) remove parts beyond `keep`. A kill -9 anywhere loses
/// and repeats no line: every line is in exactly one file throughout.
///
/// The caller must hold the lock its own appends take (the daemon is the
/// only writer), so no line is appended to a file being renamed away.
pub fn rotate_if_full(live: &Path, len: u64, policy: Policy) -> io::Result<bool> {
    if policy.max_bytes == 0 || len < policy.max_bytes {
        return Ok(false);
    }
    rotate(live, policy.keep)?;
    Ok(true)
}

/// Rotates `live` now (nothing to do when it is missing or empty).
pub fn rotate(live: &Path, keep: usize) -> io::Result<()> {
    let len = match std::fs::symlink_metadata(live) {
        Ok(m) if m.file_type().is_file() => m.len(),
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if len == 0 {
        return Ok(());
    }
    let start = live_start(live)?;
    fsx::move_noreplace(live, &part_path(live, start))?;
    fsx::write_file(&base_file(live), format!("{}\n", start + len).as_bytes())?;
    prune(live, keep)
}

/// Removes the oldest parts beyond `keep`.
pub fn prune(live: &Path, keep: usize) -> io::Result<()> {
    let parts = rotated(live)?;
    let extra = parts.len().saturating_sub(keep);
    for p in &parts[..extra] {
        fsx::remove_file(&p.path)?;
    }
    Ok(())
}

/// Every file of the log, oldest first: the kept parts, then the live file
/// (when it exists), each with its start offset. For readers of whole logs.
pub fn files(live: &Path) -> io::Result<Vec<Part>> {
    let mut all = rotated(live)?;
    if let Ok(m) = std::fs::symlink_metadata(live) {
        if m.file_type().is_file() {
            all.push(Part {
                path: live.to_path_buf(),
                start: live_start(live)?,
                len: m.len(),
            });
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(live: &Path) -> String {
        files(live)
            .unwrap()
            .iter()
            .map(|p| std::fs::read_to_string(&p.path).unwrap())
            .collect()
    }

    #[test]
    fn offsets_keep_counting_across_parts_and_retention() {
        let d = tempfile::tempdir().unwrap();
        let live = d.path().join("events.jsonl");
        let policy = Policy {
            max_bytes: 10,
            keep: 2,
        };
        let mut all = String::new();
        for i in 0..20 {
            let line = format!("line {i:02}\n");
            all.push_str(&line);
            let len = {
                fsx::append(&live, line.as_bytes()).unwrap();
                std::fs::metadata(&live).unwrap().len()
            };
            rotate_if_full(&live, len, policy).unwrap();
        }
        let parts = rotated(&live).unwrap();
        assert_eq!(parts.len(), 2);
        // Two lines (16 bytes) a part; the last rotation emptied the live file.
        assert_eq!((parts[0].start, parts[1].start), (128, 144));
        assert_eq!(
            parts[1].path.file_name().unwrap(),
            "events.jsonl.000000000144"
        );
        assert_eq!(live_start(&live).unwrap(), 160);
        assert_eq!(read_all(&live), all[128..]);
        // With nothing kept the base file carries the offset.
        prune(&live, 0).unwrap();
        assert_eq!(live_start(&live).unwrap(), 160);
    }

    #[test]
    fn a_kill_between_rename_and_base_loses_nothing() {
        let d = tempfile::tempdir().unwrap();
        let live = d.path().join("handoffd.log");
        std::fs::write(&live, "a\nb\n").unwrap();
        rotate(&live, 4).unwrap();
        std::fs::write(&live, "c\n").unwrap();
        // The state after step 1 of a second rotation: renamed, base stale.
        fsx::move_noreplace(&live, &part_path(&live, 4)).unwrap();
        assert_eq!(live_start(&live).unwrap(), 6);
        std::fs::write(&live, "d\n").unwrap();
        rotate(&live, 4).unwrap();
        assert_eq!(read_all(&live), "a\nb\nc\nd\n");
        let starts: Vec<u64> = rotated(&live).unwrap().iter().map(|p| p.start).collect();
        assert_eq!(starts, vec![0, 4, 6]);
    }
}
