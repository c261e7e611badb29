//! Round-robin discussions (collaboration.md, "Round-robin discussions").
//!
//! A discussion is a record (`<id>.discussion`: order, cap, open/closed) and
//! an append-only turn log (`<id>.turns`) that the daemon writes as it
//! delivers turns and records skips. The expected speaker is the log replayed
//! against the order, so a restart rebuilds it exactly; the daemon also
//! reconciles the log with the delivered originals at start-up.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::clock;
use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::header::{escape, Message};
use crate::layout::Project;
use crate::names;
use crate::record;
use crate::roles::Roles;
use crate::session::check_text;

/// Token printed by `swarm-handoff` for an out-of-turn draft.
pub const NOT_YOUR_TURN: &str = "NOT_YOUR_TURN";

/// Discussion ids: like role names, plus `.` and `_`.
pub fn valid_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
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
            id: opt("id")?,
            order: opt("order")?.split(',').map(str::to_string).collect(),
            max_turns: opt("max_turns").and_then(|v| v.parse().ok()),
            opened_at: opt("opened_at")?,
            opened_by: opt("opened_by").unwrap_or_default(),
            closed_at: opt("closed_at"),
            close_reason: opt("close_reason"),
            path: path.to_path_buf(),
        })
    }

    fn to_message(&self) -> Message {
        let mut m = Message::default();
        m.push("id", &self.id);
        m.push("order", self.order.join(","));
        if let Some(n) = self.max_turns {
            m.push("max_turns", n.to_string());
        }
        m.push("opened_at", &self.opened_at);
        m.push("opened_by", &self.opened_by);
        if let Some(c) = &self.closed_at {
            m.push("closed_at", c);
        }
        if let Some(r) = &self.close_reason {
            m.push("close_reason", r);
        }
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
        return Err(Error::env(format!(
            "Invalid discussion id '{}'.",
            escape(id)
        )));
    }
    let p = record_path(project, id);
    let m = record::read(&p)?.ok_or_else(|| Error::env(format!("Unknown discussion '{id}'.")))?;
    Discussion::from_message(&m, &p)
        .filter(|d| !d.order.is_empty())
        .ok_or_else(|| Error::env(format!("{}: not a discussion record", p.display())))
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
    let text = match fs::read_to_string(&p) {
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
    if !valid_id(id) {
        return Err(Error::env(format!(
            "Invalid discussion id '{}': use letters, digits, '-', '_' and '.' (at most 64).",
            escape(id)
        )));
    }
    if order.is_empty() {
        return Err(Error::env("--order must name at least one role."));
    }
    for (i, r) in order.iter().enumerate() {
        if !names::valid_role(r) || roles.find(r).is_none() {
            return Err(Error::env(format!(
                "Unknown role '{}' in --order.",
                escape(r)
            )));
        }
        if order[..i].contains(r) {
            return Err(Error::env(format!("Role '{r}' appears twice in --order.")));
        }
    }
    if max_turns == Some(0) {
        return Err(Error::env("--max-turns must be at least 1."));
    }
    let _lock = lock(project)?;
    let path = record_path(project, id);
    if path.exists() {
        return Err(Error::env(format!("Discussion '{id}' already exists.")));
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
    };
    let dir = project.discussions_dir();
    fsx::publish(&dir, &path, d.to_message().render().as_bytes()).at(&path)?;
    Ok(d)
}

/// Closes a discussion with a recorded reason (`explicit_close`, `cap_reached`, …).
pub fn close(project: &Project, id: &str, reason: &str) -> Result<Discussion> {
    check_text("Close reason", reason)?;
    let _lock = lock(project)?;
    let mut d = load(project, id)?;
    if !d.is_open() {
        return Err(Error::env(format!(
            "Discussion '{id}' is already closed ({}).",
            d.close_reason.as_deref().unwrap_or("no reason")
        )));
    }
    d.closed_at = Some(clock::iso_now());
    d.close_reason = Some(reason.to_string());
    record::write(&d.path, &d.to_message())?;
    Ok(d)
}

/// Why `role` may not speak now in `id` (None: it may).
pub fn refusal(project: &Project, id: &str, role: &str) -> Result<Option<String>> {
    let d = load(project, id)?;
    if !d.is_open() {
        return Ok(Some(format!(
            "Discussion '{id}' is closed ({}).",
            d.close_reason.as_deref().unwrap_or("no reason")
        )));
    }
    let log = log(project, id)?;
    let expected = d.expected(&log);
    Ok((expected != role)
        .then(|| format!("discussion '{id}' expects {expected} to speak, got {role}.")))
}

/// The daemon's re-check at delivery, with its failure reasons:
/// `unknown discussion <id>`, `discussion_closed`, `out_of_turn`.
pub fn delivery_check(project: &Project, id: &str, role: &str) -> std::result::Result<(), String> {
    let d = load(project, id).map_err(|_| format!("unknown discussion {}", escape(id)))?;
    if !d.is_open() {
        return Err("discussion_closed".into());
    }
    let log = log(project, id).map_err(|e| format!("discussion {id}: {e}"))?;
    if d.expected(&log) != role {
        return Err("out_of_turn".into());
    }
    Ok(())
}

/// Records a delivered turn (the daemon, after the original reached `sent/`);
/// closes the discussion with `cap_reached` when the cap is hit.
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

/// Records a skip of the expected speaker (`skip_after` expired).
pub fn record_skip(project: &Project, id: &str, role: &str) -> Result<()> {
    let _lock = lock(project)?;
    append(project, id, "skip", role, "-")
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
        assert_eq!(
            refusal(&p, "design", "b").unwrap().unwrap(),
            "discussion 'design' expects a to speak, got b."
        );
        record_turn(&p, "design", "a", "1").unwrap();
        record_skip(&p, "design", "b").unwrap();
        assert_eq!(refusal(&p, "design", "c").unwrap(), None);
        for (r, id) in [("c", "2"), ("a", "3"), ("b", "4")] {
            record_turn(&p, "design", r, id).unwrap();
        }
        let dd = load(&p, "design").unwrap();
        assert_eq!(dd.close_reason.as_deref(), Some("cap_reached"));
        let st = dd.status(&log(&p, "design").unwrap());
        assert_eq!((st.turns, st.skips, st.open), (4, 1, false));
        assert!(refusal(&p, "design", "c")
            .unwrap()
            .unwrap()
            .contains("closed"));
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
