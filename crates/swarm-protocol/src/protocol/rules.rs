//! Message types and their header rules, shared by the draft validator and the
//! daemon's re-check, so a file that `swarm-handoff` would refuse is refused
//! again at delivery (docs/protocol.md §7.2).
//!
//! The two core types (`git_handoff`, `note`) keep SwarmForge's rules and
//! messages exactly (docs/protocol.md §7.1); the collaboration types (`post`,
//! `clarify`, `answer`, `digest_request`, `digest`, `close`,
//! docs/message-model.md) add groups in the same style after SwarmForge's.

use crate::protocol::commit_id::{CommitId, HANDOFF_LEN};
use crate::protocol::fields::*;
use crate::protocol::gitcheck::CommitRefused;
use crate::protocol::grammar;
use crate::protocol::header::{Header, Message};
use crate::protocol::types::*;

fn present<'a>(f: &'a impl Fields, name: &str) -> Option<&'a str> {
    f.field(name).filter(|v| !blank(v))
}

/// Who sends, as far as validation cares.
pub struct Policy<'a> {
    /// Whether a recipient is a known role.
    pub is_role: &'a dyn Fn(&str) -> bool,
    /// The types the sender may send (see [`allowed_for`]).
    pub allowed: &'a [&'static str],
}

/// The validation groups (docs/protocol.md §7.1) in their order: base,
/// recipient, per-field, git, note; then the collaboration groups (common
/// headers, the new types, body size). `is_role` answers whether a recipient is
/// a known role; every sendable type is allowed. The commit check through git
/// is separate (it needs a repository).
///
/// `resolve_commit` runs the repository check (docs/protocol.md §7.1) on a
/// well-formed commit (in place in the git group, as SwarmForge orders it); the
/// daemon passes a resolver that accepts everything.
pub fn validate(
    f: &impl Fields,
    is_role: &dyn Fn(&str) -> bool,
    resolve_commit: &mut dyn FnMut(&CommitId) -> Result<(), CommitRefused>,
) -> Vec<String> {
    let allowed = sendable_types();
    validate_with(
        f,
        &Policy {
            is_role,
            allowed: &allowed,
        },
        resolve_commit,
    )
}

/// ` Did you mean 'note'?` for a near miss (another case, stray spaces, or
/// at most two letters off); empty otherwise.
fn did_you_mean(got: &str, allowed: &[&str]) -> String {
    let plain = got.trim().to_ascii_lowercase();
    allowed
        .iter()
        .map(|a| (strsim::levenshtein(&plain, a), a))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, a)| format!(" Did you mean '{a}'?"))
        .unwrap_or_default()
}

/// [`validate`] for a sender with its own `allowed_types`.
pub fn validate_with(
    f: &impl Fields,
    policy: &Policy,
    resolve_commit: &mut dyn FnMut(&CommitId) -> Result<(), CommitRefused>,
) -> Vec<String> {
    let ty = present(f, "type");
    let to = present(f, "to");
    // The rule of an allowed type; None for an unknown or disallowed one.
    let rule = ty
        .and_then(type_rule)
        .filter(|r| policy.allowed.contains(&r.name));
    let mut errors = base_errors(f, policy, rule);
    // Recipient group.
    if let Some(to) = to {
        errors.extend(recipient_errors(to, policy.is_role));
    }
    // An unknown type, or one this sender may not send, gets the type error
    // alone: every per-field error after it would only be a knock-on.
    if ty.is_some() && rule.is_none() {
        return errors;
    }
    errors.extend(field_errors(f, ty, rule));
    errors.extend(git_errors(f, ty, resolve_commit));
    errors.extend(note_errors(f, ty));
    // The collaboration groups only speak about a type they know.
    let Some(rule) = rule else {
        return errors;
    };
    errors.extend(common_errors(f, to, policy.is_role));
    errors.extend(type_errors(f, rule, to));
    if let Some(body) = f.body().filter(|_| rule.body) {
        if body.len() > rule.max_body {
            errors.push(format!(
                "Body must be no larger than {} bytes for {}; got {}.",
                rule.max_body,
                rule.name,
                body.len()
            ));
        }
    }
    errors
}

