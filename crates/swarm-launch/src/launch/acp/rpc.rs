//! JSON-RPC 2.0 over the agent's stdio, one JSON object a line (the Agent
//! Client Protocol's transport, agentclientprotocol.com/protocol/transports).
//!
//! Why our own and not the `agent-client-protocol` crate: the crate is
//! async with `!Send` futures (a `LocalSet` and a spawner inside the one
//! subcommand that would need them) and brings its schema crate, while
//! the client uses six methods; and its reader takes whatever line the
//! agent writes, where every size read from an agent must be bounded here.
//! Blocking reads on a thread of their own fit the rest of the launcher
//! (launch/turn.rs reads a CLI's stream the same way).
//!
//! The invariants: a line is read to at most [`MAX_LINE`] bytes (the rest
//! of a longer one is drained in pieces, never held) and anything that is
//! not a JSON-RPC object is counted, never fatal; only the caller's thread
//! writes to the agent ([`Conn`] is not shared), so no two messages
//! interleave; nothing here panics on what the agent sends.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The longest line read from the agent (a session update carries at most
/// a tool's output; Gemini CLI sends a file's whole diff in one).
pub const MAX_LINE: usize = 4 * 1024 * 1024;

/// One message from the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// An answer to one of our requests: its result, or the error's text.
    Response {
        id: u64,
        result: std::result::Result<Value, String>,
    },
    /// A request the agent makes of us (it waits for our answer).
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification (`session/update`).
    Notification { method: String, params: Value },
    /// A line that is not a JSON-RPC message, or too long: counted.
    Unreadable,
    /// The agent closed its output (it exited).
    Closed,
    /// Not from the agent: the role's inbox changed (a file event, a hint
    /// only), so the client looks for work now instead of at its next tick.
    Mail,
}

/// Parses one line (without its newline).
pub fn parse(line: &[u8]) -> Incoming {
    let Some(v) = std::str::from_utf8(line)
        .ok()
        .and_then(|s| serde_json::from_str::<Value>(s.trim()).ok())
        .filter(Value::is_object)
    else {
        return Incoming::Unreadable;
    };
    let method = v["method"].as_str().map(str::to_string);
    let id = Some(&v["id"]).filter(|i| !i.is_null()).cloned();
    let params = v["params"].clone();
    match (method, id) {
        (Some(method), Some(id)) => Incoming::Request { id, method, params },
        (Some(method), None) => Incoming::Notification { method, params },
        (None, Some(id)) => match id.as_u64() {
            Some(id) => Incoming::Response {
                id,
                result: match &v["error"] {
                    Value::Null => Ok(v["result"].clone()),
                    e => Err(match (e["message"].as_str(), &e["data"]) {
                        (Some(m), Value::Null) => m.to_string(),
                        // JSON-RPC's details (Gemini CLI's cause of an
                        // "Internal error"), cut to a line's worth.
                        (Some(m), d) => format!(
                            "{m}: {}",
                            d.to_string().chars().take(300).collect::<String>()
                        ),
                        (None, _) => e.to_string().chars().take(300).collect(),
                    }),
                },
            },
            // Not an id we gave out.
            None => Incoming::Unreadable,
        },
        (None, None) => Incoming::Unreadable,
    }
}

/// Calls `on` with each line of `from` (its newline included), or with
/// `None` for a line longer than `max` bytes, which is read and dropped in
/// pieces, never held; stops at the end, on a read error, or when `on`
/// says false. The one bounded line reader of the launcher: an ACP
/// agent's messages here, a headless CLI's stream in launch/turn.rs.
pub fn each_line(from: impl Read, max: usize, mut on: impl FnMut(Option<&[u8]>) -> bool) {
    let mut r = BufReader::new(from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = match (&mut r).take(max as u64 + 1).read_until(b'\n', &mut buf) {
            Ok(n) => n,
            Err(_) => return,
        };
        if n == 0 {
            return;
        }
        let line = if buf.last() == Some(&b'\n') || n <= max {
            Some(&buf[..])
        } else {
            drain_line(&mut r);
            None
        };
        if !on(line) {
            return;
        }
    }
}

/// Reads `from` line by line into `tx` until it ends (each line at most
/// [`MAX_LINE`] bytes), then sends [`Incoming::Closed`].
pub fn read_into(from: impl Read, tx: mpsc::Sender<Incoming>) {
    each_line(from, MAX_LINE, |line| {
        let msg = match line {
            Some(b) if b.iter().all(u8::is_ascii_whitespace) => return true,
            Some(b) => parse(b),
            None => Incoming::Unreadable,
        };
        tx.send(msg).is_ok()
    });
    let _ = tx.send(Incoming::Closed);
}

