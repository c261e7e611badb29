//! SwarmForge's approval actions on our held handoffs: approve (the content
//! `GET /api/state` showed, docs/security.md "Approve what was seen"),
//! comments, Retry (a denial with the comments sent to the sender), Delete.
//! The invariant: each is the library call its CLI command makes, named
//! in the journal as the cockpit's.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use crate::error::{Error, Token};
use crate::person::{holds, rejected};
use crate::protocol::dashboard::SENT_BACK;
use crate::protocol::roles::Roles;
use crate::protocol::types;
use crate::text::escape;

use super::super::{token, App};
use super::{
    body, check_project, first_line, held, person, post_as, run, No, UrlPath, REJECT, VIA,
};

#[derive(Deserialize, Default)]
pub(super) struct ApprovalBody {
    pub(super) project: Option<String>,
    /// The fingerprint reviewed (default: what `GET /api/state` showed).
    pub(super) sha256: Option<String>,
}

/// `POST /api/approvals/<id>/approve|reject`: approve delivers the held
/// handoff as `swarm approve` does; reject answers as upstream does (its
/// dashboard opens a dialog; Retry sends back).
pub(super) async fn approval(
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
pub(super) struct CommentsBody {
    pub(super) path: Option<String>,
    pub(super) comments: Option<String>,
    pub(super) project: Option<String>,
}

/// `POST /api/approvals/<id>/comments {path, comments}`: a person's review
/// comments on one document of a held handoff, kept beside it as
/// SwarmForge keeps them (`<name>.reviews.json`, pack_web.bb
/// `save-review!`) and shown as the approval's `reviews`.
pub(super) async fn comments(app: Arc<App>, id: String, h: HeaderMap, b: Bytes) -> Response {
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
pub(super) struct RetryBody {
    pub(super) id: Option<String>,
    pub(super) comments: Option<String>,
    pub(super) project: Option<String>,
}

/// `POST /api/tasks/retry {id, comments}`: sends a held handoff back to
/// its sender. Denied as `swarm deny` does (to the sender's `failed/`,
/// `denied: sent back: …`), then the comments reach the sender as the
/// person's `post`, so the agent hears it and does the work again.
pub(super) async fn retry(State(app): State<Arc<App>>, h: HeaderMap, b: Bytes) -> Response {
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
pub(super) struct DeleteBody {
    pub(super) id: Option<String>,
    pub(super) name: Option<String>,
    pub(super) project: Option<String>,
}

/// `POST /api/tasks/delete {id}` (the dashboard's Delete in its Reject
/// dialog) or `{name}` (a card marked rejected), as pack_web.bb
/// `post-delete-task`: a held handoff is deleted as person::rejected
/// says (snapshot, denied, archived, history dropped, worktree rolled
/// back when nothing can be lost). A card is never marked rejected here
/// (upstream marks one with `.swarmforge/notify/reject-<name>`, which
/// nothing writes today), so `{name}` is upstream's `Not rejected`.
pub(super) async fn delete(State(app): State<Arc<App>>, h: HeaderMap, b: Bytes) -> Response {
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
