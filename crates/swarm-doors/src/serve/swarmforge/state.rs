//! `GET /api/state`: SwarmForge's whole dashboard in one answer (pack_web.bb
//! `state`): the approvals (our held handoffs), the clarifications and chat
//! (derived from the messages as handoffd derives the request folders), the
//! board and what needs a person. The invariant: every field is read from
//! this project's files at the time of the call; nothing is kept between
//! calls.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use serde_json::{json, Value};

use crate::error::Error;
use crate::person::holds;
use crate::person::holds::Held;
use crate::protocol::dashboard::{question_text, response_text, SENT_BACK};
use crate::protocol::header::{names, Header, Message};
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::protocol::trail::{Original, Place};
use crate::protocol::{fields, rejected_tasks, types};

use super::super::App;
use super::{display_name, master, run, MAX_BOARD_BYTES};

/// A held handoff as SwarmForge lists an approval (pack_web.bb
/// `approval-entry`), with `from`/`to` (which forgelet-bridge reads for its
/// gate), what `swarm approve` shows, and (ours) its task's review
/// history, which upstream serves per document as `/api/doc`'s `history`.
pub(super) fn approval_entry(p: &Project, h: &Held) -> Value {
    let m = Message::parse_bytes(h.text.as_bytes()).ok();
    let history = m
        .as_ref()
        .and_then(rejected_tasks::task_of)
        .and_then(|t| rejected_tasks::read(p, &t).ok())
        .unwrap_or_default();
    let get = |n: Header| m.as_ref().and_then(|m| m.get(n)).map(str::to_string);
    let task = get(names::TASK);
    let artifacts: Vec<String> = m
        .as_ref()
        .map(|m| {
            m.get_all(names::ARTIFACT)
                .map(|a| a.splitn(3, ' ').nth(2).unwrap_or(a).to_string())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "id": h.id,
        "gate": format!("{} → {}", h.from, h.to),
        "from": h.from,
        "to": h.to,
        "task_id": get(names::TASK_ID).or_else(|| task.clone()),
        "task": task,
        "artifacts": artifacts,
        "reviews": h.reviews,
        "history": history,
        "type": h.kind,
        "title": h.title,
        "sha256": h.sha256,
        "text": h.text,
    })
}

/// The clarifies asked of a person, pending then done, as SwarmForge's
/// clarifications (pack_web.bb `parse-clarification`): `role` is who asked
/// (the role the answer goes back to).
pub(super) fn clarifications(questions: &[Original], roles: &Roles) -> Vec<Value> {
    let to_person = |m: &Message| {
        roles
            .find(m.to().unwrap_or(""))
            .is_some_and(|r| r.is_human())
    };
    let settles = |id: &str| {
        questions.iter().find(|o| {
            o.place != Place::Failed
                && o.msg.in_reply_to() == Some(id)
                && [types::ANSWER.name, types::CLOSE.name]
                    .iter()
                    .any(|k| o.msg.type_name() == Some(*k))
        })
    };
    let mut out: Vec<(bool, Value)> = questions
        .iter()
        .filter(|o| o.place != Place::Failed)
        .filter(|o| o.msg.type_name() == Some(types::CLARIFY.name) && to_person(&o.msg))
        .map(|o| {
            let m = &o.msg;
            let done = settles(o.id());
            (
                done.is_some(),
                json!({
                    "id": o.id(),
                    "status": if done.is_some() { "done" } else { "pending" },
                    "role": m.sender(),
                    "to": m.to(),
                    "body": question_text(m),
                    "options": fields::options(&m.body),
                    "response": done.map(|d| response_text(m, &d.msg)).unwrap_or_default(),
                    "created_at": m.get(names::CREATED_AT),
                }),
            )
        })
        .collect();
    out.sort_by_key(|(done, _)| *done);
    out.into_iter().map(|(_, v)| v).collect()
}

/// The person's posts to the master role (not Retry's comments) and the
/// first reply to each, as SwarmForge's chat (pack_web.bb `parse-chat`),
/// from the messages kept.
pub(super) fn chat_entries<'a>(
    messages: impl Iterator<Item = &'a Value> + Clone,
    roles: &Roles,
    master: &str,
) -> Vec<Value> {
    let human = |v: &Value| {
        v["from"]
            .as_str()
            .and_then(|f| roles.find(f))
            .is_some_and(|r| r.is_human())
    };
    messages
        .clone()
        .filter(|v| {
            human(v)
                && v["type"] == "post"
                && v["recipients"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|x| x == master))
                && !v["headers"]["subject"]
                    .as_str()
                    .is_some_and(|s| s.starts_with(SENT_BACK))
        })
        .map(|v| {
            let id = v["id"].as_str().unwrap_or("");
            let reply = messages
                .clone()
                .find(|r| r["headers"]["in_reply_to"].as_str() == Some(id));
            let response = reply
                .map(|r| {
                    r["body"]
                        .as_str()
                        .filter(|b| !b.trim().is_empty())
                        .or(r["summary"].as_str())
                        .unwrap_or("")
                        .trim()
                        .to_string()
                })
                .unwrap_or_default();
            json!({
                "id": id,
                "status": if reply.is_some() { "done" } else { "pending" },
                "body": v["body"],
                "response": response,
                "created_at": v["created_at"],
            })
        })
        .collect()
}

