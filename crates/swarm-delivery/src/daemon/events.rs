//! What wakes `handoffd` between timers: file events from the watched
//! folders and the stop signals, as one queue of [`Msg`]. Events are hints
//! (the module doc of `daemon` says why a lost one costs at most a rescan):
//! the watcher never blocks on a full queue, it sets [`Events::overflowed`]
//! instead, which the loop turns into a rescan of every outbox.
//!
//! The set of watched folders is kept in step with the roles (`sync`): an
//! outbox that does not exist yet is made first, so its first file raises
//! an event.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;

use notify::Watcher;

/// File events queued between passes at most. When the queue is full the
/// next one is dropped and a rescan of every outbox is due instead, so a
/// burst of 40 000 files costs a bounded queue, not one entry per file.
const EVENT_QUEUE: usize = 1024;

pub(super) enum Msg {
    /// Something changed under a watched folder; `rescan` when events were lost.
    Fs {
        paths: Vec<PathBuf>,
        rescan: bool,
        /// Only an open or read (our own reads of outbox files among them):
        /// nothing changed, so it never starts a pass.
        access: bool,
    },
    WatchError(String),
    Signal,
}

/// The queue, its watcher (none when polling) and the watched folders.
pub(super) struct Events {
    pub rx: Receiver<Msg>,
    overflow: Arc<AtomicBool>,
    watcher: Option<notify::RecommendedWatcher>,
    /// A set, not a list: with thousands of roles a `contains` per folder
    /// made every resync quadratic.
    watched: HashSet<PathBuf>,
    root: PathBuf,
}

impl Events {
    /// Signals set `stop` and wake the loop; file events come unless `poll`
    /// (or when the kernel gives none: then the caller polls, `poll_every`
    /// only names the pace in the message).
    pub fn start(root: &Path, poll: bool, stop: Arc<AtomicBool>, poll_every: &str) -> Events {
        let (tx, rx) = mpsc::sync_channel::<Msg>(EVENT_QUEUE);
        let overflow = Arc::new(AtomicBool::new(false));
        on_signals(tx.clone(), stop);
        let watcher = if poll {
            None
        } else {
            match watcher(tx, overflow.clone()) {
                Ok(w) => Some(w),
                Err(e) => {
                    eprintln!(
                        "handoffd: file events unavailable ({e}); polling every {poll_every}"
                    );
                    None
                }
            }
        };
        Events {
            rx,
            overflow,
            watcher,
            watched: HashSet::new(),
            root: root.to_path_buf(),
        }
    }

    /// True when file events come (the order index and the progress
    /// journal are kept from them too).
    pub fn watching(&self) -> bool {
        self.watcher.is_some()
    }

    /// Events were dropped since the last call (a rescan is due).
    pub fn overflowed(&self) -> bool {
        self.overflow.swap(false, Ordering::Relaxed)
    }

    /// Watches exactly `want` (non-recursively): new folders are added (an
    /// outbox made first), folders no longer wanted dropped, and a folder
    /// replaced since its watch was set up watched again.
    pub fn sync(&mut self, want: Vec<PathBuf>) {
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        let want: HashSet<PathBuf> = want.into_iter().collect();
        for p in self.watched.iter().filter(|p| !want.contains(*p)) {
            let _ = w.unwatch(p);
        }
        for p in &want {
            if !self.watched.contains(p) || !p.exists() {
                make_watchable(&self.root, p);
                if let Err(e) = w.watch(p, notify::RecursiveMode::NonRecursive) {
                    eprintln!("handoffd: cannot watch {}: {e}", p.display());
                }
            }
        }
        self.watched = want;
    }
}

/// SIGTERM, SIGINT and SIGHUP ask the daemon to stop after the file in hand.
fn on_signals(tx: SyncSender<Msg>, stop: Arc<AtomicBool>) {
    match signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ]) {
        Ok(mut signals) => {
            std::thread::spawn(move || {
                for _ in signals.forever() {
                    stop.store(true, Ordering::Relaxed);
                    let _ = tx.send(Msg::Signal);
                }
            });
        }
        Err(e) => eprintln!("handoffd: cannot install signal handlers: {e}"),
    }
}

fn watcher(
    tx: SyncSender<Msg>,
    lost: Arc<AtomicBool>,
) -> notify::Result<notify::RecommendedWatcher> {
    notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let msg = match res {
            Ok(ev) => Msg::Fs {
                rescan: ev.need_rescan(),
                // A close after writing may end an in-place write; every
                // other access event changes nothing.
                access: matches!(
                    ev.kind,
                    notify::EventKind::Access(a)
                        if a != notify::event::AccessKind::Close(notify::event::AccessMode::Write)
                ),
                paths: ev.paths,
            },
            Err(e) => Msg::WatchError(e.to_string()),
        };
        // Our own listings of watched folders raise access events that
        // change nothing: dropped here, so they never fill the queue (a
        // full queue means a rescan).
        if matches!(
            &msg,
            Msg::Fs {
                access: true,
                rescan: false,
                ..
            }
        ) {
            return;
        }
        // Never blocks the watcher: a full queue coalesces into one rescan.
        if let Err(mpsc::TrySendError::Full(_)) = tx.try_send(msg) {
            lost.store(true, Ordering::Relaxed);
        }
    })
}

/// Creates a missing outbox so it can be watched: one mkdir per level below
/// its worktree (below `.swarmforge/` for the project root's own outbox), and
/// never a project-level folder. Recreating `.swarmforge/daemon/` when
/// roles.tsv vanished made `rm -rf` of a project fail and kept the daemon
/// alive; now a project being deleted is never brought back half-way.
fn make_watchable(root: &Path, dir: &Path) {
    if dir.is_dir() || dir.file_name().is_none_or(|n| n != "outbox") {
        return;
    }
    let Some(sf) = dir.parent().and_then(Path::parent) else {
        return;
    };
    let Some(wt) = sf.parent() else { return };
    let base = if wt == root { sf } else { wt };
    let Ok(rel) = dir.strip_prefix(base) else {
        return;
    };
    let mut cur = base.to_path_buf();
    for c in rel.components() {
        cur.push(c);
        match std::fs::create_dir(&cur) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return,
        }
    }
}
