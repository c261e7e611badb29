//! What `ready-next` and `done-current` print: SwarmForge's tokens
//! (docs/protocol.md §7.3) as text, or one JSON object carrying the same facts.
//!
//! The collaboration tokens (docs/message-model.md) only appear when their
//! headers are present, between the SwarmForge header tokens and `PAYLOAD:`,
//! so a `git_handoff` or `note` without them prints exactly as SwarmForge did.

use crate::protocol::header::names;
use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{json, Map, Value};

use crate::agent::queue::{Done, Item, Ready};
use crate::protocol::fields;
use crate::protocol::types;
use crate::text::escape;

/// Who is reading (the acting role, when known), for `MENTIONED:` / `CC:`,
/// and the forum facts the caller looked up for the items shown.
#[derive(Clone, Copy, Debug, Default)]
pub struct Viewer<'a> {
    pub role: Option<&'a str>,
    pub forum: Option<&'a ForumView>,
    /// Keep SwarmForge's generated first body line ("Re-read your role and
    /// constitution."): true in a SwarmForge project, which has that
    /// constitution; a role without one is not told to re-read it.
    pub preamble: bool,
    /// The project's card routes, for `CARD_TYPE:` / `THIS_CARD:` (today's
    /// SwarmForge; crates/swarm-records/src/board/). None: not printed.
    pub cards: Option<&'a crate::board::Routes>,
}

/// The body as `viewer` is shown it (see [`Viewer::preamble`]).
fn payload(item: &Item, viewer: Viewer) -> String {
    let body = &item.msg.body;
    if viewer.preamble {
        return body.clone();
    }
    match body.strip_prefix(crate::protocol::draft::BODY_PREAMBLE) {
        Some(rest) if rest.starts_with('\n') || rest.is_empty() => {
            let rest = rest.strip_prefix('\n').unwrap_or(rest);
            rest.strip_prefix('\n').unwrap_or(rest).to_string()
        }
        _ => body.clone(),
    }
}

/// Forum facts about the items being printed, looked up from the files by
/// the caller (this module reads nothing).
#[derive(Clone, Debug, Default)]
pub struct ForumView {
    /// Per item, by its path.
    pub items: HashMap<PathBuf, ItemForum>,
}

impl ForumView {
    fn of(&self, item: &Item) -> Option<&ItemForum> {
        self.items.get(&item.path)
    }
}

/// What the forum adds to one item's printout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ItemForum {
    /// `LATEST_DIGEST:` the delivered original of the newest digest of the
    /// item's session (not shown to the digest's author).
    pub latest_digest: Option<PathBuf>,
    /// `CONTEXT:` the last turns of the item's discussion.
    pub context: Option<Vec<Turn>>,
    /// `CONTRIBUTIONS:` the contributions a digest request lists, in order.
    pub contributions: Option<Vec<Contribution>>,
}

/// One entry of a discussion's turn log as shown in `CONTEXT:`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Turn {
    pub speaker: String,
    /// The message id; empty for a skip.
    pub id: String,
    /// What was said, on one line; None for a skipped turn.
    pub text: Option<String>,
}

/// One contribution listed by a digest request.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Contribution {
    pub id: String,
    /// The sender's original, when found.
    pub path: Option<PathBuf>,
    /// Its forum line (`[YYYY-MM-DD HH:MM:SS] [FROM -> TO] type summary`,
    /// escaped already), or `<id> (not found)`.
    pub line: String,
}

/// `ready-next --resume-context N`: what a restarted agent is shown after
/// the ready output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resume {
    /// The last transcript lines that involve the role, oldest first
    /// (escaped already).
    pub lines: Vec<String>,
    /// The newest digest of the current session, if any.
    pub latest_digest: Option<PathBuf>,
}

