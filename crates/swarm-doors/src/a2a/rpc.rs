//! JSON-RPC 2.0 as A2A v1.0 binds it (docs/a2a.md): the envelope, the
//! spec's error codes, and the methods that do not stream, each a
//! synchronous function over the files (the HTTP layer runs them off the
//! async runtime).

use serde_json::{json, Map, Value};

/// JSON-RPC's and A2A's own keys (not message headers, which are spelled
/// in protocol::header::names).
pub(crate) const RPC_ID: &str = "id";
const A2A_MESSAGE: &str = "message";

use crate::agent::send::{self, Sender};
use crate::error::Error;
use crate::protocol::draft;
use crate::protocol::layout::Project;
use crate::protocol::trail::{Scope, Trail};

use super::store::{self, Canceled, Input, Record, Store};
use super::task::{self, State, View};
use super::track::{self, Tracker};

mod push;
#[cfg(test)]
mod tests;

pub use push::{create_push, delete_push, get_push, list_push};
use push::{push_from_send, save_push};

/// JSON-RPC's and A2A's error codes (A2A v1.0, "JSON-RPC error codes").
pub mod code {
    pub const PARSE: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    pub const UNSUPPORTED: i64 = -32004;
    pub const CONTENT_TYPE: i64 = -32005;
    pub const NO_EXTENDED_CARD: i64 = -32007;
    pub const VERSION: i64 = -32009;
}

/// The largest message text accepted: a `post` body's limit.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;
/// Push configs per task at most.
const MAX_PUSH_CONFIGS: usize = 8;
const MAX_URL_BYTES: usize = 2048;

#[derive(Debug)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }
    fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, message)
    }
    fn not_found(task: &str) -> RpcError {
        RpcError::new(
            code::TASK_NOT_FOUND,
            format!("no task '{}' here", crate::text::escape(task)),
        )
    }
}

impl From<Error> for RpcError {
    fn from(e: Error) -> RpcError {
        match &e {
            // A draft the swarm refuses: the CLI's own words.
            Error::Invalid { errors, .. } => RpcError::params(errors.join(" ")),
            _ => RpcError::new(code::INTERNAL, e.to_string()),
        }
    }
}

pub type Outcome = Result<Value, RpcError>;

/// A parsed request: its id (echoed), method and params.
#[derive(Debug)]
pub struct Request {
    pub id: Value,
    pub method: String,
    pub params: Map<String, Value>,
}

/// The envelope's checks: JSON, an object, `jsonrpc: "2.0"`, a string
/// method, an id that is a string or a number, params an object.
pub fn parse(body: &[u8]) -> Result<Request, (Value, RpcError)> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        (
            Value::Null,
            RpcError::new(code::PARSE, format!("not JSON: {e}")),
        )
    })?;
    let Value::Object(mut o) = v else {
        return Err((
            Value::Null,
            RpcError::new(
                code::INVALID_REQUEST,
                "a request is one JSON object (batches are not supported)",
            ),
        ));
    };
    let id = match o.remove(RPC_ID) {
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        _ => {
            return Err((
                Value::Null,
                RpcError::new(
                    code::INVALID_REQUEST,
                    "the request needs an id (a string or a number)",
                ),
            ))
        }
    };
    let bad = |m: &str| Err((id.clone(), RpcError::new(code::INVALID_REQUEST, m)));
    if o.get("jsonrpc") != Some(&json!("2.0")) {
        return bad("jsonrpc must be \"2.0\"");
    }
    let Some(Value::String(method)) = o.remove("method") else {
        return bad("method must be a string");
    };
    let params = match o.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err((id, RpcError::params("params must be an object"))),
    };
    Ok(Request { id, method, params })
}

pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn error(id: &Value, e: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}})
}

