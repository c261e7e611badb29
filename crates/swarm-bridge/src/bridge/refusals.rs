//! What the bridge refused as not another host's word, kept for `swarm
//! audit --check` (docs/bridge.md, "One trail"): a trail record its host's
//! journal does not vouch for (bridge::vouch) or that host may not publish
//! (bridge::trail, a file of another host's role), and a journal line at an
//! offset whose mirrored line says something else (a rewritten range:
//! that host lost lines it had published, or someone published in its
//! name). The bridge log says it once; this file keeps saying it, so the
//! check that read a forged record as fine now fails until a person has
//! looked.
//!
//! `.swarmforge/bridge/refused.jsonl`, one JSON object a line, appended and
//! fsynced before the refused message is acknowledged; at most
//! [`MAX_BYTES`] (later refusals are in the bridge log only). Only the
//! bridge writes it; a person removes it once the cause is dealt with.

use std::io;

use serde::{Deserialize, Serialize};

use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::Project;

/// Largest ledger written to and read.
pub const MAX_BYTES: u64 = 1024 * 1024;

/// One refusal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub time: String,
    /// `trail_record` or `journal_rewritten`.
    pub kind: String,
    /// The host in whose name it came.
    pub host: String,
    /// The offset in that host's journal it cites or sits at.
    pub offset: Option<u64>,
    /// The file (a trail record: `<worktree>/<path>`; a journal line:
    /// that host's `events.jsonl`).
    pub file: String,
    pub why: String,
}

impl Refusal {
    pub fn new(kind: &str, host: &str, offset: Option<u64>, file: &str, why: &str) -> Refusal {
        Refusal {
            time: clock::iso_now(),
            kind: kind.to_string(),
            host: host.to_string(),
            offset,
            file: file.to_string(),
            why: why.to_string(),
        }
    }
}

/// Appends `r` durably (unless the ledger is full).
pub fn record(project: &Project, r: &Refusal) -> io::Result<()> {
    let path = project.bridge_refused();
    let len = std::fs::metadata(&path).map_or(0, |m| m.len());
    if len >= MAX_BYTES {
        return Ok(());
    }
    let line = serde_json::to_string(r).map_err(io::Error::other)? + "\n";
    fsx::ensure_dirs(&[project.bridge_dir()])?;
    fsx::append(&path, line.as_bytes())?;
    fsx::sync_file_at(&path)
}

/// Every refusal kept (an unreadable line is skipped).
pub fn read(project: &Project) -> Vec<Refusal> {
    let Ok(bytes) = fsx::read_bounded(&project.bridge_refused(), MAX_BYTES + 64 * 1024) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `swarm audit --check`'s violations: one per refusal kept, as
/// (kind, subject, detail).
pub fn violations(project: &Project) -> Vec<(&'static str, String, String)> {
    let ledger = project.bridge_refused();
    read(project)
        .into_iter()
        .map(|r| {
            let at = r.offset.map_or_else(String::new, |o| format!(" at offset {o}"));
            let kind = if r.kind == "journal_rewritten" {
                "journal_rewritten"
            } else {
                "unvouched_trail_record"
            };
            (
                kind,
                format!("host {}: {}{at}", r.host, r.file),
                format!(
                    "refused at {}: {} (recorded in {}; find who publishes in host {}'s name or what rewrote its journal, then remove that file)",
                    r.time,
                    r.why,
                    ledger.display(),
                    r.host
                ),
            )
        })
        .collect()
}
