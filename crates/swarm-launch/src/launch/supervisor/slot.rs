//! One headless agent (a slot): how its run starts (its own shell and
//! process group, its log marked, its pid recorded), and how a finished run
//! is judged: died at start, waits for a person, a stall, or progress; and
//! whether a budget parks it.
//!
//! Invariant: a run is judged by its queue's fingerprint before and after,
//! never by its exit code alone; a parked or dead role starts again only
//! when its inbox changes (a budget's release: at once).

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::super::command::{agent_command, agent_path};
use super::super::process::{detach, group_alive, kill, start_time};
use super::super::{confine, role_mcp, secrets, MAX_STALLS};
use super::{asked_in, backoff, entries, fingerprint, pending, Running, START_WINDOW};
use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};
use crate::protocol::clock;
use crate::protocol::launch_files::{agent_log, agent_parked_file, agent_pid_file, agents_dir};
use crate::protocol::start_failure::{self, Death};
use crate::protocol::swarm::Swarm;
use crate::sys::shell::{quote as sq, quote_path as sqp};
use crate::telemetry::budget;

/// A headless agent.
pub(super) struct Slot {
    pub(super) role: PlannedRole,
    pub(super) command: String,
    pub(super) child: Option<Child>,
    pub(super) runs: u32,
    pub(super) initial_done: bool,
    pub(super) stalls: u32,
    /// Not started again before this unless its inbox changes (a back-off
    /// after a stall); the inbox fingerprint when the back-off began.
    pub(super) not_before: Instant,
    pub(super) backed_off: Option<[usize; 4]>,
    /// Parked after stalls; the inbox fingerprint at that moment.
    pub(super) parked: Option<[usize; 4]>,
    pub(super) before: [usize; 4],
    /// Parked by a budget when last asked, and when that was.
    pub(super) held: Option<Instant>,
    /// When the current (or last) run started, and the length of its log
    /// then (where that run's output begins).
    pub(super) started_at: Instant,
    pub(super) log_start: u64,
    /// Died at start; the inbox fingerprint at that moment.
    pub(super) dead: Option<[usize; 4]>,
    /// Some run of this slot did not die at start.
    pub(super) ever_ran: bool,
    /// Waits for a person's answer to its clarify; the inbox fingerprint
    /// when it began to wait.
    pub(super) waiting: Option<[usize; 4]>,
}

impl Slot {
    /// Judges a finished run: died at start, waits for a person, a stall
    /// (parked after [`MAX_STALLS`]), or progress.
    fn ended(
        &mut self,
        plan: &Plan,
        config: &crate::protocol::config::Config,
        status: ExitStatus,
        say: &mut dyn FnMut(&str),
    ) {
        let project = &plan.project;
        let _ = fsx::remove_file(&agent_pid_file(project, &self.role.name));
        let w = self.role.worktree();
        let after = fingerprint(&w);
        let code = status
            .code()
            .map(|c| c.to_string())
            .unwrap_or_else(|| status.to_string());
        say(&format!(
            "{}: run {} ended (exit {code})",
            self.role.name, self.runs
        ));
        let quick = self.started_at.elapsed() < START_WINDOW;
        if !status.success() && quick && after == self.before {
            self.died_at_start(plan, code, after, say);
            return;
        }
        self.ever_ran = true;
        if pending(&w) && entries(&w.in_process(), false) > 0 {
            let swarm = Swarm::with_config(plan.project.clone(), config.clone());
            if let Some(asked) = asked_in(&swarm, plan, &self.role.name) {
                self.waiting = Some(after);
                self.stalls = 0;
                say(&format!(
                    "{}: waits for {}; not started again until mail arrives",
                    self.role.name,
                    asked.join(", ")
                ));
                return;
            }
        }
        if after == self.before && pending(&w) {
            self.stalled(plan, after, say);
        } else {
            self.stalls = 0;
        }
    }

    /// The run exited non-zero at once having changed nothing: recorded
    /// and said with its log's first error lines.
    fn died_at_start(
        &mut self,
        plan: &Plan,
        code: String,
        after: [usize; 4],
        say: &mut dyn FnMut(&str),
    ) {
        let project = &plan.project;
        let log = agent_log(project, &self.role.name);
        let death = Death {
            status: code,
            at: clock::iso_now(),
            lines: start_failure::error_lines(&start_failure::run_in_log(&log, self.log_start)),
        };
        let _ = death.write(project, &self.role.name);
        self.dead = Some(after);
        say(&format!(
            "warning: {}: its agent exited at once (exit {}, within {} s of its start); not started again until its inbox changes. Its log ({}) says:\n{}",
            self.role.name,
            death.status,
            START_WINDOW.as_secs(),
            log.display(),
            death.quoted()
        ));
    }

    /// The run left its waiting queue untouched: backs off, and parks the
    /// role after [`MAX_STALLS`] such runs in a row.
    fn stalled(&mut self, plan: &Plan, after: [usize; 4], say: &mut dyn FnMut(&str)) {
        let project = &plan.project;
        self.stalls += 1;
        self.not_before = Instant::now() + backoff(self.stalls);
        self.backed_off = Some(after);
        if self.stalls >= MAX_STALLS {
            self.parked = Some(after);
            // `swarm status` shows the role `parked`.
            let _ = fsx::write_file(
                &agent_parked_file(project, &self.role.name),
                format!("{}\n", clock::iso_now()).as_bytes(),
            );
            say(&format!(
                "{}: {} runs in a row left its queue untouched; not started again until its inbox changes (see {})",
                self.role.name,
                self.stalls,
                agent_log(project, &self.role.name).display()
            ));
        }
    }
}

impl Running<'_> {
    /// A headless slot for `r` (None: a person's role).
    pub(super) fn slot_for(
        &self,
        r: &PlannedRole,
        say: &mut dyn FnMut(&str),
    ) -> Result<Option<Slot>> {
        let Some(command) = agent_command(&self.plan.project, &self.config, r) else {
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
        let command = confine::wrap_agent(self.plan, r, &command)?;
        Ok(Some(Slot {
            role: r.clone(),
            command,
            child: None,
            runs: 0,
            initial_done: false,
            stalls: 0,
            not_before: Instant::now(),
            backed_off: None,
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

    pub(super) fn spawn(&mut self, i: usize, say: &mut dyn FnMut(&str)) -> Result<()> {
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
            .envs(role_mcp::env(&self.config, r))
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for k in secrets::foreign(&self.config, &r.name) {
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
    pub(super) fn reap(&mut self, say: &mut dyn FnMut(&str)) {
        let plan = self.plan;
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
            slot.ended(plan, &self.config, status, say);
        }
    }

    /// Whether a budget parks slot `i`'s role (docs/cost.md, "Budgets"):
    /// no run starts, the item stays where it is, and the role shows
    /// `parked` until a raise or the next period releases it. Not a stall:
    /// a released role runs at once, whatever its inbox did meanwhile.
    /// Asked before every start and, while held, once a second (the
    /// answer reads the usage journal).
    pub(super) fn budget_holds(&mut self, i: usize, say: &mut dyn FnMut(&str)) -> bool {
        let project = &self.plan.project;
        let s = &mut self.slots[i];
        if s.held.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return true;
        }
        let role = &s.role.name;
        let file = agent_parked_file(project, role);
        match budget::parked(project, role) {
            Some(why) => {
                if s.held.is_none() {
                    let _ = fsx::write_file(&file, format!("{}\n", clock::iso_now()).as_bytes());
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
}
