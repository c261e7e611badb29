//! The project's own git folder is the person's: what an agent working in
//! the project root plants there for the person's git to follow is moved
//! aside at once (docs/security.md, "What an agent can plant").
//!
//! Such an agent writes `.git` (its index, HEAD and branches live there),
//! and a mount cannot keep a name that does not exist yet from being made
//! in a folder it may write (a mount point would itself be a file git
//! reads). A `commondir` there sends the person's git in the project (their
//! shell prompt's `git status`) to a config and hooks of the agent's making,
//! run unconfined. So handoffd looks at every turn of its loop (one
//! `lstat`, at least every 50 ms) and moves one into
//! `.swarmforge/planted/`, which no agent may write, where `swarm doctor`
//! reports it until the person has looked; the sandbox also refuses to
//! start any agent while one is in place (launch/confine/mounts.rs).
//!
//! The invariant: the move never replaces a file (a new name each time)
//! and nothing of what was planted is read or run here.

use std::path::PathBuf;

use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::Project;

/// Watches the project's git folder; a failure to move is said once.
#[derive(Default)]
pub struct GitGuard {
    failing: bool,
}

impl GitGuard {
    /// Moves a planted `.git/commondir` aside; the path it went to, if one
    /// was there. A move that fails is said in the daemon's log once (the
    /// sandbox still refuses to start an agent while it is there).
    pub fn check(&mut self, project: &Project) -> Option<PathBuf> {
        let planted = crate::sys::git::planted_commondir(&project.root)?;
        let stamp = clock::idts(clock::now());
        let names = (0..1000).map(|n| match n {
            0 => format!("{stamp}-commondir"),
            n => format!("{stamp}-{n}-commondir"),
        });
        match fsx::move_into_unique(&planted, &project.planted_dir(), names) {
            Ok(to) => {
                self.failing = false;
                eprintln!(
                    "handoffd: {}: git never makes a `commondir` in the project's own git folder, and your git would follow it; moved it aside to {} (an agent working in the project root may have planted it; `swarm doctor` reports it)",
                    planted.display(),
                    to.display()
                );
                Some(to)
            }
            Err(e) => {
                if !std::mem::replace(&mut self.failing, true) {
                    eprintln!(
                        "handoffd: {}: cannot move a planted `commondir` aside: {e}; remove it by hand (no agent starts while it is there)",
                        planted.display()
                    );
                }
                None
            }
        }
    }
}
