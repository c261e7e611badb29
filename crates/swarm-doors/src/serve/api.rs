//! The cockpit's routes: the page, read-only JSON, and the actions. Every
//! action calls the library function the CLI command calls (so it writes the
//! same files, with the same validation: ids through protocol/grammar), and
//! a refusal answers 4xx with the CLI's error text.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::agent::send;
use crate::bridge::{control, swarmwide};
use crate::error::{exit, Error, Result};
use crate::person::answer;
use crate::protocol::clock;
use crate::protocol::draft;
use crate::protocol::grammar;
use crate::protocol::header::Header;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::views::{audit, receipts, status};

use super::{stream, token, App};

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The most messages one `load earlier` returns.
const PAGE_LIMIT: usize = 500;

/// The cockpit's own routes; `serve` adds SwarmForge's (`swarmforge`), the
/// fallbacks and the token guard.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/", get(index))
        .route(
            "/app.js",
            get(|| asset(APP_JS, "text/javascript; charset=utf-8")),
        )
        .route(
            "/app.css",
            get(|| asset(APP_CSS, "text/css; charset=utf-8")),
        )
        .route("/api/status", get(status_json))
        .route("/api/snapshot", get(snapshot))
        .route("/api/live", get(stream::live))
        .route("/api/transcript", get(transcript_json))
        .route("/api/receipts", get(receipts_json))
        .route("/api/audit", get(audit_json))
        .route("/api/events", get(stream::events))
        .route("/api/approve", post(approve))
        .route("/api/deny", post(deny))
        .route("/api/pause", post(pause))
        .route("/api/resume", post(resume))
        .route("/api/answer", post(answer_clarify))
        .route("/api/send", post(send_as_human))
        .route("/api/inbox/done", post(inbox_done))
        .route("/api/choose", post(choose))
        .route("/api/cancel", post(super::cancel::cancel_turn))
}

/// Every route of `swarm serve`, behind the token guard.
pub fn router(app: Arc<App>, more: Router<Arc<App>>) -> Router {
    routes()
        .merge(more)
        .fallback(not_found)
        .method_not_allowed_fallback(not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            token::guard,
        ))
        .with_state(app)
}

async fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

async fn not_found(uri: Uri) -> Response {
    token::refuse(
        StatusCode::NOT_FOUND,
        &format!("no such page: {}", crate::text::escape(uri.path())),
    )
}

async fn not_allowed() -> Response {
    token::refuse(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed here (actions are POSTs with a JSON body; reads are GETs)",
    )
}

/// A JSON body, or the documented JSON error (a wrong content type, bad
/// JSON, a missing field) instead of axum's plain text.
pub(super) struct Body<T>(pub(super) T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> axum::extract::FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(
        req: axum::extract::Request,
        state: &S,
    ) -> std::result::Result<Self, Response> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Body(v)),
            Err(e) => Err(token::refuse(
                e.status(),
                &format!(
                    "the request body must be JSON (Content-Type: application/json): {}",
                    e.body_text()
                ),
            )),
        }
    }
}

async fn index(State(app): State<Arc<App>>, uri: Uri) -> Response {
    // The first load: the token becomes a cookie and leaves the URL (the
    // redirect replaces the address and its history entry).
    if let Some(t) = token::query_token(uri.query()) {
        let mut res = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
        if token::same(t, &app.token) {
            if let Ok(v) = token::set_cookie(app.port, &app.token).parse() {
                res.headers_mut().insert(header::SET_COOKIE, v);
            }
        }
        return res;
    }
    (
        [(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
        )],
        Html(INDEX),
    )
        .into_response()
}

async fn snapshot(State(app): State<Arc<App>>) -> Response {
    match app.model.lock() {
        Ok(m) => Json(crate::error::stamped(m.snapshot())).into_response(),
        Err(_) => error_response(&Error::internal(
            "internal error: the cockpit's model is unusable",
        )),
    }
}

/// A library error as the CLI reports it: 400 for usage and environment
/// errors, 422 for refusals (the CLI's exit 2), the text and token in JSON
/// (also as `error`, the key SwarmForge's dashboard answers with).
pub(super) fn error_response(e: &Error) -> Response {
    let code = match e.exit_code() {
        exit::REFUSED => StatusCode::UNPROCESSABLE_ENTITY,
        _ if matches!(e, Error::Io { .. }) => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    };
    let mut v = e.to_json();
    v["error"] = v["message"].clone();
    if let Error::Invalid { errors, .. } = e {
        v["errors"] = json!(errors);
        v["errors_by_field"] = json!(by_field(errors));
    }
    (code, Json(crate::error::stamped(v))).into_response()
}

