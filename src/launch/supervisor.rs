//! The headless supervisor (`swarm up --no-tmux`): reruns an agent whenever
//! work waits for it; runs that change nothing back off, then park the role.
//!
//! Two states are not stalls (docs/headless.md):
//! - An agent that exits non-zero within [`START_WINDOW`] of its start having
//!   changed nothing died at start: the role is `dead` (its log's first lines
//!   recorded in `.swarmforge/agents/<role>.dead` and said as a `warning:`),
//!   and it is not started again until its inbox changes. When every agent
//!   died so, `swarm up` ends: no agent could start.
//! - An agent whose item stays in process while a clarify it sent to a person
//!   is unanswered waits for that person: it is not started again until mail
//!   arrives (the answer is mail), and then at once, with no back-off.
//!
//! In tmux the same window is watched after the sessions start: a pane
//! whose agent exited non-zero within it is named with what the pane shows.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::command::{agent_command, agent_path};
use super::process::{detach, group_alive, kill, lock_holder, start_time, stop_groups};
use super::sessions::{has_session, start_sessions, stop_tmux, write_session_files};
use super::{GRACE, MAX_STALLS, TICK};
use crate::daemon::control;
use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};
use crate::protocol::launch_files::{
    agent_log, agent_parked_file, agent_pid_file, agents_dir, AgentRun,
};
use crate::protocol::layout::Worktree;
use crate::protocol::start_failure::{self, Death};
use crate::protocol::store;
use crate::sys::shell::{quote as sq, quote_path as sqp};

/// How `up` runs.
#[derive(Clone, Debug, Default)]
pub struct UpOptions {
    /// tmux sessions (true) or headless supervised processes (false).
    pub tmux: bool,
    /// Start and return instead of staying in the foreground.
    pub detach: bool,
    /// Headless: return once every queue is empty and no agent runs.
    pub until_idle: bool,
    /// Give up (and tear down) after this long.
    pub timeout: Option<Duration>,
    /// Overrides `launch.stagger`.
    pub stagger: Option<Duration>,
}

/// How a foreground `up` ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Started; this process returns and the swarm keeps running.
    Detached,
    /// Ctrl-C, SIGTERM, `swarm down`, or every tmux session ended.
    Stopped,
    /// `--until-idle`: all work done.
    Idle,
    TimedOut,
    /// `--until-idle`: work waits only for roles parked after stalls.
    Stalled(String),
    /// handoffd went away while the swarm ran.
    DaemonDied,
    /// Every agent exited at once (each already named as a `warning:`).
    NoAgentStarted(String),
}

/// How soon after its start an agent that exits non-zero (having changed
/// nothing) counts as dead at start rather than as a run that failed. A
/// sandbox that refuses, a missing program or a bad flag ends a run within
/// milliseconds; 2 s leaves room for a loaded machine without holding a
/// `swarm up -d` long.
pub const START_WINDOW: Duration = Duration::from_secs(2);

impl Outcome {
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Detached | Outcome::Stopped | Outcome::Idle => crate::error::exit::OK,
            _ => crate::error::exit::ENV,
        }
    }
}

/// A headless agent.
pub(super) struct Slot {
    role: PlannedRole,
    command: String,
    child: Option<Child>,
    runs: u32,
    initial_done: bool,
    stalls: u32,
    not_before: Instant,
    /// Parked after stalls; the inbox fingerprint at that moment.
    parked: Option<[usize; 4]>,
    before: [usize; 4],
    /// Parked by a budget when last asked, and when that was.
    held: Option<Instant>,
    /// When the current (or last) run started, and the length of its log
    /// then (where that run's output begins).
    started_at: Instant,
    log_start: u64,
    /// Died at start; the inbox fingerprint at that moment.
    dead: Option<[usize; 4]>,
    /// Some run of this slot did not die at start.
    ever_ran: bool,
    /// Waits for a person's answer to its clarify; the inbox fingerprint
    /// when it began to wait.
    waiting: Option<[usize; 4]>,
}

pub(super) struct Running<'a> {
    plan: &'a Plan,
    daemon: Option<Child>,
    slots: Vec<Slot>,
    /// `.swarmforge/lineup.json` as last read (size, mtime): a change
    /// adds or stops agents (docs/lineups.md).
    lineup: Option<(u64, std::time::SystemTime)>,
    /// The start report (`swarm-up.started`) is written.
    reported: bool,
}

