//! A person's pause, resume, approve and deny, for the whole swarm
//! (docs/bridge.md, "One control"): the part done on this host, then the
//! control record for the others (nothing more without a bridge). Shared by
//! `swarm pause|resume|approve|deny` and the cockpit (`swarm serve`), so the
//! two act alike.

use std::path::PathBuf;

use super::control::{self, Action, Record};
use super::control_view;
use crate::daemon::gate::Pause;
use crate::error::Result;
use crate::person::holds;
use crate::protocol::layout::Project;

/// Pauses delivery of `types` here and, unless `here`, on every host.
pub fn pause(p: &Project, types: &[String], here: bool) -> Result<(Pause, Option<Record>)> {
    let st = holds::pause(p, types)?;
    let done = format!("{} paused since {}", st.describe(), st.since);
    let action = Action::Pause {
        types: types.to_vec(),
    };
    let sent = if here {
        None
    } else {
        control::issue(p, action, &done)?
    };
    Ok((st, sent))
}

/// Resumes delivery here and, unless `here`, on every host; whether this
/// host was paused.
pub fn resume(p: &Project, here: bool) -> Result<(bool, Option<Record>)> {
    let was = holds::resume(p)?;
    let done = if was { "resumed" } else { "not paused" };
    let sent = if here {
        None
    } else {
        control::issue(p, Action::Resume, done)?
    };
    Ok((was, sent))
}

/// Where a person's decision on a held handoff was made.
#[derive(Debug)]
pub enum Decided {
    /// Held here: decided here (the path it went to), and sent to the other
    /// hosts when it is an approval.
    Here(PathBuf, Option<Record>),
    /// Held on host `.0`: sent there.
    Elsewhere(String, Record),
}

/// Approves held handoff `id`, reviewed as fingerprint `seen`, wherever in
/// the swarm it is held (`via`: `cli`, `cockpit`).
pub fn approve(p: &Project, id: &str, seen: &str, via: &str) -> Result<Decided> {
    if holds::find(p, id).is_err() {
        if let Some(r) = control_view::held_by_id(p, id) {
            let c = control::approve_elsewhere(p, &r, seen)?;
            return Ok(Decided::Elsewhere(r.host, c));
        }
    }
    let path = holds::approve(p, id, seen, via)?;
    // Approved here; its copies on other hosts need the approval too.
    let sent = control::approved_here(p, id, seen).unwrap_or_else(|e| {
        eprintln!("swarm: {id} approved here, but not sent to the other hosts: {e}");
        None
    });
    Ok(Decided::Here(path, sent))
}

/// Denies held handoff `id` wherever in the swarm it is held.
pub fn deny(p: &Project, id: &str, reason: &str, via: &str) -> Result<Decided> {
    if holds::find(p, id).is_err() {
        if let Some(r) = control_view::held_by_id(p, id) {
            let c = control::deny_elsewhere(p, &r, reason)?;
            return Ok(Decided::Elsewhere(r.host, c));
        }
    }
    holds::deny(p, id, reason, via).map(|path| Decided::Here(path, None))
}

/// Answers clarify `id` as a person when its copy is on another host of
/// the swarm (none here): the answer is sent there, checked and written
/// there. None when a copy is here (answer it here) or there is no bridge.
pub fn answer_elsewhere(
    p: &Project,
    id: &str,
    choices: &[usize],
    text: Option<&str>,
) -> Result<Option<Record>> {
    if control::bridged(p).is_none() || control::clarify_here(p, id) {
        return Ok(None);
    }
    let to = control::clarify_recipients(p, id).ok_or_else(|| {
        crate::error::Error::not_found(format!(
            "No clarify {} on any host of this swarm: it is not sent yet, not mirrored here yet, or no such message exists.\n  hint: `swarm receipts {}` shows where it is",
            crate::text::escape(id),
            crate::text::escape(id)
        ))
    })?;
    let action = Action::Answer {
        message: id.to_string(),
        choices: choices.to_vec(),
        text: text.map(str::to_string),
        to,
    };
    control::issue(p, action, "no copy on this host, sent")
}

impl Decided {
    /// The JSON answer of a decision (`word`: `approved`, `denied`).
    pub fn json(&self, word: &str, id: &str) -> serde_json::Value {
        match self {
            Decided::Here(path, c) => serde_json::json!({
                "status": word, "id": id, "path": path, "control": control::json_id(c.as_ref()),
            }),
            Decided::Elsewhere(host, c) => serde_json::json!({
                "status": "sent", "id": id, "host": host, "control": c.id,
            }),
        }
    }
}
