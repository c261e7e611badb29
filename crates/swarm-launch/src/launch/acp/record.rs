//! What an ACP agent does, recorded from the protocol (docs/agents.md,
//! "The ACP runtime"): each prompt turn's `session/update` notifications
//! become the role's activity records (telemetry/activity.rs) as a
//! headless turn's stream does (launch/turn.rs), and the usage its
//! `session/prompt` answer reports becomes one usage record for the turn
//! (telemetry/usage.rs), so `swarm activity`, `swarm cost`, budgets and
//! traces read an ACP role like any other.
//!
//! The invariants: what the agent sends is untrusted, so every text is
//! bounded and escaped by the activity record itself, a field of the wrong
//! type counts as absent, and an update of a kind we do not know is
//! counted, never fatal; text chunks are joined into one record per run of
//! text, held to [`MAX_HELD`] bytes; each record names the handoff in
//! process (or the last one moved into process during the turn).

use serde_json::Value;

use crate::launch::agents::stream::{self, Figures};
use crate::launch::agents::Cli;
use crate::launch::turn_item::{current_item, ItemWatch};
use crate::protocol::layout::{Project, Worktree};
use crate::telemetry::activity::{self, Activity, Kind};
use crate::telemetry::usage;

/// The most text of one run of chunks held before it is written.
const MAX_HELD: usize = 8 * 1024;
/// The most tool calls held for their input at once (see [`Recorder::pending`]).
const MAX_PENDING: usize = 16;

/// One role's recorder, for the life of its session.
pub struct Recorder {
    pub project: Project,
    pub role: String,
    pub cli: Cli,
    wt: Worktree,
    max_bytes: u64,
    item: Option<(String, String)>,
    items: Option<ItemWatch>,
    /// The run of chunks not yet written, and its kind (text or thinking).
    held: Option<(Kind, String)>,
    /// The time of this turn's `turn_start` (the usage record's `started`).
    started: Option<String>,
    /// Updates of a kind we do not know, this turn.
    pub unknown: usize,
    /// Tool calls announced before their input (Claude Code's adapter
    /// sends `tool_call` with `rawInput: {}` while the model still streams
    /// it, then a `tool_call_update` with the input): held, by id, until
    /// the input or the call's end comes, at most [`MAX_PENDING`].
    pending: Vec<(String, Value)>,
    /// The agent's turns report no token usage, said once a session
    /// (Codex's adapter 0.16 sends only the context's fill, `usage_update`).
    said_no_usage: bool,
    /// The session's last tool calls that failed, in a row (a completed
    /// one resets it): past [`super::predecided::MAX_FAILED`] an allow
    /// asks a person.
    pub failed_in_a_row: u32,
}

impl Recorder {
    pub fn new(project: &Project, role: &str, cli: Cli, wt: Worktree, max_bytes: u64) -> Recorder {
        Recorder {
            project: project.clone(),
            role: role.to_string(),
            cli,
            wt,
            max_bytes,
            item: None,
            items: None,
            held: None,
            started: None,
            unknown: 0,
            pending: Vec::new(),
            said_no_usage: false,
            failed_in_a_row: 0,
        }
    }

    fn look_at_item(&mut self) {
        if let Some(it) = current_item(&self.wt, self.max_bytes)
            .or_else(|| self.items.as_ref().and_then(ItemWatch::last))
        {
            self.item = Some(it);
        }
    }

    /// The handoff the turn works on (id, thread), if any.
    pub fn item(&self) -> Option<&(String, String)> {
        self.item.as_ref()
    }

    pub fn write(&self, mut a: Activity) {
        a.id = self.item.as_ref().map(|(id, _)| id.clone());
        if let Err(e) = activity::append(&self.project, &a) {
            eprintln!("warning: {e}");
        }
    }

    /// A note of the client's own (a permission asked, a file refused).
    pub fn note(&self, text: &str) {
        self.write(Activity::now(&self.role, Kind::Note).text(text));
    }

    /// A prompt turn begins: `text` says what it was sent for.
    pub fn turn_start(&mut self, text: &str) {
        self.item = current_item(&self.wt, self.max_bytes);
        self.items = Some(ItemWatch::start(&self.wt, self.max_bytes));
        self.unknown = 0;
        let mut a = Activity::now(&self.role, Kind::TurnStart).text(text);
        a.name = Some(self.cli.name().to_string());
        // This client holds the session: liveness reads a turn whose
        // process is gone as dead.
        a.pid = Some(std::process::id());
        self.started = Some(a.time.clone());
        self.write(a);
    }

