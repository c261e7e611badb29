//! The outbox locks: one daemon per set of outboxes, however it was reached.
//!
//! Each served worktree's `handoffs/` folder is locked (`fsx::try_lock_dir`,
//! an flock that dies with its holder) before its outbox is served, so a
//! second daemon started on another spelling of the root, on a role worktree
//! holding a copy of roles.tsv, or after its pid file was deleted, finds the
//! folders taken and keeps out: two daemons must never move the same files.
//!
//! Invariant kept here: **at most `budget` locks are held**, each keeping a
//! descriptor open, so the watcher, the logs and the signal pipe keep
//! theirs; a worktree beyond the budget is served unlocked rather than
//! stranded, and that is said once.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::fsx;
use crate::protocol::layout::Worktree;
use crate::protocol::roles::Roles;

/// Descriptors kept free of outbox locks.
const LOCK_FD_RESERVE: u64 = 256;

pub(super) struct Locks {
    /// The flock on each served worktree's `handoffs/` folder, by canonical
    /// worktree path.
    held: HashMap<PathBuf, fsx::Lock>,
    /// Outboxes already reported as served by another daemon (or
    /// unlockable): each is said once.
    foreign: HashSet<PathBuf>,
    /// How many folder locks may be held.
    budget: usize,
    budget_warned: bool,
}

/// Why a worktree's outbox cannot be ours: another process holds its lock.
/// A worktree's `handoffs/` folder that could not be locked (out of
/// descriptors, permissions): served unlocked, said once.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub(super) struct LockFailed {
    path: PathBuf,
    source: std::io::Error,
}

pub(super) fn held_by_other(handoffs: &Path) -> String {
    let who = fsx::lock_holder(handoffs)
        .map(|pid| format!("another handoffd (pid {pid})"))
        .unwrap_or_else(|| "another handoffd".into());
    format!(
        "{who} already serves {}; two daemons must never move the same files.\n  hint: stop that daemon first (`swarm stop <its project root>`, or kill it)",
        handoffs.display()
    )
}

impl Locks {
    pub(super) fn new() -> Locks {
        Locks {
            held: HashMap::new(),
            foreign: HashSet::new(),
            budget: (fsx::fd_limit().saturating_sub(LOCK_FD_RESERVE) as usize).max(1),
            budget_warned: false,
        }
    }

    /// The worktrees whose folders this daemon holds (canonical paths).
    pub(super) fn worktrees(&self) -> impl Iterator<Item = &PathBuf> {
        self.held.keys()
    }

    /// Lets go of the worktrees `keep` does not accept (no longer served).
    pub(super) fn retain(&mut self, keep: impl Fn(&Path) -> bool) {
        self.held.retain(|wt, _| keep(wt));
    }

    /// Takes the lock of a worktree's `handoffs/` folder unless held already.
    /// `Ok(false)`: another process holds it. A folder that does not exist
    /// yet (or is a symlink) cannot be locked and has no outbox to scan.
    pub(super) fn claim(&mut self, wt_path: &Path) -> Result<bool, LockFailed> {
        if self.held.contains_key(wt_path) {
            return Ok(true);
        }
        let handoffs = Worktree::new(wt_path).handoffs();
        if self.held.len() >= self.budget {
            // Served unlocked rather than stranded; said once.
            if !self.budget_warned {
                self.budget_warned = true;
                eprintln!(
                    "handoffd: the descriptor limit ({}) leaves room to lock {} worktrees; the others (first {}) are served unlocked, so a second daemon would not be kept out of them.\n  hint: raise `ulimit -n` (hard limit) for handoffd",
                    fsx::fd_limit(),
                    self.budget,
                    handoffs.display()
                );
            }
            return Ok(true);
        }
        match fsx::try_lock_dir(&handoffs) {
            Ok(Some(lock)) => {
                self.held.insert(wt_path.to_path_buf(), lock);
                self.foreign.remove(wt_path);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(source) => Err(LockFailed {
                path: handoffs,
                source,
            }),
        }
    }

    /// At start-up: claims every role's outbox, or names the one another
    /// daemon holds (then this daemon must not run).
    pub(super) fn claim_all(&mut self, roles: &Roles) -> Result<(), Error> {
        for wt in roles.worktrees() {
            let Ok(real) = wt.canonicalize() else {
                continue;
            };
            if let Ok(false) = self.claim(&real) {
                return Err(Error::conflict(held_by_other(
                    &Worktree::new(&real).handoffs(),
                )));
            }
        }
        Ok(())
    }

    /// Claims a worktree found during a pass: whether to serve it. Another
    /// daemon's is skipped; one that cannot be locked (out of descriptors,
    /// permissions) is served anyway, since skipping would strand its mail.
    /// Either is said once.
    pub(super) fn admit(&mut self, wt_path: &Path) -> bool {
        match self.claim(wt_path) {
            Ok(true) => true,
            Ok(false) => {
                if self.foreign.insert(wt_path.to_path_buf()) {
                    eprintln!(
                        "handoffd: skipping {}: {}",
                        Worktree::new(wt_path).outbox().display(),
                        held_by_other(&Worktree::new(wt_path).handoffs())
                    );
                }
                false
            }
            Err(e) => {
                if self.foreign.insert(wt_path.to_path_buf()) {
                    eprintln!(
                        "handoffd: cannot lock {e}; serving it unlocked (a second daemon would not be kept out of it)"
                    );
                }
                true
            }
        }
    }
}
