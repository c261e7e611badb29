//! `swarm down`: stop the supervisor, the agents, the daemon and the tmux
//! sessions, from anywhere; no handoff file is touched.

use super::process::{
    group_alive, lock_holder, start_time, stop_groups, stop_lock_holder, stop_pids,
};
use super::sessions::stop_tmux;
use super::GRACE;
use crate::daemon::control;
use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::launch_files::{agent_files, supervisor_pid_file};
use crate::protocol::layout::Project;

/// What `down` stopped.
#[derive(Clone, Debug, Default)]
pub struct DownReport {
    pub supervisor: Option<u32>,
    pub agents: Vec<String>,
    pub daemon: Option<u32>,
    pub sessions: Vec<String>,
    /// The bridge to other hosts, when one ran.
    pub bridge: Option<u32>,
    /// Processes that still carried an agent's environment after the
    /// agents' groups and sessions were stopped (they had left their group).
    pub strays: Vec<u32>,
}

/// Stops every process left with an agent's environment for this project
/// (process.rs, `agent_processes`): TERM, then KILL after [`GRACE`].
pub(super) fn stop_strays(project: &Project) -> Vec<u32> {
    // roles.tsv as it is now, not as a plan read it: a lineup change while
    // the swarm ran may have added roles whose agents must stop too.
    let roles: Vec<String> = match crate::protocol::roles::Roles::load(&project.roles_tsv()) {
        Ok(r) => r
            .roles
            .iter()
            .filter(|r| !r.is_human())
            .map(|r| r.name.clone())
            .collect(),
        Err(_) => return Vec::new(),
    };
    let pids = super::process::agent_processes(&project.root, &roles);
    stop_pids(&pids, GRACE);
    pids.into_iter().map(|p| p as u32).collect()
}

/// Headless agents recorded by a supervisor that is gone (SIGKILLed).
pub(super) fn stop_recorded_agents(project: &Project) -> Vec<String> {
    let mut stopped = Vec::new();
    let mut pgids = Vec::new();
    let mut files = Vec::new();
    for (role, path) in agent_files(project, "pid") {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut f = text.split_whitespace();
        let pid: Option<i32> = f.next().and_then(|s| s.parse().ok());
        let start: Option<u64> = f.next().and_then(|s| s.parse().ok());
        if let (Some(pid), Some(start)) = (pid, start) {
            // Only the very process we started (pids get reused), or its
            // group after it died: a group id stays taken while the group
            // has members, so it cannot belong to anyone else.
            let ours = match start_time(pid) {
                Some(t) => t == start,
                None => group_alive(pid),
            };
            if pid > 1 && ours {
                pgids.push(pid);
                stopped.push(role);
            }
        }
        files.push(path);
    }
    stop_groups(&pgids, GRACE, &mut []);
    for f in files {
        let _ = fsx::remove_file(&f);
    }
    stopped
}

/// Stops the swarm of `project`: a foreground `swarm up` (which tears down
/// its own agents), leftover agents, the daemon, the tmux sessions. Handoff
/// files are never touched.
pub fn down(project: &Project) -> Result<DownReport> {
    if !project.swarmforge().is_dir() {
        return Err(Error::not_found(format!(
            "No swarm at {} (missing .swarmforge/).\n  hint: give the project root as [root]",
            project.root.display()
        )));
    }
    // It stops its agents (GRACE) and the daemon (GRACE) itself.
    let supervisor = stop_lock_holder(&supervisor_pid_file(project), GRACE * 3);
    let agents = stop_recorded_agents(project);
    let daemon_pid = lock_holder(&project.pid_file());
    let daemon = control::stop(project, control::GRACE)?.pid.or(daemon_pid);
    let sessions = stop_tmux(project)?;
    let strays = stop_strays(project);
    let bridge = super::bridge::stop_bridge(project, GRACE);
    // What the panes waited for is no longer waiting.
    let _ = std::fs::remove_dir_all(project.daemon_dir().join("waiting"));
    Ok(DownReport {
        supervisor,
        agents,
        daemon,
        sessions,
        bridge,
        strays,
    })
}
