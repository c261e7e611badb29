//! Round-robin discussions (docs/forum.md, "Round-robin discussions").
//!
//! A discussion is a record (`<id>.discussion`: order, cap, open/closed) and
//! an append-only turn log (`<id>.turns`) that the daemon writes as it
//! delivers turns and records skips. The expected speaker is the log replayed
//! against the order, so a restart rebuilds it exactly; the daemon also
//! reconciles the log with the delivered originals at start-up.

use crate::protocol::header::names;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, IoContext, Result, Token};
use crate::forum::record;
use crate::forum::session::check_text;
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::text::escape;

/// Largest turn log read (a log of ~100 000 turns).
pub const MAX_LOG_BYTES: u64 = 16 * 1024 * 1024;

/// Why a role may not speak now: a stable token and one line of text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub token: Token,
    pub detail: String,
}

/// Discussion ids: like role names, plus `.` and `_`.
pub fn valid_id(id: &str) -> bool {
    crate::protocol::grammar::valid_discussion_id(id)
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Discussion {
    pub id: String,
    pub order: Vec<String>,
    pub max_turns: Option<u32>,
    pub opened_at: String,
    pub opened_by: String,
    pub closed_at: Option<String>,
    pub close_reason: Option<String>,
    #[serde(skip)]
    pub path: PathBuf,
    /// The confined agent's request that opened it (forum/requests.rs).
    #[serde(skip)]
    pub request: Option<String>,
    /// The request that closed it.
    #[serde(skip)]
    pub close_request: Option<String>,
}

/// One line of the turn log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub time: String,
    /// `turn` or `skip`.
    pub kind: String,
    pub role: String,
    /// The message id of a turn; empty for a skip.
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Status {
    pub id: String,
    pub order: Vec<String>,
    pub turns: usize,
    pub skips: usize,
    pub max_turns: Option<u32>,
    pub expected: Option<String>,
    pub open: bool,
    pub close_reason: Option<String>,
    pub opened_at: String,
    pub last_activity: String,
}

fn record_path(project: &Project, id: &str) -> PathBuf {
    project.discussions_dir().join(format!("{id}.discussion"))
}

fn turns_path(project: &Project, id: &str) -> PathBuf {
    project.discussions_dir().join(format!("{id}.turns"))
}

impl Discussion {
    fn from_message(m: &Message, path: &Path) -> Option<Discussion> {
        let opt = |n: &str| record::field(m, n);
        Some(Discussion {
            id: record::field(m, names::ID)?,
            order: opt("order")?.split(',').map(str::to_string).collect(),
            max_turns: opt("max_turns").and_then(|v| v.parse().ok()),
            opened_at: opt("opened_at")?,
            opened_by: opt("opened_by").unwrap_or_default(),
            closed_at: opt("closed_at"),
            close_reason: opt("close_reason"),
            path: path.to_path_buf(),
            request: opt("request"),
            close_request: opt("close_request"),
        })
    }

    fn to_message(&self) -> Message {
        let mut m = Message::default();
        m.push(names::ID, &self.id);
        m.push_named("order", self.order.join(","));
        record::push_some(&mut m, "max_turns", self.max_turns.map(|n| n.to_string()));
        m.push_named("opened_at", &self.opened_at);
        m.push_named("opened_by", &self.opened_by);
        record::push_some(&mut m, "closed_at", self.closed_at.as_deref());
        record::push_some(&mut m, "close_reason", self.close_reason.as_deref());
        record::push_some(&mut m, "request", self.request.as_deref());
        record::push_some(&mut m, "close_request", self.close_request.as_deref());
        m
    }

    pub fn is_open(&self) -> bool {
        self.closed_at.is_none()
    }

    /// Who speaks next after these log entries (turns and skips both advance).
    pub fn expected<'a>(&'a self, log: &[Entry]) -> &'a str {
        &self.order[log.len() % self.order.len()]
    }

    pub fn status(&self, log: &[Entry]) -> Status {
        let turns = log.iter().filter(|e| e.kind == "turn").count();
        Status {
            id: self.id.clone(),
            order: self.order.clone(),
            turns,
            skips: log.len() - turns,
            max_turns: self.max_turns,
            expected: self.is_open().then(|| self.expected(log).to_string()),
            open: self.is_open(),
            close_reason: self.close_reason.clone(),
            opened_at: self.opened_at.clone(),
            last_activity: log
                .last()
                .map(|e| e.time.clone())
                .unwrap_or_else(|| self.opened_at.clone()),
        }
    }
}

