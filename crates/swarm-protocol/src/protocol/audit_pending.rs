//! The audit gate's open challenges, as today's SwarmForge lays them out
//! (docs/swarmforge-compat.md §3):
//! `<worktree>/.swarmforge/handoffs/audit_pending/<sha256(sender)>/<sha256(task)>`,
//! one small JSON record each (`{"candidate": …, "created_at": …}`; upstream
//! writes EDN), published with fsx under an OS lock on
//! `audit_pending/.lock`. The gate's rules are in agent::send::audit_gate;
//! this module only keeps the files.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::Worktree;

/// The largest record read (a few hundred bytes: the task is a hash).
const MAX_RECORD: u64 = 64 * 1024;

#[derive(Serialize, Deserialize)]
struct Record {
    candidate: serde_json::Value,
    created_at: String,
}

/// The store, locked for one decision.
pub struct Locked {
    _lock: fsx::Lock,
    root: PathBuf,
}

/// Lower-case hex SHA-256: the names of this store's folders and files,
/// and the gate's fingerprints.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

fn hash(s: &str) -> String {
    sha256_hex(s.as_bytes())
}

impl Locked {
    pub fn open(wt: &Worktree) -> Result<Locked> {
        let root = wt.audit_pending();
        fsx::ensure_dirs(&[&root]).map_err(|e| Error::io(&root, e))?;
        let lock_path = root.join(".lock");
        let lock = fsx::lock(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
        Ok(Locked { _lock: lock, root })
    }

    fn sender_dir(&self, sender: &str) -> PathBuf {
        self.root.join(hash(sender))
    }

    /// The candidate recorded for (sender, task hash), if a readable one.
    pub fn read(&self, sender: &str, task_sha256: &str) -> Option<serde_json::Value> {
        read(&self.sender_dir(sender).join(task_sha256)).map(|r| r.candidate)
    }

    pub fn write(
        &self,
        sender: &str,
        task_sha256: &str,
        candidate: serde_json::Value,
    ) -> Result<()> {
        let dir = self.sender_dir(sender);
        fsx::ensure_dirs(&[&dir]).map_err(|e| Error::io(&dir, e))?;
        let file = dir.join(task_sha256);
        let bytes = serde_json::to_vec(&Record {
            candidate,
            created_at: clock::iso_now(),
        })
        .map_err(|e| Error::bad_file(&file, e))?;
        fsx::replace(&self.root, &file, &bytes).map_err(|e| Error::io(&file, e))
    }

    /// Removes every challenge of `sender`.
    pub fn clear(&self, sender: &str) -> Result<()> {
        let dir = self.sender_dir(sender);
        for f in files(&dir) {
            fsx::remove_file(&f).map_err(|e| Error::io(&f, e))?;
        }
        Ok(())
    }
}

fn read(file: &Path) -> Option<Record> {
    let bytes = fsx::read_bounded(file, MAX_RECORD).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The regular files directly in `dir` (none when it is missing).
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect()
}

/// Every open challenge in `wt` (file, created_at), oldest name first: a
/// git handoff that was challenged and never queued.
pub fn open(wt: &Worktree) -> Vec<(PathBuf, String)> {
    let Ok(senders) = std::fs::read_dir(wt.audit_pending()) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, String)> = senders
        .flatten()
        .filter(|s| s.file_type().is_ok_and(|t| t.is_dir()))
        .flat_map(|s| files(&s.path()))
        .filter_map(|f| read(&f).map(|r| (f, r.created_at)))
        .collect();
    out.sort();
    out
}

/// The file of `sender`'s open challenge in `wt`, if it has one (the
/// audit guard names it, agent::guard).
pub fn open_for_file(wt: &Worktree, sender: &str) -> Option<PathBuf> {
    let dir = wt.audit_pending().join(hash(sender));
    let mut f: Vec<PathBuf> = files(&dir)
        .into_iter()
        .filter(|f| read(f).is_some())
        .collect();
    f.sort();
    f.into_iter().next()
}

/// When `sender`'s open challenge in `wt` was made, if it has one: a git
/// handoff the gate held back that was never queued (`swarm status`).
pub fn open_for(wt: &Worktree, sender: &str) -> Option<String> {
    let dir = wt.audit_pending().join(hash(sender));
    files(&dir)
        .iter()
        .filter_map(|f| read(f).map(|r| r.created_at))
        .min()
}
