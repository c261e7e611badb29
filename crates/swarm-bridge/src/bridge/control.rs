//! One control for the whole swarm (docs/bridge.md, "One control"): `swarm
//! pause`, `resume`, `approve`, `deny` and `answer` run on any host act on
//! every host. The command does its local part as on a single host, then
//! leaves a control record in `.swarmforge/bridge/control/out/`; the bridge
//! publishes the records there in name order (one host's records keep their
//! order) and every host's bridge applies every record in the stream's order,
//! through one consumer that takes one record at a time.
//!
//! Both sides are `protocol::ledger`s, which keep the crash reasoning:
//! this host's records ([`outbox_ledger`]: published into `out/`, retired
//! into `sent/` once JetStream acknowledged them) and the records received
//! ([`received`]: a tombstone `seen/<id>` per record taken from the stream,
//! `waiting/<id>.json` for one parked until it can be applied). Applying a
//! received record is in `control_receive`.

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Refused;
use crate::agent::caller::Caller;
use crate::daemon::journal::{record_outside, Event, Kind};
use crate::error::{Error, Result};
use crate::fsx;
use crate::person::holds::{self, Held};
use crate::protocol::config::Config;
use crate::protocol::grammar;
use crate::protocol::layout::Project;
use crate::protocol::ledger::{Ledger, Spec};
use crate::protocol::swarm::Swarm;
use crate::text::escape;

/// Largest control record read or published.
pub const MAX_RECORD: u64 = 64 * 1024;
/// Longest free text (a denial's reason, an answer's text).
const MAX_TEXT: usize = 16 * 1024;

/// One control record, as published (JSON, one object).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// `<host>.<nanoseconds since the epoch, 20 digits>.<pid>`: unique, and
    /// one host's ids sort in the order it issued them.
    pub id: String,
    /// The host where the person ran the command.
    pub host: String,
    /// Who ran it (`$USER`).
    pub by: String,
    pub at: String,
    #[serde(flatten)]
    pub action: Action,
}

/// What a control record asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    Pause {
        types: Vec<String>,
    },
    Resume,
    /// Approve held message `message`, if its content is still `sha256`.
    Approve {
        message: String,
        sha256: String,
    },
    Deny {
        message: String,
        reason: String,
    },
    /// Answer clarify `message` as a person.
    Answer {
        message: String,
        choices: Vec<usize>,
        text: Option<String>,
        /// The clarify's recipients as the issuing host's trail shows them:
        /// a host with one of them waits for the clarify's copy when the
        /// answer arrives first (`control_wait`). Empty in older records.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        to: Vec<String>,
    },
}

impl Action {
    pub fn word(&self) -> &'static str {
        match self {
            Action::Pause { .. } => "pause",
            Action::Resume => "resume",
            Action::Approve { .. } => "approve",
            Action::Deny { .. } => "deny",
            Action::Answer { .. } => "answer",
        }
    }

    /// The action in a few words, for the journal and `swarm status`.
    pub fn describe(&self) -> String {
        match self {
            Action::Pause { types } if types.is_empty() => "pause all delivery".into(),
            Action::Pause { types } => format!("pause delivery of {}", types.join(",")),
            Action::Resume => "resume delivery".into(),
            Action::Approve { message, .. } => format!("approve {message}"),
            Action::Deny { message, .. } => format!("deny {message}"),
            Action::Answer { message, .. } => format!("answer {message}"),
        }
    }
}

fn dir(project: &Project) -> PathBuf {
    project.bridge_dir().join("control")
}

/// Records issued on this host, waiting for their PubAck.
pub fn outbox(project: &Project) -> PathBuf {
    dir(project).join("out")
}

/// Records issued on this host and acknowledged by JetStream.
pub fn sent(project: &Project) -> PathBuf {
    dir(project).join("sent")
}

/// One empty marker per record taken from the stream.
fn seen(project: &Project) -> PathBuf {
    dir(project).join("seen")
}

