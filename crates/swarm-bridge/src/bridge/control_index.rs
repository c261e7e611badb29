//! The control events `swarm status` shows (docs/bridge.md, "One control"),
//! without reading every journal whole on every call: the control events of
//! this host's journal and of each host's mirrored journal are collected
//! into `.swarmforge/bridge/control/index.json` together with how far each
//! file was read, and a call reads only what was appended since.
//!
//! Invariant: for each source, the index holds its control events up to
//! the offset it records, in the source's order. Both kinds of source only
//! grow: the journal's offsets run on across rotations (`logfile`), and a
//! mirror is append-only; a source now shorter than its offset (replaced)
//! is read again from the start. The index is a cache: lost or unreadable,
//! it is rebuilt from the files, and two calls writing it at once each
//! write a consistent one.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::events::{self, Mirror, MAX_LINE};
use crate::fsx;
use crate::protocol::layout::Project;

/// Control events kept per host (the newest); a pause older than this many
/// control events of its host no longer shows as that host's state.
const KEEP: usize = 10_000;
/// Largest index read.
const MAX_INDEX: u64 = 64 * 1024 * 1024;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    /// How far this host's journal was read (an offset across rotations).
    journal: u64,
    /// How far each host's mirror file was read (bytes).
    mirrors: BTreeMap<String, u64>,
    /// Host → its control events (journal event objects), oldest first.
    events: BTreeMap<String, Vec<serde_json::Value>>,
}

fn path(p: &Project) -> PathBuf {
    p.bridge_dir().join("control").join("index.json")
}

fn is_control(event: &serde_json::Value) -> bool {
    event["kind"]
        .as_str()
        .is_some_and(|k| k.starts_with("control_"))
}

/// Host → its control events, oldest first: `me` from this host's journal,
/// each other host of `hosts` from its mirror.
pub fn control_events(
    project: &Project,
    me: &str,
    hosts: &[String],
) -> BTreeMap<String, Vec<serde_json::Value>> {
    let file = path(project);
    let mut ix: Index = fsx::read_bounded(&file, MAX_INDEX)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let before = (ix.journal, ix.mirrors.clone());
    read_journal(project, me, &mut ix);
    for h in hosts.iter().filter(|h| *h != me) {
        read_mirror(project, h, &mut ix);
    }
    if (ix.journal, &ix.mirrors) != (before.0, &before.1) {
        let tmp = project.bridge_tmp();
        // A cache: a failed write costs the next call a longer read.
        let _ = fsx::ensure_dirs(&[&tmp]).and_then(|_| {
            let bytes = serde_json::to_vec(&ix).unwrap_or_default();
            fsx::replace_unsynced(&tmp, &file, &bytes)
        });
    }
    ix.events.retain(|h, _| hosts.contains(h));
    ix.events
}

fn keep(list: &mut Vec<serde_json::Value>) {
    if list.len() > KEEP {
        list.drain(..list.len() - KEEP);
    }
}

/// This host's journal from where the index stopped.
fn read_journal(project: &Project, me: &str, ix: &mut Index) {
    if events::end_offset(project).is_ok_and(|end| end < ix.journal) {
        ix.journal = 0;
        ix.events.remove(me);
    }
    let mut from = ix.journal;
    // read_from reads a bounded slice per call: read on to the end.
    while let Ok((lines, next)) = events::read_from(project, from, u64::MAX, 4096) {
        if next == from {
            break;
        }
        let mine = ix.events.entry(me.to_string()).or_default();
        mine.extend(
            lines
                .iter()
                .filter(|l| l.text.contains("\"control_"))
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l.text).ok())
                .filter(is_control),
        );
        keep(mine);
        from = next;
    }
    ix.journal = from;
}

/// Host `h`'s mirror file from where the index stopped (whole lines only).
fn read_mirror(project: &Project, h: &str, ix: &mut Index) {
    let file = Mirror::file(project, h);
    let Ok(mut f) = fsx::open_regular(&file) else {
        return;
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut at = ix.mirrors.get(h).copied().unwrap_or(0);
    if len < at {
        at = 0;
        ix.events.remove(h);
    }
    if len == at || f.seek(SeekFrom::Start(at)).is_err() {
        return;
    }
    let mut buf = Vec::new();
    if f.take(len - at).read_to_end(&mut buf).is_err() {
        return;
    }
    let list = ix.events.entry(h.to_string()).or_default();
    let mut pos = 0;
    while let Some(nl) = buf[pos..].iter().position(|&b| b == b'\n') {
        let line = &buf[pos..pos + nl];
        if line.len() <= MAX_LINE {
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) {
                if is_control(&v["event"]) && v["host"] == h {
                    list.push(v["event"].clone());
                }
            }
        }
        pos += nl + 1;
    }
    keep(list);
    ix.mirrors.insert(h.to_string(), at + pos as u64);
}
