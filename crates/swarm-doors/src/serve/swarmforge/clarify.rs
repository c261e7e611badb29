//! A person's answers through SwarmForge's dashboard: a clarification
//! answered (`swarm answer`, an option's number taken as the choice) and a
//! chat post to the master role. The invariant: what is sent goes through
//! the one send path, checked as any draft is.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use crate::agent::caller::Caller;
use crate::error::Error;
use crate::person::answer;
use crate::protocol::config::Config;
use crate::protocol::roles::Roles;
use crate::protocol::{fields, grammar};

use super::super::App;
use super::{body, check_project, master, not_found, person, post_as, run, No, UrlPath};

#[derive(Deserialize, Default)]
pub(super) struct AnswerBody {
    pub(super) text: Option<String>,
    pub(super) project: Option<String>,
}

/// Option numbers (`2`, `1,3`) that are all options of the clarify: the
/// person picked them; anything else is their own words.
pub(super) fn as_choices(text: &str, options: usize) -> Option<Vec<usize>> {
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
pub(super) async fn answer_clarification(
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
pub(super) struct ChatBody {
    pub(super) text: Option<String>,
}

/// `POST /api/chat {text}`: the person's post to the master role (blank
/// text: nothing sent, `ok` as upstream answers).
pub(super) async fn chat(State(app): State<Arc<App>>, h: HeaderMap, b: Bytes) -> Response {
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
