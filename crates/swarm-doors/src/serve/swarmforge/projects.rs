//! The project routes SwarmForge's forge has: its mission text and its
//! project list. `swarm serve` serves one project, so opening, making or
//! closing another is refused with what to do instead.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::protocol::layout::Project;
use crate::text::escape;

use super::super::{token, App};
use super::{body, check_project, project_name, run};

/// The largest `mission.md` served.
pub(super) const MAX_MISSION_BYTES: u64 = 1024 * 1024;

/// `GET /api/mission`: the project's `mission.md` as plain text, empty
/// when there is none (pack_web.bb `get-mission`). A symlink is not
/// followed (it could point out of the project): served as none.
pub(super) async fn mission(State(app): State<Arc<App>>) -> Response {
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
pub(super) fn project_list(p: &Project) -> Value {
    let name = project_name(p);
    json!({
        "ok": true,
        "projects": [{"name": name, "open": true, "root": p.root}],
        "open_projects": [name],
        "all_projects": [name],
    })
}

pub(super) async fn projects(State(app): State<Arc<App>>) -> Response {
    run(&app, false, |p| Ok(project_list(p))).await
}

#[derive(Deserialize, Default)]
pub(super) struct ProjectBody {
    pub(super) name: Option<String>,
}

/// Opening this project is a no-op; `swarm serve` serves one project, so
/// creating or closing one is refused with what to do instead.
pub(super) async fn open_project(State(app): State<Arc<App>>, h: HeaderMap, b: Bytes) -> Response {
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

pub(super) async fn new_project(State(app): State<Arc<App>>) -> Response {
    let root = app.project.root.display().to_string();
    token::refuse(
        StatusCode::CONFLICT,
        &format!("swarm serve serves one project ({}); create another with `swarm init <dir>` and run `swarm serve` there", escape(&root)),
    )
}

pub(super) async fn close_project(State(app): State<Arc<App>>) -> Response {
    let root = app.project.root.display().to_string();
    token::refuse(
        StatusCode::CONFLICT,
        &format!(
            "swarm serve serves one project ({}); stop the server to close it",
            escape(&root)
        ),
    )
}
