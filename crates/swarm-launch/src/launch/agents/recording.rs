//! The lines of what Codex and Gemini CLI write while they run in a pane
//! (docs/headless.md, "In tmux mode"), turned into the events a headless
//! stream gives (agents/stream.rs): Codex's session files (rollouts,
//! `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`) and Gemini CLI's chat
//! recordings (`~/.gemini/tmp/<project>/chats/session-*.jsonl`). Their
//! formats are their own, unlike their headless streams; read from Codex
//! 0.171.0 and Gemini CLI 0.61.0 against the scripted model.
//!
//! Both are untrusted like a stream: a value of an unexpected type counts
//! as absent, a line type not known here is reported as
//! [`Event::Unknown`] (counted by the caller), and nothing panics. Gemini
//! CLI appends a message again each time it changes (its tokens, then its
//! tool calls): every event that must be taken once carries a key (the
//! message's or the call's id), which the reader remembers.

use serde_json::Value;

use super::stream::{act, n, s, text_of, Event, Figures};
use super::Cli;
use crate::telemetry::activity::Kind;

/// One event of a line, with the key it is taken once by (None: every
/// time the line is read, which is once: lines are read from an offset).
pub type Keyed = (Option<String>, Event);

fn once(key: String, ev: Event) -> Keyed {
    (Some(key), ev)
}

/// The events of one parsed line of `cli`'s recording (Codex, Gemini).
pub fn parse(cli: Cli, v: &Value) -> Vec<Keyed> {
    match cli {
        Cli::Codex => codex(v),
        Cli::Gemini => gemini(v),
        Cli::Claude => Vec::new(),
    }
}

/// A Codex rollout line: `{timestamp, type, payload}`.
fn codex(v: &Value) -> Vec<Keyed> {
    let p = &v["payload"];
    let plain = |e: Event| vec![(None, e)];
    match v["type"].as_str().unwrap_or("") {
        "session_meta" => s(&p["id"]).map(Event::Session).map_or(Vec::new(), plain),
        "turn_context" => s(&p["model"]).map(Event::Model).map_or(Vec::new(), plain),
        "response_item" => codex_item(p).into_iter().map(|e| (None, e)).collect(),
        // One record per model response, keyed by the response.
        "token_usage_record" => {
            let u = &p["usage"];
            if !u.is_object() {
                return Vec::new();
            }
            let cached = n(&u["cached_input_tokens"]);
            let f = Figures {
                model: None,
                input_tokens: n(&u["input_tokens"]).saturating_sub(cached),
                output_tokens: n(&u["output_tokens"]),
                cache_read_tokens: cached,
                cache_write_tokens: n(&u["cache_write_input_tokens"]),
                cost_usd: None,
            };
            match s(&p["response_id"]) {
                Some(id) => vec![once(format!("u:{id}"), Event::Usage(f))],
                None => plain(Event::Usage(f)),
            }
        }
        "event_msg" if p["type"] == "error" => plain(act(
            Kind::Error,
            None,
            text_of(&p["message"]),
            Some("error"),
        )),
        // Its own events (token counts, task start and end, items as the
        // app sees them), its world state and compactions: not activity.
        "event_msg" | "world_state" | "compacted" => Vec::new(),
        other => plain(Event::Unknown(format!("rollout {other}"))),
    }
}

/// A rollout's `response_item`: what the model said and did.
fn codex_item(p: &Value) -> Vec<Event> {
    let texts = |parts: &Value, kind: &str| -> Option<String> {
        let t: Vec<&str> = parts
            .as_array()?
            .iter()
            .filter(|c| c["type"] == kind)
            .filter_map(|c| c["text"].as_str())
            .collect();
        (!t.is_empty()).then(|| t.join("\n"))
    };
    match p["type"].as_str().unwrap_or("") {
        "message" if p["role"] == "assistant" => texts(&p["content"], "output_text")
            .map(|t| act(Kind::Text, None, Some(t), None))
            .into_iter()
            .collect(),
        // The instructions and the prompts: not the agent's doing.
        "message" => Vec::new(),
        "reasoning" => texts(&p["summary"], "summary_text")
            .map(|t| act(Kind::Thinking, None, Some(t), None))
            .into_iter()
            .collect(),
        "function_call" => {
            // `{"cmd": …}` for its shell; other tools' arguments as they are.
            let args = p["arguments"].as_str().unwrap_or("");
            let parsed: Value = serde_json::from_str(args).unwrap_or(Value::Null);
            let text = text_of(&parsed["cmd"])
                .or_else(|| text_of(&parsed["command"]))
                .or_else(|| (!args.is_empty()).then(|| args.to_string()));
            vec![act(Kind::ToolCall, s(&p["name"]), text, None)]
        }
        "custom_tool_call" => vec![act(
            Kind::ToolCall,
            s(&p["name"]),
            text_of(&p["input"]),
            None,
        )],
        "local_shell_call" => vec![act(
            Kind::ToolCall,
            Some("shell".into()),
            text_of(&p["action"]["command"]),
            None,
        )],
        "web_search_call" => vec![act(
            Kind::ToolCall,
            Some("web_search".into()),
            text_of(&p["action"]),
            None,
        )],
        "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
            let out = &p["output"];
            let text = text_of(out.get("content").unwrap_or(out));
            let failed = out["success"] == false
                || text.as_deref().is_some_and(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix("Process exited with code "))
                        .is_some_and(|c| c.trim() != "0")
                });
            vec![act(
                Kind::ToolResult,
                None,
                text,
                Some(if failed { "error" } else { "ok" }),
            )]
        }
        other => vec![Event::Unknown(format!("rollout item {other}"))],
    }
}

