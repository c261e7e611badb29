//! Starting and stopping `swarm bridge` with the swarm (issue 16): `swarm up`
//! starts it when `swarm.yaml` sets `bridge:`, `swarm down` stops it. The
//! bridge itself (the network part) lives in `crate::bridge`.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::process::{detach, kill, lock_holder, tail};
use super::shims;
use crate::error::{Error, IoContext, Result};
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
    let mut cmd = Command::new("sh");
    // The shell opens the output file and execs the bridge: its pid is ours.
    cmd.arg("-c")
        .arg("exec \"$0\" bridge \"$1\" >>\"$2\" 2>&1 </dev/null")
        .arg(&prog)
        .arg(&project.root)
        .arg(&out)
        .current_dir(&project.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    detach(&mut cmd, false);
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::env(format!("cannot start {} bridge: {e}", prog.display())))?;
    let pid = child.id();
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        if fsx::flock_holders(&project.bridge_pid()).contains(&pid) {
            say(&format!(
                "the bridge runs (pid {pid}, host {}); its log: {}",
                plan.host.as_deref().unwrap_or("?"),
                project.bridge_log().display()
            ));
            // It runs in a session of its own and outlives a detached `up`.
            drop(child);
            return Ok(Some(pid));
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(Error::env(format!(
                "swarm bridge exited at start ({st}); its output ({}):\n{}\n  hint: fix the cause above, then run `swarm up` again",
                out.display(),
                tail(&out, 15)
            )));
        }
        if Instant::now() >= end {
            let _ = child.kill();
            return Err(Error::env(format!(
                "swarm bridge did not start within 15 s; its output: {}",
                out.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stops the bridge holding this project's bridge lock: TERM, then KILL
/// after `grace`. Safe at any moment: every step of the bridge is
/// crash-safe. Returns its pid.
pub fn stop_bridge(project: &Project, grace: Duration) -> Option<u32> {
    let pid = lock_holder(&project.bridge_pid())?;
    if pid == std::process::id() {
        return None;
    }
    kill(pid as i32, rustix::process::Signal::TERM);
    let end = Instant::now() + grace;
    while lock_holder(&project.bridge_pid()).is_some() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    if lock_holder(&project.bridge_pid()).is_some() {
        kill(pid as i32, rustix::process::Signal::KILL);
    }
    Some(pid)
}