/// The grammar of a control id: `<host>.<nanoseconds, 20 digits>.<pid>`.
fn valid_id(id: &str) -> bool {
    let mut parts = id.split('.');
    let digits = |n: &str, len: std::ops::RangeInclusive<usize>| {
        len.contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit())
    };
    parts.next().is_some_and(|h| {
        (1..=64).contains(&h.len()) && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    }) && parts.next().is_some_and(|n| digits(n, 20..=20))
        && parts.next().is_some_and(|n| digits(n, 1..=10))
        && parts.next().is_none()
}

/// A control record's files, on both sides: `<id>.json`, the record as
/// published; no effect of the store's own is marked (see [`received`]).
static RECORDS: Spec = Spec {
    request: ".json",
    started: None,
    answer: None,
    companions: &[],
    done: None,
    lock: None,
    valid_id,
};

/// This host's records: published into `out/` by [`issue`], carried on by
/// the bridge until JetStream acknowledged them (a record published twice,
/// after a crash before its retire, is one message: its `Nats-Msg-Id` is
/// its id), then retired whole into `sent/`.
pub fn outbox_ledger(project: &Project) -> Ledger {
    Ledger::new(outbox(project), &RECORDS)
        .temps_in(project.bridge_tmp())
        .keeps_in(sent(project))
}

/// The records taken from the stream: a record is acknowledged to the
/// stream only once its tombstone `seen/<id>` is durable, and one found
/// there is not applied again. Its effect comes before the tombstone, so a
/// crash between them applies it again: every effect of [`apply`] repeats
/// harmlessly (a pause sets a state, an approval or a denial of a message
/// no longer held is a no-op, an answered clarify refuses a second answer).
/// A record that must wait (`control_wait`) is published to
/// `waiting/<id>.json`, then tombstoned, and retired once applied.
pub(super) fn received(project: &Project) -> Ledger {
    Ledger::new(dir(project).join("waiting"), &RECORDS)
        .temps_in(project.bridge_tmp())
        .tombstones_in(seen(project))
}

/// Whether swarm.yaml gives this checkout a bridge (and so a swarm to tell).
pub fn bridged(project: &Project) -> Option<(Config, String)> {
    bridged_in(&Swarm::new(project.clone())).map(|(c, host)| (c.clone(), host))
}

/// [`bridged`] in a loaded swarm.
pub fn bridged_in(swarm: &Swarm) -> Option<(&Config, String)> {
    let config = swarm.config().ok()?;
    config.bridge.as_ref()?;
    let host = crate::protocol::config::this_host(&swarm.project, config).ok()??;
    Some((config, host))
}

/// Journals `kind` for record `r` with `outcome` (docs/bridge.md, "One
/// control": `<id> <kind> by <who> on <host>: <outcome>`).
pub(super) fn journal(project: &Project, kind: Kind, r: &Record, outcome: &str) {
    let reason = format!(
        "{} {} by {} on {}: {outcome}",
        r.id,
        r.action.word(),
        r.by,
        r.host
    );
    record_outside(project, &Event::new(kind).reason(reason));
}

/// Sends `action`, already done on this host (`local`: what it did here),
/// to every other host. None: this swarm has no bridge.
pub fn issue(project: &Project, action: Action, local: &str) -> Result<Option<Record>> {
    let Some((_, host)) = bridged(project) else {
        return Ok(None);
    };
    let out = outbox(project);
    let tmp = project.bridge_tmp();
    fsx::ensure_dirs(&[&out, &tmp]).map_err(|e| Error::io(&out, e))?;
    // Ids rise even when the clock steps back: the outbox is published in
    // name order and the audit reads one host's ids as its order.
    let last = dir(project).join("last");
    let _issuing = fsx::lock(&dir(project).join("issue.lock")).map_err(|e| Error::io(&last, e))?;
    let before: u128 = fsx::read_bounded(&last, 64)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .max(before + 1);
    let r = Record {
        id: format!("{host}.{nanos:020}.{}", std::process::id()),
        host,
        by: holds::who(),
        at: crate::protocol::clock::iso_now(),
        action,
    };
    fsx::replace(&tmp, &last, format!("{nanos}\n").as_bytes()).map_err(|e| Error::io(&last, e))?;
    let bytes = serde_json::to_vec(&r).unwrap_or_default();
    let outbox = outbox_ledger(project);
    outbox
        .publish(&r.id, &bytes)
        .map_err(|e| Error::io(outbox.request_file(&r.id), e))?;
    journal(project, Kind::ControlSent, &r, local);
    Ok(Some(r))
}

