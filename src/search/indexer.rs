//! The daemon's indexer: a thread that brings the search index up to date
//! after delivery passes, never inside one (a pass only nudges it, without
//! waiting). Refreshes are at least [`GAP`] apart, so a busy swarm pays for
//! at most one a second; a query catches up by itself anyway. The thread
//! runs at the lowest CPU priority (`background`). A refresh is bounded
//! (search/bounds.rs); one that left messages for later is followed by
//! another after [`GAP`], not after [`IDLE`].

use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

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
