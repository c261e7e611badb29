//! The headless supervisor's loop (`swarm up --no-tmux`): every agent runs
//! once at start, `stagger` apart, then again whenever work waits for it;
//! the lineup is followed as `swarm role` changes it; `--until-idle` ends
//! the loop when nothing runs and nothing is in flight.
//!
//! Invariant: the loop decides only when a slot starts; how a run starts
//! and how it is judged is the slot's (slot.rs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use super::super::down::stop_recorded_agents;
use super::super::process::stop_groups;
use super::super::GRACE;
use super::mail_wait::MailWait;
use super::{entries, fingerprint, pending, Outcome, Running, Slot, UpOptions, START_WINDOW};
use crate::error::Result;
use crate::fsx;
use crate::launch::plan::Plan;
use crate::protocol::clock;
use crate::protocol::launch_files::{agent_parked_file, agent_pid_file, agents_dir};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::lineup::state as lineup;
use crate::protocol::start_failure::{self, Death};

/// `.swarmforge/lineup.json`'s size and mtime, to see it change.
pub(super) fn lineup_stamp(project: &Project) -> Option<(u64, SystemTime)> {
    let m = std::fs::metadata(lineup::file(project)).ok()?;
    Some((m.len(), m.modified().ok()?))
}

impl Running<'_> {
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
        let read = lineup::load(project)
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
        // New agents start with the swarm.yaml read with this lineup.
        self.config = plan.config.clone();
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
            lineup::acknowledge_supervised(project, seats.generation);
        }
        Ok(())
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

    pub(in crate::launch) fn headless(
        &mut self,
        opts: &UpOptions,
        stagger: Duration,
        stop: &AtomicBool,
        say: &mut dyn FnMut(&str),
    ) -> Result<Outcome> {
        let project = &self.plan.project;
        self.start_slots(say)?;
        let started = Instant::now();
        let mut last_initial: Option<Instant> = None;
        let mut last_daemon_check = Instant::now();
        let mut idle_ticks = 0;
        let mut mail = MailWait::new(self.inboxes());
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
                self.start_if_due(i, say)?;
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
                if let Some(end) = self.idle_or_stalled(&mut idle_ticks) {
                    return Ok(end);
                }
            }
            mail.follow(self.inboxes());
            if mail.wait() {
                // Mail is in flight: a quiet look counts from here.
                idle_ticks = 0;
            }
        }
    }

    /// Every agent's `inbox/new`, where mail that starts it lands.
    fn inboxes(&self) -> Vec<std::path::PathBuf> {
        self.slots
            .iter()
            .map(|s| s.role.worktree().inbox_new())
            .collect()
    }

    /// A slot for every agent of the plan, after stopping the agents a
    /// `swarm up` killed with -9 left running (they would work the same
    /// queues as the new ones).
    fn start_slots(&mut self, say: &mut dyn FnMut(&str)) -> Result<()> {
        for r in &self.plan.roles {
            if let Some(slot) = self.slot_for(r, say)? {
                self.slots.push(slot);
            }
        }
        let left = stop_recorded_agents(&self.plan.project);
        if !left.is_empty() {
            say(&format!(
                "stopped the agents a previous swarm up left running: {}",
                left.join(" ")
            ));
        }
        Ok(())
    }

    /// Starts slot `i` again when work waits for it, unless its back-off,
    /// a death at start, a person's answer, parking or a budget holds it.
    fn start_if_due(&mut self, i: usize, say: &mut dyn FnMut(&str)) -> Result<()> {
        let project = &self.plan.project;
        let s = &mut self.slots[i];
        if !s.initial_done || s.child.is_some() {
            return Ok(());
        }
        let w = s.role.worktree();
        if Instant::now() < s.not_before {
            // A back-off waits out runs that changed nothing; mail that
            // arrived since (the answer to a clarify, say) is new work,
            // started as fast as any other mail.
            match s.backed_off {
                Some(fp) if fingerprint(&w) != fp => {
                    say(&format!(
                        "{}: mail arrived; back-off cut short",
                        s.role.name
                    ));
                    s.not_before = Instant::now();
                    s.backed_off = None;
                }
                _ => return Ok(()),
            }
        }
        // Dead at start, or waiting for a person: only a change of
        // its inbox (mail, the answer) starts it again, and then at once.
        if let Some(fp) = s.dead.or(s.waiting) {
            if fingerprint(&w) == fp {
                return Ok(());
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
                return Ok(());
            }
            s.parked = None;
            let _ = fsx::remove_file(&agent_parked_file(project, &s.role.name));
            s.stalls = 0;
        }
        let waits = pending(&w);
        // A held role is asked again with nothing waiting too, so a
        // raise clears its `parked` at once, not at its next item.
        let holds = (waits || s.held.is_some()) && self.budget_holds(i, say);
        if waits && !holds {
            self.spawn(i, say)?;
        }
        Ok(())
    }

    /// `--until-idle`: the end once nothing runs and nothing is in flight,
    /// three quiet looks in a row (`Idle`), or at once when work waits only
    /// for agents that make no progress (`Stalled`). Waiting for a person
    /// is not a stall: the swarm is idle, and `swarm up` names the open
    /// questions.
    fn idle_or_stalled(&self, idle_ticks: &mut u32) -> Option<Outcome> {
        let project = &self.plan.project;
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
        let held_back = waiting.iter().all(|s| {
            s.parked.is_some() || s.held.is_some() || s.dead.is_some() || s.waiting.is_some()
        });
        if !(quiet && held_back) {
            *idle_ticks = 0;
            return None;
        }
        let stuck: Vec<&&Slot> = waiting.iter().filter(|s| s.waiting.is_none()).collect();
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
            return Some(Outcome::Stalled(format!(
                "work waits for {} but their agents make no progress; see {}",
                names.join(", "),
                agents_dir(project).display()
            )));
        }
        *idle_ticks += 1;
        // Three quiet looks in a row: nothing is in flight.
        (*idle_ticks >= 3).then_some(Outcome::Idle)
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
            let _ = fsx::write_file(&f, format!("{}\n", clock::iso_now()).as_bytes());
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
}
