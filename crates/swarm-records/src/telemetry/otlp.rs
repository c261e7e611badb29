//! OTLP over HTTP (docs/cost.md, "Traces"): spans encoded with the
//! OpenTelemetry project's own protobuf types (opentelemetry-proto) and
//! POSTed to `<otel.endpoint>/v1/traces`.
//!
//! In the daemon, export never touches the delivery path: a poller thread
//! reads the files every few seconds and hands batches to a sender thread
//! through a bounded queue. A full queue or a collector that is down drops
//! the batch and says so through the note the daemon gives it (the
//! journal's `traces_dropped`, at most once a minute while it lasts; this
//! module writes no journal itself, so telemetry does not depend on the
//! daemon); `swarm otel export --since T` sends history again whenever
//! wanted.

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, ResourceSpans, ScopeSpans};
use prost::Message as _;

use crate::error::{Error, Result};
use crate::protocol::clock::{self, Instant};
use crate::protocol::header::Message;
use crate::protocol::layout::Project;
use crate::protocol::trail::{Completions, Scope, Trail};
use crate::telemetry::trace::{self, Span, Value};
use crate::telemetry::usage;

/// Spans per request.
pub const BATCH: usize = 512;
/// Batches waiting for the sender before new ones are dropped.
const QUEUE: usize = 16;
/// How often the daemon looks for finished copies and new turns.
const POLL: Duration = Duration::from_secs(2);
/// Recent items kept for the trace of a turn on one.
const ITEMS: usize = 4096;
/// One POST may take this long.
const TIMEOUT: Duration = Duration::from_secs(5);

/// `<endpoint>/v1/traces` (an endpoint already naming it is kept).
pub fn traces_url(endpoint: &str) -> String {
    let e = endpoint.trim_end_matches('/');
    if e.ends_with("/v1/traces") {
        e.to_string()
    } else {
        format!("{e}/v1/traces")
    }
}

