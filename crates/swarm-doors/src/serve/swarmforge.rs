//! SwarmForge's dashboard API on the cockpit (docs/swarmforge-compat.md §7,
//! docs/cockpit.md "SwarmForge's dashboard API"): the paths and JSON shapes
//! SwarmForge's dashboard (`pack_web.bb`) serves, so tools built for it (the
//! Matrix bridge forgelet-bridge) work against `swarm serve`.
//!
//! One truth on disk: every answer is read from this project's own files and
//! every action is the library call its CLI command makes. SwarmForge's
//! approvals are our held handoffs (`swarm approve`), its clarifications our
//! clarifies to a person (`swarm answer`), its Retry a denial with the
//! person's comments sent to the sender, its chat a person's post to the
//! master role. The held handoffs are SwarmForge's own approval folder
//! (`pending_approval/`, with `<name>.reviews.json` comments); the request
//! folders (`dashboard/clarifications/`, `dashboard/requests/`) are derived
//! from the messages by handoffd (protocol::dashboard) with the same
//! functions this file answers `clarifications` and `chat` with.
//!
//! Behind the same guard as every route (token::guard): a tool gives the
//! token as `Authorization` (a base URL `http://swarm:<token>@host:port`)
//! or `X-Swarm-Token`. An approval approves the content `GET /api/state`
//! showed (docs/security.md, "Approve what was seen").

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::agent::caller::Caller;
use crate::agent::send;
use crate::error::{Error, Token};
use crate::person::answer;
use crate::person::holds::{self, Held};
use crate::person::rejected;
use crate::protocol::config::Config;
use crate::protocol::dashboard::{master_role as master, question_text, response_text, SENT_BACK};
use crate::protocol::header::{names, Message};
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::protocol::trail::{Original, Place};
use crate::protocol::{draft, fields, grammar, rejected_tasks, types};
use crate::text::escape;

use super::{api, token, App};

/// What the journal's `approved`/`denied` name as the way in.
const VIA: &str = "cockpit (SwarmForge API)";
/// Upstream's answer to `reject`, word for word (pack_web.bb `post-approval`).
const REJECT: &str = "Reject opens the dialog; use Retry, Delete, or Accept.";
/// The largest board file read.
const MAX_BOARD_BYTES: u64 = 4 * 1024 * 1024;
/// The longest subject a post may have (docs/message-model.md).
const SUBJECT_CHARS: usize = types::MAX_SUBJECT_CHARS;

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/state", get(state))
        .route("/api/projects", get(projects).post(new_project))
        .route("/api/projects/open", post(open_project))
        .route("/api/projects/close", post(close_project))
        .route("/api/approvals/{id}/{action}", post(approval))
        .route(
            "/api/clarifications/{id}/answer",
            post(answer_clarification),
        )
        .route("/api/tasks/retry", post(retry))
        .route("/api/tasks/delete", post(delete))
        .route("/api/chat", post(chat))
        .route("/api/mission", get(mission))
}

/// Why an action did not happen: the library's error (as the cockpit
/// reports it), or a status of SwarmForge's own (404 for an unknown id).
enum No {
    Lib(Error),
    Status(StatusCode, String),
}

impl From<Error> for No {
    fn from(e: Error) -> No {
        No::Lib(e)
    }
}

/// The held handoff SwarmForge's approval `id` names, else upstream's 404
/// `Unknown approval: <id>`.
fn held(p: &Project, id: &str) -> Result<Held, No> {
    if !grammar::valid_message_id(id) {
        return Err(not_found("approval", id));
    }
    holds::list(p)?
        .into_iter()
        .find(|h| h.id == id)
        .ok_or_else(|| not_found("approval", id))
}

fn not_found(what: &str, id: &str) -> No {
    No::Status(
        StatusCode::NOT_FOUND,
        format!("Unknown {what}: {}", escape(id)),
    )
}

/// Runs synchronous library work off the async threads; a change is made
/// known to the model at once (as the cockpit's own actions do).
async fn run(
    app: &Arc<App>,
    changes: bool,
    f: impl FnOnce(&Project) -> Result<Value, No> + Send + 'static,
) -> Response {
    let project = app.project.clone();
    let r = match tokio::task::spawn_blocking(move || f(&project)).await {
        Ok(Ok(v)) => Json(crate::error::stamped(v)).into_response(),
        Ok(Err(No::Lib(e))) => api::error_response(&e),
        Ok(Err(No::Status(code, m))) => token::refuse(code, &m),
        Err(e) => api::error_response(&Error::internal(format!("internal error: {e}"))),
    };
    if changes {
        let _ = app.ticks.send(());
    }
    r
}

