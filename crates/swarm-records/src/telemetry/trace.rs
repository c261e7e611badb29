//! Traces (docs/cost.md, "Traces"): every thread is one W3C trace. A
//! message sent with no parent starts one and carries its id in the
//! `trace_id` header; a reply or a hand-on (sent while an item is in
//! process) inherits its parent's. A message without the header (written
//! by SwarmForge's own scripts, or before traces existed) belongs to the
//! trace derived from its thread's root id, so history exports the same
//! trees.
//!
//! Spans are derived from the files, never stored: each delivered copy is a
//! span from `created_at` to `completed_at` (or its latest stamp) with one
//! child per stage (queued, waiting, working), parented on the copy its
//! message replied to or was handed on from; each usage record is an agent
//! turn, parented on the copy of the item it worked on, from its start
//! (`started`: the turn's `turn_start` activity time) to the usage's
//! report (an older record without `started` is an instant). Span ids are
//! hashes of what they stand for, so a span exported live and again from
//! history is the same span.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::protocol::clock::Instant;
use crate::protocol::header::Message;
use crate::protocol::trail::{Copy, Trail};
use crate::telemetry::usage::Usage;

/// A 32-digit lowercase hex trace id, not all zeros (W3C Trace Context).
pub fn valid_trace_id(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && s.bytes().any(|b| b != b'0')
}

fn hash(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize().into()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The trace of a thread whose root is `root` and carries no header.
pub fn derived(root: &str) -> String {
    let mut id = hash(&["trace", root])[..16].to_vec();
    id[0] |= 1; // never all zeros
    hex(&id)
}

/// The trace a message belongs to: its header, else its thread's.
pub fn of(msg: &Message) -> String {
    match msg.trace_id().filter(|t| valid_trace_id(t)) {
        Some(t) => t.to_string(),
        None => derived(msg.thread().or(msg.id()).unwrap_or("")),
    }
}

/// The trace id a new message is stamped with: its parent's (a reply or
/// a hand-on), else its thread's, else a new trace rooted at `own_id`.
pub fn for_new(parent: Option<&Message>, thread: Option<&str>, own_id: &str) -> String {
    match (parent, thread) {
        (Some(p), _) => of(p),
        (None, Some(t)) => derived(t),
        (None, None) => derived(own_id),
    }
}

fn span_id(parts: &[&str]) -> [u8; 8] {
    let mut id = [0u8; 8];
    id.copy_from_slice(&hash(parts)[..8]);
    id[0] |= 1;
    id
}

fn trace_bytes(t: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).unwrap_or(0);
    }
    out
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Float(f64),
}

/// One span, ready to be encoded.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub start: Instant,
    pub end: Instant,
    pub attributes: Vec<(&'static str, Value)>,
}

/// The span of `id`'s copy at `role`.
fn copy_span_id(id: &str, role: &str) -> [u8; 8] {
    span_id(&["copy", id, role])
}

/// Spans of the copies `pick` selects and of the usage records `turns`
/// selects, from one loaded trail.
pub fn spans(
    t: &Trail,
    pick: impl Fn(&Copy) -> bool,
    records: &[Usage],
    turns: impl Fn(&Usage) -> bool,
) -> Vec<Span> {
    let originals: HashMap<&str, &Message> = t.originals.iter().map(|o| (o.id(), &o.msg)).collect();
    let mut out = Vec::new();
    for c in t.copies.iter().filter(|c| pick(c)) {
        let msg = c.id.as_deref().and_then(|id| originals.get(id).copied());
        copy_spans(c, msg, &mut out);
    }
    for u in records.iter().filter(|u| turns(u)) {
        let msg = u.id.as_deref().and_then(|i| originals.get(i).copied());
        out.extend(turn_span(u, msg));
    }
    out
}

