//! The search index's manifest (`.swarmforge/search/manifest.json`): its
//! segments, and each folder read with the change time it had then, so a
//! refresh reads only folders that changed. Its own module because both the
//! index that keeps it (index.rs) and a refresh's reading (pass.rs) use it,
//! and neither imports the other for it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::bounds::{Bounds, Incomplete};

/// A folder changed this recently is read again next time.
pub(super) const SETTLE: Duration = Duration::from_secs(1);
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SegInfo {
    pub name: String,
    pub docs: u32,
    /// Its docs' lengths summed.
    #[serde(default)]
    pub words: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub next: u64,
    pub segments: Vec<SegInfo>,
    /// Folder (relative to the root) → modification time in ns when read.
    pub folders: BTreeMap<String, u64>,
    /// Worktree (as [`Index::key`] names it) → bytes of text indexed from
    /// its folders (`search.max_role_bytes`).
    #[serde(default)]
    pub role_bytes: BTreeMap<String, u64>,
    /// Folder → messages there the bounds kept out of the index when it
    /// was last read (over a bound, or waiting for the next refresh).
    #[serde(default)]
    pub left: BTreeMap<String, u64>,
    /// Messages indexed only in their first `search.max_message_bytes`.
    #[serde(default)]
    pub cut: u64,
}

impl Manifest {
    /// What the bounds left out, if anything.
    pub fn incomplete(&self, b: &Bounds) -> Option<Incomplete> {
        let folders: Vec<(String, u64)> = self
            .left
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(f, n)| (f.clone(), *n))
            .collect();
        let unindexed = folders.iter().map(|(_, n)| n).sum();
        (unindexed > 0 || self.cut > 0).then_some(Incomplete {
            folders,
            unindexed,
            cut: self.cut,
            max_message_bytes: b.max_message_bytes,
        })
    }
}

pub(super) fn mtime_ns(p: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(p)
        .ok()
        .filter(|m| m.is_dir())
        .and_then(|m| m.modified().ok())
}

pub(super) fn ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

/// A path as the manifest names it: relative to the project root.
pub fn key(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}