/// The methods this server knows (v1.0 names); a 0.3 name gets a hint.
pub fn unknown_method(m: &str) -> RpcError {
    let old = match m {
        "message/send" => Some("SendMessage"),
        "message/stream" => Some("SendStreamingMessage"),
        "tasks/get" => Some("GetTask"),
        "tasks/cancel" => Some("CancelTask"),
        "tasks/resubscribe" => Some("SubscribeToTask"),
        "tasks/pushNotificationConfig/set" => Some("CreateTaskPushNotificationConfig"),
        "tasks/pushNotificationConfig/get" => Some("GetTaskPushNotificationConfig"),
        "tasks/pushNotificationConfig/list" => Some("ListTaskPushNotificationConfigs"),
        "tasks/pushNotificationConfig/delete" => Some("DeleteTaskPushNotificationConfig"),
        _ => None,
    };
    let shown = crate::text::escape(&m.chars().take(64).collect::<String>());
    match old {
        Some(new) => RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("method '{shown}' is A2A 0.3's; this server speaks A2A 1.0: use {new}"),
        ),
        None => RpcError::new(code::METHOD_NOT_FOUND, format!("unknown method '{shown}'")),
    }
}

/// Who a request is for: the project, the role it addresses, and who sends.
pub struct Ctx<'a> {
    pub project: &'a Project,
    pub store: &'a Store,
    pub tracker: &'a Tracker,
    pub role: &'a str,
    pub sender: &'a str,
}

fn str_field<'a>(o: &'a Map<String, Value>, k: &str) -> Result<Option<&'a str>, RpcError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(RpcError::params(format!("{k} must be a string"))),
    }
}

fn id_field<'a>(o: &'a Map<String, Value>, k: &str) -> Result<Option<&'a str>, RpcError> {
    match str_field(o, k)? {
        Some(s) if !store::valid_id(s) => Err(RpcError::params(format!(
            "{k} must be 1-128 characters of letters, digits, '-', '_', '.', ':'"
        ))),
        other => Ok(other),
    }
}

/// The message's text: its text parts, joined by newlines; other parts are
/// refused (this swarm carries text).
fn text_of(m: &Map<String, Value>) -> Result<String, RpcError> {
    let Some(Value::Array(parts)) = m.get("parts") else {
        return Err(RpcError::params("message.parts must be a list"));
    };
    let mut out = Vec::new();
    for p in parts {
        match p.get("text") {
            Some(Value::String(t)) => out.push(t.as_str()),
            _ => {
                return Err(RpcError::new(
                    code::CONTENT_TYPE,
                    "only text parts are accepted (defaultInputModes: text/plain)",
                ))
            }
        }
    }
    let text = out.join("\n").replace("\r\n", "\n");
    if text.trim().is_empty() {
        return Err(RpcError::params("the message has no text"));
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(RpcError::params(format!(
            "the message text is {} bytes; at most {MAX_TEXT_BYTES}",
            text.len()
        )));
    }
    if text
        .chars()
        .any(|c| c != '\n' && c != '\t' && crate::text::is_control(c))
    {
        return Err(RpcError::params(
            "the message text must not contain control characters (tab and newline are fine)",
        ));
    }
    Ok(text)
}

/// A one-line summary for the subject (120 UTF-16 units with the prefix).
fn summary(text: &str, prefix: &str) -> String {
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut out = prefix.to_string();
    let mut units = out.encode_utf16().count();
    for c in first.chars() {
        units += c.len_utf16();
        if units > 117 {
            out.push_str("...");
            break;
        }
        out.push(c);
    }
    out
}

fn subject_prefix(task: &str) -> String {
    format!("a2a {task}: ")
}

/// Queues `text` as a draft from the sender; its id.
fn submit(ctx: &Ctx, text: &str) -> Result<String, RpcError> {
    let s = Sender::as_role(ctx.project, ctx.sender)?;
    let q = send::submit(&s, &draft::parse(text), "a2a")?;
    Ok(q.id)
}

/// A handoff the sender already queued for `task` (a crash between the
/// intent and the record), found by its subject.
fn queued_before(ctx: &Ctx, task: &str) -> Result<Option<String>, RpcError> {
    let trail = Trail::load(ctx.project, &Scope::originals())?;
    let prefix = subject_prefix(task);
    Ok(trail
        .originals
        .iter()
        .find(|o| {
            o.msg.sender() == Some(ctx.sender)
                && o.msg
                    .get(crate::protocol::header::names::SUBJECT)
                    .is_some_and(|s| s.starts_with(&prefix))
        })
        .map(|o| o.id().to_string()))
}

fn now_view(ctx: &Ctx, rec: &Record) -> Result<View, RpcError> {
    Ok(ctx.tracker.observe_one(ctx.project, ctx.store, rec)?)
}

