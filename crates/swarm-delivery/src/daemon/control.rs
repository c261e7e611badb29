//! Finding and stopping the one `handoffd` of a project.
//!
//! The daemon holds an exclusive flock(2) on `.swarmforge/daemon/handoffd.pid`
//! for its whole life. A pid is only signalled after /proc/locks confirms that
//! this very process holds that lock, so a stale pid file can never get an
//! unrelated process killed (docs/protocol.md §7.6).

use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::layout::Project;

/// Time `swarm stop` gives the daemon before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

/// The pid of the live daemon: the process holding the lock on the pid file.
pub fn running_pid(project: &Project) -> Option<u32> {
    fsx::flock_holders(&project.pid_file()).first().copied()
}

/// Whether no daemon holds the pid file's lock, asked of the lock itself.
/// /proc/locks (what [`running_pid`] reads) is listed a page at a time,
/// and a lock can be missing from a listing while others come and go: a
/// busy machine once made `stop` see the lock free, then held, and kill a
/// daemon that was stopping cleanly. Taking the lock for a moment cannot
/// be wrong that way.
fn lock_free(project: &Project) -> bool {
    let pid_file = project.pid_file();
    if !pid_file.exists() {
        return true;
    }
    match fsx::try_lock(&pid_file) {
        Ok(held) => held.is_some(),
        Err(_) => !pid_file.exists(),
    }
}

fn signal(pid: u32, sig: Signal) {
    if let Some(pid) = Pid::from_raw(pid as i32) {
        let _ = kill_process(pid, sig);
    }
}

/// What `stop` did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StopReport {
    /// The daemon that was running, if any.
    pub pid: Option<u32>,
    /// It had to be killed after the grace period.
    pub killed: bool,
}

/// Stop file + SIGTERM, wait up to `grace`, then SIGKILL. The stop file is
/// removed only after the daemon is gone, so it cannot miss the request.
pub fn stop(project: &Project, grace: Duration) -> Result<StopReport> {
    let dir = project.daemon_dir();
    if !project.swarmforge().is_dir() {
        return Err(Error::not_found(format!(
            "No swarm at {} (missing .swarmforge/).",
            project.root.display()
        )));
    }
    fsx::ensure_dirs(&[&dir]).at(&dir)?;
    // Who runs, asked before the stop file exists: the daemon reacts to the
    // file within milliseconds, and asking afterwards reported a daemon that
    // was just stopped as "not running".
    let pid = running_pid(project);
    let stop_file = project.stop_file();
    fsx::write_file(&stop_file, b"").at(&stop_file)?;
    let mut killed = false;
    if let Some(pid) = pid {
        // Gone already (it saw the stop file): nothing to signal.
        if !lock_free(project) {
            signal(pid, Signal::TERM);
        }
        let end = Instant::now() + grace;
        while !lock_free(project) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        if !lock_free(project) {
            signal(pid, Signal::KILL);
            killed = true;
            let end = Instant::now() + Duration::from_secs(2);
            while !lock_free(project) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    // A SIGKILLed daemon leaves its pid file; the lock is free now, so it is stale.
    // Removed only while we hold its lock: a daemon starting right now cannot
    // lose the file it just locked (which would let a second one start).
    if project.pid_file().exists() {
        if let Ok(Some(_held)) = fsx::try_lock(&project.pid_file()) {
            let _ = fsx::remove_file(&project.pid_file());
        }
    }
    fsx::remove_file(&stop_file).at(&stop_file)?;
    Ok(StopReport { pid, killed })
}
