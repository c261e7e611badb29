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

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, SystemTime};

use notify::Watcher;
use serde::{Deserialize, Serialize};

use crate::daemon::journal::{Event, Journal, Kind, Stamps};
use crate::fsx;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::trail::{self, Loaded};
use crate::sys::log_reader::EventReader;

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

/// Where a copy sits, as far as this module cares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    InProcess,
    Completed,
}

/// The journaling half, owned by the watcher's thread.
struct Recorder {
    project: Project,
    journal: Journal,
    max_bytes: u64,
    /// `in_process/` and `completed/` of every served worktree.
    folders: HashMap<PathBuf, Stage>,
    /// Copies journaled lately, and when (repeated events are dropped).
    recent: HashMap<Key, std::time::Instant>,
    /// Copies in process whose `dequeued` is journaled (until completed).
    taken: HashSet<(String, String)>,
    /// Journal ends read at past moments, oldest first (the next mark's
    /// offset is the newest one read at least [`SLACK`] before its since,
    /// where a catch-up starts looking).
    ends: VecDeque<(SystemTime, u64)>,
    mark: Option<Mark>,
    /// When a line was last journaled (the mark moves on after it).
    wrote: Option<std::time::Instant>,
    /// The worktrees served (their folders are watched once they exist).
    roots: Vec<PathBuf>,
    /// A folder could not be watched: catch-ups look every few seconds.
    blind: bool,
}

impl Recorder {
    fn stage_of(&self, p: &Path) -> Option<Stage> {
        let parent = p.parent()?;
        if let Some(s) = self.folders.get(parent) {
            return Some(*s);
        }
        let batch = parent.file_name()?.to_string_lossy().into_owned();
        if !crate::protocol::grammar::is_batch_dir_name(&batch) {
            return None;
        }
        self.folders.get(parent.parent()?).copied()
    }

    /// Journals what the file at `p` says, if it is news; `known` holds
    /// what the journal already names (a catch-up), `floor` the time before
    /// which every stamp was journaled already.
    fn look(&mut self, p: &Path, known: Option<&HashSet<Key>>, floor: Option<SystemTime>) {
        let Some(stage) = self.stage_of(p) else {
            return;
        };
        self.look_at(p, stage, known, floor);
    }

    /// [`Recorder::look`] at a file known to be at `stage`.
    fn look_at(
        &mut self,
        p: &Path,
        stage: Stage,
        known: Option<&HashSet<Key>>,
        floor: Option<SystemTime>,
    ) {
        if !p
            .file_name()
            .is_some_and(|n| crate::protocol::grammar::valid_handoff_name(&n.to_string_lossy()))
        {
            return;
        }
        let Loaded::Ok(m) = trail::load_message(p, self.max_bytes) else {
            return;
        };
        let (Some(id), Some(recipient)) = (m.id(), m.recipient()) else {
            return;
        };
        let (id, recipient) = (id.to_string(), recipient.to_string());
        let stamps = Stamps::of(&m);
        let before_floor = |s: &Option<String>| {
            floor.is_some_and(|f| {
                s.as_deref()
                    .and_then(crate::protocol::clock::parse)
                    .is_some_and(|t| SystemTime::from(t) + SLACK < f)
            })
        };
        let copy = (id.clone(), recipient.clone());
        let kinds: &[Kind] = match stage {
            // A copy being stamped `completed_at` is about to move on.
            Stage::InProcess if stamps.completed_at.is_some() => &[],
            Stage::InProcess if stamps.dequeued_at.is_none() => &[],
            Stage::InProcess => &[Kind::Dequeued],
            Stage::Completed => &[Kind::Dequeued, Kind::Completed],
        };
        for &kind in kinds {
            let k = key(kind, &id, &recipient);
            let stamp = match kind {
                Kind::Dequeued => &stamps.dequeued_at,
                _ => &stamps.completed_at,
            };
            let dup = self.recent.contains_key(&k)
                || known.is_some_and(|s| s.contains(&k))
                || (kind == Kind::Dequeued && self.taken.contains(&copy))
                || before_floor(stamp);
            if dup {
                // Remembered as handled: a repeated event about the same
                // move (or the copy no longer being taken once finished)
                // must not journal it after all.
                self.recent.insert(k, std::time::Instant::now());
                continue;
            }
            let mut ev = Event::new(kind).message(&m).recipient(&recipient).path(p);
            ev.stamps = Some(stamps.clone());
            self.journal.record(&ev);
            self.recent.insert(k, std::time::Instant::now());
            self.wrote = Some(std::time::Instant::now());
        }
        // Taken (journaled now or before) once it carries its stamp; a copy
        // moved in before its stamp is not yet.
        match stage {
            Stage::InProcess if kinds.contains(&Kind::Dequeued) => {
                self.taken.insert(copy);
            }
            Stage::InProcess => {}
            Stage::Completed => {
                self.taken.remove(&copy);
            }
        }
    }

