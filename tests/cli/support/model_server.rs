//! A scripted model on 127.0.0.1 for the real agent CLIs: one thread per
//! connection, HTTP/1.1 with keep-alive, and the wire protocols the CLIs
//! speak, streamed (SSE):
//!
//! - Anthropic Messages API (`POST …/v1/messages`, Claude Code);
//! - OpenAI Responses API (`POST …/v1/responses`, Codex);
//! - Gemini API (`POST …/models/<m>:streamGenerateContent?alt=sse` and
//!   `:generateContent`, Gemini CLI).
//!
//! Each role has its own base URL, `http://127.0.0.1:<port>/<role>`, and its
//! own script: a list of [`Step`]s (text, or a tool call). The step a request
//! gets is the number of model turns already in its conversation, so a
//! retried request gets the same answer and no counter can drift; a request
//! past the end of the script gets a short text that ends the turn. A step
//! may wait for a gate the test opens ([`ModelServer::open`]), which lets a
//! test act at an exact point of the conversation without sleeping.
//!
//! Every request is logged as one JSON line (`role`, `path`, `main`, `step`,
//! `usage`, `body`) to [`ModelServer::log`]. Every answer reports token
//! usage that depends only on the request's step ([`Usage::of`]), logged as
//! `usage` (input excluding cached input, output, cache read, cache write),
//! so a test can compare what the swarm recorded to the token. Requests that are not the agent's own
//! turn (Claude Code's side requests without tools, e.g. a title) are
//! answered with a short text and logged with `main: false`.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// One model turn.
#[derive(Clone, Debug)]
pub struct Step {
    pub kind: Kind,
    /// Answer only once the test has opened this gate.
    pub gate: Option<String>,
}

#[derive(Clone, Debug)]
pub enum Kind {
    /// Text, and the turn ends.
    Text(String),
    /// A call of the CLI's shell tool with this command line.
    Shell(String),
    /// A call of any tool by its name, with these arguments.
    Tool(String, Value),
    /// An HTTP error instead of an answer: the status, the error's type and
    /// message (Anthropic's error shape; every retry gets it again).
    Refuse(u16, String, String),
}

impl Step {
    pub fn text(t: &str) -> Step {
        Step {
            kind: Kind::Text(t.into()),
            gate: None,
        }
    }

    pub fn shell(cmd: &str) -> Step {
        Step {
            kind: Kind::Shell(cmd.into()),
            gate: None,
        }
    }

    pub fn tool(name: &str, input: Value) -> Step {
        Step {
            kind: Kind::Tool(name.into(), input),
            gate: None,
        }
    }

    /// The model refuses the request with `status` (e.g. 401
    /// `authentication_error`).
    pub fn refuse(status: u16, kind: &str, message: &str) -> Step {
        Step {
            kind: Kind::Refuse(status, kind.into(), message.into()),
            gate: None,
        }
    }

    /// Holds the answer until [`ModelServer::open`]`(gate)`.
    pub fn after(mut self, gate: &str) -> Step {
        self.gate = Some(gate.into());
        self
    }
}

/// The token usage an answer reports; `input` excludes cached input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Usage {
    /// An agent's turn: figures from its step; a side request: small and
    /// fixed. Only the Messages API can say cache writes.
    fn of(wire: Wire, main: bool, step: usize) -> Usage {
        let k = step as u64;
        let mut u = if main {
            Usage {
                input: 100 + 3 * k,
                output: 20 + k,
                cache_read: 50 + k,
                cache_write: 7,
            }
        } else {
            Usage {
                input: 5,
                output: 1,
                cache_read: 0,
                cache_write: 0,
            }
        };
        if !matches!(wire, Wire::Anthropic) {
            u.cache_write = 0;
        }
        u
    }

    fn json(self) -> Value {
        json!({"input": self.input, "output": self.output,
            "cache_read": self.cache_read, "cache_write": self.cache_write})
    }

    pub fn from_log(v: &Value) -> Usage {
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        Usage {
            input: n("input"),
            output: n("output"),
            cache_read: n("cache_read"),
            cache_write: n("cache_write"),
        }
    }
}

