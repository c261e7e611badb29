//! The forum and board writes of a confined agent, made by handoffd
//! (docs/security.md, "Confinement"). Inside its sandbox an agent cannot
//! write `.swarmforge/forum/` or `.swarmforge/board/` (it could forge or
//! erase sessions, discussions and lanes), yet its legitimate actions open
//! and close sessions and discussions (`swarm session`, `swarm discussion`,
//! `swarm ingest`) and count audit challenges (the audit gate in
//! `swarm-handoff`). So a confined command asks: it publishes a request in
//! its own launcher folder, `.swarmforge/agents/<role>/requests/<id>.request`
//! (the one project folder it may write), and waits for `<id>.answer`.
//!
//! handoffd, unconfined, carries a request out on its forum poll:
//! - the sender is the folder's role, never anything the request says;
//! - a request is bounded ([`MAX_REQUEST`] bytes, [`PER_POLL`] per role
//!   and poll), parsed with the one header parser, checked like the command
//!   line (the forum's own checks), and never a symlink;
//! - **exactly once, whatever is killed when**: the request is first moved
//!   out of the agent's reach into `.swarmforge/daemon/requests/<role>/`
//!   (a rename that cannot clobber), so the agent cannot change it while
//!   it is carried out; a daemon's start takes up every one left there
//!   (the folder is a `protocol::ledger`, whose crash test covers each step).
//!   Carrying one out twice changes nothing: the session or discussion
//!   record names the request that opened or closed it (found, it is
//!   answered from the record), and an audit count is raised against the
//!   count recorded before it (board::count_audit_once). The answer is
//!   published before the taken request is removed.
//!
//! Unconfined (a person, `launch: {confine: false}`) the same functions
//! write directly, as before.
//!
//! File reservations (docs/reservations.md) are asked for the same way:
//! `.swarmforge/reservations/` is read-only in the sandbox, and a role
//! reserves and releases only in its own name, the folder's. Their
//! requests are checked field by field (no field the operation does not
//! take, globs as `reserve` stores them, the time to live and the reason
//! as the command line checks them), taken and released once
//! (reservations::reserve_once, reservations::release_once), and answered
//! with what the command prints (the reservation, the globs released) or
//! its refusal with its token, so the confined command prints the same
//! output and exits with the same code as the direct one.

//!
//! The module is cut by side: what a request and an answer say on disk
//! (`wire`), the confined command that asks and waits (here), and
//! handoffd, which takes and carries requests out (`carry`).

use std::io;
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result, Token};
use crate::forum::{discussion, session};
use crate::fsx;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::launch_files::agent_requests_dir;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::reservations::{self, Reservation};
use crate::text::escape;

mod carry;
#[cfg(test)]
mod tests;
mod wire;

pub use carry::{resume, serve, waiting, Waiting};
pub use wire::{Answer, Ask};

/// Set (to the role) in a confined agent's sandbox by launch/confine/.
pub const CONFINED_ENV: &str = "SWARM_CONFINED";
/// Largest request read.
pub const MAX_REQUEST: u64 = 4096;
/// Largest answer read (a reservation's refusal lists the holders).
const MAX_ANSWER: u64 = 128 * 1024;
/// Longest refusal text of a reservation request put in an answer.
const MAX_REFUSAL: usize = 16 * 1024;
/// Requests of one role carried out per poll (the rest wait for the next).
pub const PER_POLL: usize = 16;
/// How long a confined command waits for handoffd's answer.
pub const WAIT: Duration = Duration::from_secs(30);
/// Longest error text put in an answer.
const MAX_ERROR: usize = 1000;

/// The role whose confined agent runs this process, if it is one.
pub fn confined_role() -> Option<String> {
    std::env::var(CONFINED_ENV)
        .ok()
        .filter(|r| grammar::valid_role(r))
}

// ------------------------------------------------------------ the agent's side

