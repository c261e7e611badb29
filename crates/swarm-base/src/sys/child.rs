//! Waiting for a child process without trusting it to end or to be brief:
//! the person's side (handoffd, a wake-up, doctor) runs tmux, `sh -c` and
//! git in folders an agent can write, and a child that hangs (a FIFO where
//! git reads a `.gitignore`) or floods its output (a tree of untracked
//! files with long names) must cost a bounded time and memory, never a
//! stalled daemon.
//!
//! The invariant: a child waited for here is killed (and reaped) at its
//! deadline, and at most `max_stdout` bytes of its output (and
//! [`MAX_STDERR`] of its errors) are kept; more output kills it too.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Most bytes of a child's stderr kept (the rest is read and dropped).
pub const MAX_STDERR: u64 = 64 * 1024;

/// Why a bounded child gave no answer; the caller says which child.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// Not exited by its deadline: killed.
    #[error("timed out after {}", deadline(.0))]
    TimedOut(Duration),
    /// Printed more than it may: killed.
    #[error("printed more than {0} bytes")]
    TooMuchOutput(u64),
    /// Could not be started.
    #[error("cannot be run: {0}")]
    CannotRun(#[source] std::io::Error),
    /// Could not be waited for.
    #[error("{0}")]
    Wait(#[source] std::io::Error),
}

/// Waits for `child` until `timeout`, then kills it.
pub fn wait_bounded(mut child: Child, timeout: Duration) -> Result<ExitStatus, ChildError> {
    let end = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Ok(st),
            Ok(None) if Instant::now() >= end => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ChildError::TimedOut(timeout));
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => return Err(ChildError::Wait(e)),
        }
    }
}

/// A deadline as [`ChildError::TimedOut`] words it: whole seconds, else
/// milliseconds.
fn deadline(timeout: &Duration) -> String {
    if timeout.subsec_millis() == 0 {
        format!("{}s", timeout.as_secs())
    } else {
        format!("{}ms", timeout.as_millis())
    }
}

/// What a bounded run printed.
#[derive(Debug)]
pub struct Captured {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs `cmd` (stdin closed, its output captured) until it exits, and at
/// most until `timeout`; Err (why, the child killed) when it did not exit
/// in time or printed more than `max_stdout` bytes, or could not be run.
pub fn output_bounded(
    cmd: Command,
    timeout: Duration,
    max_stdout: u64,
) -> Result<Captured, ChildError> {
    output_bounded_from(cmd, Stdio::null(), timeout, max_stdout)
}

/// [`output_bounded`] with `stdin` as the child's standard input.
pub fn output_bounded_from(
    mut cmd: Command,
    stdin: Stdio,
    timeout: Duration,
    max_stdout: u64,
) -> Result<Captured, ChildError> {
    let mut child = cmd
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ChildError::CannotRun)?;
    let end = Instant::now() + timeout;
    let (tx, rx) = mpsc::channel::<(bool, Vec<u8>)>();
    // Each pipe read in a thread of its own: a child that fills one while
    // nobody reads the other would otherwise block forever.
    if let Some(out) = child.stdout.take() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = out.take(max_stdout.saturating_add(1)).read_to_end(&mut buf);
            let _ = tx.send((true, buf));
        });
    }
    if let Some(err) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut err = err;
            let _ = (&mut err).take(MAX_STDERR).read_to_end(&mut buf);
            let _ = std::io::copy(&mut err, &mut std::io::sink());
            let _ = tx.send((false, buf));
        });
    } else {
        drop(tx);
    }
    let (mut stdout, mut stderr, mut status) = (None, None, None);
    let mut pause = Duration::from_millis(1);
    loop {
        if stdout
            .as_ref()
            .is_some_and(|o: &Vec<u8>| o.len() as u64 > max_stdout)
        {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ChildError::TooMuchOutput(max_stdout));
        }
        if status.is_none() {
            status = child.try_wait().map_err(ChildError::Wait)?;
        }
        if let (Some(status), Some(_), Some(_)) = (status, &stdout, &stderr) {
            return Ok(Captured {
                status,
                stdout: stdout.unwrap_or_default(),
                stderr: stderr.unwrap_or_default(),
            });
        }
        let now = Instant::now();
        if now >= end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ChildError::TimedOut(timeout));
        }
        match rx.recv_timeout(pause.min(end - now)) {
            Ok((true, b)) => stdout = Some(b),
            Ok((false, b)) => stderr = Some(b),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                pause = (pause * 2).min(Duration::from_millis(50))
            }
            // Both readers done: the pipes' ends were given.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                stdout.get_or_insert_with(Vec::new);
                stderr.get_or_insert_with(Vec::new);
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn a_child_within_its_bounds_is_captured() {
        let c = output_bounded(
            sh("printf out; printf err >&2; exit 3"),
            Duration::from_secs(30),
            3,
        )
        .unwrap();
        assert_eq!(c.status.code(), Some(3));
        assert_eq!(
            (c.stdout.as_slice(), c.stderr.as_slice()),
            (&b"out"[..], &b"err"[..])
        );
    }

    #[test]
    fn a_child_that_floods_its_output_is_killed() {
        let e = output_bounded(sh("yes"), Duration::from_secs(600), 1 << 20).unwrap_err();
        assert!(matches!(e, ChildError::TooMuchOutput(n) if n == 1 << 20));
        assert_eq!(
            e.to_string(),
            format!("printed more than {} bytes", 1 << 20)
        );
        // Flooding stderr is read and dropped: it does not hang the child.
        let c = output_bounded(
            sh("head -c 1000000 /dev/zero >&2; printf done"),
            Duration::from_secs(600),
            100,
        )
        .unwrap();
        assert_eq!(
            (c.stdout.as_slice(), c.stderr.len() as u64),
            (&b"done"[..], MAX_STDERR)
        );
    }

    #[test]
    fn a_child_that_hangs_is_killed_at_its_deadline() {
        // A FIFO nobody writes: the child blocks in open(2) for ever.
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        assert!(Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let e = output_bounded(
            sh(&format!("cat '{}'", fifo.display())),
            Duration::from_millis(200),
            100,
        )
        .unwrap_err();
        assert!(matches!(e, ChildError::TimedOut(_)));
        assert_eq!(e.to_string(), "timed out after 200ms");
    }
}
