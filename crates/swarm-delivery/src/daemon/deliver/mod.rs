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
//! The pass and the settling of each file's outcome are here; the state the
//! deliverer keeps between passes is cut by concern, each part in the file
//! that states and keeps its invariant:
//!
//! - `sources`: the served outboxes (`Outboxes`: the table, canonical
//!   paths, validation) and which of them the next pass lists
//!   (`Schedule`: file events, rescans, quiet outboxes); it streams their
//!   files in priority order;
//! - `locks`: the flock on each served worktree, one daemon per outbox;
//! - `checks`: the refusals made before any copy is written, and whether a
//!   recipient holds a copy already (`Held`: the suspects that get the
//!   thorough check, the per-pass inbox indexes);
//! - `retry`: the files that wait, when each is tried again, their sidecars;
//! - `relay`: the copies relayed from another host and their ledgers;
//! - `commit`: a group's copies published, its originals moved (or one
//!   refused to `failed/`);
//! - `derived`: the board and the person's request folders, written after
//!   a pass from what it delivered.

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::daemon::feature::{Admission, Duties, Feature, Features};
use crate::daemon::gate;
use crate::daemon::journal::{Event, Journal, Kind};
use crate::daemon::wake::{self, Waker};
use crate::error::Error;
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::config::Config;
use crate::protocol::fields;
use crate::protocol::grammar;
use crate::protocol::header::{names, Header, Message};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::{Role, Roles};
use crate::protocol::rules;
use crate::protocol::store;

mod checks;
mod commit;
mod derived;
mod locks;
mod relay;
mod retry;
mod sources;

use commit::{forum_bound, Group, GROUP};

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

/// An outbox file a pass takes, as listed.
struct Candidate {
    name: String,
    path: PathBuf,
    worktree: PathBuf,
    /// Position of its worktree in the served table (`sources::Outboxes`).
    source: usize,
    /// Position of its outbox among this pass's sources (the listing cursor).
    key: usize,
}