/// A handoff held on another host, as its mirror shows it: what
/// [`approve_elsewhere`] and [`deny_elsewhere`] act on (listed by
/// `control_view::held_elsewhere`).
#[derive(Clone, Debug, Serialize)]
pub struct RemoteHeld {
    pub host: String,
    #[serde(flatten)]
    pub held: Held,
}

/// Approves a handoff held on host `r.host`, reviewed as `seen`: refused
/// (`CHANGED_SINCE_REVIEW`) when the mirror shows other content now; that
/// host checks its own held copy again before it approves.
pub fn approve_elsewhere(project: &Project, r: &RemoteHeld, seen: &str) -> Result<Record> {
    if r.held.sha256 != seen {
        return Err(Error::refused(
            crate::error::Token::ChangedSinceReview,
            format!(
                "{} held on host {} is not what was reviewed (sha256 {}), it is now sha256 {}; nothing approved. Review it again: `swarm approve {}` shows it.",
                r.held.id, r.host, escape(seen), r.held.sha256, r.held.id
            ),
            vec![r.held.path.clone()],
        ));
    }
    let action = Action::Approve {
        message: r.held.id.clone(),
        sha256: seen.to_string(),
    };
    let local = format!("held on host {}, sent there", r.host);
    issue(project, action, &local)?.ok_or_else(|| Error::not_found("this swarm has no bridge"))
}

/// A person approved held message `id` on this host as `seen`: the
/// approval goes to every host as well, so its copies relayed to them are
/// delivered there, not held again (docs/bridge.md, "Approvals travel").
/// None without a bridge.
pub fn approved_here(project: &Project, id: &str, seen: &str) -> Result<Option<Record>> {
    let action = Action::Approve {
        message: id.to_string(),
        sha256: seen.to_string(),
    };
    issue(project, action, "approved here")
}

/// Denies a handoff held on host `r.host`.
pub fn deny_elsewhere(project: &Project, r: &RemoteHeld, reason: &str) -> Result<Record> {
    if reason.trim().is_empty() || !valid_text(reason) {
        return Err(Error::bad_input(
            "a denial needs a reason (--reason TEXT, no control characters)",
        ));
    }
    let action = Action::Deny {
        message: r.held.id.clone(),
        reason: reason.to_string(),
    };
    let local = format!("held on host {}, sent there", r.host);
    issue(project, action, &local)?.ok_or_else(|| Error::not_found("this swarm has no bridge"))
}

/// The line a command prints after it sent a control (nothing without a
/// bridge).
pub fn sent_line(r: Option<&Record>) -> String {
    r.map(|r| {
        format!(
            "CONTROL SENT: {} ({}) to every host; `swarm status` shows where it is applied\n",
            r.id,
            r.action.describe()
        )
    })
    .unwrap_or_default()
}

/// The control's id for a command's JSON answer (null without a bridge).
pub fn json_id(r: Option<&Record>) -> serde_json::Value {
    r.map_or(serde_json::Value::Null, |r| serde_json::json!(r.id))
}

/// The records waiting in this host's control outbox, oldest first.
pub fn waiting(project: &Project) -> Vec<Record> {
    let outbox = outbox_ledger(project);
    outbox
        .pending()
        .into_iter()
        .filter_map(|id| {
            let b = outbox.read_request(&id, MAX_RECORD).ok()??;
            serde_json::from_slice(&b).ok()
        })
        .collect()
}

/// JetStream acknowledged record `id`: it leaves the outbox.
pub fn mark_sent(project: &Project, id: &str) -> io::Result<()> {
    outbox_ledger(project).retire(id)
}

fn valid_text(t: &str) -> bool {
    t.len() <= MAX_TEXT && !t.chars().any(|c| c.is_control() && c != '\n' && c != '\t')
}

