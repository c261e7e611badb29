//! The tools `swarm mcp` offers, synchronous: each call builds a draft (or
//! a queue step) and goes through the same code as `swarm-handoff`,
//! `ready-next`, `done-current`, `swarm answer`, `swarm transcript` and
//! `swarm status`, so the files, the locks, the validation and the error
//! texts are the CLI's. Nothing is kept between calls.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::agent::place;
use crate::agent::printout::{self, Viewer};
use crate::agent::queue::{Item, Ready};
use crate::agent::send::{self, Sender};
use crate::error::{exit, Error, Token};
use crate::protocol::draft;
use crate::protocol::grammar;
use crate::protocol::trail::{Scope, Trail};
use crate::protocol::types;
use crate::views::{status, transcript};

/// Who the server acts as and where: the role and the folder it was started
/// in (the project and worktree are found from it on every call).
#[derive(Clone, Debug)]
pub struct Agent {
    pub role: String,
    pub cwd: PathBuf,
}

/// `next`'s default and longest wait: clients time a tool call out after
/// 30-60 s, so the answer must come before that.
pub const DEFAULT_WAIT_SECS: u64 = 25;
pub const MAX_WAIT_SECS: u64 = 50;

/// `read`: default and most messages, the longest body shown, and the
/// largest answer (older messages are dropped first to fit).
const DEFAULT_READ: usize = 20;
const MAX_READ: usize = 100;
const MAX_READ_BODY: usize = 2000;
const MAX_READ_BYTES: usize = 24 * 1024;

/// `search`: default and most hits.
const DEFAULT_SEARCH: usize = 10;
const MAX_SEARCH: usize = 50;

/// Longest argument string accepted (a draft is at most 64 KiB anyway).
const MAX_ARG_BYTES: usize = draft::MAX_DRAFT_BYTES;

/// A refused call: the CLI's message (stderr) and its `--json` object.
#[derive(Debug)]
pub struct Refusal {
    pub text: String,
    pub json: Value,
}

impl From<Error> for Refusal {
    fn from(e: Error) -> Refusal {
        match &e {
            // The same object `swarm-handoff --json` prints for an invalid draft.
            Error::Invalid {
                token,
                subject,
                errors,
            } => Refusal {
                text: e.to_string(),
                json: json!({
                    "status": "invalid",
                    "token": token.name(),
                    "draft": subject,
                    "errors": errors,
                    "exit_code": exit::REFUSED,
                }),
            },
            _ => Refusal {
                text: e.to_string(),
                json: e.to_json(),
            },
        }
    }
}

fn usage(msg: impl Into<String>) -> Refusal {
    let text = msg.into();
    Refusal {
        json: json!({"status": "error", "token": "USAGE", "message": text, "paths": [], "exit_code": exit::ENV}),
        text,
    }
}

type Outcome = Result<Value, Refusal>;

// ---------------------------------------------------------------- definitions

fn s(desc: &str) -> Value {
    json!({"type": "string", "description": desc})
}

fn tool(name: &str, desc: &str, props: Value, required: &[&str]) -> Value {
    let mut schema = json!({"type": "object", "properties": props});
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    json!({"name": name, "description": desc, "inputSchema": schema})
}

