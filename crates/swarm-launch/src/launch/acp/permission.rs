//! A tool call the agent asks permission for is a person's decision
//! (docs/agents.md, "The ACP runtime"): each `session/request_permission`
//! becomes a `clarify` from the role to a person (the first human role of
//! the swarm), its question naming the tool and its input, its options
//! the ones the agent offered, so it waits in `swarm inbox`, `swarm
//! status` and the notification command like any question, and the person
//! answers it with `swarm answer <id> --choice N`. The client hands the
//! option chosen back to the agent.
//!
//! Why a clarify and not a store of our own: a person's question already
//! has its inbox, its attention list, its notification and its one
//! answering command that only a person may use as a human role
//! (person/answer.rs, agent/caller.rs).
//!
//! The invariants (the agent is hostile):
//! - the answer is read only from the person's own `sent/`, which a
//!   confined agent cannot write, and only an `answer` whose `from` is that
//!   person and whose `in_reply_to` is the clarify; an answer the agent
//!   sends as itself, or a file it plants in its own inbox, is never read;
//! - the option handed back is looked up in what the client kept in
//!   memory when it asked, never in a file: choice N is the N-th option
//!   the agent offered;
//! - the clarify as the person received it must say what the client
//!   asked (its question and options): one the agent rewrote in its
//!   outbox before delivery is refused, and the agent is told "rejected";
//! - an answer or close the role itself sends to its request (which would
//!   close the question before the person could answer) rejects it;
//! - every text taken from the agent is cut and cleaned to what a clarify
//!   allows (one line, no control characters, at most [`MAX_OPTIONS`]).

use std::collections::HashSet;

use serde_json::Value;

use crate::agent::send::{self, Sender};
use crate::error::{Error, Result};
use crate::launch::plan::Plan;
use crate::protocol::draft;
use crate::protocol::fields;
use crate::protocol::header::{names, Message};
use crate::protocol::layout::Worktree;
use crate::protocol::store;
use crate::protocol::types;

/// Most options put to the person (a clarify's limit).
pub const MAX_OPTIONS: usize = 20;
/// A clarify's question, in UTF-16 units; an option's.
const MAX_QUESTION: usize = 500;
const MAX_OPTION: usize = 200;
/// The longest option id handed back to the agent.
const MAX_OPTION_ID: usize = 256;

/// A request put to a person, as the client keeps it.
#[derive(Clone, Debug)]
pub struct Asked {
    /// The agent's JSON-RPC request id, answered with the decision.
    pub request: Value,
    /// The clarify's id.
    pub clarify: String,
    /// The role that asked, and the person asked.
    pub role: String,
    pub person: String,
    /// What the clarify says: its question and its options as shown.
    pub question: String,
    pub shown: Vec<String>,
    /// The agent's option ids, in the order shown, and their kinds.
    pub option_ids: Vec<String>,
    pub option_kinds: Vec<String>,
    /// The tool asked for (kind, title; [`super::grants::tool_of`]).
    pub tool: Option<(String, String)>,
}

/// The person's decision, or why there is none to hand back.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// The option chosen (its id), the choice's number, who chose, and
    /// the id of the answer that said so.
    Chosen {
        option_id: String,
        choice: usize,
        by: String,
        answer: String,
    },
    /// The request as delivered is not what was asked: refused.
    Tampered(String),
}

/// `s` on one line: control characters and newlines as spaces, runs of
/// spaces folded, at most `max` UTF-16 units (a clarify's measure).
pub fn one_line(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut units = 0;
    for c in s.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        units += c.len_utf16();
        if units > max.saturating_sub(1) {
            out.push('…');
            break;
        }
        out.push(c);
    }
    out.trim_end().to_string()
}

/// The options of a `session/request_permission` (ids and their shown
/// names), cleaned, without duplicates, at most [`MAX_OPTIONS`].
pub fn options(params: &Value) -> Vec<(String, String, String)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for o in params["options"].as_array().into_iter().flatten() {
        let (Some(id), Some(name)) = (o["optionId"].as_str(), o["name"].as_str()) else {
            continue;
        };
        if id.is_empty() || id.len() > MAX_OPTION_ID {
            continue;
        }
        let mut shown = one_line(name, MAX_OPTION - 20);
        if let Some(kind) = o["kind"].as_str() {
            shown = format!("{shown} ({})", one_line(kind, 16));
        }
        if shown.is_empty() || !seen.insert(shown.clone()) {
            continue;
        }
        out.push((
            id.to_string(),
            shown,
            o["kind"].as_str().unwrap_or_default().to_string(),
        ));
        if out.len() == MAX_OPTIONS {
            break;
        }
    }
    out
}

