//! Reading a headless turn's JSON event stream: one JSON object per line,
//! in each CLI's own shape (docs/headless.md lists them, with the versions
//! they were read from), turned into what the swarm keeps: the session id,
//! activity records and the turn's token usage.
//!
//! The stream is untrusted. A value of an unexpected type is treated as
//! absent, an event type we do not know is reported as [`Event::Unknown`]
//! (the caller counts it), and nothing here panics or allocates more than
//! the line it is given.

use serde_json::Value;

use super::Cli;
use crate::telemetry::activity::{self, Activity, Kind};
use crate::telemetry::usage::Usage;

/// The figures of one usage report, normalised: `input_tokens` excludes
/// cached input (Codex and Gemini report it inclusive; Claude exclusive).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    pub model: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub cost_usd: Option<f64>,
}

/// What one line says.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The conversation's id (Claude's `session_id`, Codex's `thread_id`).
    Session(String),
    /// The model in use, when the CLI names it before the usage.
    Model(String),
    /// Something the agent did, for its activity file.
    Activity {
        kind: Kind,
        name: Option<String>,
        text: Option<String>,
        status: Option<String>,
    },
    Usage(Figures),
    /// A type this reader does not know (counted, not kept).
    Unknown(String),
}

pub(super) fn s(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

pub(super) fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Text of a value: a string as is, anything else as JSON.
pub(super) fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(t) => Some(t.clone()),
        other => Some(other.to_string()),
    }
}

pub(super) fn act(
    kind: Kind,
    name: Option<String>,
    text: Option<String>,
    status: Option<&str>,
) -> Event {
    Event::Activity {
        kind,
        name,
        text,
        status: status.map(str::to_string),
    }
}

/// The activity record of `role` for an [`Event::Activity`], its name and
/// text bounded and escaped.
pub fn record(
    role: &str,
    kind: Kind,
    name: Option<String>,
    text: Option<String>,
    status: Option<String>,
) -> Activity {
    let mut a = Activity::now(role, kind);
    a.name = name.map(|n| activity::bound(&n));
    a.status = status;
    match text {
        Some(t) => a.text(&t),
        None => a,
    }
}

/// The usage record of `role` for figures `cli` reported (the model
/// they name, else `model`), attributed to `item` (its id and thread).
pub fn usage_of(
    role: &str,
    cli: Cli,
    f: Figures,
    model: Option<String>,
    item: Option<&(String, String)>,
) -> Usage {
    let mut u = Usage::now(role, cli.name());
    u.id = item.map(|(id, _)| id.clone());
    u.thread = item.map(|(_, t)| t.clone());
    u.model = f.model.or(model).map(|m| activity::bound(&m));
    u.input_tokens = f.input_tokens;
    u.output_tokens = f.output_tokens;
    u.cache_read_tokens = f.cache_read_tokens;
    u.cache_write_tokens = f.cache_write_tokens;
    u.cost_usd = f.cost_usd.filter(|c| c.is_finite() && *c >= 0.0);
    u
}

/// Keeps `t`, an event type a reader does not know, among the few named
/// in the note at a turn's end: at most 8, each once, bounded.
pub fn name_unknown(types: &mut Vec<String>, t: &str) {
    if types.len() < 8 && !types.iter().any(|k| k == t) {
        types.push(activity::bound(t));
    }
}

/// Whether `cli` reports the whole conversation's usage at a turn's end
/// rather than the turn's: Codex's `turn.completed` carries the thread's
/// running total (seen with 0.171: a resumed turn reported both turns).
pub fn cumulative(cli: Cli) -> bool {
    cli == Cli::Codex
}

/// The events of one parsed line of `cli`'s stream.
pub fn parse(cli: Cli, v: &Value) -> Vec<Event> {
    match cli {
        Cli::Claude => claude(v),
        Cli::Codex => codex(v),
        Cli::Gemini => gemini(v),
    }
}

/// A model request the CLI retries, or gave up on, after an HTTP error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retry {
    pub status: u64,
    /// The CLI's word for the error (`authentication_failed`), bounded.
    pub error: String,
    /// Which try this is, of `max` (both 0 when the CLI gave up).
    pub attempt: u64,
    pub max: u64,
}