impl Viewer<'_> {
    /// The roles this copy speaks to: the reader and the copy's recipient.
    fn is_me(&self, item: &Item, role: &str) -> bool {
        self.role == Some(role) || item.msg.recipient() == Some(role)
    }

    fn mentioned(&self, item: &Item) -> bool {
        crate::protocol::grammar::role_list(item.msg.get(names::MENTIONS))
            .iter()
            .any(|r| self.is_me(item, r))
    }

    fn cc(&self, item: &Item) -> bool {
        crate::protocol::grammar::role_list(item.msg.get(names::CC))
            .iter()
            .any(|r| self.is_me(item, r))
    }
}

/// A clarify's question as the recipient sees it.
struct Clarify<'a> {
    question: &'a str,
    options: Vec<&'a str>,
    allow_multiple: bool,
    allow_custom: bool,
}

fn clarify(item: &Item) -> Option<Clarify<'_>> {
    if item.msg.type_name() != Some(types::CLARIFY.name) {
        return None;
    }
    Some(Clarify {
        question: item.msg.get(names::QUESTION).unwrap_or(""),
        options: fields::options(&item.msg.body),
        allow_multiple: fields::flag(&item.msg, crate::protocol::header::Header::AllowMultiple),
        allow_custom: fields::flag(&item.msg, crate::protocol::header::Header::AllowCustom),
    })
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// An answer's parts: the chosen options as sent (`<n>. <option>`), then
/// its own text lines. `swarm-handoff` writes the chosen options first, one
/// per line, then a blank line and the text (docs/message-model.md).
pub struct AnswerParts<'a> {
    pub choices: Vec<&'a str>,
    pub text: Vec<&'a str>,
}

pub fn answer_parts(item: &Item) -> AnswerParts<'_> {
    let k = item
        .msg
        .get(names::CHOICES)
        .and_then(fields::parse_choices)
        .map_or(0, |c| c.len());
    let lines: Vec<&str> = item.msg.body.lines().collect();
    let k = k.min(lines.len());
    let mut rest = &lines[k..];
    if k > 0 && rest.first().is_some_and(|l| l.trim().is_empty()) {
        rest = &rest[1..];
    }
    AnswerParts {
        choices: lines[..k].to_vec(),
        text: rest.to_vec(),
    }
}

/// The `ANSWER:` block of an answer handed out with a resumed item.
fn answer_text(a: &Item) -> String {
    let mut s = format!(
        "ANSWER: {}\nANSWER_FROM: {}\n",
        a.path.display(),
        escape(a.msg.sender().unwrap_or("unknown"))
    );
    if let Some(r) = a.msg.in_reply_to() {
        s.push_str(&format!("ANSWER_IN_REPLY_TO: {}\n", escape(r)));
    }
    let parts = answer_parts(a);
    for c in parts.choices {
        s.push_str(&format!("ANSWER_CHOICE: {}\n", escape(c)));
    }
    for t in parts.text {
        s.push_str(&format!("ANSWER_TEXT: {}\n", escape(t)));
    }
    s
}

/// The collaboration tokens of one item (empty for a plain core item).
fn extra_text(item: &Item, viewer: Viewer) -> String {
    let mut s = String::new();
    let mut line = |token: &str, v: &str| s.push_str(&format!("{token}: {}\n", escape(v)));
    if let Some(v) = item.msg.get(names::SUBJECT) {
        line("SUBJECT", v);
    }
    if let Some(v) = item.msg.in_reply_to() {
        line("IN_REPLY_TO", v);
    }
    if let Some(v) = item.msg.thread() {
        line("THREAD", v);
    }
    if viewer.mentioned(item) {
        line("MENTIONED", "yes");
    }
    if viewer.cc(item) {
        line("CC", "yes");
    }
    if let Some(c) = clarify(item) {
        line("QUESTION", c.question);
        s.push_str("OPTIONS:\n");
        for (i, o) in c.options.iter().enumerate() {
            s.push_str(&format!("{}. {}\n", i + 1, escape(o)));
        }
        s.push_str(&format!(
            "ALLOW_MULTIPLE: {}\nALLOW_CUSTOM: {}\n",
            yes_no(c.allow_multiple),
            yes_no(c.allow_custom)
        ));
    }
    if item.msg.type_name() == Some(types::ANSWER.name) {
        if let Some(v) = item.msg.get(names::CHOICES) {
            s.push_str(&format!("CHOICES: {}\n", escape(v)));
        }
    }
    if item.msg.type_name() == Some(types::CLOSE.name) {
        if let Some(v) = item.msg.get(names::REASON) {
            s.push_str(&format!("REASON: {}\n", escape(v)));
        }
    }
    for a in item.msg.get_all(names::ARTIFACT) {
        s.push_str(&format!("ARTIFACT: {}\n", escape(a)));
    }
    if let Some(f) = viewer.forum.and_then(|f| f.of(item)) {
        s.push_str(&forum_text(f));
    }
    s
}

