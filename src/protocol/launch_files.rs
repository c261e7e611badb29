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
pub fn agent_log(p: &Project, role: &str) -> PathBuf {
    agents_dir(p).join(format!("{role}.log"))
}
/// Present while the headless supervisor has parked the role after stalls.
pub fn agent_parked_file(p: &Project, role: &str) -> PathBuf {
    agents_dir(p).join(format!("{role}.parked"))
}
pub fn agent_pid_file(p: &Project, role: &str) -> PathBuf {
    agents_dir(p).join(format!("{role}.pid"))
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
