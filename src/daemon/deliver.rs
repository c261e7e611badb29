//! One synchronous, idempotent delivery pass: the daemon's core (§6.4, issue 3).
//!
//! Every `*.handoff` in every role's outbox is taken in priority order (file
//! name order across all outboxes). A file is refused to `failed/` with a
//! reason before any copy is written when it is malformed, a symlink, not a
//! regular file, too large, sent from an outbox its `from` does not own (D8),
//! or names an unknown recipient. Otherwise each recipient gets a copy
//! published atomically into `inbox/new/` (skipping a recipient that already
//! holds the file anywhere in its inbox), then the original moves to `sent/`.
//! Killed at any instant and restarted, every message reaches every recipient
//! exactly once: copies are complete-or-absent, and the original leaves the
//! outbox only after every copy is durable. Under backlog the files go out
//! in groups that share each folder's fsync (group commit, see
//! [`Deliverer::pass`]); the rule holds per file within the group.

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::daemon::gate;
use crate::daemon::hook::{Admission, Duties, ForumHook, NoForum};
use crate::daemon::journal::{Event, Journal, Kind};
use crate::daemon::wake::{self, Waker};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::config::Config;
use crate::protocol::fields;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::{Role, Roles};
use crate::protocol::rules;

/// Headers only the daemon and helpers write; an outbox file carrying one is forged.
const DELIVERY_HEADERS: &[&str] = &["recipient", "enqueued_at", "dequeued_at", "completed_at"];

/// Headers every outbox file must carry.
const REQUIRED: &[&str] = &["id", "from", "to", "priority", "type", "created_at"];

/// First wait before a deferred file is tried again; doubled per retry up to
/// [`RETRY_CAP`]. A fault that lasts (a broken inbox, an unwritable `sent/`)
/// costs one attempt every few seconds, not a busy loop; a roles.tsv or
/// config change retries everything at once, since it may be the repair.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_CAP: Duration = Duration::from_secs(5);

struct Retry {
    next: Instant,
    backoff: Duration,
}

/// Descriptors kept free of outbox locks.
const LOCK_FD_RESERVE: u64 = 256;

/// Every this many rounds (see [`QUIET_CHECKS`]), every outbox is listed
/// again whatever its stamp says (bounds what a filesystem with odd
/// timestamps could hide).
const FULL_SCAN_EVERY: u32 = 30;

/// At most this many quiet outboxes are stat'ed per pass while file events
/// work: a file arriving is announced by its event (which un-quiets its
/// outbox at once), so the stamp check is only the safety net for a lost
/// event. Up to this many worktrees it covers every outbox on every rescan;
/// beyond, it rotates (10 000 worktrees: each one every 10 rescans), so an
/// idle daemon's cost does not grow with the table.
const QUIET_CHECKS: usize = 1000;

/// An outbox folder's identity and last change (mtime to the nanosecond).
type DirStamp = (u64, u64, i64, i64);

fn dir_stamp(dir: &Path) -> Option<DirStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(dir).ok()?;
    Some((m.dev(), m.ino(), m.mtime(), m.mtime_nsec()))
}

/// Whether a folder last changed long enough ago that any later change must
/// give it a different mtime, even on a filesystem with whole-second stamps.
fn settled(st: &DirStamp) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    st.2 + 2 < now
}

/// An outbox found empty (or missing), with its folder's stamp then
/// (`None`: missing): while the stamp is the same nothing arrived, so a
/// rescan skips it (one stat instead of the path checks and a listing; an
/// idle daemon with 10 000 roles stays idle).
struct Quiet {
    stamp: Option<DirStamp>,
}

fn positions(worktrees: &[(PathBuf, PathBuf)]) -> HashMap<PathBuf, usize> {
    worktrees
        .iter()
        .enumerate()
        .map(|(i, (w, _))| (w.clone(), i))
        .collect()
}

fn with_outboxes(worktrees: Vec<PathBuf>) -> Vec<(PathBuf, PathBuf)> {
    worktrees
        .into_iter()
        .map(|w| {
            let outbox = Worktree::new(&w).outbox();
            (w, outbox)
        })
        .collect()
}

/// What happened to one outbox file.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    Failed(String),
    /// Transient trouble (disk full, permissions): left in the outbox, retried.
    Deferred(String),
    /// Gone before we got to it.
    Vanished,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassReport {
    pub delivered: usize,
    pub failed: usize,
    pub deferred: usize,
    /// A stop was requested; the pass ended after the file in hand.
    pub interrupted: bool,
}

struct Candidate {
    name: String,
    path: PathBuf,
    worktree: PathBuf,
    /// Position of its worktree in `Deliverer::worktrees`.
    source: usize,
    /// Position of its outbox among this pass's sources (the listing cursor).
    key: usize,
}

/// An outbox a pass lists.
struct Source {
    index: usize,
    wt: PathBuf,
    outbox: PathBuf,
    stamp: Option<DirStamp>,
}

enum Validated {
    /// Canonical worktree path, locked (or served unlocked), plain outbox.
    Serve(PathBuf),
    /// No such folder (yet).
    Missing,
    /// Another daemon's, or a symlinked outbox.
    Skip(PathBuf),
}

/// Most outbox files held in memory at once: a pass streams a backlog in
/// chunks of this many (in priority order), so its memory does not grow with
/// the backlog.
const CHUNK: usize = 1024;

/// Most files committed as one group: their copies share each folder's
/// fsync. Bounds how long the first file of a group waits for the others'
/// file fsyncs (~64 ms on a slow disk) while making the 3 folder fsyncs a
/// few percent of a copy's cost.
const GROUP: usize = 64;

