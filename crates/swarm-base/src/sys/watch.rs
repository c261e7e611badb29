//! Waiting for changes in a set of folders: file events from `notify`, no
//! busy polling. Events are hints: a waiter looks at the paths they name,
//! and re-lists its folders whenever that may not be enough (lost events, a
//! folder that appeared, the slow safety timer). Used by every follower
//! (`--follow`, `--wait`, the cockpit's stream, the A2A task tracker).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

/// Re-check interval with working file events (a safety net only, so it is
/// slow: a re-check lists folders that may hold tens of thousands of files).
const SAFETY: Duration = Duration::from_secs(30);
/// Re-check interval when file events are unavailable (e.g. inotify limits).
const FALLBACK: Duration = Duration::from_millis(500);

/// Watches a set of folders (non-recursively); a folder that does not exist yet
/// is covered by watching its nearest existing ancestor until it appears.
pub struct DirWatch {
    watcher: Option<RecommendedWatcher>,
    rx: Receiver<notify::Result<Event>>,
    wanted: Vec<PathBuf>,
    watched: HashSet<PathBuf>,
    /// The inode each watched folder had when its watch was set up: an
    /// event about the folder itself that arrives late (from its parent's
    /// watch, before the folder got its own) must not drop a watch on the
    /// same folder, or its content is reported fresh, and listed, twice.
    inodes: std::collections::HashMap<PathBuf, u64>,
    /// A folder could not be watched: re-check at the fallback pace.
    degraded: bool,
    /// Wanted folders whose content no event has reported yet (see
    /// [`Wake::fresh`]), for the next wait to hand over.
    fresh: Vec<PathBuf>,
}

impl DirWatch {
    /// Starts watching. Without file events (the watcher cannot start) it
    /// says so once on stderr and falls back to a slow re-check.
    pub fn new(dirs: Vec<PathBuf>) -> DirWatch {
        let (tx, rx) = mpsc::channel();
        let watcher = match notify::recommended_watcher(tx) {
            Ok(w) => Some(w),
            Err(e) => {
                eprintln!(
                    "warning: file events unavailable ({e}); checking every {} ms\n  hint: on Linux, raise fs.inotify.max_user_instances / max_user_watches",
                    FALLBACK.as_millis()
                );
                None
            }
        };
        let mut w = DirWatch {
            watcher,
            rx,
            wanted: dirs,
            watched: HashSet::new(),
            inodes: Default::default(),
            degraded: false,
            fresh: Vec::new(),
        };
        w.arm();
        w
    }

    /// The folder to watch for `dir`: itself, or its nearest existing ancestor.
    fn target(dir: &Path) -> Option<PathBuf> {
        dir.ancestors().find(|a| a.is_dir()).map(Path::to_path_buf)
    }

    /// Adds watches for folders that now exist; drops ancestor watches that are
    /// no longer needed (they only add noise). True when a folder got a new
    /// watch (what it held before that was never reported).
    fn arm(&mut self) -> bool {
        // A folder created between choosing its ancestor and watching that
        // ancestor sends no event: re-check until the targets stand still.
        let mut added = false;
        for _ in 0..8 {
            let needed: HashSet<PathBuf> =
                self.wanted.iter().filter_map(|d| Self::target(d)).collect();
            if needed == self.watched || self.watcher.is_none() {
                break;
            }
            added |= self.arm_once(needed);
        }
        added
    }