/// A role's work as SwarmForge's `work_in_flight` row (pack_web.bb
/// `queue-row`), from its card: `state` is `no_session` (no agent
/// running), `live` (an item in process) or `idle`; `activity` is
/// upstream's 0–6 scale of how much the pane moves, here 6 while the agent
/// is busy and 0 otherwise; `activity_line` is its last activity record.
pub(super) fn work_row(card: &Value) -> Value {
    let ip = &card["in_process"];
    let word = card["state"].as_str().unwrap_or("");
    let state = if word.is_empty() || word == "dead" || word == "parked" {
        "no_session"
    } else if !ip.is_null() {
        "live"
    } else {
        "idle"
    };
    let task = ip["summary"].as_str().unwrap_or("").to_string();
    let tasks: Vec<&str> = if task.is_empty() { vec![] } else { vec![&task] };
    json!({
        "task": task,
        "tasks": tasks,
        "batch_tasks": [],
        "role": card["role"],
        "state": state,
        "updated_at": ip["since"].as_str().or(card["since"].as_str()).unwrap_or(""),
        "activity": if word == "busy" { 6 } else { 0 },
        "activity_line": card["activity"],
    })
}

/// The board's cards (`.swarmforge/board/tasks.tsv`: name, lane, created,
/// updated, task id, audit count; pack_web.bb `task-entry`), when there is
/// a board; `status` as upstream words it where it can be told from here.
pub(super) fn board_tasks(p: &Project, held: &[Value], cards: &[Value]) -> Option<Vec<Value>> {
    let file = p.swarmforge().join("board").join("tasks.tsv");
    let bytes = crate::fsx::read_bounded(&file, MAX_BOARD_BYTES).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let tasks = text
        .lines()
        .filter_map(|line| {
            let c: Vec<&str> = line.split('\t').collect();
            let (name, lane) = (c.first()?.trim(), c.get(1)?.trim());
            if name.is_empty() || lane.is_empty() {
                return None;
            }
            let id = c
                .get(4)
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .unwrap_or(name);
            let waiting = held.iter().any(|h| h["task_id"] == id || h["task"] == name);
            let busy = cards
                .iter()
                .any(|w| w["role"] == lane && w["state"] == "live");
            let status = match () {
                _ if lane == "done" => "",
                _ if waiting => "Waiting for approval",
                _ if busy => "in process",
                _ => "waiting in queue",
            };
            Some(json!({
                "name": name,
                "id": id,
                "lane": lane,
                "updated_at": c.get(3).map(|s| s.trim()).unwrap_or(""),
                "audit_count": c.get(5).and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(0),
                "status": status,
            }))
        })
        .collect();
    Some(tasks)
}

/// `GET /api/state`: SwarmForge's dashboard state (pack_web.bb
/// `dashboard-state`) of this project.
pub(super) async fn state(State(app): State<Arc<App>>) -> Response {
    let a = app.clone();
    run(&app, false, move |p| {
        let held = holds::list(p)?;
        let m = a
            .model
            .lock()
            .map_err(|_| Error::internal("internal error: the cockpit's model is unusable"))?;
        let roles = m.roles().clone();
        let master = master(&roles).map(|r| r.name.clone()).unwrap_or_default();
        let work: Vec<Value> = roles
            .roles
            .iter()
            .filter(|r| !r.is_human() && !r.is_remote())
            .filter_map(|r| m.cards().get(&r.name).map(work_row))
            .collect();
        let clar = clarifications(m.questions(), &roles);
        let chat = chat_entries(m.messages(), &roles, &master);
        drop(m);
        // What an approval through it approves: the content as first
        // shown, kept across later reads. The held file is in the sender's
        // own queue folder: rewritten while a person reads it, a refreshed
        // state would otherwise make the click approve what they never
        // read (docs/security.md, "Approve what was seen").
        if let Ok(mut shown) = a.shown.lock() {
            shown.retain(|id, _| held.iter().any(|h| &h.id == id));
            for h in &held {
                shown
                    .entry(h.id.clone())
                    .or_insert_with(|| h.sha256.clone());
            }
        }
        let approvals: Vec<Value> = held.iter().map(|h| approval_entry(p, h)).collect();
        let tasks = board_tasks(p, &approvals, &work);
        let lanes: Vec<String> = match &tasks {
            Some(_) => roles
                .roles
                .iter()
                .filter(|r| !r.is_human() && !r.is_remote())
                .map(|r| r.name.clone())
                .chain(["done".to_string()])
                .collect(),
            None => Vec::new(),
        };
        Ok(json!({
            "master_role": master,
            "master_display": display_name(&master),
            "lanes": lanes,
            "tasks": tasks.unwrap_or_default(),
            "approvals": approvals,
            "work_in_flight": work,
            "chat": chat,
            "clarifications": clar,
            // Ours: SwarmForge's dashboard shows these in its Attention
            // (the record format upstream was not seen).
            "delivery_attention": delivery_attention(p),
            // Ours: what `.swarmforge/rejected-tasks/` keeps (review
            // histories, Delete's copies); upstream's dashboard reads it
            // only through `/api/doc`.
            "rejected_tasks": rejected_tasks::list(p),
        }))
    })
    .await
}

/// The deliveries that failed three times and are being retried.
pub(super) fn delivery_attention(p: &Project) -> Vec<Value> {
    crate::views::attention::deliveries(p, crate::protocol::clock::now())
        .into_iter()
        .map(|i| {
            json!({
                "id": i.id,
                "role": i.role,
                "since": i.since,
                "body": i.text,
                "record": i.path,
            })
        })
        .collect()
}
