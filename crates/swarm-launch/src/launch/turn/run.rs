//! One run of a preset CLI in a headless turn: started under `sh` in the
//! role's worktree, its stream read line by line (reader.rs), its stderr
//! passed on to ours (the agent's log) with a bounded tail kept to judge a
//! refused resume, and the run framed in the role's activity by a turn
//! start and a turn end.
//!
//! Invariant kept here: **a run that started is closed**: however the CLI
//! ended (an exit code, a signal) and whatever it printed, the activity
//! file gets the note of what was skipped and the turn's end with its
//! status, and the `blocked` mark is cleared unless the CLI gave up on a
//! refused request. What the run learned is returned, not kept: a run
//! again after a refused resume starts from nothing.

use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;

use super::reader::{read_lines, Reader};
use crate::error::{Error, Result};
use crate::launch::agents::Cli;
use crate::launch::plan::PlannedRole;
use crate::protocol::layout::Project;
use crate::telemetry::activity::{Activity, Kind};

/// The stderr kept to judge a refused resume.
pub(super) const STDERR_TAIL: usize = 4096;

/// One CLI run's reading.
#[derive(Default)]
pub(super) struct Run {
    pub(super) code: Option<i32>,
    /// What the agent did (text, thinking, tool calls and results).
    pub(super) acted: usize,
    /// The error events' texts (bounded).
    pub(super) errors: String,
    pub(super) stderr_tail: String,
    pub(super) skipped: usize,
    pub(super) unknown: usize,
}

impl Run {
    /// A resume the CLI refused: it failed before the agent did anything,
    /// saying (on stderr or in an error event) that it does not know the
    /// session.
    pub(super) fn refused_resume(&self) -> bool {
        let e = format!("{}\n{}", self.stderr_tail, self.errors).to_lowercase();
        self.code.is_some_and(|c| c != 0)
            && self.acted == 0
            && [
                // Claude Code 2.1: "No conversation found with session ID".
                "no conversation found",
                // Gemini CLI 0.61: "Error resuming session: No previous
                // sessions found for this project."
                "error resuming session",
                "no previous session",
                "not found",
                "no session",
                "invalid session",
                "could not find",
                "cannot find",
                "does not exist",
                // Codex 0.171: "no rollout found for thread id <id>".
                "no rollout",
                "unknown session",
            ]
            .iter()
            .any(|m| e.contains(m))
    }
}

/// Runs `command` (the CLI's, confined) once for `r`, reading its stream
/// into the role's records; says that it starts and how it ended.
pub(super) fn run_once(
    project: &Project,
    r: &PlannedRole,
    cli: Cli,
    command: &str,
    resume: Option<&str>,
    max_bytes: u64,
    say: &mut dyn FnMut(&str),
) -> Result<Run> {
    let role = r.name.as_str();
    let start = turn_start(role, cli, resume);
    let mut reader = Reader::new(project, r, cli, resume, max_bytes, start.time.clone());
    reader.record(start);
    say(&format!(
        "{role}: {} turn{}",
        cli.name(),
        resume
            .map(|id| format!(", resuming session {id}"))
            .unwrap_or_default()
    ));
    let mut child = spawn(r, cli, command)?;
    let err = child.stderr.take().map(pass_on_stderr);
    if let Some(out) = child.stdout.take() {
        read_lines(out, &mut reader);
    }
    let status = child
        .wait()
        .map_err(|e| Error::process(format!("waiting for {}: {e}", cli.name())))?;
    if !reader.gave_up {
        reader.unblock();
    }
    reader.run.stderr_tail = err.and_then(|h| h.join().ok()).unwrap_or_default();
    reader.run.code = status.code();
    close(&mut reader, status);
    say(&format!("{role}: turn ended ({status})"));
    Ok(reader.run)
}

/// The record that opens a run: which CLI, resuming which session, in
/// which process.
fn turn_start(role: &str, cli: Cli, resume: Option<&str>) -> Activity {
    let mut start = Activity::now(role, Kind::TurnStart).text(&match resume {
        Some(id) => format!("{} resumes session {id}", cli.name()),
        None => format!("{} starts a new conversation", cli.name()),
    });
    start.name = Some(cli.name().to_string());
    start.pid = Some(std::process::id());
    start
}

/// Starts `command` under `sh` in the role's worktree, its stream and
/// stderr piped to us.
fn spawn(r: &PlannedRole, cli: Cli, command: &str) -> Result<Child> {
    Command::new("sh")
        .arg("-c")
        .arg(command)
        // The turn-end hook leaves this turn's transcript alone: its
        // stream is read here (agents/transcript/).
        .env(crate::launch::agents::transcript::HEADLESS_ENV, "1")
        .current_dir(&r.worktree_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::process(format!("cannot start sh for {}: {e}", cli.name())))
}

/// Passes the CLI's stderr on to ours (the agent's log) as it comes; the
/// thread returns its last [`STDERR_TAIL`] bytes.
fn pass_on_stderr(mut e: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut tail: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 8192];
        while let Ok(n) = e.read(&mut chunk) {
            if n == 0 {
                break;
            }
            let _ = std::io::stderr().write_all(&chunk[..n]);
            tail.extend_from_slice(&chunk[..n]);
            if tail.len() > STDERR_TAIL {
                tail.drain(..tail.len() - STDERR_TAIL);
            }
        }
        String::from_utf8_lossy(&tail).into_owned()
    })
}

/// Closes the run in the activity file: a note of the lines skipped and
/// the event types not known, then the turn's end with how the CLI ended.
fn close(reader: &mut Reader, status: ExitStatus) {
    let role = reader.role;
    if reader.run.skipped + reader.run.unknown > 0 {
        let note = format!(
            "skipped {} unreadable line(s) and {} event(s) of unknown type{}",
            reader.run.skipped,
            reader.run.unknown,
            if reader.unknown_types.is_empty() {
                String::new()
            } else {
                format!(" ({})", reader.unknown_types.join(", "))
            }
        );
        reader.record(Activity::now(role, Kind::Note).text(&note));
    }
    reader.look_at_item();
    let mut end = Activity::now(role, Kind::TurnEnd);
    end.status = Some(match status.code() {
        Some(0) => "ok".into(),
        Some(c) => format!("exit {c}"),
        None => format!("killed ({status})"),
    });
    reader.record(end);
}