impl Retry {
    /// An error waiting does not heal (a wrong or revoked key, a refused
    /// account) or that a person should know of at once (a rate limit):
    /// 401, 403, 429.
    pub fn blocks(&self) -> bool {
        matches!(self.status, 401 | 403 | 429)
    }
}

/// A word of an error as shown: ASCII letters, digits and `_`, bounded.
fn word(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect()
}

/// The refused request a line of `cli`'s stream reports, retried or given
/// up on:
/// - Claude Code 2.1: `{"type":"system","subtype":"api_retry","attempt":3,
///   "max_retries":10,"error_status":401,"error":"authentication_failed",…}`,
///   retried for about three minutes;
/// - Codex 0.171 (`exec --json`): `{"type":"error","message":"Reconnecting...
///   1/5 (unexpected status 401 Unauthorized: …)"}` for each of five tries,
///   then `{"type":"turn.failed","error":{"message":"unexpected status 401
///   Unauthorized: …"}}`;
/// - Gemini CLI 0.61 (`--output-format stream-json`) retries nothing it
///   reports: a refused request ends the turn with `{"type":"result",
///   "status":"error","error":{"message":"[API Error: {\"error\":{\"code\":
///   401,…,\"status\":\"UNAUTHENTICATED\"}}]"}}` (Google's error, quoted).
pub fn retry(cli: Cli, v: &Value) -> Option<Retry> {
    match cli {
        Cli::Claude if v["type"] == "system" && v["subtype"] == "api_retry" => Some(Retry {
            status: v["error_status"].as_u64()?,
            error: word(v["error"].as_str().unwrap_or_default()),
            attempt: n(&v["attempt"]),
            max: n(&v["max_retries"]),
        }),
        Cli::Codex if v["type"] == "error" => {
            let m = v["message"].as_str()?;
            let tries = m.strip_prefix("Reconnecting... ")?;
            let (attempt, rest) = tries.split_once('/')?;
            let max: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let (status, error) = codex_status(m)?;
            Some(Retry {
                status,
                error,
                attempt: attempt.parse().ok()?,
                max: max.parse().ok()?,
            })
        }
        Cli::Codex if v["type"] == "turn.failed" => {
            let (status, error) = codex_status(v["error"]["message"].as_str()?)?;
            Some(Retry {
                status,
                error,
                attempt: 0,
                max: 0,
            })
        }
        Cli::Gemini if v["type"] == "result" && v["status"] == "error" => {
            let m = v["error"]["message"].as_str()?;
            let quoted: Value = serde_json::from_str(m.get(m.find('{')?..=m.rfind('}')?)?).ok()?;
            let e = &quoted["error"];
            let named = e["status"].as_str().unwrap_or_default();
            let status = e["code"].as_u64().or(match named {
                "UNAUTHENTICATED" => Some(401),
                "PERMISSION_DENIED" => Some(403),
                "RESOURCE_EXHAUSTED" => Some(429),
                _ => None,
            })?;
            Some(Retry {
                status,
                error: word(named),
                attempt: 0,
                max: 0,
            })
        }
        _ => None,
    }
}

/// `unexpected status 401 Unauthorized` in a Codex error: the status and
/// its reason word.
fn codex_status(m: &str) -> Option<(u64, String)> {
    let after = &m[m.find("unexpected status ")? + "unexpected status ".len()..];
    let (code, reason) = after.split_once(' ').unwrap_or((after, ""));
    let reason = reason.split([':', ',', ')']).next().unwrap_or_default();
    Some((code.parse().ok()?, word(reason)))
}

