//! The folders a watcher of the whole swarm's mail listens to; the
//! watching itself is `sys::watch`.

use std::path::PathBuf;

use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;

/// Every worktree's queue folders (outbox, held, sent, failed and the
/// inbox's), sorted: what a watcher of the whole swarm's mail listens to.
pub fn queue_dirs(project: &Project) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(roles) = Roles::load(&project.roles_tsv()) {
        for wt in roles.worktrees() {
            let w = Worktree::new(if wt.is_absolute() {
                wt
            } else {
                project.root.join(wt)
            });
            dirs.extend(w.queue_dirs());
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs
}