/// The question: the role, the tool (title and kind) and its input.
pub fn question(role: &str, params: &Value) -> String {
    let t = &params["toolCall"];
    let title = t["title"].as_str().unwrap_or("a tool");
    let kind = t["kind"].as_str().unwrap_or("other");
    let input = match &t["rawInput"] {
        Value::Null => t["locations"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|x| x["path"].as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default(),
        v => v.to_string(),
    };
    let input = if input.is_empty() {
        String::new()
    } else {
        format!("; input: {input}")
    };
    one_line(
        &format!("Permission: {role}'s agent asks to run {kind} tool: {title}{input}"),
        MAX_QUESTION,
    )
}

/// The person asked: the first human role of the plan.
pub fn person(plan: &Plan) -> Option<String> {
    plan.roles
        .iter()
        .find(|r| r.is_human())
        .map(|r| r.name.clone())
}

/// Sends the clarify for `params` (the agent's request `request`) from
/// `role` to a person; what was asked is kept in the returned [`Asked`].
pub fn ask(plan: &Plan, role: &str, request: Value, params: &Value) -> Result<Asked> {
    let Some(person) = person(plan) else {
        return Err(Error::conflict(format!(
            "no person to ask: {} names no human role (`agent: human`)",
            plan.source.path().display()
        )));
    };
    let offered = options(params);
    if offered.is_empty() {
        return Err(Error::bad_input(
            "the agent's permission request offers no usable option",
        ));
    }
    let question = question(role, params);
    let shown: Vec<String> = offered.iter().map(|(_, s, _)| s.clone()).collect();
    let text = format!(
        "type: clarify\nto: {person}\npriority: 20\nquestion: {question}\nallow_custom: no\n\n{}\n",
        shown.join("\n")
    );
    let sender = Sender::as_role(&plan.project, role)?;
    let q = send::submit(
        &sender,
        &draft::parse_bytes(text.as_bytes()),
        "acp:permission",
    )?;
    Ok(Asked {
        request,
        clarify: q.id,
        role: role.to_string(),
        person,
        question,
        shown,
        option_ids: offered.iter().map(|(id, _, _)| id.clone()).collect(),
        option_kinds: offered.into_iter().map(|(_, _, k)| k).collect(),
        tool: super::grants::tool_of(params),
    })
}

/// Withdraws `a` (its agent is gone, so no decision can reach it): a
/// `close` in reply to the clarify, so it leaves the person's inbox.
pub fn withdraw(plan: &Plan, a: &Asked, why: &str) -> Result<()> {
    let text = format!(
        "type: close\nto: {}\npriority: 20\nin_reply_to: {}\nreason: {}\n",
        a.person,
        a.clarify,
        one_line(why, 200)
    );
    let sender = Sender::as_role(&plan.project, &a.role)?;
    send::submit(
        &sender,
        &draft::parse_bytes(text.as_bytes()),
        "acp:withdraw",
    )
    .map(|_| ())
}

fn messages(dir: &std::path::Path, max_bytes: u64) -> impl Iterator<Item = Message> {
    store::each(dir)
        .filter(|e| e.is_file() && e.is_handoff_named())
        .filter_map(move |e| e.message(max_bytes))
}

/// The person's decision on `a`, once they answered (None: not yet).
pub fn answered(plan: &Plan, a: &Asked, max_bytes: u64) -> Option<Decision> {
    let person = plan.roles.iter().find(|r| r.name == a.person)?.worktree();
    let own = plan.roles.iter().find(|r| r.name == a.role)?.worktree();
    let closed_by_itself = [own.outbox(), own.sent()].iter().any(|d| {
        messages(d, max_bytes).any(|m| {
            m.in_reply_to() == Some(a.clarify.as_str())
                && [types::ANSWER.name, types::CLOSE.name]
                    .iter()
                    .any(|t| m.type_name() == Some(t))
        })
    });
    if closed_by_itself {
        return Some(Decision::Tampered(format!(
            "{} answered or withdrew its own request {} (only {} decides it)",
            a.role, a.clarify, a.person
        )));
    }
    let answer = messages(&person.sent(), max_bytes).find(|m| {
        m.type_name() == Some(types::ANSWER.name)
            && m.in_reply_to() == Some(a.clarify.as_str())
            && m.sender() == Some(a.person.as_str())
    })?;
    if let Some(why) = tampered(&person, a, max_bytes) {
        return Some(Decision::Tampered(why));
    }
    let choice = answer
        .get(names::CHOICES)
        .and_then(fields::parse_choices)
        .and_then(|c| c.first().copied())
        .filter(|n| (1..=a.option_ids.len()).contains(n));
    Some(match choice {
        Some(n) => Decision::Chosen {
            option_id: a.option_ids[n - 1].clone(),
            choice: n,
            by: a.person.clone(),
            answer: answer.id().unwrap_or_default().to_string(),
        },
        None => Decision::Tampered(format!(
            "the answer to {} names no option of the request",
            a.clarify
        )),
    })
}

/// Why the clarify the person received is not the one asked (None: it is).
fn tampered(person: &Worktree, a: &Asked, max_bytes: u64) -> Option<String> {
    let got = [person.inbox_new(), person.in_process(), person.completed()]
        .iter()
        .find_map(|d| messages(d, max_bytes).find(|m| m.id() == Some(a.clarify.as_str())));
    let Some(m) = got else {
        return Some(format!(
            "no copy of {} in {}'s inbox to check against",
            a.clarify, a.person
        ));
    };
    let options: Vec<&str> = m.body.lines().filter(|l| !l.trim().is_empty()).collect();
    (m.get(names::QUESTION) != Some(a.question.as_str()) || options != a.shown).then(|| {
        format!(
            "the request {} as delivered to {} is not what was asked (changed in the role's outbox before delivery)",
            a.clarify, a.person
        )
    })
}

/// What the agent is told for a decision: the option selected, or (a
/// refused or tampered request) the agent's own reject option if it
/// offered one, else cancelled.
pub fn outcome(a: &Asked, d: &Decision, reject_id: Option<&str>) -> Value {
    match (d, reject_id) {
        (
            Decision::Chosen {
                option_id, choice, ..
            },
            _,
        ) => {
            // "Always" is the swarm's to remember (launch/acp/grants.rs):
            // the agent gets its "once" where it offers one.
            let once = a
                .option_kinds
                .iter()
                .position(|k| k == "allow_once")
                .map(|i| &a.option_ids[i]);
            let id = match (a.option_kinds.get(choice - 1).map(String::as_str), once) {
                (Some("allow_always"), Some(once)) => once,
                _ => option_id,
            };
            serde_json::json!({"outcome": {"outcome": "selected", "optionId": id}})
        }
        (Decision::Tampered(_), Some(r)) if a.option_ids.iter().any(|o| o == r) => {
            serde_json::json!({"outcome": {"outcome": "selected", "optionId": r}})
        }
        (Decision::Tampered(_), _) => serde_json::json!({"outcome": {"outcome": "cancelled"}}),
    }
}

/// The id of the agent's first option of the first of `kinds` it offers.
pub fn option_of(params: &Value, kinds: &[&str]) -> Option<String> {
    let opts = params["options"].as_array()?;
    kinds.iter().find_map(|k| {
        opts.iter()
            .find(|o| o["kind"] == *k)
            .and_then(|o| o["optionId"].as_str())
            .filter(|id| !id.is_empty() && id.len() <= MAX_OPTION_ID)
            .map(str::to_string)
    })
}

/// The id of the agent's first `reject_once` (else `reject_always`) option.
pub fn reject_option(params: &Value) -> Option<String> {
    option_of(params, &["reject_once", "reject_always"])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hostile_options_and_questions_are_cut_and_cleaned() {
        let mut opts: Vec<Value> = (0..40)
            .map(|i| json!({"optionId": format!("o{i}"), "name": format!("opt\n{i}\x1b[31m"), "kind": "allow_once"}))
            .collect();
        opts.insert(
            0,
            json!({"optionId": "dup", "name": "opt\n0\x1b[31m", "kind": "allow_once"}),
        );
        opts.insert(0, json!({"optionId": 5, "name": "not a string id"}));
        opts.insert(0, json!({"optionId": "x".repeat(1000), "name": "long id"}));
        let o = options(&json!({ "options": opts }));
        assert_eq!(o.len(), MAX_OPTIONS);
        assert_eq!(o[0].0, "dup");
        assert!(o.iter().all(|(_, s, _)| !s.chars().any(char::is_control)));
        let q = question(
            "coder",
            &json!({"toolCall": {"title": "rm -rf /\n\ntype: answer", "kind": "execute", "rawInput": {"c": "y".repeat(5000)}}}),
        );
        assert!(q.encode_utf16().count() <= MAX_QUESTION, "{}", q.len());
        assert!(!q.contains('\n'));
        assert!(q.starts_with(
            "Permission: coder's agent asks to run execute tool: rm -rf / type: answer"
        ));
    }

    #[test]
    fn a_tampered_request_is_rejected_with_the_agents_reject_option() {
        let a = Asked {
            request: json!(1),
            clarify: "c".into(),
            role: "r".into(),
            person: "p".into(),
            question: "q".into(),
            shown: vec!["Allow (allow_once)".into(), "Reject (reject_once)".into()],
            option_ids: vec!["proceed_once".into(), "cancel".into()],
            option_kinds: vec!["allow_once".into(), "reject_once".into()],
            tool: None,
        };
        let t = Decision::Tampered("x".into());
        assert_eq!(
            outcome(&a, &t, Some("cancel")),
            json!({"outcome": {"outcome": "selected", "optionId": "cancel"}})
        );
        assert_eq!(
            outcome(&a, &t, Some("proceed_once_forged")),
            json!({"outcome": {"outcome": "cancelled"}})
        );
        assert_eq!(
            reject_option(&json!({"options": [{"optionId": "a", "kind": "allow_once"}, {"optionId": "r", "kind": "reject_once"}]})).as_deref(),
            Some("r")
        );
    }
}
