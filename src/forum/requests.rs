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
//!   it is carried out; a daemon's start takes up every one left there.
//!   Carrying one out twice changes nothing: the session or discussion
//!   record names the request that opened or closed it (found, it is
//!   answered from the record), and an audit count is raised against the
//!   count recorded before it (board::count_audit_once). The answer is
//!   published before the taken request is removed.
//!
//! Unconfined (a person, `launch: {confine: false}`) the same functions
//! write directly, as before.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result};
use crate::forum::{discussion, session};
use crate::fsx;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::launch_files::{agent_requests_dir, taken_requests_dir};
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::text::escape;

/// Set (to the role) in a confined agent's sandbox by launch/confine.rs.
pub const CONFINED_ENV: &str = "SWARM_CONFINED";
/// Largest request or answer read.
pub const MAX_REQUEST: u64 = 4096;
/// Requests of one role carried out per poll (the rest wait for the next).
pub const PER_POLL: usize = 16;
/// How long a confined command waits for handoffd's answer.
pub const WAIT: Duration = Duration::from_secs(30);
/// Longest error text put in an answer.
const MAX_ERROR: usize = 1000;

/// What a confined agent asks handoffd to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    SessionStart {
        title: Option<String>,
    },
    SessionClose {
        id: Option<String>,
        reason: String,
    },
    DiscussionOpen {
        id: String,
        order: Vec<String>,
        max_turns: Option<u32>,
    },
    DiscussionClose {
        id: String,
        reason: String,
    },
    AuditCount {
        task: String,
    },
}

impl Ask {
    fn to_message(&self) -> Message {
        let mut m = Message::default();
        let mut put = |k: &str, v: Option<&str>| {
            if let Some(v) = v {
                m.push(k, v);
            }
        };
        match self {
            Ask::SessionStart { title } => {
                put("op", Some("session_start"));
                put("title", title.as_deref());
            }
            Ask::SessionClose { id, reason } => {
                put("op", Some("session_close"));
                put("session", id.as_deref());
                put("reason", Some(reason));
            }
            Ask::DiscussionOpen {
                id,
                order,
                max_turns,
            } => {
                put("op", Some("discussion_open"));
                put("discussion", Some(id));
                put("order", Some(&order.join(",")));
                put("max_turns", max_turns.map(|n| n.to_string()).as_deref());
            }
            Ask::DiscussionClose { id, reason } => {
                put("op", Some("discussion_close"));
                put("discussion", Some(id));
                put("reason", Some(reason));
            }
            Ask::AuditCount { task } => {
                put("op", Some("audit_count"));
                put("task", Some(task));
            }
        }
        m
    }

    fn of(m: &Message) -> std::result::Result<Ask, String> {
        let get = |k: &str| m.get(k).map(str::to_string);
        let need = |k: &str| get(k).ok_or_else(|| format!("request without '{k}'"));
        Ok(match m.get("op").unwrap_or_default() {
            "session_start" => Ask::SessionStart {
                title: get("title"),
            },
            "session_close" => Ask::SessionClose {
                id: get("session"),
                reason: need("reason")?,
            },
            "discussion_open" => Ask::DiscussionOpen {
                id: need("discussion")?,
                order: grammar::role_list(Some(&need("order")?))
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
                max_turns: match get("max_turns") {
                    None => None,
                    Some(n) => Some(n.parse().map_err(|_| "max_turns is not a number")?),
                },
            },
            "discussion_close" => Ask::DiscussionClose {
                id: need("discussion")?,
                reason: need("reason")?,
            },
            "audit_count" => Ask::AuditCount {
                task: need("task")?,
            },
            other => return Err(format!("unknown request '{}'", escape(other))),
        })
    }
}

/// handoffd's answer: the record made (a session or discussion id), or why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Done(Option<String>),
    Refused(String),
}

impl Answer {
    fn to_message(&self) -> Message {
        let mut m = Message::default();
        match self {
            Answer::Done(id) => {
                m.push("outcome", "done");
                if let Some(id) = id {
                    m.push("record", id);
                }
            }
            Answer::Refused(why) => {
                m.push("outcome", "refused");
                m.body = format!("{why}\n");
            }
        }
        m
    }

