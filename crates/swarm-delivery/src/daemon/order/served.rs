//! Which folders a caller may ask about: the `inbox/new` of a worktree
//! this daemon serves, named canonically. Anything else is refused, so the
//! socket answers nothing about folders outside the swarm.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::protocol::layout::Worktree;

/// The worktrees this daemon serves, kept by the daemon as roles change;
/// questions about any folder but their `inbox/new` are refused.
#[derive(Default)]
pub(super) struct Served {
    pub(super) roots: Vec<PathBuf>,
    /// Their `inbox/new` folders, canonical (as callers name them): worked
    /// out again when a question names a folder not in it, since a folder
    /// may appear, or be replaced, after the roots were set.
    pub(super) folders: HashSet<PathBuf>,
    /// A role's `inbox/new` as the daemon names it → canonical.
    pub(super) canonical: HashMap<PathBuf, PathBuf>,
}

impl Served {
    pub(super) fn new(roots: Vec<PathBuf>) -> Served {
        let mut s = Served {
            roots,
            ..Served::default()
        };
        s.resolve();
        s
    }

    pub(super) fn resolve(&mut self) {
        self.canonical = self
            .roots
            .iter()
            .filter_map(|r| {
                let new = Worktree::new(r).inbox_new();
                let c = new.canonicalize().ok()?;
                Some((new, c))
            })
            .collect();
        self.folders = self.canonical.values().cloned().collect();
    }

    pub(super) fn allows(&mut self, dir: &Path) -> bool {
        if !self.folders.contains(dir) {
            self.resolve();
        }
        self.folders.contains(dir)
    }
}
