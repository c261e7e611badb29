//! Traces (docs/cost.md, "Traces"): a thread's root message gets a W3C
//! trace id that its replies and hand-ons inherit; the daemon exports each
//! copy's life and each agent turn as spans with OTLP over HTTP to
//! `otel.endpoint`; a collector that is down costs a journal line, not a
//! delivery; `swarm otel export` sends history. The receiver here decodes
//! the requests with the OpenTelemetry project's protobuf types.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

use crate::support::{file_header, wait_until, Project, Role, DEADLINE};

/// An OTLP/HTTP collector on 127.0.0.1 keeping every span it was sent.
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
    paths: Arc<Mutex<Vec<String>>>,
}

impl Collector {
    fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let spans = Arc::new(Mutex::new(Vec::new()));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (s2, p2) = (Arc::clone(&spans), Arc::clone(&paths));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut first = String::new();
                if r.read_line(&mut first).is_err() {
                    continue;
                }
                let mut len = 0usize;
                let mut protobuf = false;
                loop {
                    let mut l = String::new();
                    if r.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                        break;
                    }
                    let l = l.trim_end().to_ascii_lowercase();
                    if let Some(v) = l.strip_prefix("content-length: ") {
                        len = v.parse().unwrap_or(0);
                    }
                    protobuf |= l == "content-type: application/x-protobuf";
                }
                let mut body = vec![0; len];
                let _ = r.read_exact(&mut body);
                p2.lock()
                    .unwrap()
                    .push(first.split_whitespace().nth(1).unwrap_or("").to_string());
                let req = ExportTraceServiceRequest::decode(&body[..]).expect("valid OTLP");
                assert!(protobuf, "content type");
                for rs in req.resource_spans {
                    for ss in rs.scope_spans {
                        s2.lock().unwrap().extend(ss.spans);
                    }
                }
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        Collector { url, spans, paths }
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

fn attr(s: &Span, key: &str) -> Option<String> {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|v| match v {
            any_value::Value::StringValue(s) => s.clone(),
            any_value::Value::IntValue(i) => i.to_string(),
            other => format!("{other:?}"),
        })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn copy_span(spans: &[Span], id: &str, recipient: &str) -> Option<Span> {
    spans
        .iter()
        .find(|s| {
            attr(s, "swarm.id").as_deref() == Some(id)
                && attr(s, "swarm.recipient").as_deref() == Some(recipient)
        })
        .cloned()
}

fn two_roles(extra: &str) -> Project {
    Project::builder()
        .role("a")
        .role(Role::new("b").worktree("b"))
        .config(&format!(
            "wake: {{method: none}}\ndaemon: {{rescan: 300ms}}\n{extra}"
        ))
        .build()
}