    /// Writes the run of chunks held, if any.
    fn flush(&mut self) {
        if let Some((kind, text)) = self.held.take() {
            if !text.trim().is_empty() {
                self.write(Activity::now(&self.role, kind).text(&text));
            }
        }
    }

    fn chunk(&mut self, kind: Kind, text: &str) {
        if self.held.as_ref().is_some_and(|(k, _)| *k != kind) {
            self.flush();
        }
        let (_, held) = self.held.get_or_insert_with(|| (kind, String::new()));
        let room = MAX_HELD.saturating_sub(held.len());
        let mut cut = text.len().min(room);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        held.push_str(&text[..cut]);
    }

    /// One `session/update` notification's `update`.
    pub fn update(&mut self, u: &Value) {
        let text = |v: &Value| v["content"]["text"].as_str().map(str::to_string);
        match u["sessionUpdate"].as_str().unwrap_or("") {
            "agent_message_chunk" => {
                if let Some(t) = text(u) {
                    self.chunk(Kind::Text, &t);
                }
            }
            "agent_thought_chunk" => {
                if let Some(t) = text(u) {
                    self.chunk(Kind::Thinking, &t);
                }
            }
            "tool_call" => {
                self.flush();
                self.look_at_item();
                let id = s(&u["toolCallId"]);
                match id {
                    Some(id) if empty_input(u) && self.pending.len() < MAX_PENDING => {
                        // Only what the record takes, cut: the agent sent it.
                        let cut = |k: &str| match u[k].as_str() {
                            Some(t) => Value::from(t.chars().take(4096).collect::<String>()),
                            None => Value::Null,
                        };
                        let held = serde_json::json!({"kind": cut("kind"), "title": cut("title"), "rawInput": {}});
                        self.pending.push((id, held));
                    }
                    _ => self.call(u),
                }
                self.tool_ended(u);
            }
            "tool_call_update" => {
                self.flush();
                self.tool_ended(u);
            }
            "plan" => {
                self.flush();
                let steps: Vec<String> = u["entries"]
                    .as_array()
                    .map(|es| {
                        es.iter()
                            .filter_map(|e| {
                                Some(format!(
                                    "[{}] {}",
                                    e["status"].as_str().unwrap_or("?"),
                                    e["content"].as_str()?
                                ))
                            })
                            .take(20)
                            .collect()
                    })
                    .unwrap_or_default();
                self.note(&format!("plan: {}", steps.join("; ")));
            }
            // Known and not the activity's: the agent's commands, modes,
            // session title, context size, the prompt echoed back.
            "available_commands_update"
            | "current_mode_update"
            | "config_option_update"
            | "session_info_update"
            | "usage_update"
            | "user_message_chunk" => {}
            _ => self.unknown += 1,
        }
    }

    /// A tool call's record: its kind (else title) and its input (else title).
    fn call(&self, u: &Value) {
        let name = s(&u["kind"]).or_else(|| s(&u["title"]));
        let said = match &u["rawInput"] {
            Value::Null => text_of(&u["title"]),
            raw => text_of(raw),
        };
        self.write(stream::record(&self.role, Kind::ToolCall, name, said, None));
    }

    /// The held call `u` names, written once `u` brings its input or ends
    /// it (the update's fields over the announcement's).
    fn complete_pending(&mut self, u: &Value) {
        let Some(i) = self
            .pending
            .iter()
            .position(|(id, _)| u["toolCallId"].as_str() == Some(id.as_str()))
        else {
            return;
        };
        let ends = matches!(u["status"].as_str(), Some("completed" | "failed"));
        if !has_input(u) && !ends {
            return;
        }
        let (_, mut call) = self.pending.remove(i);
        for k in ["kind", "title", "rawInput"] {
            if !u[k].is_null() && (k != "rawInput" || has_input(u)) {
                call[k] = u[k].clone();
            }
        }
        self.call(&call);
    }

