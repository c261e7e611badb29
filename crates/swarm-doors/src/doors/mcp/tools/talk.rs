//! `send`, `reply`, `ask`, `answer` and `react`: each builds a draft and
//! queues it through `swarm-handoff`'s path (or answers as `swarm answer`).

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{usage, Agent, Outcome, Refusal, Tool};
use crate::agent::place;
use crate::agent::printout::{self, Viewer};
use crate::agent::queue::Item;
use crate::agent::send::{self, Sender};
use crate::doors::mcp::args::{self, Choices, Flag, Line, Lines, Text, MAX_ARG_BYTES};
use crate::error::{exit, Error, Token};
use crate::protocol::draft;
use crate::protocol::grammar;
use crate::protocol::header::Header;
use crate::protocol::types;

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

#[derive(Deserialize, JsonSchema)]
pub(super) struct SendArgs {
    /// message type
    #[serde(rename = "type")]
    kind: Line,
    /// role[,role...] or all
    to: Line,
    /// two digits, 00 first; default 50
    priority: Option<Line>,
    /// text (post, clarify options, answer, digest, close)
    body: Option<Text>,
    // Every other argument is a draft header.
    #[serde(flatten)]
    #[schemars(with = "std::collections::BTreeMap<String, String>")]
    headers: Map<String, Value>,
}

impl Tool for SendArgs {
    const NAME: &'static str = "send";
    const DESCRIPTION: &'static str = "Send a message, validated like a swarm-handoff draft; other draft headers are extra string arguments. type: {types}. Headers by type: git_handoff task, commit; note message (<=80 chars); post subject; clarify question; answer choices; close reason; react reaction. Any type: in_reply_to, thread, cc, wake, discussion.";
    fn description() -> Cow<'static, str> {
        let types = types::sendable_types().join(", ");
        Self::DESCRIPTION.replace("{types}", &types).into()
    }
    fn run(self, agent: &Agent) -> Outcome {
        send_tool(agent, &self)
    }
}

fn send_tool(agent: &Agent, a: &SendArgs) -> Outcome {
    let priority = a.priority.as_ref().map_or("50", |p| p.0.as_str());
    let mut headers = vec![
        (Header::Type.as_str(), a.kind.0.as_str()),
        (Header::To.as_str(), a.to.0.as_str()),
        (Header::Priority.as_str(), priority),
    ];
    let given = 2 + usize::from(a.priority.is_some()) + usize::from(a.body.is_some());
    if given + a.headers.len() > 64 {
        return Err(usage("send: at most 64 arguments."));
    }
    // Every other argument is a draft header, in name order; the draft
    // parser refuses unknown and reserved names with the CLI's text.
    for (k, v) in &a.headers {
        let Some(v) = v.as_str() else {
            return Err(usage(format!(
                "send: header '{}' must be a string.",
                crate::text::escape(k)
            )));
        };
        if args::breaks_line(k) || args::breaks_line(v) {
            return Err(usage(format!(
                "send: '{}' {}",
                crate::text::escape(k),
                args::ONE_LINE
            )));
        }
        if k.contains(": ") || k.len() > 64 || v.len() > MAX_ARG_BYTES {
            return Err(usage(format!(
                "send: '{}' is not a header name.",
                crate::text::escape(k)
            )));
        }
        headers.push((k.as_str(), v));
    }
    let body = a.body.as_ref().map(|b| b.0.as_str());
    submit(agent, &draft_text(&headers, body), "mcp:send")
}

