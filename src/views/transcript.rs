//! The forum transcript: every message once, in the order it was said, as one
//! line each (BettaFish's forum-log shape), as JSON lines, or as Markdown.
//!
//! One line per message: `[HH:MM:SS] [FROM -> TO] <type> <summary>`, times in
//! UTC from `created_at`, a `--- YYYY-MM-DD ---` line whenever the day changes.
//! `forum.log` (written by the daemon) uses the same line with the full date in
//! the brackets, `[YYYY-MM-DD HH:MM:SS] ...`, because it has no date lines.
//! Control characters and backslashes are escaped, so one message is one line.

pub mod follow;

use std::collections::HashMap;

use chrono::NaiveDate;
use serde_json::{json, Map, Value};

use crate::protocol::clock::{self, Instant};
use crate::protocol::header::{self, Message};
use crate::protocol::line::{full_time, speech, summary, when};
use crate::protocol::roles::Roles;
use crate::protocol::trail::{self, Original, Place};

/// One message as a dated line without the newline: its forum.log line,
/// plus ` [failed: <reason>]` for a failed one.
pub fn dated_line(o: &Original) -> String {
    let mut s = format!("[{}] {}", full_time(o.when()), speech(&o.msg));
    s.push_str(&state_suffix(o));
    s
}

/// The last `n` transcript lines (dated) of the messages `role` sent or was
/// sent (every message when `role` is None), oldest first.
pub fn recent_lines(
    project: &crate::protocol::layout::Project,
    role: Option<&str>,
    n: usize,
) -> crate::error::Result<Vec<String>> {
    let t = trail::Trail::load(project, &trail::Scope::originals())?;
    let filter = Filter {
        role: role.map(str::to_string),
        ..Filter::default()
    };
    let shown: Vec<&Original> = messages(&t.originals)
        .into_iter()
        .filter(|o| filter.matches(&o.msg, &t.roles))
        .collect();
    let skip = shown.len().saturating_sub(n);
    Ok(shown[skip..].iter().map(|o| dated_line(o)).collect())
}

/// Output format of `swarm transcript`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Jsonl,
    Md,
}

/// Which messages to show.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Sent or received by this role (`to: all` counts for everyone else).
    pub role: Option<String>,
    pub kind: Option<String>,
    pub task: Option<String>,
    /// Inclusive.
    pub since: Option<Instant>,
    /// Exclusive.
    pub until: Option<Instant>,
    /// Only this conversation: the message with this id (the thread's root)
    /// and every message whose `thread` header names it.
    pub thread: Option<String>,
    /// Only messages stamped with this forum session.
    pub session: Option<String>,
}

impl Filter {
    pub fn matches(&self, msg: &Message, roles: &Roles) -> bool {
        if let Some(k) = &self.kind {
            if msg.get("type") != Some(k.as_str()) {
                return false;
            }
        }
        if let Some(t) = &self.task {
            if msg.get("task") != Some(t.as_str()) {
                return false;
            }
        }
        if let Some(sess) = &self.session {
            if msg.get("session") != Some(sess.as_str()) {
                return false;
            }
        }
        if let Some(root) = &self.thread {
            if msg.get("id") != Some(root.as_str()) && msg.get("thread") != Some(root.as_str()) {
                return false;
            }
        }
        if let Some(r) = &self.role {
            let from = msg.get("from").unwrap_or("");
            let to = msg.get("to").unwrap_or("");
            if from != r && !roles.recipients(to, from).contains(r) {
                return false;
            }
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(t) = when(msg) else {
                return false;
            };
            if self.since.is_some_and(|s| t < s) || self.until.is_some_and(|u| t >= u) {
                return false;
            }
        }
        true
    }
}

/// Parses `--since`/`--until`: RFC 3339, or an age such as `90s`, `2h`, `1d`
/// meaning that long before `now`.
pub fn parse_time(spec: &str, now: Instant) -> Result<Instant, String> {
    if let Some(t) = clock::parse(spec) {
        return Ok(t);
    }
    match crate::protocol::duration::parse(spec) {
        Ok(d) => chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_sub_signed(d))
            .ok_or_else(|| format!("time '{}' is out of range", crate::text::escape(spec))),
        Err(_) => Err(format!(
            "invalid time '{}': expected RFC 3339 (2026-06-15T14:05:31Z) or an age (90s, 2h, 1d)",
            crate::text::escape(spec)
        )),
    }
}

