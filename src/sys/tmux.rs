//! The one way every part of the toolkit calls tmux: on the swarm's private
//! socket, outside any enclosing tmux, and bounded in time, so a hung tmux
//! server never stalls the daemon, a wake-up or `swarm down`.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::child::wait_bounded;

/// Longest one tmux call may take before it is killed.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// What tmux answered.
#[derive(Debug, Default)]
pub struct Reply {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `tmux -S socket args…` within [`TIMEOUT`]. (tmux's answers are short
/// lines, well under a pipe's buffer, so reading them after the exit cannot
/// block.)
pub fn call(socket: &Path, args: &[&str]) -> Result<Reply, String> {
    let mut child = Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(args)
        .env_remove("TMUX")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run tmux: {e}"))?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let what = args.first().copied().unwrap_or("");
    let status = wait_bounded(child, TIMEOUT).map_err(|e| format!("tmux {what} {e}"))?;
    let mut reply = Reply {
        ok: status.success(),
        ..Reply::default()
    };
    if let Some(mut s) = stdout {
        let _ = s.read_to_string(&mut reply.stdout);
    }
    if let Some(mut s) = stderr {
        let _ = s.read_to_string(&mut reply.stderr);
    }
    Ok(reply)
}

/// True when the call ran and tmux said yes.
pub fn ok(socket: &Path, args: &[&str]) -> bool {
    call(socket, args).is_ok_and(|r| r.ok)
}

/// Largest pane capture compared (a pane's visible text is far smaller).
const MAX_CAPTURE: usize = 256 * 1024;

/// The pane's visible text (`capture-pane -p`), bounded.
pub fn capture(socket: &Path, session: &str) -> Result<String, String> {
    let r = call(
        socket,
        &["capture-pane", "-p", "-t", &format!("={session}:")],
    )?;
    if !r.ok {
        return Err(format!("tmux capture-pane failed: {}", r.stderr.trim()));
    }
    let mut t = r.stdout;
    if t.len() > MAX_CAPTURE {
        let mut cut = MAX_CAPTURE;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        t.truncate(cut);
    }
    Ok(t)
}
