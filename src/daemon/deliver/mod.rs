//! One synchronous, idempotent delivery pass: the daemon's core
//! (docs/protocol.md §7.2).
//!
//! Every `*.handoff` in every role's outbox is taken in priority order (file
//! name order across all outboxes). A file is refused to `failed/` with a
//! reason before any copy is written when it is malformed, a symlink, not a
//! regular file, too large, sent from an outbox its `from` does not own,
//! or names an unknown recipient. Otherwise each recipient gets a copy
//! published atomically into `inbox/new/` (skipping a recipient that already
//! holds the file anywhere in its inbox), then the original moves to `sent/`.
//! Killed at any instant and restarted, every message reaches every recipient
//! exactly once: copies are complete-or-absent, and the original leaves the
//! outbox only after every copy is durable. Under backlog the files go out
//! in groups that share each folder's fsync (group commit, see
//! [`Deliverer::pass`]); the rule holds per file within the group.
//!
//! What arrives from other hosts is delivered by this same pass: the bridge
//! spools it into a relay folder whose outbox is listed beside the roles'
//! (`relay`), so this daemon is the only writer of every `inbox/new`.
//!
//! The pass and its bookkeeping are here; `sources` decides which outboxes a
//! pass lists and streams their files in order, `checks` holds the refusals
//! made before any copy is written, `relay` those of a copy relayed from
//! another host, `commit` publishes a group's copies and moves its originals
//! (or refuses one to `failed/`).

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
use crate::protocol::delivery_retry;
use crate::protocol::fields;
use crate::protocol::grammar;
use crate::protocol::header::{names, Message};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::{Role, Roles};
use crate::protocol::rules;

mod checks;
mod commit;
mod relay;
mod sources;

use checks::InboxIndex;
use commit::{forum_bound, Group, GROUP};
use sources::{positions, with_outboxes, DirStamp, Quiet};

/// First wait before a file that only waits (a pause, a discussion turn)
/// is looked at again; doubled per look up to [`WAIT_CAP`]. A file whose
/// delivery *failed* waits as its retry record says instead
/// (`protocol::delivery_retry`: doubling up to 60 s, as today's SwarmForge
/// retries). Either way a fault that lasts costs one attempt every so
/// often, not a busy loop; a roles.tsv or config change or a resume
/// retries everything at once, since it may be the repair.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const WAIT_CAP: Duration = Duration::from_secs(5);

struct Retry {
    next: Instant,
    backoff: Duration,
    /// The failed attempts, as the sidecar beside the file says (none while
    /// the file only waits).
    record: Option<delivery_retry::Retry>,
}

/// Descriptors kept free of outbox locks.
const LOCK_FD_RESERVE: u64 = 256;