/// Opens a session: directly, or through handoffd from a confined agent.
pub fn session_start(project: &Project, title: Option<&str>, by: &str) -> Result<session::Session> {
    let Some(role) = confined_role() else {
        return session::start(project, title, by);
    };
    if let Some(t) = title {
        session::check_text("Session title", t)?;
    }
    let ask = Ask::SessionStart {
        title: title.map(str::to_string),
    };
    session::find(project, &record_of(ask_daemon(project, &role, &ask)?)?)
}

/// Closes a session: directly, or through handoffd from a confined agent.
pub fn session_close(
    project: &Project,
    id: Option<&str>,
    reason: &str,
) -> Result<session::Session> {
    let Some(role) = confined_role() else {
        return session::close(project, id, reason);
    };
    session::check_text("Close reason", reason)?;
    let ask = Ask::SessionClose {
        id: id.map(str::to_string),
        reason: reason.to_string(),
    };
    session::find(project, &record_of(ask_daemon(project, &role, &ask)?)?)
}

/// Opens a discussion: directly, or through handoffd from a confined agent.
pub fn discussion_open(
    project: &Project,
    roles: &Roles,
    id: &str,
    order: &[String],
    max_turns: Option<u32>,
    by: &str,
) -> Result<()> {
    let Some(role) = confined_role() else {
        return discussion::open(project, roles, id, order, max_turns, by).map(|_| ());
    };
    let ask = Ask::DiscussionOpen {
        id: id.to_string(),
        order: order.to_vec(),
        max_turns,
    };
    ask_daemon(project, &role, &ask).map(|_| ())
}

/// Closes a discussion: directly, or through handoffd from a confined agent.
pub fn discussion_close(project: &Project, id: &str, reason: &str) -> Result<()> {
    let Some(role) = confined_role() else {
        return discussion::close(project, id, reason).map(|_| ());
    };
    session::check_text("Close reason", reason)?;
    let ask = Ask::DiscussionClose {
        id: id.to_string(),
        reason: reason.to_string(),
    };
    ask_daemon(project, &role, &ask).map(|_| ())
}

/// Counts an audit challenge on a card: directly, or through handoffd from a
/// confined agent.
pub fn count_audit(project: &Project, task: &str) -> Result<()> {
    let Some(role) = confined_role() else {
        return crate::board::count_audit(project, task);
    };
    if crate::board::Routes::load(project).is_ok_and(|r| r.is_empty()) {
        return Ok(());
    }
    let ask = Ask::AuditCount {
        task: task.to_string(),
    };
    ask_daemon(project, &role, &ask).map(|_| ())
}

/// Takes a reservation: directly, or through handoffd from a confined
/// agent, in its own name only (the sandbox's role).
pub fn reserve(
    project: &Project,
    req: &reservations::Request,
) -> Result<(Reservation, Vec<Reservation>)> {
    let Some(role) = confined_role() else {
        return reservations::reserve(project, req);
    };
    own_name(&role, req.role, "swarm reserve")?;
    req.check()?;
    let ask = Ask::Reserve {
        globs: req.globs.clone(),
        ttl_ms: u64::try_from(req.ttl.as_millis()).unwrap_or(u64::MAX),
        reason: req.reason.to_string(),
        force: req.force,
    };
    #[derive(serde::Deserialize)]
    struct Reserved {
        reservation: Reservation,
        overlaps: Vec<Reservation>,
    }
    let (_, data) = ask_for(project, &role, &ask)?;
    let r: Reserved = serde_json::from_str(&data)
        .map_err(|e| Error::process(format!("handoffd's answer is not a reservation: {e}")))?;
    Ok((r.reservation, r.overlaps))
}

