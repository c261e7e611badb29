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

/// Why tmux gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    /// tmux could not be started.
    #[error("cannot run tmux: {0}")]
    CannotRun(#[source] std::io::Error),
    /// tmux hung past [`TIMEOUT`] (killed), or could not be waited for.
    #[error("tmux {what} {source}")]
    Bounded {
        what: String,
        source: super::child::ChildError,
    },
    /// tmux answered but refused the capture: its stderr.
    #[error("tmux capture-pane failed: {0}")]
    CaptureFailed(String),
}

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
pub fn call(socket: &Path, args: &[&str]) -> Result<Reply, TmuxError> {
    let mut child = Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(args)
        .env_remove("TMUX")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(TmuxError::CannotRun)?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let what = args.first().copied().unwrap_or("");
    let status = wait_bounded(child, TIMEOUT).map_err(|source| TmuxError::Bounded {
        what: what.to_string(),
        source,
    })?;
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
pub fn capture(socket: &Path, session: &str) -> Result<String, TmuxError> {
    let r = call(
        socket,
        &["capture-pane", "-p", "-t", &format!("={session}:")],
    )?;
    if !r.ok {
        return Err(TmuxError::CaptureFailed(r.stderr.trim().to_string()));
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