/// The delivery engine; the daemon decides when to call [`Deliverer::pass`].
pub struct Deliverer {
    pub project: Project,
    pub roles: Roles,
    pub config: Config,
    pub journal: Journal,
    pub waker: Waker,
    pub stop: Arc<AtomicBool>,
    /// The registered features (the forum, seat requests, ...); see
    /// `daemon::feature`.
    features: Features,
    /// Every role named in roles.tsv since this process started. A sender or
    /// recipient that was a role and is gone now (roles.tsv edited, or being
    /// rewritten) is a transient fault: the file waits, it is not refused.
    known: HashSet<String>,
    /// A pass ran in this process already. The first one suspects every
    /// file it finds (a crash may have left copies of it out there) and
    /// resumes the retries its sidecars record.
    started: bool,
    outboxes: sources::Outboxes,
    schedule: sources::Schedule,
    locks: locks::Locks,
    held: checks::Held,
    retries: retry::Retries,
    relay: relay::Relay,
    derived: derived::Derived,
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
        let outboxes = sources::Outboxes::new(served(&project, &roles, &config));
        let mut relay = relay::Relay::default();
        relay.refresh(&project, &config, outboxes.table());
        Deliverer {
            known,
            outboxes,
            project,
            roles,
            config,
            journal,
            waker,
            stop: Arc::new(AtomicBool::new(false)),
            features: Features::default(),
            started: false,
            schedule: sources::Schedule::new(),
            locks: locks::Locks::new(),
            held: checks::Held::default(),
            retries: retry::Retries::default(),
            relay,
            derived: derived::Derived::new(),
        }
    }

    /// Every outbox this daemon delivers from: the roles' own, then the
    /// relay folders' (for the watcher).
    pub fn outboxes(&self) -> Vec<PathBuf> {
        self.outboxes
            .table()
            .iter()
            .map(|(_, o)| o.clone())
            .collect()
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
        for wt_path in self.locks.worktrees() {
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
        // An outbox we cannot place (another spelling): check them all.
        let known = outbox
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
            .and_then(|wt| self.outboxes.position(wt));
        self.schedule.changed(known);
    }

    /// Events were lost: list every outbox at the next pass.
    pub fn rescan_all(&mut self) {
        self.schedule.rescan_all();
    }

    /// Every deferred file is tried at the next pass, which checks every
    /// outbox (a change that may be the repair: a resume).
    pub fn retry_now(&mut self) {
        self.retries.all_now();
        self.schedule.rescan_all();
    }

    /// The next pass checks every outbox (the timer's safety net, or the
    /// forum queued a file).
    pub fn rescan_due(&mut self) {
        self.schedule.rescan_due();
    }

    /// Whether the last pass was a rescan of every outbox (not only those
    /// events named): the daemon restarts its rescan timer only then.
    pub fn last_pass_rescanned(&self) -> bool {
        self.schedule.rescanned()
    }

    /// Whether file events arrive (`false`: polling, so every quiet outbox
    /// is checked every pass).
    pub fn set_polling(&mut self, polling: bool) {
        self.schedule.set_polling(polling);
    }

    /// Changes whenever the list of served worktrees does (the daemon then
    /// re-syncs its watches).
    pub fn generation(&self) -> u64 {
        self.outboxes.generation()
    }

    /// At start-up: claims every served outbox, or names the one another
    /// daemon holds (then this daemon must not run).
    pub fn claim_all(&mut self) -> Result<(), Error> {
        self.locks.claim_all(&self.roles)
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
                self.held.suspect_all(chunk.iter().map(|c| c.path.clone()));
            }
            let mut group = Group::default();
            for c in chunk {
                if self.stop.load(Ordering::Relaxed) {
                    report.interrupted = true;
                    break;
                }
                self.take_file(c, first, &mut group, &mut report);
            }
            self.commit(group, &mut report);
            if !more || report.interrupted {
                break;
            }
        }
        if report.interrupted {
            self.schedule.rescan_due();
        }
        // Forget state for files that are gone (delivered by hand, removed).
        self.held.end_pass();
        self.retries.prune(&self.project);
        self.derived.write(
            &self.project,
            &self.roles,
            &self.config,
            &self.journal,
            report.delivered,
        );
        report
    }

    /// One listed file of a pass: left to wait (its retry time not come),
    /// settled at once (refused, or not admitted by a feature), or staged
    /// in `group` for the next commit; a discussion or session message goes
    /// alone, so the features see every earlier file delivered.
    fn take_file(&mut self, c: Candidate, first: bool, group: &mut Group, report: &mut PassReport) {
        // A restarted daemon goes on where the killed one stopped:
        // the attempts so far and the wait come from the sidecar.
        // (Only a file whose sidecar the listing saw: a backlog
        // at start-up costs no failed open per file.)
        if first && !self.retries.knows(&c.path) && self.retries.has_sidecar(&c.path) {
            self.retries.resume(&c.path);
        }
        if self.retries.waits(&c.path, Instant::now()) {
            report.deferred += 1;
            self.schedule.again(c.source);
            return;
        }
        let (msg, recipients) = match self.prepare(&c) {
            Ok(x) => x,
            Err(o) => {
                self.settle(&c, o, report);
                return;
            }
        };
        // A discussion or session message goes alone: the features'
        // admission and bookkeeping see every earlier file delivered.
        let alone = forum_bound(&msg);
        if alone {
            self.commit(std::mem::take(group), report);
        }
        match self.feature_duty(|f, d| f.admit(d, &msg)) {
            Admission::Admit => {}
            Admission::Refuse(r) => {
                self.settle(&c, Outcome::Failed(r), report);
                return;
            }
            Admission::Wait(r) => {
                self.settle(&c, Outcome::Waiting(r), report);
                return;
            }
        }
        match self.stage(c, msg, recipients, group) {
            Ok(()) => {}
            Err((c, o)) => self.settle(&c, o, report),
        }
        if alone || group.staged.len() >= GROUP {
            self.commit(std::mem::take(group), report);
        }
    }

    /// The bookkeeping of one file's outcome.
    fn settle(&mut self, c: &Candidate, outcome: Outcome, report: &mut PassReport) {
        match outcome {
            Outcome::Delivered => {
                report.delivered += 1;
                self.held.cleared(&c.path);
                self.retries.done(&self.project, &c.path);
            }
            Outcome::Failed(reason) => {
                report.failed += 1;
                self.held.cleared(&c.path);
                self.retries.done(&self.project, &c.path);
                self.fail(c, &reason);
            }
            Outcome::Waiting(reason) => {
                report.deferred += 1;
                self.schedule.again(c.source);
                self.retries.wait(&self.journal, &c.path, reason);
                self.held.suspect(&c.path);
            }
            Outcome::Deferred(reason) => {
                report.deferred += 1;
                // Its outbox is listed again at the next pass, event or not.
                self.schedule.again(c.source);
                self.retries.defer(
                    &self.journal,
                    &self.project,
                    &self.roles,
                    &c.path,
                    &c.worktree,
                    reason,
                );
                self.held.suspect(&c.path);
            }
            Outcome::Vanished => {
                self.held.cleared(&c.path);
                self.retries.vanished(&self.project, &c.path);
            }
        }
    }

    /// The features the daemon's binary registered, called at the fixed
    /// points of `daemon::feature`.
    pub fn with_features(mut self, features: Features) -> Self {
        self.features = features;
        self
    }

    /// Runs `f` on the features with the state they may use. (They are
    /// taken out for the call, so they can be borrowed mutably beside that
    /// state.)
    pub fn feature_duty<T>(&mut self, f: impl FnOnce(&mut Features, &Duties) -> T) -> T {
        let mut features = std::mem::take(&mut self.features);
        let duties = Duties {
            project: &self.project,
            roles: &self.roles,
            config: &self.config,
            journal: &self.journal,
            waker: &self.waker,
        };
        let out = f(&mut features, &duties);
        self.features = features;
        out
    }

    /// The features' work off the loop (`Feature::off_loop`).
    pub fn off_loop(&self) -> Option<crate::daemon::feature::OffLoop> {
        self.features.off_loop()
    }

    /// Re-reads roles.tsv and swarm.yaml.
    pub fn reload(&mut self, roles: Roles, config: Config) {
        // The change may be the repair of what deferred a file: retry now.
        self.retries.all_now();
        self.known
            .extend(roles.roles.iter().map(|r| r.name.clone()));
        // Paths are re-validated against the new table.
        if self
            .outboxes
            .replace(served(&self.project, &roles, &config))
        {
            self.schedule.table_changed();
        }
        self.schedule.rescan_due();
        self.roles = roles;
        self.config = config;
        self.relay
            .refresh(&self.project, &self.config, self.outboxes.table());
    }
}

/// The worktrees whose outboxes a daemon delivers from: every role's, and
/// a relay folder per local role when a bridge is configured.
fn served(project: &Project, roles: &Roles, config: &Config) -> Vec<PathBuf> {
    let mut v = roles.worktrees();
    v.extend(relay::relay_worktrees(project, roles, config));
    v
}