/// Every message once: originals de-duplicated by id (a copy in `sent/` wins
/// over `failed/`, which wins over `outbox/`), sorted by time then id.
pub fn messages(originals: &[Original]) -> Vec<&Original> {
    let rank = |p: Place| match p {
        Place::Sent => 0,
        Place::Failed => 1,
        _ => 2,
    };
    let mut best: HashMap<&str, &Original> = HashMap::new();
    let mut out: Vec<&Original> = Vec::new();
    for o in originals {
        let id = o.id();
        if id.is_empty() {
            out.push(o);
            continue;
        }
        match best.get(id) {
            Some(b) if (rank(b.place), &b.path) <= (rank(o.place), &o.path) => {}
            _ => {
                best.insert(id, o);
            }
        }
    }
    out.extend(best.into_values());
    sort(&mut out);
    out
}

/// Time, then id, then path (a total order, so output is reproducible).
pub fn sort(v: &mut [&Original]) {
    v.sort_by_cached_key(|o| (o.when(), o.id().to_string(), o.path.clone()));
}

/// The root of the conversation `id` belongs to: its `thread` header, or
/// itself (a message that starts a thread has none).
pub fn thread_root<'a>(originals: &[&'a Original], id: &'a str) -> &'a str {
    originals
        .iter()
        .find(|o| o.id() == id)
        .and_then(|o| o.msg.get("thread"))
        .unwrap_or(id)
}

/// One conversation as a tree: each message after its parent (`in_reply_to`)
/// and that parent's earlier replies, siblings by time; a reply whose parent
/// is not in the thread hangs under the root. Returns (message, depth).
pub fn thread_order<'a>(members: &[&'a Original], root: &str) -> Vec<(&'a Original, usize)> {
    let ids: HashMap<&str, usize> = members
        .iter()
        .enumerate()
        .map(|(i, o)| (o.id(), i))
        .collect();
    let has_root = ids.contains_key(root);
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); members.len()];
    let mut tops: Vec<usize> = Vec::new();
    for (i, o) in members.iter().enumerate() {
        let parent = o
            .msg
            .get("in_reply_to")
            .and_then(|p| ids.get(p).copied())
            .filter(|&p| p != i);
        match parent {
            Some(p) => children[p].push(i),
            None if o.id() != root && has_root => children[ids[root]].push(i),
            None => tops.push(i),
        }
    }
    // `members` is sorted by time, so every list already is.
    let mut out = Vec::with_capacity(members.len());
    let mut done = vec![false; members.len()];
    let mut stack: Vec<(usize, usize)> = tops.iter().rev().map(|&i| (i, 0)).collect();
    loop {
        while let Some((i, depth)) = stack.pop() {
            if done[i] {
                continue;
            }
            done[i] = true;
            out.push((members[i], depth));
            for &c in children[i].iter().rev() {
                stack.push((c, depth + 1));
            }
        }
        // A reply cycle (only planted files can make one) has no top: start
        // it at its oldest message.
        match done.iter().position(|d| !d) {
            Some(i) => stack.push((i, 0)),
            None => break,
        }
    }
    out
}

/// Renders messages in one format, remembering the day for date lines.
pub struct Printer<'a> {
    pub format: Format,
    pub roles: &'a Roles,
    day: Option<Option<NaiveDate>>,
    /// With `--thread`: each printed message's depth, so a reply is indented
    /// one step (two spaces) under its parent, also when it arrives later.
    depths: Option<(String, HashMap<String, usize>)>,
}

impl<'a> Printer<'a> {
    pub fn new(format: Format, roles: &'a Roles) -> Printer<'a> {
        Printer {
            format,
            roles,
            day: None,
            depths: None,
        }
    }

    /// Prints the conversation rooted at `root` as a tree.
    pub fn threaded(mut self, root: &str) -> Printer<'a> {
        self.depths = Some((root.to_string(), HashMap::new()));
        self
    }

    /// Records a message's depth (the initial tree gives it; a message that
    /// arrives later is one deeper than its parent, or under the root).
    pub fn set_depth(&mut self, id: &str, depth: usize) {
        if let Some((_, d)) = &mut self.depths {
            d.insert(id.to_string(), depth);
        }
    }