    /// A tool call's result, when `u` says it ended.
    fn tool_ended(&mut self, u: &Value) {
        self.complete_pending(u);
        let status = match u["status"].as_str() {
            Some("completed") => "ok",
            Some("failed") => "error",
            _ => return,
        };
        self.failed_in_a_row = match status {
            "ok" => 0,
            _ => self.failed_in_a_row.saturating_add(1),
        };
        self.look_at_item();
        let output = u["content"]
            .as_array()
            .and_then(|c| {
                c.iter()
                    .find_map(|x| x["content"]["text"].as_str().map(str::to_string))
            })
            .or_else(|| text_of(&u["rawOutput"]));
        self.write(stream::record(
            &self.role,
            Kind::ToolResult,
            s(&u["toolCallId"]),
            output,
            Some(status.to_string()),
        ));
    }

    /// The turn ended: the `session/prompt` answer (its usage), or why not.
    pub fn turn_end(&mut self, answer: std::result::Result<&Value, &str>) {
        self.flush();
        for (_, call) in std::mem::take(&mut self.pending) {
            self.call(&call);
        }
        self.look_at_item();
        if self.unknown > 0 {
            self.note(&format!(
                "skipped {} session update(s) of unknown kind",
                self.unknown
            ));
        }
        let status = match answer {
            Ok(v) => {
                match figures(v) {
                    Some(f) => self.usage(f),
                    None if !self.said_no_usage => {
                        self.said_no_usage = true;
                        self.note("the agent reports no token usage for its turns: `swarm cost` and budgets have no figures for this role");
                    }
                    None => {}
                }
                match v["stopReason"].as_str() {
                    Some("end_turn") => "ok".to_string(),
                    Some(r) => activity::bound(r),
                    None => "ok".to_string(),
                }
            }
            Err(e) => {
                self.write(Activity::now(&self.role, Kind::Error).text(e));
                "error".to_string()
            }
        };
        let mut end = Activity::now(&self.role, Kind::TurnEnd);
        end.status = Some(status);
        self.write(end);
        self.items = None;
    }

    fn usage(&self, f: Figures) {
        if f.input_tokens + f.output_tokens + f.cache_read_tokens + f.cache_write_tokens == 0 {
            return;
        }
        let mut u = stream::usage_of(&self.role, self.cli, f, None, self.item.as_ref());
        u.started = self.started.clone();
        if let Err(e) = usage::record(&self.project, &u) {
            eprintln!("warning: {e}");
        }
        self.write(usage::activity(&u));
    }
}

/// A tool call announced with an empty input (`rawInput: {}`).
fn empty_input(u: &Value) -> bool {
    u["rawInput"].as_object().is_some_and(|o| o.is_empty())
}

/// An update that carries the call's input.
fn has_input(u: &Value) -> bool {
    !u["rawInput"].is_null() && !empty_input(u)
}

fn s(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

/// A value's text: a string as is, anything else as JSON.
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(t) => Some(t.clone()),
        other => Some(other.to_string()),
    }
}