/// A tool's result in a Gemini CLI recording (`functionResponse`), keyed
/// by its call's id (`id` when it names none); nothing for a part that is
/// not one.
fn gemini_result(r: &Value, id: &str) -> Option<Keyed> {
    if !r.is_object() {
        return None;
    }
    let resp = &r["response"];
    let failed = !resp["error"].is_null();
    let text = text_of(&resp["output"])
        .or_else(|| text_of(&resp["error"]))
        .or_else(|| text_of(resp));
    let key = format!("r:{}", r["id"].as_str().unwrap_or(id));
    Some(once(
        key,
        act(
            Kind::ToolResult,
            None,
            text,
            Some(if failed { "error" } else { "ok" }),
        ),
    ))
}

/// A Gemini CLI chat recording line: the session's metadata (first), a
/// message (`id`, `type`), or an update of the metadata (`$set`, …).
fn gemini(v: &Value) -> Vec<Keyed> {
    let Some(ty) = v["type"].as_str() else {
        return gemini_metadata(v);
    };
    let id = v["id"].as_str().unwrap_or("");
    match ty {
        "user" => v["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|part| gemini_result(&part["functionResponse"], id))
            .collect(),
        "gemini" => gemini_message(v, id),
        "error" => vec![once(
            format!("e:{id}"),
            act(Kind::Error, None, text_of(&v["content"]), Some("error")),
        )],
        // Notes the CLI shows its user (info, warnings): not the agent's.
        "info" | "warning" => Vec::new(),
        other => vec![(None, Event::Unknown(format!("recording {other}")))],
    }
}

/// A line without a type: the session's metadata, or the recording's own
/// bookkeeping (`$set`, `$rewindTo`).
fn gemini_metadata(v: &Value) -> Vec<Keyed> {
    if let Some(id) = s(&v["sessionId"]) {
        return vec![(None, Event::Session(id))];
    }
    if v.as_object()
        .is_some_and(|o| o.keys().any(|k| k.starts_with('$')))
    {
        return Vec::new();
    }
    vec![(None, Event::Unknown("recording line without a type".into()))]
}

/// A message of the model (`id`): its model, thoughts, text, tool calls
/// with their results, and tokens, each keyed by the message or the call.
fn gemini_message(v: &Value, id: &str) -> Vec<Keyed> {
    let mut out = Vec::new();
    if let Some(m) = s(&v["model"]) {
        out.push((None, Event::Model(m)));
    }
    if let Some(t) = gemini_thoughts(&v["thoughts"]) {
        out.push(once(
            format!("h:{id}"),
            act(Kind::Thinking, None, Some(t), None),
        ));
    }
    if let Some(t) = gemini_text(&v["content"]).filter(|t| !t.is_empty()) {
        out.push(once(
            format!("t:{id}"),
            act(Kind::Text, None, Some(t), None),
        ));
    }
    for c in v["toolCalls"].as_array().into_iter().flatten() {
        let call = c["id"].as_str().unwrap_or(id);
        out.push(once(
            format!("c:{call}"),
            act(Kind::ToolCall, s(&c["name"]), text_of(&c["args"]), None),
        ));
        // The result is recorded with the call once it ran, and
        // again in the next request's `user` line; whichever is
        // read first counts (one key).
        for part in c["result"].as_array().into_iter().flatten() {
            out.extend(gemini_result(&part["functionResponse"], call));
        }
    }
    if let Some(f) = gemini_tokens(&v["tokens"]) {
        out.push(once(format!("u:{id}"), Event::Usage(f)));
    }
    out
}

/// A message's thoughts, one `subject: description` a line; None without
/// any.
fn gemini_thoughts(thoughts: &Value) -> Option<String> {
    let lines: Vec<String> = thoughts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let subject = t["subject"].as_str().unwrap_or("");
            let what = t["description"].as_str().unwrap_or("");
            let both = format!("{subject}: {what}");
            (!subject.is_empty() || !what.is_empty())
                .then(|| both.trim_matches([':', ' ']).to_string())
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// A message's text: a string, or its parts' texts joined.
fn gemini_text(content: &Value) -> Option<String> {
    match content {
        Value::String(t) => Some(t.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
        ),
        _ => None,
    }
}

/// A message's `tokens`, as its headless stream counts them (the cached
/// input apart; the candidates, not the thoughts, as output).
fn gemini_tokens(t: &Value) -> Option<Figures> {
    if !t.is_object() {
        return None;
    }
    let cached = n(&t["cached"]);
    Some(Figures {
        model: None,
        input_tokens: n(&t["input"]).saturating_sub(cached),
        output_tokens: n(&t["output"]),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
        cost_usd: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kinds(evs: &[Keyed]) -> Vec<String> {
        evs.iter()
            .map(|(_, e)| match e {
                Event::Activity { kind, .. } => format!("{kind:?}"),
                Event::Usage(_) => "usage".into(),
                Event::Session(_) => "session".into(),
                Event::Model(_) => "model".into(),
                Event::Unknown(t) => format!("unknown {t}"),
            })
            .collect()
    }

    #[test]
    fn a_codex_rollout_gives_calls_results_text_and_each_responses_usage_once() {
        let call = json!({"type": "response_item", "payload": {"type": "function_call",
            "name": "exec_command", "arguments": "{\"cmd\":\"ls -la\"}"}});
        let e = parse(Cli::Codex, &call);
        assert!(
            matches!(&e[0].1, Event::Activity { kind: Kind::ToolCall, text: Some(t), .. } if t == "ls -la")
        );
        let out = json!({"type": "response_item", "payload": {"type": "function_call_output",
            "output": "Chunk ID: 1\nProcess exited with code 2\nOutput:\nno"}});
        let e = parse(Cli::Codex, &out);
        assert!(matches!(&e[0].1, Event::Activity { status: Some(s), .. } if s == "error"));
        let usage = json!({"type": "token_usage_record", "payload": {"response_id": "r1",
            "usage": {"input_tokens": 150, "cached_input_tokens": 50, "output_tokens": 20}}});
        let e = parse(Cli::Codex, &usage);
        assert_eq!(e[0].0.as_deref(), Some("u:r1"));
        let Event::Usage(f) = &e[0].1 else { panic!() };
        assert_eq!(
            (f.input_tokens, f.cache_read_tokens, f.output_tokens),
            (100, 50, 20)
        );
        assert_eq!(
            kinds(&parse(Cli::Codex, &json!({"type": "new-kind"}))),
            vec!["unknown rollout new-kind"]
        );
        // Odd types: nothing, no panic.
        for odd in [
            json!({"type": "response_item", "payload": 3}),
            json!({"type": "token_usage_record", "payload": {"usage": "x"}}),
            json!({"type": 7}),
        ] {
            let _ = parse(Cli::Codex, &odd);
        }
    }

    #[test]
    fn a_gemini_message_written_again_is_keyed_by_its_id() {
        let first = json!({"id": "m1", "type": "gemini", "content": "", "model": "g",
            "tokens": {"input": 150, "output": 20, "cached": 50}});
        let again = json!({"id": "m1", "type": "gemini", "content": "", "model": "g",
            "tokens": {"input": 150, "output": 20, "cached": 50},
            "toolCalls": [{"id": "c1", "name": "run_shell_command", "args": {"command": "ls"}}]});
        let a = parse(Cli::Gemini, &first);
        let b = parse(Cli::Gemini, &again);
        assert_eq!(kinds(&a), vec!["model", "usage"]);
        assert_eq!(kinds(&b), vec!["model", "ToolCall", "usage"]);
        assert_eq!(a[1].0, b[2].0, "the same usage key both times");
        let Event::Usage(f) = &a[1].1 else { panic!() };
        assert_eq!((f.input_tokens, f.cache_read_tokens), (100, 50));
        let result = json!({"id": "u2", "type": "user", "content": [{"functionResponse":
            {"id": "c1", "name": "run_shell_command", "response": {"output": "TASK: x"}}}]});
        let from_user = parse(Cli::Gemini, &result);
        assert_eq!(kinds(&from_user), vec!["ToolResult"]);
        // The result recorded with its call (before any `user` line): the
        // same record, under the same key.
        let ran = json!({"id": "m1", "type": "gemini", "content": "", "toolCalls": [{"id": "c1",
            "name": "run_shell_command", "args": {"command": "ls"}, "status": "success",
            "result": [{"functionResponse": {"id": "c1", "name": "run_shell_command",
                "response": {"output": "TASK: x"}}}]}]});
        let with_call = parse(Cli::Gemini, &ran);
        assert_eq!(kinds(&with_call), vec!["ToolCall", "ToolResult"]);
        assert_eq!(with_call[1].0, from_user[0].0);
        let meta = json!({"sessionId": "s1", "projectHash": "h"});
        assert_eq!(kinds(&parse(Cli::Gemini, &meta)), vec!["session"]);
        assert!(parse(Cli::Gemini, &json!({"$set": {"lastUpdated": "x"}})).is_empty());
        assert_eq!(
            kinds(&parse(
                Cli::Gemini,
                &json!({"type": "brand-new", "id": "x"})
            )),
            vec!["unknown recording brand-new"]
        );
        let _ = parse(
            Cli::Gemini,
            &json!({"type": "gemini", "thoughts": 3, "toolCalls": {}, "tokens": []}),
        );
    }
}