    fn depth(&mut self, o: &Original) -> usize {
        let Some((root, d)) = &mut self.depths else {
            return 0;
        };
        if let Some(&n) = d.get(o.id()) {
            return n;
        }
        let n = match o.msg.get("in_reply_to").and_then(|p| d.get(p)) {
            Some(&p) => p + 1,
            None if o.id() == root.as_str() => 0,
            None => 1,
        };
        d.insert(o.id().to_string(), n);
        n
    }

    /// Text printed once before the first message (the Markdown title).
    pub fn preamble(&self, root: &std::path::Path) -> String {
        match self.format {
            Format::Md => format!(
                "# Transcript: {}\n",
                crate::text::escape(&root.display().to_string())
            ),
            _ => String::new(),
        }
    }

    pub fn entry(&mut self, o: &Original) -> String {
        let depth = self.depth(o);
        match self.format {
            Format::Text => self.text(o, depth),
            Format::Jsonl => {
                let mut v = jsonl(o, self.roles);
                v["schema_version"] = json!(crate::error::JSON_SCHEMA_VERSION);
                if self.depths.is_some() {
                    v["depth"] = json!(depth);
                }
                let mut s = v.to_string();
                s.push('\n');
                s
            }
            Format::Md => md(o),
        }
    }

    fn text(&mut self, o: &Original, depth: usize) -> String {
        let t = o.when();
        let mut s = String::new();
        let day = t.map(|t| t.date_naive());
        if self.day != Some(day) {
            match day {
                Some(d) => s.push_str(&format!("--- {} ---\n", d.format("%Y-%m-%d"))),
                None => s.push_str("--- date unknown ---\n"),
            }
            self.day = Some(day);
        }
        let hms = match t {
            Some(t) => t.format("%H:%M:%S").to_string(),
            None => "??:??:??".to_string(),
        };
        s.push_str(&"  ".repeat(depth));
        s.push_str(&format!("[{hms}] {}", speech(&o.msg)));
        s.push_str(&state_suffix(o));
        s.push('\n');
        s
    }
}

/// Which end of a session a marker frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    Start,
    End,
}

/// `=== session S started <time> by <who>: <title> ===`, `=== session S
/// closed <time>: <reason> ===` or `=== session S open ===`, in the format
/// asked for (jsonl: one object with `marker`; md: a bold line).
pub fn session_marker(format: Format, s: &crate::forum::session::Session, edge: Edge) -> String {
    let time = |iso: &str| full_time(clock::parse(iso));
    let text = match edge {
        Edge::Start => {
            let mut t = format!(
                "session {} started {} by {}",
                crate::text::escape(&s.id),
                time(&s.started_at),
                crate::text::escape(&s.started_by)
            );
            if let Some(title) = &s.title {
                t.push_str(": ");
                t.push_str(&crate::text::escape(title));
            }
            t
        }
        Edge::End => match &s.closed_at {
            Some(at) => format!(
                "session {} closed {}: {}",
                crate::text::escape(&s.id),
                time(at),
                crate::text::escape(s.close_reason.as_deref().unwrap_or("no reason"))
            ),
            None => format!("session {} open", crate::text::escape(&s.id)),
        },
    };
    match format {
        Format::Text => format!("=== {text} ===\n"),
        Format::Md => format!("\n**=== {text} ===**\n"),
        Format::Jsonl => {
            let v = match edge {
                Edge::Start => json!({
                    "schema_version": crate::error::JSON_SCHEMA_VERSION,
                    "marker": "session_started",
                    "session": s.id,
                    "time": s.started_at,
                    "by": s.started_by,
                    "title": s.title,
                }),
                Edge::End => json!({
                    "schema_version": crate::error::JSON_SCHEMA_VERSION,
                    "marker": if s.is_open() { "session_open" } else { "session_closed" },
                    "session": s.id,
                    "time": s.closed_at,
                    "reason": s.close_reason,
                }),
            };
            format!("{v}\n")
        }
    }
}

/// ` [failed: <reason>]` for failed messages; nothing otherwise.
fn state_suffix(o: &Original) -> String {
    match o.place {
        Place::Failed => format!(
            " [failed: {}]",
            crate::text::escape(o.reason.as_deref().unwrap_or("reason unknown"))
        ),
        _ => String::new(),
    }
}

