//! `read`, `status` and `search`: the views `swarm transcript`, `swarm
//! status` and `swarm search` give, bounded for a model's context.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{usage, Agent, Outcome, Tool};
use crate::doors::mcp::args::{Count, Line};
use crate::protocol::trail::{Scope, Trail};
use crate::views::{status, transcript};

/// `read`: default and most messages, the longest body shown, and the
/// largest answer (older messages are dropped first to fit).
const DEFAULT_READ: usize = 20;
const MAX_READ: u64 = 100;
const MAX_READ_BODY: usize = 2000;
const MAX_READ_BYTES: usize = 24 * 1024;

/// `search`: default and most hits.
const DEFAULT_SEARCH: usize = 10;
const MAX_SEARCH: u64 = 50;

#[derive(Deserialize, JsonSchema)]
pub(super) struct Read {
    /// id of any message in it
    thread: Option<Line>,
    /// sent or received by
    role: Option<Line>,
    /// message type
    #[serde(rename = "type")]
    kind: Option<Line>,
    /// default 20
    #[schemars(range(min = 1))]
    last: Option<Count<MAX_READ>>,
}

impl Tool for Read {
    const NAME: &'static str = "read";
    const DESCRIPTION: &'static str =
        "Read the transcript, newest last: one thread, or filtered by role or type.";
    fn run(self, agent: &Agent) -> Outcome {
        read(agent, &self)
    }
}

fn read(agent: &Agent, a: &Read) -> Outcome {
    let last = a.last.map_or(DEFAULT_READ, |n| n.0.max(1) as usize);
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let thread = match &a.thread {
        Some(t) => Some(crate::protocol::idprefix::expand(&at.project, &t.0)?),
        None => None,
    };
    let t = Trail::load(&at.project, &Scope::originals())?;
    let all = transcript::messages(&t.originals);
    let marks = transcript::reaction_marks(&all);
    let filter = transcript::Filter {
        role: a.role.as_ref().map(|r| r.0.clone()),
        kind: a.kind.as_ref().map(|k| k.0.clone()),
        thread: thread
            .as_deref()
            .map(|id| transcript::thread_root(&all, id).to_string()),
        ..Default::default()
    };
    let shown: Vec<_> = all
        .iter()
        .filter(|o| filter.matches(&o.msg, &t.roles) && !transcript::is_folded(o, &marks))
        .collect();
    let skip = shown.len().saturating_sub(last);
    let mut entries: Vec<Value> = shown[skip..]
        .iter()
        .map(|o| {
            let m = &o.msg;
            let mut body: String = m.body.chars().take(MAX_READ_BODY).collect();
            if body.len() < m.body.len() {
                body.push('…');
            }
            let mut v = json!({
                "id": m.id(),
                "time": o.when().map(crate::protocol::clock::iso),
                "from": m.sender(),
                "to": m.to(),
                "type": m.type_name(),
                "summary": crate::protocol::line::summary(m),
                "state": o.place.as_str(),
                "in_reply_to": m.in_reply_to(),
                "body": body,
            });
            if let Some(r) = marks.get(o.id()) {
                v["reactions"] = r
                    .iter()
                    .map(|(r, from)| json!({"reaction": r, "from": from}))
                    .collect();
            }
            v
        })
        .collect();
    // Bounded: the oldest go first until the answer fits.
    let mut dropped = 0;
    while entries.len() > 1 && Value::from(entries.clone()).to_string().len() > MAX_READ_BYTES {
        entries.remove(0);
        dropped += 1;
    }
    Ok(json!({
        "status": "ok",
        "messages": entries,
        "omitted": skip + dropped,
    }))
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct Status {}

impl Tool for Status {
    const NAME: &'static str = "status";
    const DESCRIPTION: &'static str = "The swarm's queues per role and what waits for a person.";
    fn run(self, agent: &Agent) -> Outcome {
        let at = crate::protocol::root::locate(&agent.cwd)?;
        let s = status::collect(&at.project)?;
        let mut v = serde_json::to_value(&s).unwrap_or_default();
        v["status"] = json!("ok");
        Ok(v)
    }
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct Search {
    /// words that must all occur
    query: Line,
    /// sent or received by
    role: Option<Line>,
    /// message type
    #[serde(rename = "type")]
    kind: Option<Line>,
    /// RFC 3339 time or an age (2h, 1d)
    since: Option<Line>,
    /// default 10
    #[schemars(range(min = 1))]
    limit: Option<Count<MAX_SEARCH>>,
}

impl Tool for Search {
    const NAME: &'static str = "search";
    const DESCRIPTION: &'static str =
        "Full-text search over every message (archived too), best match first.";
    fn run(self, agent: &Agent) -> Outcome {
        search_tool(agent, self)
    }
}

fn search_tool(agent: &Agent, a: Search) -> Outcome {
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let since = match &a.since {
        Some(t) => Some(
            transcript::parse_time(&t.0, crate::protocol::clock::now())
                .map_err(|e| usage(e.to_string()))?
                .timestamp(),
        ),
        None => None,
    };
    let q = crate::search::Query {
        text: a.query.0,
        role: a.role.map(|r| r.0),
        kind: a.kind.map(|k| k.0),
        since,
        limit: a.limit.map_or(DEFAULT_SEARCH, |n| (n.0 as usize).max(1)),
    };
    let answer = crate::search::search(&at.project, &q)?;
    let mut v = serde_json::to_value(&answer).unwrap_or_default();
    v["status"] = json!("ok");
    Ok(v)
}