/// The tool definitions as `tools/list` sends them. Kept short on purpose:
/// every agent pays for them in context on every turn (docs/mcp.md).
pub fn definitions() -> Vec<Value> {
    let types = types::sendable_types().join(", ");
    vec![
        tool(
            "next",
            "Take your next work item (or get back the one in process). Waits up to wait_seconds for one to arrive, then status no_task.",
            json!({"wait_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECS, "description": "default 25"}}),
            &[],
        ),
        tool(
            "done",
            "Finish the item in process (failed: reason, if it could not be done), then take the next one without waiting. Not while it waits for an ask's answer.",
            json!({"failed": s("why it failed (one line)")}),
            &[],
        ),
        {
            let mut t = tool(
                "send",
                &format!("Send a message, validated like a swarm-handoff draft; other draft headers are extra string arguments. type: {types}. Headers by type: git_handoff task, commit; note message (<=80 chars); post subject; clarify question; answer choices; close reason; react reaction. Any type: in_reply_to, thread, cc, wake, discussion."),
                json!({
                    "type": s("message type"),
                    "to": s("role[,role...] or all"),
                    "priority": s("two digits, 00 first; default 50"),
                    "body": s("text (post, clarify options, answer, digest, close)"),
                }),
                &["type", "to"],
            );
            t["inputSchema"]["additionalProperties"] = json!({"type": "string"});
            t
        },
        tool(
            "reply",
            "Reply to the item in process (a post to its sender unless to is given; in_reply_to and thread are set).",
            json!({"body": s("the reply"), "to": s("role[,role...]")}),
            &["body"],
        ),
        tool(
            "ask",
            "Ask a person or role a blocking question (clarify) about the item in process. Do not call done: the item stays in process (parked). End your turn; when woken, next returns that item with the answer.",
            json!({
                "to": s("one role"),
                "question": s("one line"),
                "options": {"type": "array", "items": {"type": "string"}},
                "allow_multiple": {"type": "boolean"},
                "allow_custom": {"type": "boolean", "description": "default true"},
            }),
            &["to", "question"],
        ),
        tool(
            "answer",
            "Answer a clarify sent to you.",
            json!({
                "id": s("the clarify's id (or a unique prefix)"),
                "choices": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                "text": s("custom answer"),
            }),
            &["id"],
        ),
        tool(
            "react",
            "React to a message; its sender sees it on their next take, without being woken.",
            json!({
                "id": s("message id"),
                "reaction": {"type": "string", "enum": types::REACTIONS},
            }),
            &["id", "reaction"],
        ),
        tool(
            "read",
            "Read the transcript, newest last: one thread, or filtered by role or type.",
            json!({
                "thread": s("id of any message in it"),
                "role": s("sent or received by"),
                "type": s("message type"),
                "last": {"type": "integer", "minimum": 1, "maximum": MAX_READ, "description": "default 20"},
            }),
            &[],
        ),
        tool(
            "status",
            "The swarm's queues per role and what waits for a person.",
            json!({}),
            &[],
        ),
        tool(
            "search",
            "Full-text search over every message (archived too), best match first.",
            json!({
                "query": s("words that must all occur"),
                "role": s("sent or received by"),
                "type": s("message type"),
                "since": s("RFC 3339 time or an age (2h, 1d)"),
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH, "description": "default 10"},
            }),
            &["query"],
        ),
        tool(
            "reserve",
            "Announce files you are about to change; refused if another role holds them.",
            json!({
                "globs": {"type": "array", "items": {"type": "string"}, "description": "repository paths; *, ?, **"},
                "ttl": s("how long (30m, 2h; default 1h)"),
                "reason": s("why, one line"),
            }),
            &["globs"],
        ),
        tool(
            "release",
            "Give back your reservations (all, or the globs named).",
            json!({"globs": {"type": "array", "items": {"type": "string"}}}),
            &[],
        ),
        tool(
            "reservations",
            "Who holds which files now.",
            json!({}),
            &[],
        ),
    ]
}

/// Whether `name` is one of ours.
pub fn known(name: &str) -> bool {
    matches!(
        name,
        "next"
            | "done"
            | "send"
            | "reply"
            | "ask"
            | "answer"
            | "react"
            | "read"
            | "status"
            | "search"
            | "reserve"
            | "release"
            | "reservations"
    )
}

// ---------------------------------------------------------------- arguments

/// Reads tool arguments, refusing what the schema does not allow (the
/// client may not have checked): unknown names, wrong types, huge values.
struct Args<'a> {
    tool: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn check(
        tool: &'a str,
        map: &'a Map<String, Value>,
        allowed: &[&str],
    ) -> Result<Self, Refusal> {
        for k in map.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(usage(format!(
                    "{tool}: unknown argument '{}'; expected {}.",
                    crate::text::escape(k),
                    allowed.join(", ")
                )));
            }
        }
        Ok(Args { tool, map })
    }

    fn str(&self, name: &str) -> Result<Option<&'a str>, Refusal> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(v)) if v.len() <= MAX_ARG_BYTES => Ok(Some(v.as_str())),
            Some(Value::String(v)) => Err(usage(format!(
                "{}: '{name}' must be at most {MAX_ARG_BYTES} bytes; got {}.",
                self.tool,
                v.len()
            ))),
            Some(_) => Err(usage(format!("{}: '{name}' must be a string.", self.tool))),
        }
    }

    /// A value that becomes one header line: no line breaks (a draft line
    /// cannot hold one either; other control characters are the draft
    /// parser's to refuse, with its text).
    fn line(&self, name: &str) -> Result<Option<&'a str>, Refusal> {
        let v = self.str(name)?;
        if let Some(v) = v {
            one_line(self.tool, name, v)?;
        }
        Ok(v)
    }

    fn required_line(&self, name: &str) -> Result<&'a str, Refusal> {
        self.line(name)?
            .ok_or_else(|| usage(format!("{}: '{name}' is required.", self.tool)))
    }

    fn uint(&self, name: &str, max: u64) -> Result<Option<u64>, Refusal> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n <= max => Ok(Some(n)),
                _ => Err(usage(format!(
                    "{}: '{name}' must be a whole number from 0 to {max}.",
                    self.tool
                ))),
            },
        }
    }

    fn bool(&self, name: &str) -> Result<Option<bool>, Refusal> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(usage(format!(
                "{}: '{name}' must be true or false.",
                self.tool
            ))),
        }
    }

    fn strings(&self, name: &str) -> Result<Vec<&'a str>, Refusal> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) if a.len() <= types::MAX_OPTIONS * 2 => a
                .iter()
                .map(|v| match v.as_str() {
                    Some(s) if s.len() <= MAX_ARG_BYTES => {
                        one_line(self.tool, name, s)?;
                        Ok(s)
                    }
                    _ => Err(usage(format!(
                        "{}: '{name}' must be a list of one-line strings.",
                        self.tool
                    ))),
                })
                .collect(),
            Some(_) => Err(usage(format!(
                "{}: '{name}' must be a list of strings.",
                self.tool
            ))),
        }
    }
}