/// Releases `role`'s reservations (all, or `globs`): directly, or through
/// handoffd from a confined agent, in its own name only.
pub fn release(project: &Project, role: &str, globs: &[String]) -> Result<Vec<String>> {
    let Some(confined) = confined_role() else {
        return reservations::release(project, role, globs);
    };
    own_name(&confined, role, "swarm release")?;
    if globs.len() > reservations::MAX_GLOBS {
        return Err(Error::bad_input(format!(
            "name at most {} globs",
            reservations::MAX_GLOBS
        )));
    }
    #[derive(serde::Deserialize)]
    struct Released {
        released: Vec<String>,
    }
    let ask = Ask::Release {
        globs: globs.to_vec(),
    };
    let (_, data) = ask_for(project, &confined, &ask)?;
    let r: Released = serde_json::from_str(&data)
        .map_err(|e| Error::process(format!("handoffd's answer is not a release: {e}")))?;
    Ok(r.released)
}

/// A confined agent acts only as the sandbox's role (its requests are
/// carried out in that name whatever they say; this says so up front).
fn own_name(confined: &str, asked: &str, what: &str) -> Result<()> {
    if confined == asked {
        return Ok(());
    }
    Err(Error::refused(
        Token::PersonOnly,
        format!(
            "{what} as {} is that agent's or a person's to do; this is the confined agent {confined}, which acts only in its own name (docs/security.md).",
            escape(asked)
        ),
        Vec::new(),
    ))
}

fn record_of(a: Option<String>) -> Result<String> {
    a.ok_or_else(|| Error::process("handoffd answered without naming the record it made"))
}

/// A request id: the time and this process, in hex.
fn new_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{nanos:x}{:08x}", std::process::id())
}

fn valid_id(id: &str) -> bool {
    (8..=48).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Publishes `ask` in the role's own request folder and waits (at most
/// [`WAIT`]) for handoffd's answer: the record made, or the refusal as an error.
pub fn ask_daemon(project: &Project, role: &str, ask: &Ask) -> Result<Option<String>> {
    ask_for(project, role, ask).map(|(record, _)| record)
}

/// [`ask_daemon`], with the answer's data.
fn ask_for(project: &Project, role: &str, ask: &Ask) -> Result<(Option<String>, String)> {
    let dir = agent_requests_dir(project, role);
    let text = ask.to_message().render();
    if text.len() as u64 > MAX_REQUEST {
        return Err(Error::bad_input(format!(
            "a confined agent's request to handoffd is at most {MAX_REQUEST} bytes, and this one is {}: name fewer or shorter globs, or a shorter reason",
            text.len()
        )));
    }
    fsx::ensure_dirs(&[&dir]).at(&dir)?;
    let id = new_id();
    let request = dir.join(format!("{id}.request"));
    let answer = dir.join(format!("{id}.answer"));
    fsx::publish(&dir, &request, text.as_bytes()).at(&request)?;
    let end = Instant::now() + WAIT;
    let mut pause = Duration::from_millis(5);
    loop {
        match fsx::read_bounded(&answer, MAX_ANSWER) {
            Ok(b) => {
                let _ = fsx::remove_file(&answer);
                let a = Message::parse_bytes(&b)
                    .ok()
                    .as_ref()
                    .and_then(Answer::of)
                    .ok_or_else(|| Error::bad_file(&answer, "not an answer"))?;
                return match a {
                    Answer::Done { record, data } => Ok((record, data)),
                    Answer::Refused {
                        why,
                        token: Some(t),
                    } => Err(Error::refused(t, why, Vec::new())),
                    Answer::Refused { why, token: None } => Err(Error::conflict(why)),
                };
            }
            Err(fsx::ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::bad_file(&answer, e)),
        }
        if Instant::now() >= end {
            return Err(match std::fs::remove_file(&request) {
                Ok(()) => Error::process(format!(
                    "handoffd did not take this confined agent's request within {}s, so nothing was done ({})\n  hint: is handoffd running? `swarm status` says; `swarm up` starts it",
                    WAIT.as_secs(),
                    request.display()
                )),
                Err(_) => Error::process(format!(
                    "handoffd took this confined agent's request but did not answer within {}s; it will still be carried out ({})",
                    WAIT.as_secs(),
                    answer.display()
                )),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

// ------------------------------------------------------------ handoffd's side