/// The usage a `session/prompt` answer reports: the protocol's `usage`
/// (`inputTokens`, `outputTokens`, `cachedReadTokens`, `cachedWriteTokens`)
/// or Gemini CLI's `_meta.quota` (`token_count`, `model_usage`; 0.61 sums
/// the turn's model calls, its input including cached input, which it
/// does not report apart).
pub fn figures(answer: &Value) -> Option<Figures> {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let u = &answer["usage"];
    if u.is_object() {
        return Some(Figures {
            input_tokens: n(&u["inputTokens"]),
            output_tokens: n(&u["outputTokens"]),
            cache_read_tokens: n(&u["cachedReadTokens"]),
            cache_write_tokens: n(&u["cachedWriteTokens"]),
            ..Figures::default()
        });
    }
    let q = &answer["_meta"]["quota"];
    let t = &q["token_count"];
    t.is_object().then(|| Figures {
        model: q["model_usage"][0]["model"].as_str().map(str::to_string),
        input_tokens: n(&t["input_tokens"]),
        output_tokens: n(&t["output_tokens"]),
        ..Figures::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chunks_tools_plans_and_usage_become_records() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path());
        std::fs::create_dir_all(p.swarmforge()).unwrap();
        let mut r = Recorder::new(&p, "r", Cli::Gemini, Worktree::new(dir.path()), 1 << 20);
        r.turn_start("a prompt");
        r.update(&json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}}));
        r.update(&json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "lo"}}));
        r.update(&json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ready_for_next.sh", "kind": "execute", "status": "pending"}));
        r.update(
            &json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "NO_TASK"}}]}),
        );
        r.update(&json!({"sessionUpdate": "plan", "entries": [{"content": "do it", "status": "pending"}]}));
        r.update(&json!({"sessionUpdate": "something_new"}));
        r.update(&json!({"sessionUpdate": 7, "content": {"text": ["x"]}}));
        r.turn_end(Ok(&json!({"stopReason": "end_turn",
            "_meta": {"quota": {"token_count": {"input_tokens": 150, "output_tokens": 20}, "model_usage": [{"model": "m"}]}}})));
        let (recs, bad) = activity::read(&p, "r").unwrap();
        assert_eq!(bad, 0);
        let kinds: Vec<Kind> = recs.iter().map(|a| a.kind).collect();
        assert_eq!(
            kinds,
            [
                Kind::TurnStart,
                Kind::Text,
                Kind::ToolCall,
                Kind::ToolResult,
                Kind::Note,
                Kind::Note,
                Kind::Usage,
                Kind::TurnEnd
            ]
        );
        assert_eq!(recs[1].text.as_deref(), Some("Hello"));
        assert_eq!(recs[3].status.as_deref(), Some("ok"));
        assert!(recs[5]
            .text
            .as_deref()
            .unwrap()
            .contains("2 session update(s)"));
        let text = std::fs::read_to_string(p.swarmforge().join("telemetry/usage.jsonl")).unwrap();
        let u: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(
            (u["input_tokens"].as_u64(), u["output_tokens"].as_u64()),
            (Some(150), Some(20))
        );
        assert_eq!(u["model"], "m");
    }

    /// Claude Code's adapter announces a call with `rawInput: {}` and
    /// sends the input in an update: the record carries the input.
    #[test]
    fn a_call_announced_without_its_input_is_recorded_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path());
        std::fs::create_dir_all(p.swarmforge()).unwrap();
        let mut r = Recorder::new(&p, "r", Cli::Claude, Worktree::new(dir.path()), 1 << 20);
        r.turn_start("a prompt");
        r.update(&json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Terminal", "kind": "execute", "rawInput": {}}));
        r.update(&json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "title": "`ready_for_next.sh`", "rawInput": {"command": "ready_for_next.sh"}}));
        r.update(&json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}));
        // Never given its input: written when it ends, or with the turn.
        r.update(&json!({"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Read", "kind": "read", "rawInput": {}}));
        r.update(
            &json!({"sessionUpdate": "tool_call_update", "toolCallId": "t2", "status": "failed"}),
        );
        r.update(&json!({"sessionUpdate": "tool_call", "toolCallId": "t3", "title": "Edit", "kind": "edit", "rawInput": {}}));
        r.turn_end(Ok(&json!({"stopReason": "end_turn"})));
        let (recs, _) = activity::read(&p, "r").unwrap();
        let got: Vec<(Kind, Option<String>)> = recs
            .iter()
            .filter(|a| matches!(a.kind, Kind::ToolCall | Kind::ToolResult))
            .map(|a| (a.kind, a.text.clone()))
            .collect();
        assert_eq!(got.len(), 5, "{got:?}");
        assert_eq!(
            got[0],
            (
                Kind::ToolCall,
                Some(r#"{"command":"ready_for_next.sh"}"#.into())
            )
        );
        assert_eq!(got[1].0, Kind::ToolResult);
        assert_eq!(got[2], (Kind::ToolCall, Some("{}".into())));
        assert_eq!(got[3].0, Kind::ToolResult);
        assert_eq!(got[4], (Kind::ToolCall, Some("{}".into())));
    }

    #[test]
    fn held_text_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path());
        let mut r = Recorder::new(&p, "r", Cli::Gemini, Worktree::new(dir.path()), 1 << 20);
        for _ in 0..1000 {
            r.update(
                &json!({"sessionUpdate": "agent_message_chunk", "content": {"text": "ééééééééé"}}),
            );
        }
        assert!(r.held.as_ref().unwrap().1.len() <= MAX_HELD);
    }
}