    fn arm_once(&mut self, needed: HashSet<PathBuf>) -> bool {
        let Some(w) = self.watcher.as_mut() else {
            return false;
        };
        for old in self
            .watched
            .difference(&needed)
            .cloned()
            .collect::<Vec<_>>()
        {
            let _ = w.unwatch(&old);
            self.watched.remove(&old);
            self.inodes.remove(&old);
        }
        let mut added = false;
        for dir in needed {
            if self.watched.contains(&dir) {
                continue;
            }
            match w.watch(&dir, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    // What it held before now was never reported.
                    if self.wanted.contains(&dir) {
                        self.fresh.push(dir.clone());
                    }
                    if let Some(ino) = inode(&dir) {
                        self.inodes.insert(dir.clone(), ino);
                    }
                    self.watched.insert(dir);
                    added = true;
                }
                Err(e) => {
                    if !self.degraded {
                        eprintln!(
                            "warning: cannot watch {} ({e}); checking every {} ms",
                            crate::text::escape(&dir.display().to_string()),
                            FALLBACK.as_millis()
                        );
                    }
                    self.degraded = true;
                }
            }
        }
        added
    }

    /// Blocks until something changed in a watched folder or the re-check
    /// interval passed, then says what changed: the paths inside the wanted
    /// folders, or `rescan` when only a full look can tell (timer, lost
    /// events, a folder that appeared).
    pub fn wait(&mut self) -> Wake {
        self.wait_for(SAFETY)
    }

    /// What an event about `p` tells: an entry of a wanted folder, or a
    /// watched folder itself changed (then everything is looked at again).
    fn note_path(&mut self, p: PathBuf, wake: &mut Wake) {
        if p.parent()
            .is_some_and(|d| self.wanted.iter().any(|w| w == d))
        {
            wake.paths.push(p);
            return;
        }
        wake.rescan = true;
        // A watched folder itself was removed or replaced: its watch is
        // gone, so set it up again (`arm`). The same folder still there
        // keeps its watch.
        let same = inode(&p).is_some_and(|i| self.inodes.get(&p) == Some(&i));
        if !same && self.watched.remove(&p) {
            self.inodes.remove(&p);
            if let Some(w) = self.watcher.as_mut() {
                let _ = w.unwatch(&p);
            }
        }
    }

    /// [`DirWatch::wait`], re-checking after at most `limit` (a long poll
    /// must answer by its deadline).
    pub fn wait_for(&mut self, limit: Duration) -> Wake {
        let interval = if self.watcher.is_some() && !self.degraded {
            SAFETY
        } else {
            FALLBACK
        }
        .min(limit);
        let mut wake = Wake::default();
        let mut woke = false;
        // A deadline, not a timeout per receive: reads in the watched
        // folders (access events, skipped below) arriving more often than
        // the interval would otherwise keep the wait from ever ending.
        let deadline = std::time::Instant::now() + interval;
        let mut timeout = interval;
        loop {
            match self.rx.recv_timeout(timeout) {
                Ok(Ok(ev)) => {
                    // Opening or reading is no change; our own reads of the
                    // watched folders would otherwise wake us forever.
                    if matches!(ev.kind, EventKind::Access(_)) {
                        if !woke {
                            timeout = deadline.saturating_duration_since(std::time::Instant::now());
                        }
                        continue;
                    }
                    woke = true;
                    // Drain what is already queued, then report once.
                    timeout = Duration::ZERO;
                    if ev.need_rescan() || ev.paths.is_empty() {
                        wake.rescan = true;
                    }
                    if ev.need_rescan() {
                        // Events were dropped: any folder may hide news.
                        self.fresh.extend(self.wanted.iter().cloned());
                    }
                    for p in ev.paths {
                        self.note_path(p, &mut wake);
                    }
                }
                Ok(Err(_)) => {
                    woke = true;
                    timeout = Duration::ZERO;
                    wake.rescan = true;
                    self.fresh.extend(self.wanted.iter().cloned());
                }
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    // No watcher (or it died): fall back to the timer.
                    self.watcher = None;
                    if !woke {
                        std::thread::sleep(FALLBACK.min(limit));
                    }
                    break;
                }
            }
        }
        if !woke || self.arm() {
            wake.rescan = true;
        }
        wake.fresh = std::mem::take(&mut self.fresh);
        wake.fresh.sort();
        wake.fresh.dedup();
        wake.fresh.retain(|d| d.is_dir());
        wake
    }
}

/// The inode of folder `p` (None when it is not there).
fn inode(p: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p)
        .ok()
        .filter(|m| m.is_dir())
        .map(|m| m.ino())
}

/// What changed since the last wait.
#[derive(Debug, Default)]
pub struct Wake {
    /// Entries created, changed or renamed directly in a wanted folder.
    pub paths: Vec<PathBuf>,
    /// Look at everything again.
    pub rescan: bool,
    /// Wanted folders whose content no event reported: a watch set up just
    /// now (on the first wait: every folder; later: one that appeared or
    /// was replaced, possibly with files already in it) or events dropped.
    /// A follower that lists some folders only now and then (a `sent/` of
    /// tens of thousands) lists these in full.
    pub fresh: Vec<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads of a watched folder's files (access events, no change) that
    /// come more often than the wait's limit do not keep it waiting: the
    /// headless supervisor waits here between looks at its agents, and a
    /// `swarm status` polled in a loop once kept it from ever looking.
    #[test]
    fn reads_in_a_watched_folder_do_not_keep_a_wait_from_ending() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("50_x.handoff");
        std::fs::write(&file, "x").unwrap();
        let mut w = DirWatch::new(vec![dir.path().to_path_buf()]);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::read(&file);
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for _ in 0..3 {
                w.wait_for(Duration::from_millis(100));
            }
            let _ = tx.send(());
        });
        // A deadline for a hang, not a measure: three waits end long before.
        let ended = rx.recv_timeout(Duration::from_secs(30)).is_ok();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap();
        assert!(ended, "the wait never ended while its folder was read");
    }

    /// A folder renamed into place with a file already in it: no event
    /// names the file, so the folder is reported fresh (to be listed).
    #[test]
    fn a_folder_that_appears_with_a_file_in_it_is_reported_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let wanted = dir.path().join("sent");
        let mut w = DirWatch::new(vec![wanted.clone()]);
        let parked = dir.path().join("parked");
        std::fs::create_dir(&parked).unwrap();
        std::fs::write(parked.join("50_x.handoff"), "x").unwrap();
        std::fs::rename(&parked, &wanted).unwrap();
        let end = std::time::Instant::now() + Duration::from_secs(20);
        let mut fresh = Vec::new();
        while fresh.is_empty() && std::time::Instant::now() < end {
            fresh = w.wait_for(Duration::from_millis(200)).fresh;
        }
        assert_eq!(fresh, vec![wanted.clone()]);
        // Reported once: after that its own events name its files.
        std::fs::write(wanted.join("50_y.handoff"), "y").unwrap();
        let mut wake = w.wait_for(Duration::from_millis(200));
        while wake.paths.is_empty() && std::time::Instant::now() < end {
            assert!(wake.fresh.is_empty(), "{:?}", wake.fresh);
            wake = w.wait_for(Duration::from_millis(200));
        }
        assert!(wake.fresh.is_empty(), "{:?}", wake.fresh);
        assert!(
            wake.paths.contains(&wanted.join("50_y.handoff")),
            "{:?}",
            wake.paths
        );
    }
}
