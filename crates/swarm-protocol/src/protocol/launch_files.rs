//! Where the launcher keeps its own files under `.swarmforge/` (agent logs,
//! pids, prompts, the supervisor's pid and output, tmux session records).

use std::path::PathBuf;

use crate::protocol::layout::Project;

/// `.swarmforge/bin`: the SwarmForge-named wrappers, first on agents' PATH.
pub fn shim_dir(p: &Project) -> PathBuf {
    p.swarmforge().join("bin")
}
/// `.swarmforge/agents`: headless agents' output (`<role>.log`) and pids.
pub fn agents_dir(p: &Project) -> PathBuf {
    p.swarmforge().join("agents")
}
/// `.swarmforge/agents/<role>/`: what the role's own agent writes about
/// itself (its conversation id, its hook's and transcript reader's state,
/// its private home): the one launcher folder a confined agent may write
/// (launch/confine/).
pub fn agent_own_dir(p: &Project, role: &str) -> PathBuf {
    agents_dir(p).join(role)
}
/// `.swarmforge/agents/<role>/requests/`: the forum and board writes the
/// role's confined agent asks handoffd to make, and handoffd's answers
/// (forum/requests.rs).
pub fn agent_requests_dir(p: &Project, role: &str) -> PathBuf {
    agent_own_dir(p, role).join("requests")
}
/// `.swarmforge/daemon/requests/<role>/`: the requests of `role` handoffd
/// took out of the agent's reach and has not answered yet.
pub fn taken_requests_dir(p: &Project, role: &str) -> PathBuf {
    p.daemon_dir().join("requests").join(role)
}
pub fn agent_log(p: &Project, role: &str) -> PathBuf {
    agents_dir(p).join(format!("{role}.log"))
}
/// The files of [`agents_dir`] ending in `.<ext>` (`log`, `pid`), with the
/// role each is named for; none when the folder does not exist.
pub fn agent_files(p: &Project, ext: &str) -> Vec<(String, PathBuf)> {
    let dir = agents_dir(p);
    let suffix = format!(".{ext}");
    crate::protocol::layout::names_in(&dir)
        .into_iter()
        .filter_map(|n| {
            let role = n.strip_suffix(&suffix)?.to_string();
            Some((role, dir.join(&n)))
        })
        .collect()
}
/// Present while the headless supervisor has parked the role after stalls.
pub fn agent_parked_file(p: &Project, role: &str) -> PathBuf {
    agents_dir(p).join(format!("{role}.parked"))
}
pub fn agent_pid_file(p: &Project, role: &str) -> PathBuf {
    agents_dir(p).join(format!("{role}.pid"))
}
/// `.swarmforge/acp/state/<role>`: what an ACP role's client (`swarm acp`,
/// launch/acp/) says its agent does, one line `<state>\t<since>\t<detail>`
/// (`busy`, `idle`, `waiting` for a person's decision, `blocked` on an
/// error); outside every folder a confined agent may write, removed when
/// the client stops; read by `swarm status` (views/liveness.rs).
pub fn acp_state_file(p: &Project, role: &str) -> PathBuf {
    p.swarmforge().join("acp/state").join(role)
}
/// `.swarmforge/run/<role>.sh`: what a tmux pane runs.
pub fn run_file(p: &Project, role: &str) -> PathBuf {
    p.swarmforge().join("run").join(format!("{role}.sh"))
}
/// `.swarmforge/run/<role>.state`: `running <epoch>` or `exited <status>
/// <epoch>`, written by the tmux pane script around each agent run.
pub fn agent_state_file(p: &Project, role: &str) -> PathBuf {
    p.swarmforge().join("run").join(format!("{role}.state"))
}

/// What a tmux pane's agent is doing, per its state file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentRun {
    /// Running since this epoch second.
    Running(Option<u64>),
    /// Exited with this status (`0`: done until the next wake-up; a
    /// scripted agent's documented end) at this epoch second.
    Exited { status: String, at: Option<u64> },
}

impl AgentRun {
    /// The state file of `role`'s pane, read bounded; None without one.
    pub fn of(p: &Project, role: &str) -> Option<AgentRun> {
        let b = crate::fsx::read_bounded(&agent_state_file(p, role), 4096).ok()?;
        let text = String::from_utf8_lossy(&b);
        let mut w = text.split_whitespace();
        match w.next()? {
            "running" => Some(AgentRun::Running(w.next().and_then(|t| t.parse().ok()))),
            "exited" => Some(AgentRun::Exited {
                status: w.next().unwrap_or("?").to_string(),
                at: w.next().and_then(|t| t.parse().ok()),
            }),
            _ => None,
        }
    }

    /// Exited with a status other than 0.
    pub fn failed(&self) -> bool {
        matches!(self, AgentRun::Exited { status, .. } if status != "0")
    }
}
pub fn prompt_file(p: &Project, role: &str) -> PathBuf {
    p.swarmforge().join("prompts").join(format!("{role}.md"))
}
/// Held (flock) by a foreground `swarm up` for its whole life.
pub fn supervisor_pid_file(p: &Project) -> PathBuf {
    p.daemon_dir().join("swarm-up.pid")
}
/// Output of a detached headless `swarm up`.
pub fn supervisor_output(p: &Project) -> PathBuf {
    p.daemon_dir().join("swarm-up.out")
}
pub fn tmux_env_file(p: &Project) -> PathBuf {
    p.swarmforge().join("tmux-env")
}
pub fn sessions_file(p: &Project) -> PathBuf {
    p.swarmforge().join("sessions.tsv")
}
