//! The journaling half of the progress journal, owned by the watcher's
//! thread: which served folders are watched, what a file that arrived in
//! one says, and the catch-up that finds what no event reported. The
//! invariant (the module doc of `progress`): every copy that arrived before
//! the mark's `since` is journaled, once.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use notify::Watcher;

use crate::daemon::journal::{Event, Journal, Kind, Stamps};
use crate::fsx;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::trail::{self, Loaded};

use super::{
    journaled_since, key, mark_file, ns, oldest_offset, read_mark, Key, Mark, MARK_EVERY, REMEMBER,
    SLACK,
};

/// Where a copy sits, as far as this module cares.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    InProcess,
    Completed,
}

/// The journaling half, owned by the watcher's thread.
pub(super) struct Recorder {
    pub(super) project: Project,
    pub(super) journal: Journal,
    pub(super) max_bytes: u64,
    /// `in_process/` and `completed/` of every served worktree.
    pub(super) folders: HashMap<PathBuf, Stage>,
    /// Copies journaled lately, and when (repeated events are dropped).
    pub(super) recent: HashMap<Key, std::time::Instant>,
    /// Copies in process whose `dequeued` is journaled (until completed).
    pub(super) taken: HashSet<(String, String)>,
    /// Journal ends read at past moments, oldest first (the next mark's
    /// offset is the newest one read at least [`SLACK`] before its since,
    /// where a catch-up starts looking).
    pub(super) ends: VecDeque<(SystemTime, u64)>,
    pub(super) mark: Option<Mark>,
    /// When a line was last journaled (the mark moves on after it).
    pub(super) wrote: Option<std::time::Instant>,
    /// The worktrees served (their folders are watched once they exist).
    pub(super) roots: Vec<PathBuf>,
    /// A folder could not be watched: catch-ups look every few seconds.
    pub(super) blind: bool,
}

impl Recorder {
    pub(super) fn stage_of(&self, p: &Path) -> Option<Stage> {
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
    pub(super) fn look(
        &mut self,
        p: &Path,
        known: Option<&HashSet<Key>>,
        floor: Option<SystemTime>,
    ) {
        let Some(stage) = self.stage_of(p) else {
            return;
        };
        self.look_at(p, stage, known, floor);
    }

    /// [`Recorder::look`] at a file known to be at `stage`.
    pub(super) fn look_at(
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
    pub(super) fn catch_up(&mut self, fresh: Option<&[PathBuf]>) {
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
    pub(super) fn served_roots(&self) -> Vec<PathBuf> {
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
    pub(super) fn advance(&mut self, now: SystemTime) {
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
    pub(super) fn event(&mut self, ev: &notify::Event) {
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
    pub(super) fn rewatch(
        &mut self,
        w: Option<&mut notify::RecommendedWatcher>,
        roots: Option<Vec<PathBuf>>,
    ) {
        if let Some(r) = roots {
            self.roots = r;
        }
        let fresh = serve(self, w);
        if !fresh.is_empty() {
            self.catch_up(Some(&fresh));
        }
    }
}

/// Watches the copies folders of the served worktrees (a missing one is
/// left for a later call) and forgets those no longer served; returns the
/// folders newly watched.
pub(super) fn serve(
    r: &mut Recorder,
    mut w: Option<&mut notify::RecommendedWatcher>,
) -> Vec<PathBuf> {
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

impl Recorder {
    /// The recorder of `project`'s journal for the worktrees `roots`,
    /// nothing watched yet; the journal's end now is where a catch-up
    /// starts looking.
    pub(super) fn new(
        project: &Project,
        journal: &Journal,
        max_bytes: u64,
        roots: Vec<PathBuf>,
    ) -> Recorder {
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
        r
    }
}
