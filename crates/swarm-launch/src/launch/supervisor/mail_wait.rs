//! The headless supervisor's wait between two looks at its agents (issue
//! 47.4): at most [`TICK`], cut short when mail lands in an agent's
//! `inbox/new` (file events, `sys::watch`), so an agent starts about as
//! soon as its mail arrives instead of at the next tick, 50 ms later on
//! average.
//!
//! Mail often comes as several files close together (a discussion's
//! posts, the copies one delivery pass publishes one after another).
//! Started on the first, an agent would take that one alone and run again
//! for the rest: one model call more. So a wait that saw mail goes on
//! until none arrived for [`GATHER`] (never past the tick), and the agent
//! starts on what came together, as it did when the tick gathered it.
//!
//! Events are hints: the loop looks at every inbox after each wait,
//! whatever ended it, so a lost event costs at most a tick, as before.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::super::TICK;
use crate::sys::watch::DirWatch;

/// How long no more mail must arrive before the agent is started on what
/// did: longer than the gap between two copies of one delivery pass on a
/// loaded machine, short enough that a wake stays within the agent's own
/// start + 50 ms.
const GATHER: Duration = Duration::from_millis(30);

/// The agents' inboxes, watched.
pub(super) struct MailWait {
    watch: DirWatch,
    dirs: Vec<PathBuf>,
}

impl MailWait {
    /// Watches `dirs` (the agents' `inbox/new` folders).
    pub(super) fn new(dirs: Vec<PathBuf>) -> MailWait {
        MailWait {
            watch: DirWatch::new(dirs.clone()),
            dirs,
        }
    }

    /// Watches `dirs` from now on, when the lineup changed them.
    pub(super) fn follow(&mut self, dirs: Vec<PathBuf>) {
        if dirs != self.dirs {
            *self = MailWait::new(dirs);
        }
    }

    /// Waits for the next look: a tick, or less when mail arrived (then
    /// until it stopped arriving for [`GATHER`]). True when mail arrived.
    pub(super) fn wait(&mut self) -> bool {
        let end = Instant::now() + TICK;
        if self.watch.wait_for(TICK).paths.is_empty() {
            return false;
        }
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() || self.watch.wait_for(GATHER.min(left)).paths.is_empty() {
                return true;
            }
        }
    }
}