/// The spans of copy `c` (its life and its stages) of message `msg` (its
/// original, or the copy's own content: the same headers).
pub fn copy_spans(c: &Copy, msg: Option<&Message>, out: &mut Vec<Span>) {
    let (Some(id), Some(role)) = (c.id.as_deref(), c.recipient.as_deref()) else {
        return;
    };
    let stamps = [
        c.created.at(),
        c.enqueued.at(),
        c.dequeued.at(),
        c.completed.at(),
    ];
    let Some(start) = stamps.iter().flatten().min().copied() else {
        return;
    };
    let end = stamps.iter().flatten().max().copied().unwrap_or(start);
    let trace = msg.map(of).unwrap_or_else(|| derived(id));
    let parent = msg.and_then(|m| {
        let pid = m.in_reply_to()?;
        Some(copy_span_id(pid, m.sender()?))
    });
    let me = copy_span_id(id, role);
    let kind = msg.and_then(Message::type_name).unwrap_or("message");
    let mut attributes = vec![
        ("swarm.id", Value::Str(id.to_string())),
        ("swarm.type", Value::Str(kind.to_string())),
        ("swarm.recipient", Value::Str(role.to_string())),
        (
            "swarm.place",
            Value::Str(format!("{:?}", c.place).to_lowercase()),
        ),
    ];
    if let Some(f) = c.from.as_deref() {
        attributes.push(("swarm.from", Value::Str(f.to_string())));
    }
    out.push(Span {
        trace_id: trace_bytes(&trace),
        span_id: me,
        parent,
        name: format!("{kind} {} -> {role}", c.from.as_deref().unwrap_or("?")),
        start,
        end,
        attributes,
    });
    for (i, stage) in ["queued", "waiting", "working"].iter().enumerate() {
        if let (Some(s), Some(e)) = (stamps[i], stamps[i + 1]) {
            out.push(Span {
                trace_id: trace_bytes(&trace),
                span_id: span_id(&["stage", id, role, stage]),
                parent: Some(me),
                name: (*stage).to_string(),
                start: s,
                end: e.max(s),
                attributes: Vec::new(),
            });
        }
    }
}

/// The span of the turn `u` records, on the item `msg` (its original or a
/// copy) when known.
pub fn turn_span(u: &Usage, msg: Option<&Message>) -> Option<Span> {
    let end = crate::protocol::clock::parse(&u.time)?;
    let trace = match (msg, u.thread.as_deref(), u.id.as_deref()) {
        (Some(m), _, _) => of(m),
        (None, Some(t), _) => derived(t),
        (None, None, Some(i)) => derived(i),
        (None, None, None) => derived(&format!("turns of {}", u.role)),
    };
    let mut attributes = vec![
        ("swarm.role", Value::Str(u.role.clone())),
        ("swarm.source", Value::Str(u.source.clone())),
        (
            "gen_ai.usage.input_tokens",
            Value::Int(clamp(u.input_tokens)),
        ),
        (
            "gen_ai.usage.output_tokens",
            Value::Int(clamp(u.output_tokens)),
        ),
        (
            "swarm.cache_read_tokens",
            Value::Int(clamp(u.cache_read_tokens)),
        ),
        (
            "swarm.cache_write_tokens",
            Value::Int(clamp(u.cache_write_tokens)),
        ),
    ];
    if let Some(m) = &u.model {
        attributes.push(("gen_ai.request.model", Value::Str(m.clone())));
    }
    if let Some(c) = u.cost_usd {
        attributes.push(("swarm.cost_usd", Value::Float(c)));
    }
    if let Some(i) = &u.id {
        attributes.push(("swarm.id", Value::Str(i.clone())));
    }
    Some(Span {
        trace_id: trace_bytes(&trace),
        span_id: span_id(&["turn", &u.role, &u.time, u.id.as_deref().unwrap_or("")]),
        parent: u.id.as_deref().map(|i| copy_span_id(i, &u.role)),
        name: format!("turn {}", u.role),
        start: u
            .started
            .as_deref()
            .and_then(crate::protocol::clock::parse)
            .filter(|s| *s <= end)
            .unwrap_or(end),
        end,
        attributes,
    })
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::header::names;

    #[test]
    fn trace_ids_are_valid_inherited_and_derived_the_same_way_twice() {
        let t = derived("20261202T010000Z-a-000001");
        assert!(valid_trace_id(&t), "{t}");
        assert_eq!(t, derived("20261202T010000Z-a-000001"));
        assert!(!valid_trace_id(&"0".repeat(32)));
        assert!(!valid_trace_id("ABCDEF0123456789ABCDEF0123456789"));
        let mut root = Message::default();
        root.set(names::ID, "r");
        root.set(names::TRACE_ID, "0123456789abcdef0123456789abcdef");
        assert_eq!(
            for_new(Some(&root), None, "x"),
            "0123456789abcdef0123456789abcdef"
        );
        root.set(names::TRACE_ID, "bogus");
        assert_eq!(for_new(Some(&root), None, "x"), derived("r"));
        assert_eq!(for_new(None, None, "x"), derived("x"));
        assert_eq!(trace_bytes("0123456789abcdef0123456789abcdef")[1], 0x23);
    }
}