fn lineup_stamp(
    project: &crate::protocol::layout::Project,
) -> Option<(u64, std::time::SystemTime)> {
    let m = std::fs::metadata(crate::protocol::lineup::state::file(project)).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// Entries of `dir` that a queue would list (no temp files): its handoff
/// files, or (`handoff_only` false) everything a person would see.
pub(super) fn entries(dir: &Path, handoff_only: bool) -> usize {
    store::count(dir, |e| {
        !e.name.starts_with('.') && (!handoff_only || e.is_handoff_named())
    })
}

/// new, in process, completed, outbox+sent: any change means progress.
pub(super) fn fingerprint(w: &Worktree) -> [usize; 4] {
    [
        entries(&w.inbox_new(), true),
        entries(&w.in_process(), false),
        entries(&w.completed(), false),
        entries(&w.outbox(), true) + entries(&w.sent(), false),
    ]
}

/// Work waits in this inbox (new items, or one in process).
pub fn pending(w: &Worktree) -> bool {
    entries(&w.inbox_new(), true) > 0 || entries(&w.in_process(), false) > 0
}

/// The open clarifies `role` sent to a person (a human role of the plan),
/// each as `<person> (clarify <id>: <command that answers it>)`; None when
/// there is none. Read from the trail (views::attention, the one definition
/// of "open").
pub(super) fn asked_a_person(plan: &Plan, role: &str) -> Option<Vec<String>> {
    let items = crate::views::attention::collect(&plan.project).ok()?;
    let asked: Vec<String> = items
        .iter()
        .filter(|i| i.kind == crate::views::attention::Kind::Clarify && i.from == role)
        .filter(|i| plan.roles.iter().any(|r| r.name == i.role && r.is_human()))
        .map(|i| format!("{} (clarify {}: {})", i.role, i.id, i.handle))
        .collect();
    (!asked.is_empty()).then_some(asked)
}

pub(super) fn backoff(stalls: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << stalls.min(6))).min(Duration::from_secs(30))
}

