//! Following the copies that reach `inbox/completed/` (the daemon's live
//! trace export) without reading the trail again at every look. The
//! invariant: each new copy is read once, and a folder changed within a
//! time stamp's tick of a look is listed again at the next.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};

use super::load::copy_of;
use super::{Copy, Place, Scope, Trail};

/// Follows the copies that reach `inbox/completed/` (the daemon's live
/// trace export, telemetry/otlp.rs), without reading the trail again at
/// every look: a completed folder is listed only when it changed since the
/// last look (its modification time; one changed within [`RECENT`] of a
/// look is listed again at the next, as a time stamp's tick may hide a
/// second change), and only the files not seen before are read.
#[derive(Debug, Default)]
pub struct Completions {
    folders: std::collections::HashMap<PathBuf, Seen>,
    /// Copy files read so far (what a look costs).
    pub reads: usize,
}

#[derive(Debug, Default)]
pub(super) struct Seen {
    pub(super) mtime: Option<std::time::SystemTime>,
    pub(super) names: HashSet<String>,
}

/// How close to a look a folder's change must be to be listed again.
pub(super) const RECENT: std::time::Duration = std::time::Duration::from_secs(2);

impl Completions {
    /// Starts from what is completed now: history is not followed.
    pub fn start(project: &Project) -> Completions {
        let mut c = Completions::default();
        let _ = c.look_into(project, false);
        c
    }

    /// The copies completed since the last look, each with its content.
    pub fn look(&mut self, project: &Project) -> Result<Vec<(Copy, Message)>> {
        self.look_into(project, true)
    }

    fn look_into(&mut self, project: &Project, read: bool) -> Result<Vec<(Copy, Message)>> {
        // Roles and worktrees only: nothing is listed by the load.
        let mut t = Trail::load(project, &Scope::default())?;
        let mut out = Vec::new();
        for i in 0..t.worktrees.len() {
            let dir = Worktree::new(&t.worktrees[i]).completed();
            for b in self.folder(&mut t, &dir, i, None, read, &mut out) {
                let bdir = dir.join(&b);
                self.folder(&mut t, &bdir, i, Some(b), read, &mut out);
            }
        }
        Ok(out)
    }

    /// Reads the new files of `dir` when it changed; returns its batch
    /// folders when it was listed (each is looked into the same way).
    fn folder(
        &mut self,
        t: &mut Trail,
        dir: &Path,
        wt: usize,
        batch: Option<String>,
        read: bool,
        out: &mut Vec<(Copy, Message)>,
    ) -> Vec<String> {
        let now = std::time::SystemTime::now();
        let mtime = fs::metadata(dir).and_then(|m| m.modified()).ok();
        let seen = self.folders.entry(dir.to_path_buf()).or_default();
        if mtime.is_some() && seen.mtime == mtime {
            return Vec::new();
        }
        let recent = mtime.is_none_or(|m| now.duration_since(m).map_or(true, |d| d < RECENT));
        seen.mtime = if recent { None } else { mtime };
        let l = t.list(dir, None);
        let names: HashSet<String> = l.files.iter().cloned().collect();
        for name in l.files.iter().filter(|n| !seen.names.contains(*n)) {
            if !read {
                continue;
            }
            let path = dir.join(name);
            self.reads += 1;
            if let Some(msg) = t.read(&path) {
                out.push((
                    copy_of(&path, Place::Completed, batch.clone(), wt, &msg),
                    msg,
                ));
            }
        }
        let seen = self.folders.entry(dir.to_path_buf()).or_default();
        seen.names = names;
        l.batches
    }
}
