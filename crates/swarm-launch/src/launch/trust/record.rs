//! `.swarmforge/trusted.tsv`: what `trust` added, so `untrust` removes
//! exactly those entries and never a trust the person gave by hand.
//!
//! Invariant: a line is `kind<TAB>file<TAB>folder`, each added once; the
//! file is replaced whole, private when new, read within [`MAX_RECORD`].

use std::path::PathBuf;

use crate::error::{IoContext, Result};
use crate::fsx;
use crate::launch::plan::Plan;

/// Largest `.swarmforge/trusted.tsv` read (a line per trusted worktree).
const MAX_RECORD: u64 = 1024 * 1024;

/// `.swarmforge/trusted.tsv`: `cli<TAB>file<TAB>folder`, one entry `trust`
/// added a line.
fn record_file(plan: &Plan) -> PathBuf {
    plan.project.swarmforge().join("trusted.tsv")
}

pub(super) fn records(plan: &Plan) -> Vec<(String, PathBuf, PathBuf)> {
    let text = fsx::read_bounded(&record_file(plan), MAX_RECORD)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some((
                f.next()?.to_string(),
                PathBuf::from(f.next()?),
                PathBuf::from(f.next()?),
            ))
        })
        .collect()
}

pub(super) fn save_records(plan: &Plan, recs: &[(String, PathBuf, PathBuf)]) -> Result<()> {
    let file = record_file(plan);
    let text: String = recs
        .iter()
        .map(|(c, f, d)| format!("{c}\t{}\t{}\n", f.display(), d.display()))
        .collect();
    let dir = plan.project.swarmforge();
    if file.exists() {
        fsx::replace(&dir, &file, text.as_bytes()).at(&file)
    } else {
        fsx::write_private(&dir, &file, text.as_bytes()).at(&file)
    }
}

/// Adds `rec` to `.swarmforge/trusted.tsv` (once).
pub(super) fn remember(
    plan: &Plan,
    recs: &mut Vec<(String, PathBuf, PathBuf)>,
    rec: (String, PathBuf, PathBuf),
) -> Result<()> {
    if recs.contains(&rec) {
        return Ok(());
    }
    recs.push(rec);
    save_records(plan, recs)
}
