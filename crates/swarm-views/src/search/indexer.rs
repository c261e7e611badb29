//! The daemon's indexer: a thread that brings the search index up to date
//! after delivery passes, never inside one (a pass only nudges it, without
//! waiting). Refreshes are at least [`GAP`] apart, so a busy swarm pays for
//! at most one a second; a query catches up by itself anyway. The thread
//! runs at the lowest CPU priority (`background`). A refresh is bounded
//! (search/bounds.rs); one that left messages for later is followed by
//! another after [`GAP`], not after [`IDLE`].

use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use crate::daemon::feature::{Duties, Feature, Pass};
use crate::protocol::layout::Project;
use crate::sys::background;

/// Shortest time between two refreshes.
pub const GAP: Duration = Duration::from_secs(1);
/// A refresh runs at least this often even without a nudge (archives,
/// messages the bridge mirrored).
const IDLE: Duration = Duration::from_secs(60);

/// The handle a daemon keeps; the thread ends when it is dropped.
pub struct Indexer {
    tx: SyncSender<()>,
}

impl Indexer {
    pub fn start(project: &Project) -> Indexer {
        let (tx, rx) = mpsc::sync_channel::<()>(1);
        let project = project.clone();
        std::thread::spawn(move || {
            // A refresh after a start indexes everything that arrived
            // meanwhile (100 000 files in a deep inbox): never ahead of a
            // caller.
            background::lowest_priority();
            let index = super::Index::new(&project);
            let mut warned = false;
            let mut last = Instant::now() - GAP;
            let mut more = false;
            loop {
                match rx.recv_timeout(if more { GAP } else { IDLE }) {
                    Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                let since = last.elapsed();
                if since < GAP {
                    std::thread::sleep(GAP - since);
                }
                while rx.try_recv().is_ok() {}
                if !project.swarmforge().is_dir() {
                    return;
                }
                last = Instant::now();
                match index.refresh() {
                    Ok(r) => {
                        warned = false;
                        more = r.deferred > 0 && r.added > 0;
                    }
                    Err(e) if !warned => {
                        eprintln!("handoffd: search index not refreshed: {e}");
                        warned = true;
                        more = false;
                    }
                    Err(_) => more = false,
                }
            }
        });
        Indexer { tx }
    }

    /// Asks for a refresh; never blocks (one pending nudge is enough).
    pub fn nudge(&self) {
        match self.tx.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
        }
    }
}

/// The index as a feature of handoffd (`daemon::feature`): its thread starts
/// once the daemon watches, and a pass nudges it.
#[derive(Default)]
pub struct Indexing(Option<Indexer>);

impl Feature for Indexing {
    fn start(&mut self, duties: &Duties) {
        self.0 = Some(Indexer::start(duties.project));
    }

    /// Only a pass that moved files gives the index anything new: an idle
    /// swarm's rescans must not refresh it (with 2 000 roles a refresh
    /// stats ~10 000 folders). What else changes the files (an archive, the
    /// bridge's mirror, a hold) is caught by the indexer's own minute and by
    /// every query, which refreshes first. The first pass also refreshes
    /// it, so a daemon starts with a fresh index.
    fn after_pass(&mut self, _: &Duties, pass: Pass) -> bool {
        if let Some(i) = self.0.as_ref().filter(|_| pass.moved || pass.first) {
            i.nudge();
        }
        false
    }
}