/// `LATEST_DIGEST:`, the `CONTEXT:` block and the `CONTRIBUTIONS:` block.
fn forum_text(f: &ItemForum) -> String {
    let mut s = String::new();
    if let Some(p) = &f.latest_digest {
        s.push_str(&format!(
            "LATEST_DIGEST: {}\n",
            escape(&p.display().to_string())
        ));
    }
    if let Some(turns) = &f.context {
        s.push_str("CONTEXT:\n");
        for t in turns {
            let text = t.text.as_deref().unwrap_or("(skipped)");
            s.push_str(&format!("- {}: {}\n", escape(&t.speaker), escape(text)));
        }
    }
    if let Some(list) = &f.contributions {
        s.push_str("CONTRIBUTIONS:\n");
        for (i, c) in list.iter().enumerate() {
            s.push_str(&format!("{}. {}\n", i + 1, one_line(&c.line)));
        }
    }
    s
}

/// A line that is escaped already (a transcript line): printed as it is,
/// unless it still holds a control character.
fn one_line(l: &str) -> String {
    if l.chars().any(crate::text::is_control) {
        escape(l)
    } else {
        l.to_string()
    }
}

/// The `RESUME_CONTEXT:` block (one transcript line each), then the latest
/// digest of the current session.
pub fn resume_text(r: &Resume) -> String {
    let mut s = String::from("RESUME_CONTEXT:\n");
    for l in &r.lines {
        s.push_str(&one_line(l));
        s.push('\n');
    }
    if let Some(p) = &r.latest_digest {
        s.push_str(&format!(
            "LATEST_DIGEST: {}\n",
            escape(&p.display().to_string())
        ));
    }
    s
}

pub fn resume_json(r: &Resume) -> Value {
    json!({"lines": r.lines, "latest_digest": r.latest_digest})
}

/// The task printout (docs/protocol.md §7.3), with the collaboration tokens
/// and any `ANSWER:` blocks before `PAYLOAD:`. The body is printed verbatim
/// (the one parser already refused control characters in it) but for bidi
/// controls and line separators, escaped so the payload reads as what it is.
pub fn task_text(item: &Item, viewer: Viewer, answers: &[Item]) -> String {
    let mut s = format!(
        "TASK: {}\nFROM: {}\nTYPE: {}\nPRIORITY: {}\n",
        item.path.display(),
        escape(item.msg.sender().unwrap_or("unknown")),
        escape(item.msg.type_name().unwrap_or("unknown")),
        item.priority()
    );
    if let Some(t) = item.msg.get(names::TASK) {
        s.push_str(&format!("TASK_NAME: {}\n", escape(t)));
    }
    if let Some((kind, this)) = this_card(item, viewer) {
        s.push_str(&format!("CARD_TYPE: {}\n", escape(kind)));
        if let Some(t) = this {
            s.push_str(&format!("THIS_CARD: {t}\n"));
        }
    }
    s.push_str(&extra_text(item, viewer));
    for a in answers {
        s.push_str(&answer_text(a));
    }
    s.push_str("PAYLOAD:\n");
    s.push_str(&crate::text::escape_bidi(&payload(item, viewer)));
    s
}

