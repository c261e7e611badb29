//! The journal of work taken and finished: `dequeued` and `completed` lines
//! in `events.jsonl`, one per copy, with the copy's stamps.
//!
//! An agent takes and finishes its work itself (`ready-next`,
//! `done-current`: renames in its own inbox), and runs confined: it cannot
//! write `.swarmforge/`. So the daemon journals those moves from the files:
//! it watches every served worktree's `inbox/in_process/` and
//! `inbox/completed/` (and their `batch_*` folders), reads each file that
//! arrives (bounded) and journals `dequeued` for a copy in process that
//! carries its `dequeued_at`, `completed` for a finished one, each with the
//! stamps read from the file. Charts and audits read those lines instead of
//! every copy (docs/cockpit.md, "Charts").
//!
//! The invariant, kept in `.swarmforge/daemon/progress.json` (the mark):
//! every copy that arrived in one of those folders before `since` is
//! journaled, and every line about one that arrived at or after `since`
//! lies after `offset` in the journal. Moves made while the daemon was down,
//! or between a move and its line when it was killed, or lost with a full
//! event queue, are found again from the files: a catch-up lists the folders
//! for what arrived since the mark (the inode change time a rename sets),
//! reads the journal from the mark's offset for what is journaled already,
//! and journals the rest, so nothing is missed and nothing journaled twice.
//! It runs before the daemon logs `started`, and again after lost events.
//! A copy may also have left `completed/` before it was looked at: `swarm
//! archive` moved it while the daemon was down, or before a `completed/`
//! made since the last look was watched. So every catch-up also lists the
//! archive's `<day>/completed/` folders for what arrived since the mark,
//! journaling a finished copy there that the journal lacks and whose
//! `completed_at` is not before the mark (every one, before the first
//! mark). They are never watched: a copy journaled long ago and archived
//! now is no news.
//! `swarm audit --check` compares the lines with the files
//! (views/audit/journaled.rs).
//!
//! The mark is fsynced, and so, just before it is published, is the journal
//! (one fsync per mark, every few seconds while work moves; never per
//! line): after a power cut the mark on the disk vouches only for lines the
//! disk kept, and whatever was journaled after it and lost is found again by
//! the catch-up, as after a kill.
//!
//! The parts: the journaling itself, owned by the watcher's thread
//! (`recorder`); here, the mark, the journal's lines as this module reads
//! them, and the thread.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::daemon::journal::{Journal, Kind, Stamps};
use crate::fsx;
use crate::protocol::layout::Project;
use crate::sys::log_reader::EventReader;

mod recorder;

use recorder::{serve, Recorder};

/// How often the mark moves on while work moves.
const MARK_EVERY: Duration = Duration::from_secs(5);
/// Margin for the coarse clock of inode times and for events still on
/// their way from the kernel: the mark's `since` stays this far behind the
/// moment everything before it was journaled.
const SLACK: Duration = Duration::from_secs(1);
/// How long a journaled copy is remembered to drop repeated events about
/// it (a rename seen in two watched folders is reported twice).
const REMEMBER: Duration = Duration::from_secs(120);

/// The mark (see the module doc), as stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Nanoseconds since the epoch.
    pub since_ns: u64,
    pub offset: u64,
}

impl Mark {
    pub fn since(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(self.since_ns)
    }
}

/// The mark's file.
pub fn mark_file(project: &Project) -> PathBuf {
    project.daemon_dir().join("progress.json")
}

