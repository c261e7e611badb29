//! A role's activity: what its agent did between handoffs, one JSON object
//! per line in `.swarmforge/telemetry/activity/<role>.jsonl` (turn start and
//! end, assistant text, thinking, tool calls with a bounded input, tool
//! results, errors, usage), each with the handoff being worked on.
//!
//! Written by whoever watches the agent (the headless supervisor, hooks),
//! read by `swarm activity`, liveness and the cockpit. Every field that
//! came from a CLI's stream is bounded to [`MAX_TEXT`] characters and has
//! its control characters escaped before it is stored, so a reader can
//! print it; readers still skip a line that is not a record.

//!
//! The file is bounded: past [`MAX_BYTES`] it is rotated like the daemon's
//! logs (sys/logfile.rs, [`KEEP`] parts kept), under a per-role lock
//! that every append takes, so no line goes to a file being renamed away.

use std::io::{BufRead, BufReader, Read as _, Seek as _};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::Project;
use crate::sys::logfile::{self, Policy};

/// The longest text kept from one event (assistant text, a tool's input).
pub const MAX_TEXT: usize = 2000;
/// A role's live file is rotated once it holds this many bytes.
pub const MAX_BYTES: u64 = 1024 * 1024;
/// Rotated parts kept per role.
pub const KEEP: usize = 2;
/// The longest line a reader accepts (a record with [`MAX_TEXT`] escaped
/// characters fits many times over).
pub const MAX_LINE: usize = 64 * 1024;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    TurnStart,
    TurnEnd,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    Error,
    Usage,
    /// The agent waits for work (`ready-next --wait`, MCP `next`).
    Listening,
    /// Something the supervisor itself says (a refused resume, skipped lines).
    Note,
}

/// One event of a role's agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    pub time: String,
    pub role: String,
    pub kind: Kind,
    /// The handoff in process, if any.
    pub id: Option<String>,
    /// A tool's name, a model's name: short, single-line.
    pub name: Option<String>,
    /// Bounded, escaped text (see the module doc).
    pub text: Option<String>,
    /// A tool result's or a turn's outcome (`ok`, `error`, an exit code).
    pub status: Option<String>,
    /// `turn_start`: the process running the turn (liveness tells a turn
    /// still running from one whose process died).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

impl Activity {
    pub fn now(role: &str, kind: Kind) -> Activity {
        Activity {
            time: clock::iso_now(),
            role: role.to_string(),
            kind,
            id: None,
            name: None,
            text: None,
            status: None,
            pid: None,
        }
    }

    /// Sets the text, bounded and escaped.
    pub fn text(mut self, t: &str) -> Activity {
        self.text = Some(bound(t));
        self
    }
}

/// `t` cut to [`MAX_TEXT`] characters (marked with `…`), control characters
/// escaped.
pub fn bound(t: &str) -> String {
    let mut cut: String = t.chars().take(MAX_TEXT).collect();
    if cut.len() < t.len() {
        cut.push('…');
    }
    crate::text::escape(&cut)
}

/// Appends one event to the role's file (single O_APPEND write), rotating
/// it when full.
pub fn append(project: &Project, ev: &Activity) -> Result<()> {
    let path = project.activity_file(&ev.role);
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    fsx::ensure_dirs(&[dir]).map_err(|e| Error::io(dir, e))?;
    let mut line =
        serde_json::to_string(ev).map_err(|e| Error::internal(format!("activity record: {e}")))?;
    line.push('\n');
    let lock = dir.join(format!(".{}.lock", ev.role));
    let _held = fsx::lock(&lock).map_err(|e| Error::io(&lock, e))?;
    let len = fsx::append_len(&path, line.as_bytes()).map_err(|e| Error::io(&path, e))?;
    logfile::rotate_if_full(
        &path,
        len,
        Policy {
            max_bytes: MAX_BYTES,
            keep: KEEP,
        },
    )
    .map_err(|e| Error::io(&path, e))?;
    Ok(())
}

/// The roles with an activity file, sorted.
pub fn roles(project: &Project) -> Vec<String> {
    let dir = project.telemetry_dir().join("activity");
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(".jsonl"))
                        .filter(|n| crate::protocol::grammar::valid_role(n))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Records of one file from byte `from` on, and where reading stopped (the
/// end of the last whole line). Lines that are too long, not UTF-8 or not
/// a record are skipped and counted.
pub fn read_from(path: &std::path::Path, from: u64) -> Result<(Vec<Activity>, u64, usize)> {
    let mut file = match fsx::open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0, 0)),
        Err(e) => return Err(Error::io(path, e)),
    };
    file.seek(std::io::SeekFrom::Start(from))
        .map_err(|e| Error::io(path, e))?;
    let mut reader = BufReader::new(file);
    let (mut out, mut skipped, mut pos) = (Vec::new(), 0, from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            if n <= MAX_LINE {
                // A line still being written: read it next time.
                break;
            }
            let mut rest = Vec::new();
            let more = reader
                .read_until(b'\n', &mut rest)
                .map_err(|e| Error::io(path, e))?;
            if rest.last() != Some(&b'\n') {
                break;
            }
            pos += (n + more) as u64;
            skipped += 1;
            continue;
        }
        pos += n as u64;
        match std::str::from_utf8(&buf)
            .ok()
            .and_then(|s| serde_json::from_str::<Activity>(s.trim_end()).ok())
        {
            Some(a) => out.push(a),
            None => skipped += 1,
        }
    }
    Ok((out, pos, skipped))
}

