//! Stopping whatever a test started in a swarm, also when the test panics.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{bin, clean_command, Run, Started};

/// Guards a swarm at `root`: on drop it stops the guarded `swarm` process
/// (SIGTERM, then SIGKILL), runs `swarm down <root>` and kills the tmux
/// server on `socket`, in that order.
pub struct SwarmGuard {
    pub root: PathBuf,
    pub running: Option<Started>,
    pub socket: Option<PathBuf>,
}

impl SwarmGuard {
    pub fn new(root: &Path) -> SwarmGuard {
        SwarmGuard {
            root: root.to_path_buf(),
            running: None,
            socket: None,
        }
    }

    /// Guards a started `swarm up` or `swarm demo`; returns its pid.
    pub fn guard(&mut self, started: Started) -> u32 {
        let pid = started.pid();
        self.running = Some(started);
        pid
    }

    /// Waits for the guarded process to exit (see [`Started::finish`]).
    pub fn finish(&mut self, timeout: Duration, what: &str) -> Run {
        let started = self.running.take().expect("a guarded process");
        started.finish(timeout, what)
    }
}

impl Drop for SwarmGuard {
    fn drop(&mut self) {
        if let Some(mut s) = self.running.take() {
            let c = &mut s.child;
            if matches!(c.try_wait(), Ok(None)) {
                // SAFETY: plain kill(2) of our own child, not reaped yet.
                unsafe {
                    libc::kill(c.id() as i32, libc::SIGTERM);
                }
                let end = Instant::now() + Duration::from_secs(20);
                while matches!(c.try_wait(), Ok(None)) && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        if self.root.join(".swarmforge").is_dir() {
            let _ = clean_command(&bin("swarm"), &self.root)
                .arg("down")
                .arg(&self.root)
                .stdin(Stdio::null())
                .output();
        }
        if let Some(s) = &self.socket {
            let _ = clean_command(Path::new("tmux"), &self.root)
                .arg("-S")
                .arg(s)
                .arg("kill-server")
                .output();
        }
    }
}
