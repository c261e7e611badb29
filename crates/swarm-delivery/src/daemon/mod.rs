//! `handoffd`: decides *when* to run a delivery pass; `deliver` decides what a
//! pass does. A pass runs at start-up, on each outbox event, when the watcher
//! reports lost events, and on a rescan timer as a safety net; events are
//! hints, so a lost or merged one costs at most one rescan interval (with
//! more than 1 000 worktrees, a few: the rescan checks at most 1 000 quiet
//! outboxes per round, see `deliver::QUIET_CHECKS`). A pass started by
//! events lists only the outboxes they named; the timer's pass checks them
//! all, so the timer restarts only after such a pass.

pub mod alert;
pub mod control;
pub mod deliver;
mod events;
pub mod feature;
pub mod gate;
mod git_guard;
pub mod journal;
mod lost_lines;
pub mod objects;
pub mod order;
pub mod pane;
mod parking;
mod pid_file;
pub mod progress;
mod rewake;
mod start;
mod timers;
pub mod wake;
pub mod watchdog;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant, SystemTime};

use crate::daemon::deliver::Deliverer;
use crate::daemon::feature::{Feature, Features, Pass};
use crate::daemon::journal::{Event, Journal, Kind};
use crate::daemon::wake::Waker;
use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::layout::Project;
use events::{Events, Msg};
use rewake::Rewake;
use start::{load, start_journal, take_pid_file};
use timers::{Timers, FEATURE_POLL};

/// A temp file in `inbox/tmp` or `outbox/tmp` older than this was left by a
/// killed writer (a publish takes milliseconds); removed at start-up.
const STALE_TEMP: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// One pass, then exit.
    pub once: bool,
    /// Poll instead of watching (filesystems without inotify).
    pub poll: bool,
}

/// Identity of a config file, to notice changes without events.
fn stamp(p: &Path) -> Option<(SystemTime, u64)> {
    std::fs::metadata(p)
        .ok()
        .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
}

/// The daemon's lifetime: lock, journal, watcher, loop.
pub struct Daemon {
    project: Project,
    opts: Options,
    journal: Journal,
    deliverer: Deliverer,
    roles_stamp: Option<(SystemTime, u64)>,
    config_stamp: Option<(SystemTime, u64)>,
    /// `.swarmforge/lineup.json` (docs/lineups.md).
    lineup_stamp: Option<(SystemTime, u64)>,
    rewake: std::collections::HashMap<String, Rewake>,
    /// Queued wake-ups handed to the waker (rewake.rs).
    wake_issued: std::collections::HashMap<String, rewake::Issued>,
    /// Which roles a budget parks, as last journaled (parking.rs).
    parking: parking::Parking,
    /// A watchdog agent check is running on its thread.
    agents_check: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// What the agent checks last saw of each pane (watchdog::PaneLooks).
    pane_looks: std::sync::Arc<std::sync::Mutex<watchdog::PaneLooks>>,
    /// The order hint for `ready-next` (none with `--once`, when polling,
    /// or when its socket cannot be made: callers then list). Declared
    /// before the pid lock, so it is dropped first, however we exit: a
    /// daemon started right after us must not lose its socket to our
    /// clean-up.
    order: Option<order::OrderServer>,
    /// The pid file's lock (re-taken if someone deletes the file).
    pid_lock: Option<fsx::Lock>,
    /// Journals the copies taken and finished (progress.rs).
    progress: Option<progress::Progress>,
    /// Moves aside what an agent plants in the project's git folder.
    git_guard: git_guard::GitGuard,
    /// Takes the git objects confined agents wrote into the store, checked.
    objects: Option<objects::Quarantines>,
}

