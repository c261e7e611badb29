//! The network half of the bridge: one NATS connection, the swarm's stream,
//! a publisher for the proxy inboxes, a durable pull consumer for this
//! host's roles, and the event trail both ways. Every file step runs in
//! `spawn_blocking` through the synchronous modules.
//!
//! One task per flow, each in the module of what it carries: the handoffs
//! themselves (`mail`), the event journal (`events_stream`), the message
//! files of the trail (`trail_stream`) and a person's control records
//! (`control_stream`). Here: the connection, the stream, and what every
//! flow shares: a publish that waits for its PubAck, and the mirror
//! consumers that ack a message by how its file step went. The invariant
//! kept everywhere: a message is acked only once its file step is durable
//! (or refused for good), and a file leaves its outbox only after its PubAck.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, stream, AckKind};

use super::{credentials, Credentials, Log, Settings};
use crate::error::{Error, Result};
use crate::fsx;

mod control_stream;
mod events_stream;
mod mail;
mod trail_stream;

/// How long a publish may wait for its PubAck before it counts as failed.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// How long JetStream waits for our ack before it redelivers.
const ACK_WAIT: Duration = Duration::from_secs(10);
/// Idle pause of the proxy publisher between passes; a file event in a
/// proxy inbox wakes it at once (events are hints, the pass is the truth).
const IDLE: Duration = Duration::from_millis(250);
/// Pause after a failure before trying again.
const RETRY: Duration = Duration::from_millis(300);
/// Copies published before their acks are awaited.
const WINDOW: usize = 64;

type Shared = Arc<Log>;

/// Runs the bridge of this host until `stop` is set. Single instance: the
/// flock on `.swarmforge/bridge/bridge.pid` is held for the whole run.
pub fn run(s: Settings, stop: Arc<AtomicBool>) -> Result<()> {
    let dir = s.project.bridge_dir();
    fsx::ensure_dirs(&[&dir, &s.project.bridge_tmp()]).map_err(|e| Error::io(&dir, e))?;
    let pid_file = s.project.bridge_pid();
    let lock = match fsx::try_lock(&pid_file).map_err(|e| Error::io(&pid_file, e))? {
        Some(l) => l,
        None => {
            let holder = fsx::lock_holder(&pid_file)
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default();
            return Err(Error::conflict(format!(
                "a bridge already runs for {}{holder}\n  hint: one bridge per checkout; `swarm down` stops it",
                s.project.root.display()
            )));
        }
    };
    fsx::rewrite_locked(&lock, format!("{}\n", std::process::id()).as_bytes())
        .map_err(|e| Error::io(&pid_file, e))?;
    let creds = credentials(&s)?;
    let log: Shared = Arc::new(Log::new(&s.project));
    log.line(
        "started",
        &format!(
            "host {} bridge {} pid {}",
            s.host,
            s.url,
            std::process::id()
        ),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::internal(format!("cannot start the bridge's runtime: {e}")))?;
    let result = rt.block_on(main(s, creds, log.clone(), stop));
    rt.shutdown_timeout(Duration::from_secs(2));
    log.line("stopped", &format!("pid {}", std::process::id()));
    drop(lock);
    result
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Connects, starts one task per flow, and runs until `stop` is set or a
/// task ends (each loops for ever; one that ends has failed).
async fn main(s: Settings, creds: Credentials, log: Shared, stop: Arc<AtomicBool>) -> Result<()> {
    let js = jetstream::new(connect(&s, creds, &log).await?);
    let s = Arc::new(s);
    let (j, l) = (|| js.clone(), || log.clone());
    // The newest stream sequence the events mirror has settled: a trail
    // record published after it cites a line the mirror has seen by now.
    let seen = Arc::new(AtomicU64::new(0));
    let tasks = [
        tokio::spawn(mail::publish_loop(s.clone(), j(), l())),
        tokio::spawn(mail::consume_loop(s.clone(), j(), l())),
        tokio::spawn(events_stream::publish_loop(s.clone(), j(), l())),
        tokio::spawn(events_stream::mirror_loop(
            s.clone(),
            j(),
            l(),
            seen.clone(),
        )),
        tokio::spawn(trail_stream::publish_loop(s.clone(), j(), l())),
        tokio::spawn(trail_stream::mirror_loop(s.clone(), j(), l(), seen)),
        tokio::spawn(control_stream::publish_loop(s.clone(), j(), l())),
        tokio::spawn(control_stream::apply_loop(s.clone(), j(), l())),
        tokio::spawn(control_stream::wait_loop(s.clone(), l())),
    ];
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if tasks.iter().any(|t| t.is_finished()) {
            break;
        }
    }
    for t in tasks {
        t.abort();
    }
    Ok(())
}

