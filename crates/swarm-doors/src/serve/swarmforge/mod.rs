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
//!
//! The parts, one per group of upstream's routes: the dashboard's state
//! (`state`), the approval actions (`approvals`), a person's answers and
//! chat (`clarify`), mission and projects (`projects`); here, the routes
//! and what they share (the project check, the person, a post).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::Path as UrlPath;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::agent::send;
use crate::error::Error;
use crate::person::holds::{self, Held};
use crate::protocol::dashboard::master_role as master;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::protocol::{draft, grammar, types};
use crate::text::escape;

use super::{api, token, App};

mod approvals;
mod clarify;
mod projects;
mod state;

use approvals::{approval, delete, retry};
use clarify::{answer_clarification, chat};
use projects::{close_project, mission, new_project, open_project, projects};
use state::state;

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

#[cfg(test)]
mod tests {
    use super::clarify::as_choices;
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