/// Reads and drops the rest of an over-long line, piece by piece.
fn drain_line(r: &mut impl BufRead) {
    loop {
        let (done, used) = match r.fill_buf() {
            Ok([]) | Err(_) => (true, 0),
            Ok(b) => match b.iter().position(|c| *c == b'\n') {
                Some(i) => (true, i + 1),
                None => (false, b.len()),
            },
        };
        r.consume(used);
        if done {
            return;
        }
    }
}

/// Our end of the connection: what we write, and what the reader thread
/// hands us.
pub struct Conn {
    to_agent: Box<dyn Write + Send>,
    from_agent: Receiver<Incoming>,
    next_id: u64,
    /// Lines that were not JSON-RPC messages (see [`Incoming::Unreadable`]).
    pub unreadable: usize,
}

impl Conn {
    /// A connection writing to `to_agent`, reading what a [`read_into`]
    /// thread sends on `from_agent`.
    pub fn new(to_agent: Box<dyn Write + Send>, from_agent: Receiver<Incoming>) -> Conn {
        Conn {
            to_agent,
            from_agent,
            next_id: 0,
            unreadable: 0,
        }
    }

    fn write(&mut self, v: &Value) -> std::io::Result<()> {
        let mut line = v.to_string();
        line.push('\n');
        self.to_agent.write_all(line.as_bytes())?;
        self.to_agent.flush()
    }

    /// Sends a request; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> std::io::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    pub fn notify(&mut self, method: &str, params: Value) -> std::io::Result<()> {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// Answers the agent's request `id` with `result`.
    pub fn respond(&mut self, id: &Value, result: Value) -> std::io::Result<()> {
        self.write(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    /// Answers the agent's request `id` with an error.
    pub fn refuse(&mut self, id: &Value, code: i64, message: &str) -> std::io::Result<()> {
        self.write(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        )
    }

    /// The next message, waiting at most `wait` (None: nothing came).
    /// Unreadable lines are counted and skipped.
    pub fn next(&mut self, wait: Duration) -> Option<Incoming> {
        let end = Instant::now() + wait;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.from_agent.recv_timeout(left) {
                Ok(Incoming::Unreadable) => self.unreadable += 1,
                Ok(m) => return Some(m),
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => return Some(Incoming::Closed),
            }
        }
    }
}

/// JSON-RPC's "method not found": what a client that offers no file
/// system or terminal answers to those requests.
pub const METHOD_NOT_FOUND: i64 = -32601;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_line_parses_and_nothing_else_does() {
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#),
            Incoming::Response {
                id: 3,
                result: Ok(json!({"stopReason": "end_turn"}))
            }
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Authentication required."}}"#),
            Incoming::Response {
                id: 1,
                result: Err("Authentication required.".into())
            }
        );
        assert!(matches!(
            parse(
                br#"{"jsonrpc":"2.0","id":"x","method":"session/request_permission","params":{}}"#
            ),
            Incoming::Request { .. }
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#),
            Incoming::Notification { .. }
        ));
        for bad in [
            &b"not json"[..],
            b"[1,2]",
            b"\xff\xfe",
            br#"{"jsonrpc":"2.0"}"#,
            br#"{"id":-1,"result":1}"#,
            br#"{"id":"mine","result":1}"#,
        ] {
            assert_eq!(parse(bad), Incoming::Unreadable, "{bad:?}");
        }
    }

    #[test]
    fn long_and_endless_lines_are_bounded_and_the_stream_goes_on() {
        let mut input = Vec::new();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE * 2));
        input.push(b'\n');
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\"}\n\n");
        input.extend(std::iter::repeat_n(b'y', MAX_LINE + 10));
        let (tx, rx) = mpsc::channel();
        read_into(&input[..], tx);
        let got: Vec<Incoming> = rx.iter().collect();
        assert_eq!(got.len(), 4, "{:?}", got.len());
        assert_eq!(got[0], Incoming::Unreadable);
        assert!(matches!(got[1], Incoming::Notification { .. }));
        assert_eq!(got[2], Incoming::Unreadable);
        assert_eq!(got[3], Incoming::Closed);
    }
}