/// The NATS connection, with this host's credentials; it reconnects by
/// itself (fast, and to any server of `s.servers()`) for the whole run.
async fn connect(s: &Settings, creds: Credentials, log: &Shared) -> Result<async_nats::Client> {
    let ev_log = log.clone();
    let mut opts = async_nats::ConnectOptions::new()
        .name(format!("swarm-bridge {}", s.host))
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connection_timeout(Duration::from_secs(2))
        .request_timeout(Some(ACK_TIMEOUT))
        // A server cut off by a partition sends no reset: the connection
        // looks alive until pings go unanswered. Ping often, so the client
        // moves to a server it can reach within seconds, not minutes
        // (docs/bridge.md, "Partitions, tested").
        .ping_interval(Duration::from_secs(3))
        // The server coming back should be noticed within half a second.
        .reconnect_delay_callback(|n| Duration::from_millis((50 * n as u64).min(500)))
        .event_callback(move |ev| {
            let log = ev_log.clone();
            async move { log.event(&ev.to_string()) }
        });
    match creds {
        Credentials::None => {}
        Credentials::Token(t) => opts = opts.token(t),
        Credentials::CredsFile(p) => {
            opts = opts.credentials_file(&p).await.map_err(|e| {
                Error::bad_file(&p, format!("not a usable NATS credentials file: {e}"))
            })?
        }
    }
    let servers: Vec<&str> = s.servers();
    opts.connect(servers.as_slice()).await.map_err(|e| {
        Error::process(format!(
            "cannot connect to the bridge {}: {e}\n  hint: is nats-server running with -js?",
            s.url
        ))
    })
}

/// The swarm's stream, created when missing; retried until the server
/// answers (logged `deferred` once).
async fn stream(s: &Settings, js: &jetstream::Context, log: &Log) -> stream::Stream {
    loop {
        let cfg = stream::Config {
            name: s.stream(),
            subjects: vec![format!("swarm.{}.>", s.name())],
            storage: stream::StorageType::File,
            duplicate_window: Duration::from_secs(120),
            num_replicas: s.replicas(),
            ..Default::default()
        };
        match js.get_or_create_stream(cfg).await {
            Ok(st) => {
                log.cleared("bridge");
                return st;
            }
            Err(e) => {
                log.deferred_once("bridge", &format!("{} unreachable: {e}", s.url));
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// The messages of this host's mirror consumer `<kind>-<host>` on
/// `<prefix>>`, asked for again (the stream first) until the server has it.
async fn mirror_consumer(
    s: &Settings,
    js: &jetstream::Context,
    log: &Log,
    kind: &str,
    prefix: &str,
) -> pull::Stream {
    let key = format!("{kind}-consumer");
    loop {
        let st = stream(s, js, log).await;
        let durable = format!("{kind}-{}", s.host);
        if let Some(m) = mirror_messages(&st, &durable, prefix, log, &key).await {
            return m;
        }
    }
}

/// The messages of the mirror consumer `durable` on `<prefix>>`, or `None`
/// after a pause when the server is not ready (the caller asks again).
async fn mirror_messages(
    st: &stream::Stream,
    durable: &str,
    prefix: &str,
    log: &Log,
    key: &str,
) -> Option<pull::Stream> {
    let cfg = pull::Config {
        durable_name: Some(durable.to_string()),
        filter_subject: format!("{prefix}>"),
        ack_policy: AckPolicy::Explicit,
        ack_wait: ACK_WAIT,
        max_deliver: -1,
        // One message out at a time: a record whose ack was lost (a
        // partition, a paused bridge) is redelivered before anything after
        // it, so a trail mark never overtakes the files it vouches for.
        max_ack_pending: 1,
        ..Default::default()
    };
    let messages = match st
        .get_or_create_consumer::<pull::Config>(durable, cfg)
        .await
    {
        Ok(c) => c.messages().await,
        Err(e) => {
            log.deferred_once(key, &format!("{durable}: {e}"));
            tokio::time::sleep(RETRY).await;
            return None;
        }
    };
    let Ok(messages) = messages else {
        tokio::time::sleep(RETRY).await;
        return None;
    };
    log.cleared(key);
    Some(messages)
}

/// The host a message of `<prefix><host>` came from (empty: none).
fn publisher(m: &jetstream::Message, prefix: &str) -> String {
    m.subject.strip_prefix(prefix).unwrap_or("").to_string()
}

/// Acks a mirrored message by how its file step went: applied, refused for
/// good (bad data is never redelivered), or to be redelivered after a pause.
async fn settle<T>(
    m: &jetstream::Message,
    res: std::io::Result<T>,
    log: &Log,
    key: &str,
    rejected: impl FnOnce(&std::io::Error) -> String,
) {
    match res {
        Ok(_) => {
            let _ = m.ack().await;
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            log.line("rejected", &rejected(&e));
            let _ = m.ack_with(AckKind::Term).await;
        }
        Err(e) => {
            log.deferred_once(key, &e.to_string());
            let _ = m.ack_with(AckKind::Nak(Some(RETRY))).await;
        }
    }
}

/// Publishes `payload` with `headers` on `subject` and waits (at most
/// [`ACK_TIMEOUT`]) for its PubAck: true when the stream has it.
async fn publish_acked(
    js: &jetstream::Context,
    subject: String,
    headers: async_nats::HeaderMap,
    payload: bytes::Bytes,
) -> bool {
    let msg = jetstream::message::PublishMessage::build()
        .payload(payload)
        .headers(headers);
    match js.send_publish(subject, msg).await {
        Ok(a) => matches!(tokio::time::timeout(ACK_TIMEOUT, a).await, Ok(Ok(_))),
        Err(_) => false,
    }
}
