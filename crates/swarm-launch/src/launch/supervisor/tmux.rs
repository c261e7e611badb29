//! `swarm up` in tmux: one session per role, then the agents' start
//! watched (an agent that exits at once is named with what its pane shows),
//! then the sessions and the daemon watched until the swarm stops.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::super::sessions::{has_session, start_sessions, write_session_files};
use super::super::TICK;
use super::{Outcome, Running, UpOptions, START_WINDOW};
use crate::error::Result;
use crate::launch::plan::{Plan, PlannedRole};
use crate::protocol::clock;
use crate::protocol::launch_files::AgentRun;
use crate::protocol::start_failure::{self, Death};
use crate::sys::tmux;

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
                        at: clock::iso_now(),
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
        let screen = tmux::capture(sock, session).unwrap_or_default();
        if screen.contains(start_failure::PANE_EXIT_MARK) || Instant::now() >= end {
            return start_failure::last_run_in_pane(&screen);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Running<'_> {
    pub(in crate::launch) fn tmux(
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
}