#[test]
fn a_thread_is_one_trace_exported_live_and_from_history() {
    let collector = Collector::start();
    let p = two_roles(&format!("otel: {{endpoint: '{}'}}\n", collector.url));
    let _d = p.spawn_daemon(&[]);
    let root = p.send_as("a", "type: note\nto: b\npriority: 10\nmessage: build it\n");
    // The daemon may move a queued original to sent/ before it is read.
    let queued_header = |queued: &std::path::Path, h: &str| {
        let sent = queued
            .parent()
            .and_then(|d| d.parent())
            .map(|d| d.join("sent").join(queued.file_name().unwrap()));
        file_header(queued, h).or_else(|| sent.and_then(|s| file_header(&s, h)))
    };
    let root_path = root.queued();
    let root_id = queued_header(&root_path, "id").unwrap();
    let trace = queued_header(&root_path, "trace_id").expect("the root carries a trace id");
    assert_eq!(trace.len(), 32, "{trace}");
    wait_until(DEADLINE, "delivered to b", || {
        !p.files(&p.hq("b", "inbox/new")).is_empty()
    });
    p.run_in(".worktrees/b", Some("b"), "ready-next", &[]).ok();
    // A hand-on: sent while the root is in process at b, no in_reply_to named.
    let reply = p
        .send_as("b", "type: note\nto: a\npriority: 10\nmessage: built\n")
        .queued();
    let reply_id = queued_header(&reply, "id").unwrap();
    assert_eq!(
        queued_header(&reply, "trace_id"),
        Some(trace.clone()),
        "inherited"
    );
    p.run_in(".worktrees/b", Some("b"), "done-current", &[])
        .ok();
    // One turn of b on the root item, as a runner journals it: started
    // 90 s before it reported its usage.
    let ended = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let started = (chrono::DateTime::parse_from_rfc3339(&ended).unwrap()
        - chrono::Duration::seconds(90))
    .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let nanos = |t: &str| {
        chrono::DateTime::parse_from_rfc3339(t)
            .unwrap()
            .timestamp_nanos_opt()
            .unwrap() as u64
    };
    let usage = serde_json::json!({
        "time": ended,
        "started": started,
        "role": "b", "id": root_id, "thread": root_id, "model": "m", "source": "api",
        "input_tokens": 11, "output_tokens": 7, "cache_read_tokens": 0,
        "cache_write_tokens": 0, "cost_usd": null,
    });
    std::fs::create_dir_all(p.path(".swarmforge/telemetry")).unwrap();
    std::fs::write(
        p.path(".swarmforge/telemetry/usage.jsonl"),
        format!("{usage}\n"),
    )
    .unwrap();
    wait_until(DEADLINE, "reply delivered to a", || {
        !p.files(&p.hq("master", "inbox/new")).is_empty()
    });
    p.run(Some("a"), "ready-next", &[]).ok();
    p.run(Some("a"), "done-current", &[]).ok();

    wait_until(DEADLINE, "both copies and b's turn exported", || {
        let s = collector.spans();
        copy_span(&s, &root_id, "b").is_some()
            && copy_span(&s, &reply_id, "a").is_some()
            && s.iter().any(|x| x.name == "turn b")
    });
    let spans = collector.spans();
    assert!(collector
        .paths
        .lock()
        .unwrap()
        .iter()
        .all(|p| p == "/v1/traces"));
    let at_b = copy_span(&spans, &root_id, "b").unwrap();
    let at_a = copy_span(&spans, &reply_id, "a").unwrap();
    assert_eq!(hex(&at_b.trace_id), trace);
    assert_eq!(hex(&at_a.trace_id), trace, "one trace for the thread");
    assert!(
        at_b.parent_span_id.is_empty(),
        "the root's copy is the root span"
    );
    assert_eq!(
        at_a.parent_span_id, at_b.span_id,
        "the hand-on hangs under b's work"
    );
    assert!(at_b.end_time_unix_nano >= at_b.start_time_unix_nano);
    let stages: Vec<&str> = spans
        .iter()
        .filter(|s| s.parent_span_id == at_b.span_id && s.name != "turn b")
        .map(|s| s.name.as_str())
        .collect();
    for st in ["queued", "waiting", "working"] {
        assert!(stages.contains(&st), "{stages:?}");
    }
    let turn = spans.iter().find(|s| s.name == "turn b").unwrap();
    assert_eq!(turn.parent_span_id, at_b.span_id);
    assert_eq!(hex(&turn.trace_id), trace);
    assert_eq!(
        attr(turn, "gen_ai.usage.input_tokens").as_deref(),
        Some("11")
    );
    // The turn's span runs from its start to its end, not an instant.
    assert_eq!(
        (turn.start_time_unix_nano, turn.end_time_unix_nano),
        (nanos(&started), nanos(&ended)),
        "{turn:?}"
    );

    // History: the same spans again, to another collector.
    let again = Collector::start();
    let r = p.swarm(&[
        "otel",
        "export",
        "--since",
        "1d",
        "--endpoint",
        &again.url,
        "--json",
    ]);
    let n = r.ok().json()["spans"].as_u64().unwrap();
    let got = again.spans();
    assert_eq!(got.len() as u64, n);
    assert_eq!(
        copy_span(&got, &root_id, "b").unwrap().span_id,
        at_b.span_id
    );
    assert_eq!(
        copy_span(&got, &reply_id, "a").unwrap().span_id,
        at_a.span_id
    );
}

#[test]
fn a_collector_that_is_down_costs_a_journal_line_not_a_delivery() {
    // A collector that hangs up on every request (a port merely closed
    // could be taken by another test's listener meanwhile).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for c in l.incoming() {
            drop(c);
        }
    });
    let p = two_roles(&format!("otel: {{endpoint: '{dead}'}}\n"));
    let _d = p.spawn_daemon(&[]);
    p.send_as("a", "type: note\nto: b\npriority: 10\nmessage: one\n")
        .ok();
    wait_until(DEADLINE, "delivered to b", || {
        !p.files(&p.hq("b", "inbox/new")).is_empty()
    });
    p.run_in(".worktrees/b", Some("b"), "ready-next", &[]).ok();
    p.run_in(".worktrees/b", Some("b"), "done-current", &[])
        .ok();
    wait_until(DEADLINE, "traces_dropped in the journal", || {
        p.events().iter().any(|e| {
            e["kind"] == "traces_dropped"
                && e["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("dropped: cannot reach"))
        })
    });
    // Delivery goes on.
    p.send_as("a", "type: note\nto: b\npriority: 11\nmessage: two\n")
        .ok();
    wait_until(DEADLINE, "the next one delivered too", || {
        !p.files(&p.hq("b", "inbox/new")).is_empty()
    });
    // History export to the dead collector: exit 1 with a hint.
    let r = p.swarm(&["otel", "export"]);
    assert_eq!(r.code, 1, "{r:?}");
    r.stderr_has("is the collector running?");
    let r = p.swarm(&["otel", "export", "--endpoint", "ftp://x"]);
    assert_eq!(r.code, 1);
    r.stderr_has("otel.endpoint");
}