/// Checks a received record as untrusted input: the host it came from
/// (`from`, its subject) is one of `hosts:` and the record's own; every
/// field is what a command of this version writes.
pub fn check(config: &Config, from: &str, bytes: &[u8]) -> std::result::Result<Record, Refused> {
    if !config.hosts.iter().any(|h| h == from) {
        return Err(Refused(format!(
            "host '{}' is not one of the hosts in swarm.yaml ({})",
            escape(from),
            config.hosts.join(", ")
        )));
    }
    if bytes.len() as u64 > MAX_RECORD {
        return Err(Refused(format!(
            "{} bytes, more than {MAX_RECORD}",
            bytes.len()
        )));
    }
    let r: Record = serde_json::from_slice(bytes)
        .map_err(|e| Refused(format!("malformed control record: {e}")))?;
    if r.host != from {
        return Err(Refused(format!(
            "it names host '{}' but host {from} published it",
            escape(&r.host)
        )));
    }
    if !valid_id(&r.id) || r.id.split('.').next() != Some(from) {
        return Err(Refused(format!("'{}' is not a control id", escape(&r.id))));
    }
    if !grammar::valid_role(&r.by) || r.at.len() > 64 || !valid_text(&r.at) {
        return Err(Refused::from("bad `by` or `at`"));
    }
    let message_ok = |m: &str| grammar::valid_message_id(m);
    let fine = match &r.action {
        Action::Pause { types } => types
            .iter()
            .all(|t| crate::protocol::types::type_rule(t).is_some_and(|r| r.sendable)),
        Action::Resume => true,
        Action::Approve { message, sha256 } => {
            message_ok(message)
                && sha256.len() == 64
                && sha256.bytes().all(|b| b.is_ascii_hexdigit())
        }
        Action::Deny { message, reason } => {
            message_ok(message) && !reason.trim().is_empty() && valid_text(reason)
        }
        Action::Answer {
            message,
            choices,
            text,
            to,
        } => {
            message_ok(message)
                && choices.len() <= 64
                && text.as_deref().is_none_or(valid_text)
                && to.len() <= 64
                && to.iter().all(|t| grammar::valid_role(t))
        }
    };
    if !fine {
        return Err(Refused(format!("bad {} record", r.action.word())));
    }
    Ok(r)
}

/// Held while a record is applied here: the stream's consumer and the
/// retry of waiting records never apply two at once.
pub(super) static APPLYING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A refusal the record's own checks make (journaled, not retried), or a
/// transient error (retried).
pub(super) type Applied = std::result::Result<String, String>;

fn transient(e: &Error) -> bool {
    matches!(e, Error::Io { .. })
}