/// One file whose copies are published, waiting for its group's fsyncs.
struct Staged {
    c: Candidate,
    msg: Message,
    /// Positions in `Group::dirs` of every folder holding one of its copies.
    dirs: Vec<usize>,
    wakes: Vec<wake::Request>,
}

#[derive(Default)]
struct Group {
    staged: Vec<Staged>,
    /// Destination folders to fsync, each once.
    dirs: Vec<PathBuf>,
    at: HashMap<PathBuf, usize>,
}

impl Group {
    fn dir(&mut self, d: PathBuf) -> usize {
        if let Some(&i) = self.at.get(&d) {
            return i;
        }
        self.dirs.push(d.clone());
        self.at.insert(d, self.dirs.len() - 1);
        self.dirs.len() - 1
    }
}

/// A message the forum keeps state about (a discussion turn, a session's
/// digest or request): delivered alone, after every earlier file.
fn forum_bound(msg: &Message) -> bool {
    msg.get("discussion").is_some()
        || msg.get("session").is_some()
        || matches!(
            msg.kind(),
            Some(grammar::MessageType::Digest | grammar::MessageType::DigestRequest)
        )
}

fn parent_of(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new("."))
}

/// Every item name a recipient held when the index was built: everything in
/// `new/` plus everything inside the `batch_*` dirs of `in_process/` and
/// `completed/`. Items only move forward (new → in_process → completed), so a
/// name in `new/` at build time is held for good even after it moved into a
/// batch; and since this daemon is the only writer of `new/`, any copy made
/// before this pass is covered. No timestamps, no locks.
struct InboxIndex {
    names: HashSet<String>,
}

fn entry_names(dir: &Path) -> impl Iterator<Item = String> {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
}

impl InboxIndex {
    fn build(wt: &Worktree) -> InboxIndex {
        let mut names: HashSet<String> = entry_names(&wt.inbox_new()).collect();
        for base in [wt.in_process(), wt.completed()] {
            for b in crate::protocol::layout::batch_dirs(&base) {
                names.extend(entry_names(&b));
            }
        }
        InboxIndex { names }
    }
}

/// The delivery engine; the daemon decides when to call [`Deliverer::pass`].
pub struct Deliverer {
    pub project: Project,
    pub roles: Roles,
    pub config: Config,
    pub journal: Journal,
    pub waker: Waker,
    pub stop: Arc<AtomicBool>,
    /// Outbox files that may already have copies out there (present when this
    /// process started, or deferred mid-delivery): they get the thorough check.
    suspects: HashSet<PathBuf>,
    started: bool,
    /// The forum's duties (discussion turns, digests); see `daemon::hook`.
    pub forum: Box<dyn ForumHook>,
    /// Last deferral reason logged per file, so a stuck file logs once per cause.
    deferred: HashMap<PathBuf, String>,
    /// Each role's worktree path as written in roles.tsv → its canonical path
    /// (kept between passes; cleared on a reload and every full listing).
    canon: HashMap<PathBuf, PathBuf>,
    /// By position in `worktrees`: the canonical path of a worktree whose
    /// lock is claimed and whose outbox is a plain folder (same lifetime as
    /// `canon`).
    valid: Vec<Option<PathBuf>>,
    /// Outboxes named by file events (or holding a deferred file) since the
    /// last pass: all an event-driven pass lists.
    dirty: HashSet<usize>,
    /// The next pass checks every outbox (timer, lost events, reload).
    full_due: bool,
    started_sources: bool,
    /// The last pass checked every outbox.
    rescanned: bool,
    /// Symlinked outboxes already reported.
    aliased: HashSet<PathBuf>,
    /// Per recipient worktree, built at most once per pass (thorough checks only).
    index: HashMap<PathBuf, InboxIndex>,
    /// Every role named in roles.tsv since this process started. A sender or
    /// recipient that was a role and is gone now (roles.tsv edited, or being
    /// rewritten) is a transient fault: the file waits, it is not refused.
    known: HashSet<String>,
    /// When each deferred file may be tried again.
    retry: HashMap<PathBuf, Retry>,
    /// The flock on each served worktree's `handoffs/` folder (by canonical
    /// worktree path): one daemon per set of outboxes, however it was
    /// reached (another root spelling, a role worktree holding a copy of
    /// roles.tsv, a deleted pid file).
    locks: HashMap<PathBuf, fsx::Lock>,
    /// Outboxes already reported as served by another daemon (or unlockable).
    foreign: HashSet<PathBuf>,
    /// How many folder locks may be held: each keeps a descriptor open, and
    /// the watcher, the logs and the signal pipe need theirs.
    lock_budget: usize,
    budget_warned: bool,
    /// Empty outboxes by worktree path as written in roles.tsv.
    /// By position in `worktrees` (no hashing of 10 000 paths per pass).
    quiet: Vec<Option<Quiet>>,
    /// Worktree path → position in `worktrees`, for file events.
    position: HashMap<PathBuf, usize>,
    /// Passes since every outbox was last listed.
    scans: u32,
    /// No file events (polling): every quiet outbox is checked every pass.
    pub polling: bool,
    /// `roles.worktrees()` with each one's outbox path, computed once per
    /// table, not once per pass.
    worktrees: Vec<(PathBuf, PathBuf)>,
    /// Bumped whenever the list of worktrees changes (the daemon then
    /// re-syncs its watches).
    pub generation: u64,
}

