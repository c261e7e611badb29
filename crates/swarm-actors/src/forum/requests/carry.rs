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

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result, Token};
use crate::forum::{discussion, session};
use crate::fsx;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::launch_files::{agent_requests_dir, taken_requests_dir};
use crate::protocol::layout::Project;
use crate::protocol::ledger::{Ledger, Spec};
use crate::protocol::roles::Roles;
use crate::reservations::{self, Reservation};
use crate::text::escape;

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
    /// `swarm reserve`, in the folder's role's name.
    Reserve {
        /// Normalised, one per line of the body.
        globs: Vec<String>,
        ttl_ms: u64,
        reason: String,
        force: bool,
    },
    /// `swarm release` of the folder's role's reservations (all of them
    /// when `globs` is empty).
    Release {
        globs: Vec<String>,
    },
}

/// The globs of a reservation request, one per line of its body.
fn globs_body(globs: &[String]) -> String {
    globs.iter().map(|g| format!("{g}\n")).collect()
}

/// The globs a request's body names, each one `reserve` could have stored.
fn globs_of(body: &str) -> std::result::Result<Vec<String>, String> {
    let Some(lines) = body.strip_suffix('\n') else {
        return if body.is_empty() {
            Ok(Vec::new())
        } else {
            Err("the globs do not end with a new line".into())
        };
    };
    let globs: Vec<String> = lines.split('\n').map(str::to_string).collect();
    if globs.len() > reservations::MAX_GLOBS {
        return Err(format!("more than {} globs", reservations::MAX_GLOBS));
    }
    for g in &globs {
        reservations::normalised(g)?;
    }
    Ok(globs)
}

/// Refuses a field `m` has that its operation does not take (a role
/// above all: the role is the folder's).
fn only(m: &Message, fields: &[&str]) -> std::result::Result<(), String> {
    match m.headers.iter().find(|(k, _)| !fields.contains(&k.as_str())) {
        Some((k, _)) => Err(format!(
            "'{}' is not a field of this request (a request acts in the name of the folder it is in)",
            escape(k)
        )),
        None => Ok(()),
    }
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
            Ask::Reserve {
                globs,
                ttl_ms,
                reason,
                force,
            } => {
                put("op", Some("reserve"));
                put("ttl_ms", Some(&ttl_ms.to_string()));
                put("reason", Some(reason));
                put("force", Some(if *force { "true" } else { "false" }));
                m.body = globs_body(globs);
            }
            Ask::Release { globs } => {
                put("op", Some("release"));
                m.body = globs_body(globs);
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
            "reserve" => {
                only(m, &["op", "ttl_ms", "reason", "force"])?;
                let globs = globs_of(&m.body)?;
                if globs.is_empty() {
                    return Err("a reservation names no glob".into());
                }
                let ttl_ms: u64 = need("ttl_ms")?
                    .parse()
                    .map_err(|_| "ttl_ms is not a number of milliseconds")?;
                if ttl_ms == 0 || u128::from(ttl_ms) > reservations::MAX_TTL.as_millis() {
                    return Err("ttl_ms must be more than 0 and at most 30d".into());
                }
                Ask::Reserve {
                    globs,
                    ttl_ms,
                    reason: need("reason")?,
                    force: match need("force")?.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => return Err("force is neither true nor false".into()),
                    },
                }
            }
            "release" => {
                only(m, &["op"])?;
                Ask::Release {
                    globs: globs_of(&m.body)?,
                }
            }
            other => return Err(format!("unknown request '{}'", escape(other))),
        })
    }
}

/// handoffd's answer: the record made (a session or discussion id) and
/// what the command prints from (a reservation request's JSON), or why not
/// (with the refusal's token when the direct command's has one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Done {
        record: Option<String>,
        data: String,
    },
    Refused {
        why: String,
        token: Option<Token>,
    },
}

/// The refusal tokens an answer carries back (those of the reservation
/// requests): the confined command exits with the token's code.
const ANSWERED_TOKENS: [Token; 2] = [Token::Reserved, Token::NotReserved];

impl Answer {
    fn done(record: Option<String>) -> Answer {
        Answer::Done {
            record,
            data: String::new(),
        }
    }

    fn to_message(&self) -> Message {
        let mut m = Message::default();
        match self {
            Answer::Done { record, data } => {
                m.push("outcome", "done");
                if let Some(id) = record {
                    m.push("record", id);
                }
                if !data.is_empty() {
                    m.body = format!("{data}\n");
                }
            }
            Answer::Refused { why, token } => {
                m.push("outcome", "refused");
                if let Some(t) = token {
                    m.push("token", t.name());
                }
                m.body = format!("{why}\n");
            }
        }
        m
    }