/// The item in process, for `reply`.
fn current(agent: &Agent) -> Result<Item, Refusal> {
    let at = place::resolve_as(&agent.cwd, &agent.role)?;
    crate::agent::queue::current_item(&at.wt, at.config().limits.max_file_bytes)
        .ok_or_else(|| Refusal::from(Error::token(Token::NoCurrentTask)))
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct Reply {
    /// the reply
    body: Text,
    /// role[,role...]
    to: Option<Line>,
}

impl Tool for Reply {
    const NAME: &'static str = "reply";
    const DESCRIPTION: &'static str = "Reply to the item in process (a post to its sender unless to is given; in_reply_to and thread are set).";
    fn run(self, agent: &Agent) -> Outcome {
        reply(agent, &self.body.0, self.to.map(|t| t.0))
    }
}

fn reply(agent: &Agent, body: &str, to: Option<String>) -> Outcome {
    let item = current(agent)?;
    let sender = item.msg.sender().unwrap_or("").to_string();
    let to = to.unwrap_or(sender);
    let id = item.msg.id().unwrap_or("").to_string();
    let priority = item
        .msg
        .priority()
        .filter(|p| crate::protocol::fields::valid_priority(p))
        .unwrap_or("50")
        .to_string();
    let headers = [
        (Header::Type.as_str(), types::POST.name),
        (Header::To.as_str(), to.as_str()),
        (Header::Priority.as_str(), priority.as_str()),
        (Header::InReplyTo.as_str(), id.as_str()),
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

#[derive(Deserialize, JsonSchema)]
pub(super) struct Ask {
    /// one role
    to: Line,
    /// one line
    question: Line,
    options: Option<Lines>,
    allow_multiple: Option<Flag>,
    /// default true
    allow_custom: Option<Flag>,
}

impl Tool for Ask {
    const NAME: &'static str = "ask";
    const DESCRIPTION: &'static str = "Ask a person or role a blocking question (clarify) about the item in process. Do not call done: the item stays in process (parked). End your turn; when woken, next returns that item with the answer.";
    fn run(self, agent: &Agent) -> Outcome {
        let mut headers = vec![
            (Header::Type.as_str(), types::CLARIFY.name),
            (Header::To.as_str(), self.to.0.as_str()),
            (Header::Priority.as_str(), "50"),
            (Header::Question.as_str(), self.question.0.as_str()),
        ];
        if let Some(m) = self.allow_multiple {
            headers.push((Header::AllowMultiple.as_str(), yes_no(m.0)));
        }
        if let Some(c) = self.allow_custom {
            headers.push((Header::AllowCustom.as_str(), yes_no(c.0)));
        }
        let body = self.options.unwrap_or_default().0.join("\n");
        submit(agent, &draft_text(&headers, Some(&body)), "mcp:ask")
    }
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct Answer {
    /// the clarify's id (or a unique prefix)
    id: Line,
    choices: Option<Choices>,
    /// custom answer
    text: Option<Text>,
}

impl Tool for Answer {
    const NAME: &'static str = "answer";
    const DESCRIPTION: &'static str = "Answer a clarify sent to you.";
    fn run(self, agent: &Agent) -> Outcome {
        let choices = self.choices.unwrap_or_default().0;
        answer(
            agent,
            &self.id.0,
            &choices,
            self.text.as_ref().map(|t| t.0.as_str()),
        )
    }
}

fn answer(agent: &Agent, id: &str, choices: &[usize], text: Option<&str>) -> Outcome {
    if choices.is_empty() && text.is_none() {
        return Err(usage("answer: give choices and/or text."));
    }
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let whole = crate::protocol::idprefix::expand(&at.project, id)?;
    let id = whole.as_str();
    let caller = crate::agent::caller::Caller::agent(&agent.role);
    match crate::person::answer::answer(&at.project, id, choices, text, &caller) {
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

#[derive(Deserialize, JsonSchema)]
pub(super) struct React {
    /// message id
    id: Line,
    #[schemars(extend("enum" = types::REACTIONS))]
    reaction: Line,
}

impl Tool for React {
    const NAME: &'static str = "react";
    const DESCRIPTION: &'static str =
        "React to a message; its sender sees it on their next take, without being woken.";
    fn run(self, agent: &Agent) -> Outcome {
        react(agent, &self.id.0, &self.reaction.0)
    }
}

fn react(agent: &Agent, id: &str, reaction: &str) -> Outcome {
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let whole = crate::protocol::idprefix::expand(&at.project, id)?;
    let id = whole.as_str();
    // To the message's sender; an id that names none is left to the
    // validator (`in_reply_to` must be a message id).
    let to = grammar::id_sender(id).unwrap_or(&agent.role);
    // 00: a reaction is taken with the recipient's next ready step, which
    // reads the queue in priority order.
    let headers = [
        (Header::Type.as_str(), types::REACT.name),
        (Header::To.as_str(), to),
        (Header::Priority.as_str(), "00"),
        (Header::InReplyTo.as_str(), id),
        (Header::Reaction.as_str(), reaction),
    ];
    submit(agent, &draft_text(&headers, None), "mcp:react")
}
