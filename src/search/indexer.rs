//! The daemon's indexer: a thread that brings the search index up to date
//! after delivery passes, never inside one (a pass only nudges it, without
//! waiting). Refreshes are at least [`GAP`] apart, so a busy swarm pays for
//! at most one a second; a query catches up by itself anyway. The thread
//! runs at the lowest CPU priority (`background`).

use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use crate::protocol::layout::Project;

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
            crate::sys::background::lowest_priority();
            let index = super::Index::new(&project);
            let mut warned = false;
            let mut last = Instant::now() - GAP;
            loop {
                match rx.recv_timeout(IDLE) {
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
                    Ok(_) => warned = false,
                    Err(e) if !warned => {
                        eprintln!("handoffd: search index not refreshed: {e}");
                        warned = true;
                    }
                    Err(_) => {}
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