fn nanos(t: Instant) -> u64 {
    t.timestamp_nanos_opt()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

fn kv(key: &str, v: &Value) -> KeyValue {
    let value = match v {
        Value::Str(s) => any_value::Value::StringValue(s.clone()),
        Value::Int(i) => any_value::Value::IntValue(*i),
        Value::Float(f) => any_value::Value::DoubleValue(*f),
    };
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

/// One ExportTraceServiceRequest holding `spans`, from service
/// `swarm-handoff` of the project at `root`.
pub fn encode(root: &str, spans: &[Span]) -> Vec<u8> {
    let spans = spans
        .iter()
        .map(|s| opentelemetry_proto::tonic::trace::v1::Span {
            trace_id: s.trace_id.to_vec(),
            span_id: s.span_id.to_vec(),
            parent_span_id: s.parent.map(|p| p.to_vec()).unwrap_or_default(),
            name: s.name.clone(),
            kind: SpanKind::Internal as i32,
            start_time_unix_nano: nanos(s.start),
            end_time_unix_nano: nanos(s.end),
            attributes: s.attributes.iter().map(|(k, v)| kv(k, v)).collect(),
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    kv("service.name", &Value::Str("swarm-handoff".into())),
                    kv("swarm.project", &Value::Str(root.to_string())),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "swarm-handoff".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// POSTs one encoded request; Err says why (never with a body: a
/// collector's answer is not echoed).
pub fn post(url: &str, body: Vec<u8>) -> std::result::Result<(), NotSent> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent("swarm-handoff otel")
        .build()
        .into();
    match agent
        .post(url)
        .header("Content-Type", "application/x-protobuf")
        .send(&body[..])
    {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => Err(NotSent::Status {
            url: url.to_string(),
            status: r.status().as_u16(),
        }),
        Err(e) => Err(NotSent::Unreachable {
            url: url.to_string(),
            why: e.to_string(),
        }),
    }
}

/// Why a batch of spans did not reach the collector at `url` (the caller
/// adds where it is configured).
#[derive(Debug, thiserror::Error)]
pub enum NotSent {
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("cannot reach {url}: {}", crate::text::escape(why))]
    Unreachable { url: String, why: String },
}

/// The spans of everything at or after `since`: copies created then or
/// later, turns ended then or later.
pub fn history(project: &Project, since: Option<Instant>) -> Result<Vec<Span>> {
    let t = Trail::load(project, &Scope::all())?;
    let (records, _) = usage::read(project)?;
    let after = |s: Option<Instant>| since.is_none_or(|since| s.is_some_and(|s| s >= since));
    Ok(trace::spans(
        &t,
        |c| after(c.created.at().or(c.enqueued.at())),
        &records,
        |u| after(clock::parse(&u.time)),
    ))
}

/// `swarm otel export`: sends history in batches; the number of spans sent.
pub fn export(project: &Project, endpoint: &str, since: Option<Instant>) -> Result<usize> {
    let spans = history(project, since)?;
    let url = traces_url(endpoint);
    let root = project.root.display().to_string();
    for chunk in spans.chunks(BATCH) {
        post(&url, encode(&root, chunk)).map_err(|e| {
            Error::process(format!(
                "{e}\n  hint: is the collector running? (otel.endpoint in {})",
                project.config_file().display()
            ))
        })?;
    }
    Ok(spans.len())
}

/// Where the exporter says that spans were dropped (one line: how many,
/// where to, why).
pub type DropNote = Arc<dyn Fn(String) + Send + Sync>;

/// The daemon's exporter: started when `otel.endpoint` is set; its threads
/// end with the process.
pub struct Exporter;

impl Exporter {
    pub fn start(project: &Project, endpoint: &str, note: DropNote) {
        let (tx, rx) = sync_channel::<(usize, Vec<u8>)>(QUEUE);
        let url = traces_url(endpoint);
        let n = Arc::clone(&note);
        let u = url.clone();
        let _ = std::thread::Builder::new()
            .name("otel-send".into())
            .spawn(move || send_loop(&u, rx, &n));
        let project = project.clone();
        // Where following starts: now, before the thread runs.
        let from = (
            Completions::start(&project),
            usage::with_all(&project, |r, _| r.len()).unwrap_or(0),
        );
        let _ = std::thread::Builder::new()
            .name("otel-poll".into())
            .spawn(move || poll_loop(&project, &url, from, tx, &note));
    }
}

/// Says `traces_dropped` at most once a minute.
struct Dropped {
    last: Option<std::time::Instant>,
    spans: usize,
}

impl Dropped {
    fn note(&mut self, note: &DropNote, url: &str, spans: usize, why: &str) {
        self.spans += spans;
        if self
            .last
            .is_some_and(|l| l.elapsed() < Duration::from_secs(60))
        {
            return;
        }
        note(format!("{} spans for {url} dropped: {why}", self.spans));
        self.last = Some(std::time::Instant::now());
        self.spans = 0;
    }
}

fn send_loop(url: &str, rx: Receiver<(usize, Vec<u8>)>, note: &DropNote) {
    let mut dropped = Dropped {
        last: None,
        spans: 0,
    };
    for (n, body) in rx {
        if let Err(why) = post(url, body) {
            dropped.note(note, url, n, &why.to_string());
        }
    }
}

fn poll_loop(
    project: &Project,
    url: &str,
    (mut completions, mut seen_turns): (Completions, usize),
    tx: SyncSender<(usize, Vec<u8>)>,
    note: &DropNote,
) {
    let root = project.root.display().to_string();
    let mut dropped = Dropped {
        last: None,
        spans: 0,
    };
    // What this daemon exports: copies completed after it started (the
    // completed folders are followed: only a changed folder is listed and
    // only a new file read, protocol::trail::Completions) and the turns
    // journaled after it started (usage::with_all reads only what was
    // appended since the last look). History is `swarm otel export`'s.
    // The items of recent copies, for the trace of a turn on one.
    let mut items: VecDeque<(String, Message)> = VecDeque::new();
    loop {
        std::thread::sleep(POLL);
        let Ok(copies) = completions.look(project) else {
            continue;
        };
        let Ok((records, all)) = usage::with_all(project, |r, _| {
            (r[seen_turns.min(r.len())..].to_vec(), r.len())
        }) else {
            continue;
        };
        seen_turns = all;
        let mut spans = Vec::new();
        for (c, msg) in copies {
            trace::copy_spans(&c, Some(&msg), &mut spans);
            if let Some(id) = c.id {
                items.push_back((id, msg));
                if items.len() > ITEMS {
                    items.pop_front();
                }
            }
        }
        for u in &records {
            let msg =
                u.id.as_deref()
                    .and_then(|i| items.iter().rev().find(|(id, _)| id == i))
                    .map(|(_, m)| m);
            spans.extend(trace::turn_span(u, msg));
        }
        for chunk in spans.chunks(BATCH) {
            match tx.try_send((chunk.len(), encode(&root, chunk))) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    dropped.note(note, url, chunk.len(), "the export queue is full")
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
    }
}
