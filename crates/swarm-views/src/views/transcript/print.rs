//! Printing the transcript: text lines with day markers, JSON lines,
//! Markdown; threads folded, reactions beside their message, sessions framed.

use crate::protocol::header::names;
use std::collections::HashMap;

use chrono::NaiveDate;
use serde_json::{json, Map, Value};

use super::Format;
use crate::error::JSON_SCHEMA_VERSION;
use crate::forum::session::Session;
use crate::protocol::clock::{self};
use crate::protocol::header::{self, Message};
use crate::protocol::line::{full_time, speech, summary};
use crate::protocol::roles::Roles;
use crate::protocol::trail::{Original, Place};
use crate::text;

/// One message as a dated line without the newline: its forum.log line,
/// plus ` [failed: <reason>]` for a failed one.
pub fn dated_line(o: &Original) -> String {
    let mut s = format!("[{}] {}", full_time(o.when()), speech(&o.msg));
    s.push_str(&state_suffix(o));
    s
}

/// Renders messages in one format, remembering the day for date lines.
pub struct Printer<'a> {
    pub format: Format,
    pub roles: &'a Roles,
    day: Option<Option<NaiveDate>>,
    /// With `--thread`: each printed message's depth, so a reply is indented
    /// one step (two spaces) under its parent, also when it arrives later.
    depths: Option<(String, HashMap<String, usize>)>,
    /// See [`reaction_marks`].
    pub reactions: HashMap<String, Vec<(String, String)>>,
    /// Text lines name each message's id (`swarm transcript --ids`), the
    /// handle `receipts`, `--thread`, `answer` and `inbox` take.
    pub ids: bool,
    /// Messages not to be shown as said, by path, with why
    /// (views/vouched.rs): printed as an `[unverified]` line naming the
    /// file, without its sender, recipients or words.
    pub doubts: HashMap<std::path::PathBuf, String>,
}