/// Claude Code `-p --output-format stream-json --verbose`: `system`
/// (`init` carries `session_id` and `model`), `assistant` and `user`
/// messages (Messages API content blocks), and `result` with the turn's
/// `usage` and `total_cost_usd`.
fn claude(v: &Value) -> Vec<Event> {
    let mut out = Vec::new();
    let ty = v["type"].as_str().unwrap_or("");
    if let Some(id) = s(&v["session_id"]) {
        out.push(Event::Session(id));
    }
    match ty {
        "system" => {
            if v["subtype"] == "init" {
                if let Some(m) = s(&v["model"]) {
                    out.push(Event::Model(m));
                }
            }
        }
        "assistant" | "user" => {
            for b in v["message"]["content"].as_array().into_iter().flatten() {
                match b["type"].as_str().unwrap_or("") {
                    "text" => out.push(act(Kind::Text, None, s(&b["text"]), None)),
                    "thinking" => out.push(act(Kind::Thinking, None, s(&b["thinking"]), None)),
                    "tool_use" => out.push(act(
                        Kind::ToolCall,
                        s(&b["name"]),
                        text_of(&b["input"]),
                        None,
                    )),
                    "tool_result" => out.push(act(
                        Kind::ToolResult,
                        None,
                        text_of(&b["content"]),
                        Some(if b["is_error"] == true { "error" } else { "ok" }),
                    )),
                    _ => {}
                }
            }
        }
        "result" => {
            let u = &v["usage"];
            let model = v["modelUsage"]
                .as_object()
                .and_then(|m| m.keys().next().cloned());
            out.push(Event::Usage(Figures {
                model,
                input_tokens: n(&u["input_tokens"]),
                output_tokens: n(&u["output_tokens"]),
                cache_read_tokens: n(&u["cache_read_input_tokens"]),
                cache_write_tokens: n(&u["cache_creation_input_tokens"]),
                cost_usd: v["total_cost_usd"].as_f64(),
            }));
            if v["is_error"] == true {
                out.push(act(
                    Kind::Error,
                    s(&v["subtype"]),
                    text_of(&v["result"]),
                    Some("error"),
                ));
            }
        }
        "stream_event" | "rate_limit_event" => {}
        other => out.push(Event::Unknown(other.to_string())),
    }
    out
}

/// Codex `exec --json`: `thread.started` (`thread_id`), `turn.*` (the
/// usage on `turn.completed`), `item.started`/`item.completed` with the
/// item's `type` (agent_message, reasoning, command_execution,
/// file_change, mcp_tool_call, …), and `error`.
fn codex(v: &Value) -> Vec<Event> {
    let ty = v["type"].as_str().unwrap_or("");
    let item = &v["item"];
    let it = item["type"].as_str().unwrap_or("");
    match ty {
        "thread.started" => s(&v["thread_id"]).map(Event::Session).into_iter().collect(),
        "turn.started" => Vec::new(),
        "turn.completed" => {
            let u = &v["usage"];
            let cached = n(&u["cached_input_tokens"]);
            vec![Event::Usage(Figures {
                model: None,
                input_tokens: n(&u["input_tokens"]).saturating_sub(cached),
                output_tokens: n(&u["output_tokens"]),
                cache_read_tokens: cached,
                cache_write_tokens: 0,
                cost_usd: None,
            })]
        }
        "turn.failed" => vec![act(
            Kind::Error,
            None,
            text_of(&v["error"]["message"]),
            Some("error"),
        )],
        "error" => vec![act(
            Kind::Error,
            None,
            text_of(&v["message"]),
            Some("error"),
        )],
        "item.started" | "item.updated" => match it {
            "command_execution" => vec![act(
                Kind::ToolCall,
                Some("shell".into()),
                text_of(&item["command"]),
                None,
            )],
            "mcp_tool_call" => vec![act(
                Kind::ToolCall,
                Some(format!(
                    "{}/{}",
                    item["server"].as_str().unwrap_or(""),
                    item["tool"].as_str().unwrap_or("")
                )),
                text_of(&item["arguments"]),
                None,
            )],
            _ => Vec::new(),
        },
        "item.completed" => match it {
            "agent_message" => vec![act(Kind::Text, None, s(&item["text"]), None)],
            "reasoning" => vec![act(Kind::Thinking, None, s(&item["text"]), None)],
            "command_execution" => {
                let ok = item["exit_code"].as_i64() == Some(0);
                vec![act(
                    Kind::ToolResult,
                    Some("shell".into()),
                    text_of(&item["aggregated_output"]),
                    Some(if ok { "ok" } else { "error" }),
                )]
            }
            "file_change" | "mcp_tool_call" | "web_search" => vec![act(
                Kind::ToolResult,
                Some(it.to_string()),
                None,
                Some(if item["status"] == "failed" {
                    "error"
                } else {
                    "ok"
                }),
            )],
            "error" => vec![act(Kind::Error, None, s(&item["message"]), Some("error"))],
            _ => Vec::new(),
        },
        other => vec![Event::Unknown(other.to_string())],
    }
}

