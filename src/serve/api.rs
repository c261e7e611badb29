//! The cockpit's routes: the page, read-only JSON, and the actions. Every
//! action calls the library function the CLI command calls (so it writes the
//! same files, with the same validation: ids through protocol/grammar), and
//! a refusal answers 4xx with the CLI's error text.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::agent::{answer, send};
use crate::daemon::holds;
use crate::error::{exit, Error, Result};
use crate::protocol::clock;
use crate::protocol::draft;
use crate::protocol::grammar;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::protocol::trail::{Scope, Trail};
use crate::views::{audit, receipts, status};

use super::{stream, token, App};

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The newest messages the page gets (the CLI's transcript has them all).
const TRANSCRIPT_LIMIT: usize = 500;

pub fn router(app: Arc<App>) -> Router {
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
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            token::guard,
        ))
        .with_state(app)
}

async fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

async fn index(State(app): State<Arc<App>>) -> Response {
    // Scripts and styles come from this server only; the token (hex, so
    // nothing to escape) rides along in their URLs.
    let page = INDEX.replace("{{TOKEN}}", &app.token);
    (
        [(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
        )],
        Html(page),
    )
        .into_response()
}

/// A library error as the CLI reports it: 400 for usage and environment
/// errors, 422 for refusals (the CLI's exit 2), the text and token in JSON.
fn error_response(e: &Error) -> Response {
    let code = match e.exit_code() {
        exit::REFUSED => StatusCode::UNPROCESSABLE_ENTITY,
        _ if matches!(e, Error::Io { .. }) => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    };
    let mut v = e.to_json();
    if let Error::Invalid { errors, .. } = e {
        v["errors"] = json!(errors);
    }
    (code, Json(crate::error::stamped(v))).into_response()
}

/// Runs synchronous library work off the async threads.
async fn blocking(
    app: &Arc<App>,
    f: impl FnOnce(&Project) -> Result<Value> + Send + 'static,
) -> Response {
    let project = app.project.clone();
    match tokio::task::spawn_blocking(move || f(&project)).await {
        Ok(Ok(v)) => Json(crate::error::stamped(v)).into_response(),
        Ok(Err(e)) => error_response(&e),
        Err(e) => error_response(&Error::env(format!("internal error: {e}"))),
    }
}

async fn status_json(State(app): State<Arc<App>>) -> Response {
    blocking(&app, |p| {
        let s = status::collect(p)?;
        Ok(serde_json::to_value(&s).unwrap_or_default())
    })
    .await
}

async fn transcript_json(State(app): State<Arc<App>>) -> Response {
    blocking(&app, |p| {
        let t = Trail::load(p, &Scope::originals())?;
        let all = crate::views::transcript::select::messages(&t.originals);
        let skip = all.len().saturating_sub(TRANSCRIPT_LIMIT);
        let messages: Vec<Value> = all
            .iter()
            .skip(skip)
            .map(|o| crate::views::transcript::print::jsonl(o, &t.roles))
            .collect();
        let sessions = crate::forum::session::list(p).unwrap_or_default();
        Ok(json!({
            "messages": messages,
            "total": all.len(),
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
        Err(Error::env(format!(
            "'{}' is not a message id.",
            crate::text::escape(id)
        )))
    }
}

async fn receipts_json(State(app): State<Arc<App>>, Query(q): Query<IdQuery>) -> Response {
    blocking(&app, move |p| {
        check_id(&q.id)?;
        let t = Trail::load(p, &Scope::all())?;
        match receipts::collect(&t, &q.id) {
            Some(r) => Ok(receipts::json(&r)),
            None => Err(Error::env(format!(
                "No message {} in {}",
                q.id,
                p.root.display()
            ))),
        }
    })
    .await
}

async fn audit_json(State(app): State<Arc<App>>) -> Response {
    blocking(&app, |p| {
        let t = Trail::load(p, &Scope::all())?;
        Ok(audit::json(&audit::report(&t), clock::now()))
    })
    .await
}

/// An approval names the sha256 of the message the page showed.
#[derive(Deserialize)]
struct ApproveBody {
    id: String,
    sha256: String,
}

async fn approve(State(app): State<Arc<App>>, Json(q): Json<ApproveBody>) -> Response {
    blocking(&app, move |p| {
        let path = holds::approve(p, &q.id, &q.sha256, "cockpit")?;
        Ok(json!({"status": "approved", "id": q.id, "sha256": q.sha256, "path": path}))
    })
    .await
}

#[derive(Deserialize)]
struct DenyBody {
    id: String,
    reason: String,
}

async fn deny(State(app): State<Arc<App>>, Json(q): Json<DenyBody>) -> Response {
    blocking(&app, move |p| {
        let path = holds::deny(p, &q.id, &q.reason, "cockpit")?;
        Ok(json!({"status": "denied", "id": q.id, "path": path, "reason": q.reason}))
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
        let s = holds::pause(p, &types)?;
        Ok(json!({"status": "paused", "types": s.types, "since": s.since}))
    })
    .await;
    let _ = app.ticks.send(());
    r
}

async fn resume(State(app): State<Arc<App>>) -> Response {
    let r = blocking(&app, |p| {
        let was = holds::resume(p)?;
        Ok(json!({"status": "resumed", "was_paused": was}))
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

async fn answer_clarify(State(app): State<Arc<App>>, Json(q): Json<AnswerBody>) -> Response {
    blocking(&app, move |p| {
        let text = q.text.as_deref().filter(|t| !t.trim().is_empty());
        if q.choices.is_empty() && text.is_none() {
            return Err(Error::env("give a choice and/or a text"));
        }
        // The draft's errors, reported against the clarify (as `swarm answer` does).
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
async fn inbox_done(State(app): State<Arc<App>>, Json(q): Json<DoneBody>) -> Response {
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
    draft: String,
}

async fn send_as_human(State(app): State<Arc<App>>, Json(q): Json<SendBody>) -> Response {
    blocking(&app, move |p| {
        if !grammar::valid_role(&q.role) {
            return Err(Error::env(format!(
                "'{}' is not a role name.",
                crate::text::escape(&q.role)
            )));
        }
        let roles = Roles::load(&p.roles_tsv())?;
        if !roles.find(&q.role).is_some_and(|r| r.is_human()) {
            return Err(Error::env(format!(
                "{} is not a human role: the cockpit posts only as a person (agent: human in swarm.yaml)",
                q.role
            )));
        }
        if q.draft.len() > draft::MAX_DRAFT_BYTES {
            return Err(Error::env(format!(
                "Draft must be no larger than {} bytes; got {}.",
                draft::MAX_DRAFT_BYTES,
                q.draft.len()
            )));
        }
        let s = send::Sender::as_role(p, &q.role)?;
        let d = draft::parse(&q.draft);
        let queued = send::submit(&s, &d, "the cockpit's draft")?;
        let mut v = serde_json::to_value(&queued).unwrap_or_default();
        v["status"] = json!("queued");
        Ok(v)
    })
    .await
}