/// A JSON body, or none (upstream's actions take an empty body too). A
/// body in another type gets 415, bad JSON 400, both as JSON errors.
fn body<T: DeserializeOwned + Default>(h: &HeaderMap, b: &Bytes) -> Result<T, Box<Response>> {
    if b.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let json = h
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !json {
        return Err(Box::new(token::refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the request body must be JSON (Content-Type: application/json)",
        )));
    }
    serde_json::from_slice(b).map_err(|e| {
        Box::new(token::refuse(
            StatusCode::BAD_REQUEST,
            &format!("the request body is not the JSON expected here: {e}"),
        ))
    })
}

/// The project's name, as SwarmForge names a project: its folder's.
fn project_name(p: &Project) -> String {
    p.root
        .file_name()
        .map(|n| escape(&n.to_string_lossy()))
        .unwrap_or_default()
}

/// A `project` a request names must be this one (or none: a single
/// project's dashboard tags nothing with a project).
fn check_project(p: &Project, named: &Option<String>) -> Result<(), No> {
    match named.as_deref().map(str::trim) {
        None | Some("") => Ok(()),
        Some(n) if n == project_name(p) => Ok(()),
        Some(n) => Err(not_found("project", n)),
    }
}

/// SwarmForge's display name of a role: its words, capitalised
/// (pack_web.bb `display-name-for-role`).
fn display_name(role: &str) -> String {
    role.split(['-', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| {
                    f.to_uppercase()
                        .chain(c.flat_map(char::to_lowercase))
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect::<Vec<String>>()
        .join(" ")
}

/// The person the API acts as when a post is needed: the first human role.
fn person(roles: &Roles) -> Result<String, No> {
    roles
        .roles
        .iter()
        .find(|r| r.is_human())
        .map(|r| r.name.clone())
        .ok_or_else(|| {
            No::Lib(Error::not_found(
                "no human role to write as: SwarmForge's chat and Retry are a person's messages here\n  hint: add a role with `agent: human` to swarm.yaml (or `window <name> human <worktree>` to swarmforge.conf)",
            ))
        })
}

/// At most `n` characters of the first non-blank line of `s`.
fn first_line(s: &str, n: usize) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= n {
        return line.to_string();
    }
    let mut out: String = line.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Sends a `post` as the person: the subject is the text's first line.
fn post_as(p: &Project, from: &str, to: &str, subject: &str, text: &str) -> Result<Value, No> {
    let subject = first_line(subject, SUBJECT_CHARS);
    let mut d = format!("type: post\nto: {to}\npriority: 50\n");
    if !subject.is_empty() {
        d.push_str(&format!("subject: {subject}\n"));
    }
    d.push('\n');
    d.push_str(text);
    if !text.ends_with('\n') {
        d.push('\n');
    }
    if d.len() > draft::MAX_DRAFT_BYTES {
        return Err(No::Lib(Error::bad_input(format!(
            "the text must be no larger than {} bytes; got {}",
            draft::MAX_DRAFT_BYTES,
            text.len()
        ))));
    }
    let s = send::Sender::as_role(p, from)?;
    let q = send::submit(&s, &draft::parse(&d), "the cockpit's SwarmForge API")?;
    Ok(serde_json::to_value(&q).unwrap_or_default())
}

// ---- GET /api/state ------------------------------------------------------

/// A held handoff as SwarmForge lists an approval (pack_web.bb
/// `approval-entry`), with `from`/`to` (which forgelet-bridge reads for its
/// gate), what `swarm approve` shows, and (ours) its task's review
/// history, which upstream serves per document as `/api/doc`'s `history`.
fn approval_entry(p: &Project, h: &Held) -> Value {
    let m = Message::parse_bytes(h.text.as_bytes()).ok();
    let history = m
        .as_ref()
        .and_then(rejected_tasks::task_of)
        .and_then(|t| rejected_tasks::read(p, &t).ok())
        .unwrap_or_default();
    let get = |n: &str| m.as_ref().and_then(|m| m.get(n)).map(str::to_string);
    let task = get("task");
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
        "task_id": get("task_id").or_else(|| task.clone()),
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
fn clarifications(questions: &[Original], roles: &Roles) -> Vec<Value> {
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
fn chat_entries<'a>(
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
fn work_row(card: &Value) -> Value {
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
fn board_tasks(p: &Project, held: &[Value], cards: &[Value]) -> Option<Vec<Value>> {
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
async fn state(State(app): State<Arc<App>>) -> Response {
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
fn delivery_attention(p: &Project) -> Vec<Value> {
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

// ---- approvals -----------------------------------------------------------

#[derive(Deserialize, Default)]
struct ApprovalBody {
    project: Option<String>,
    /// The fingerprint reviewed (default: what `GET /api/state` showed).
    sha256: Option<String>,
}

/// `POST /api/approvals/<id>/approve|reject`: approve delivers the held
/// handoff as `swarm approve` does; reject answers as upstream does (its
/// dashboard opens a dialog; Retry sends back).
async fn approval(
    State(app): State<Arc<App>>,
    UrlPath((id, action)): UrlPath<(String, String)>,
    h: HeaderMap,
    b: Bytes,
) -> Response {
    match action.as_str() {
        "approve" => {}
        "comments" => return comments(app, id, h, b).await,
        "reject" => return token::refuse(StatusCode::BAD_REQUEST, REJECT),
        _ => {
            return token::refuse(
                StatusCode::NOT_FOUND,
                &format!(
                    "no such page: /api/approvals/{}/{}",
                    escape(&id),
                    escape(&action)
                ),
            )
        }
    }
    let q: ApprovalBody = match body(&h, &b) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    let a = app.clone();
    run(&app, true, move |p| {
        check_project(p, &q.project)?;
        held(p, &id)?;
        let shown = a.shown.lock().ok().and_then(|s| s.get(&id).cloned());
        let unnamed = q.sha256.is_none();
        let Some(seen) = q.sha256.or(shown) else {
            return Err(No::Lib(Error::refused(
                Token::ChangedSinceReview,
                format!("{id} was not shown by GET /api/state since it was held; read the state, then approve what it shows"),
                Vec::new(),
            )));
        };
        let path = match holds::approve(p, &id, &seen, VIA) {
            Err(e) if unnamed && e.token_name() == Token::ChangedSinceReview.name() => {
                return Err(No::Lib(Error::refused(
                    Token::ChangedSinceReview,
                    format!("{id} changed since GET /api/state first showed it; nothing was approved. Review it again and approve it by its sha256 (the cockpit's Approve button, or `swarm approve {id} --sha256 <sha256>`)"),
                    Vec::new(),
                )))
            }
            r => r?,
        };
        Ok(json!({"ok": true, "status": "approved", "id": id, "sha256": seen, "path": path}))
    })
    .await
}

#[derive(Deserialize, Default)]
struct CommentsBody {
    path: Option<String>,
    comments: Option<String>,
    project: Option<String>,
}

/// `POST /api/approvals/<id>/comments {path, comments}`: a person's review
/// comments on one document of a held handoff, kept beside it as
/// SwarmForge keeps them (`<name>.reviews.json`, pack_web.bb
/// `save-review!`) and shown as the approval's `reviews`.
async fn comments(app: Arc<App>, id: String, h: HeaderMap, b: Bytes) -> Response {
    let q: CommentsBody = match body(&h, &b) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    run(&app, true, move |p| {
        check_project(p, &q.project)?;
        held(p, &id)?;
        let doc = q.path.unwrap_or_default();
        if doc.trim().is_empty() {
            return Err(No::Status(StatusCode::BAD_REQUEST, "Missing path".into()));
        }
        holds::save_comments(p, &id, &doc, &q.comments.unwrap_or_default())?;
        Ok(json!({"ok": true}))
    })
    .await
}

#[derive(Deserialize, Default)]
struct RetryBody {
    id: Option<String>,
    comments: Option<String>,
    project: Option<String>,
}

/// `POST /api/tasks/retry {id, comments}`: sends a held handoff back to
/// its sender. Denied as `swarm deny` does (to the sender's `failed/`,
/// `denied: sent back: …`), then the comments reach the sender as the
/// person's `post`, so the agent hears it and does the work again.
async fn retry(State(app): State<Arc<App>>, h: HeaderMap, b: Bytes) -> Response {
    let q: RetryBody = match body(&h, &b) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    run(&app, true, move |p| {
        check_project(p, &q.project)?;
        let id = q.id.unwrap_or_default();
        if id.trim().is_empty() {
            return Err(No::Status(
                StatusCode::BAD_REQUEST,
                "Missing approval id".into(),
            ));
        }
        let held = held(p, &id)?;
        let roles = Roles::load(&p.roles_tsv())?;
        let me = person(&roles)?;
        let comments = q.comments.unwrap_or_default();
        let said = first_line(&comments, types::MAX_REASON_CHARS - 20);
        let reason = if said.is_empty() {
            "sent back".to_string()
        } else {
            format!("sent back: {said}")
        };
        // Upstream's Retry snapshots the commit first (person::rejected);
        // the comments join the task's review history.
        let snapshot = rejected::snapshot_held(p, &id)?;
        let denied = holds::deny_as(p, &id, &reason, VIA, Some(comments.as_str()))?;
        let what = held.title.clone().unwrap_or_else(|| held.kind.clone());
        // The review comments go with it (pack_web.bb `retry-message`:
        // "path:\ncomments" per document), read before the denial drops them.
        let findings: String = held
            .reviews
            .iter()
            .filter_map(|(doc, t)| t.as_str().map(|t| format!("\n\n{doc}:\n{}", t.trim())))
            .collect();
        let text = format!(
            "{}{findings}\n\n(Your {} {id} was held for approval and sent back by a person; it is in your failed/ folder. Do the work again with these comments in mind.)\n",
            if comments.trim().is_empty() { "Sent back without comments." } else { comments.trim() },
            held.kind,
        );
        let feedback = post_as(p, &me, &held.from, &format!("{SENT_BACK}{what}"), &text)
            .map_err(|e| match e {
                No::Lib(e) => No::Lib(Error::env(format!(
                    "{id} was denied ({}), but the comments could not be sent to {}: {e}",
                    denied.display(),
                    held.from
                ))),
                other => other,
            })?;
        Ok(json!({"ok": true, "status": "sent_back", "id": id, "denied": denied, "feedback": feedback, "snapshot": snapshot}))
    })
    .await
}

#[derive(Deserialize, Default)]
struct DeleteBody {
    id: Option<String>,
    name: Option<String>,
    project: Option<String>,
}

/// `POST /api/tasks/delete {id}` (the dashboard's Delete in its Reject
/// dialog) or `{name}` (a card marked rejected), as pack_web.bb
/// `post-delete-task`: a held handoff is deleted as person::rejected
/// says (snapshot, denied, archived, history dropped, worktree rolled
/// back when nothing can be lost). A card is never marked rejected here
/// (upstream marks one with `.swarmforge/notify/reject-<name>`, which
/// nothing writes today), so `{name}` is upstream's `Not rejected`.
async fn delete(State(app): State<Arc<App>>, h: HeaderMap, b: Bytes) -> Response {
    let q: DeleteBody = match body(&h, &b) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    run(&app, true, move |p| {
        check_project(p, &q.project)?;
        let id = q.id.unwrap_or_default();
        if id.trim().is_empty() {
            let name = q.name.unwrap_or_default();
            let why = if name.trim().is_empty() {
                "Missing task name".to_string()
            } else {
                format!("Not rejected: {}", escape(&name))
            };
            return Err(No::Status(StatusCode::BAD_REQUEST, why));
        }
        held(p, &id)?;
        let d = rejected::delete(p, &id, VIA)?;
        let mut v = serde_json::to_value(&d).unwrap_or_default();
        v["ok"] = json!(true);
        v["status"] = json!("deleted");
        Ok(v)
    })
    .await
}

// ---- clarifications, chat ------------------------------------------------

#[derive(Deserialize, Default)]
struct AnswerBody {
    text: Option<String>,
    project: Option<String>,
}

/// Option numbers (`2`, `1,3`) that are all options of the clarify: the
/// person picked them; anything else is their own words.
fn as_choices(text: &str, options: usize) -> Option<Vec<usize>> {
    let t = text.trim();
    if options == 0
        || t.is_empty()
        || !t
            .chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == ' ')
    {
        return None;
    }
    fields::parse_choices(t).filter(|v| v.iter().all(|n| (1..=options).contains(n)))
}

/// `POST /api/clarifications/<id>/answer {text}`: `swarm answer` as the
/// person the clarify asks; a text of option numbers chooses them.
async fn answer_clarification(
    State(app): State<Arc<App>>,
    UrlPath(id): UrlPath<String>,
    h: HeaderMap,
    b: Bytes,
) -> Response {
    let q: AnswerBody = match body(&h, &b) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    run(&app, true, move |p| {
        check_project(p, &q.project)?;
        if !grammar::valid_message_id(&id) {
            return Err(not_found("clarification", &id));
        }
        let roles = Roles::load(&p.roles_tsv())?;
        let max = Config::load(&p.config_file())?.limits.max_file_bytes;
        let Some(copy) = answer::clarify_copy(&roles, p, &id, max) else {
            return Err(not_found("clarification", &id));
        };
        let text = q.text.unwrap_or_default();
        let options = fields::options(&copy.msg.body).len();
        let (choices, own) = match as_choices(&text, options) {
            Some(c) => (c, None),
            None => (
                Vec::new(),
                Some(text.as_str()).filter(|t| !t.trim().is_empty()),
            ),
        };
        if choices.is_empty() && own.is_none() {
            return Err(No::Lib(Error::bad_input("give the answer's text")));
        }
        let a = answer::answer(p, &id, &choices, own, &Caller::Person)?;
        Ok(json!({"ok": true, "status": "answered", "id": id, "role": a.role, "queued": a.queued}))
    })
    .await
}

#[derive(Deserialize, Default)]
struct ChatBody {
    text: Option<String>,
}

/// `POST /api/chat {text}`: the person's post to the master role (blank
/// text: nothing sent, `ok` as upstream answers).
async fn chat(State(app): State<Arc<App>>, h: HeaderMap, b: Bytes) -> Response {
    let q: ChatBody = match body(&h, &b) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    run(&app, true, move |p| {
        let text = q.text.unwrap_or_default();
        if text.trim().is_empty() {
            return Ok(json!({"ok": true, "status": "ignored"}));
        }
        let roles = Roles::load(&p.roles_tsv())?;
        let me = person(&roles)?;
        let Some(to) = master(&roles).map(|r| r.name.clone()) else {
            return Err(No::Lib(Error::not_found("no agent role to chat with")));
        };
        let q = post_as(p, &me, &to, &text, &text)?;
        Ok(json!({"ok": true, "status": "queued", "id": q["id"], "to": to, "queued": q}))
    })
    .await
}

// ---- mission -------------------------------------------------------------

/// The largest `mission.md` served.
const MAX_MISSION_BYTES: u64 = 1024 * 1024;

/// `GET /api/mission`: the project's `mission.md` as plain text, empty
/// when there is none (pack_web.bb `get-mission`). A symlink is not
/// followed (it could point out of the project): served as none.
async fn mission(State(app): State<Arc<App>>) -> Response {
    let project = app.project.clone();
    let text = tokio::task::spawn_blocking(move || {
        let file = project.mission_file();
        let plain = std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_file());
        plain
            .then(|| crate::fsx::read_bounded(&file, MAX_MISSION_BYTES).ok())
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    })
    .await
    .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

// ---- projects ------------------------------------------------------------

/// This project as SwarmForge's forge lists projects.
fn project_list(p: &Project) -> Value {
    let name = project_name(p);
    json!({
        "ok": true,
        "projects": [{"name": name, "open": true, "root": p.root}],
        "open_projects": [name],
        "all_projects": [name],
    })
}

async fn projects(State(app): State<Arc<App>>) -> Response {
    run(&app, false, |p| Ok(project_list(p))).await
}

#[derive(Deserialize, Default)]
struct ProjectBody {
    name: Option<String>,
}

/// Opening this project is a no-op; `swarm serve` serves one project, so
/// creating or closing one is refused with what to do instead.
async fn open_project(State(app): State<Arc<App>>, h: HeaderMap, b: Bytes) -> Response {
    let q: ProjectBody = match body(&h, &b) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    run(&app, false, move |p| {
        check_project(p, &q.name.or(Some(String::new())))?;
        Ok(project_list(p))
    })
    .await
}

async fn new_project(State(app): State<Arc<App>>) -> Response {
    let root = app.project.root.display().to_string();
    token::refuse(
        StatusCode::CONFLICT,
        &format!("swarm serve serves one project ({}); create another with `swarm init <dir>` and run `swarm serve` there", escape(&root)),
    )
}

async fn close_project(State(app): State<Arc<App>>) -> Response {
    let root = app.project.root.display().to_string();
    token::refuse(
        StatusCode::CONFLICT,
        &format!(
            "swarm serve serves one project ({}); stop the server to close it",
            escape(&root)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_names_and_option_numbers() {
        assert_eq!(display_name("lead-dev_ops"), "Lead Dev Ops");
        assert_eq!(display_name("qa"), "Qa");
        assert_eq!(as_choices("2", 2), Some(vec![2]));
        assert_eq!(as_choices("1, 2", 2), Some(vec![1, 2]));
        assert_eq!(as_choices("3", 2), None);
        assert_eq!(as_choices("2 parsers", 2), None);
        assert_eq!(as_choices("2", 0), None);
        assert_eq!(first_line("\n  hello\nworld", 10), "hello");
        assert_eq!(first_line("abcdef", 4), "abc…");
    }
}