/// A task of this role, or TaskNotFound.
fn task_of(ctx: &Ctx, id: Option<&str>) -> Result<Record, RpcError> {
    let Some(id) = id else {
        return Err(RpcError::params("id is required"));
    };
    match ctx.store.record(id)? {
        Some(r) if r.role == ctx.role => Ok(r),
        _ => Err(RpcError::not_found(id)),
    }
}

/// `SendMessage` (and the start of `SendStreamingMessage`): a new task is
/// a handoff queued exactly once per message id; a message naming a task
/// answers its open clarify. Returns the task and its view.
pub fn send_message(ctx: &Ctx, params: &Map<String, Value>) -> Result<(Record, View), RpcError> {
    let Some(Value::Object(msg)) = params.get(A2A_MESSAGE) else {
        return Err(RpcError::params("message is required"));
    };
    let Some(message_id) = id_field(msg, "messageId")? else {
        return Err(RpcError::params("message.messageId is required"));
    };
    match str_field(msg, "role")? {
        None | Some("ROLE_USER") | Some("ROLE_UNSPECIFIED") => {}
        Some(_) => return Err(RpcError::params("message.role must be ROLE_USER")),
    }
    let text = text_of(msg)?;
    let context_id = id_field(msg, "contextId")?;
    let push = push_from_send(params)?;
    let rec = match id_field(msg, "taskId")? {
        Some(t) => answer(ctx, task_of(ctx, Some(t))?, message_id, &text)?,
        None => start(ctx, message_id, context_id, &text, msg)?,
    };
    if let Some(mut c) = push {
        c.task_id = rec.id.clone();
        save_push(ctx, c)?;
    }
    let v = now_view(ctx, &rec)?;
    Ok((rec, v))
}

fn start(
    ctx: &Ctx,
    message_id: &str,
    context_id: Option<&str>,
    text: &str,
    msg: &Map<String, Value>,
) -> Result<Record, RpcError> {
    let id = store::task_id(ctx.role, message_id);
    let _lock = ctx.store.lock()?;
    let mut rec = match ctx.store.record(&id)? {
        Some(r) if r.handoff.is_some() => return Ok(r),
        Some(r) => r,
        None => {
            let r = Record {
                id: id.clone(),
                role: ctx.role.to_string(),
                sender: ctx.sender.to_string(),
                context_id: context_id.unwrap_or(&id).to_string(),
                message_id: message_id.to_string(),
                created_at: store::now(),
                handoff: None,
                message: Value::Object(msg.clone()),
                inputs: Vec::new(),
                canceled: None,
            };
            ctx.store.save(&r)?;
            r
        }
    };
    let handoff = match queued_before(ctx, &id)? {
        Some(h) => h,
        None => {
            let subject = summary(text, &subject_prefix(&id));
            submit(
                ctx,
                &format!(
                    "type: post\nto: {}\npriority: 50\nsubject: {subject}\n\n{text}\n",
                    ctx.role
                ),
            )?
        }
    };
    rec.handoff = Some(handoff);
    ctx.store.save(&rec)?;
    Ok(rec)
}

/// The client's answer to the task's open clarify, exactly once per
/// message id.
fn answer(ctx: &Ctx, rec: Record, message_id: &str, text: &str) -> Result<Record, RpcError> {
    let _lock = ctx.store.lock()?;
    let mut rec = ctx.store.record(&rec.id)?.unwrap_or(rec);
    let done = rec.inputs.iter().position(|i| i.message_id == message_id);
    if let Some(i) = done {
        if rec.inputs[i].answer.is_some() {
            return Ok(rec);
        }
    }
    let trail = track::load_trail(ctx.project)?;
    let v = task::view(&trail, &rec);
    let clarify = match (done, &v.question) {
        (Some(i), _) => rec.inputs[i].clarify.clone(),
        (None, Some(q)) if v.state == State::InputRequired => q.id.clone(),
        _ => {
            return Err(RpcError::new(
                code::UNSUPPORTED,
                format!(
                    "task '{}' is {}, not waiting for input: only an answer to the role's question can be sent to it",
                    rec.id,
                    v.state.wire()
                ),
            ))
        }
    };
    let i = match done {
        Some(i) => i,
        None => {
            rec.inputs.push(Input {
                message_id: message_id.to_string(),
                clarify: clarify.clone(),
                answer: None,
            });
            ctx.store.save(&rec)?;
            rec.inputs.len() - 1
        }
    };
    // An answer already queued (a crash after it) is not queued again.
    let before = trail.originals.iter().find(|o| {
        o.msg.sender() == Some(ctx.sender)
            && o.msg.in_reply_to() == Some(clarify.as_str())
            && o.msg.type_name() == Some(crate::protocol::types::ANSWER.name)
    });
    let id = match before {
        Some(o) => o.id().to_string(),
        None => submit(
            ctx,
            &format!(
                "type: answer\nto: {}\npriority: 50\nin_reply_to: {clarify}\n\n{text}\n",
                rec.role
            ),
        )?,
    };
    rec.inputs[i].answer = Some(id);
    ctx.store.save(&rec)?;
    Ok(rec)
}