/// `REACTION: <reaction> from <role> on <id>`, one line per reaction taken
/// with this ready step, printed before its output (a task's payload runs
/// to the end).
pub fn reactions_text(reactions: &[Item]) -> String {
    reactions
        .iter()
        .map(|r| {
            format!(
                "REACTION: {} from {} on {}\n",
                escape(r.msg.get(names::REACTION).unwrap_or("unknown")),
                escape(r.msg.sender().unwrap_or("unknown")),
                escape(r.msg.in_reply_to().unwrap_or("unknown"))
            )
        })
        .collect()
}

/// The reactions as JSON: `[{"reaction", "from", "in_reply_to", "id", "path"}]`.
pub fn reactions_json(reactions: &[Item]) -> Value {
    reactions
        .iter()
        .map(|r| {
            json!({
                "reaction": r.msg.get(names::REACTION),
                "from": r.msg.sender().unwrap_or("unknown"),
                "in_reply_to": r.msg.in_reply_to(),
                "id": r.msg.id(),
                "path": r.path,
            })
        })
        .collect()
}

pub fn ready_text(r: &Ready, viewer: Viewer) -> String {
    match r {
        Ready::NoTask => "NO_TASK\n".to_string(),
        Ready::MailWaiting => "MAIL_WAITING\n".to_string(),
        Ready::Task { item, answers, .. } => task_text(item, viewer, answers),
        Ready::Batch {
            dir,
            priority,
            items,
            answers,
            ..
        } => {
            let mut s = format!(
                "BATCH: {}\nCOUNT: {}\nPRIORITY: {priority}\n",
                dir.display(),
                items.len()
            );
            for a in answers {
                s.push_str(&answer_text(a));
            }
            for (i, item) in items.iter().enumerate() {
                s.push_str(&format!("\nBATCH_ITEM: {}\n", i + 1));
                s.push_str(&task_text(item, viewer, &[]));
            }
            s
        }
    }
}

pub fn done_text(d: &Done, viewer: Viewer) -> String {
    let mut s = String::new();
    for p in &d.completed {
        s.push_str(&format!("COMPLETED: {}\n", p.display()));
    }
    if let Some(b) = &d.completed_batch {
        s.push_str(&format!("COMPLETED_BATCH: {}\n", b.display()));
    }
    if let Some(r) = &d.failed {
        s.push_str(&format!("FAILED: {}\n", escape(r)));
    }
    s.push_str(&reactions_text(&d.reactions));
    if let Ok(next) = &d.next {
        s.push_str(&ready_text(next, viewer));
    }
    s
}

fn answer_json(a: &Item) -> Value {
    let parts = answer_parts(a);
    let numbers = a
        .msg
        .get(names::CHOICES)
        .and_then(fields::parse_choices)
        .unwrap_or_default();
    let choices: Vec<Value> = parts
        .choices
        .iter()
        .zip(numbers)
        .map(|(text, n)| {
            let option = text
                .strip_prefix(&format!("{n}. "))
                .unwrap_or(text)
                .to_string();
            json!({"number": n, "option": option})
        })
        .collect();
    let text: String = parts.text.iter().map(|l| format!("{l}\n")).collect();
    json!({
        "path": a.path,
        "id": a.msg.id(),
        "from": a.msg.sender().unwrap_or("unknown"),
        "in_reply_to": a.msg.in_reply_to(),
        "choices": choices,
        "text": text,
    })
}

/// A card's item: its type and, unless it is a merge-only copy or the
/// terminal result, where the reader sends it next (upstream's `THIS_CARD:
/// next <role>` or `THIS_CARD: last; terminal to: <roles>`).
fn this_card<'v>(item: &'v Item, viewer: Viewer) -> Option<(&'v str, Option<String>)> {
    let routes = viewer.cards?;
    let kind = item.msg.get(crate::board::CARD_TYPE)?;
    let route = routes.route(kind)?;
    // A merge-only copy, or the terminal result: merged, not handed on.
    if item.msg.get(crate::board::NON_FORWARDING) == Some("true")
        || item.msg.get(crate::board::DELIVERY_KIND) == Some(crate::board::TERMINAL)
    {
        return Some((kind, None));
    }
    let me = viewer.role.or(item.msg.recipient())?;
    let at = route.iter().position(|r| r == me)?;
    let this = match route.get(at + 1) {
        Some(next) => format!("next {next}"),
        None => format!("last; terminal to: {}", routes.terminal_set(me).join(",")),
    };
    Some((kind, Some(this)))
}

