//! `next` and `done`: the queue steps of `ready-next` and `done-current`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Agent, Outcome, Tool, DEFAULT_WAIT_SECS, MAX_WAIT_SECS};
use crate::agent::place;
use crate::agent::printout::{self, Viewer};
use crate::agent::queue::{Item, Ready};
use crate::doors::mcp::args::{Count, Line};

/// What `ready-next --json` prints, plus the reactions taken with it.
fn ready_value(at: &place::Resolved, r: &Ready, reactions: &[Item], me: &str) -> Value {
    let view = place::forum_view(at, r, Some(me));
    // `card_type` / `this_card`, as `ready-next` prints them.
    let routes = at.routes();
    let viewer = Viewer {
        role: Some(me),
        forum: Some(&view),
        preamble: at.keeps_preamble(),
        cards: routes,
    };
    let mut v = printout::ready_json(r, viewer);
    if !reactions.is_empty() {
        v["reactions"] = printout::reactions_json(reactions);
    }
    v
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct Next {
    /// default 25
    wait_seconds: Option<Count<MAX_WAIT_SECS>>,
}

impl Tool for Next {
    const NAME: &'static str = "next";
    const DESCRIPTION: &'static str = "Take your next work item (or get back the one in process). Waits up to wait_seconds for one to arrive, then status no_task.";
    fn run(self, agent: &Agent) -> Outcome {
        let wait = self.wait_seconds.map_or(DEFAULT_WAIT_SECS, |c| c.0);
        let at = place::resolve_as(&agent.cwd, &agent.role)?;
        crate::fsx::set_fsync(at.config().daemon.fsync);
        crate::agent::guard::before_ready(&at, &agent.role)?;
        let inbox = at.inbox();
        let (r, reactions) =
            crate::agent::wait::ready_wait(&inbox, at.mode, Duration::from_secs(wait))?;
        Ok(ready_value(&at, &r, &reactions, &agent.role))
    }
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct Done {
    /// why it failed (one line)
    failed: Option<Line>,
}

impl Tool for Done {
    const NAME: &'static str = "done";
    const DESCRIPTION: &'static str = "Finish the item in process (failed: reason, if it could not be done), then take the next one without waiting. Not while it waits for an ask's answer.";
    fn run(self, agent: &Agent) -> Outcome {
        done(agent, self.failed.as_ref().map(|l| l.0.as_str()))
    }
}

fn done(agent: &Agent, failed: Option<&str>) -> Outcome {
    let at = place::resolve_as(&agent.cwd, &agent.role)?;
    crate::fsx::set_fsync(at.config().daemon.fsync);
    // The same guard as `done-current` (the MCP tool keeps its contract:
    // finish, then take the next item; no OPEN_CARDS).
    crate::agent::guard::before_done(&at, &agent.role, false, false)?;
    let inbox = at.inbox();
    let d = inbox.done_failed(at.mode, failed)?;
    let view = match &d.next {
        Ok(next) => place::forum_view(&at, next, Some(&agent.role)),
        Err(_) => printout::ForumView::default(),
    };
    let routes = at.routes();
    let viewer = Viewer {
        role: Some(&agent.role),
        forum: Some(&view),
        preamble: at.keeps_preamble(),
        cards: routes,
    };
    Ok(printout::done_json(&d, viewer))
}