fn history_length(params: &Map<String, Value>) -> Result<Option<u64>, RpcError> {
    match params.get("historyLength") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .map(Some)
            .ok_or_else(|| RpcError::params("historyLength must be a non-negative integer")),
    }
}

pub fn get_task(ctx: &Ctx, params: &Map<String, Value>) -> Outcome {
    let rec = task_of(ctx, id_field(params, "id")?)?;
    let v = now_view(ctx, &rec)?;
    Ok(task::task_json(&rec, &v, history_length(params)?))
}

/// This role's tasks, newest first (`pageSize` at most 100).
pub fn list_tasks(ctx: &Ctx, params: &Map<String, Value>) -> Outcome {
    let size = match params.get("pageSize") {
        None | Some(Value::Null) => 50,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| RpcError::params("pageSize must be 1-100"))?,
    } as usize;
    let context = str_field(params, "contextId")?;
    let mut tasks = Vec::new();
    let mut recs: Vec<Record> = ctx
        .store
        .records()?
        .into_iter()
        .filter(|r| r.role == ctx.role && context.is_none_or(|c| r.context_id == c))
        .collect();
    let total = recs.len();
    recs.reverse();
    recs.truncate(size);
    let (views, _) = ctx.tracker.observe(ctx.project, ctx.store, &recs)?;
    for (r, v) in recs.iter().zip(&views) {
        tasks.push(task::task_json(r, v, Some(0)));
    }
    Ok(json!({"tasks": tasks, "nextPageToken": "", "pageSize": size, "totalSize": total}))
}

/// `CancelTask`: a `close` to the role in reply to the handoff, and the task
/// canceled; a task already finished cannot be.
pub fn cancel_task(ctx: &Ctx, params: &Map<String, Value>) -> Outcome {
    let rec = task_of(ctx, id_field(params, "id")?)?;
    let _lock = ctx.store.lock()?;
    let mut rec = ctx.store.record(&rec.id)?.unwrap_or(rec);
    let v = now_view(ctx, &rec)?;
    if v.state == State::Canceled {
        return Ok(task::task_json(&rec, &v, None));
    }
    if v.state.is_terminal() {
        return Err(RpcError::new(
            code::TASK_NOT_CANCELABLE,
            format!("task '{}' is already {}", rec.id, v.state.wire()),
        ));
    }
    let close = match &rec.handoff {
        Some(h) => Some(submit(
            ctx,
            &format!(
                "type: close\nto: {}\npriority: 50\nin_reply_to: {h}\nreason: canceled by the A2A client\n",
                rec.role
            ),
        )?),
        None => None,
    };
    rec.canceled = Some(Canceled {
        at: store::now(),
        close,
    });
    ctx.store.save(&rec)?;
    let v = now_view(ctx, &rec)?;
    Ok(task::task_json(&rec, &v, None))
}

/// The non-streaming methods.
pub fn call(ctx: &Ctx, method: &str, params: &Map<String, Value>) -> Outcome {
    match method {
        "GetTask" => get_task(ctx, params),
        "ListTasks" => list_tasks(ctx, params),
        "CancelTask" => cancel_task(ctx, params),
        "CreateTaskPushNotificationConfig" => create_push(ctx, params),
        "GetTaskPushNotificationConfig" => get_push(ctx, params),
        "ListTaskPushNotificationConfigs" => list_push(ctx, params),
        "DeleteTaskPushNotificationConfig" => delete_push(ctx, params),
        "GetExtendedAgentCard" => Err(RpcError::new(
            code::NO_EXTENDED_CARD,
            "this agent has no extended card",
        )),
        m => Err(unknown_method(m)),
    }
}