/// Watches the agents of the sessions just started (`started`, the n-th
/// agent starting n × `stagger` late) until each has outlived
/// [`START_WINDOW`] or exited; one that exited non-zero is said as a
/// `warning:` with what its pane shows. Some(why) when none started.
fn watch_start(
    plan: &Plan,
    sock: &Path,
    started: &[String],
    stagger: Duration,
    say: &mut dyn FnMut(&str),
) -> Option<String> {
    let project = &plan.project;
    let agents: Vec<&PlannedRole> = plan
        .roles
        .iter()
        .filter(|r| !r.is_human() && started.contains(&r.name))
        .collect();
    if agents.is_empty() {
        return None;
    }
    let t0 = Instant::now();
    let mut open: Vec<(usize, Instant)> = (0..agents.len())
        .map(|i| (i, t0 + stagger * i as u32 + START_WINDOW))
        .collect();
    let mut dead = Vec::new();
    while !open.is_empty() {
        let now = Instant::now();
        let mut still = Vec::new();
        for (i, end) in open {
            let r = agents[i];
            match AgentRun::of(project, &r.name) {
                Some(AgentRun::Exited { status, .. }) if status != "0" => {
                    let lines = start_failure::error_lines(&pane_run(sock, &r.session));
                    let death = Death {
                        status,
                        at: crate::protocol::clock::iso_now(),
                        lines,
                    };
                    say(&format!(
                        "warning: {}: its agent exited at once (exit {}, within {} s of its start); a wake-up runs it again. Its pane (tmux -S {} attach -t {}) shows:\n{}",
                        r.name,
                        death.status,
                        START_WINDOW.as_secs(),
                        sock.display(),
                        r.session,
                        death.quoted()
                    ));
                    dead.push(r.name.clone());
                }
                Some(AgentRun::Exited { .. }) => {}
                _ if now < end => still.push((i, end)),
                _ => {}
            }
        }
        open = still;
        if !open.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    (dead.len() == agents.len()).then(|| {
        format!(
            "no agent could start ({}); the swarm is stopped",
            dead.join(", ")
        )
    })
}

/// The output of the pane's last run, once the pane script's exit line is
/// on the screen (the state file is written just before it), within 1 s.
fn pane_run(sock: &Path, session: &str) -> String {
    let end = Instant::now() + Duration::from_secs(1);
    loop {
        let screen = crate::sys::tmux::capture(sock, session).unwrap_or_default();
        if screen.contains(start_failure::PANE_EXIT_MARK) || Instant::now() >= end {
            return start_failure::last_run_in_pane(&screen);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl<'a> Running<'a> {
    pub(super) fn new(plan: &'a Plan, daemon: Child) -> Running<'a> {
        Running {
            plan,
            daemon: Some(daemon),
            slots: Vec::new(),
            lineup: lineup_stamp(&plan.project),
            reported: false,
        }
    }

    pub(super) fn tmux(
        &mut self,
        opts: &UpOptions,
        sock: &Path,
        stagger: Duration,
        stop: &AtomicBool,
        say: &mut dyn FnMut(&str),
    ) -> Result<Outcome> {
        let plan = self.plan;
        let started = start_sessions(plan, sock, stagger, say)?;
        write_session_files(plan, sock)?;
        for r in &plan.roles {
            say(&format!(
                "attach to {}: tmux -S {} attach -t {}",
                r.name,
                sock.display(),
                r.session
            ));
        }
        if let Some(why) = watch_start(plan, sock, &started, stagger, say) {
            return Ok(Outcome::NoAgentStarted(why));
        }
        if opts.detach {
            // The daemon outlives us: let init reap it.
            self.daemon = None;
            return Ok(Outcome::Detached);
        }
        say("Ctrl-C here (or `swarm down`) stops the swarm");
        let started = Instant::now();
        let mut last_check = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(Outcome::Stopped);
            }
            if opts.timeout.is_some_and(|t| started.elapsed() >= t) {
                return Ok(Outcome::TimedOut);
            }
            if last_check.elapsed() >= Duration::from_secs(1) {
                last_check = Instant::now();
                if !plan.roles.iter().any(|r| has_session(sock, &r.session)) {
                    say("every tmux session has ended");
                    return Ok(Outcome::Stopped);
                }
                if !self.daemon_alive() {
                    return Ok(Outcome::DaemonDied);
                }
            }
            std::thread::sleep(TICK);
        }
    }

    /// A headless slot for `r` (None: a person's role).
    fn slot_for(&self, r: &PlannedRole, say: &mut dyn FnMut(&str)) -> Result<Option<Slot>> {
        let Some(command) = agent_command(&self.plan.project, r) else {
            say(&format!(
                "{}: a person works this role; not started",
                r.name
            ));
            return Ok(None);
        };
        if matches!(
            r.agent,
            AgentSpec::Model { .. }
                | AgentSpec::Preset {
                    headless: false,
                    ..
                }
        ) {
            say(&format!(
                "warning: {} runs an interactive model agent, which gets no terminal with --no-tmux",
                r.name
            ));
        }
        let command = super::confine::wrap_agent(self.plan, r, &command)?;
        Ok(Some(Slot {
            role: r.clone(),
            command,
            child: None,
            runs: 0,
            initial_done: false,
            stalls: 0,
            not_before: Instant::now(),
            parked: None,
            before: [0; 4],
            held: None,
            started_at: Instant::now(),
            log_start: 0,
            dead: None,
            ever_ran: false,
            waiting: None,
        }))
    }

    /// When the lineup changed (`swarm role add/remove`): agents of roles
    /// leaving or gone stop, new roles get a slot; then the generation acted
    /// on is acknowledged for `swarm role`.
    fn follow_lineup(&mut self, say: &mut dyn FnMut(&str)) -> Result<()> {
        let project = &self.plan.project;
        let now = lineup_stamp(project);
        if now == self.lineup {
            return Ok(());
        }
        self.lineup = now;
        // A lineup that does not read keeps the agents as they are.
        let read = crate::protocol::lineup::state::load(project)
            .and_then(|s| Ok((s, Plan::load(&project.root)?.with_headless_presets())));
        let (seats, plan) = match read {
            Ok(x) => x,
            Err(e) => {
                say(&format!(
                    "the lineup does not read; agents kept as they are: {e}"
                ));
                return Ok(());
            }
        };
        let keep =
            |name: &str| plan.roles.iter().any(|r| r.name == name) && !seats.is_leaving(name);
        let (kept, gone): (Vec<Slot>, Vec<Slot>) = std::mem::take(&mut self.slots)
            .into_iter()
            .partition(|s| keep(&s.role.name));
        self.slots = kept;
        for mut s in gone {
            if let Some(mut c) = s.child.take() {
                stop_groups(&[c.id() as i32], GRACE, &mut [&mut c]);
            }
            let _ = fsx::remove_file(&agent_pid_file(project, &s.role.name));
            say(&format!(
                "{}: left the lineup; its agent stopped",
                s.role.name
            ));
        }
        // `swarm role add` records the role before it makes its worktree:
        // a role whose folders are not there yet is looked at again.
        let mut unready = false;
        for r in plan.roles.iter().filter(|r| keep(&r.name) && !r.is_human()) {
            if self.slots.iter().any(|s| s.role.name == r.name) {
                continue;
            }
            if !r.worktree().inbox_new().is_dir() {
                unready = true;
                continue;
            }
            if let Some(slot) = self.slot_for(r, say)? {
                say(&format!("{}: joined the lineup", r.name));
                self.slots.push(slot);
            }
        }
        if unready {
            self.lineup = None;
        } else {
            crate::protocol::lineup::state::acknowledge_supervised(project, seats.generation);
        }
        Ok(())
    }

    fn daemon_alive(&mut self) -> bool {
        match self.daemon.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => !fsx::flock_holders(&self.plan.project.pid_file()).is_empty(),
        }
    }

    fn spawn(&mut self, i: usize, say: &mut dyn FnMut(&str)) -> Result<()> {
        let project = &self.plan.project;
        let slot = &mut self.slots[i];
        let r = slot.role.clone();
        let r = &r;
        let dir = agents_dir(project);
        fsx::ensure_dirs(&[&dir]).at(&dir)?;
        slot.runs += 1;
        let _ = fsx::remove_file(&agent_parked_file(project, &r.name));
        let _ = fsx::remove_file(&start_failure::dead_file(project, &r.name));
        slot.dead = None;
        slot.waiting = None;
        let log = agent_log(project, &r.name);
        slot.log_start = std::fs::symlink_metadata(&log).map_or(0, |m| m.len());
        // The shell opens the log (append) itself; every run is marked in it.
        // The parent-death signal (the supervisor killed with -9) reaches
        // only this shell: it runs the agent in the background and passes
        // a TERM or HUP on to its whole group, so no agent outlives it.
        let script = format!(
            "exec >>{} 2>&1 </dev/null\nprintf '[swarm] run %s of role %s\\n' {} {}\ntrap 'trap - TERM HUP; kill -TERM 0 2>/dev/null' TERM HUP\n(\n{}\n) &\nwait $!\n",
            sqp(&log),
            slot.runs,
            sq(&r.name),
            slot.command
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .current_dir(&r.worktree_path)
            .env("SWARMFORGE_ROLE", &r.name)
            .env("SWARMFORGE_PROJECT", &project.root)
            .env("PATH", agent_path(project)?)
            .envs(super::role_mcp::env(project, r)?)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for k in super::secrets::foreign_in(project, &r.name)? {
            cmd.env_remove(k);
        }
        detach(&mut cmd, true);
        let child = cmd.spawn().map_err(|e| {
            Error::process(format!("cannot start the agent of role {}: {e}", r.name))
        })?;
        let pid = child.id() as i32;
        let pid_file = agent_pid_file(project, &r.name);
        let rec = format!("{pid} {}\n", start_time(pid).unwrap_or(0));
        fsx::write_file(&pid_file, rec.as_bytes()).at(&pid_file)?;
        slot.before = fingerprint(&r.worktree());
        slot.child = Some(child);
        slot.started_at = Instant::now();
        say(&format!(
            "{}: run {} started (pid {pid})",
            r.name, slot.runs
        ));
        Ok(())
    }

    /// Collects finished agents and judges whether their run made progress.
    fn reap(&mut self, say: &mut dyn FnMut(&str)) {
        let plan = self.plan;
        let project = &plan.project;
        for slot in &mut self.slots {
            let Some(c) = slot.child.as_mut() else {
                continue;
            };
            let Ok(Some(status)) = c.try_wait() else {
                continue;
            };
            let pid = c.id() as i32;
            slot.child = None;
            // Stragglers of the run (its process group) do not outlive it.
            if group_alive(pid) {
                kill(-pid, rustix::process::Signal::KILL);
            }
            let _ = fsx::remove_file(&agent_pid_file(project, &slot.role.name));
            let w = slot.role.worktree();
            let after = fingerprint(&w);
            let code = status
                .code()
                .map(|c| c.to_string())
                .unwrap_or_else(|| status.to_string());
            say(&format!(
                "{}: run {} ended (exit {code})",
                slot.role.name, slot.runs
            ));
            let quick = slot.started_at.elapsed() < START_WINDOW;
            if !status.success() && quick && after == slot.before {
                let log = agent_log(project, &slot.role.name);
                let death = Death {
                    status: code,
                    at: crate::protocol::clock::iso_now(),
                    lines: start_failure::error_lines(&start_failure::run_in_log(
                        &log,
                        slot.log_start,
                    )),
                };
                let _ = death.write(project, &slot.role.name);
                slot.dead = Some(after);
                say(&format!(
                    "warning: {}: its agent exited at once (exit {}, within {} s of its start); not started again until its inbox changes. Its log ({}) says:\n{}",
                    slot.role.name,
                    death.status,
                    START_WINDOW.as_secs(),
                    log.display(),
                    death.quoted()
                ));
                continue;
            }
            slot.ever_ran = true;
            if pending(&w) && entries(&w.in_process(), false) > 0 {
                if let Some(asked) = asked_a_person(plan, &slot.role.name) {
                    slot.waiting = Some(after);
                    slot.stalls = 0;
                    say(&format!(
                        "{}: waits for {}; not started again until mail arrives",
                        slot.role.name,
                        asked.join(", ")
                    ));
                    continue;
                }
            }
            if after == slot.before && pending(&w) {
                slot.stalls += 1;
                slot.not_before = Instant::now() + backoff(slot.stalls);
                if slot.stalls >= MAX_STALLS {
                    slot.parked = Some(after);
                    // `swarm status` shows the role `parked`.
                    let _ = fsx::write_file(
                        &agent_parked_file(project, &slot.role.name),
                        format!("{}\n", crate::protocol::clock::iso_now()).as_bytes(),
                    );
                    say(&format!(
                        "{}: {} runs in a row left its queue untouched; not started again until its inbox changes (see {})",
                        slot.role.name,
                        slot.stalls,
                        agent_log(project, &slot.role.name).display()
                    ));
                }
            } else {
                slot.stalls = 0;
            }
        }
    }

    /// Whether a budget parks slot `i`'s role (docs/cost.md, "Budgets"):
    /// no run starts, the item stays where it is, and the role shows
    /// `parked` until a raise or the next period releases it. Not a stall:
    /// a released role runs at once, whatever its inbox did meanwhile.
    /// Asked before every start and, while held, once a second (the
    /// answer reads the usage journal).
    fn budget_holds(&mut self, i: usize, say: &mut dyn FnMut(&str)) -> bool {
        let project = &self.plan.project;
        let s = &mut self.slots[i];
        if s.held.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return true;
        }
        let role = &s.role.name;
        let file = agent_parked_file(project, role);
        match crate::telemetry::budget::parked(project, role) {
            Some(why) => {
                if s.held.is_none() {
                    let _ = fsx::write_file(
                        &file,
                        format!("{}\n", crate::protocol::clock::iso_now()).as_bytes(),
                    );
                    say(&format!(
                        "{role}: parked, {}; no run until `{}` or the next period",
                        why.words(),
                        why.handle()
                    ));
                }
                s.held = Some(Instant::now());
                true
            }
            None => {
                if s.held.take().is_some() {
                    let _ = fsx::remove_file(&file);
                    say(&format!("{role}: its budget lets it go on"));
                }
                false
            }
        }
    }

    fn outboxes_empty(&self) -> bool {
        self.plan
            .worktree_paths()
            .iter()
            .all(|p| entries(&Worktree::new(p).outbox(), true) == 0)
            // Copies for roles on other hosts still to be bridged are in flight.
            && self
                .plan
                .remote
                .iter()
                .all(|r| entries(&r.worktree().inbox_new(), true) == 0)
            // Copies received from other hosts wait for this daemon.
            && self.plan.roles.iter().all(|r| {
                entries(
                    &Worktree::new(self.plan.project.bridge_relay(&r.name)).outbox(),
                    true,
                ) == 0
            })
    }

    pub(super) fn headless(
        &mut self,
        opts: &UpOptions,
        stagger: Duration,
        stop: &AtomicBool,
        say: &mut dyn FnMut(&str),
    ) -> Result<Outcome> {
        let project = &self.plan.project;
        for r in &self.plan.roles {
            if let Some(slot) = self.slot_for(r, say)? {
                self.slots.push(slot);
            }
        }
        // Agents a `swarm up` killed with -9 left running would work the
        // same queues as the new ones.
        let left = super::down::stop_recorded_agents(project);
        if !left.is_empty() {
            say(&format!(
                "stopped the agents a previous swarm up left running: {}",
                left.join(" ")
            ));
        }
        let started = Instant::now();
        let mut last_initial: Option<Instant> = None;
        let mut last_daemon_check = Instant::now();
        let mut idle_ticks = 0;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(Outcome::Stopped);
            }
            if opts.timeout.is_some_and(|t| started.elapsed() >= t) {
                return Ok(Outcome::TimedOut);
            }
            self.reap(say);
            self.follow_lineup(say)?;
            // Every agent runs once at start, `stagger` apart.
            if let Some(i) = self.slots.iter().position(|s| !s.initial_done) {
                if last_initial.is_none_or(|t| t.elapsed() >= stagger) {
                    self.slots[i].initial_done = true;
                    last_initial = Some(Instant::now());
                    self.spawn(i, say)?;
                }
            }
            for i in 0..self.slots.len() {
                let s = &mut self.slots[i];
                if !s.initial_done || s.child.is_some() || Instant::now() < s.not_before {
                    continue;
                }
                let w = s.role.worktree();
                // Dead at start, or waiting for a person: only a change of
                // its inbox (mail, the answer) starts it again, and then at once.
                if let Some(fp) = s.dead.or(s.waiting) {
                    if fingerprint(&w) == fp {
                        continue;
                    }
                    if s.waiting.is_some() {
                        say(&format!("{}: mail arrived; started again", s.role.name));
                    }
                    s.dead = None;
                    s.waiting = None;
                    s.stalls = 0;
                }
                if let Some(fp) = s.parked {
                    if fingerprint(&w) == fp {
                        continue;
                    }
                    s.parked = None;
                    let _ = fsx::remove_file(&agent_parked_file(&self.plan.project, &s.role.name));
                    s.stalls = 0;
                }
                let waits = pending(&w);
                // A held role is asked again with nothing waiting too, so a
                // raise clears its `parked` at once, not at its next item.
                let holds = (waits || s.held.is_some()) && self.budget_holds(i, say);
                if waits && !holds {
                    self.spawn(i, say)?;
                }
            }
            // Before the report: a detached `swarm up` that saw the report
            // would say the swarm runs.
            if let Some(why) = self.none_started() {
                return Ok(Outcome::NoAgentStarted(why));
            }
            self.report_start();
            if last_daemon_check.elapsed() >= Duration::from_secs(1) {
                last_daemon_check = Instant::now();
                if !self.daemon_alive() {
                    say(&format!(
                        "handoffd is gone; see {}",
                        project.daemon_output().display()
                    ));
                    return Ok(Outcome::DaemonDied);
                }
            }
            if opts.until_idle {
                let quiet = self
                    .slots
                    .iter()
                    .all(|s| s.initial_done && s.child.is_none())
                    && self.outboxes_empty();
                let waiting: Vec<&Slot> = self
                    .slots
                    .iter()
                    .filter(|s| pending(&s.role.worktree()))
                    .collect();
                if quiet
                    && waiting.iter().all(|s| {
                        s.parked.is_some()
                            || s.held.is_some()
                            || s.dead.is_some()
                            || s.waiting.is_some()
                    })
                {
                    // Waiting for a person is not a stall: the swarm is
                    // idle, and `swarm up` names the open questions.
                    let stuck: Vec<&&Slot> =
                        waiting.iter().filter(|s| s.waiting.is_none()).collect();
                    if !stuck.is_empty() {
                        let names: Vec<String> = stuck
                            .iter()
                            .map(|s| match (s.held, s.dead) {
                                (Some(_), _) => format!("{} (parked by a budget)", s.role.name),
                                (None, Some(_)) => format!(
                                    "{} (its agent died at start: {})",
                                    s.role.name,
                                    Death::read(project, &s.role.name)
                                        .map(|d| d.reason())
                                        .unwrap_or_else(|| "see its log".into())
                                ),
                                _ => s.role.name.clone(),
                            })
                            .collect();
                        return Ok(Outcome::Stalled(format!(
                            "work waits for {} but their agents make no progress; see {}",
                            names.join(", "),
                            agents_dir(project).display()
                        )));
                    }
                    idle_ticks += 1;
                    // Three quiet looks in a row: nothing is in flight.
                    if idle_ticks >= 3 {
                        return Ok(Outcome::Idle);
                    }
                } else {
                    idle_ticks = 0;
                }
            }
            std::thread::sleep(TICK);
        }
    }

    /// Once every agent's first run has outlived [`START_WINDOW`] or ended,
    /// `swarm-up.started` says so (a detached `swarm up` waits for it).
    fn report_start(&mut self) {
        if self.reported {
            return;
        }
        let settled = self.slots.iter().all(|s| {
            s.initial_done && (s.child.is_none() || s.started_at.elapsed() >= START_WINDOW)
        });
        if settled {
            self.reported = true;
            let f = start_failure::start_report_file(&self.plan.project);
            let _ = fsx::write_file(
                &f,
                format!("{}\n", crate::protocol::clock::iso_now()).as_bytes(),
            );
        }
    }

    /// Every agent has had its first run and each died at start: why.
    fn none_started(&self) -> Option<String> {
        let all_dead = !self.slots.is_empty()
            && self
                .slots
                .iter()
                .all(|s| s.initial_done && s.child.is_none() && s.dead.is_some() && !s.ever_ran);
        all_dead.then(|| {
            let names: Vec<&str> = self.slots.iter().map(|s| s.role.name.as_str()).collect();
            format!(
                "no agent could start ({}); see {}",
                names.join(", "),
                agents_dir(&self.plan.project).display()
            )
        })
    }

    /// Agents first (they may still be handing off), then the daemon, then tmux.
    pub(super) fn teardown(&mut self, say: &mut dyn FnMut(&str)) -> Result<()> {
        let project = &self.plan.project;
        let mut children: Vec<&mut Child> = self
            .slots
            .iter_mut()
            .filter_map(|s| s.child.as_mut())
            .collect();
        let pgids: Vec<i32> = children.iter().map(|c| c.id() as i32).collect();
        if !pgids.is_empty() {
            say(&format!("stopping {} agent(s)", pgids.len()));
        }
        stop_groups(&pgids, GRACE, &mut children);
        for s in &mut self.slots {
            if s.child.take().is_some() {
                let _ = fsx::remove_file(&agent_pid_file(project, &s.role.name));
            }
        }
        // Read before asking: a quick daemon is gone before `stop` looks.
        let daemon_pid = lock_holder(&project.pid_file());
        let stopped = control::stop(project, control::GRACE);
        if let Some(mut d) = self.daemon.take() {
            let _ = d.wait();
        }
        let killed = stop_tmux(project)?;
        if !killed.is_empty() {
            say(&format!("killed tmux sessions: {}", killed.join(" ")));
        }
        let strays = super::down::stop_strays(project);
        if !strays.is_empty() {
            let pids: Vec<String> = strays.iter().map(u32::to_string).collect();
            say(&format!(
                "stopped processes agents left outside their group: {}",
                pids.join(" ")
            ));
        }
        let r = stopped?;
        if let Some(pid) = r.pid.or(daemon_pid) {
            say(&format!(
                "handoffd (pid {pid}) {}",
                if r.killed { "killed" } else { "stopped" }
            ));
        }
        Ok(())
    }
}