    /// Journals what arrived in the folders since the mark (every folder),
    /// or everything in folders watched only now (`fresh`: the mark says
    /// nothing of them), deduplicated against the journal after the mark.
    fn catch_up(&mut self, fresh: Option<&[PathBuf]>) {
        let since = match fresh {
            Some(_) => None,
            None => self.mark.map(|m| {
                m.since()
                    .checked_sub(SLACK)
                    .unwrap_or(SystemTime::UNIX_EPOCH)
            }),
        };
        let dirs: Vec<PathBuf> = match fresh {
            Some(d) => d.to_vec(),
            None => self.folders.keys().cloned().collect(),
        };
        let mut arrived = Vec::new();
        for d in &dirs {
            // Every copy in process is looked at (they are few), so one
            // whose `dequeued` was journaled before is known as taken and
            // not journaled again when it completes.
            let since = since.filter(|_| self.folders.get(d) != Some(&Stage::InProcess));
            match trail::arrived_since(d, since) {
                Ok(v) => arrived.extend(v),
                Err(e) => eprintln!("handoffd: cannot list {}: {e}", d.display()),
            }
        }
        // Finished copies archived before they were looked at (see the
        // module doc): those archived since the mark, or every one while
        // there is no mark yet (nothing was vouched for).
        let mut archived = Vec::new();
        let from = self.mark.map(|m| {
            m.since()
                .checked_sub(SLACK)
                .unwrap_or(SystemTime::UNIX_EPOCH)
        });
        for root in self.served_roots() {
            for day in Worktree::new(root).archive_days() {
                let d = day.join("completed");
                match trail::arrived_since(&d, from) {
                    Ok(v) => archived.extend(v),
                    Err(e) => eprintln!("handoffd: cannot list {}: {e}", d.display()),
                }
            }
        }
        if arrived.is_empty() && archived.is_empty() {
            return;
        }
        let offset = self
            .mark
            .map_or_else(|| oldest_offset(&self.project.events_file()), |m| m.offset);
        let known = journaled_since(&self.project, offset);
        let floor = since.and(self.mark.map(|m| m.since()));
        for p in arrived {
            self.look(&p, Some(&known), floor);
        }
        let floor = self.mark.map(|m| m.since());
        for p in archived {
            self.look_at(&p, Stage::Completed, Some(&known), floor);
        }
    }

    /// The served worktrees, as absolute paths.
    fn served_roots(&self) -> Vec<PathBuf> {
        self.roots
            .iter()
            .map(|r| {
                if r.is_absolute() {
                    r.clone()
                } else {
                    self.project.root.join(r)
                }
            })
            .collect()
    }

    /// Moves the mark on: everything that arrived before now (less the
    /// slack) was journaled by the time this runs.
    fn advance(&mut self, now: SystemTime) {
        // Nothing new journaled: the mark stands (no write while idle).
        let quiet = self.wrote.is_none_or(|w| w.elapsed() > SLACK + MARK_EVERY);
        if quiet && self.mark.is_some() {
            return;
        }
        let end = crate::sys::logfile::end(&self.project.events_file());
        self.ends.push_back((now, end));
        let since = now - SLACK;
        // A catch-up looks at what arrived from `since` less the slack on:
        // the offset is the newest end read at or before that moment, so
        // every such arrival's line lies after it.
        let from = since - SLACK;
        while self.ends.len() > 1 && self.ends[1].0 <= from {
            self.ends.pop_front();
        }
        let Some(&(t, offset)) = self.ends.front() else {
            return;
        };
        if t > from {
            return;
        }
        let mark = Mark {
            since_ns: ns(since),
            offset,
        };
        if self.mark == Some(mark) {
            return;
        }
        let body = match serde_json::to_vec(&mark) {
            Ok(b) => b,
            Err(_) => return,
        };
        let dir = self.project.daemon_dir();
        if !dir.is_dir() {
            return;
        }
        // The mark is fsynced: so must be every line it vouches for, or a
        // power cut keeps the mark and loses the lines, which no catch-up
        // then brings back (they arrived before `since`).
        if let Err(e) = self.journal.sync_events() {
            eprintln!(
                "handoffd: cannot fsync {} ({e}); the progress mark stays where it is",
                self.project.events_file().display()
            );
            return;
        }
        match fsx::replace(&dir, &mark_file(&self.project), &body) {
            Ok(()) => self.mark = Some(mark),
            Err(e) => eprintln!(
                "handoffd: cannot write {}: {e}",
                mark_file(&self.project).display()
            ),
        }
        let old = std::time::Instant::now()
            .checked_sub(REMEMBER)
            .unwrap_or_else(std::time::Instant::now);
        self.recent.retain(|_, t| *t > old);
    }

