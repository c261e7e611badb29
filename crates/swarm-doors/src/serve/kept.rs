//! The trail `GET /api/audit` judges, kept in memory between requests: read
//! whole at the first request, then brought up to date with only the paths
//! the watcher named since (`Trail::refresh`), so a request after a change
//! costs a read of what changed plus the tally, not a read of every file
//! (docs/cockpit.md, "The JSON endpoints"). Read whole again when the
//! watcher lost events (a rescan), saw a folder whose content no event
//! covered, or a change the trail cannot apply alone (an archive).
//!
//! The invariant: after [`Kept::trail`] the trail is what a fresh
//! `Trail::load` would read, as far as the events reported the changes.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::error::Result;
use crate::protocol::layout::Project;
use crate::protocol::trail::{Scope, Trail};
use crate::sys::watch::Wake;

/// Paths kept for the next request at most; more: read whole.
const MAX_PENDING: usize = 100_000;

#[derive(Default)]
pub struct Kept {
    trail: Option<Trail>,
    pending: BTreeSet<PathBuf>,
    reload: bool,
}

impl Kept {
    /// Notes what one wake of the watcher changed (nothing before the first
    /// request: there is no trail to keep yet).
    pub fn note(&mut self, wake: &Wake) {
        if self.trail.is_none() {
            return;
        }
        if wake.rescan || !wake.fresh.is_empty() || self.pending.len() > MAX_PENDING {
            self.reload = true;
            self.pending.clear();
            return;
        }
        if !self.reload {
            self.pending.extend(wake.paths.iter().cloned());
        }
    }

    /// The trail as the files are now. A change of the roles or the
    /// config reads it whole (which worktrees it covers may differ).
    pub fn trail(&mut self, project: &Project) -> Result<&Trail> {
        let pending = std::mem::take(&mut self.pending);
        let mut stale = self.reload;
        if let Some(t) = self.trail.as_mut().filter(|_| !stale) {
            for p in &pending {
                match t.refresh(p) {
                    Some(true) => {}
                    Some(false) => stale = true,
                    None => stale |= *p == project.roles_tsv() || *p == project.config_file(),
                }
                if stale {
                    break;
                }
            }
        }
        if stale || self.trail.is_none() {
            self.reload = false;
            self.trail = Some(Trail::load(project, &Scope::all())?);
        }
        self.trail
            .as_ref()
            .ok_or_else(|| crate::error::Error::internal("internal error: no trail"))
    }
}