/// Does what the record asks on this host.
pub(super) fn apply(p: &Project, r: &Record) -> io::Result<Applied> {
    let via = format!("control {} from host {} by {}", r.id, r.host, r.by);
    let res: Result<String> = match &r.action {
        Action::Pause { types } => {
            holds::pause(p, types).map(|st| format!("{} paused since {}", st.describe(), st.since))
        }
        Action::Resume => {
            holds::resume(p).map(|was| if was { "resumed" } else { "not paused" }.into())
        }
        Action::Approve { message, sha256 } => match holds::find(p, message) {
            Ok(_) => holds::approve(p, message, sha256, &via)
                .map(|to| format!("approved, back in {}", to.display())),
            // Its copy may come later (relayed from its sender's host).
            Err(_) => holds::approve_ahead(p, message, sha256, &r.by, &via).map(|()| {
                "not held on this host; a copy that comes with this content is approved".into()
            }),
        },
        Action::Deny { message, reason } => match holds::find(p, message) {
            Ok(_) => holds::deny(p, message, reason, &via)
                .map(|to| format!("denied, in {}", to.display())),
            Err(_) => Ok("not held on this host".into()),
        },
        Action::Answer {
            message,
            choices,
            text,
            ..
        } => {
            if !clarify_here(p, message) {
                Ok("no copy of it on this host".into())
            } else {
                crate::person::answer::answer(p, message, choices, text.as_deref(), &Caller::Person)
                    .map(|a| format!("answered as {}: {}", a.role, a.queued.path.display()))
            }
        }
    };
    match res {
        Ok(o) => Ok(Ok(o)),
        Err(e) if transient(&e) => Err(io::Error::other(e.to_string())),
        Err(Error::Refused { token, detail, .. }) => Ok(Err(format!("{}: {detail}", token.name()))),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// The recipients of the clarify with this id, when the swarm's trail
/// (this host's files and the mirrors of the others) has one: an answer is
/// sent only for one.
pub fn clarify_recipients(p: &Project, id: &str) -> Option<Vec<String>> {
    use crate::protocol::trail::{Scope, Trail};
    let t = Trail::load(p, &Scope::originals()).ok()?;
    let o = t.originals.iter().find(|o| {
        o.id() == id && o.msg.type_name() == Some(crate::protocol::types::CLARIFY.name)
    })?;
    let roles = crate::protocol::roles::Roles::load(&p.roles_tsv()).unwrap_or_default();
    let from = o.msg.sender().unwrap_or_default();
    let mut to = roles.recipients(o.msg.to().unwrap_or_default(), from);
    for cc in o.msg.cc() {
        to.extend(roles.recipients(cc, from));
    }
    to.sort();
    to.dedup();
    Some(to)
}

/// Whether clarify `id` has a copy in an inbox of this host (not in the
/// proxy of a role on another host).
pub fn clarify_here(p: &Project, id: &str) -> bool {
    let Ok(mut roles) = crate::protocol::roles::Roles::load(&p.roles_tsv()) else {
        return false;
    };
    roles.roles.retain(|r| !r.is_remote());
    let max = Config::load(&p.config_file())
        .map(|c| c.limits.max_file_bytes)
        .unwrap_or(MAX_RECORD);
    crate::person::answer::clarify_copy(&roles, p, id, max).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bridged_project() -> (tempfile::TempDir, Project) {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        std::fs::create_dir_all(p.swarmforge()).unwrap();
        std::fs::write(
            p.config_file(),
            "hosts: [a, b]\nbridge: nats://127.0.0.1:1\n",
        )
        .unwrap();
        std::fs::write(p.host_file(), "a\n").unwrap();
        (d, p)
    }

    #[test]
    fn ids_rise_even_when_the_clock_steps_back() {
        let (_d, p) = bridged_project();
        // A record issued "in the future" (a clock since stepped back).
        std::fs::create_dir_all(dir(&p)).unwrap();
        std::fs::write(dir(&p).join("last"), "99999999999999999990\n").unwrap();
        let a = issue(&p, Action::Resume, "x").unwrap().unwrap();
        let b = issue(&p, Action::Resume, "x").unwrap().unwrap();
        assert!(a.id.starts_with("a.99999999999999999991."), "{}", a.id);
        assert!(b.id > a.id, "{} then {}", a.id, b.id);
        let names: Vec<String> = waiting(&p).into_iter().map(|r| r.id).collect();
        assert_eq!(names, [a.id, b.id]);
    }

    #[test]
    fn a_record_is_checked_as_untrusted_input() {
        let (_d, p) = bridged_project();
        let config = Config::load(&p.config_file()).unwrap();
        let good = |kind: &str| {
            format!(
                r#"{{"id":"b.{:020}.7","host":"b","by":"bob","at":"t",{kind}}}"#,
                5
            )
        };
        assert!(check(&config, "b", good(r#""kind":"resume""#).as_bytes()).is_ok());
        let bad = [
            ("zed", good(r#""kind":"resume""#)),
            ("b", good(r#""kind":"reboot""#)),
            ("b", good(r#""kind":"pause","types":["nonsense"]"#)),
            ("b", good(r#""kind":"approve","message":"x","sha256":"00""#)),
            (
                "b",
                good(
                    r#""kind":"deny","message":"20260101T000000Z_000001_from_x","reason":"a\u001b[2J""#,
                ),
            ),
            ("b", good(r#""kind":"resume""#).replace("\"b.", "\"a.")),
            ("b", "[1,2".to_string()),
            ("b", "x".repeat(70 * 1024)),
        ];
        for (from, rec) in bad {
            assert!(
                check(&config, from, rec.as_bytes()).is_err(),
                "{from}: {rec:.80}"
            );
        }
    }
}