fn lock(project: &Project) -> Result<fsx::Lock> {
    let dir = project.discussions_dir();
    fsx::ensure_dirs(&[&dir]).at(&dir)?;
    let p = project.forum_lock();
    fsx::lock(&p).at(&p)
}

pub fn load(project: &Project, id: &str) -> Result<Discussion> {
    if !valid_id(id) {
        return Err(Error::bad_input(format!(
            "Invalid discussion id '{}'.",
            escape(id)
        )));
    }
    let p = record_path(project, id);
    let m =
        record::read(&p)?.ok_or_else(|| Error::not_found(format!("Unknown discussion '{id}'.")))?;
    Discussion::from_message(&m, &p)
        .filter(|d| !d.order.is_empty())
        .ok_or_else(|| Error::bad_file(&p, "not a discussion record"))
}

/// Every discussion, by id.
pub fn list(project: &Project) -> Result<Vec<Discussion>> {
    let mut v: Vec<Discussion> = record::list(&project.discussions_dir(), "discussion")?
        .iter()
        .filter_map(|(p, m)| Discussion::from_message(m, p).filter(|d| !d.order.is_empty()))
        .collect();
    v.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(v)
}

/// The turn log, oldest first; unparsable lines are skipped.
pub fn log(project: &Project, id: &str) -> Result<Vec<Entry>> {
    let p = turns_path(project, id);
    let text = match fsx::read_bounded(&p, MAX_LOG_BYTES)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| match e {
            fsx::ReadRefusal::Io(e) => e,
            other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
        }) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&p, e)),
    };
    Ok(text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() == 4 && (f[1] == "turn" || f[1] == "skip")).then(|| Entry {
                time: f[0].to_string(),
                kind: f[1].to_string(),
                role: f[2].to_string(),
                id: f[3].to_string(),
            })
        })
        .collect())
}

fn append(project: &Project, id: &str, kind: &str, role: &str, msg_id: &str) -> Result<()> {
    let p = turns_path(project, id);
    let line = format!("{}\t{kind}\t{role}\t{msg_id}\n", clock::iso_now());
    fsx::append(&p, line.as_bytes()).at(&p)
}

/// Opens a discussion; the opener is the first in the order.
pub fn open(
    project: &Project,
    roles: &Roles,
    id: &str,
    order: &[String],
    max_turns: Option<u32>,
    by: &str,
) -> Result<Discussion> {
    open_for(project, roles, id, order, max_turns, by, None)
}

/// [`open`], recording the confined agent's request it carries out.
pub fn open_for(
    project: &Project,
    roles: &Roles,
    id: &str,
    order: &[String],
    max_turns: Option<u32>,
    by: &str,
    request: Option<&str>,
) -> Result<Discussion> {
    if !valid_id(id) {
        return Err(Error::bad_input(format!(
            "Invalid discussion id '{}': use letters, digits, '-', '_' and '.' (at most 64).",
            escape(id)
        )));
    }
    if order.is_empty() {
        return Err(Error::bad_input("--order must name at least one role."));
    }
    for (i, r) in order.iter().enumerate() {
        if !grammar::valid_role(r) || roles.find(r).is_none() {
            return Err(Error::not_found(format!(
                "Unknown role '{}' in --order.",
                escape(r)
            )));
        }
        if order[..i].contains(r) {
            return Err(Error::bad_input(format!(
                "Role '{r}' appears twice in --order."
            )));
        }
    }
    if max_turns == Some(0) {
        return Err(Error::bad_input("--max-turns must be at least 1."));
    }
    let _lock = lock(project)?;
    let path = record_path(project, id);
    if path.exists() {
        return Err(Error::conflict(format!(
            "Discussion '{id}' already exists."
        )));
    }
    let d = Discussion {
        id: id.to_string(),
        order: order.to_vec(),
        max_turns,
        opened_at: clock::iso_now(),
        opened_by: by.to_string(),
        closed_at: None,
        close_reason: None,
        path: path.clone(),
        request: request.map(str::to_string),
        close_request: None,
    };
    let dir = project.discussions_dir();
    fsx::publish(&dir, &path, d.to_message().render().as_bytes()).at(&path)?;
    Ok(d)
}

/// Closes a discussion with a recorded reason (`explicit_close`, `cap_reached`, …).
pub fn close(project: &Project, id: &str, reason: &str) -> Result<Discussion> {
    close_for(project, id, reason, None)
}