pub fn item_json(item: &Item, viewer: Viewer) -> Value {
    let mut headers = Map::new();
    for (n, v) in &item.msg.headers {
        match headers.get_mut(n) {
            Some(Value::Array(a)) => a.push(Value::from(v.as_str())),
            Some(prev) => {
                let p = prev.take();
                *prev = Value::Array(vec![p, Value::from(v.as_str())]);
            }
            None => {
                headers.insert(n.clone(), Value::from(v.as_str()));
            }
        }
    }
    let mut v = json!({
        "path": item.path,
        "id": item.msg.id(),
        "from": item.msg.sender().unwrap_or("unknown"),
        "type": item.msg.type_name().unwrap_or("unknown"),
        "priority": item.priority(),
        // `task` and `body` as in every other command; the older
        // `task_name` and `payload` stay for scripts that use them.
        "task": item.msg.get(names::TASK),
        "task_name": item.msg.get(names::TASK),
        "body": payload(item, viewer),
        "payload": payload(item, viewer),
        "headers": headers,
        "subject": item.msg.get(names::SUBJECT),
        "in_reply_to": item.msg.in_reply_to(),
        "thread": item.msg.thread(),
        "mentioned": viewer.mentioned(item),
        "cc": viewer.cc(item),
        "artifacts": item.msg.get_all(names::ARTIFACT).collect::<Vec<_>>(),
    });
    if let Some((kind, this)) = this_card(item, viewer) {
        v["card_type"] = json!(kind);
        v["this_card"] = json!(this);
    }
    let f = viewer.forum.and_then(|f| f.of(item));
    v["latest_digest"] = json!(f.and_then(|f| f.latest_digest.as_ref()));
    v["context"] = json!(f.and_then(|f| f.context.as_ref()));
    v["contributions"] = json!(f.and_then(|f| f.contributions.as_ref()));
    if let Some(c) = clarify(item) {
        v["clarify"] = json!({
            "question": c.question,
            "options": c.options,
            "allow_multiple": c.allow_multiple,
            "allow_custom": c.allow_custom,
        });
    }
    v
}

pub fn ready_json(r: &Ready, viewer: Viewer) -> Value {
    match r {
        Ready::NoTask => json!({"status": "no_task"}),
        Ready::MailWaiting => json!({"status": "mail_waiting"}),
        Ready::Task {
            item,
            resumed,
            answers,
        } => {
            let mut v = item_json(item, viewer);
            v["status"] = json!("task");
            v["resumed"] = json!(resumed);
            v["answers"] = answers.iter().map(answer_json).collect();
            v
        }
        Ready::Batch {
            dir,
            priority,
            items,
            resumed,
            answers,
        } => json!({
            "status": "batch",
            "resumed": resumed,
            "path": dir,
            "count": items.len(),
            "priority": priority,
            "items": items.iter().map(|i| item_json(i, viewer)).collect::<Vec<_>>(),
            "answers": answers.iter().map(answer_json).collect::<Vec<_>>(),
        }),
    }
}

pub fn done_json(d: &Done, viewer: Viewer) -> Value {
    let mut v = json!({
        "status": "completed",
        "completed": d.completed,
        "completed_batch": d.completed_batch,
        "next": match &d.next {
            Ok(next) => ready_json(next, viewer),
            Err(e) => e.to_json(),
        },
    });
    // Only with --failed, so a plain completion prints exactly as before.
    if let Some(r) = &d.failed {
        v["failed"] = json!(r);
    }
    if !d.reactions.is_empty() {
        v["reactions"] = reactions_json(&d.reactions);
    }
    v
}