/// Why a worktree's outbox cannot be ours: another process holds its lock.
fn held_by_other(handoffs: &Path) -> String {
    let who = fsx::lock_holder(handoffs)
        .map(|pid| format!("another handoffd (pid {pid})"))
        .unwrap_or_else(|| "another handoffd".into());
    format!(
        "{who} already serves {}; two daemons must never move the same files.\n  hint: stop that daemon first (`swarm stop <its project root>`, or kill it)",
        handoffs.display()
    )
}

impl Deliverer {
    pub fn new(
        project: Project,
        roles: Roles,
        config: Config,
        journal: Journal,
        waker: Waker,
    ) -> Self {
        let known = roles.roles.iter().map(|r| r.name.clone()).collect();
        let worktrees = with_outboxes(roles.worktrees());
        Deliverer {
            known,
            position: positions(&worktrees),
            worktrees,
            generation: 0,
            project,
            roles,
            config,
            journal,
            waker,
            stop: Arc::new(AtomicBool::new(false)),
            suspects: HashSet::new(),
            started: false,
            deferred: HashMap::new(),
            forum: Box::new(NoForum),
            index: HashMap::new(),
            canon: HashMap::new(),
            aliased: HashSet::new(),
            retry: HashMap::new(),
            locks: HashMap::new(),
            foreign: HashSet::new(),
            quiet: Vec::new(),
            valid: Vec::new(),
            dirty: HashSet::new(),
            full_due: true,
            started_sources: false,
            rescanned: false,
            scans: 0,
            polling: true,
            lock_budget: (fsx::fd_limit().saturating_sub(LOCK_FD_RESERVE) as usize).max(1),
            budget_warned: false,
        }
    }