/// Runs the daemon for `root`; returns the exit code.
/// `features` are what the composing binary plugs in (the forum, seat
/// requests, ...): the daemon knows them only through `feature::Feature`.
pub fn run(root: &Path, opts: Options, features: Features) -> Result<i32> {
    // One folder stays open per served worktree (its lock).
    fsx::raise_fd_limit();
    // Exactly the project root: a role worktree (whose roles.tsv may be
    // SwarmForge's copy) or a folder inside the project would start a second
    // daemon beside the real one.
    let root = crate::protocol::root::exact_root(Some(root), "handoffd")?;
    let project = Project::new(&root);
    let lock = take_pid_file(&project)?;
    let pid_path = project.pid_file();
    // Stamped before the read: a change made meanwhile is read again at
    // the first pass, never missed.
    let stamps = (
        stamp(&project.roles_tsv()),
        stamp(&project.config_file()),
        stamp(&crate::protocol::lineup::state::file(&project)),
    );
    let (roles, config) = match load(&project) {
        Ok(rc) => rc,
        Err(e) => {
            let _ = fsx::remove_file(&pid_path);
            return Err(e);
        }
    };
    crate::protocol::lineup::state::acknowledge(&project, config.seats.generation);
    let journal = start_journal(&project, &config, opts.once);
    let waker = Waker::new(project.clone(), journal.clone());
    let mut deliverer = Deliverer::new(project.clone(), roles, config, journal.clone(), waker)
        .with_features(features);
    // The pid file only says who runs; the outboxes' own locks decide
    // whether we may (a deleted pid file or another spelling of the same
    // worktrees must not let a second daemon in).
    if let Err(e) = deliverer.claim_all() {
        let _ = fsx::remove_file(&pid_path);
        return Err(Error::conflict(e));
    }
    // Holds kept in the old `held/` folders move to SwarmForge's
    // `pending_approval/`, where every reader looks (protocol::pending_approval).
    crate::protocol::pending_approval::adopt_old_held(&project);
    // A stop file left from before we held the lock is stale.
    fsx::remove_file(&project.stop_file()).at(project.stop_file())?;
    // Half a line a power cut left must not swallow our first one.
    journal.end_torn_line();
    // What the features left half done when a daemon was killed.
    deliverer.feature_duty(|f, d| f.resume(d));
    fsx::set_fsync(deliverer.config.daemon.fsync);
    deliverer.clean_stale_temps(STALE_TEMP);
    let mut d = Daemon {
        roles_stamp: stamps.0,
        config_stamp: stamps.1,
        lineup_stamp: stamps.2,
        project,
        opts,
        journal,
        deliverer,
        rewake: Default::default(),
        wake_issued: Default::default(),
        parking: Default::default(),
        agents_check: Default::default(),
        pane_looks: Default::default(),
        order: None,
        pid_lock: Some(lock),
        progress: None,
        git_guard: Default::default(),
        objects: None,
    };
    let code = if d.opts.once {
        d.once()
    } else {
        d.until_stopped()
    };
    drop(d.order.take());
    let _ = fsx::remove_file(&d.project.pid_file());
    drop(d.pid_lock.take());
    Ok(code)
}

impl Daemon {
    /// `handoffd --once`: one pass, its wake-ups and the features' slow
    /// work, then what it did on stdout.
    fn once(&mut self) -> i32 {
        let r = self.deliverer.pass();
        self.deliverer.waker.wait_idle(Duration::from_secs(10));
        // The features' slow work, once (the turn ends agents left).
        if let Some(work) = self.deliverer.off_loop() {
            work(&self.project, &self.deliverer.roles, &self.journal);
        }
        println!(
            "handoffd: delivered {}, failed {}, deferred {}",
            r.delivered, r.failed, r.deferred
        );
        0
    }

    /// Serves until stopped; the progress journal's last lines and its
    /// mark are written before `stopped`.
    fn until_stopped(&mut self) -> i32 {
        let code = self.serve();
        drop(self.progress.take());
        if self.project.swarmforge().is_dir() {
            self.journal.record(&Event::new(Kind::Stopped));
        }
        code
    }
}

impl Daemon {
    /// Puts the pid file back when someone deleted or replaced it
    /// (pid_file.rs).
    fn keep_pid_file(&mut self) {
        pid_file::keep(&self.project, &mut self.pid_lock);
    }

    /// Tells the order index which worktrees' inboxes it may answer for.
    fn serve_order(&self) {
        if let Some(o) = &self.order {
            let roots = self.deliverer.roles.worktrees();
            o.serve(roots.iter().filter_map(|w| w.canonicalize().ok()).collect());
        }
    }

    fn watched_dirs(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.deliverer.outboxes();
        v.push(self.project.swarmforge());
        v.push(self.project.daemon_dir());
        v.push(self.project.root.clone());
        v
    }

    fn reload_if_changed(&mut self) -> bool {
        let rs = stamp(&self.project.roles_tsv());
        let cs = stamp(&self.project.config_file());
        let ls = stamp(&crate::protocol::lineup::state::file(&self.project));
        if rs == self.roles_stamp && cs == self.config_stamp && ls == self.lineup_stamp {
            return false;
        }
        self.roles_stamp = rs;
        self.config_stamp = cs;
        self.lineup_stamp = ls;
        match load(&self.project) {
            Ok((roles, config)) => {
                crate::protocol::lineup::state::acknowledge(&self.project, config.seats.generation);
                fsx::set_fsync(config.daemon.fsync);
                self.journal.set_policy(config.logs.policy());
                self.deliverer.reload(roles, config);
                self.serve_order();
            }
            Err(e) => eprintln!("handoffd: keeping the previous roles and config: {e}"),
        }
        true
    }

    fn stop_requested(&self) -> bool {
        self.deliverer.stop.load(Ordering::Relaxed) || self.project.stop_file().exists()
    }