/// The base group: `type`, `to` and `priority` present, the type one the
/// sender may send (`rule`, None when it is not), the priority two digits.
fn base_errors(f: &impl Fields, policy: &Policy, rule: Option<&TypeRule>) -> Vec<String> {
    let mut errors = Vec::new();
    let ty = present(f, "type");
    let priority = present(f, "priority");
    if ty.is_none() {
        errors.push("Missing required header 'type'.".to_string());
    }
    if present(f, "to").is_none() {
        errors.push("Missing required header 'to'.".to_string());
    }
    if priority.is_none() {
        errors.push("Missing required header 'priority'.".to_string());
    }
    if let Some(t) = ty {
        if rule.is_none() {
            if policy.allowed.is_empty() {
                errors.push(format!(
                    "Header 'type' must be one of no types (allowed_types is empty); got '{t}'."
                ));
            } else {
                errors.push(format!(
                    "Header 'type' must be one of {}; got '{t}'.{}",
                    list_in_words(policy.allowed),
                    did_you_mean(t, policy.allowed)
                ));
            }
        }
    }
    if let Some(p) = priority {
        if !valid_priority(p) {
            errors.push(format!(
                "Header 'priority' must be two digits from 00 to 99; got '{p}'."
            ));
        }
    }
    errors
}

/// The per-field group: a known draft field the type does not take.
fn field_errors(f: &impl Fields, ty: Option<&str>, rule: Option<&TypeRule>) -> Vec<String> {
    let Some(t) = ty else {
        return Vec::new();
    };
    f.names()
        .into_iter()
        .filter(|name| !rule.is_some_and(|r| r.allows(name)) && known_draft_field(name))
        .map(|name| format!("Header '{name}' is not allowed for type '{t}'."))
        .collect()
}

/// The git group: a `git_handoff`'s task and commit (the commit resolved
/// in the repository by `resolve_commit` once well-formed); neither on any
/// other type.
fn git_errors(
    f: &impl Fields,
    ty: Option<&str>,
    resolve_commit: &mut dyn FnMut(&CommitId) -> Result<(), CommitRefused>,
) -> Vec<String> {
    let mut errors = Vec::new();
    if ty != Some(GIT_HANDOFF.name) {
        if present(f, "commit").is_some() {
            errors.push("Header 'commit' is only allowed for git_handoff.".to_string());
        }
        if present(f, "task").is_some() {
            errors.push("Header 'task' is only allowed for git_handoff.".to_string());
        }
        return errors;
    }
    match present(f, "task") {
        None => errors.push("Missing required header 'task' for git_handoff.".to_string()),
        Some(task) if utf16_len(task) > MAX_LINE_CHARS => errors.push(format!(
            "Header 'task' must be no longer than {MAX_LINE_CHARS} characters; got {}.",
            utf16_len(task)
        )),
        _ => {}
    }
    let commit = present(f, "commit");
    match (commit_shape_error(commit), commit.map(CommitId::parse)) {
        (Some(e), _) => errors.push(e),
        (None, Some(Ok(c))) => {
            if let Err(e) = resolve_commit(&c) {
                errors.push(e.to_string());
            }
        }
        _ => {}
    }
    errors
}

/// The note group: a `note`'s one-line message; no message on any other type.
fn note_errors(f: &impl Fields, ty: Option<&str>) -> Vec<String> {
    let mut errors = Vec::new();
    if ty == Some(NOTE.name) {
        match present(f, "message") {
            None => errors.push("Missing required header 'message' for note.".to_string()),
            Some(m) if utf16_len(m) > MAX_LINE_CHARS => errors.push(format!(
                "Header 'message' must be no longer than {MAX_LINE_CHARS} characters; got {}.",
                utf16_len(m)
            )),
            _ => {}
        }
    } else if present(f, "message").is_some() {
        errors.push("Header 'message' is only allowed for note.".to_string());
    }
    errors
}