    /// Takes the lock of a worktree's `handoffs/` folder unless held already.
    /// `Ok(false)`: another process holds it. A folder that does not exist
    /// yet (or is a symlink) cannot be locked and has no outbox to scan.
    fn claim(&mut self, wt_path: &Path) -> Result<bool, String> {
        if self.locks.contains_key(wt_path) {
            return Ok(true);
        }
        let handoffs = Worktree::new(wt_path).handoffs();
        if self.locks.len() >= self.lock_budget {
            // Served unlocked rather than stranded; said once.
            if !self.budget_warned {
                self.budget_warned = true;
                eprintln!(
                    "handoffd: the descriptor limit ({}) leaves room to lock {} worktrees; the others (first {}) are served unlocked, so a second daemon would not be kept out of them.\n  hint: raise `ulimit -n` (hard limit) for handoffd",
                    fsx::fd_limit(),
                    self.lock_budget,
                    handoffs.display()
                );
            }
            return Ok(true);
        }
        match fsx::try_lock_dir(&handoffs) {
            Ok(Some(lock)) => {
                self.locks.insert(wt_path.to_path_buf(), lock);
                self.foreign.remove(wt_path);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(format!("{}: {e}", handoffs.display())),
        }
    }

    /// At start-up: claims every served outbox, or names the one another
    /// daemon holds (then this daemon must not run).
    pub fn claim_all(&mut self) -> Result<(), String> {
        for wt in self.roles.worktrees() {
            let Ok(real) = wt.canonicalize() else {
                continue;
            };
            if let Ok(false) = self.claim(&real) {
                return Err(held_by_other(&Worktree::new(&real).handoffs()));
            }
        }
        Ok(())
    }

    /// Removes temp files older than `older_than` that killed writers left in
    /// the daemon's folder and the `inbox/tmp` and `outbox/tmp` of every
    /// worktree this daemon holds.
    /// A folder reached through a symlink is left alone (its files are not
    /// this project's to delete).
    pub fn clean_stale_temps(&self, older_than: Duration) {
        let plain = |d: &Path| {
            d.canonicalize().is_ok_and(|real| real == d)
                && fs::symlink_metadata(d).is_ok_and(|m| m.is_dir())
        };
        // The daemon's own folder: a rotation killed before it recorded
        // the log's new base leaves that file's temp there.
        let mut dirs = vec![self.project.daemon_dir()];
        for wt_path in self.locks.keys() {
            let wt = Worktree::new(wt_path);
            if wt.symlinked_inbox_folder().is_none() {
                dirs.push(wt.inbox_tmp());
            }
            dirs.push(wt.outbox_tmp());
        }
        for d in dirs.into_iter().filter(|d| plain(d)) {
            match fsx::clean_stale_temps(&d, older_than) {
                Ok(0) => {}
                Ok(n) => eprintln!(
                    "handoffd: removed {n} stale temp file(s) from {}",
                    d.display()
                ),
                Err(e) => eprintln!("handoffd: cannot clean {}: {e}", d.display()),
            }
        }
    }

    /// The outboxes this pass lists, each by its canonical worktree path, once
    /// each, sorted by that path (ties between equal file names break by it).
    /// An outbox reached through a symlinked `.swarmforge`, `handoffs` or
    /// `outbox` is skipped, since it could alias another role's outbox and get
    /// that role's mail refused (D8).
    ///
    /// With file events, a pass lists only the outboxes events named (and
    /// those still holding a deferred file); a rescan (`full_due`: the timer,
    /// lost events, a reload, the first pass) checks every outbox's stamp as
    /// before. Canonical paths and the symlink check are kept between passes
    /// and re-validated when roles.tsv changes and every [`FULL_SCAN_EVERY`]
    /// rescans: with 32 roles a pass no longer costs 32 canonicalizations.
    fn sources(&mut self) -> Vec<Source> {
        let rescan = self.polling || self.full_due || !self.started_sources;
        self.started_sources = true;
        self.quiet.resize_with(self.worktrees.len(), || None);
        self.valid.resize_with(self.worktrees.len(), || None);
        let mut full = false;
        let mut stride = 1;
        let mut turn = 0;
        let chosen: Vec<usize> = if rescan {
            self.full_due = false;
            self.rescanned = true;
            stride = if self.polling {
                1
            } else {
                self.worktrees.len().div_ceil(QUIET_CHECKS).max(1)
            };
            full = self.scans.is_multiple_of(FULL_SCAN_EVERY * stride as u32);
            if full {
                self.quiet.clear();
                self.quiet.resize_with(self.worktrees.len(), || None);
                // Re-validated now and then: a folder swapped for a symlink.
                self.valid.iter_mut().for_each(|v| *v = None);
                self.canon.clear();
            }
            turn = self.scans as usize % stride;
            self.scans = self.scans.wrapping_add(1);
            self.dirty.clear();
            (0..self.worktrees.len()).collect()
        } else {
            self.rescanned = false;
            let mut v: Vec<usize> = self
                .dirty
                .drain()
                .filter(|&i| i < self.worktrees.len())
                .collect();
            v.sort_unstable();
            v
        };
        let mut out = Vec::new();
        let mut seen: HashSet<PathBuf> = HashSet::new();
        // Taken for the loop, not cloned: 10 000 paths per pass add up.
        let worktrees = std::mem::take(&mut self.worktrees);
        for i in chosen {
            let (raw, outbox_path) = &worktrees[i];
            if rescan && i % stride != turn && self.quiet[i].is_some() {
                continue;
            }
            // Stamped before listing: a file arriving after the listing
            // changes the stamp, so it is never skipped.
            let stamp = dir_stamp(outbox_path);
            if rescan && self.quiet[i].as_ref().is_some_and(|q| q.stamp == stamp) {
                continue;
            }
            self.quiet[i] = None;
            if stamp.is_none() {
                // No outbox (yet); it appears with a new stamp.
                self.quiet[i] = Some(Quiet { stamp });
                if let Some(v) = &self.valid[i] {
                    seen.insert(v.clone());
                } else if let Ok(real) = raw.canonicalize() {
                    seen.insert(real);
                }
                continue;
            }
            let wt_path = match &self.valid[i] {
                Some(v) => v.clone(),
                None => match self.validate(raw) {
                    Validated::Serve(p) => {
                        self.valid[i] = Some(p.clone());
                        p
                    }
                    Validated::Missing => {
                        // No worktree folder (yet): nothing to deliver from it.
                        self.quiet[i] = Some(Quiet { stamp });
                        continue;
                    }
                    Validated::Skip(p) => {
                        seen.insert(p);
                        continue;
                    }
                },
            };
            if !seen.insert(wt_path.clone()) {
                continue;
            }
            out.push(Source {
                index: i,
                outbox: Worktree::new(&wt_path).outbox(),
                wt: wt_path,
                stamp,
            });
        }
        self.worktrees = worktrees;
        // A worktree no longer served releases its lock (on a full scan,
        // where `seen` holds every worktree).
        if full {
            self.locks.retain(|wt, _| seen.contains(wt));
        }
        out.sort_by(|a, b| a.wt.cmp(&b.wt));
        out
    }

    /// Canonicalizes a worktree path, claims its lock and checks that its
    /// outbox is a plain folder (the per-worktree work a pass used to redo).
    fn validate(&mut self, raw: &Path) -> Validated {
        let Ok(wt_path) = raw.canonicalize() else {
            return Validated::Missing;
        };
        self.canon.insert(raw.to_path_buf(), wt_path.clone());
        match self.claim(&wt_path) {
            Ok(true) => {}
            Ok(false) => {
                if self.foreign.insert(wt_path.clone()) {
                    eprintln!(
                        "handoffd: skipping {}: {}",
                        Worktree::new(&wt_path).outbox().display(),
                        held_by_other(&Worktree::new(&wt_path).handoffs())
                    );
                }
                return Validated::Skip(wt_path);
            }
            // Cannot lock it (out of descriptors, permissions): served
            // anyway, since skipping would strand its mail; said once.
            Err(e) => {
                if self.foreign.insert(wt_path.clone()) {
                    eprintln!(
                        "handoffd: cannot lock {e}; serving it unlocked (a second daemon would not be kept out of it)"
                    );
                }
            }
        }
        let outbox = Worktree::new(&wt_path).outbox();
        match outbox.canonicalize() {
            Ok(real) if real == outbox => Validated::Serve(wt_path),
            Ok(real) => {
                if self.aliased.insert(outbox.clone()) {
                    eprintln!(
                        "handoffd: skipping {}: it resolves to {} (a symlink); an outbox must be a plain folder of its worktree",
                        outbox.display(),
                        real.display()
                    );
                }
                Validated::Skip(wt_path)
            }
            Err(_) => Validated::Skip(wt_path),
        }
    }

    /// The next (at most [`CHUNK`]) outbox files after `after`, in priority
    /// order (file name, then worktree). Only those are held in memory, so a
    /// backlog of 40 000 files costs a chunk, not 40 000 entries; `more` says
    /// whether files beyond the chunk were seen. On the first listing of a
    /// pass an outbox found empty and settled is marked quiet.
    fn list_chunk(
        &mut self,
        sources: &[Source],
        after: Option<&(String, usize)>,
        first: bool,
    ) -> (Vec<Candidate>, bool) {
        // (name, source, path): the path as listed, since a name that is
        // not UTF-8 is known by its lossy spelling but opened by its bytes.
        let mut heap: BinaryHeap<(String, usize, PathBuf)> = BinaryHeap::new();
        let mut more = false;
        for (s_i, s) in sources.iter().enumerate() {
            let Ok(rd) = fs::read_dir(&s.outbox) else {
                continue;
            };
            let mut found = 0usize;
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !name.ends_with(".handoff") {
                    continue;
                }
                // Directories are never queue items; everything else named
                // *.handoff is ours to deliver or refuse.
                if e.file_type().map(|t| t.is_dir()).unwrap_or(true) {
                    continue;
                }
                found += 1;
                if after.is_some_and(|(an, ai)| (&name, &s_i) <= (an, ai)) {
                    continue;
                }
                if heap.len() >= CHUNK {
                    if heap
                        .peek()
                        .is_some_and(|top| (&name, &s_i) >= (&top.0, &top.1))
                    {
                        more = true;
                        continue;
                    }
                    heap.pop();
                    more = true;
                }
                heap.push((name, s_i, e.path()));
            }
            if first && found == 0 && s.stamp.is_some_and(|st| settled(&st)) {
                self.quiet[s.index] = Some(Quiet { stamp: s.stamp });
            }
        }
        let out = heap
            .into_sorted_vec()
            .into_iter()
            .map(|(name, s_i, path)| {
                let s = &sources[s_i];
                Candidate {
                    path,
                    name,
                    worktree: s.wt.clone(),
                    source: s.index,
                    key: s_i,
                }
            })
            .collect();
        (out, more)
    }