/// What happened to one outbox file.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    Failed(String),
    /// Transient trouble (disk full, permissions): left in the outbox, retried,
    /// and counted in its retry sidecar (`protocol::delivery_retry`).
    Deferred(String),
    /// Not to be delivered yet (`swarm pause`, a discussion turn): left in the
    /// outbox and looked at again; no failure.
    Waiting(String),
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
    /// The board (src/board/) is to be derived and written after this pass:
    /// the first pass (a crash may have left it behind) and any pass after
    /// one whose write failed.
    board_due: bool,
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
    /// The canonical folder holding the relay folders, when a bridge is
    /// configured (see `relay`).
    relay_base: Option<PathBuf>,
    /// Per relay folder, the ids relayed through it (see `relay`).
    ledgers: HashMap<PathBuf, relay::Ledger>,
    /// Retry sidecars the first listing of an outbox saw in this pass: those
    /// whose file is gone by the pass's end are removed.
    sidecars: HashSet<PathBuf>,
    /// What this pass delivered that may move a card (a `task` header),
    /// with its time: all the board needs to fold in (board::sync_after).
    board_delivered: Vec<(Option<clock::Instant>, Message)>,
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
        let worktrees = with_outboxes(served(&project, &roles, &config));
        let mut d = Deliverer {
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
            board_due: true,
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
            relay_base: None,
            ledgers: HashMap::new(),
            sidecars: HashSet::new(),
            board_delivered: Vec::new(),
        };
        d.refresh_relay_base();
        d
    }

    /// Every outbox this daemon delivers from: the roles' own, then the
    /// relay folders' (for the watcher).
    pub fn outboxes(&self) -> Vec<PathBuf> {
        self.worktrees.iter().map(|(_, o)| o.clone()).collect()
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
        self.retry_all_now();
        self.rescan_all();
    }

    /// Every deferred file is due now; the failed attempts stay counted.
    fn retry_all_now(&mut self) {
        let now = Instant::now();
        for r in self.retry.values_mut() {
            r.next = now;
        }
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

    /// Delivers everything waiting; stops early (after the group in hand)
    /// when a stop is requested.
    ///
    /// Group commit (docs/protocol.md §8): the copies of up to [`GROUP`] files are
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
                // A restarted daemon goes on where the killed one stopped:
                // the attempts so far and the wait come from the sidecar.
                // (Only a file whose sidecar the listing saw: a backlog
                // at start-up costs no failed open per file.)
                if first
                    && !self.retry.contains_key(&c.path)
                    && self.sidecars.contains(&delivery_retry::sidecar_of(&c.path))
                {
                    self.resume_retry(&c.path);
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
                        self.settle(&c, Outcome::Waiting(r), &mut report);
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
        let gone: Vec<PathBuf> = self.retry.keys().filter(|p| !p.exists()).cloned().collect();
        for p in gone {
            self.retry.remove(&p);
            self.forget_retry(&p);
        }
        // Sidecars whose file left the outbox by other ways (by hand, a
        // hold, a crash between the move to sent/ and the clean-up).
        for sidecar in std::mem::take(&mut self.sidecars) {
            let name = sidecar
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            let handoff = name
                .as_deref()
                .and_then(delivery_retry::handoff_of)
                .map(|h| sidecar.with_file_name(h));
            if let Some(h) = handoff.filter(|h| !h.exists() && !self.retry.contains_key(h)) {
                self.forget_retry(&h);
            }
        }
        self.index.clear();
        // SwarmForge's request folders, derived from the messages
        // (protocol::dashboard), only in a project with a person.
        if (report.delivered > 0 || self.board_due)
            && crate::protocol::dashboard::applies(&self.roles)
        {
            let synced = crate::protocol::trail::Trail::load(
                &self.project,
                &crate::protocol::trail::Scope::originals(),
            )
            .map_err(|e| e.to_string())
            .and_then(|t| crate::protocol::dashboard::sync(&t).map_err(|e| e.to_string()));
            if let Err(e) = synced {
                self.journal.record(
                    &Event::new(Kind::Deferred)
                        .path(&self.project.dashboard_dir())
                        .reason(format!("dashboard requests: {e}")),
                );
            }
        }
        let delivered = std::mem::take(&mut self.board_delivered);
        if report.delivered > 0 || self.board_due {
            let full = std::mem::take(&mut self.board_due);
            // From the roles and swarm.yaml the daemon holds: a pass reads
            // no config file for a swarm without cards. The first pass
            // (a crash may have left the board behind) derives it from
            // every file; later ones fold in what they delivered.
            let synced = crate::board::Routes::from_parts(&self.project, &self.roles, &self.config)
                .and_then(|routes| {
                    if full {
                        crate::board::sync(&self.project, &routes)
                    } else {
                        crate::board::sync_after(&self.project, &routes, &delivered)
                    }
                });
            if let Err(e) = synced {
                self.board_due = true;
                self.journal.record(
                    &Event::new(Kind::Deferred)
                        .path(&crate::board::tasks_file(&self.project))
                        .reason(format!("board: {e}")),
                );
            }
        }
        report
    }

    /// The bookkeeping of one file's outcome.
    fn settle(&mut self, c: &Candidate, outcome: Outcome, report: &mut PassReport) {
        match outcome {
            Outcome::Delivered => {
                report.delivered += 1;
                self.suspects.remove(&c.path);
                self.deferred.remove(&c.path);
                if self.retry.remove(&c.path).is_some() {
                    self.forget_retry(&c.path);
                }
            }
            Outcome::Failed(reason) => {
                report.failed += 1;
                self.suspects.remove(&c.path);
                self.deferred.remove(&c.path);
                if self.retry.remove(&c.path).is_some() {
                    self.forget_retry(&c.path);
                }
                self.fail(c, &reason);
            }
            Outcome::Waiting(reason) => {
                report.deferred += 1;
                self.dirty.insert(c.source);
                let before = self.retry.remove(&c.path);
                let backoff = before
                    .as_ref()
                    .map_or(RETRY_FIRST, |r| (r.backoff * 2).min(WAIT_CAP));
                self.retry.insert(
                    c.path.clone(),
                    Retry {
                        next: Instant::now() + backoff,
                        backoff,
                        record: before.and_then(|r| r.record),
                    },
                );
                self.suspects.insert(c.path.clone());
                if self.deferred.get(&c.path) != Some(&reason) {
                    self.journal
                        .record(&Event::new(Kind::Deferred).path(&c.path).reason(&reason));
                    self.deferred.insert(c.path.clone(), reason);
                }
            }
            Outcome::Deferred(reason) => {
                report.deferred += 1;
                // Its outbox is listed again at the next pass, event or not.
                self.dirty.insert(c.source);
                let before = self.retry.remove(&c.path).and_then(|r| r.record);
                let record =
                    delivery_retry::Retry::after_failure(before.as_ref(), &reason, clock::now());
                let backoff = delivery_retry::backoff(record.attempt);
                self.record_failure(c, &record);
                self.retry.insert(
                    c.path.clone(),
                    Retry {
                        next: Instant::now() + backoff,
                        backoff,
                        record: Some(record),
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
                if self.retry.remove(&c.path).is_some() {
                    self.forget_retry(&c.path);
                }
            }
        }
    }

    /// Writes the failed attempts of `c` beside it and, from the third on,
    /// its attention record. A write that fails is logged and the retry
    /// goes on from memory: the record is a report, never a condition of
    /// delivery.
    fn record_failure(&mut self, c: &Candidate, record: &delivery_retry::Retry) {
        let wt = Worktree::new(&c.worktree);
        if let Err(e) = delivery_retry::write(&wt, &c.path, record) {
            eprintln!(
                "handoffd: cannot write {}: {e}",
                delivery_retry::sidecar_of(&c.path).display()
            );
        }
        if record.needs_attention() {
            let sender = self
                .roles
                .roles
                .iter()
                .filter(|r| r.worktree_path == c.worktree)
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(",");
            if let Err(e) = delivery_retry::write_attention(&self.project, &c.path, &sender, record)
            {
                eprintln!(
                    "handoffd: cannot write {}: {e}",
                    delivery_retry::attention_file(&self.project, &c.path).display()
                );
            }
        }
    }

    /// The file at `path` is delivered, refused or gone: its sidecar and
    /// attention record go too.
    fn forget_retry(&mut self, path: &Path) {
        for f in [
            delivery_retry::sidecar_of(path),
            delivery_retry::attention_file(&self.project, path),
        ] {
            if let Err(e) = fsx::remove_file(&f) {
                if e.kind() != io::ErrorKind::NotFound {
                    eprintln!("handoffd: cannot remove {}: {e}", f.display());
                }
            }
        }
    }

    /// Reads the sidecar of a file this process has not tried yet: the
    /// attempts so far count on, and the wait it names is kept (never
    /// longer than the cap: a sidecar is in an agent's outbox, so a far
    /// future `next-at` must not stall the file).
    fn resume_retry(&mut self, path: &Path) {
        let Some(record) = delivery_retry::read(path) else {
            return;
        };
        let left = (record.next_at - clock::now())
            .to_std()
            .unwrap_or_default()
            .min(delivery_retry::BACKOFF_CAP);
        self.retry.insert(
            path.to_path_buf(),
            Retry {
                next: Instant::now() + left,
                backoff: delivery_retry::backoff(record.attempt),
                record: Some(record),
            },
        );
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
        self.retry_all_now();
        self.known
            .extend(roles.roles.iter().map(|r| r.name.clone()));
        let worktrees = with_outboxes(served(&self.project, &roles, &config));
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
        self.refresh_relay_base();
    }
}

/// The worktrees whose outboxes a daemon delivers from: every role's, and
/// a relay folder per local role when a bridge is configured.
fn served(project: &Project, roles: &Roles, config: &Config) -> Vec<PathBuf> {
    let mut v = roles.worktrees();
    v.extend(relay::relay_worktrees(project, roles, config));
    v
}