    /// One event of the watcher.
    fn event(&mut self, ev: &notify::Event) {
        use notify::event::{EventKind, ModifyKind};
        if ev.need_rescan() {
            self.catch_up(None);
        }
        // Our own reads raise access events: only arrivals count.
        if !matches!(
            ev.kind,
            EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(_)) | EventKind::Any
        ) {
            return;
        }
        for p in &ev.paths {
            let batch = p
                .file_name()
                .is_some_and(|n| crate::protocol::grammar::is_batch_dir_name(&n.to_string_lossy()));
            if batch && p.is_dir() {
                // A batch made or finished: what it holds may have no
                // events of its own.
                if self.stage_of(&p.join("x")).is_some() {
                    for n in trail::handoff_names(p).unwrap_or_default() {
                        self.look(&p.join(n), None, None);
                    }
                }
            } else {
                self.look(p, None, None);
            }
        }
    }

    /// Watches the folders of the served worktrees that exist now; those
    /// watched for the first time are caught up whole.
    fn rewatch(&mut self, w: Option<&mut notify::RecommendedWatcher>, roots: Option<Vec<PathBuf>>) {
        if let Some(r) = roots {
            self.roots = r;
        }
        let fresh = serve(self, w);
        if !fresh.is_empty() {
            self.catch_up(Some(&fresh));
        }
    }
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
        let fs_tx = tx.clone();
        let watcher = if poll {
            Err(notify::Error::generic("polling"))
        } else {
            notify::recommended_watcher(move |r| {
                let _ = fs_tx.send(Msg::Fs(r));
            })
        };
        let mut r = Recorder {
            project: project.clone(),
            journal: journal.clone(),
            max_bytes,
            folders: HashMap::new(),
            recent: HashMap::new(),
            taken: HashSet::new(),
            ends: VecDeque::new(),
            mark: read_mark(project),
            wrote: None,
            roots,
            blind: false,
        };
        let start = SystemTime::now();
        r.ends
            .push_back((start, crate::sys::logfile::end(&project.events_file())));
        let mut watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                if !poll {
                    eprintln!("handoffd: no file events for the progress journal ({e}); listing");
                }
                None
            }
        };
        serve(&mut r, watcher.as_mut());
        r.catch_up(None);
        let mut w = watcher;
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
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
            })
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

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Watches the copies folders of the served worktrees (a missing one is
/// left for a later call) and forgets those no longer served; returns the
/// folders newly watched.
fn serve(r: &mut Recorder, mut w: Option<&mut notify::RecommendedWatcher>) -> Vec<PathBuf> {
    let mut want: HashMap<PathBuf, Stage> = HashMap::new();
    for root in &r.roots {
        let root = if root.is_absolute() {
            root.clone()
        } else {
            r.project.root.join(root)
        };
        let wt = Worktree::new(root);
        want.insert(wt.in_process(), Stage::InProcess);
        want.insert(wt.completed(), Stage::Completed);
    }
    for gone in r
        .folders
        .keys()
        .filter(|d| !want.contains_key(*d))
        .cloned()
        .collect::<Vec<_>>()
    {
        if let Some(w) = w.as_mut() {
            let _ = w.unwatch(&gone);
        }
        r.folders.remove(&gone);
    }
    let mut fresh = Vec::new();
    for (dir, stage) in want {
        if r.folders.contains_key(&dir) || !dir.is_dir() {
            continue;
        }
        if let Some(w) = w.as_mut() {
            if let Err(e) = w.watch(&dir, notify::RecursiveMode::Recursive) {
                // Out of inotify watches, say: looked at every few seconds.
                eprintln!(
                    "handoffd: cannot watch {} ({e}); listing it every {}s instead",
                    dir.display(),
                    MARK_EVERY.as_secs()
                );
                r.blind = true;
            }
        }
        r.folders.insert(dir.clone(), stage);
        fresh.push(dir);
    }
    fresh
}