    fn of(m: &Message) -> Option<Answer> {
        match m.get("outcome")? {
            "done" => Some(Answer::Done {
                record: m.get("record").map(str::to_string),
                data: m.body.trim_end().to_string(),
            }),
            "refused" => Some(Answer::Refused {
                why: m.body.trim_end().to_string(),
                token: match m.get("token") {
                    None => None,
                    Some(name) => Some(ANSWERED_TOKENS.into_iter().find(|t| t.name() == name)?),
                },
            }),
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
        let mut ids = taken(project, &r.name).ids_among(held.names().unwrap_or_default());
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
        let taken = taken(project, &r.name);
        for id in taken.pending() {
            if let Err(e) = carry_out(project, roles, &r.name, &id) {
                eprintln!("handoffd: request {id} of {}: {e}", r.name);
            }
        }
        // Marks whose request was answered and removed, the daemon killed
        // before it removed them (the mark goes last).
        let _ = taken.sweep();
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
            let ledger = taken(project, &r.name);
            let asked = fsx::HeldDir::open(&agent_requests_dir(project, &r.name))
                .and_then(|d| d.names())
                .map(|n| ledger.ids_among(n).len())
                .unwrap_or(0);
            let taken = ledger.pending().len();
            (asked + taken > 0).then(|| Waiting {
                role: r.name.clone(),
                asked,
                taken,
            })
        })
        .collect()
}

/// The files of one request taken out of the agent's reach, as named
/// since confined requests began: the request, then the mark of what its
/// carrying out did (the request goes first, so a request taken up again
/// always finds the mark its first carrying out left:
/// reservations::release_once, board::count_audit_once).
static TAKEN: Spec = Spec {
    request: ".request",
    started: None,
    answer: None,
    companions: &[".before"],
    done: None,
    lock: None,
    valid_id,
};

/// The requests of `role` handoffd took and has not answered yet.
fn taken(project: &Project, role: &str) -> Ledger {
    Ledger::new(taken_requests_dir(project, role), &TAKEN)
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
    if taken(project, role).admit(held, &name, id)? {
        return Ok(true);
    }
    // The same id again while the first is being carried out.
    held.remove(&name)?;
    Ok(false)
}

