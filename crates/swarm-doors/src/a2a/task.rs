//! An A2A task is a handoff: its state is read from where the handoff's
//! files are, never kept beside them (docs/a2a.md, "States"):
//!
//! | the handoff | A2A state |
//! |---|---|
//! | in the sender's outbox or `pending_approval/`, or delivered to `inbox/new/` | submitted |
//! | in the role's `inbox/in_process/` | working |
//! | in process, with a `clarify` from the role to the sender not yet answered | input-required |
//! | in the role's `inbox/completed/` | completed |
//! | completed with `failed: <reason>`, or in the sender's `failed/` | failed (the reason) |
//! | canceled through A2A | canceled |
//!
//! What the role sends back in the handoff's thread (a `post`, `note`,
//! `close`, …, not a `clarify` or `react`) is the task's artifacts, in order.
//! The JSON is A2A v1.0's (ProtoJSON: camelCase, `TASK_STATE_*`, parts
//! `{"text": …}`).

use serde_json::{json, Value};

use crate::protocol::grammar::MessageType;
use crate::protocol::header::names;
use crate::protocol::trail::{self, Loaded, Place, Trail};

use super::store::Record;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Failed,
    Canceled,
}

impl State {
    pub fn wire(self) -> &'static str {
        match self {
            State::Submitted => "TASK_STATE_SUBMITTED",
            State::Working => "TASK_STATE_WORKING",
            State::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            State::Completed => "TASK_STATE_COMPLETED",
            State::Failed => "TASK_STATE_FAILED",
            State::Canceled => "TASK_STATE_CANCELED",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Canceled)
    }

    /// Terminal or waiting for the client: where a blocking send and a
    /// stream stop.
    pub fn is_interrupted(self) -> bool {
        self.is_terminal() || self == State::InputRequired
    }
}

/// A message from the role in the handoff's thread.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub id: String,
    pub kind: String,
    pub text: String,
}

/// A task as the files tell it now.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub state: State,
    /// Why it failed.
    pub reason: Option<String>,
    /// The open clarify (input-required): its id and what it asks.
    pub question: Option<Reply>,
    pub artifacts: Vec<Reply>,
}

/// The text a message carries, as a person would read it.
fn text_of(m: &crate::protocol::header::Message) -> String {
    let mut lines: Vec<String> = Vec::new();
    for h in [
        names::SUBJECT,
        names::MESSAGE,
        names::QUESTION,
        names::REASON,
        names::TASK,
    ] {
        if let Some(v) = m.get(h) {
            lines.push(v.to_string());
        }
    }
    let body = m.body.trim_end();
    // The SwarmForge preamble says nothing to an outside client.
    let body = body
        .strip_prefix(crate::protocol::draft::BODY_PREAMBLE)
        .map(str::trim_start)
        .unwrap_or(body);
    if !body.is_empty() {
        lines.push(body.to_string());
    }
    lines.join("\n")
}

/// The clarify's question and its options, numbered as `swarm answer` takes them.
fn question_text(m: &crate::protocol::header::Message) -> String {
    let mut out = m.get(names::QUESTION).unwrap_or("").to_string();
    for (i, o) in m.body.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        out.push_str(&format!("\n{}. {}", i + 1, o.trim()));
    }
    out
}

/// The state of `rec` in `trail`.
pub fn view(trail: &Trail, rec: &Record) -> View {
    let mut v = View {
        state: State::Submitted,
        reason: None,
        question: None,
        artifacts: Vec::new(),
    };
    let Some(handoff) = rec.handoff.as_deref() else {
        return v;
    };
    let t = thread_of(trail, rec, handoff);
    v.artifacts = t.artifacts;
    v.artifacts.sort_by(|a, b| a.id.cmp(&b.id));
    // A clarify counts once it is in the sender's inbox: only then can an
    // answer name it.
    let home = trail.home(&rec.sender);
    let delivered = |id: &str| {
        trail
            .copies
            .iter()
            .any(|c| c.id.as_deref() == Some(id) && Some(c.worktree) == home)
    };
    v.question = t
        .clarifies
        .into_iter()
        .filter(|c| !t.answered.contains(&c.id.as_str()) && !t.withdrawn.contains(&c.id.as_str()))
        .filter(|c| delivered(&c.id))
        .min_by(|a, b| a.id.cmp(&b.id));
    (v.state, v.reason) = state_of(trail, rec, handoff, v.question.is_some());
    if rec.canceled.is_some() && !v.state.is_terminal() {
        v.state = State::Canceled;
    }
    if v.state != State::InputRequired {
        v.question = None;
    }
    v
}

/// What the thread of a task's handoff holds: the role's replies to the
/// sender (its clarifies, the ones it withdrew, everything else as an
/// artifact) and the clarifies the sender answered.
struct Thread<'t> {
    answered: Vec<&'t str>,
    withdrawn: Vec<&'t str>,
    clarifies: Vec<Reply>,
    artifacts: Vec<Reply>,
}

