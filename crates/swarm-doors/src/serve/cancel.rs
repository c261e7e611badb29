//! The cockpit's "Cancel turn" button on an ACP role's card (docs/agents.md,
//! "`swarm cancel <role>`"; issue 46.5): `POST /api/cancel {"role": R}`
//! sends the same cancel `swarm cancel R` sends, through the same library
//! function, and answers what the role's client did.
//!
//! The invariants: the route is behind the cockpit's token guard like
//! every action (the token holder is the person, docs/security.md); the
//! role name is checked by the protocol's grammar before anything is
//! written; a role that does not run `runtime: acp`, or whose client does
//! not take the request, is refused with the CLI's text.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::api::{blocking, Body};
use super::App;
use crate::error::Error;
use crate::protocol::grammar;

#[derive(Deserialize)]
pub(super) struct CancelBody {
    role: String,
}

/// `POST /api/cancel`: a person cancels role's running ACP turn.
pub(super) async fn cancel_turn(
    State(app): State<Arc<App>>,
    Body(q): Body<CancelBody>,
) -> Response {
    let r = blocking(&app, move |p| {
        if !grammar::valid_role(&q.role) {
            return Err(Error::bad_input(format!(
                "'{}' is not a role name.",
                crate::text::escape(&q.role)
            )));
        }
        let said = crate::launch::acp::cancel::by_person(p, &q.role)?;
        Ok(json!({"status": "cancel_sent", "role": q.role, "said": said}))
    })
    .await;
    let _ = app.ticks.send(());
    r
}