/// Checks of the headers any type may carry: `cc`, `wake`, `in_reply_to`,
/// `thread`, `discussion`, and how many `artifact`s.
fn common_errors(f: &impl Fields, to: Option<&str>, is_role: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(cc) = present(f, "cc") {
        let to_items: Vec<&str> = to.map(|t| t.split(',').collect()).unwrap_or_default();
        if to == Some("all") {
            errors.push("Header 'cc' is not allowed with 'to: all'.".to_string());
        } else {
            let mut seen: Vec<&str> = Vec::new();
            let items: Vec<&str> = cc.split(',').collect();
            for item in &items {
                if blank(item) {
                    errors.push("Header 'cc' contains an empty role.".to_string());
                    continue;
                }
                if item.contains('_') {
                    errors.push(format!(
                        "Cc role '{item}' is invalid; role names may not contain underscores."
                    ));
                }
                if seen.contains(item) {
                    errors.push(format!("Duplicate cc role '{item}'."));
                }
                seen.push(item);
                if !is_role(item) || *item == "all" {
                    errors.push(format!("Unknown cc role '{item}'."));
                } else if to_items.contains(item) {
                    errors.push(format!("Role '{item}' is in both 'to' and 'cc'."));
                }
            }
            let total = to_items.len() + items.len();
            if total > MAX_RECIPIENTS {
                errors.push(format!(
                    "Headers 'to' and 'cc' must name at most {MAX_RECIPIENTS} recipients together; got {total}."
                ));
            }
        }
    }
    if let Some(w) = present(f, "wake") {
        if yes_no(w).is_none() {
            errors.push(format!("Header 'wake' must be yes or no; got '{w}'."));
        }
    }
    for h in ["in_reply_to", "thread"] {
        if let Some(v) = present(f, h) {
            if !grammar::valid_message_id(v) {
                errors.push(format!("Header '{h}' must be a message id; got '{v}'."));
            }
        }
    }
    if let Some(d) = present(f, "discussion") {
        if !crate::protocol::grammar::valid_discussion_id(d) {
            errors.push(format!(
                "Header 'discussion' must be a discussion id; got '{d}'."
            ));
        }
    }
    let artifacts = f.names().iter().filter(|n| **n == "artifact").count();
    if artifacts > MAX_ARTIFACTS {
        errors.push(format!(
            "A message may carry at most {MAX_ARTIFACTS} 'artifact' headers; got {artifacts}."
        ));
    }
    errors
}

fn longer_than(f: &impl Fields, name: &str, max: usize) -> Option<String> {
    let v = present(f, name)?;
    let n = utf16_len(v);
    (n > max).then(|| format!("Header '{name}' must be no longer than {max} characters; got {n}."))
}

/// The groups of the collaboration types.
fn type_errors(f: &impl Fields, rule: &TypeRule, to: Option<&str>) -> Vec<String> {
    let mut errors = Vec::new();
    let body = f.body();
    let has_body = body.is_some_and(|b| !blank(b));
    match rule.name {
        "post" => {
            errors.extend(longer_than(f, "subject", MAX_SUBJECT_CHARS));
            if body.is_some() && !has_body && present(f, "subject").is_none() {
                errors.push("Missing body or header 'subject' for post.".to_string());
            }
        }
        "digest" => {
            errors.extend(longer_than(f, "subject", MAX_SUBJECT_CHARS));
            if body.is_some() && !has_body {
                errors.push("Missing required body for digest.".to_string());
            }
        }
        "clarify" => errors.extend(clarify_errors(f, to)),
        "answer" => errors.extend(answer_errors(f)),
        "react" => match present(f, "reaction") {
            None => errors.push("Missing required header 'reaction' for react.".to_string()),
            Some(r) if !REACTIONS.contains(&r) => errors.push(format!(
                "Header 'reaction' must be one of {}; got '{r}'.",
                list_in_words(REACTIONS)
            )),
            Some(_) => {}
        },
        "close" => match present(f, "reason") {
            None => errors.push("Missing required header 'reason' for close.".to_string()),
            Some(_) => errors.extend(longer_than(f, "reason", MAX_REASON_CHARS)),
        },
        "seat_request" => errors.extend(seat_request_errors(f)),
        _ => {}
    }
    errors
}