/// Gemini CLI `--output-format stream-json`: `init` (`session_id`,
/// `model`), `message` (assistant text, streamed in `delta` pieces),
/// `tool_use`, `tool_result`, `error`, and `result` with `stats`.
fn gemini(v: &Value) -> Vec<Event> {
    match v["type"].as_str().unwrap_or("") {
        "init" => {
            let mut out: Vec<Event> = s(&v["session_id"])
                .map(Event::Session)
                .into_iter()
                .collect();
            out.extend(s(&v["model"]).map(Event::Model));
            out
        }
        "message" if v["role"] == "assistant" => {
            vec![act(Kind::Text, None, s(&v["content"]), None)]
        }
        "message" => Vec::new(),
        "tool_use" => vec![act(
            Kind::ToolCall,
            s(&v["tool_name"]),
            text_of(&v["parameters"]),
            None,
        )],
        "tool_result" => {
            let ok = v["status"] == "success";
            vec![act(
                Kind::ToolResult,
                None,
                text_of(&v["output"]).or_else(|| text_of(&v["error"]["message"])),
                Some(if ok { "ok" } else { "error" }),
            )]
        }
        "error" => vec![act(
            Kind::Error,
            None,
            text_of(&v["message"]),
            Some("error"),
        )],
        "result" => {
            let st = &v["stats"];
            let cached = n(&st["cached"]);
            let input = st["input"]
                .as_u64()
                .unwrap_or_else(|| n(&st["input_tokens"]).saturating_sub(cached));
            let mut out = vec![Event::Usage(Figures {
                model: None,
                input_tokens: input,
                output_tokens: n(&st["output_tokens"]),
                cache_read_tokens: cached,
                cache_write_tokens: 0,
                cost_usd: None,
            })];
            if v["status"] == "error" {
                out.push(act(
                    Kind::Error,
                    None,
                    text_of(&v["error"]["message"]),
                    Some("error"),
                ));
            }
            out
        }
        other => vec![Event::Unknown(other.to_string())],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_cli_gives_its_session_and_usage() {
        let c = parse(
            Cli::Claude,
            &json!({"type": "result", "session_id": "abc", "total_cost_usd": 0.5,
                "modelUsage": {"m1": {}},
                "usage": {"input_tokens": 3, "output_tokens": 4,
                    "cache_read_input_tokens": 5, "cache_creation_input_tokens": 6}}),
        );
        assert_eq!(c[0], Event::Session("abc".into()));
        assert_eq!(
            c[1],
            Event::Usage(Figures {
                model: Some("m1".into()),
                input_tokens: 3,
                output_tokens: 4,
                cache_read_tokens: 5,
                cache_write_tokens: 6,
                cost_usd: Some(0.5)
            })
        );
        let x = parse(
            Cli::Codex,
            &json!({"type": "turn.completed", "usage": {"input_tokens": 10,
                "cached_input_tokens": 4, "output_tokens": 2}}),
        );
        let Event::Usage(f) = &x[0] else { panic!() };
        assert_eq!((f.input_tokens, f.cache_read_tokens), (6, 4));
        let g = parse(
            Cli::Gemini,
            &json!({"type": "init", "session_id": "g1", "model": "m"}),
        );
        assert_eq!(
            g,
            vec![Event::Session("g1".into()), Event::Model("m".into())]
        );
    }

    #[test]
    fn odd_values_are_absent_and_unknown_types_reported() {
        for cli in crate::launch::agents::ALL {
            let e = parse(*cli, &json!({"type": "brand-new", "session_id": 7}));
            assert!(matches!(e.last(), Some(Event::Unknown(t)) if t == "brand-new"));
            // Wrong types everywhere: nothing panics.
            let _ = parse(
                *cli,
                &json!({"type": "result", "usage": "x", "stats": [1],
                "message": {"content": "no"}, "item": 3}),
            );
        }
    }
}