    fn of(m: &Message) -> Option<Answer> {
        match m.get("outcome")? {
            "done" => Some(Answer::Done(m.get("record").map(str::to_string))),
            "refused" => Some(Answer::Refused(m.body.trim_end().to_string())),
            _ => None,
        }
    }
}

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
    let dir = agent_requests_dir(project, role);
    fsx::ensure_dirs(&[&dir]).at(&dir)?;
    let id = new_id();
    let request = dir.join(format!("{id}.request"));
    let answer = dir.join(format!("{id}.answer"));
    fsx::publish(&dir, &request, ask.to_message().render().as_bytes()).at(&request)?;
    let end = Instant::now() + WAIT;
    let mut pause = Duration::from_millis(5);
    loop {
        match fsx::read_bounded(&answer, MAX_REQUEST) {
            Ok(b) => {
                let _ = fsx::remove_file(&answer);
                let a = Message::parse_bytes(&b)
                    .ok()
                    .as_ref()
                    .and_then(Answer::of)
                    .ok_or_else(|| Error::bad_file(&answer, "not an answer"))?;
                return match a {
                    Answer::Done(record) => Ok(record),
                    Answer::Refused(why) => Err(Error::conflict(why)),
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

/// Takes and carries out the waiting requests of every role (at most
/// [`PER_POLL`] each). Returns how many were carried out.
pub fn serve(project: &Project, roles: &Roles) -> usize {
    let mut n = 0;
    for r in roles.roles.iter().filter(|r| !r.is_human()) {
        // Held open once: the agent may swap the folder for a symlink at
        // any time, and nothing after the open goes through the path.
        let Ok(held) = fsx::HeldDir::open(&agent_requests_dir(project, &r.name)) else {
            continue;
        };
        let mut ids = ids_of(held.names().unwrap_or_default());
        ids.truncate(PER_POLL);
        for id in ids {
            match take(project, &held, &r.name, &id) {
                Ok(true) => {
                    n += 1;
                    if let Err(e) = carry_out(project, roles, &r.name, &id) {
                        eprintln!(
                            "handoffd: request {id} of {}: {e} (taken up again at the next start)",
                            r.name
                        );
                    }
                }
                Ok(false) => {}
                Err(e) => eprintln!("handoffd: cannot take request {id} of {}: {e}", r.name),
            }
        }
    }
    n
}

/// Carries out every request a killed daemon took but did not answer
/// (called at the daemon's start, before new ones are taken).
pub fn resume(project: &Project, roles: &Roles) {
    for r in &roles.roles {
        for id in ids_in(&taken_requests_dir(project, &r.name)) {
            if let Err(e) = carry_out(project, roles, &r.name, &id) {
                eprintln!("handoffd: request {id} of {}: {e}", r.name);
            }
        }
    }
}

/// A role's requests not answered yet, for `swarm status`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Waiting {
    pub role: String,
    /// Asked, not taken by handoffd yet.
    pub asked: usize,
    /// Taken, not answered yet (a daemon killed in it takes them up at
    /// its start).
    pub taken: usize,
}

/// Every agent role with requests not answered yet.
pub fn waiting(project: &Project, roles: &Roles) -> Vec<Waiting> {
    roles
        .roles
        .iter()
        .filter(|r| !r.is_human())
        .filter_map(|r| {
            let asked = fsx::HeldDir::open(&agent_requests_dir(project, &r.name))
                .and_then(|d| d.names())
                .map(|n| ids_of(n).len())
                .unwrap_or(0);
            let taken = ids_in(&taken_requests_dir(project, &r.name)).len();
            (asked + taken > 0).then(|| Waiting {
                role: r.name.clone(),
                asked,
                taken,
            })
        })
        .collect()
}

/// The ids among `names` (files `<id>.request`), oldest first (an id
/// starts with its time).
fn ids_of(names: Vec<String>) -> Vec<String> {
    let mut ids: Vec<String> = names
        .into_iter()
        .filter_map(|name| {
            name.strip_suffix(".request")
                .filter(|id| valid_id(id))
                .map(str::to_string)
        })
        .collect();
    ids.sort();
    ids
}

/// The ids of the requests in the daemon's own folder `dir`.
fn ids_in(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    ids_of(
        rd.flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect(),
    )
}

/// Moves the agent's request out of its reach, through the held folder
/// (fsx::HeldDir). False when it is gone or not a regular file (removed).
fn take(project: &Project, held: &fsx::HeldDir, role: &str, id: &str) -> io::Result<bool> {
    let name = format!("{id}.request");
    match held.look(&name)? {
        None => return Ok(false),
        Some(fsx::Entry::File(len)) if len <= MAX_REQUEST => {}
        Some(_) => {
            held.remove(&name)?;
            return Ok(false);
        }
    }
    let dir = taken_requests_dir(project, role);
    fsx::ensure_dirs(&[&dir])?;
    match held.move_out(&name, &dir.join(&name)) {
        Ok(()) => Ok(true),
        // The same id again while the first is being carried out.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            held.remove(&name)?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

fn carry_out(project: &Project, roles: &Roles, role: &str, id: &str) -> io::Result<()> {
    let taken = taken_requests_dir(project, role);
    let request = taken.join(format!("{id}.request"));
    let mark = taken.join(format!("{id}.before"));
    let answer = match fsx::read_bounded(&request, MAX_REQUEST) {
        Ok(b) => match Message::parse_bytes(&b)
            .map_err(|e| e.to_string())
            .and_then(|m| Ask::of(&m))
        {
            Ok(ask) => apply(project, roles, role, id, &ask, &mark),
            Err(why) => Answer::Refused(format!("malformed request: {why}")),
        },
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => Answer::Refused(format!("malformed request: {e}")),
    };
    let dir = agent_requests_dir(project, role);
    fsx::ensure_dirs(&[&dir])?;
    let held = fsx::HeldDir::open(&dir).map_err(|e| {
        io::Error::other(format!(
            "{}: not a folder (a symlink is never followed): {e}",
            dir.display()
        ))
    })?;
    let out = format!("{id}.answer");
    held.remove(&out)?;
    held.publish(&out, answer.to_message().render().as_bytes())?;
    fsx::remove_file(&mark)?;
    fsx::remove_file(&request)
}

/// Carries out `ask` for `role` (the folder's role) exactly once.
fn apply(project: &Project, roles: &Roles, role: &str, id: &str, ask: &Ask, mark: &Path) -> Answer {
    let done = |r: Result<Option<String>>| match r {
        Ok(record) => Answer::Done(record),
        Err(e) => {
            let why = escape(&e.to_string());
            Answer::Refused(why.chars().take(MAX_ERROR).collect())
        }
    };
    let mine = |r: &Option<String>| r.as_deref() == Some(id);
    done(match ask {
        Ask::SessionStart { title } => match session::list(project) {
            Ok(all) => match all.into_iter().find(|s| mine(&s.request)) {
                Some(s) => Ok(Some(s.id)),
                None => session::start_for(project, title.as_deref(), role, Some(id))
                    .map(|s| Some(s.id)),
            },
            Err(e) => Err(e),
        },
        Ask::SessionClose { id: which, reason } => match session::list(project) {
            Ok(all) => match all.into_iter().find(|s| mine(&s.close_request)) {
                Some(s) => Ok(Some(s.id)),
                None => session::close_for(project, which.as_deref(), reason, Some(id))
                    .map(|s| Some(s.id)),
            },
            Err(e) => Err(e),
        },
        Ask::DiscussionOpen {
            id: which,
            order,
            max_turns,
        } => match discussion::load(project, which) {
            Ok(d) if mine(&d.request) => Ok(Some(d.id)),
            _ => discussion::open_for(project, roles, which, order, *max_turns, role, Some(id))
                .map(|d| Some(d.id)),
        },
        Ask::DiscussionClose { id: which, reason } => match discussion::load(project, which) {
            Ok(d) if mine(&d.close_request) => Ok(Some(d.id)),
            _ => discussion::close_for(project, which, reason, Some(id)).map(|d| Some(d.id)),
        },
        Ask::AuditCount { task } => {
            crate::board::count_audit_once(project, task, Some(mark)).map(|()| None)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles() -> Roles {
        Roles::parse("a\tm\t/p\ts\tA\tx\ttask\nb\tm\t/p\ts\tB\tx\ttask\n")
    }

    /// A request carried out, then again as after a daemon kill before the
    /// taken file was removed: one session, one answer naming it; the
    /// sender is the folder's role.
    #[test]
    fn a_request_is_carried_out_once_and_answered() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let roles = roles();
        let dir = agent_requests_dir(&p, "a");
        fsx::ensure_dirs(&[&dir]).unwrap();
        let ask = Ask::SessionStart {
            title: Some("t".into()),
        };
        let id = "00000000000000aa";
        let mut m = ask.to_message();
        m.push("started_by", "b");
        std::fs::write(dir.join(format!("{id}.request")), m.render()).unwrap();
        assert_eq!(serve(&p, &roles), 1);
        let s = session::current(&p).unwrap().unwrap();
        assert_eq!(s.started_by, "a");
        // Killed before the taken request was removed: carried out again.
        let taken = taken_requests_dir(&p, "a").join(format!("{id}.request"));
        std::fs::write(&taken, ask.to_message().render()).unwrap();
        resume(&p, &roles);
        assert_eq!(session::list(&p).unwrap().len(), 1);
        let a = std::fs::read_to_string(dir.join(format!("{id}.answer"))).unwrap();
        assert!(a.contains(&format!("record: {}", s.id)), "{a}");
        assert!(!taken.exists());
        // A malformed one is answered, not carried out.
        std::fs::write(dir.join("00000000000000bb.request"), "op: rm -rf\n\n").unwrap();
        serve(&p, &roles);
        let a = std::fs::read_to_string(dir.join("00000000000000bb.answer")).unwrap();
        assert!(a.contains("unknown request"), "{a}");
    }

    /// The agent swaps its requests folder for a symlink to a folder
    /// outside between the daemon's open and its move: the held folder's
    /// request is taken and answered there; the outside folder's files are
    /// neither moved, nor removed, nor written.
    #[test]
    fn a_requests_folder_swapped_for_a_symlink_after_the_open_moves_nothing_outside() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path().join("p"));
        let roles = roles();
        let dir = agent_requests_dir(&p, "a");
        fsx::ensure_dirs(&[&dir]).unwrap();
        let id = "00000000000000aa";
        let name = format!("{id}.request");
        let ask = Ask::SessionStart { title: None }.to_message().render();
        std::fs::write(dir.join(&name), &ask).unwrap();
        let outside = d.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let secret = "op: session_start\n\nthe person's file\n";
        std::fs::write(outside.join(&name), secret).unwrap();
        std::fs::write(outside.join("big.request"), "x").unwrap();

        let held = fsx::HeldDir::open(&dir).unwrap();
        let aside = d.path().join("aside");
        std::fs::rename(&dir, &aside).unwrap();
        std::os::unix::fs::symlink(&outside, &dir).unwrap();

        assert!(take(&p, &held, "a", id).unwrap());
        let taken = taken_requests_dir(&p, "a").join(&name);
        assert_eq!(std::fs::read_to_string(&taken).unwrap(), ask);
        assert_eq!(
            std::fs::read_to_string(outside.join(&name)).unwrap(),
            secret
        );
        // The answer is refused through the symlink (it is published only
        // into a folder opened without following one).
        assert!(carry_out(&p, &roles, "a", id).is_err());
        let mut left: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["00000000000000aa.request", "big.request"]);
        // And a daemon's poll skips the symlinked folder.
        assert_eq!(serve(&p, &roles), 0);
        assert_eq!(
            std::fs::read_to_string(outside.join(&name)).unwrap(),
            secret
        );
    }

    #[test]
    fn asks_round_trip() {
        for ask in [
            Ask::SessionStart { title: None },
            Ask::SessionClose {
                id: Some("s1".into()),
                reason: "r".into(),
            },
            Ask::DiscussionOpen {
                id: "d".into(),
                order: vec!["a".into(), "b".into()],
                max_turns: Some(3),
            },
            Ask::DiscussionClose {
                id: "d".into(),
                reason: "r".into(),
            },
            Ask::AuditCount { task: "c".into() },
        ] {
            assert_eq!(Ask::of(&ask.to_message()), Ok(ask));
        }
    }
}
