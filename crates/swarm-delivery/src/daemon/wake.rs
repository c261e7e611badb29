//! Wake-ups, off the delivery path (docs/protocol.md §7.2). Each role's wake-up
//! runs on its own thread, so a slow tmux call never delays delivery or another
//! role; a wake-up requested while one is running for that role is coalesced
//! into one more. A failed wake-up is logged `notify_failed` and never fails a
//! delivery. It is queued on disk instead (`.swarmforge/daemon/wakeups/`,
//! protocol::wakeups) and tried again with backoff by the daemon's sweep,
//! also after a restart (daemon/rewake.rs); a wake-up that succeeds clears
//! its role's record.
//!
//! Per role `wake:` in `swarm.yaml`: `immediate` types at once (SwarmForge's
//! way); `idle` (the default) types only into a pane whose text has not
//! changed for `wake.quiet`, re-checking with backoff for up to
//! `wake.busy_timeout` (logged `deferred_busy` once per wake-up), so text
//! never lands in the middle of an agent's turn; `queue` types nothing on
//! delivery and leaves the mail to the agent's turn-end hook, and the
//! re-wake sweep's later wake-ups go in as `idle` ones.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::daemon::journal::{Event, Journal, Kind};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::config::{Config, WakeMethod, WakeMode};
use crate::protocol::launch_files::AgentRun;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::store;
use crate::protocol::tmux_socket;
use crate::protocol::wakeups;
use crate::sys::child::ChildError;
use crate::sys::tmux::{self, TmuxError};

/// SwarmForge's wake text (byte for byte; it names the dispatcher, not a file).
pub const WAKE_TEXT: &str = "You have new handoff mail. If idle, run ready_for_next.sh.";

/// A wake command gets this long before it is killed.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// How to reach agents, resolved when the request is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Method {
    Tmux { socket: PathBuf },
    Command(String),
    None,
}

/// Resolves the configured method; `auto` prefers tmux when the launcher
/// recorded a socket, then a configured command.
pub fn method(project: &Project, config: &Config) -> Method {
    // Bounded, non-blocking read (a FIFO planted there must not hang
    // delivery); a pointer that cannot be believed wakes nobody through it
    // and is logged once (protocol::tmux_socket).
    let socket = || match tmux_socket::read(project).socket(project) {
        Ok(s) => s,
        Err(e) => {
            log_refused_pointer(&e.to_string());
            None
        }
    };
    let command = || config.wake.command.clone().filter(|c| !c.trim().is_empty());
    match config.wake.method {
        WakeMethod::None => Method::None,
        WakeMethod::Tmux => socket().map_or(Method::None, |socket| Method::Tmux { socket }),
        WakeMethod::Command => command().map_or(Method::None, Method::Command),
        WakeMethod::Auto => match socket() {
            Some(socket) => Method::Tmux { socket },
            None => command().map_or(Method::None, Method::Command),
        },
    }
}

/// Logs a refused pointer once per distinct message (each pass asks).
fn log_refused_pointer(message: &str) {
    static LOGGED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let mut last = LOGGED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if last.as_deref() != Some(message) {
        eprintln!("handoffd: no wake-up through tmux: {message}");
        *last = Some(message.to_string());
    }
}

/// One wake-up to perform.
#[derive(Clone, Debug)]
pub struct Request {
    pub role: String,
    pub session: String,
    pub worktree: PathBuf,
    /// The inbox copy that prompted it.
    pub path: PathBuf,
    pub method: Method,
    /// A re-wake from the sweep: re-checked just before waking, logged `renotified`.
    pub rewake: bool,
}

/// A re-wake is still needed: items wait in `new/` and nothing is in process.
pub fn still_waiting(worktree: &Path) -> bool {
    let wt = Worktree::new(worktree);
    has_handoff(&wt.inbox_new(), false) && nothing_in_process(worktree)
}

/// Whether nothing is in process in the worktree (no item, no batch).
pub fn nothing_in_process(worktree: &Path) -> bool {
    !has_handoff(&Worktree::new(worktree).in_process(), true)
}