/// Runs synchronous library work off the async threads.
pub(super) async fn blocking(
    app: &Arc<App>,
    f: impl FnOnce(&Project) -> Result<Value> + Send + 'static,
) -> Response {
    let project = app.project.clone();
    match tokio::task::spawn_blocking(move || f(&project)).await {
        Ok(Ok(v)) => Json(crate::error::stamped(v)).into_response(),
        Ok(Err(e)) => error_response(&e),
        Err(e) => error_response(&Error::internal(format!("internal error: {e}"))),
    }
}

async fn status_json(State(app): State<Arc<App>>) -> Response {
    let a = app.clone();
    blocking(&app, move |p| {
        // The model keeps the clarifies: no trail read per request.
        let attention = a
            .model
            .lock()
            .map_err(|_| Error::internal("internal error: the cockpit's model is unusable"))?
            .attention_items();
        let s = status::collect_with(p, attention)?;
        Ok(serde_json::to_value(&s).unwrap_or_default())
    })
    .await
}

#[derive(Deserialize)]
struct Earlier {
    /// Messages before this id (default: the newest).
    before: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/transcript[?before=ID&limit=N]`: a page of messages, oldest
/// first (the page's "load earlier").
async fn transcript_json(State(app): State<Arc<App>>, Query(q): Query<Earlier>) -> Response {
    let limit = q.limit.unwrap_or(super::model::FIRST).clamp(1, PAGE_LIMIT);
    if let Some(id) = &q.before {
        if let Err(e) = check_id(id) {
            return error_response(&e);
        }
    }
    let a = app.clone();
    blocking(&app, move |p| {
        let (messages, more) = a
            .model
            .lock()
            .map_err(|_| Error::internal("internal error: the cockpit's model is unusable"))?
            .earlier(q.before.as_deref(), limit)?;
        let sessions = crate::forum::session::list(p).unwrap_or_default();
        Ok(json!({
            "messages": messages,
            "more": more,
            "sessions": sessions,
        }))
    })
    .await
}

#[derive(Deserialize)]
struct IdQuery {
    id: String,
}

fn check_id(id: &str) -> Result<()> {
    if grammar::valid_message_id(id) {
        Ok(())
    } else {
        Err(Error::bad_input(format!(
            "'{}' is not a message id.",
            crate::text::escape(id)
        )))
    }
}

async fn receipts_json(State(app): State<Arc<App>>, Query(q): Query<IdQuery>) -> Response {
    blocking(&app, move |p| {
        check_id(&q.id)?;
        let t = receipts::trail_of(p, &q.id)?;
        match receipts::collect(&t, &q.id) {
            Some(r) => Ok(receipts::json(&r)),
            None => Err(Error::not_found(format!(
                "No message {} in {}",
                q.id,
                p.root.display()
            ))),
        }
    })
    .await
}

async fn audit_json(State(app): State<Arc<App>>) -> Response {
    let a = app.clone();
    blocking(&app, move |p| {
        // Read whole once; then only what changed since (serve/kept.rs).
        let mut kept = a
            .kept
            .lock()
            .map_err(|_| Error::internal("internal error: the cockpit's audit is unusable"))?;
        let t = kept.trail(p)?;
        Ok(audit::json(&audit::report(t), clock::now()))
    })
    .await
}

/// An approval names the sha256 of the message the page showed.
#[derive(Deserialize)]
struct ApproveBody {
    id: String,
    sha256: String,
}

async fn approve(State(app): State<Arc<App>>, Body(q): Body<ApproveBody>) -> Response {
    blocking(&app, move |p| {
        // Wherever in the swarm it is held (docs/bridge.md, "One control").
        let d = swarmwide::approve(p, &q.id, &q.sha256, "cockpit")?;
        let mut v = d.json("approved", &q.id);
        v["sha256"] = json!(q.sha256);
        Ok(v)
    })
    .await
}

#[derive(Deserialize)]
struct DenyBody {
    id: String,
    reason: String,
}

async fn deny(State(app): State<Arc<App>>, Body(q): Body<DenyBody>) -> Response {
    blocking(&app, move |p| {
        let d = swarmwide::deny(p, &q.id, &q.reason, "cockpit")?;
        let mut v = d.json("denied", &q.id);
        v["reason"] = json!(q.reason);
        Ok(v)
    })
    .await
}

#[derive(Deserialize, Default)]
struct PauseBody {
    #[serde(default)]
    types: Vec<String>,
}

async fn pause(State(app): State<Arc<App>>, body: Option<Json<PauseBody>>) -> Response {
    let types = body.map(|b| b.0.types).unwrap_or_default();
    let r = blocking(&app, move |p| {
        let (s, c) = swarmwide::pause(p, &types, false)?;
        let control = control::json_id(c.as_ref());
        Ok(json!({"status": "paused", "types": s.types, "since": s.since, "control": control}))
    })
    .await;
    let _ = app.ticks.send(());
    r
}

async fn resume(State(app): State<Arc<App>>) -> Response {
    let r = blocking(&app, |p| {
        let (was, c) = swarmwide::resume(p, false)?;
        let control = control::json_id(c.as_ref());
        Ok(json!({"status": "resumed", "was_paused": was, "control": control}))
    })
    .await;
    let _ = app.ticks.send(());
    r
}

#[derive(Deserialize)]
struct AnswerBody {
    id: String,
    #[serde(default)]
    choices: Vec<usize>,
    text: Option<String>,
}

async fn answer_clarify(State(app): State<Arc<App>>, Body(q): Body<AnswerBody>) -> Response {
    blocking(&app, move |p| {
        let text = q.text.as_deref().filter(|t| !t.trim().is_empty());
        if q.choices.is_empty() && text.is_none() {
            return Err(Error::bad_input("give a choice and/or a text"));
        }
        // The draft's errors, reported against the clarify (as `swarm answer` does).
        // A copy on another host only: the answer goes there.
        if let Some(c) = swarmwide::answer_elsewhere(p, &q.id, &q.choices, text)? {
            return Ok(json!({"status": "sent", "clarify": q.id, "control": c.id}));
        }
        // Whoever holds the cockpit's token is the person (docs/security.md).
        let person = crate::agent::caller::Caller::Person;
        let a = answer::answer(p, &q.id, &q.choices, text, &person).map_err(|e| match e {
            Error::Invalid { errors, .. } => Error::invalid(
                crate::error::Token::AnswerInvalid,
                crate::text::escape(&q.id),
                errors,
            ),
            e => e,
        })?;
        let mut v = serde_json::to_value(&a).unwrap_or_default();
        v["status"] = json!("answered");
        Ok(v)
    })
    .await
}

#[derive(Deserialize)]
struct DoneBody {
    id: String,
    /// The role it waits for (default: any human role).
    role: Option<String>,
}

/// "Mark done" on an item waiting for a person: `swarm inbox done`.
async fn inbox_done(State(app): State<Arc<App>>, Body(q): Body<DoneBody>) -> Response {
    let r = blocking(&app, move |p| {
        let (e, path) = crate::agent::mailbox::mark_done(p, q.role.as_deref(), &q.id)?;
        Ok(json!({"status": "completed", "id": e.id, "role": e.role, "completed": path}))
    })
    .await;
    let _ = app.ticks.send(());
    r
}

#[derive(Deserialize)]
struct SendBody {
    /// The human role sending.
    role: String,
    /// The draft, as `swarm-handoff` reads it from a file.
    draft: Option<String>,
    /// Or the compose form's fields (`type`, `to`, `priority`, `subject`,
    /// `message`, `in_reply_to`, `body`, ...), made into that draft.
    fields: Option<serde_json::Map<String, Value>>,
}

/// A header name as drafts spell them (`in_reply_to`, `allow_multiple`).
fn header_name(s: &str) -> bool {
    s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The header order of a composed draft; other fields follow by name.
const FIELD_ORDER: &[Header] = &[
    Header::Type,
    Header::To,
    Header::Cc,
    Header::Priority,
    Header::InReplyTo,
    Header::Subject,
    Header::Message,
];

/// The draft the compose form's fields spell: one header per non-empty
/// field, the body after a blank line. A header value must be one line.
fn compose(fields: &serde_json::Map<String, Value>) -> std::result::Result<String, Vec<String>> {
    let mut names: Vec<&String> = fields.keys().filter(|k| *k != "body").collect();
    names.sort_by_key(|k| {
        (
            FIELD_ORDER
                .iter()
                .position(|o| o == k.as_str())
                .unwrap_or(usize::MAX),
            k.to_string(),
        )
    });
    let mut draft = String::new();
    let mut errors = Vec::new();
    for name in names {
        let v = match &fields[name] {
            Value::String(s) => s.trim().to_string(),
            Value::Number(n) => n.to_string(),
            Value::Null => continue,
            _ => {
                errors.push(format!(
                    "Header '{}' must be text.",
                    crate::text::escape(name)
                ));
                continue;
            }
        };
        if !header_name(name) {
            errors.push(format!(
                "'{}' is not a header name.",
                crate::text::escape(name)
            ));
        } else if v.contains(['\n', '\r']) {
            errors.push(format!("Header '{name}' must be one line."));
        } else if !v.is_empty() {
            draft.push_str(&format!("{name}: {v}\n"));
        }
    }
    if let Some(b) = fields
        .get("body")
        .and_then(Value::as_str)
        .filter(|b| !b.trim().is_empty())
    {
        draft.push('\n');
        draft.push_str(b);
        if !b.ends_with('\n') {
            draft.push('\n');
        }
    }
    if errors.is_empty() {
        Ok(draft)
    } else {
        Err(errors)
    }
}

/// Each error with the form field it is about (the first field it names
/// in quotes; recipients are `to`), or `""` for the draft as a whole.
fn by_field(errors: &[String]) -> Vec<(String, String)> {
    errors
        .iter()
        .map(|e| {
            let named = e
                .split('\'')
                .skip(1)
                .step_by(2)
                .find(|w| !w.is_empty() && header_name(w))
                .map(str::to_string);
            let field = if e.contains("recipient") || e.contains(" cc ") {
                "to".to_string()
            } else {
                named.unwrap_or_default()
            };
            (field, e.clone())
        })
        .collect()
}

async fn send_as_human(State(app): State<Arc<App>>, Body(q): Body<SendBody>) -> Response {
    blocking(&app, move |p| {
        if !grammar::valid_role(&q.role) {
            return Err(Error::bad_input(format!(
                "'{}' is not a role name.",
                crate::text::escape(&q.role)
            )));
        }
        let roles = Roles::load(&p.roles_tsv())?;
        if !roles.find(&q.role).is_some_and(|r| r.is_human()) {
            return Err(Error::bad_input(format!(
                "{} is not a human role: the cockpit posts only as a person (agent: human in swarm.yaml)",
                q.role
            )));
        }
        let text = match (q.draft, q.fields) {
            (Some(d), None) => d,
            (None, Some(f)) => compose(&f).map_err(|errors| {
                Error::invalid(crate::error::Token::HandoffInvalid, "the compose form", errors)
            })?,
            _ => return Err(Error::bad_input("give either a draft or the form's fields")),
        };
        if text.len() > draft::MAX_DRAFT_BYTES {
            return Err(Error::bad_input(format!(
                "Draft must be no larger than {} bytes; got {}.",
                draft::MAX_DRAFT_BYTES,
                text.len()
            )));
        }
        let s = send::Sender::as_role(p, &q.role)?;
        let d = draft::parse(&text);
        let queued = send::submit(&s, &d, "the cockpit's draft")?;
        let mut v = serde_json::to_value(&queued).unwrap_or_default();
        v["status"] = json!("queued");
        Ok(v)
    })
    .await
}

#[derive(Deserialize)]
struct ChooseBody {
    role: String,
    /// 1-based, as `swarm attach --choose`.
    option: usize,
    /// The option's label and the prompt as the page showed them: another
    /// prompt on screen now is refused, nothing typed.
    label: String,
    prompt: String,
}

/// `POST /api/choose`: answers what an agent's pane waits for with one of
/// its recognised options (`swarm attach ROLE --choose N`).
async fn choose(State(app): State<Arc<App>>, Body(q): Body<ChooseBody>) -> Response {
    let r = blocking(&app, move |p| {
        if !grammar::valid_role(&q.role) {
            return Err(Error::bad_input(format!(
                "'{}' is not a role name.",
                crate::text::escape(&q.role)
            )));
        }
        let t = crate::launch::attach::target(p, &q.role)?;
        let now = crate::daemon::pane::look(&t.socket, &t.session).ok().flatten();
        let same = now.as_ref().is_some_and(|w| {
            w.text == q.prompt
                && q.option
                    .checked_sub(1)
                    .and_then(|i| w.options.get(i))
                    .is_some_and(|c| c.label == q.label)
        });
        if !same {
            return Err(Error::refused(
                crate::error::Token::ChangedSinceReview,
                format!(
                "role {}'s pane no longer shows \"{}\" with option {} \"{}\"; nothing was typed",
                q.role,
                crate::text::escape(&q.prompt),
                q.option,
                crate::text::escape(&q.label)
            ),
                Vec::new(),
            ));
        }
        let (prompt, c) = crate::launch::attach::choose(p, &q.role, q.option)?;
        Ok(json!({"status": "chosen", "role": q.role, "prompt": prompt.text, "label": c.label, "keys": c.keys}))
    })
    .await;
    let _ = app.ticks.send(());
    r
}

#[cfg(test)]
mod tests;
