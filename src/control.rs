//! Finding and stopping the one `handoffd` of a project.
//!
//! The daemon holds an exclusive flock(2) on `.swarmforge/daemon/handoffd.pid`
//! for its whole life. A pid is only signalled after /proc/locks confirms that
//! this very process holds that lock, so a stale pid file can never get an
//! unrelated process killed (§15.10).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::layout::Project;

/// Time `swarm stop` gives the daemon before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

/// Whether `pid` holds a flock on the inode `ino` (per /proc/locks).
fn holds_lock(pid: u32, ino: u64) -> bool {
    let Ok(text) = fs::read_to_string("/proc/locks") else {
        return false;
    };
    text.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"
        f.len() >= 6
            && f[1] == "FLOCK"
            && f[4] == pid.to_string()
            && f[5].rsplit(':').next() == Some(ino.to_string().as_str())
    })
}

/// The pid of the live daemon, verified against the lock it holds.
pub fn running_pid(project: &Project) -> Option<u32> {
    let path = project.pid_file();
    let meta = fs::metadata(&path).ok()?;
    // Free lock: nobody runs. Drop it at once.
    if fsx::try_lock(&path).ok()?.is_some() {
        return None;
    }
    // The holder writes its pid right after locking; give it a moment.
    let end = Instant::now() + Duration::from_millis(500);
    loop {
        let pid = fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        if let Some(pid) = pid {
            if holds_lock(pid, meta.ino()) {
                return Some(pid);
            }
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn lock_free(project: &Project) -> bool {
    if !project.pid_file().exists() {
        return true;
    }
    matches!(fsx::try_lock(&project.pid_file()), Ok(Some(_)) | Err(_))
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: plain kill(2) on a pid verified to hold the daemon lock.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
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
        return Err(Error::env(format!(
            "No swarm at {} (missing .swarmforge/).",
            project.root.display()
        )));
    }
    fsx::ensure_dirs(&[&dir]).at(&dir)?;
    let stop_file = project.stop_file();
    fsx::write_file(&stop_file, b"").at(&stop_file)?;
    let pid = running_pid(project);
    let mut killed = false;
    if let Some(pid) = pid {
        signal(pid, libc::SIGTERM);
        let end = Instant::now() + grace;
        while !lock_free(project) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        if !lock_free(project) {
            signal(pid, libc::SIGKILL);
            killed = true;
            let end = Instant::now() + Duration::from_secs(2);
            while !lock_free(project) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    // A SIGKILLed daemon leaves its pid file; the lock is free now, so it is stale.
    if lock_free(project) {
        let _ = fsx::remove_file(&project.pid_file());
    }
    fsx::remove_file(&stop_file).at(&stop_file)?;
    Ok(StopReport { pid, killed })
}