/// What a request past the end of its script is told.
pub const IDLE_TEXT: &str = "Nothing more to do for now.";

/// How long a gated step waits before answering anyway (the test has failed
/// by then; the agent must not hang).
const GATE_LIMIT: Duration = Duration::from_secs(90);

struct State {
    scripts: Mutex<HashMap<String, Vec<Step>>>,
    gates: Mutex<HashSet<String>>,
    opened: Condvar,
    log: Mutex<File>,
}

/// The server; it stops with the test process (its threads are detached and
/// only ever talk to the CLIs of this test).
pub struct ModelServer {
    pub port: u16,
    pub log: PathBuf,
    state: Arc<State>,
    _dir: tempfile::TempDir,
}

impl ModelServer {
    pub fn start() -> ModelServer {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.jsonl");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State {
            scripts: Mutex::new(HashMap::new()),
            gates: Mutex::new(HashSet::new()),
            opened: Condvar::new(),
            log: Mutex::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .unwrap(),
            ),
        });
        let s = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || {
                    let _ = serve(conn, &s);
                });
            }
        });
        ModelServer {
            port,
            log,
            state,
            _dir: dir,
        }
    }

    /// `role`'s steps, in order.
    pub fn script(&self, role: &str, steps: Vec<Step>) {
        self.state
            .scripts
            .lock()
            .unwrap()
            .insert(role.into(), steps);
    }

    /// The base URL for `role` (the CLI appends `/v1/messages`; Codex's
    /// provider takes `<url>/v1`).
    pub fn url(&self, role: &str) -> String {
        format!("http://127.0.0.1:{}/{role}", self.port)
    }

    pub fn open(&self, gate: &str) {
        self.state.gates.lock().unwrap().insert(gate.into());
        self.state.opened.notify_all();
    }

    /// Every request logged so far.
    pub fn requests(&self) -> Vec<Value> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The agent's own turns (`main`) of `role`, in order.
    pub fn turns(&self, role: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["role"] == role && r["main"] == true)
            .collect()
    }

    /// Whether `role` has asked for step `n` (its answer may be held by a gate).
    pub fn reached(&self, role: &str, n: usize) -> bool {
        self.turns(role).iter().any(|r| r["step"] == n)
    }

    /// The log, for a failing test's message.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for r in self.requests() {
            out.push_str(&format!(
                "{} {} main={} step={}: {}\n",
                r["role"],
                r["path"],
                r["main"],
                r["step"],
                last_input(&r["body"])
            ));
        }
        out
    }
}

/// The last message or item of a request, cut short, for [`ModelServer::dump`].
fn last_input(body: &Value) -> String {
    let last = body["messages"]
        .as_array()
        .or(body["input"].as_array())
        .or(body["contents"].as_array())
        .and_then(|a| a.last())
        .map(|v| v.to_string())
        .unwrap_or_default();
    last.chars().take(300).collect()
}

struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

fn read_request(r: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut words = line.split_whitespace();
    let method = words.next()?.to_string();
    let path = words.next()?.to_string();
    let mut len = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => len = v.trim().parse().ok()?,
            "transfer-encoding" => chunked = v.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(len, 0);
        r.read_exact(&mut body).ok()?;
    }
    Some(Request { method, path, body })
}

fn serve(conn: TcpStream, s: &State) -> std::io::Result<()> {
    let mut w = conn.try_clone()?;
    let mut r = BufReader::new(conn);
    while let Some(req) = read_request(&mut r) {
        let (status, ctype, body) = match answer(&req, s) {
            Answer::Ok(ctype, body) => (200, ctype, body),
            Answer::Refused(status, body) => (status, "application/json", body),
        };
        write!(
            w,
            "HTTP/1.1 {status} {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-cache\r\n\r\n",
            if status == 200 { "OK" } else { "Error" },
            body.len()
        )?;
        w.write_all(&body)?;
        w.flush()?;
    }
    Ok(())
}

/// `/<role>/…`: the role and the rest of the path.
fn split_role(path: &str) -> (String, String) {
    let p = path.trim_start_matches('/');
    match p.split_once('/') {
        Some((role, rest)) => (role.to_string(), format!("/{rest}")),
        None => (p.to_string(), "/".into()),
    }
}