/// The clarify group: a bounded question to exactly one role, yes/no
/// flags, and at most [`MAX_OPTIONS`] distinct bounded options (one per
/// body line; none only when `allow_custom`).
fn clarify_errors(f: &impl Fields, to: Option<&str>) -> Vec<String> {
    let mut errors = Vec::new();
    match present(f, "question") {
        None => errors.push("Missing required header 'question' for clarify.".to_string()),
        Some(_) => errors.extend(longer_than(f, "question", MAX_QUESTION_CHARS)),
    }
    for h in ["allow_multiple", "allow_custom"] {
        if let Some(v) = present(f, h) {
            if yes_no(v).is_none() {
                errors.push(format!("Header '{h}' must be yes or no; got '{v}'."));
            }
        }
    }
    if let Some(to) = to {
        if to == "all" || to.contains(',') {
            errors.push(format!(
                "Header 'to' must name exactly one role for clarify; got '{to}'."
            ));
        }
    }
    let Some(body) = f.body() else {
        return errors;
    };
    let opts = options(body);
    if opts.is_empty() && !flag(f, Header::AllowCustom) {
        errors.push(
            "Missing options for clarify: list one per body line when 'allow_custom' is no."
                .to_string(),
        );
    }
    if opts.len() > MAX_OPTIONS {
        errors.push(format!(
            "Clarify may list at most {MAX_OPTIONS} options; got {}.",
            opts.len()
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, o) in opts.iter().enumerate() {
        let n = utf16_len(o);
        if n > MAX_OPTION_CHARS {
            errors.push(format!(
                "Option {} must be no longer than {MAX_OPTION_CHARS} characters; got {n}.",
                i + 1
            ));
        }
        if seen.contains(o) {
            errors.push(format!("Duplicate option '{o}'."));
        }
        seen.push(o);
    }
    errors
}

/// The answer group: `choices` as distinct option numbers, or a body.
fn answer_errors(f: &impl Fields) -> Vec<String> {
    let mut errors = Vec::new();
    let body = f.body();
    let choices = present(f, "choices");
    if let Some(c) = choices {
        match parse_choices(c) {
            None => errors.push(format!(
                "Header 'choices' must be option numbers separated by commas; got '{c}'."
            )),
            Some(list) => {
                let mut seen = Vec::new();
                for n in list {
                    if seen.contains(&n) {
                        errors.push(format!("Duplicate choice {n}."));
                    }
                    seen.push(n);
                }
            }
        }
    }
    if body.is_some_and(blank) && choices.is_none() {
        errors.push("Missing answer: give header 'choices' or a body for answer.".to_string());
    }
    errors
}

/// A `seat_request` (docs/lineups.md): `seat: add` with a `seat_role` and
/// the `definition` it starts from, or `seat: remove` with a `seat_role`;
/// `reason` optional.
fn seat_request_errors(f: &impl Fields) -> Vec<String> {
    let mut errors = Vec::new();
    let seat = present(f, "seat");
    match seat {
        None => errors.push("Missing required header 'seat' for seat_request.".to_string()),
        Some(s) if !SEAT_ACTIONS.contains(&s) => errors.push(format!(
            "Header 'seat' must be one of {}; got '{s}'.",
            list_in_words(SEAT_ACTIONS)
        )),
        Some(_) => {}
    }
    let names = [("seat_role", true), ("definition", seat == Some("add"))];
    for (h, required) in names {
        match present(f, h) {
            None if required => {
                errors.push(format!("Missing required header '{h}' for seat_request."))
            }
            Some(v) if !crate::protocol::grammar::valid_role(v) => errors.push(format!(
                "Header '{h}' must be a role name (letters, digits and '-'); got '{v}'."
            )),
            _ => {}
        }
    }
    errors.extend(longer_than(f, "reason", MAX_REASON_CHARS));
    errors
}

/// The commit checks that need no repository: a [`CommitId`] of exactly
/// [`HANDOFF_LEN`] digits.
pub fn commit_shape_error(commit: Option<&str>) -> Option<String> {
    match commit {
        None => Some("Missing required header 'commit' for git_handoff.".to_string()),
        Some(c) if !CommitId::parse(c).is_ok_and(|id| id.is_handoff()) => Some(format!(
            "Header 'commit' must be exactly {HANDOFF_LEN} hexadecimal characters; got '{c}'."
        )),
        _ => None,
    }
}

/// Recipient checks (docs/protocol.md §7.1), per item in order; `to` is split
/// keeping empties. `all` alone means every role but the sender.
pub fn recipient_errors(to: &str, is_role: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut errors = Vec::new();
    if to == "all" {
        return errors;
    }
    let mut seen: Vec<&str> = Vec::new();
    let items: Vec<&str> = to.split(',').collect();
    for item in &items {
        if blank(item) {
            errors.push("Header 'to' contains an empty recipient.".to_string());
            continue;
        }
        if *item == "all" {
            errors.push("Recipient 'all' must be the only recipient in 'to'.".to_string());
            continue;
        }
        if item.contains('_') {
            errors.push(format!(
                "Recipient role '{item}' is invalid; role names may not contain underscores."
            ));
        }
        if seen.contains(item) {
            errors.push(format!("Duplicate recipient '{item}'."));
        }
        seen.push(item);
        if !is_role(item) {
            errors.push(format!("Unknown recipient role '{item}'."));
        }
    }
    if items.len() > MAX_RECIPIENTS {
        errors.push(format!(
            "Header 'to' must name at most {MAX_RECIPIENTS} recipients; got {}.",
            items.len()
        ));
    }
    errors
}

/// Why the daemon refuses a message its sender's helper let through (the
/// text is the failure reason written beside the original: a sender reads
/// it to repair the draft).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Recheck {
    /// The sender's `allowed_types` does not hold the message's type.
    #[error("type not allowed for sender")]
    TypeNotAllowed,
    #[error("invalid: {0}")]
    Hop(crate::protocol::fields::BadHop),
    /// Forwarded more often than `max_hops`.
    #[error("hop_limit")]
    HopLimit,
    /// The first validation error.
    #[error("invalid: {0}")]
    Invalid(String),
}

/// The daemon's re-check of an outbox file from a role (`from`), with the
/// failure reason: `type not allowed for sender`, `hop_limit`, or
/// `invalid: <the first validation message>`. (`artifact` values are not
/// re-checked here: a hand-written one is delivered as written, and
/// `swarm artifacts` reports it as `malformed`.)
pub fn recheck(msg: &Message, policy: &Policy, max_hops: u32) -> Result<(), Recheck> {
    if let Some(rule) = msg.type_name().and_then(type_rule) {
        if !policy.allowed.contains(&rule.name) {
            return Err(Recheck::TypeNotAllowed);
        }
    }
    match hop(msg) {
        Err(e) => return Err(Recheck::Hop(e)),
        Ok(h) if h > max_hops => return Err(Recheck::HopLimit),
        Ok(_) => {}
    }
    let mut errors = validate_with(msg, policy, &mut |_| Ok(()));
    for rule in [&ANSWER, &REACT] {
        if msg.type_name() == Some(rule.name) && present(msg, "in_reply_to").is_none() {
            errors.push(format!(
                "Missing required header 'in_reply_to' for {}.",
                rule.name
            ));
        }
    }
    match errors.into_iter().next() {
        Some(e) => Err(Recheck::Invalid(e)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