fn has_handoff(dir: &Path, batches: bool) -> bool {
    store::any(dir, |e| {
        e.is_handoff_named() || (batches && e.kind == store::Kind::Batch)
    })
}

/// Why a wake-up did not reach its agent: the reason journaled with
/// `notify_failed` and kept for the retry.
#[derive(Debug, thiserror::Error)]
pub enum WakeError {
    #[error(transparent)]
    Tmux(#[from] TmuxError),
    /// tmux ran but refused a key (`text`, `carriage return`, `line feed`).
    #[error("tmux send {0} failed")]
    NotTyped(&'static str),
    /// The role's session did not come up in time.
    #[error("no tmux session {session} on {} after {}s", socket.display(), waited.as_secs())]
    NoSession {
        session: String,
        socket: PathBuf,
        waited: Duration,
    },
    #[error("cannot run wake command: {0}")]
    CannotRun(#[source] std::io::Error),
    #[error("wake command failed: {0}")]
    CommandFailed(std::process::ExitStatus),
    /// The wake command hung past its deadline (killed), or could not be
    /// waited for.
    #[error("wake command {0}")]
    CommandBounded(#[source] ChildError),
}

/// `exited`: the pane script waits at its `read` for a line (the agent
/// exited): the text and one Enter make one line, so one run. An agent that
/// runs gets SwarmForge's cadence, whose trailing C-j a TUI needs; typed at
/// the pane script's `read` it would be a second line, a second run.
fn run_tmux(socket: &Path, session: &str, exited: bool) -> Result<(), WakeError> {
    // `=name:` matches the session name exactly; a bare name is a prefix
    // match and could type into another agent's pane.
    let target = format!("={session}:");
    let send = |keys: &[&str]| -> Result<bool, TmuxError> {
        let mut args = vec!["send-keys", "-t", &target];
        args.extend_from_slice(keys);
        tmux::call(socket, &args).map(|r| r.ok)
    };
    // SwarmForge's cadence: text, 150 ms, C-m, 50 ms, C-j; all three always
    // run. The pause lets a TUI take the text as typed rather than pasted;
    // the pane script's `read` takes a line as it comes, so an exited agent
    // gets the text and the Enter at once.
    let text = send(&["-l", WAKE_TEXT])?;
    if !exited {
        std::thread::sleep(Duration::from_millis(150));
    }
    let cr = send(&["C-m"])?;
    let lf = if exited {
        true
    } else {
        std::thread::sleep(Duration::from_millis(50));
        send(&["C-j"])?
    };
    match (text, cr, lf) {
        (false, _, _) => Err(WakeError::NotTyped("text")),
        (_, false, _) => Err(WakeError::NotTyped("carriage return")),
        (_, _, false) => Err(WakeError::NotTyped("line feed")),
        _ => Ok(()),
    }
}

fn run_command(cmd: &str, req: &Request, project: &Project) -> Result<(), WakeError> {
    let child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env("SWARMFORGE_ROLE", &req.role)
        .env("SWARMFORGE_HANDOFF", &req.path)
        .env("SWARMFORGE_PROJECT", &project.root)
        .current_dir(&req.worktree)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(WakeError::CannotRun)?;
    match crate::sys::child::wait_bounded(child, COMMAND_TIMEOUT) {
        Ok(st) if st.success() => Ok(()),
        Ok(st) => Err(WakeError::CommandFailed(st)),
        Err(e) => Err(WakeError::CommandBounded(e)),
    }
}

/// File holding the time of a role's last successful wake-up (`swarm status`).
pub fn last_wake_file(project: &Project, role: &str) -> PathBuf {
    project.daemon_dir().join("wake").join(role)
}

/// Present (holding the time) while a wake-up waits for a busy pane.
pub fn deferred_file(project: &Project, role: &str) -> PathBuf {
    project
        .daemon_dir()
        .join("wake")
        .join(format!("{role}.deferred"))
}

/// Longest a wake-up waits for its role's tmux session to exist.
const PANE_WAIT: Duration = Duration::from_secs(20);
/// How long after an agent started a wake-up waits before it looks at the
/// pane: a CLI's first dialog takes a moment to draw, and an Enter typed
/// before it would answer it.
const STARTUP_GRACE: Duration = Duration::from_secs(5);

/// How long ago the running agent started, when its state file says.
fn agent_run_age(project: &Project, role: &str) -> Option<Duration> {
    let Some(AgentRun::Running(Some(t))) = AgentRun::of(project, role) else {
        return None;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some(Duration::from_secs(now.saturating_sub(t)))
}

/// Longest pause between two looks at a busy pane.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Idle: the text did not change across `quiet`.
fn pane_idle(socket: &Path, session: &str, quiet: Duration) -> Result<bool, TmuxError> {
    let before = tmux::capture(socket, session)?;
    std::thread::sleep(quiet);
    Ok(tmux::capture(socket, session)? == before)
}

/// One mkdir, never `create_dir_all`: a wake-up finishing after
/// `.swarmforge/` was deleted must not bring it back.
fn write_marker(f: &Path, text: &str) {
    let made = match f.parent().map(std::fs::create_dir) {
        Some(Err(e)) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    };
    let _ = made.and_then(|_| fsx::write_file(f, text.as_bytes()));
}

#[derive(Default)]
struct RoleSlot {
    running: bool,
    pending: Option<Request>,
}

#[derive(Default)]
struct Shared {
    slots: HashMap<String, RoleSlot>,
    busy: usize,
}

/// Runs wake-ups on background threads, one at a time per role.
#[derive(Clone)]
pub struct Waker {
    project: Project,
    journal: Journal,
    shared: Arc<(Mutex<Shared>, Condvar)>,
}

impl Waker {
    pub fn new(project: Project, journal: Journal) -> Waker {
        Waker {
            project,
            journal,
            shared: Arc::new((Mutex::new(Shared::default()), Condvar::new())),
        }
    }

    /// Queues a wake-up; returns at once.
    pub fn wake(&self, req: Request) {
        if req.method == Method::None {
            return;
        }
        let (lock, _) = &*self.shared;
        let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
        let slot = s.slots.entry(req.role.clone()).or_default();
        if slot.running {
            // Coalesce: one more wake after the running one is enough.
            slot.pending = Some(req);
            return;
        }
        slot.running = true;
        s.busy += 1;
        drop(s);
        let me = self.clone();
        std::thread::spawn(move || me.worker(req));
    }

    fn worker(&self, mut req: Request) {
        loop {
            self.perform(&req);
            let (lock, cv) = &*self.shared;
            let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
            let slot = s.slots.entry(req.role.clone()).or_default();
            match slot.pending.take() {
                Some(next) => req = next,
                None => {
                    slot.running = false;
                    s.busy -= 1;
                    cv.notify_all();
                    return;
                }
            }
        }
    }

    /// The role's `wake:` and the idle settings, read when the wake-up runs
    /// (off the delivery path), so an edit to `swarm.yaml` counts at once.
    fn settings(&self, role: &str) -> (WakeMode, Duration, Duration) {
        let c = Config::load(&self.project.config_file()).unwrap_or_default();
        let mode = c.role(role).map(|r| r.wake).unwrap_or_default();
        (mode, c.wake.quiet.0, c.wake.busy_timeout.0)
    }

    /// `wake: idle` on tmux: Ok(true) once the pane is quiet, Ok(false) when
    /// it stayed busy past the deadline or the mail was taken meanwhile.
    fn wait_quiet(
        &self,
        req: &Request,
        socket: &Path,
        quiet: Duration,
        limit: Duration,
    ) -> Result<bool, WakeError> {
        let end = Instant::now() + limit;
        let mut pause = quiet;
        let mut deferred = false;
        loop {
            if pane_idle(socket, &req.session, quiet)? {
                return Ok(true);
            }
            if !deferred {
                deferred = true;
                // The marker before the journal line: a reader that saw
                // `deferred_busy` finds status saying so too.
                write_marker(
                    &deferred_file(&self.project, &req.role),
                    &format!("{}\n", clock::iso_now()),
                );
                self.journal.record(
                    &Event::new(Kind::DeferredBusy)
                        .path(&req.path)
                        .recipient(&req.role)
                        .reason("pane busy"),
                );
            }
            if Instant::now() + pause >= end {
                return Ok(false);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(MAX_BACKOFF);
            // The agent may have taken the mail itself (its turn-end hook).
            if !still_waiting(&req.worktree) {
                return Ok(false);
            }
        }
    }

    /// The startup race: the daemon runs before `swarm up` creates the
    /// sessions, so a wake-up waits (bounded) for the role's pane, and for
    /// an agent that just started to draw its first screen (a dialog it
    /// shows must be seen before anything is typed).
    fn pane_ready(&self, req: &Request, socket: &Path) -> Result<(), WakeError> {
        let end = Instant::now() + PANE_WAIT;
        let target = format!("={}", req.session);
        let mut pause = Duration::from_millis(50);
        while !tmux::ok(socket, &["has-session", "-t", &target]) {
            if Instant::now() >= end {
                return Err(WakeError::NoSession {
                    session: req.session.clone(),
                    socket: socket.to_path_buf(),
                    waited: PANE_WAIT,
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(500));
        }
        // Only while the agent still runs: one that exited shows no
        // dialog, and a wake-up queued behind this one (an answer to its
        // clarify) must not wait out the grace.
        if let Some(age) = agent_run_age(&self.project, &req.role) {
            if let Some(rest) = STARTUP_GRACE.checked_sub(age) {
                let end = Instant::now() + rest;
                while Instant::now() < end && agent_run_age(&self.project, &req.role).is_some() {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        Ok(())
    }

    /// Types the wake text unless the pane waits for a person (daemon/pane.rs):
    /// Ok(false) when it was held, and the wait reported instead.
    fn type_wake(&self, req: &Request, socket: &Path) -> Result<bool, WakeError> {
        // The agent took its mail while this wake-up waited (its first run,
        // its turn-end hook) and keeps an item in process, parked on a
        // question to a person: a wake-up now would start it again for
        // nothing before the answer (which is new mail) comes
        // (docs/headless.md, "Waiting for a person").
        let wt = Worktree::new(&req.worktree);
        if !req.rewake && !has_handoff(&wt.inbox_new(), false) && !nothing_in_process(&req.worktree)
        {
            let _ = fsx::remove_file(&deferred_file(&self.project, &req.role));
            return Ok(false);
        }
        let screen = tmux::capture(socket, &req.session)?;
        if let Some(p) = crate::daemon::pane::classify(&screen) {
            crate::daemon::pane::report(&self.project, &req.role, Some(&p), &self.journal);
            self.journal.record(
                &Event::new(Kind::WakeHeld)
                    .path(&req.path)
                    .recipient(&req.role)
                    .reason(format!("{}: {}", p.wait.word(), p.text)),
            );
            let _ = fsx::remove_file(&deferred_file(&self.project, &req.role));
            return Ok(false);
        }
        run_tmux(socket, &req.session, self.exited(&req.role)).map(|()| true)
    }

    /// The role's agent has exited: its pane script waits at `read` for
    /// the next line (its state file says so).
    fn exited(&self, role: &str) -> bool {
        matches!(
            AgentRun::of(&self.project, role),
            Some(AgentRun::Exited { .. })
        )
    }

    /// A wake-up typed into the role's tmux pane once it is ready (and, in
    /// `idle` mode, quiet); `None` when there is nothing to do after all
    /// (not typed: the pane says why in the journal itself).
    fn tmux_wake(
        &self,
        req: &Request,
        socket: &Path,
        mode: WakeMode,
        quiet: Duration,
        limit: Duration,
    ) -> Option<Result<(), WakeError>> {
        let ready = self.pane_ready(req, socket).and_then(|()| {
            // An agent that exited leaves its pane at the pane script's
            // `read`, which nothing else writes to: the quiet look would
            // only cost `wake.quiet` (1 s) on every wake-up. The screen is
            // still looked at before anything is typed (`type_wake`).
            if mode == WakeMode::Idle && !self.exited(&req.role) {
                self.wait_quiet(req, socket, quiet, limit)
            } else {
                Ok(true)
            }
        });
        match ready {
            Ok(true) => match self.type_wake(req, socket) {
                Ok(true) => Some(Ok(())),
                Ok(false) => None,
                Err(e) => Some(Err(e)),
            },
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// A wake-up done: journaled, the last wake's time kept, and the
    /// role's queued wake-up (a failed one's retry) removed.
    fn woken(&self, req: &Request) {
        self.journal.record(
            &Event::new(if req.rewake {
                Kind::Renotified
            } else {
                Kind::Woken
            })
            .path(&req.path)
            .recipient(&req.role),
        );
        write_marker(
            &last_wake_file(&self.project, &req.role),
            &format!("{}\n", clock::iso_now()),
        );
        if let Err(e) = wakeups::remove(&self.project, &req.role) {
            eprintln!(
                "handoffd: cannot remove {}: {e}",
                wakeups::file(&self.project, &req.role).display()
            );
        }
    }

    fn perform(&self, req: &Request) {
        if req.rewake && !still_waiting(&req.worktree) {
            return;
        }
        // A parked role gets no wake-up; the sweep wakes it once it may go
        // on (parking.rs).
        if let Some(why) = crate::telemetry::budget::parked(&self.project, &req.role) {
            self.journal.record(
                &Event::new(Kind::WakeHeld)
                    .path(&req.path)
                    .recipient(&req.role)
                    .reason(format!("parked: {}", why.words())),
            );
            return;
        }
        let (mode, quiet, limit) = self.settings(&req.role);
        // `queue`: delivery leaves the mail alone; a re-wake (the mail sat
        // past `ack_within`, so the agent's own check missed it) is
        // delivered as `idle` would, never into a busy pane.
        let mode = match mode {
            WakeMode::Queue if !req.rewake => return,
            WakeMode::Queue => WakeMode::Idle,
            m => m,
        };
        let result = match &req.method {
            Method::Tmux { socket } => match self.tmux_wake(req, socket, mode, quiet, limit) {
                Some(r) => r,
                None => return,
            },
            Method::Command(cmd) => run_command(cmd, req, &self.project),
            Method::None => return,
        };
        let _ = fsx::remove_file(&deferred_file(&self.project, &req.role));
        match result {
            Ok(()) => self.woken(req),
            Err(e) => {
                let reason = e.to_string();
                self.journal.record(
                    &Event::new(Kind::NotifyFailed)
                        .path(&req.path)
                        .recipient(&req.role)
                        .reason(&reason),
                );
                self.queue_retry(req, &reason);
            }
        }
    }

    /// Records a failed wake-up in the durable queue: one more attempt,
    /// the next one after the backoff.
    fn queue_retry(&self, req: &Request, reason: &str) {
        let before = wakeups::read(&self.project, &req.role);
        let p = wakeups::Pending {
            role: req.role.clone(),
            item: req.path.clone(),
            retry: crate::protocol::delivery_retry::Retry::after_failure(
                before.as_ref().map(|b| &b.retry),
                reason,
                clock::now(),
            ),
        };
        if let Err(e) = wakeups::write(&self.project, &p) {
            eprintln!(
                "handoffd: cannot write {}: {e}",
                wakeups::file(&self.project, &req.role).display()
            );
        }
    }

    /// Waits until no wake-up is running (for `--once`), at most `timeout`.
    pub fn wait_idle(&self, timeout: Duration) {
        let (lock, cv) = &*self.shared;
        let end = Instant::now() + timeout;
        let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
        while s.busy > 0 {
            let now = Instant::now();
            if now >= end {
                return;
            }
            s = match cv.wait_timeout(s, end - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }
}