/// What the server answers a request: a body, or an HTTP error.
enum Answer {
    Ok(&'static str, Vec<u8>),
    Refused(u16, Vec<u8>),
}

fn answer(req: &Request, s: &State) -> Answer {
    match answer_ok(req, s) {
        // Each API's own error body: Google's (code, message, status),
        // OpenAI's (message, type, code), Anthropic's (type, error).
        Err((status, kind, message)) => Answer::Refused(
            status,
            if req.path.contains("enerateContent") {
                json!({"error": {"code": status, "message": message, "status": kind}})
            } else if req.path.contains("/v1/responses") {
                json!({"error": {"message": message, "type": kind, "code": kind}})
            } else {
                json!({"type": "error", "error": {"type": kind, "message": message}})
            }
            .to_string()
            .into_bytes(),
        ),
        Ok((ctype, body)) => Answer::Ok(ctype, body),
    }
}

type Refusal = (u16, String, String);

fn answer_ok(req: &Request, s: &State) -> Result<(&'static str, Vec<u8>), Refusal> {
    let (role, rest) = split_role(&req.path);
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let wire = if req.method == "POST" && rest.starts_with("/v1/messages") {
        if rest.contains("count_tokens") {
            None
        } else {
            Some(Wire::Anthropic)
        }
    } else if req.method == "POST" && rest.starts_with("/v1/responses") {
        Some(Wire::Responses)
    } else if req.method == "POST" && rest.contains(":streamGenerateContent") {
        Some(Wire::Gemini { stream: true })
    } else if req.method == "POST" && rest.contains(":generateContent") {
        Some(Wire::Gemini { stream: false })
    } else {
        None
    };
    let main = wire.is_some_and(|w| w.is_main(&body));
    let step = wire.map(|w| w.turns_done(&body));
    let usage = wire.map(|w| Usage::of(w, main, step.unwrap_or(0)));
    {
        let line = json!({"role": role, "method": req.method, "path": rest,
            "main": main, "step": if main { json!(step) } else { Value::Null },
            "usage": usage.map(Usage::json), "body": body});
        let mut f = s.log.lock().unwrap();
        let _ = writeln!(f, "{line}");
    }
    let Some(wire) = wire else {
        return Ok(match rest.as_str() {
            p if p.contains("count_tokens") => {
                ("application/json", br#"{"input_tokens":100}"#.to_vec())
            }
            _ => ("application/json", b"{}".to_vec()),
        });
    };
    let step = if main {
        s.scripts
            .lock()
            .unwrap()
            .get(&role)
            .and_then(|v| v.get(step.unwrap_or(0)).cloned())
    } else {
        None
    };
    if let Some(gate) = step.as_ref().and_then(|st| st.gate.clone()) {
        let g = s.gates.lock().unwrap();
        let _ = s
            .opened
            .wait_timeout_while(g, GATE_LIMIT, |g| !g.contains(&gate));
    }
    // A side request that wants JSON of a schema (Gemini CLI's model
    // router) gets the smallest value of that schema, so it is not retried.
    let schema = &body["generationConfig"]["responseJsonSchema"];
    let kind = match step {
        Some(st) => st.kind,
        None if !main && schema.is_object() => Kind::Text(fill(schema).to_string()),
        None => Kind::Text(IDLE_TEXT.into()),
    };
    let n = body["messages"]
        .as_array()
        .or(body["input"].as_array())
        .or(body["contents"].as_array())
        .map_or(0, Vec::len);
    let u = usage.unwrap_or_default();
    if let Kind::Refuse(status, kind, message) = kind {
        return Err((status, kind, message));
    }
    Ok(match wire {
        Wire::Anthropic if body["stream"] == true => {
            ("text/event-stream", anthropic_sse(&body, &kind, n, u))
        }
        Wire::Anthropic => ("application/json", anthropic_json(&body, &kind, n, u)),
        Wire::Responses => ("text/event-stream", responses_sse(&body, &kind, n, u)),
        Wire::Gemini { stream: true } => {
            let mut out = b"data: ".to_vec();
            out.extend_from_slice(gemini_json(&kind, u).to_string().as_bytes());
            out.extend_from_slice(b"\r\n\r\n");
            ("text/event-stream", out)
        }
        Wire::Gemini { stream: false } => (
            "application/json",
            gemini_json(&kind, u).to_string().into_bytes(),
        ),
    })
}

#[derive(Clone, Copy)]
enum Wire {
    Anthropic,
    Responses,
    Gemini { stream: bool },
}

impl Wire {
    /// The agent's own turn: it offers its shell tool (side requests such
    /// as a session title offer none).
    fn is_main(self, body: &Value) -> bool {
        match self {
            Wire::Gemini { .. } => body["tools"].as_array().is_some_and(|t| {
                t.iter().any(|t| {
                    t["functionDeclarations"]
                        .as_array()
                        .is_some_and(|f| !f.is_empty())
                })
            }),
            _ => body["tools"].as_array().is_some_and(|t| !t.is_empty()),
        }
    }

    /// Model turns already in the conversation: the index of the next step.
    fn turns_done(self, body: &Value) -> usize {
        match self {
            Wire::Anthropic => body["messages"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count()),
            Wire::Gemini { .. } => body["contents"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["role"] == "model").count()),
            // One turn ends each run of model output items (function calls
            // and assistant messages) that the client echoes back.
            Wire::Responses => {
                let items = body["input"].as_array().cloned().unwrap_or_default();
                let mut turns = 0;
                let mut in_output = false;
                for it in &items {
                    let out = it["type"] == "function_call"
                        || it["type"] == "custom_tool_call"
                        || it["type"] == "local_shell_call"
                        || (it["type"] == "message" && it["role"] == "assistant")
                        || it["type"] == "reasoning";
                    if out && !in_output {
                        turns += 1;
                    }
                    in_output = out;
                }
                turns
            }
        }
    }
}

fn sse(events: &[(&str, Value)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in events {
        out.extend_from_slice(format!("event: {name}\ndata: {data}\n\n").as_bytes());
    }
    out
}

/// The tool call of a step: (name, input) in Anthropic's terms.
fn anthropic_tool(kind: &Kind) -> Option<(String, Value)> {
    match kind {
        // Never sent: a refusal is answered before (`answer`).
        Kind::Text(_) | Kind::Refuse(..) => None,
        Kind::Shell(cmd) => Some((
            "Bash".into(),
            json!({"command": cmd, "description": "run a protocol command", "timeout": 120000}),
        )),
        Kind::Tool(name, input) => Some((name.clone(), input.clone())),
    }
}

fn anthropic_usage(u: Usage) -> Value {
    json!({"input_tokens": u.input, "output_tokens": u.output,
        "cache_read_input_tokens": u.cache_read, "cache_creation_input_tokens": u.cache_write})
}

fn anthropic_message(body: &Value, n: usize, content: Value, stop: &str, u: Usage) -> Value {
    json!({"id": format!("msg_{n:04}"), "type": "message", "role": "assistant",
        "model": body["model"], "content": content, "stop_reason": stop,
        "stop_sequence": null, "usage": anthropic_usage(u)})
}

fn anthropic_json(body: &Value, kind: &Kind, n: usize, u: Usage) -> Vec<u8> {
    let (content, stop) = match anthropic_tool(kind) {
        Some((name, input)) => (
            json!([{"type": "tool_use", "id": format!("toolu_{n:04}"), "name": name, "input": input}]),
            "tool_use",
        ),
        None => {
            let Kind::Text(t) = kind else { unreachable!() };
            (json!([{"type": "text", "text": t}]), "end_turn")
        }
    };
    anthropic_message(body, n, content, stop, u)
        .to_string()
        .into_bytes()
}

fn anthropic_sse(body: &Value, kind: &Kind, n: usize, u: Usage) -> Vec<u8> {
    let mut start = anthropic_message(body, n, json!([]), "", u);
    start["stop_reason"] = Value::Null;
    let (block, delta, stop) = match anthropic_tool(kind) {
        Some((name, input)) => (
            json!({"type": "tool_use", "id": format!("toolu_{n:04}"), "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
        None => {
            let Kind::Text(t) = kind else { unreachable!() };
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": t}),
                "end_turn",
            )
        }
    };
    sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": start}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": block}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": anthropic_usage(u)}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

/// The OpenAI Responses API, streamed, as Codex reads it: the item is
/// announced, completed, then the response completes.
fn responses_sse(body: &Value, kind: &Kind, n: usize, u: Usage) -> Vec<u8> {
    let id = format!("resp_{n:04}");
    let item = match kind {
        Kind::Text(t) | Kind::Refuse(_, _, t) => {
            json!({"type": "message", "role": "assistant", "id": format!("msg_{n:04}"),
            "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]})
        }
        Kind::Shell(cmd) => json!({"type": "function_call", "id": format!("fc_{n:04}"),
            "call_id": format!("call_{n:04}"), "name": shell_tool(body),
            "arguments": shell_args(body, cmd).to_string()}),
        // `namespace/tool`: a tool of a namespace (Codex offers each MCP
        // server's tools as the namespace `mcp__<server>`).
        Kind::Tool(name, input) => {
            let mut call = json!({"type": "function_call", "id": format!("fc_{n:04}"),
                "call_id": format!("call_{n:04}"), "name": name, "arguments": input.to_string()});
            if let Some((ns, tool)) = name.split_once('/') {
                call["name"] = json!(tool);
                call["namespace"] = json!(ns);
            }
            call
        }
    };
    let response = |status: &str, output: Value| {
        json!({"id": id, "object": "response", "status": status, "model": body["model"],
            "output": output,
            "usage": {"input_tokens": u.input + u.cache_read,
                "input_tokens_details": {"cached_tokens": u.cache_read},
                "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": u.input + u.cache_read + u.output}})
    };
    sse(&[
        (
            "response.created",
            json!({"type": "response.created", "response": response("in_progress", json!([]))}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": response("completed", json!([item]))}),
        ),
    ])
}

/// The name of the shell tool a Codex request offers.
fn shell_tool(body: &Value) -> String {
    let names: Vec<String> = body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    ["shell_command", "exec_command", "shell"]
        .iter()
        .find(|n| names.iter().any(|x| x == *n))
        .map_or("shell".to_string(), |n| n.to_string())
}

/// The shell tool's arguments for a command line, in the shape its schema asks.
fn shell_args(body: &Value, cmd: &str) -> Value {
    match shell_tool(body).as_str() {
        "shell_command" => json!({"command": cmd, "timeout_ms": 120000}),
        "exec_command" => json!({"cmd": cmd}),
        _ => json!({"command": ["bash", "-lc", cmd], "timeout_ms": 120000}),
    }
}

/// A Gemini API answer (one chunk of a stream, or the whole reply): text, or
/// a function call (the shell tool is `run_shell_command`).
fn gemini_json(kind: &Kind, u: Usage) -> Value {
    let part = match kind {
        Kind::Text(t) | Kind::Refuse(_, _, t) => json!({"text": t}),
        Kind::Shell(cmd) => json!({"functionCall": {"name": "run_shell_command",
            "args": {"command": cmd, "description": "run a protocol command"}}}),
        Kind::Tool(name, input) => json!({"functionCall": {"name": name, "args": input}}),
    };
    json!({"candidates": [{"content": {"role": "model", "parts": [part]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": u.input + u.cache_read,
            "cachedContentTokenCount": u.cache_read, "candidatesTokenCount": u.output,
            "totalTokenCount": u.input + u.cache_read + u.output},
        "modelVersion": "scripted"})
}

/// The smallest value of a JSON schema (Gemini's upper-case type names too).
fn fill(schema: &Value) -> Value {
    let ty = schema["type"].as_str().unwrap_or("").to_ascii_lowercase();
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match ty.as_str() {
        "object" => {
            let mut o = serde_json::Map::new();
            if let Some(props) = schema["properties"].as_object() {
                for (k, v) in props {
                    o.insert(k.clone(), fill(v));
                }
            }
            Value::Object(o)
        }
        "array" => json!([]),
        "integer" | "number" => json!(1),
        "boolean" => json!(false),
        _ => json!("scripted"),
    }
}