    /// A file event in `outbox`: list it at the next pass.
    pub fn outbox_changed(&mut self, outbox: &Path) {
        let known = outbox
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
            .and_then(|wt| self.position.get(wt).copied());
        match known {
            Some(i) => {
                if let Some(q) = self.quiet.get_mut(i) {
                    *q = None;
                }
                self.dirty.insert(i);
            }
            // An outbox we cannot place (another spelling): check them all.
            None => self.full_due = true,
        }
    }

    /// Events were lost: list every outbox at the next pass.
    pub fn rescan_all(&mut self) {
        self.quiet.clear();
        self.full_due = true;
    }

    /// Every deferred file is tried at the next pass, which checks every
    /// outbox (a change that may be the repair: a resume).
    pub fn retry_now(&mut self) {
        self.retry.clear();
        self.rescan_all();
    }

    /// The next pass checks every outbox (the timer's safety net, or the
    /// forum queued a file).
    pub fn rescan_due(&mut self) {
        self.full_due = true;
    }

    /// Whether the last pass was a rescan of every outbox (not only those
    /// events named): the daemon restarts its rescan timer only then.
    pub fn last_pass_rescanned(&self) -> bool {
        self.rescanned
    }

    /// Whether `role` works in the worktree of this outbox (D8), comparing
    /// canonical paths so two spellings of one folder agree.
    fn owns(&self, c: &Candidate, role: &str) -> bool {
        let Some(r) = self.roles.find(role) else {
            return false;
        };
        match self.canon.get(&r.worktree_path) {
            Some(p) => *p == c.worktree,
            // A worktree not resolved yet in this process.
            None => r
                .worktree_path
                .canonicalize()
                .is_ok_and(|p| p == c.worktree),
        }
    }

    /// Delivers everything waiting; stops early (after the group in hand)
    /// when a stop is requested.
    ///
    /// Group commit (issue 19): the copies of up to [`GROUP`] files are
    /// published (each file fsynced), then each destination folder is
    /// fsynced once for the group, then those originals move to `sent/` and
    /// each `sent/` and outbox folder is fsynced once. An original leaves its
    /// outbox only after the folder of every one of its copies was fsynced,
    /// so the exactly-once argument holds for the group as for one file. One
    /// file waiting is a group of one: it goes out at once.
    pub fn pass(&mut self) -> PassReport {
        let mut report = PassReport::default();
        let first = !self.started;
        self.started = true;
        let sources = self.sources();
        let mut cursor: Option<(String, usize)> = None;
        let mut first_listing = true;
        loop {
            let (chunk, more) = self.list_chunk(&sources, cursor.as_ref(), first_listing);
            first_listing = false;
            if let Some(last) = chunk.last() {
                cursor = Some((last.name.clone(), last.key));
            }
            if first {
                self.suspects.extend(chunk.iter().map(|c| c.path.clone()));
            }
            let mut group = Group::default();
            for c in chunk {
                if self.stop.load(Ordering::Relaxed) {
                    report.interrupted = true;
                    break;
                }
                let now = Instant::now();
                if self.retry.get(&c.path).is_some_and(|r| now < r.next) {
                    report.deferred += 1;
                    self.dirty.insert(c.source);
                    continue;
                }
                let (msg, recipients) = match self.prepare(&c) {
                    Ok(x) => x,
                    Err(o) => {
                        self.settle(&c, o, &mut report);
                        continue;
                    }
                };
                // A discussion or session message goes alone: the forum's
                // admission and bookkeeping see every earlier file delivered.
                let alone = forum_bound(&msg);
                if alone {
                    self.commit(std::mem::take(&mut group), &mut report);
                }
                match self.forum_duty(|f, d| f.admit(d, &msg)) {
                    Admission::Admit => {}
                    Admission::Refuse(r) => {
                        self.settle(&c, Outcome::Failed(r), &mut report);
                        continue;
                    }
                    Admission::Wait(r) => {
                        self.settle(&c, Outcome::Deferred(r), &mut report);
                        continue;
                    }
                }
                match self.stage(c, msg, recipients, &mut group) {
                    Ok(()) => {}
                    Err((c, o)) => self.settle(&c, o, &mut report),
                }
                if alone || group.staged.len() >= GROUP {
                    self.commit(std::mem::take(&mut group), &mut report);
                }
            }
            self.commit(group, &mut report);
            if !more || report.interrupted {
                break;
            }
        }
        if report.interrupted {
            self.full_due = true;
        }
        // Forget state for files that are gone (delivered by hand, removed).
        self.suspects.retain(|p| p.exists());
        self.deferred.retain(|p, _| p.exists());
        self.retry.retain(|p, _| p.exists());
        self.index.clear();
        report
    }