/// Every kept record of `role`, oldest first (rotated parts, then the live
/// file), and how many lines were skipped.
pub fn read(project: &Project, role: &str) -> Result<(Vec<Activity>, usize)> {
    read_to_end(project, role).map(|(all, skipped, _)| (all, skipped))
}

/// [`read`], and the offset in the live file after its last record read:
/// where a follower goes on from, so a record appended meanwhile is neither
/// missed nor printed twice.
pub fn read_to_end(project: &Project, role: &str) -> Result<(Vec<Activity>, usize, u64)> {
    let live = project.activity_file(role);
    let parts = logfile::files(&live).map_err(|e| Error::io(&live, e))?;
    let (mut all, mut skipped, mut end) = (Vec::new(), 0, 0);
    for p in parts {
        let (recs, pos, s) = read_from(&p.path, 0)?;
        if p.path == live {
            end = pos;
        }
        all.extend(recs);
        skipped += s;
    }
    Ok((all, skipped, end))
}

/// What a role's agent is doing, per its activity (docs/headless.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// A turn runs and its events flow.
    Responding,
    /// A turn runs and the agent waits for work (`ready_for_next.sh
    /// --wait`, MCP `next`).
    Listening,
    /// No turn runs.
    Idle,
    /// A turn started and its process is gone without ending it.
    Dead,
}

impl Liveness {
    pub fn word(self) -> &'static str {
        match self {
            Liveness::Responding => "responding",
            Liveness::Listening => "listening",
            Liveness::Idle => "idle",
            Liveness::Dead => "dead",
        }
    }
}

/// Whether a tool call waits for work.
fn waits(a: &Activity) -> bool {
    a.kind == Kind::Listening
        || (a.kind == Kind::ToolCall
            && (a.text.as_deref().is_some_and(|t| {
                t.contains("ready_for_next") && t.contains("--wait")
                    || t.contains("ready-next") && t.contains("--wait")
            }) || a
                .name
                .as_deref()
                .is_some_and(|n| n.ends_with("__next") || n.ends_with("/next"))))
}

/// The liveness the records say (the last turn's), None without any turn.
pub fn liveness(records: &[Activity]) -> Option<Liveness> {
    let start = records.iter().rposition(|a| a.kind == Kind::TurnStart)?;
    let turn = &records[start..];
    if turn.iter().any(|a| a.kind == Kind::TurnEnd) {
        return Some(Liveness::Idle);
    }
    let alive = turn[0]
        .pid
        .is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
    if !alive {
        return Some(Liveness::Dead);
    }
    let last = turn.iter().rev().find(|a| a.kind != Kind::Note)?;
    Some(if waits(last) {
        Liveness::Listening
    } else {
        Liveness::Responding
    })
}

/// `role`'s liveness from the tail of its live file.
pub fn of_role(project: &Project, role: &str) -> Option<Liveness> {
    let live = project.activity_file(role);
    let len = std::fs::metadata(&live).ok()?.len();
    // The last turn's start is normally near the end; a long turn's start
    // may have been rotated away, which reads as no turn.
    let (recs, _, _) = read_from(&live, len.saturating_sub(256 * 1024)).ok()?;
    liveness(&recs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: Kind) -> Activity {
        Activity::now("coder", kind)
    }

    #[test]
    fn liveness_follows_the_last_turn() {
        assert_eq!(liveness(&[]), None);
        let mut start = rec(Kind::TurnStart);
        start.pid = Some(std::process::id());
        let mut call = rec(Kind::ToolCall);
        call.text = Some("ready_for_next.sh --wait 60".into());
        assert_eq!(
            liveness(&[start.clone(), rec(Kind::Text)]),
            Some(Liveness::Responding)
        );
        assert_eq!(
            liveness(&[start.clone(), call.clone(), rec(Kind::Note)]),
            Some(Liveness::Listening)
        );
        assert_eq!(
            liveness(&[start.clone(), rec(Kind::TurnEnd)]),
            Some(Liveness::Idle)
        );
        // A turn whose process is gone without ending it.
        let mut gone = start.clone();
        gone.pid = Some(u32::MAX - 1);
        assert_eq!(liveness(&[gone, rec(Kind::Text)]), Some(Liveness::Dead));
        // Only the last turn counts.
        assert_eq!(
            liveness(&[rec(Kind::TurnEnd), start, rec(Kind::ToolResult)]),
            Some(Liveness::Responding)
        );
    }

    #[test]
    fn the_file_is_rotated_and_read_across_parts_and_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path());
        let big = "x".repeat(MAX_TEXT * 3);
        let mut n = 0;
        while logfile::rotated(&p.activity_file("coder"))
            .unwrap()
            .is_empty()
        {
            append(&p, &rec(Kind::Text).text(&big)).unwrap();
            n += 1;
        }
        fsx::append(&p.activity_file("coder"), b"garbage\n\xff\n").unwrap();
        append(&p, &rec(Kind::TurnEnd)).unwrap();
        let (all, skipped) = read(&p, "coder").unwrap();
        assert_eq!(all.len(), n + 1);
        assert_eq!(skipped, 2);
        assert!(all[0].text.as_ref().unwrap().chars().count() <= MAX_TEXT + 1);
        assert_eq!(roles(&p), vec!["coder".to_string()]);
        // Parts beyond KEEP are removed: the whole stays bounded.
        for _ in 0..(KEEP + 1) * n {
            append(&p, &rec(Kind::Text).text(&big)).unwrap();
        }
        let files = logfile::files(&p.activity_file("coder")).unwrap();
        assert!(files.len() <= KEEP + 1, "{files:?}");
        assert!(files.iter().all(|f| f.len <= MAX_BYTES + 8192));
        assert_eq!(of_role(&p, "coder"), None);
    }
}