/// Headers as a JSON object; a repeatable header is always an array.
fn headers_json(msg: &Message) -> Value {
    let mut m = Map::new();
    for (n, v) in &msg.headers {
        if header::REPEATABLE.contains(&n.as_str()) {
            let slot = m
                .entry(n.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Some(a) = slot.as_array_mut() {
                a.push(Value::String(v.clone()));
            }
        } else {
            m.insert(n.clone(), Value::String(v.clone()));
        }
    }
    Value::Object(m)
}

/// One message as a JSON object (`--format jsonl`).
pub fn jsonl(o: &Original, roles: &Roles) -> Value {
    let m = &o.msg;
    let from = m.get("from").unwrap_or("");
    json!({
        "id": m.get("id"),
        "time": o.when().map(clock::iso),
        "from": m.get("from"),
        "to": m.get("to"),
        "recipients": roles.recipients(m.get("to").unwrap_or(""), from),
        "type": m.get("type"),
        "created_at": m.get("created_at"),
        "task": m.get("task"),
        "summary": summary(m),
        "state": o.place.as_str(),
        "reason": o.reason,
        "path": o.path.display().to_string(),
        "headers": headers_json(m),
        "body": m.body,
    })
}

/// Escapes control characters other than newline and tab (the body keeps its
/// lines in Markdown; the parser already refused the rest).
fn keep_lines(s: &str) -> String {
    s.split('\n')
        .map(|l| {
            l.split('\t')
                .map(|p| {
                    if p.chars().any(crate::text::is_control) {
                        crate::text::escape(p)
                    } else {
                        p.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A code fence longer than any backtick run in `text`.
fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// One Markdown section: the line as the heading, the state, then the whole
/// file (headers and body) in a code block.
pub fn md(o: &Original) -> String {
    let mut s = format!(
        "\n## [{}] {}\n\n- state: {}\n",
        full_time(o.when()),
        speech(&o.msg),
        o.place.as_str()
    );
    if o.place == Place::Failed {
        s.push_str(&format!(
            "- reason: {}\n",
            crate::text::escape(o.reason.as_deref().unwrap_or("reason unknown"))
        ));
    }
    let mut file = String::new();
    for (n, v) in &o.msg.headers {
        file.push_str(&format!("{n}: {v}\n"));
    }
    file.push('\n');
    file.push_str(&o.msg.body);
    let file = keep_lines(&file);
    let f = fence(&file);
    s.push_str(&format!("\n{f}text\n{file}"));
    if !file.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(&f);
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::line::{forum_line, MAX_SUMMARY};

    fn msg(text: &str) -> Message {
        Message::parse(text).unwrap()
    }

    #[test]
    fn forum_line_has_the_full_date() {
        let m = msg("id: 20260615T140531Z_000001_from_coder\nfrom: coder\nto: cleaner\n\
                     type: git_handoff\ntask: fix-login\ncreated_at: 2026-06-15T14:05:31.123456Z\n\nx\n");
        assert_eq!(
            forum_line(&m),
            "[2026-06-15 14:05:31] [coder -> cleaner] git_handoff fix-login\n"
        );
    }

    #[test]
    fn summary_falls_back_to_the_body_and_escapes() {
        let m = msg("from: a\nto: all\ntype: post\n\nRe-read your role and constitution.\n\n\tfirst\\line\tend\nsecond\n");
        assert_eq!(summary(&m), "first\\\\line\\tend");
        let long = format!("type: note\nmessage: {}\n\n", "é".repeat(250));
        let s = summary(&msg(&long));
        assert_eq!(s.chars().count(), MAX_SUMMARY + 1);
        assert!(s.ends_with('…'));
        let m = msg("id: 20260615T140531Z_000001_from_a\n\n");
        assert_eq!(forum_line(&m), "[2026-06-15 14:05:31] [? -> ?] ?\n");
    }

    #[test]
    fn fence_outgrows_backticks() {
        assert_eq!(fence("a ``` b"), "````");
        assert_eq!(fence("plain"), "```");
    }

    #[test]
    fn relative_times() {
        let now = clock::parse("2026-06-15T14:00:00Z").unwrap();
        assert_eq!(
            clock::iso(parse_time("2h", now).unwrap()),
            "2026-06-15T12:00:00.000000Z"
        );
        assert!(parse_time("yesterday", now).is_err());
    }
}