/// The thread of `handoff` (the task's) in `trail`.
fn thread_of<'t>(trail: &'t Trail, rec: &Record, handoff: &str) -> Thread<'t> {
    let to_sender = |m: &crate::protocol::header::Message| {
        crate::protocol::grammar::role_list(m.to()).contains(&rec.sender.as_str())
    };
    let mut t = Thread {
        answered: Vec::new(),
        withdrawn: Vec::new(),
        clarifies: Vec::new(),
        artifacts: Vec::new(),
    };
    for o in &trail.originals {
        let m = &o.msg;
        let in_thread = m.in_reply_to() == Some(handoff) || m.thread() == Some(handoff);
        if !in_thread {
            continue;
        }
        let from = m.sender().unwrap_or("");
        if from == rec.sender && m.kind() == Some(MessageType::Answer) {
            if let Some(q) = m.in_reply_to() {
                t.answered.push(q);
            }
            continue;
        }
        if from != rec.role || !to_sender(m) {
            continue;
        }
        match m.kind() {
            Some(MessageType::Clarify) => t.clarifies.push(Reply {
                id: o.id().to_string(),
                kind: "clarify".into(),
                text: question_text(m),
            }),
            Some(MessageType::React) => {}
            Some(MessageType::Close) if m.in_reply_to() != Some(handoff) => {
                // Withdrawing a clarify (docs/message-model.md).
                if let Some(q) = m.in_reply_to() {
                    t.withdrawn.push(q);
                }
            }
            _ => t.artifacts.push(Reply {
                id: o.id().to_string(),
                kind: m.type_name().unwrap_or("").to_string(),
                text: text_of(m),
            }),
        }
    }
    t
}

/// The task's state from where its handoff is (the original failed, the
/// role's copy in process or completed, `--failed` or not), with the
/// reason of a failure; in process with an open question it needs input.
fn state_of(trail: &Trail, rec: &Record, handoff: &str, asking: bool) -> (State, Option<String>) {
    let original = trail.originals.iter().find(|o| o.id() == handoff);
    let copy = trail.copies.iter().find(|c| {
        c.id.as_deref() == Some(handoff) && c.recipient.as_deref().unwrap_or(&rec.role) == rec.role
    });
    match (original.map(|o| o.place), copy.map(|c| c.place)) {
        (Some(Place::Failed), _) => (
            State::Failed,
            Some(
                original
                    .and_then(|o| o.reason.clone())
                    .unwrap_or_else(|| "the handoff could not be delivered".into()),
            ),
        ),
        (_, Some(Place::Completed)) => {
            let failed = copy.and_then(|c| match trail::load_message(&c.path, trail.max_bytes) {
                Loaded::Ok(m) => m.get(names::FAILED).map(str::to_string),
                _ => None,
            });
            match failed {
                Some(r) => (State::Failed, Some(r)),
                None => (State::Completed, None),
            }
        }
        (_, Some(Place::InProcess)) if asking => (State::InputRequired, None),
        (_, Some(Place::InProcess)) => (State::Working, None),
        _ => (State::Submitted, None),
    }
}

/// What the tracker compares: a change here is an event.
pub fn key(v: &View) -> Value {
    json!({
        "state": v.state.wire(),
        "question": v.question.as_ref().map(|q| q.id.clone()),
        "artifacts": v.artifacts.iter().map(|a| a.id.clone()).collect::<Vec<_>>(),
    })
}

/// An A2A message from the role (a status message).
fn agent_message(rec: &Record, id: &str, text: &str) -> Value {
    json!({
        "messageId": id,
        "contextId": rec.context_id,
        "taskId": rec.id,
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
    })
}

pub fn status(rec: &Record, v: &View) -> Value {
    let mut s = json!({"state": v.state.wire()});
    if let Some(q) = &v.question {
        s["message"] = agent_message(rec, &q.id, &q.text);
    } else if let Some(r) = &v.reason {
        s["message"] = agent_message(rec, &format!("{}-failed", rec.id), r);
    }
    s
}

pub fn artifact(a: &Reply, role: &str) -> Value {
    json!({
        "artifactId": a.id,
        "name": format!("{} from {role}", a.kind),
        "parts": [{"text": a.text}],
    })
}

/// The A2A `Task`.
pub fn task_json(rec: &Record, v: &View, history_length: Option<u64>) -> Value {
    let mut history = vec![rec.message.clone()];
    if let Some(n) = history_length {
        let n = n as usize;
        if history.len() > n {
            history.drain(..history.len() - n);
        }
    }
    let mut t = json!({
        "id": rec.id,
        "contextId": rec.context_id,
        "status": status(rec, v),
        "metadata": {"role": rec.role, "handoff": rec.handoff},
    });
    if !v.artifacts.is_empty() {
        t["artifacts"] = v.artifacts.iter().map(|a| artifact(a, &rec.role)).collect();
    }
    if !history.is_empty() {
        t["history"] = Value::Array(history);
    }
    t
}

/// The stream events that take a client from `before` (a key) to `v`:
/// new artifacts first, then the status when it changed.
pub fn events(rec: &Record, before: Option<&Value>, v: &View) -> Vec<Value> {
    let now = key(v);
    let Some(before) = before else {
        return vec![json!({"task": task_json(rec, v, Some(0))})];
    };
    let mut out = Vec::new();
    let seen: Vec<&str> = before["artifacts"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for a in v
        .artifacts
        .iter()
        .filter(|a| !seen.contains(&a.id.as_str()))
    {
        out.push(json!({"artifactUpdate": {
            "taskId": rec.id,
            "contextId": rec.context_id,
            "artifact": artifact(a, &rec.role),
            "append": false,
            "lastChunk": true,
        }}));
    }
    if before["state"] != now["state"] || before["question"] != now["question"] {
        out.push(json!({"statusUpdate": {
            "taskId": rec.id,
            "contextId": rec.context_id,
            "status": status(rec, v),
        }}));
    }
    out
}
