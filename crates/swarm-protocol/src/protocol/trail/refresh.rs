//! Keeping a loaded trail up to date from file events (`swarm serve`'s
//! audit): one path's change applied without loading again. The
//! invariant: when a change cannot be applied exactly, `refresh` says so
//! and the caller loads the trail again.

use std::fs;
use std::path::Path;

use crate::protocol::grammar;
use crate::protocol::layout::Worktree;

use super::arrivals::handoff_names;
use super::failures::{failure_reason, read_note};
use super::{absolute, Original, Place, Rejected, Trail};

/// What a path is, for [`Trail::refresh`].
pub(super) enum Found {
    Original(Place),
    Copy(Place, Option<String>),
    Batch(Place),
    Rejected,
}

impl Trail {
    /// Brings the trail up to date with what is at `path` now: a queue
    /// file (or its `.error` note) in one of the folders a load with
    /// [`Scope::all`] reads, or a `batch_*` folder of copies (read whole).
    /// Returns `Some(false)` when it cannot say (a sent, failed or completed
    /// file gone, which `swarm archive` may have moved where no event names
    /// it): the caller loads the trail again; `None` for a path outside
    /// those folders (nothing the trail holds).
    /// For a reader kept up to date by file events (`swarm serve`'s audit).
    pub fn refresh(&mut self, path: &Path) -> Option<bool> {
        let parent = path.parent()?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A note changed: its original's reason.
        if let Some(base) = name.strip_suffix(".error") {
            let failed = parent.parent().map(|h| h.join("failed").join(base));
            return match failed {
                Some(f) if self.originals.iter().any(|o| o.path == f) || f.exists() => {
                    self.refresh(&f)
                }
                _ => Some(true),
            };
        }
        let (i, what) = self.place_of(parent, &name)?;
        let exists = fs::symlink_metadata(path).is_ok();
        self.originals.retain(|o| o.path != path);
        self.bad.retain(|b| b.path != path);
        match what {
            Found::Batch(place) => {
                self.copies.retain(|c| !c.path.starts_with(path));
                self.bad.retain(|b| !b.path.starts_with(path));
                if exists {
                    for n in handoff_names(path).unwrap_or_default() {
                        self.read_copy(&path.join(n), place, Some(name.clone()), i);
                    }
                }
                Some(true)
            }
            Found::Original(place) => {
                if exists {
                    if let Some(msg) = self.read(path) {
                        let reason = (place == Place::Failed)
                            .then(|| failure_reason(path))
                            .flatten();
                        self.originals.push(Original::new(path, place, msg, reason));
                    }
                }
                Some(exists || !matches!(place, Place::Sent | Place::Failed))
            }
            Found::Copy(place, batch) => {
                self.copies.retain(|c| c.path != path);
                if exists {
                    self.read_copy(path, place, batch, i);
                }
                Some(exists || place != Place::Completed)
            }
            Found::Rejected => {
                self.rejected.retain(|r| r.path != path);
                if exists {
                    let mut note = path.as_os_str().to_owned();
                    note.push(".error");
                    self.rejected.push(Rejected {
                        path: path.to_path_buf(),
                        reason: read_note(Path::new(&note)),
                    });
                }
                Some(true)
            }
        }
    }

    /// Which worktree's which folder `dir` is, for an entry named `name`.
    pub(super) fn place_of(&self, dir: &Path, name: &str) -> Option<(usize, Found)> {
        let batch_of = |d: &Path| {
            d.file_name()
                .is_some_and(|n| grammar::is_batch_dir_name(&n.to_string_lossy()))
        };
        for (i, root) in self.worktrees.iter().enumerate() {
            let wt = Worktree::new(root);
            let originals = [
                (wt.outbox(), Place::Outbox),
                (wt.sent(), Place::Sent),
                (wt.failed(), Place::Failed),
                (wt.held(), Place::Held),
            ];
            if let Some((_, p)) = originals.iter().find(|(d, _)| d == dir) {
                return grammar::valid_handoff_name(name).then_some((i, Found::Original(*p)));
            }
            if dir == wt.rejected() {
                return name.ends_with(".handoff").then_some((i, Found::Rejected));
            }
            let copies = [
                (wt.inbox_new(), Place::New),
                (wt.in_process(), Place::InProcess),
                (wt.completed(), Place::Completed),
            ];
            if let Some((_, p)) = copies.iter().find(|(d, _)| d == dir) {
                if *p != Place::New && grammar::is_batch_dir_name(name) {
                    return Some((i, Found::Batch(*p)));
                }
                return name
                    .ends_with(".handoff")
                    .then_some((i, Found::Copy(*p, None)));
            }
            if batch_of(dir) {
                let up = dir.parent()?;
                let batch = dir.file_name()?.to_string_lossy().into_owned();
                for (d, p) in &copies[1..] {
                    if d == up {
                        return name
                            .ends_with(".handoff")
                            .then_some((i, Found::Copy(*p, Some(batch.clone()))));
                    }
                }
            }
        }
        None
    }

    /// Whether `path` lies in the mirror of another host's worktree (that
    /// host's handoffd moved it and journaled it, not this one).
    pub fn mirrored(&self, path: &Path) -> bool {
        self.mirrors.values().any(|m| path.starts_with(m))
    }

    /// Index in `worktrees` of a role's worktree (its inbox).
    pub fn home(&self, role: &str) -> Option<usize> {
        let p = match self.mirrors.get(role) {
            Some(m) => m.clone(),
            None => absolute(&self.project, &self.roles.find(role)?.worktree_path),
        };
        self.worktrees.iter().position(|w| *w == p)
    }
}