/// [`close`], recording the confined agent's request it carries out.
pub fn close_for(
    project: &Project,
    id: &str,
    reason: &str,
    request: Option<&str>,
) -> Result<Discussion> {
    check_text("Close reason", reason)?;
    let _lock = lock(project)?;
    let mut d = load(project, id)?;
    if !d.is_open() {
        return Err(Error::conflict(format!(
            "Discussion '{id}' is already closed ({}).",
            d.close_reason.as_deref().unwrap_or("no reason")
        )));
    }
    d.closed_at = Some(clock::iso_now());
    d.close_reason = Some(reason.to_string());
    d.close_request = request.map(str::to_string);
    record::write(&d.path, &d.to_message())?;
    Ok(d)
}

/// Why `role` may not speak now in `id` (None: it may). The expected
/// speaker is named in the text: `discussion 'd' expects a to speak, got b.`
pub fn refusal(project: &Project, id: &str, role: &str) -> Result<Option<Refusal>> {
    if !valid_id(id) || !record_path(project, id).exists() {
        return Ok(Some(Refusal {
            token: Token::UnknownDiscussion,
            detail: format!(
                "discussion '{}' does not exist.\n  hint: swarm discussion open <id> --order <role>,<role>",
                escape(id)
            ),
        }));
    }
    let d = load(project, id)?;
    if !d.is_open() {
        return Ok(Some(Refusal {
            token: Token::DiscussionClosed,
            detail: format!(
                "discussion '{id}' is closed ({}).",
                escape(d.close_reason.as_deref().unwrap_or("no reason"))
            ),
        }));
    }
    let log = log(project, id)?;
    let expected = d.expected(&log);
    Ok((expected != role).then(|| Refusal {
        token: Token::NotYourTurn,
        detail: format!("discussion '{id}' expects {expected} to speak, got {role}."),
    }))
}

/// Why the daemon does not deliver a discussion turn now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Refused for good (to `failed/`): `unknown discussion <id>`,
    /// `discussion_closed`, `out_of_turn`.
    Refused(String),
    /// The records could not be read or written: retry later.
    Transient(String),
}

/// The daemon's check of a turn at delivery, and its record: under the forum
/// lock, a turn from the expected speaker of an open discussion is appended
/// to the turn log *before* its copies are published, so whoever the copies
/// wake already sees the next speaker (`swarm can-send`). A turn already in
/// the log (a delivery interrupted by a crash, or deferred) is admitted
/// again. The turn that reaches `max_turns` closes the discussion
/// (`cap_reached`); a `close` turn closes it with `agent_close:<reason>`.
pub fn admit(project: &Project, id: &str, msg: &Message) -> std::result::Result<(), Admit> {
    let transient = |e: Error| Admit::Transient(format!("discussion {id}: {e}"));
    if !valid_id(id) || !record_path(project, id).exists() {
        return Err(Admit::Refused(format!("unknown discussion {}", escape(id))));
    }
    let _lock = lock(project).map_err(transient)?;
    let mut d = load(project, id).map_err(transient)?;
    let log = log(project, id).map_err(transient)?;
    let from = msg.sender().unwrap_or_default();
    let msg_id = msg.id().unwrap_or_default();
    if log.iter().any(|e| e.kind == "turn" && e.id == msg_id) {
        return Ok(());
    }
    if !d.is_open() {
        return Err(Admit::Refused("discussion_closed".into()));
    }
    if d.expected(&log) != from {
        return Err(Admit::Refused("out_of_turn".into()));
    }
    append(project, id, "turn", from, msg_id).map_err(transient)?;
    let turns = log.iter().filter(|e| e.kind == "turn").count() + 1;
    let reason = if d.max_turns.is_some_and(|cap| turns >= cap as usize) {
        Some("cap_reached".to_string())
    } else if msg.kind() == Some(crate::protocol::grammar::MessageType::Close) {
        let why: String = msg
            .get(names::REASON)
            .unwrap_or("")
            .chars()
            .take(MAX_REASON)
            .collect();
        Some(format!("agent_close:{why}"))
    } else {
        None
    };
    if let Some(r) = reason {
        d.closed_at = Some(clock::iso_now());
        d.close_reason = Some(r);
        record::write(&d.path, &d.to_message()).map_err(transient)?;
    }
    Ok(())
}

/// Longest `close` reason kept in an `agent_close:<reason>` record.
const MAX_REASON: usize = 200;