fn carry_out(project: &Project, roles: &Roles, role: &str, id: &str) -> io::Result<()> {
    let taken = taken(project, role);
    let mark = taken.dir().join(format!("{id}.before"));
    let answer = match taken.read_request(id, MAX_REQUEST) {
        Ok(Some(b)) => match Message::parse_bytes(&b)
            .map_err(|e| e.to_string())
            .and_then(|m| Ask::of(&m))
        {
            Ok(ask) => apply(project, roles, role, id, &ask, &mark),
            Err(why) => Answer::Refused {
                why: format!("malformed request: {why}"),
                token: None,
            },
        },
        Ok(None) => return Ok(()),
        Err(e) => Answer::Refused {
            why: format!("malformed request: {e}"),
            token: None,
        },
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
    taken.retire(id)
}

/// Carries out `ask` for `role` (the folder's role) exactly once.
fn apply(project: &Project, roles: &Roles, role: &str, id: &str, ask: &Ask, mark: &Path) -> Answer {
    let done = |r: Result<Option<String>>| match r {
        Ok(record) => Answer::done(record),
        Err(e) => {
            let why = escape(&e.to_string());
            Answer::Refused {
                why: why.chars().take(MAX_ERROR).collect(),
                token: None,
            }
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
        Ask::Reserve { .. } | Ask::Release { .. } => {
            return apply_reservation(project, roles, role, id, ask, mark)
        }
    })
}

/// Carries out a reservation request for `role` (the folder's role) once:
/// answered with what the command prints from, or its refusal as the
/// command prints it.
fn apply_reservation(
    project: &Project,
    roles: &Roles,
    role: &str,
    id: &str,
    ask: &Ask,
    mark: &Path,
) -> Answer {
    let data = match ask {
        Ask::Reserve {
            globs,
            ttl_ms,
            reason,
            force,
        } => {
            // The role's own checkout tells which files two globs share.
            let worktree = roles
                .find(role)
                .map(|r| r.worktree_in(&project.root))
                .unwrap_or_else(|| project.root.clone());
            let req = reservations::Request {
                role,
                globs: globs.clone(),
                ttl: Duration::from_millis(*ttl_ms),
                reason,
                worktree: &worktree,
                force: *force,
            };
            reservations::reserve_once(project, &req, id).map(|(r, mut overlaps)| {
                // Bounded: overlaps beyond what an answer holds are left out.
                let mut v = serde_json::json!({"reservation": r, "overlaps": []});
                while !overlaps.is_empty() {
                    v["overlaps"] = serde_json::json!(overlaps);
                    if (v.to_string().len() as u64) < MAX_ANSWER - 1024 {
                        break;
                    }
                    overlaps.pop();
                    v["overlaps"] = serde_json::json!([]);
                }
                v.to_string()
            })
        }
        Ask::Release { globs } => reservations::release_once(project, role, globs, mark)
            .map(|gone| serde_json::json!({ "released": gone }).to_string()),
        _ => Err(Error::internal("not a reservation request")),
    };
    match data {
        Ok(data) => Answer::Done { record: None, data },
        Err(e) => {
            let (why, token) = match &e {
                Error::Refused { token, detail, .. } if ANSWERED_TOKENS.contains(token) => {
                    (detail.clone(), Some(*token))
                }
                _ => (e.to_string(), None),
            };
            Answer::Refused {
                why: lines_safe(&why).chars().take(MAX_REFUSAL).collect(),
                token,
            }
        }
    }
}

/// `s` with every control character but new lines and tabs escaped, and
/// the bidi controls (the refusal of a reservation is several lines,
/// already escaped where it shows what an agent wrote).
fn lines_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if (crate::text::is_control(c) && c != '\n' && c != '\t')
                || crate::text::is_bidi_or_separator(c)
            {
                escape(&c.to_string())
            } else {
                c.to_string()
            }
        })
        .collect()
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
            Ask::Reserve {
                globs: vec!["src/**".into(), "a b.txt".into()],
                ttl_ms: 90_000,
                reason: " why: not ".into(),
                force: true,
            },
            Ask::Release { globs: vec![] },
            Ask::Release {
                globs: vec!["src/**".into()],
            },
        ] {
            assert_eq!(Ask::of(&ask.to_message()), Ok(ask));
        }
    }

    fn plant(p: &Project, role: &str, id: &str, text: &str) {
        let dir = agent_requests_dir(p, role);
        fsx::ensure_dirs(&[&dir]).unwrap();
        std::fs::write(dir.join(format!("{id}.request")), text).unwrap();
    }

    fn answer(p: &Project, role: &str, id: &str) -> String {
        let f = agent_requests_dir(p, role).join(format!("{id}.answer"));
        let a = std::fs::read_to_string(&f).unwrap();
        std::fs::remove_file(&f).unwrap();
        a
    }

    fn held(p: &Project) -> Vec<(String, Vec<String>)> {
        reservations::active(p)
            .unwrap()
            .into_iter()
            .map(|r| (r.role, r.globs))
            .collect()
    }

    /// A reservation request is taken in the folder's role's name, and a
    /// request naming another role is refused (the role is the folder's);
    /// carried out again after a kill, it is answered from the reservation
    /// it made, which stays the only one.
    #[test]
    fn a_reservation_request_is_the_folders_roles_and_carried_out_once() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let roles = roles();
        let id = "00000000000000a1";
        let ask = Ask::Reserve {
            globs: vec!["src/**".into()],
            ttl_ms: 3_600_000,
            reason: "r".into(),
            force: false,
        };
        plant(&p, "a", id, &ask.to_message().render());
        assert_eq!(serve(&p, &roles), 1);
        let a = answer(&p, "a", id);
        assert!(a.starts_with("outcome: done\n"), "{a}");
        assert_eq!(held(&p), [("a".to_string(), vec!["src/**".to_string()])]);
        // Taken up again (killed before the taken request was removed).
        let taken = taken_requests_dir(&p, "a").join(format!("{id}.request"));
        std::fs::write(&taken, ask.to_message().render()).unwrap();
        resume(&p, &roles);
        assert!(answer(&p, "a", id).contains("\"role\":\"a\""));
        assert_eq!(held(&p).len(), 1);
        // The same glob asked for by b overlaps a's: RESERVED.
        plant(&p, "b", id, &ask.to_message().render());
        serve(&p, &roles);
        let a = answer(&p, "b", id);
        assert!(
            a.contains("token: RESERVED") && a.contains("src/** overlaps src/**: a holds src/**"),
            "{a}"
        );
        // Forged: a role named in the request, in b's folder.
        for (n, forged) in [
            "op: reserve\nforce: true\nreason: x\nrole: a\nttl_ms: 1000\n\nlib/**\n",
            "op: release\nrole: a\n\nsrc/**\n",
            "op: release\nas: a\n\n",
        ]
        .into_iter()
        .enumerate()
        {
            let id = format!("00000000000000b{n}");
            plant(&p, "b", &id, forged);
            serve(&p, &roles);
            let a = answer(&p, "b", &id);
            assert!(a.contains("is not a field of this request"), "{a}");
        }
        // b releasing src/** holds none of it.
        plant(&p, "b", "00000000000000c1", "op: release\n\nsrc/**\n");
        serve(&p, &roles);
        let a = answer(&p, "b", "00000000000000c1");
        assert!(
            a.contains("token: NOT_RESERVED") && a.contains("b holds no reservation of src/**"),
            "{a}"
        );
        assert_eq!(held(&p), [("a".to_string(), vec!["src/**".to_string()])]);
    }

    /// Globs, the time to live and the flags are checked as `reserve`
    /// checks them; anything else is answered refused, nothing written.
    #[test]
    fn a_malformed_reservation_request_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let roles = roles();
        let many: String = (0..65).map(|i| format!("f{i}\n")).collect();
        for (n, (text, why)) in [
            (
                "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\n../x\n",
                "escapes the project",
            ),
            (
                "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\n.git/config\n",
                ".git is not a file",
            ),
            (
                "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\n/etc/x\n",
                "not a normalised",
            ),
            (
                "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\nsrc/./x\n",
                "not a normalised",
            ),
            (
                "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\na\tb\n",
                "control characters",
            ),
            (
                "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\n\n",
                "empty",
            ),
            (
                "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\n",
                "names no glob",
            ),
            (
                "op: reserve\nforce: false\nreason: x\nttl_ms: 0\n\nx\n",
                "ttl_ms must be",
            ),
            (
                "op: reserve\nforce: false\nreason: x\nttl_ms: 99999999999999\n\nx\n",
                "ttl_ms must be",
            ),
            (
                "op: reserve\nforce: yes\nreason: x\nttl_ms: 1000\n\nx\n",
                "force is neither",
            ),
            (
                "op: reserve\nforce: false\nttl_ms: 1000\n\nx\n",
                "without 'reason'",
            ),
            ("op: release\n\nx", "do not end with a new line"),
            (&format!("op: release\n\n{many}"), "more than 64 globs"),
        ]
        .into_iter()
        .enumerate()
        {
            let id = format!("00000000000000d{n:x}");
            plant(&p, "a", &id, text);
            serve(&p, &roles);
            let a = answer(&p, "a", &id);
            assert!(
                a.contains("outcome: refused") && a.contains(why),
                "{text:?}: {a}"
            );
        }
        // A reason the command line refuses: the same refusal.
        plant(
            &p,
            "a",
            "00000000000000e1",
            &format!(
                "op: reserve\nforce: false\nreason: {}\nttl_ms: 1000\n\nx\n",
                "x".repeat(201)
            ),
        );
        serve(&p, &roles);
        assert!(answer(&p, "a", "00000000000000e1").contains("--reason must be one line"));
        assert!(held(&p).is_empty());
    }

    /// A release carried out, then again as after a daemon kill before the
    /// taken request was removed: the mark says what it released, which is
    /// the answer again, and nothing more is released (a reservation made
    /// in between stays).
    #[test]
    fn a_release_request_is_carried_out_once() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let roles = roles();
        let take = |globs: &[&str]| {
            reservations::reserve(
                &p,
                &reservations::Request {
                    role: "a",
                    globs: globs.iter().map(|g| g.to_string()).collect(),
                    ttl: Duration::from_secs(600),
                    reason: "",
                    worktree: d.path(),
                    force: false,
                },
            )
            .unwrap()
        };
        take(&["src/**", "docs/**"]);
        let id = "00000000000000f1";
        let ask = Ask::Release { globs: vec![] }.to_message().render();
        plant(&p, "a", id, &ask);
        // Killed after the release, before the request was removed: the
        // request and its mark are left in the daemon's folder.
        let dir = agent_requests_dir(&p, "a");
        let held_dir = fsx::HeldDir::open(&dir).unwrap();
        assert!(take_for_test(&p, &held_dir, id));
        let taken = taken_requests_dir(&p, "a");
        let mark = taken.join(format!("{id}.before"));
        let gone = reservations::release_once(&p, "a", &[], &mark).unwrap();
        assert_eq!(gone, ["src/**", "docs/**"]);
        assert!(held(&p).is_empty());
        take(&["lib/**"]);
        resume(&p, &roles);
        let a = answer(&p, "a", id);
        assert!(a.contains(r#"{"released":["src/**","docs/**"]}"#), "{a}");
        assert_eq!(held(&p), [("a".to_string(), vec!["lib/**".to_string()])]);
        assert!(!mark.exists() && !taken.join(format!("{id}.request")).exists());
    }

    fn take_for_test(p: &Project, held: &fsx::HeldDir, id: &str) -> bool {
        take(p, held, "a", id).unwrap()
    }
}
