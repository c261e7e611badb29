//! Forum sessions (docs/forum.md, "Sessions").
//!
//! A session is an index record, never a reset: starting or closing one
//! writes one small header-format file under `.swarmforge/forum/sessions/`
//! and truncates nothing. At most one session is open at a time; its id is
//! stamped on every message sent while it is open.

use crate::protocol::header::names;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, IoContext, Result};
use crate::forum::record;
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::header::Message;
use crate::protocol::layout::Project;
use crate::text::{escape, is_control};

/// Longest title and close reason accepted.
pub const MAX_TEXT: usize = 200;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Session {
    pub id: String,
    pub title: Option<String>,
    pub started_at: String,
    pub started_by: String,
    pub closed_at: Option<String>,
    pub close_reason: Option<String>,
    pub path: PathBuf,
    /// The confined agent's request that opened it (forum/requests.rs), so
    /// a request carried out again after a daemon kill is found done.
    #[serde(skip)]
    pub request: Option<String>,
    /// The request that closed it.
    #[serde(skip)]
    pub close_request: Option<String>,
}

impl Session {
    pub fn is_open(&self) -> bool {
        self.closed_at.is_none()
    }

    fn from_message(m: &Message, path: &Path) -> Option<Session> {
        let opt = |n: &str| record::field(m, n);
        Some(Session {
            id: record::field(m, names::ID)?,
            title: record::field(m, names::TITLE),
            started_at: opt("started_at")?,
            started_by: opt("started_by").unwrap_or_default(),
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
        record::push_some(&mut m, names::TITLE, self.title.as_deref());
        m.push_named("started_at", &self.started_at);
        m.push_named("started_by", &self.started_by);
        record::push_some(&mut m, "closed_at", self.closed_at.as_deref());
        record::push_some(&mut m, "close_reason", self.close_reason.as_deref());
        record::push_some(&mut m, "request", self.request.as_deref());
        record::push_some(&mut m, "close_request", self.close_request.as_deref());
        m
    }
}

/// A one-line text (title, reason): no control characters, bounded.
pub fn check_text(what: &str, text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::bad_input(format!("{what} must not be empty.")));
    }
    if text.chars().any(is_control) {
        return Err(Error::bad_input(format!(
            "{what} must not contain control characters; got '{}'.",
            escape(text)
        )));
    }
    if text.chars().count() > MAX_TEXT {
        return Err(Error::bad_input(format!(
            "{what} must be no longer than {MAX_TEXT} characters; got {}.",
            text.chars().count()
        )));
    }
    Ok(())
}

/// Session ids as written by `start` (`s<IDTS>[-N]`); anything else read
/// from a header never becomes a path.
pub fn valid_id(id: &str) -> bool {
    crate::protocol::grammar::valid_session_id(id)
}

fn latest_digest_file(project: &Project, id: &str) -> PathBuf {
    project.forum_dir().join("latest-digest").join(id)
}

/// Records the delivered original of the newest digest of a session.
pub fn set_latest_digest(project: &Project, id: &str, original: &Path) -> Result<()> {
    let p = latest_digest_file(project, id);
    if let Some(d) = p.parent() {
        fsx::ensure_dirs(&[d]).at(d)?;
    }
    fsx::write_file(&p, format!("{}\n", original.display()).as_bytes()).at(&p)
}

/// The delivered original of the newest digest of a session, if any.
pub fn latest_digest(project: &Project, id: &str) -> Option<PathBuf> {
    if !valid_id(id) {
        return None;
    }
    let text =
        String::from_utf8(fsx::read_bounded(&latest_digest_file(project, id), 4096).ok()?).ok()?;
    let p = PathBuf::from(text.trim());
    p.is_file().then_some(p)
}

/// Every session, oldest first.
pub fn list(project: &Project) -> Result<Vec<Session>> {
    let mut out: Vec<Session> = record::list(&project.sessions_dir(), "session")?
        .iter()
        .filter_map(|(p, m)| Session::from_message(m, p))
        .collect();
    out.sort_by(|a, b| (&a.started_at, &a.id).cmp(&(&b.started_at, &b.id)));
    Ok(out)
}