impl<'a> Printer<'a> {
    pub fn new(format: Format, roles: &'a Roles) -> Printer<'a> {
        Printer {
            format,
            roles,
            day: None,
            depths: None,
            reactions: HashMap::new(),
            ids: false,
            doubts: HashMap::new(),
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
        let n = match o.msg.in_reply_to().and_then(|p| d.get(p)) {
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
                text::escape(&root.display().to_string())
            ),
            _ => String::new(),
        }
    }

    pub fn entry(&mut self, o: &Original) -> String {
        let depth = self.depth(o);
        if let Some(why) = self.doubts.get(&o.path).cloned() {
            return self.doubted(o, &why, depth);
        }
        match self.format {
            Format::Text => self.text(o, depth),
            Format::Jsonl => {
                let mut v = jsonl(o, self.roles);
                v["schema_version"] = json!(JSON_SCHEMA_VERSION);
                if self.depths.is_some() {
                    v["depth"] = json!(depth);
                }
                if let Some(marks) = self.reactions.get(o.id()) {
                    v["reactions"] = marks
                        .iter()
                        .map(|(r, from)| json!({"reaction": r, "from": from}))
                        .collect();
                }
                let mut s = v.to_string();
                s.push('\n');
                s
            }
            Format::Md => {
                let mut s = md(o);
                if let Some(marks) = self.reactions.get(o.id()) {
                    s.push_str(&format!("\n- reactions:{}\n", marks_text(marks)));
                }
                s
            }
        }
    }

    /// A message the journal does not vouch for: the file and why, never
    /// what it claims (a forged `from:` is not shown as said).
    fn doubted(&mut self, o: &Original, why: &str, depth: usize) -> String {
        let path = o.path.display().to_string();
        match self.format {
            Format::Jsonl => {
                let v = json!({
                    "schema_version": JSON_SCHEMA_VERSION,
                    "id": o.msg.id(),
                    "time": o.when().map(clock::iso),
                    "state": o.place.as_str(),
                    "path": path,
                    "unverified": why,
                });
                format!("{v}\n")
            }
            Format::Md => format!(
                "\n## [{}] unverified: {}\n\n- {}\n",
                full_time(o.when()),
                text::escape(&path),
                text::escape(why)
            ),
            Format::Text => {
                let mut s = self.day_line(o);
                s.push_str(&"  ".repeat(depth));
                s.push_str(&format!(
                    "[{}] [unverified] {}: {}\n",
                    hms(o),
                    text::escape(&path),
                    text::escape(why)
                ));
                s
            }
        }
    }

    /// The `--- YYYY-MM-DD ---` line when the day changes at `o`.
    fn day_line(&mut self, o: &Original) -> String {
        let mut s = String::new();
        let day = o.when().map(|t| t.date_naive());
        if self.day != Some(day) {
            match day {
                Some(d) => s.push_str(&format!("--- {} ---\n", d.format("%Y-%m-%d"))),
                None => s.push_str("--- date unknown ---\n"),
            }
            self.day = Some(day);
        }
        s
    }

    fn text(&mut self, o: &Original, depth: usize) -> String {
        let mut s = self.day_line(o);
        s.push_str(&"  ".repeat(depth));
        s.push_str(&format!("[{}] ", hms(o)));
        if self.ids {
            s.push_str(&format!("{} ", text::escape(o.id())));
        }
        s.push_str(&speech(&o.msg));
        s.push_str(&state_suffix(o));
        if let Some(marks) = self.reactions.get(o.id()) {
            s.push_str(&marks_text(marks));
        }
        s.push('\n');
        s
    }
}

/// `HH:MM:SS` of when `o` was said, or `??:??:??`.
fn hms(o: &Original) -> String {
    match o.when() {
        Some(t) => t.format("%H:%M:%S").to_string(),
        None => "??:??:??".to_string(),
    }
}

/// ` [thumbs_up qa] [check coder]`
pub(super) fn marks_text(marks: &[(String, String)]) -> String {
    marks
        .iter()
        .map(|(r, from)| format!(" [{} {}]", text::escape(r), text::escape(from)))
        .collect()
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
pub fn session_marker(format: Format, s: &Session, edge: Edge) -> String {
    let time = |iso: &str| full_time(clock::parse(iso));
    let text = match edge {
        Edge::Start => {
            let mut t = format!(
                "session {} started {} by {}",
                text::escape(&s.id),
                time(&s.started_at),
                text::escape(&s.started_by)
            );
            if let Some(title) = &s.title {
                t.push_str(": ");
                t.push_str(&text::escape(title));
            }
            t
        }
        Edge::End => match &s.closed_at {
            Some(at) => format!(
                "session {} closed {}: {}",
                text::escape(&s.id),
                time(at),
                text::escape(s.close_reason.as_deref().unwrap_or("no reason"))
            ),
            None => format!("session {} open", text::escape(&s.id)),
        },
    };
    match format {
        Format::Text => format!("=== {text} ===\n"),
        Format::Md => format!("\n**=== {text} ===**\n"),
        Format::Jsonl => {
            let v = match edge {
                Edge::Start => json!({
                    "schema_version": JSON_SCHEMA_VERSION,
                    "marker": "session_started",
                    "session": s.id,
                    "time": s.started_at,
                    "by": s.started_by,
                    "title": s.title,
                }),
                Edge::End => json!({
                    "schema_version": JSON_SCHEMA_VERSION,
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
pub(super) fn state_suffix(o: &Original) -> String {
    match o.place {
        Place::Failed => format!(
            " [failed: {}]",
            text::escape(o.reason.as_deref().unwrap_or("reason unknown"))
        ),
        Place::Held => " [held: waiting for swarm approve / swarm deny]".into(),
        _ => String::new(),
    }
}

/// Headers as a JSON object; a repeatable header is always an array.
pub(super) fn headers_json(msg: &Message) -> Value {
    let mut m = Map::new();
    for (n, v) in &msg.headers {
        if header::repeatable(n) {
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
    let from = m.sender().unwrap_or("");
    json!({
        "id": m.id(),
        "time": o.when().map(clock::iso),
        "from": m.sender(),
        "to": m.to(),
        "recipients": roles.recipients(m.to().unwrap_or(""), from),
        "type": m.type_name(),
        "created_at": m.get(names::CREATED_AT),
        "task": m.get(names::TASK),
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
pub(super) fn keep_lines(s: &str) -> String {
    s.split('\n')
        .map(|l| {
            l.split('\t')
                .map(|p| {
                    if p.chars().any(text::is_control) {
                        text::escape(p)
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
pub(super) fn fence(text: &str) -> String {
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
            text::escape(o.reason.as_deref().unwrap_or("reason unknown"))
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

    #[test]
    fn fence_outgrows_backticks() {
        assert_eq!(fence("a ``` b"), "````");
        assert_eq!(fence("plain"), "```");
    }
}