/// Appends a turn that reached `sent/` without being logged (a log from
/// before turns were recorded at admission, or written by hand); closes the
/// discussion with `cap_reached` when the cap is hit.
pub fn record_turn(project: &Project, id: &str, role: &str, msg_id: &str) -> Result<()> {
    let _lock = lock(project)?;
    append(project, id, "turn", role, msg_id)?;
    let d = load(project, id)?;
    if let Some(cap) = d.max_turns {
        let turns = log(project, id)?
            .iter()
            .filter(|e| e.kind == "turn")
            .count();
        if d.is_open() && turns >= cap as usize {
            drop(_lock);
            close(project, id, "cap_reached")?;
        }
    }
    Ok(())
}

/// Records a skip of `role`, the expected speaker after `turn` log entries
/// (`skip_after` expired). Returns false, recording nothing, when the log
/// moved on meanwhile (a turn was admitted) or the discussion was closed.
pub fn record_skip(project: &Project, id: &str, role: &str, turn: usize) -> Result<bool> {
    let _lock = lock(project)?;
    let d = load(project, id)?;
    let log = log(project, id)?;
    if !d.is_open() || log.len() != turn || d.expected(&log) != role {
        return Ok(false);
    }
    append(project, id, "skip", role, "-")?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles() -> Roles {
        Roles::parse("a\tm\t/p\ts\tA\tx\ttask\nb\tm\t/p\ts\tB\tx\ttask\nc\tm\t/p\ts\tC\tx\ttask\n")
    }

    #[test]
    fn turns_rotate_and_cap_closes() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let order: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        open(&p, &roles(), "design", &order, Some(4), "a").unwrap();
        assert!(open(&p, &roles(), "design", &order, None, "a").is_err());
        assert_eq!(refusal(&p, "design", "a").unwrap(), None);
        let r = refusal(&p, "design", "b").unwrap().unwrap();
        assert_eq!(r.token, Token::NotYourTurn);
        assert_eq!(r.detail, "discussion 'design' expects a to speak, got b.");
        assert_eq!(
            refusal(&p, "nope", "b").unwrap().unwrap().token,
            Token::UnknownDiscussion
        );
        let turn = |from: &str, id: &str| {
            Message::parse(&format!("id: {id}\nfrom: {from}\ntype: post\n\nx\n")).unwrap()
        };
        admit(&p, "design", &turn("a", "1")).unwrap();
        // Admitted again (a redelivery), not twice in the log.
        admit(&p, "design", &turn("a", "1")).unwrap();
        assert_eq!(
            admit(&p, "design", &turn("c", "9")),
            Err(Admit::Refused("out_of_turn".into()))
        );
        assert!(
            !record_skip(&p, "design", "b", 0).unwrap(),
            "stale: the log moved on"
        );
        assert!(record_skip(&p, "design", "b", 1).unwrap());
        assert_eq!(refusal(&p, "design", "c").unwrap(), None);
        for (r, id) in [("c", "2"), ("a", "3"), ("b", "4")] {
            admit(&p, "design", &turn(r, id)).unwrap();
        }
        assert_eq!(
            admit(&p, "design", &turn("c", "5")),
            Err(Admit::Refused("discussion_closed".into()))
        );
        assert_eq!(
            admit(&p, "nope", &turn("c", "5")),
            Err(Admit::Refused("unknown discussion nope".into()))
        );
        let dd = load(&p, "design").unwrap();
        assert_eq!(dd.close_reason.as_deref(), Some("cap_reached"));
        let st = dd.status(&log(&p, "design").unwrap());
        assert_eq!((st.turns, st.skips, st.open), (4, 1, false));
        let r = refusal(&p, "design", "c").unwrap().unwrap();
        assert_eq!(r.token, Token::DiscussionClosed);
        assert_eq!(r.detail, "discussion 'design' is closed (cap_reached).");
    }

    #[test]
    fn a_close_turn_closes_with_its_reason() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let order: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        open(&p, &roles(), "x", &order, None, "a").unwrap();
        let m = Message::parse("id: 1\nfrom: a\ntype: close\nreason: done\n\n").unwrap();
        admit(&p, "x", &m).unwrap();
        let st = load(&p, "x").unwrap();
        assert_eq!(st.close_reason.as_deref(), Some("agent_close:done"));
    }

    #[test]
    fn open_validates() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let o = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(open(&p, &roles(), "x", &o(&["a", "zz"]), None, "a").is_err());
        assert!(open(&p, &roles(), "x", &o(&["a", "a"]), None, "a").is_err());
        assert!(open(&p, &roles(), "../x", &o(&["a"]), None, "a").is_err());
        assert!(open(&p, &roles(), "x", &o(&["a"]), Some(0), "a").is_err());
    }
}
