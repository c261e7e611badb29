//! The reply context of a draft (docs/message-model.md): the parent it
//! answers (named, or the item in process), its thread, the hop count, the
//! answer's checks and body, stamped artifacts.

use crate::agent::artifacts;
use crate::agent::queue::{self, Item};
use crate::protocol::draft::Draft;
use crate::protocol::fields;
use crate::protocol::header::names;
use crate::protocol::types;

use super::Sender;

/// The stamps a message gets from its context (docs/message-model.md).
#[derive(Default)]
pub(super) struct Context {
    pub(super) parent: Option<Item>,
    pub(super) thread: Option<String>,
    pub(super) hop: u32,
    pub(super) artifacts: Vec<artifacts::Stamped>,
}

/// Whether an inbox item was meant for `role` (roles sharing a worktree
/// share its inbox).
pub(super) fn meant_for(item: &Item, role: &str) -> bool {
    let from = item.msg.sender().unwrap_or("");
    item.msg.recipient() == Some(role)
        || crate::protocol::grammar::addressed(item.msg.to().unwrap_or(""), from, role)
        || crate::protocol::grammar::role_list(item.msg.get(names::CC)).contains(&role)
}

/// The collaboration checks that need the files: the message replied to,
/// its thread and hop, an answer against its clarify, `to: all`, artifacts.
pub(super) fn context(
    s: &Sender,
    d: &Draft,
    rule: &types::TypeRule,
    errors: &mut Vec<String>,
) -> Context {
    let mut c = Context::default();
    let wt = &s.at.worktree;
    let max = s.config.limits.max_file_bytes;
    let given = d.in_reply_to().filter(|v| !fields::blank(v));
    c.parent = match given {
        Some(id) if crate::protocol::grammar::valid_message_id(id) => {
            let found = queue::find_item(wt, id, max);
            if found.is_none() {
                errors.push(format!(
                    "Header 'in_reply_to' must name a message in your inbox; got '{id}'."
                ));
            }
            found
        }
        Some(_) => None,
        None => queue::current_item(wt, max).filter(|i| meant_for(i, &s.role)),
    };
    if let Some(p) = &c.parent {
        let pid = p.msg.id().unwrap_or("");
        let derived = p.msg.thread().unwrap_or(pid).to_string();
        if let Some(t) = d
            .thread()
            .filter(|t| crate::protocol::grammar::valid_message_id(t))
        {
            if t != derived {
                errors.push(format!(
                    "Header 'thread' must be '{derived}', the thread of '{pid}'; got '{t}'."
                ));
            }
        }
        c.thread = Some(derived);
        // A new task, or a person speaking, ends an agents' reply chain; a
        // reaction is no step in it (nobody answers a reaction).
        if rule.name != types::GIT_HANDOFF.name && rule.name != types::REACT.name && !s.is_human() {
            c.hop = fields::hop(&p.msg).unwrap_or(0).saturating_add(1);
        }
        if c.hop > s.config.max_hops {
            errors.push(format!(
                "Reply would be hop {}, past max_hops {} (in reply to '{pid}'); start a new task with a git_handoff or ask a person.",
                c.hop, s.config.max_hops
            ));
        }
    } else if let Some(t) = d
        .thread()
        .filter(|t| crate::protocol::grammar::valid_message_id(t))
    {
        c.thread = Some(t.to_string());
    }
    if rule.name == types::ANSWER.name {
        answer_checks(d, c.parent.as_ref(), given.is_some(), errors);
    }
    if rule.name == types::REACT.name && c.parent.is_none() && given.is_none() {
        errors.push("Missing required header 'in_reply_to' for react.".to_string());
    }
    if d.to() == Some(crate::protocol::grammar::ALL)
        && !s.roles.roles.iter().any(|r| r.name != s.role)
    {
        errors.push("Header 'to' is 'all', but there is no other role to send to.".to_string());
    }
    let mut seen: Vec<String> = Vec::new();
    for raw in d.get_all(names::ARTIFACT) {
        match artifacts::stamp(&wt.root, raw) {
            Ok(a) if seen.contains(&a.path) => {
                errors.push(format!("Duplicate artifact '{}'.", a.path));
            }
            Ok(a) => {
                seen.push(a.path.clone());
                c.artifacts.push(a);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    c
}

/// An answer against the clarify it answers: a clarify, in-range choices,
/// one choice unless `allow_multiple`, text only if `allow_custom`.
pub(super) fn answer_checks(
    d: &Draft,
    parent: Option<&Item>,
    given: bool,
    errors: &mut Vec<String>,
) {
    let Some(p) = parent else {
        if !given {
            errors.push("Missing required header 'in_reply_to' for answer.".to_string());
        }
        return;
    };
    let pid = p.msg.id().unwrap_or("");
    let kind = p.msg.type_name().unwrap_or("unknown");
    if kind != types::CLARIFY.name {
        errors.push(format!(
            "Header 'in_reply_to' must name a clarify for answer; '{pid}' is a {kind}."
        ));
        return;
    }
    let options = fields::options(&p.msg.body);
    if let Some(list) = d.get(names::CHOICES).and_then(fields::parse_choices) {
        for n in &list {
            if *n == 0 || *n > options.len() {
                errors.push(format!(
                    "Choice {n} is not an option of clarify '{pid}'; it has {} options.",
                    options.len()
                ));
            }
        }
        if list.len() > 1 && !fields::flag(&p.msg, crate::protocol::header::Header::AllowMultiple) {
            errors.push(format!(
                "Only one choice is allowed for clarify '{pid}' (allow_multiple: no); got {}.",
                list.len()
            ));
        }
    }
    let text = d.body.as_deref().is_some_and(|b| !fields::blank(b));
    if text && !fields::flag(&p.msg, crate::protocol::header::Header::AllowCustom) {
        errors.push(format!(
            "Custom text is not allowed for clarify '{pid}' (allow_custom: no); choose an option."
        ));
    }
}

/// An answer's body: the chosen options (`<n>. <option>`, one per line),
/// then a blank line and the answer's own text.
pub(super) fn answer_body(d: &Draft, parent: Option<&Item>) -> String {
    let options = parent
        .map(|p| fields::options(&p.msg.body))
        .unwrap_or_default();
    let mut body = String::new();
    let choices = d
        .get(names::CHOICES)
        .and_then(fields::parse_choices)
        .unwrap_or_default();
    for n in &choices {
        let o = options.get(n.wrapping_sub(1)).copied().unwrap_or("");
        body.push_str(&format!("{n}. {o}\n"));
    }
    let text = d.body.as_deref().unwrap_or("");
    if !fields::blank(text) {
        if !body.is_empty() {
            body.push('\n');
        }
        body.push_str(text);
    }
    body
}
