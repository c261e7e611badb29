//! `swarm cancel <role>`: a person stops an ACP role's running turn
//! (docs/agents.md, "The ACP runtime"). The command leaves a request in
//! `.swarmforge/acp/cancel/<role>` (who asked), the role's client takes it
//! at its next tick, sends the agent `session/cancel`, and answers in
//! `<role>.done` what it did; the command waits for that answer.
//!
//! Why a file and not a signal: the client may run in a tmux pane or
//! under the headless supervisor, and the request must say who asked
//! (the activity and the answer name them); a file the client takes is
//! the same wherever it runs.
//!
//! The invariants: the folder is outside every folder a confined agent
//! may write, so only a person's `swarm cancel` (which refuses an agent,
//! `PERSON_ONLY`) asks; both files are written through fsx and read
//! bounded, and the client removes the request before it acts, so one
//! request cancels at most one turn; the item in process stays where it
//! is, and the role is not prompted again until its inbox changes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::layout::Project;

/// How long `swarm cancel` waits for the client's answer.
pub const WAIT: Duration = Duration::from_secs(15);
/// The longest request or answer read.
const MAX_BYTES: u64 = 4096;

fn dir(project: &Project) -> PathBuf {
    project.swarmforge().join("acp/cancel")
}

/// Where `swarm cancel` asks and the client answers.
pub fn request_path(project: &Project, role: &str) -> PathBuf {
    dir(project).join(role)
}
pub fn answer_path(project: &Project, role: &str) -> PathBuf {
    dir(project).join(format!("{role}.done"))
}

fn read(p: &std::path::Path) -> Option<String> {
    fsx::read_bounded(p, MAX_BYTES)
        .ok()
        .map(|b| super::permission::one_line(&String::from_utf8_lossy(&b), 200))
}

/// The client's side: a waiting request for `role` (who asked), taken
/// (removed) so it acts once.
pub fn take(project: &Project, role: &str) -> Option<String> {
    let p = request_path(project, role);
    let by = read(&p)?;
    fsx::remove_file(&p).ok()?;
    Some(if by.is_empty() { "a person".into() } else { by })
}

/// The client's answer to a request it took.
pub fn answer(project: &Project, role: &str, text: &str) {
    let p = answer_path(project, role);
    if let Err(e) = fsx::write_file(&p, text.as_bytes()) {
        eprintln!("warning: {}: {e}", p.display());
    }
}

/// `swarm cancel <role>` as the caller: only a person (an agent is
/// refused, `PERSON_ONLY`); then [`by_person`].
pub fn cancel(project: &Project, role: &str) -> Result<String> {
    crate::agent::caller::Caller::of(project)?.require_person("swarm cancel")?;
    by_person(project, role)
}

/// A person's cancel (`swarm cancel`, checked; the cockpit's button, whose
/// token holder is the person): `role` must be an ACP role of the swarm.
/// Returns the client's answer, or an error when no client took the
/// request within [`WAIT`] (the request is taken back).
pub fn by_person(project: &Project, role: &str) -> Result<String> {
    let plan = crate::launch::plan::Plan::load(&project.root)?;
    let acp = plan.roles.iter().find(|r| r.name == role).map(|r| {
        matches!(
            r.agent,
            crate::launch::plan::AgentSpec::Preset { acp: true, .. }
        )
    });
    match acp {
        None => {
            return Err(Error::not_found(format!(
                "role '{}' is not in {}",
                crate::text::escape(role),
                plan.source.path().display()
            )))
        }
        Some(false) => {
            return Err(Error::bad_input(format!(
                "role '{role}' does not run `runtime: acp`; only an ACP session can be cancelled\n  hint: `swarm attach {role}` to interrupt a CLI in its pane"
            )))
        }
        Some(true) => {}
    }
    let who = crate::protocol::roles::Roles::load(&project.roles_tsv())?
        .roles
        .iter()
        .find(|r| r.is_human())
        .map_or_else(|| "a person".to_string(), |r| r.name.clone());
    let d = dir(project);
    fsx::ensure_dirs(&[&d]).map_err(|e| Error::io(&d, e))?;
    let (req, ans) = (request_path(project, role), answer_path(project, role));
    fsx::remove_file(&ans).map_err(|e| Error::io(&ans, e))?;
    fsx::write_file(&req, who.as_bytes()).map_err(|e| Error::io(&req, e))?;
    let end = Instant::now() + WAIT;
    let mut pause = Duration::from_millis(10);
    while Instant::now() < end {
        if let Some(text) = read(&ans) {
            let _ = fsx::remove_file(&ans);
            return Ok(text);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
    let _ = fsx::remove_file(&req);
    Err(Error::process(format!(
        "no ACP client of role {role} took the cancel within {} s (is the swarm up, and the role's client running? `swarm status`)",
        WAIT.as_secs()
    )))
}