/// The stored mark; `None` when there is none (no daemon journaled this
/// project's progress yet) or it is unreadable.
pub fn read_mark(project: &Project) -> Option<Mark> {
    let bytes = fsx::read_bounded(&mark_file(project), 4096).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn ns(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Which kind of line a copy's key is journaled under.
type Key = (Kind, String, String);

fn key(kind: Kind, id: &str, recipient: &str) -> Key {
    (kind, id.to_string(), recipient.to_string())
}

/// The `dequeued` and `completed` copies the journal names from `offset`
/// on (the catch-up's "journaled already").
pub fn journaled_since(project: &Project, offset: u64) -> HashSet<Key> {
    let mut seen = HashSet::new();
    let path = project.events_file();
    let start = match EventReader::new(&path, offset) {
        Ok(r) => Some(r),
        // Rotated away: from the oldest line kept.
        Err(_) => EventReader::new(&path, oldest_offset(&path)).ok(),
    };
    if let Some(mut r) = start {
        let _ = r.poll(&mut |line, _| {
            if let Some((kind, id, recipient)) = progress_line(line) {
                seen.insert((kind, id, recipient));
            }
            Ok(())
        });
    }
    seen
}

/// The offset of the oldest line the journal keeps.
pub fn oldest_offset(path: &Path) -> u64 {
    crate::sys::logfile::files(path)
        .ok()
        .and_then(|f| f.first().map(|p| p.start))
        .unwrap_or(0)
}

/// A journal line as the readers of progress need it.
#[derive(Debug, Deserialize)]
pub struct Line {
    pub kind: String,
    pub time: String,
    pub id: Option<String>,
    pub recipient: Option<String>,
    pub stamps: Option<Stamps>,
}

impl Line {
    pub fn parse(line: &[u8]) -> Option<Line> {
        serde_json::from_slice(line).ok()
    }

    /// `dequeued` or `completed`, or `None` for any other line.
    pub fn progress(&self) -> Option<Kind> {
        match self.kind.as_str() {
            "dequeued" => Some(Kind::Dequeued),
            "completed" => Some(Kind::Completed),
            _ => None,
        }
    }

    /// The copy's `completed_at`, as a time.
    pub fn completed_at(&self) -> Option<crate::protocol::clock::Instant> {
        let s = self.stamps.as_ref()?.completed_at.as_deref()?;
        crate::protocol::clock::parse(s)
    }
}

/// A `dequeued` or `completed` line's kind, id and recipient.
pub fn progress_line(line: &[u8]) -> Option<(Kind, String, String)> {
    let l = Line::parse(line)?;
    Some((l.progress()?, l.id?, l.recipient?))
}

enum Msg {
    Serve(Vec<PathBuf>),
    Fs(notify::Result<notify::Event>),
}

/// The running journal of progress: its thread stops (moving the mark on
/// one last time) on drop.
pub struct Progress {
    tx: mpsc::Sender<Msg>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Watches the worktrees `roots`, catches up with what moved since the
    /// mark (before returning: the daemon logs `started` after it), then
    /// keeps journaling on its own thread (from file events; `poll`, or
    /// without them, by a catch-up every few seconds).
    pub fn start(
        project: &Project,
        journal: &Journal,
        max_bytes: u64,
        roots: Vec<PathBuf>,
        poll: bool,
    ) -> Option<Progress> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let mut watcher = file_events(poll, tx.clone());
        let mut r = Recorder::new(project, journal, max_bytes, roots);
        serve(&mut r, watcher.as_mut());
        r.catch_up(None);
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || journal_until(&mut r, watcher, &rx, &halt))
            .ok()?;
        Some(Progress {
            tx,
            stop,
            thread: Some(thread),
        })
    }

    /// The worktrees served now (roles changed).
    pub fn serve(&self, roots: Vec<PathBuf>) {
        let _ = self.tx.send(Msg::Serve(roots));
    }
}

/// A watcher that sends its file events to `tx`; `None` with `poll`, or
/// when the system has none (said: the folders are listed instead).
fn file_events(poll: bool, tx: mpsc::Sender<Msg>) -> Option<notify::RecommendedWatcher> {
    if poll {
        return None;
    }
    match notify::recommended_watcher(move |r| {
        let _ = tx.send(Msg::Fs(r));
    }) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("handoffd: no file events for the progress journal ({e}); listing");
            None
        }
    }
}

/// The progress thread: journals what the events (or, without them, the
/// catch-ups) find, and moves the mark on every [`MARK_EVERY`], until
/// `halt`; then handles every event queued before the stop and moves the
/// mark one last time.
fn journal_until(
    r: &mut Recorder,
    mut w: Option<notify::RecommendedWatcher>,
    rx: &mpsc::Receiver<Msg>,
    halt: &AtomicBool,
) {
    let mut next = std::time::Instant::now() + MARK_EVERY;
    while !halt.load(Ordering::Relaxed) {
        let first = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(m) => Some(m),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        // Everything queued is handled before the mark moves.
        for m in first.into_iter().chain(rx.try_iter().collect::<Vec<_>>()) {
            match m {
                Msg::Serve(roots) => r.rewatch(w.as_mut(), Some(roots)),
                Msg::Fs(Ok(ev)) => r.event(&ev),
                Msg::Fs(Err(e)) => {
                    eprintln!("handoffd: progress watcher: {e}; catching up");
                    r.catch_up(None);
                }
            }
        }
        if std::time::Instant::now() >= next {
            // A folder made since (a new role's first take).
            r.rewatch(w.as_mut(), None);
            if w.is_none() || r.blind {
                // No file events: the folders are looked at.
                r.catch_up(None);
            }
            r.advance(SystemTime::now());
            next = std::time::Instant::now() + MARK_EVERY;
        }
    }
    // Every event queued before the stop is handled.
    for m in rx.try_iter().collect::<Vec<_>>() {
        if let Msg::Fs(Ok(ev)) = m {
            r.event(&ev);
        }
    }
    r.advance(SystemTime::now());
    drop(w);
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
