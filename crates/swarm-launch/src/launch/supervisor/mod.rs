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
//!
//! The module runs both: [`headless`] supervises the agents it starts,
//! [`slot`] is one headless agent's runs and their judging, [`tmux`] starts
//! the sessions and watches their start. Invariant: no agent outlives the
//! supervisor (each runs in its own process group, stopped at teardown),
//! and a role's run state is read from its queue folders, never assumed.

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use super::down::stop_strays;
use super::process::{lock_holder, stop_groups};
use super::sessions::stop_tmux;
use super::GRACE;
use crate::daemon::control;
use crate::error::{exit, Result};
use crate::fsx;
use crate::launch::plan::Plan;
use crate::protocol::launch_files::agent_pid_file;
use crate::protocol::layout::Worktree;
use crate::protocol::store;
use crate::protocol::swarm::Swarm;
use crate::views::attention;

mod headless;
mod mail_wait;
mod slot;
mod tmux;

use headless::lineup_stamp;
use slot::Slot;

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
            Outcome::Detached | Outcome::Stopped | Outcome::Idle => exit::OK,
            _ => exit::ENV,
        }
    }
}

pub(super) struct Running<'a> {
    plan: &'a Plan,
    /// swarm.yaml as the agents are started with it: the plan's, then the
    /// one read again with the plan on a lineup change (the supervisor's
    /// one deliberate reload, [`Running::follow_lineup`]); never read per
    /// agent start.
    config: crate::protocol::config::Config,
    daemon: Option<Child>,
    slots: Vec<Slot>,
    /// `.swarmforge/lineup.json` as last read (size, mtime): a change
    /// adds or stops agents (docs/lineups.md).
    lineup: Option<(u64, std::time::SystemTime)>,
    /// The start report (`swarm-up.started`) is written.
    reported: bool,
}

/// Entries of `dir` that a queue would list (no temp files): its handoff
/// files, or (`handoff_only` false) everything a person would see.
pub(in crate::launch) fn entries(dir: &Path, handoff_only: bool) -> usize {
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
/// of "open"), with roles.tsv and swarm.yaml read afresh.
pub(super) fn asked_a_person(plan: &Plan, role: &str) -> Option<Vec<String>> {
    asked_in(&Swarm::new(plan.project.clone()), plan, role)
}

/// [`asked_a_person`] in `swarm`: the supervisor's gives its swarm.yaml
/// and reads roles.tsv afresh (the lineup may have changed since the start).
pub(super) fn asked_in(swarm: &Swarm, plan: &Plan, role: &str) -> Option<Vec<String>> {
    let items = attention::collect_in(swarm).ok()?;
    let asked: Vec<String> = items
        .iter()
        .filter(|i| i.kind == attention::Kind::Clarify && i.from == role)
        .filter(|i| plan.roles.iter().any(|r| r.name == i.role && r.is_human()))
        .map(|i| format!("{} (clarify {}: {})", i.role, i.id, i.handle))
        .collect();
    (!asked.is_empty()).then_some(asked)
}

pub(super) fn backoff(stalls: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << stalls.min(6))).min(Duration::from_secs(30))
}

impl<'a> Running<'a> {
    pub(super) fn new(plan: &'a Plan, daemon: Child) -> Running<'a> {
        Running {
            plan,
            config: plan.config.clone(),
            daemon: Some(daemon),
            slots: Vec::new(),
            lineup: lineup_stamp(&plan.project),
            reported: false,
        }
    }

    fn daemon_alive(&mut self) -> bool {
        match self.daemon.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => !fsx::flock_holders(&self.plan.project.pid_file()).is_empty(),
        }
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
        let strays = stop_strays(project);
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