/// The open session, if any.
pub fn current(project: &Project) -> Result<Option<Session>> {
    Ok(list(project)?.into_iter().rev().find(Session::is_open))
}

pub fn find(project: &Project, id: &str) -> Result<Session> {
    list(project)?
        .into_iter()
        .find(|s| s.id == id)
        .ok_or_else(|| Error::not_found(format!("Unknown session: {}", escape(id))))
}

fn lock(project: &Project) -> Result<fsx::Lock> {
    let dir = project.forum_dir();
    fsx::ensure_dirs(&[&dir]).at(&dir)?;
    let p = project.forum_lock();
    fsx::lock(&p).at(&p)
}

/// Opens a new session; refused while another one is open.
pub fn start(project: &Project, title: Option<&str>, by: &str) -> Result<Session> {
    start_for(project, title, by, None)
}

/// [`start`], recording the confined agent's request it carries out.
pub fn start_for(
    project: &Project,
    title: Option<&str>,
    by: &str,
    request: Option<&str>,
) -> Result<Session> {
    if let Some(t) = title {
        check_text("Session title", t)?;
    }
    let _lock = lock(project)?;
    if let Some(open) = current(project)? {
        return Err(Error::conflict(format!(
            "Session {} is open (started {}); close it first: swarm session close --reason <why>",
            open.id, open.started_at
        )));
    }
    let now = clock::now();
    let base = format!("s{}", clock::idts(now));
    let dir = project.sessions_dir();
    let mut id = base.clone();
    let mut n = 1;
    while dir.join(format!("{id}.session")).exists() {
        n += 1;
        id = format!("{base}-{n}");
    }
    let s = Session {
        path: dir.join(format!("{id}.session")),
        id,
        title: title.map(str::to_string),
        started_at: clock::iso(now),
        started_by: by.to_string(),
        closed_at: None,
        close_reason: None,
        request: request.map(str::to_string),
        close_request: None,
    };
    record::write(&s.path, &s.to_message())?;
    Ok(s)
}

/// Closes a session (default: the open one) with a recorded reason.
pub fn close(project: &Project, id: Option<&str>, reason: &str) -> Result<Session> {
    close_for(project, id, reason, None)
}

/// [`close`], recording the confined agent's request it carries out.
pub fn close_for(
    project: &Project,
    id: Option<&str>,
    reason: &str,
    request: Option<&str>,
) -> Result<Session> {
    check_text("Close reason", reason)?;
    let _lock = lock(project)?;
    let mut s = match id {
        Some(id) => find(project, id)?,
        None => current(project)?
            .ok_or_else(|| Error::conflict("No session is open.\n  hint: swarm session list"))?,
    };
    if let Some(at) = &s.closed_at {
        return Err(Error::conflict(format!(
            "Session {} is already closed ({at}, {}).",
            s.id,
            s.close_reason.as_deref().unwrap_or("no reason")
        )));
    }
    s.closed_at = Some(clock::iso_now());
    s.close_reason = Some(reason.to_string());
    s.close_request = request.map(str::to_string);
    record::write(&s.path, &s.to_message())?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_close_list() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        assert!(current(&p).unwrap().is_none());
        let s = start(&p, Some("kick-off"), "coder").unwrap();
        assert!(start(&p, None, "x")
            .unwrap_err()
            .to_string()
            .contains("is open"));
        assert_eq!(current(&p).unwrap().unwrap().id, s.id);
        let c = close(&p, None, "done").unwrap();
        assert_eq!(c.close_reason.as_deref(), Some("done"));
        assert!(current(&p).unwrap().is_none());
        assert!(close(&p, Some(&s.id), "again").is_err());
        let s2 = start(&p, None, "coder").unwrap();
        assert_ne!(s2.id, s.id);
        assert_eq!(list(&p).unwrap().len(), 2);
        assert!(check_text("t", "a\x1bb").is_err());
    }
}