    /// One delivery pass, then the features' bookkeeping of what it
    /// delivered. True when a feature queued a file (another pass is due).
    fn pass(&mut self, first: bool) -> bool {
        self.reload_if_changed();
        let r = self.deliverer.pass();
        let pass = Pass {
            first,
            moved: r.delivered + r.failed > 0,
        };
        self.deliverer.feature_duty(|f, d| f.after_pass(d, pass))
    }

    /// The event loop; returns the exit code.
    /// The daemon's loop: a pass when one is due, then the timers, then
    /// wait for the next event or timer.
    fn serve(&mut self) -> i32 {
        let cfg = self.deliverer.config.daemon.clone();
        let mut events = Events::start(
            &self.project.root,
            self.opts.poll || cfg.poll,
            self.deliverer.stop.clone(),
            &cfg.poll_interval.to_string(),
        );
        events.sync(self.watched_dirs());
        self.start_services(events.watching());
        let polling = !events.watching();
        self.deliverer.set_polling(polling);
        let mut timers = Timers::new(&cfg);
        let mut need_pass = true;
        let mut first_pass = true;
        self.objects = objects::Quarantines::new(&self.project);
        loop {
            if events.overflowed() {
                self.deliverer.rescan_all();
                need_pass = true;
            }
            // Before a pass: a commit an agent made is in the store before
            // the handoff that names it is delivered (objects/).
            self.take_objects();
            if need_pass {
                need_pass = self.delivery_pass(first_pass, &mut events, &mut timers, polling);
                first_pass = false;
            }
            if self.stop_requested() || !self.project.swarmforge().is_dir() {
                break;
            }
            self.guard();
            let now = Instant::now();
            if self.run_timers(now, &mut timers) {
                need_pass = true;
            }
            if now >= timers.rescan {
                self.deliverer.rescan_due();
                need_pass = true;
                continue;
            }
            match events.rx.recv_timeout(timers.wait(now)) {
                Ok(msg) => {
                    let mut msgs = vec![msg];
                    msgs.extend(events.rx.try_iter());
                    for m in msgs {
                        if self.on_event(m, &mut events) {
                            need_pass = true;
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        // What agents committed last, in the store before handoffd goes.
        self.take_objects();
        0
    }

    /// One turn's take-in of the objects confined agents wrote
    /// (objects/): a guard of the core too, but before the pass rather
    /// than after it (see the loop).
    fn take_objects(&mut self) {
        if let Some(q) = &mut self.objects {
            q.take_in();
        }
    }

    /// The daemon's own guards, every round of the loop (at least every
    /// `HOUSEKEEPING`). They are security duties of the core, not features,
    /// so they are called here by name: a new one is a field of `Daemon`
    /// (set in `run`) and a line here. (A duty on a timer goes in `Timers`
    /// and `run_timers`; a one-off at start-up in `run`, beside
    /// `adopt_old_held`.)
    fn guard(&mut self) {
        self.git_guard.check(&self.project);
    }

    /// What runs beside delivery, started once the watcher is in place;
    /// then `started` is logged, so it means ready: a file queued after
    /// that line is seen by an event.
    fn start_services(&mut self, watching: bool) {
        self.deliverer.feature_duty(|f, d| f.start(d));
        // The order index is kept from file events too: none without them.
        if watching {
            self.order = order::OrderServer::start(&self.project);
            self.serve_order();
            // Deep inboxes are indexed before `started`, so no first call
            // after a restart waits for their listing.
            if let Some(o) = &self.order {
                o.settle();
            }
        }
        // What agents took and finished while no daemon watched is in the
        // journal before `started`.
        self.progress = progress::Progress::start(
            &self.project,
            &self.journal,
            self.deliverer.config.limits.max_file_bytes,
            self.deliverer.roles.worktrees(),
            !watching,
        );
        lost_lines::recover(
            &self.project,
            &self.deliverer.roles,
            &self.deliverer.config,
            &self.journal,
        );
        self.journal.record(&Event::new(Kind::Started));
    }

    /// A pass and what follows it: the features told (the search index
    /// nudged), the watches and the progress journal kept in step with a
    /// changed lineup, the rescan timer restarted. True when another pass is
    /// due at once.
    fn delivery_pass(
        &mut self,
        first: bool,
        events: &mut Events,
        timers: &mut Timers,
        polling: bool,
    ) -> bool {
        let before = self.deliverer.generation();
        let again = self.pass(first);
        if again {
            // A feature queued a file: look everywhere.
            self.deliverer.rescan_due();
        }
        if self.deliverer.generation() != before {
            self.lineup_changed(events);
        }
        // Only a pass that checked every outbox restarts the safety net's
        // timer (event passes list only what events named).
        if self.deliverer.last_pass_rescanned() {
            let cfg = &self.deliverer.config.daemon;
            let every = if polling {
                cfg.poll_interval.0
            } else {
                cfg.rescan.0
            };
            timers.rescan = Instant::now() + every;
        }
        again
    }

    /// The roles changed: watch their folders, journal their progress.
    fn lineup_changed(&mut self, events: &mut Events) {
        events.sync(self.watched_dirs());
        if let Some(p) = &self.progress {
            p.serve(self.deliverer.roles.worktrees());
        }
    }

    /// The re-wake sweep, the agents' check and the features' poll, each
    /// when due. True when a pass is due.
    fn run_timers(&mut self, now: Instant, t: &mut Timers) -> bool {
        let mut due = false;
        if now >= t.sweep {
            if self.sweep() {
                self.deliverer.rescan_due();
                due = true;
            }
            t.sweep = Instant::now() + self.deliverer.config.daemon.sweep.0;
        }
        if now >= t.agents {
            self.check_agents();
            t.agents = Instant::now() + self.deliverer.config.daemon.pane_check.0;
        }
        if now >= t.features {
            if self.deliverer.feature_duty(|f, d| f.poll(d)) {
                self.deliverer.rescan_due();
                due = true;
            }
            t.features = Instant::now() + FEATURE_POLL;
        }
        due
    }

    /// One message from the queue. True when a pass is due.
    fn on_event(&mut self, m: Msg, events: &mut Events) -> bool {
        match m {
            Msg::Signal => false,
            Msg::WatchError(e) => {
                eprintln!("handoffd: watcher: {e}; rescanning");
                self.deliverer.rescan_all();
                true
            }
            Msg::Fs {
                paths,
                rescan,
                access,
            } => {
                let mut due = rescan;
                if rescan {
                    self.deliverer.rescan_all();
                }
                for p in &paths {
                    if !access && self.is_outbox_event(p) {
                        if let Some(outbox) = p.parent() {
                            self.deliverer.outbox_changed(outbox);
                        }
                        due = true;
                    }
                }
                // `swarm resume` (or a pause changed): what waited for it is
                // tried now, not after its retry backoff or the next rescan.
                if paths.iter().any(|p| p == &self.project.pause_file()) {
                    self.deliverer.retry_now();
                    due = true;
                }
                if paths.iter().any(|p| self.is_config_event(p)) && self.reload_if_changed() {
                    self.lineup_changed(events);
                    due = true;
                }
                due
            }
        }
    }

    fn is_outbox_event(&self, p: &Path) -> bool {
        crate::protocol::store::is_handoff_path(p)
            && p.parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n == "outbox")
    }

    fn is_config_event(&self, p: &Path) -> bool {
        p == self.project.roles_tsv()
            || p == self.project.config_file()
            || p == crate::protocol::lineup::state::file(&self.project)
    }

    /// The agents' sessions and panes, every `daemon.pane_check`
    /// (watchdog::check_agents), after the features' work off the loop
    /// (`Feature::off_loop`: the turn ends tmux-mode agents left). tmux calls
    /// may take seconds on a hung server: off the loop, one check at a time.
    fn check_agents(&mut self) {
        if self.agents_check.swap(true, Ordering::AcqRel) {
            return;
        }
        let d = &self.deliverer;
        let (project, roles, journal) =
            (self.project.clone(), d.roles.clone(), self.journal.clone());
        let (busy, cfg) = (self.agents_check.clone(), d.config.clone());
        let looks = self.pane_looks.clone();
        let work = d.off_loop();
        std::thread::spawn(move || {
            // The features' slow work (the turn ends the confined agents'
            // hooks left), before the watchdog's look.
            if let Some(work) = work {
                work(&project, &roles, &journal);
            }
            if let Ok(mut looks) = looks.lock() {
                watchdog::check_agents(&project, &roles, &cfg, &journal, &mut looks);
            }
            busy.store(false, Ordering::Release);
        });
    }

    /// The re-wake sweep: a role with waiting items, nothing in process, and
    /// its oldest waiting item older than `ack_within` is woken again, with
    /// backoff (doubling up to `rewake_cap`). Recovery is by file state only.
    ///
    /// Also the features' and the watchdog's timed duties. Returns true when
    /// a new file waits for delivery.
    fn sweep(&mut self) -> bool {
        self.keep_pid_file();
        let cfg = self.deliverer.config.clone();
        let queued = self.deliverer.feature_duty(|f, d| f.sweep(d));
        let d = &self.deliverer;
        watchdog::check_expectations(&self.project, &d.roles, &cfg, &self.journal);
        self.wakeup_queue_sweep(&cfg);
        self.rewake_sweep(&cfg);
        let d = &self.deliverer;
        self.parking
            .check(&self.project, &d.roles, &cfg, &self.journal, &d.waker);
        queued
    }
}