    /// The bookkeeping of one file's outcome.
    fn settle(&mut self, c: &Candidate, outcome: Outcome, report: &mut PassReport) {
        match outcome {
            Outcome::Delivered => {
                report.delivered += 1;
                self.suspects.remove(&c.path);
                self.deferred.remove(&c.path);
                self.retry.remove(&c.path);
            }
            Outcome::Failed(reason) => {
                report.failed += 1;
                self.suspects.remove(&c.path);
                self.deferred.remove(&c.path);
                self.retry.remove(&c.path);
                self.fail(c, &reason);
            }
            Outcome::Deferred(reason) => {
                report.deferred += 1;
                // Its outbox is listed again at the next pass, event or not.
                self.dirty.insert(c.source);
                let backoff = self
                    .retry
                    .get(&c.path)
                    .map_or(RETRY_FIRST, |r| (r.backoff * 2).min(RETRY_CAP));
                self.retry.insert(
                    c.path.clone(),
                    Retry {
                        next: Instant::now() + backoff,
                        backoff,
                    },
                );
                self.suspects.insert(c.path.clone());
                if self.deferred.get(&c.path) != Some(&reason) {
                    self.journal
                        .record(&Event::new(Kind::Deferred).path(&c.path).reason(&reason));
                    self.deferred.insert(c.path.clone(), reason);
                }
            }
            Outcome::Vanished => {
                self.suspects.remove(&c.path);
                self.retry.remove(&c.path);
            }
        }
    }
    fn read(&self, c: &Candidate) -> Result<Message, Outcome> {
        if !grammar::valid_handoff_name(&c.name) {
            return Err(Outcome::Failed("invalid file name".into()));
        }
        let limit = self.config.limits.max_file_bytes;
        let bytes = match fsx::read_bounded(&c.path, limit) {
            Ok(b) => b,
            Err(fsx::ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Outcome::Vanished)
            }
            Err(fsx::ReadRefusal::Io(e)) => return Err(Outcome::Deferred(format!("read: {e}"))),
            Err(fsx::ReadRefusal::TooLarge(n)) => {
                return Err(Outcome::Failed(format!(
                    "file too large ({n} bytes; limit {limit})"
                )))
            }
            Err(e) => return Err(Outcome::Failed(e.to_string())),
        };
        Message::parse_bytes(&bytes).map_err(|e| Outcome::Failed(e.to_string()))
    }

    /// A sender or recipient that was in roles.tsv earlier in this process's
    /// life and is not now: the reason to defer the file until it is back.
    fn role_gone(&self, msg: &Message, c: &Candidate) -> Option<String> {
        let gone = |r: &str| self.known.contains(r) && self.roles.find(r).is_none();
        let from = msg.get("from").unwrap_or_default();
        if gone(from) && !self.owns(c, from) {
            return Some(format!("sender {from} is no longer in roles.tsv"));
        }
        let to = msg.get("to").unwrap_or_default();
        to.split(',')
            .chain(crate::protocol::grammar::role_list(msg.get("cc")))
            .find(|r| *r != "all" && gone(r))
            .map(|r| format!("recipient {r} is no longer in roles.tsv"))
    }

    /// The refusals that must happen before any copy is written.
    fn check(&self, msg: &Message, c: &Candidate) -> Result<Vec<&Role>, String> {
        for h in REQUIRED {
            if msg.get(h).is_none_or(fields::blank) {
                return Err(format!("missing {h} header"));
            }
        }
        for h in DELIVERY_HEADERS {
            if msg.get(h).is_some() {
                return Err(format!("forged {h} header"));
            }
        }
        let from = msg.get("from").unwrap_or_default();
        let from_daemon = from == crate::protocol::grammar::DAEMON;
        if from_daemon {
            // Only our own digest requests, queued in the moderator's outbox.
            let moderator = self.config.forum.moderator.as_deref();
            let ok = msg.kind() == Some(grammar::MessageType::DigestRequest)
                && moderator.is_some_and(|m| self.owns(c, m));
            if !ok {
                return Err("sender mismatch".into());
            }
        } else if !self.owns(c, from) {
            // D8: the daemon, not an environment variable, decides who sent it.
            return Err("sender mismatch".into());
        }
        let id = msg.get("id").unwrap_or_default();
        if !grammar::id_names_sender(id, from) {
            return Err("id does not name the sender".into());
        }
        let priority = msg.get("priority").unwrap_or_default();
        if !grammar::name_matches(&c.name, priority, id) {
            return Err("file name does not match its priority and id headers".into());
        }
        let to = msg.get("to").unwrap_or_default();
        let recipients: Vec<&Role> = if to == "all" {
            self.roles.roles.iter().filter(|r| r.name != from).collect()
        } else {
            let mut v = Vec::new();
            for r in to.split(',') {
                match self.roles.find(r) {
                    Some(role) => v.push(role),
                    None => return Err(format!("unknown recipient {r}")),
                }
            }
            v
        };
        let is_role = |r: &str| r == "all" || self.roles.find(r).is_some();
        if !from_daemon {
            // The sender's allowed_types, max_hops and every validation rule.
            let allowed = self.config.allowed_types(from);
            let policy = rules::Policy {
                is_role: &is_role,
                allowed: &allowed,
            };
            rules::recheck(msg, &policy, self.config.max_hops)?;
        }
        let mut recipients = recipients;
        for r in crate::protocol::grammar::role_list(msg.get("cc")) {
            // Context copies: delivered like any copy, never woken.
            match self.roles.find(r) {
                Some(role) if !recipients.iter().any(|x| x.name == r) => recipients.push(role),
                Some(_) => {}
                None => return Err(format!("unknown cc role {r}")),
            }
        }
        Ok(recipients)
    }

    /// Whether the recipient already holds this file anywhere in its inbox.
    /// Checked in the direction items move (new → in_process → completed), so
    /// an item moving concurrently is still seen.
    fn holds(&mut self, wt: &Worktree, name: &str, thorough: bool) -> bool {
        if [wt.inbox_new(), wt.in_process(), wt.completed()]
            .iter()
            .any(|d| d.join(name).exists())
        {
            return true;
        }
        if !thorough {
            return false;
        }
        self.index
            .entry(wt.root.clone())
            .or_insert_with(|| InboxIndex::build(wt))
            .names
            .contains(name)
    }

    /// Reads and checks one outbox file: the refusals that happen before any
    /// copy is written.
    fn prepare(&mut self, c: &Candidate) -> Result<(Message, Vec<Role>), Outcome> {
        let msg = self.read(c)?;
        if let Some(reason) = self.role_gone(&msg, c) {
            return Err(Outcome::Deferred(reason));
        }
        let recipients: Vec<Role> = match self.check(&msg, c) {
            Ok(r) => r.into_iter().cloned().collect(),
            Err(reason) => return Err(Outcome::Failed(reason)),
        };
        // `swarm pause` and `approval: required` (see daemon::gate).
        match gate::decide(&self.project, &self.config, &msg) {
            gate::Decision::Deliver => {}
            gate::Decision::Paused(r) => return Err(Outcome::Deferred(r)),
            gate::Decision::Hold => {
                return Err(gate::hold(&self.journal, &c.worktree, &c.path, &msg))
            }
        }
        Ok((msg, recipients))
    }

    /// Publishes every copy of one admitted file (each copy fsynced, its
    /// folder not yet: that is the group's) and adds it to the group.
    fn stage(
        &mut self,
        c: Candidate,
        msg: Message,
        recipients: Vec<Role>,
        group: &mut Group,
    ) -> Result<(), (Candidate, Outcome)> {
        let thorough = self.suspects.contains(&c.path);
        let enqueued_at = clock::iso_now();
        let wake_method = wake::method(&self.project, &self.config);
        let mut dirs = Vec::with_capacity(recipients.len());
        let mut wakes = Vec::new();
        for role in &recipients {
            let wt = Worktree::new(&role.worktree_path);
            if let Some(link) = wt.symlinked_inbox_folder() {
                let reason = crate::protocol::layout::symlinked_inbox_reason(&link);
                return Err((c, Outcome::Deferred(reason)));
            }
            if let Err(e) = fsx::ensure_dirs(&wt.inbox_dirs()) {
                let reason = format!("{}: {e}", wt.inbox().display());
                return Err((c, Outcome::Deferred(reason)));
            }
            let new = wt.inbox_new();
            if self.holds(&wt, &c.name, thorough) {
                // Held already, perhaps by a copy whose folder fsync failed
                // earlier: the group's fsync of `new/` makes it durable.
                dirs.push(group.dir(new));
                continue;
            }
            let mut copy = msg.clone();
            copy.set("recipient", &role.name);
            copy.set("enqueued_at", &enqueued_at);
            let dest = new.join(&c.name);
            match fsx::publish_without_dir_sync(&wt.inbox_tmp(), &dest, copy.render().as_bytes()) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    dirs.push(group.dir(new));
                    continue;
                }
                Err(e) => {
                    // Copies already out wait in `new/`; the retry finds them.
                    let reason = format!("{}: {e}", dest.display());
                    return Err((c, Outcome::Deferred(reason)));
                }
            }
            dirs.push(group.dir(new));
            if role.wakes_here() && fields::wakes(&msg, &role.name) {
                wakes.push(wake::Request {
                    role: role.name.clone(),
                    session: role.session.clone(),
                    worktree: role.worktree_path.clone(),
                    path: dest,
                    method: wake_method.clone(),
                    rewake: false,
                });
            }
        }
        group.staged.push(Staged {
            c,
            msg,
            dirs,
            wakes,
        });
        Ok(())
    }

    /// Commits a group: fsyncs each destination folder once; an original
    /// whose copies' folders all synced moves to `sent/`; then each `sent/`
    /// and outbox folder is fsynced once and the deliveries are logged, in
    /// order.
    fn commit(&mut self, group: Group, report: &mut PassReport) {
        if group.staged.is_empty() {
            return;
        }
        let failed: Vec<Option<String>> = group
            .dirs
            .iter()
            .map(|d| {
                fsx::sync_dir(d)
                    .err()
                    .map(|e| format!("{}: {e}", d.display()))
            })
            .collect();
        let mut moved: Vec<(Staged, PathBuf)> = Vec::with_capacity(group.staged.len());
        for s in group.staged {
            // Not durable: the original stays and is retried (its copies are
            // found held then, and their folder synced again).
            if let Some(reason) = s.dirs.iter().find_map(|&i| failed[i].clone()) {
                self.settle(&s.c, Outcome::Deferred(reason), report);
                continue;
            }
            for w in &s.wakes {
                self.waker.wake(w.clone());
            }
            let sent = Worktree::new(&s.c.worktree).sent();
            let names = grammar::collision_names(&s.c.path);
            match fsx::move_into_unique_without_sync(&s.c.path, &sent, names) {
                Ok(p) => moved.push((s, p)),
                // Someone else moved the original away (by hand, or a
                // daemon that got past the lock): not a fault of ours.
                Err(e) if e.kind() == io::ErrorKind::NotFound && !s.c.path.exists() => {
                    self.settle(&s.c, Outcome::Vanished, report)
                }
                Err(e) => {
                    let reason = format!("{}: {e}", sent.display());
                    self.settle(&s.c, Outcome::Deferred(reason), report)
                }
            }
        }
        let mut synced: HashSet<PathBuf> = HashSet::new();
        for (s, target) in &moved {
            for d in [parent_of(target), parent_of(&s.c.path)] {
                if synced.insert(d.to_path_buf()) {
                    // Moved; only the fsync of a folder after the rename
                    // failed. Every copy is out and the original left the
                    // outbox: delivered (a crash undoing the rename brings
                    // back an original whose copies are held).
                    if let Err(e) = fsx::sync_dir(d) {
                        eprintln!(
                            "handoffd: moved to {}, but the folder fsync failed: {e}",
                            target.display()
                        );
                    }
                }
            }
        }
        for (s, sent_path) in moved {
            self.forum_duty(|f, d| f.delivered(d, &s.msg, &sent_path));
            // forum.log first: once `delivered` is logged, everything is written.
            self.journal
                .forum(&crate::protocol::line::forum_line(&s.msg));
            self.journal
                .record(&Event::new(Kind::Delivered).message(&s.msg).path(&s.c.path));
            self.settle(&s.c, Outcome::Delivered, report);
        }
    }
    /// Moves a refused original to the sender's `failed/`, with the reason in
    /// `<name>.error` beside it, and logs `failed <path> <reason>`.
    fn fail(&mut self, c: &Candidate, reason: &str) {
        let wt = Worktree::new(&c.worktree);
        let mut ev = Event::new(Kind::Failed).path(&c.path).reason(reason);
        if let Ok(bytes) = fsx::read_bounded(&c.path, self.config.limits.max_file_bytes) {
            if let Ok(m) = Message::parse_bytes(&bytes) {
                ev = ev.message(&m);
            }
        }
        let moved = fsx::move_into_unique(&c.path, &wt.failed(), grammar::collision_names(&c.path));
        if matches!(&moved, Err(e) if e.kind() == io::ErrorKind::NotFound && !c.path.exists()) {
            return; // moved away by someone else meanwhile
        }
        let moved = match moved {
            Err(e) if fsx::moved_to(&e).is_some() => {
                eprintln!("handoffd: {e}");
                Ok(fsx::moved_to(&e).unwrap_or(&c.path).to_path_buf())
            }
            other => other,
        };
        match moved {
            Ok(target) => {
                self.journal.record(&ev);
                let mut note = target.into_os_string();
                note.push(".error");
                let note = PathBuf::from(note);
                let text = format!("{}\n", crate::text::escape(reason));
                // A file planted in a fresh outbox may have no tmp/ beside it.
                let written = fsx::ensure_dirs(&[wt.outbox_tmp()])
                    .and_then(|_| fsx::publish(&wt.outbox_tmp(), &note, text.as_bytes()));
                if let Err(e) = written {
                    eprintln!("handoffd: cannot write {}: {e}", note.display());
                }
            }
            Err(e) => {
                // Could not move it: it stays in the outbox and is retried.
                self.suspects.insert(c.path.clone());
                self.journal.record(
                    &Event::new(Kind::Deferred)
                        .path(&c.path)
                        .reason(format!("cannot move to {}: {e}", wt.failed().display())),
                );
            }
        }
    }

    /// The forum's duties, with the project's state around them.
    pub fn with_forum(mut self, forum: Box<dyn ForumHook>) -> Self {
        self.forum = forum;
        self
    }

    /// Runs `f` on the forum with the state it may use. (The forum is taken
    /// out for the call, so it can be borrowed mutably beside that state.)
    pub fn forum_duty<T>(&mut self, f: impl FnOnce(&mut dyn ForumHook, &Duties) -> T) -> T {
        let mut forum = std::mem::replace(&mut self.forum, Box::new(NoForum));
        let duties = Duties {
            project: &self.project,
            roles: &self.roles,
            config: &self.config,
            journal: &self.journal,
            waker: &self.waker,
        };
        let out = f(forum.as_mut(), &duties);
        self.forum = forum;
        out
    }

    /// Re-reads roles.tsv and swarm.yaml.
    pub fn reload(&mut self, roles: Roles, config: Config) {
        // The change may be the repair of what deferred a file: retry now.
        self.retry.clear();
        self.known
            .extend(roles.roles.iter().map(|r| r.name.clone()));
        let worktrees = with_outboxes(roles.worktrees());
        if worktrees != self.worktrees {
            self.worktrees = worktrees;
            self.position = positions(&self.worktrees);
            self.quiet.clear();
            self.generation += 1;
            self.dirty.clear();
            // List every outbox at the next pass (and let go of the locks
            // of worktrees no longer served).
            self.scans = 0;
        }
        // Paths are re-validated against the new table.
        self.valid.clear();
        self.canon.clear();
        self.full_due = true;
        self.roles = roles;
        self.config = config;
    }
}