fn one_line(tool: &str, name: &str, v: &str) -> Result<(), Refusal> {
    if v.contains(['\n', '\r']) {
        return Err(usage(format!(
            "{tool}: '{name}' must be one line; got a line break."
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------- calls

/// Runs tool `name` for `agent`. Blocking (file I/O, and `next` waits): the
/// server calls it off its runtime.
pub fn call(agent: &Agent, name: &str, args: Option<&Map<String, Value>>) -> Outcome {
    let none = Map::new();
    let map = args.unwrap_or(&none);
    match name {
        "next" => next(agent, &Args::check(name, map, &["wait_seconds"])?),
        "done" => done(agent, &Args::check(name, map, &["failed"])?),
        "send" => send_tool(agent, &Args { tool: name, map }),
        "reply" => reply(agent, &Args::check(name, map, &["body", "to"])?),
        "ask" => ask(
            agent,
            &Args::check(
                name,
                map,
                &[
                    "to",
                    "question",
                    "options",
                    "allow_multiple",
                    "allow_custom",
                ],
            )?,
        ),
        "answer" => answer(agent, &Args::check(name, map, &["id", "choices", "text"])?),
        "react" => react(agent, &Args::check(name, map, &["id", "reaction"])?),
        "read" => read(
            agent,
            &Args::check(name, map, &["thread", "role", "type", "last"])?,
        ),
        "status" => status_tool(agent, &Args::check(name, map, &[])?),
        "reserve" => reserve_tool(agent, &Args::check(name, map, &["globs", "ttl", "reason"])?),
        "release" => release_tool(agent, &Args::check(name, map, &["globs"])?),
        "reservations" => {
            Args::check(name, map, &[])?;
            let at = crate::protocol::root::locate(&agent.cwd)?;
            let rs = crate::reservations::active(&at.project)?;
            Ok(json!({"status": "ok", "reservations": rs}))
        }
        "search" => search_tool(
            agent,
            &Args::check(name, map, &["query", "role", "type", "since", "limit"])?,
        ),
        other => Err(usage(format!(
            "unknown tool '{}'.",
            crate::text::escape(other)
        ))),
    }
}

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

fn next(agent: &Agent, a: &Args) -> Outcome {
    let wait = a
        .uint("wait_seconds", MAX_WAIT_SECS)?
        .unwrap_or(DEFAULT_WAIT_SECS);
    let at = place::resolve_as(&agent.cwd, &agent.role)?;
    crate::fsx::set_fsync(at.config.daemon.fsync);
    crate::agent::guard::before_ready(&at, &agent.role)?;
    let inbox = at.inbox();
    let (r, reactions) =
        crate::agent::wait::ready_wait(&inbox, at.mode, Duration::from_secs(wait))?;
    Ok(ready_value(&at, &r, &reactions, &agent.role))
}

fn done(agent: &Agent, a: &Args) -> Outcome {
    let failed = a.line("failed")?;
    let at = place::resolve_as(&agent.cwd, &agent.role)?;
    crate::fsx::set_fsync(at.config.daemon.fsync);
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

/// Queues draft text as `agent` (the `swarm-handoff` path after reading
/// the file); `shown` names it in a refusal.
fn submit(agent: &Agent, text: &str, shown: &str) -> Outcome {
    let sender = Sender::locate(&agent.role, &agent.cwd)?;
    let parsed = draft::parse_bytes(text.as_bytes());
    // The same gate as `swarm-handoff` (agent::send::audit_gate).
    match send::submit_gated(&sender, &parsed, shown)? {
        send::Sent::Queued(q, finished) => {
            let mut v = serde_json::to_value(&q).unwrap_or_default();
            v["status"] = json!("queued");
            match &finished {
                Some(Ok(d)) => v["completed"] = printout::done_json(d, Viewer::default()),
                Some(Err(e)) => v["completed"] = e.to_json(),
                None => {}
            }
            Ok(v)
        }
        send::Sent::AuditRequired(c) => Ok(json!({
            "status": "audit_required",
            "task": c.task,
            "commit": c.commit,
            "report": c.report(),
        })),
    }
}

/// Draft text from header lines and a body (a blank line between).
fn draft_text(headers: &[(&str, &str)], body: Option<&str>) -> String {
    let mut d = String::new();
    for (k, v) in headers {
        d.push_str(&format!("{k}: {v}\n"));
    }
    if let Some(b) = body {
        d.push('\n');
        d.push_str(b);
        if !b.ends_with('\n') {
            d.push('\n');
        }
    }
    d
}

fn send_tool(agent: &Agent, a: &Args) -> Outcome {
    let ty = a.required_line("type")?;
    let to = a.required_line("to")?;
    let priority = a.line("priority")?.unwrap_or("50");
    let mut headers = vec![("type", ty), ("to", to), ("priority", priority)];
    if a.map.len() > 64 {
        return Err(usage("send: at most 64 arguments."));
    }
    // Every other argument is a draft header, in the order given; the
    // draft parser refuses unknown and reserved names with the CLI's text.
    for (k, v) in a.map {
        if ["type", "to", "priority", "body"].contains(&k.as_str()) {
            continue;
        }
        let Some(v) = v.as_str() else {
            return Err(usage(format!(
                "send: header '{}' must be a string.",
                crate::text::escape(k)
            )));
        };
        one_line("send", k, k)?;
        one_line("send", k, v)?;
        if k.contains(": ") || k.len() > 64 || v.len() > MAX_ARG_BYTES {
            return Err(usage(format!(
                "send: '{}' is not a header name.",
                crate::text::escape(k)
            )));
        }
        headers.push((k.as_str(), v));
    }
    submit(agent, &draft_text(&headers, a.str("body")?), "mcp:send")
}

/// The item in process, for `reply`.
fn current(agent: &Agent) -> Result<Item, Refusal> {
    let at = place::resolve_as(&agent.cwd, &agent.role)?;
    crate::agent::queue::current_item(&at.wt, at.config.limits.max_file_bytes)
        .ok_or_else(|| Refusal::from(Error::token(Token::NoCurrentTask)))
}

fn reply(agent: &Agent, a: &Args) -> Outcome {
    let body = a
        .str("body")?
        .ok_or_else(|| usage("reply: 'body' is required."))?;
    let item = current(agent)?;
    let sender = item.msg.sender().unwrap_or("").to_string();
    let to = a.line("to")?.map(str::to_string).unwrap_or(sender);
    let id = item.msg.id().unwrap_or("").to_string();
    let priority = item
        .msg
        .priority()
        .filter(|p| crate::protocol::fields::valid_priority(p))
        .unwrap_or("50")
        .to_string();
    let headers = [
        ("type", types::POST.name),
        ("to", to.as_str()),
        ("priority", priority.as_str()),
        ("in_reply_to", id.as_str()),
    ];
    submit(agent, &draft_text(&headers, Some(body)), "mcp:reply")
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn ask(agent: &Agent, a: &Args) -> Outcome {
    let to = a.required_line("to")?;
    let question = a.required_line("question")?;
    let options = a.strings("options")?;
    let mut headers = vec![
        ("type", types::CLARIFY.name),
        ("to", to),
        ("priority", "50"),
        ("question", question),
    ];
    if let Some(m) = a.bool("allow_multiple")? {
        headers.push(("allow_multiple", yes_no(m)));
    }
    if let Some(c) = a.bool("allow_custom")? {
        headers.push(("allow_custom", yes_no(c)));
    }
    let body = options.join("\n");
    submit(agent, &draft_text(&headers, Some(&body)), "mcp:ask")
}

fn answer(agent: &Agent, a: &Args) -> Outcome {
    let id = a.required_line("id")?;
    let choices: Vec<usize> = match a.map.get("choices") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) if list.len() <= types::MAX_OPTIONS => list
            .iter()
            .map(|v| v.as_u64().filter(|n| *n <= 999).map(|n| n as usize))
            .collect::<Option<_>>()
            .ok_or_else(|| usage("answer: 'choices' must be option numbers."))?,
        Some(_) => return Err(usage("answer: 'choices' must be a list of option numbers.")),
    };
    let text = a.str("text")?;
    if choices.is_empty() && text.is_none() {
        return Err(usage("answer: give choices and/or text."));
    }
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let whole = crate::protocol::idprefix::expand(&at.project, id)?;
    let id = whole.as_str();
    let caller = crate::agent::caller::Caller::agent(&agent.role);
    match crate::person::answer::answer(&at.project, id, &choices, text, &caller) {
        Ok(done) => {
            let mut v = serde_json::to_value(&done).unwrap_or_default();
            v["status"] = json!("answered");
            Ok(v)
        }
        // Reported against the clarify, as `swarm answer` does.
        Err(Error::Invalid { errors, .. }) => {
            let e = Error::invalid(
                Token::AnswerInvalid,
                crate::text::escape(id),
                errors.clone(),
            );
            Err(Refusal {
                text: e.to_string(),
                json: json!({
                    "status": "invalid",
                    "token": Token::AnswerInvalid.name(),
                    "clarify": id,
                    "errors": errors,
                    "exit_code": exit::REFUSED,
                }),
            })
        }
        Err(e) => Err(e.into()),
    }
}

fn react(agent: &Agent, a: &Args) -> Outcome {
    let id = a.required_line("id")?;
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let whole = crate::protocol::idprefix::expand(&at.project, id)?;
    let id = whole.as_str();
    let reaction = a.required_line("reaction")?;
    // To the message's sender; an id that names none is left to the
    // validator (`in_reply_to` must be a message id).
    let to = grammar::id_sender(id).unwrap_or(&agent.role);
    // 00: a reaction is taken with the recipient's next ready step, which
    // reads the queue in priority order.
    let headers = [
        ("type", types::REACT.name),
        ("to", to),
        ("priority", "00"),
        ("in_reply_to", id),
        ("reaction", reaction),
    ];
    submit(agent, &draft_text(&headers, None), "mcp:react")
}

fn read(agent: &Agent, a: &Args) -> Outcome {
    let last = a
        .uint("last", MAX_READ as u64)?
        .map_or(DEFAULT_READ, |n| n.max(1) as usize);
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let thread = match a.line("thread")? {
        Some(t) => Some(crate::protocol::idprefix::expand(&at.project, t)?),
        None => None,
    };
    let t = Trail::load(&at.project, &Scope::originals())?;
    let all = transcript::messages(&t.originals);
    let marks = transcript::reaction_marks(&all);
    let filter = transcript::Filter {
        role: a.line("role")?.map(str::to_string),
        kind: a.line("type")?.map(str::to_string),
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

fn status_tool(agent: &Agent, _a: &Args) -> Outcome {
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let s = status::collect(&at.project)?;
    let mut v = serde_json::to_value(&s).unwrap_or_default();
    v["status"] = json!("ok");
    Ok(v)
}

/// The agent's globs as repository paths (relative to the folder it runs in).
fn agent_globs(
    agent: &Agent,
    a: &Args,
) -> Result<(crate::protocol::root::Located, Vec<String>), Refusal> {
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let typed = a.strings("globs")?;
    let globs = crate::reservations::glob::normalise_all(&typed, &at.worktree.root, &agent.cwd)
        .map_err(usage)?;
    Ok((at, globs))
}

fn reserve_tool(agent: &Agent, a: &Args) -> Outcome {
    let (at, globs) = agent_globs(agent, a)?;
    let ttl = match a.line("ttl")? {
        Some(t) => {
            crate::protocol::duration::parse(t).map_err(|e| usage(format!("reserve: ttl: {e}")))?
        }
        None => crate::reservations::DEFAULT_TTL,
    };
    // From a confined agent, through handoffd (forum/requests.rs).
    let (r, _) = crate::forum::requests::reserve(
        &at.project,
        &crate::reservations::Request {
            role: &agent.role,
            globs,
            ttl,
            reason: a.line("reason")?.unwrap_or(""),
            worktree: &at.worktree.root,
            force: false,
        },
    )?;
    Ok(json!({"status": "ok", "reservation": r}))
}

fn release_tool(agent: &Agent, a: &Args) -> Outcome {
    let (at, globs) = agent_globs(agent, a)?;
    let gone = crate::forum::requests::release(&at.project, &agent.role, &globs)?;
    Ok(json!({"status": "ok", "released": gone}))
}

fn search_tool(agent: &Agent, a: &Args) -> Outcome {
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let since = match a.line("since")? {
        Some(t) => Some(
            transcript::parse_time(t, crate::protocol::clock::now())
                .map_err(usage)?
                .timestamp(),
        ),
        None => None,
    };
    let q = crate::search::Query {
        text: a.required_line("query")?.to_string(),
        role: a.line("role")?.map(str::to_string),
        kind: a.line("type")?.map(str::to_string),
        since,
        limit: a
            .uint("limit", MAX_SEARCH as u64)?
            .map_or(DEFAULT_SEARCH, |n| (n as usize).max(1)),
    };
    let answer = crate::search::search(&at.project, &q)?;
    let mut v = serde_json::to_value(&answer).unwrap_or_default();
    v["status"] = json!("ok");
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_definition_is_known_and_small() {
        let defs = definitions();
        for d in &defs {
            assert!(known(d["name"].as_str().unwrap()));
        }
        let size = Value::from(defs).to_string().len();
        assert!(size < 6 * 1024, "tools/list is {size} bytes");
    }
}
