//! Starting and stopping `swarm bridge` with the swarm (docs/bridge.md): `swarm
//! up` starts it when `swarm.yaml` sets `bridge:`, `swarm down` stops it. The
//! bridge itself (the network part) lives in `crate::bridge`.

use std::path::PathBuf;
use std::time::Duration;

use super::process::{lock_holder, spawn_holding, stop_lock_holder, Spawn};
use super::shims;
use crate::error::{IoContext, Result};
use crate::fsx;
use crate::launch::plan::Plan;
use crate::protocol::layout::Project;

fn swarm_program() -> PathBuf {
    match shims::own_bin_dir() {
        Ok(d) if d.join("swarm").is_file() => d.join("swarm"),
        _ => PathBuf::from("swarm"),
    }
}

/// Starts this host's bridge in a session of its own (output appended to
/// `.swarmforge/bridge/bridge.out`) and waits until it holds its lock. One
/// already running is kept. `None` when the swarm has no bridge.
pub fn start_bridge(plan: &Plan, say: &mut dyn FnMut(&str)) -> Result<Option<u32>> {
    if plan.config.bridge.is_none() {
        return Ok(None);
    }
    let project = &plan.project;
    if let Some(pid) = lock_holder(&project.bridge_pid()) {
        say(&format!("the bridge runs already (pid {pid})"));
        return Ok(Some(pid));
    }
    let dir = project.bridge_dir();
    fsx::ensure_dirs(&[&dir]).at(&dir)?;
    let out = project.bridge_output();
    let prog = swarm_program();
    let (pid, child) = spawn_holding(&Spawn {
        name: "swarm bridge",
        program: &prog,
        args: &["bridge".as_ref(), project.root.as_os_str()],
        root: &project.root,
        output: &out,
        lock: &project.bridge_pid(),
    })?;
    say(&format!(
        "the bridge runs (pid {pid}, host {}); its log: {}",
        plan.host.as_deref().unwrap_or("?"),
        project.bridge_log().display()
    ));
    // It runs in a session of its own and outlives a detached `up`.
    drop(child);
    Ok(Some(pid))
}

/// Stops the bridge holding this project's bridge lock: TERM, then KILL
/// after `grace`. Safe at any moment: every step of the bridge is
/// crash-safe. Returns its pid.
pub fn stop_bridge(project: &Project, grace: Duration) -> Option<u32> {
    stop_lock_holder(&project.bridge_pid(), grace)
}
