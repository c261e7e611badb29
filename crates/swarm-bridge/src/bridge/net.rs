//! The network half of the bridge: one NATS connection, the swarm's stream,
//! a publisher for the proxy inboxes, a durable pull consumer for this
//! host's roles, and the event trail both ways. Every file step runs in
//! `spawn_blocking` through the synchronous modules.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, stream, AckKind};
use futures_util::StreamExt;

use super::control;
use super::control_receive;
use super::events::{self, Mirror};
use super::inbound::{self, Verdict};
use super::outbound;
use super::trail;
use super::vouch;
use super::{credentials, Credentials, Log, Settings};
use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::roles::Roles;

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

async fn main(s: Settings, creds: Credentials, log: Shared, stop: Arc<AtomicBool>) -> Result<()> {
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
    let client = opts.connect(servers.as_slice()).await.map_err(|e| {
        Error::process(format!(
            "cannot connect to the bridge {}: {e}\n  hint: is nats-server running with -js?",
            s.url
        ))
    })?;
    let js = jetstream::new(client);
    let s = Arc::new(s);
    let out = tokio::spawn(publish_loop(s.clone(), js.clone(), log.clone()));
    let inb = tokio::spawn(consume_loop(s.clone(), js.clone(), log.clone()));
    let evp = tokio::spawn(events_publish_loop(s.clone(), js.clone(), log.clone()));
    // The newest stream sequence the events mirror has settled: a trail
    // record published after it cites a line the mirror has seen by now.
    let seen = Arc::new(AtomicU64::new(0));
    let evm = tokio::spawn(events_mirror_loop(
        s.clone(),
        js.clone(),
        log.clone(),
        seen.clone(),
    ));
    let trp = tokio::spawn(trail_publish_loop(s.clone(), js.clone(), log.clone()));
    let trm = tokio::spawn(trail_mirror_loop(s.clone(), js.clone(), log.clone(), seen));
    let ctp = tokio::spawn(control_publish_loop(s.clone(), js.clone(), log.clone()));
    let ctm = tokio::spawn(control_apply_loop(s.clone(), js.clone(), log.clone()));
    let ctw = tokio::spawn(control_wait_loop(s.clone(), log.clone()));
    let tasks = [out, inb, evp, evm, trp, trm, ctp, ctm, ctw];
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

/// Proxy inboxes → JetStream. A copy leaves its proxy inbox only after its
/// PubAck; a commit reaches the git remote before its message is published.
async fn publish_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    let _ = stream(&s, &js, &log).await;
    let wake = Arc::new(tokio::sync::Notify::new());
    let _watcher = watch_proxies(&s, wake.clone());
    let mut pushed: std::collections::HashSet<String> = Default::default();
    loop {
        let batch = {
            let (s, log) = (s.clone(), log.clone());
            blocking(move || outbound::scan(&s, &log, WINDOW)).await
        };
        if batch.is_empty() {
            let _ = tokio::time::timeout(IDLE, wake.notified()).await;
            continue;
        }
        let mut inflight = Vec::new();
        let mut failed = false;
        for o in batch {
            let key = o.path.display().to_string();
            if o.commit.is_some() && !pushed.contains(&o.git_ref()) {
                let (s2, o2) = (s.clone(), o.clone());
                match blocking(move || outbound::push_commit(&s2, &o2)).await {
                    Ok(()) => {
                        pushed.insert(o.git_ref());
                    }
                    Err(why) => {
                        log.deferred(&key, &why.to_string());
                        failed = true;
                        continue;
                    }
                }
            }
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", o.msg_id.as_str());
            headers.insert("Swarm-Name", o.name.as_str());
            headers.insert("Swarm-From-Host", s.host.as_str());
            if let Some(a) = &o.approval {
                headers.insert("Swarm-Approval", a.as_str());
            }
            let subject = s.to_subject(&o.host, &o.role);
            let msg = jetstream::message::PublishMessage::build()
                .payload(bytes::Bytes::from(o.bytes.clone()))
                .headers(headers);
            match js.send_publish(subject, msg).await {
                Ok(ack) => inflight.push((o, key, ack)),
                Err(e) => {
                    log.deferred_once(
                        "bridge",
                        &format!("copies for remote roles wait in their proxy: cannot publish to {}: {e}", s.url),
                    );
                    failed = true;
                    break;
                }
            }
        }
        for (o, key, ack) in inflight {
            match tokio::time::timeout(ACK_TIMEOUT, ack).await {
                Ok(Ok(a)) => {
                    log.cleared(&key);
                    log.cleared("bridge");
                    let seq = a.sequence;
                    let dup = if a.duplicate { " duplicate" } else { "" };
                    let res = blocking(move || outbound::mark_sent(&o).map(|p| (o, p))).await;
                    match res {
                        Ok((o, p)) => log.line(
                            "published",
                            &format!(
                                "{} {} to {}@{} seq {seq}{dup}",
                                p.display(),
                                o.msg_id,
                                o.role,
                                o.host
                            ),
                        ),
                        Err(e) => {
                            log.deferred(
                                &key,
                                &format!("acknowledged but not moved to sent/: {e}"),
                            );
                            failed = true;
                        }
                    }
                }
                Ok(Err(e)) => {
                    log.deferred_once(
                        "bridge",
                        &format!("copies for remote roles wait in their proxy: not acknowledged by {}: {e}", s.url),
                    );
                    failed = true;
                }
                Err(_) => {
                    log.deferred_once(
                        "bridge",
                        &format!("copies for remote roles wait in their proxy: no acknowledgement from {} within {ACK_TIMEOUT:?}", s.url),
                    );
                    failed = true;
                }
            }
        }
        if failed {
            tokio::time::sleep(RETRY).await;
        }
    }
}

/// A watcher on every proxy inbox that wakes the publisher; None (timer
/// passes only) where inotify is unavailable.
fn watch_proxies(
    s: &Settings,
    wake: Arc<tokio::sync::Notify>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let roles = Roles::load(&s.project.roles_tsv()).ok()?;
    let mut w = notify::recommended_watcher(move |_res: notify::Result<notify::Event>| {
        wake.notify_one();
    })
    .ok()?;
    for (_, _, wt) in outbound::proxies(&roles) {
        let dir = wt.inbox_new();
        let _ = fsx::ensure_dirs(&[&dir]);
        let _ = w.watch(&dir, notify::RecursiveMode::NonRecursive);
    }
    Some(w)
}

/// JetStream → this host's inboxes, through one durable consumer per host;
/// a message is acked only once its copy is durable (or already held).
async fn consume_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    loop {
        let st = stream(&s, &js, &log).await;
        let durable = format!("to-{}", s.host);
        let cfg = pull::Config {
            durable_name: Some(durable.clone()),
            filter_subject: s.inbound_filter(),
            ack_policy: AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            max_deliver: -1,
            ..Default::default()
        };
        let consumer = match st
            .get_or_create_consumer::<pull::Config>(&durable, cfg)
            .await
        {
            Ok(c) => c,
            Err(e) => {
                log.deferred_once("consumer", &format!("{durable}: {e}"));
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let mut messages = match consumer.messages().await {
            Ok(m) => m,
            Err(e) => {
                log.deferred_once("consumer", &format!("{durable}: {e}"));
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        log.cleared("consumer");
        while let Some(m) = messages.next().await {
            let m = match m {
                Ok(m) => m,
                Err(e) => {
                    log.deferred_once("consumer", &format!("{durable}: {e}"));
                    break;
                }
            };
            let subject = m.subject.to_string();
            let header = |h: &str| {
                m.headers
                    .as_ref()
                    .and_then(|hs| hs.get(h))
                    .map(|v| v.as_str().to_string())
            };
            let (name, from_host) = (header("Swarm-Name"), header("Swarm-From-Host"));
            let approval = header("Swarm-Approval");
            let payload = m.payload.to_vec();
            let (s2, subj, nm) = (s.clone(), subject.clone(), name.clone());
            let verdict = blocking(move || match Roles::load(&s2.project.roles_tsv()) {
                Ok(roles) => inbound::accept(
                    &s2,
                    &roles,
                    &subj,
                    inbound::Sent {
                        from_host: from_host.as_deref(),
                        name: nm.as_deref(),
                        approval: approval.as_deref(),
                    },
                    &payload,
                ),
                Err(e) => Verdict::Wait(e.to_string()),
            })
            .await;
            let shown = name.unwrap_or_else(|| "?".into());
            let key = format!("received {shown}");
            let ack = match &verdict {
                Verdict::Spooled(p) => {
                    log.cleared(&key);
                    log.line("received", &format!("{} from {subject}", p.display()));
                    m.ack().await
                }
                Verdict::Held => {
                    log.cleared(&key);
                    log.line(
                        "duplicate",
                        &format!("{shown} from {subject} (already held)"),
                    );
                    m.ack().await
                }
                Verdict::Wait(why) => {
                    log.deferred(&key, why);
                    m.ack_with(AckKind::Nak(Some(Duration::from_secs(1)))).await
                }
                Verdict::Reject(why) => {
                    log.line("rejected", &format!("{shown} from {subject}: {why}"));
                    m.ack_with(AckKind::Term).await
                }
            };
            // A lost ack means a redelivery, which finds the copy held.
            if let Err(e) = ack {
                log.deferred_once("consumer", &format!("ack of {shown} not sent: {e}"));
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// This host's `events.jsonl` → the stream, from the offset saved after the
/// last acknowledged line.
async fn events_publish_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    let _ = stream(&s, &js, &log).await;
    let mut offset = {
        let s = s.clone();
        blocking(move || events::load_offset(&s.project)).await
    };
    loop {
        // Only what a power cut cannot take back: a line published and then
        // lost would let the next line reuse its offset (events.rs).
        let (durable, sync_err, end) = {
            let s2 = s.clone();
            blocking(move || {
                let (d, e) = events::durable_end(&s2.project, offset);
                (d, e, events::end_offset(&s2.project).ok())
            })
            .await
        };
        if let Some(e) = sync_err {
            log.deferred_once(
                "events-sync",
                &format!(
                    "cannot fsync {} ({e}): only the lines handoffd's progress mark vouches for are published",
                    s.project.events_file().display()
                ),
            );
        } else {
            log.cleared("events-sync");
        }
        if let Some(end) = end.filter(|&e| e < offset) {
            // Lines published before are gone from the journal (a power
            // cut took them before this version published only durable
            // lines, or the journal was replaced), and what was written
            // since may already reach back into them: publish again from
            // before the loss, where the other hosts' mirrors skip the
            // lines they hold and refuse the rewritten ones (events.rs).
            let s2 = s.clone();
            let from = blocking(move || events::rewind_point(&s2.project, end))
                .await
                .unwrap_or(0);
            log.line(
                "journal",
                &format!(
                    "{} ends at offset {end}, before offset {offset} already published: it lost published lines; publishing again from {from}",
                    s.project.events_file().display()
                ),
            );
            offset = from;
        }
        let (lines, next) = {
            let s2 = s.clone();
            match blocking(move || events::read_from(&s2.project, offset, durable, 256)).await {
                Ok(v) => v,
                Err(e) => {
                    log.deferred_once(
                        "events",
                        &format!("{}: {e}", s.project.events_file().display()),
                    );
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            }
        };
        if lines.is_empty() {
            if next != offset {
                offset = next;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            continue;
        }
        let mut acks = Vec::new();
        let mut ok = true;
        for l in &lines {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", l.msg_id(&s.host).as_str());
            h.insert("Swarm-Offset", l.offset.to_string().as_str());
            let msg = jetstream::message::PublishMessage::build()
                .payload(bytes::Bytes::from(l.text.clone().into_bytes()))
                .headers(h);
            match js.send_publish(s.events_subject(&s.host), msg).await {
                Ok(a) => acks.push(a),
                Err(_) => {
                    ok = false;
                    break;
                }
            }
        }
        for a in acks {
            if !matches!(tokio::time::timeout(ACK_TIMEOUT, a).await, Ok(Ok(_))) {
                ok = false;
            }
        }
        if ok {
            offset = next;
            let s2 = s.clone();
            if let Err(e) = blocking(move || events::save_offset(&s2.project, next)).await {
                log.deferred_once(
                    "events",
                    &format!("{}: {e}", s.project.bridge_events_offset().display()),
                );
            } else {
                log.cleared("events");
            }
        } else {
            log.deferred_once("events", &format!("event lines wait for {}", s.url));
            tokio::time::sleep(RETRY).await;
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

/// Every host's events → `.swarmforge/bridge/events/<host>.jsonl`.
async fn events_mirror_loop(
    s: Arc<Settings>,
    js: jetstream::Context,
    log: Shared,
    seen: Arc<AtomicU64>,
) {
    let mirror = Arc::new(Mutex::new(Mirror::default()));
    let prefix = format!("swarm.{}.events.", s.name());
    loop {
        let st = stream(&s, &js, &log).await;
        let durable = format!("events-{}", s.host);
        let Some(mut messages) =
            mirror_messages(&st, &durable, &prefix, &log, "events-consumer").await
        else {
            continue;
        };
        while let Some(Ok(m)) = messages.next().await {
            let host = publisher(&m, &prefix);
            let offset = m
                .headers
                .as_ref()
                .and_then(|h| h.get("Swarm-Offset"))
                .and_then(|v| v.as_str().parse::<u64>().ok());
            let text = String::from_utf8_lossy(&m.payload).into_owned();
            let valid =
                crate::protocol::grammar::valid_role(&host) && m.payload.len() <= events::MAX_LINE;
            let Some(offset) = offset.filter(|_| valid) else {
                log.line(
                    "rejected",
                    &format!("event on {} without a host or offset", m.subject),
                );
                let _ = m.ack_with(AckKind::Term).await;
                continue;
            };
            let (s2, mi) = (s.clone(), mirror.clone());
            let res = blocking(move || {
                mi.lock().unwrap_or_else(|e| e.into_inner()).apply(
                    &s2.project,
                    &host,
                    offset,
                    &text,
                )
            })
            .await;
            settle(&m, res, &log, "events-mirror", |e| {
                format!("event on {}: {e}", m.subject)
            })
            .await;
            if let Ok(i) = m.info() {
                seen.fetch_max(i.stream_sequence, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// This host's message files → the stream, each time one appears or moves.
async fn trail_publish_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    let _ = stream(&s, &js, &log).await;
    let subject = format!("swarm.{}.trail.{}", s.name(), s.host);
    let mut published: std::collections::HashSet<String> = Default::default();
    // The events offset at the start of the last complete pass, and the mark
    // published last (see `publish_mark`).
    let mut prev_start: Option<u64> = None;
    let mut marked: Option<u64> = None;
    // This host's journal as far as it is published: the lines records
    // cite (bridge::vouch).
    let own = Arc::new(Mutex::new(vouch::Own::default()));
    loop {
        let start = {
            let (s, own) = (s.clone(), own.clone());
            blocking(move || {
                let published = events::load_offset(&s.project);
                let mut own = own.lock().unwrap_or_else(|e| e.into_inner());
                own.catch_up(&s.project, published).ok().map(|()| published)
            })
            .await
        };
        let records = {
            let s = s.clone();
            blocking(move || trail::scan(&s.project)).await
        };
        let max = s.config.limits.max_file_bytes;
        let fresh: Vec<trail::Record> = records
            .into_iter()
            .filter(|r| r.len <= max && !published.contains(&r.msg_id(&s.host)))
            .collect();
        let mut ok = true;
        for chunk in fresh.chunks(WINDOW) {
            let mut acks = Vec::new();
            for r in chunk {
                let (p, rel, own) = (r.path.clone(), r.rel.clone(), own.clone());
                let read = blocking(move || {
                    let bytes = fsx::read_bounded(&p, max).ok()?;
                    let msg = crate::protocol::header::Message::parse_bytes(&bytes).ok()?;
                    let own = own.lock().unwrap_or_else(|e| e.into_inner());
                    Some((bytes, own.cite(&rel, &msg)?))
                })
                .await;
                // Moved on meanwhile (its new place is seen next pass), or
                // no line of the journal published so far vouches for it
                // (an outbox file, a move not journaled yet, a file an
                // agent put there): looked at again next pass.
                let Some((bytes, cited)) = read else {
                    continue;
                };
                let mut h = async_nats::HeaderMap::new();
                h.insert("Nats-Msg-Id", r.msg_id(&s.host).as_str());
                h.insert("Swarm-Worktree", r.worktree.as_str());
                h.insert("Swarm-Path", r.rel.as_str());
                h.insert(vouch::HEADER, cited.to_string().as_str());
                let msg = jetstream::message::PublishMessage::build()
                    .payload(bytes::Bytes::from(bytes))
                    .headers(h);
                match js.send_publish(subject.clone(), msg).await {
                    Ok(a) => acks.push((r.msg_id(&s.host), a)),
                    Err(_) => {
                        ok = false;
                        break;
                    }
                }
            }
            for (id, a) in acks {
                if matches!(tokio::time::timeout(ACK_TIMEOUT, a).await, Ok(Ok(_))) {
                    published.insert(id);
                } else {
                    ok = false;
                }
            }
            if !ok {
                break;
            }
        }
        if ok {
            if let Some(e) = prev_start.filter(|&e| marked.is_none_or(|m| e > m)) {
                if publish_mark(&js, &subject, &s.host, e).await {
                    marked = Some(e);
                }
            }
            prev_start = start;
        } else {
            prev_start = None;
        }
        if ok {
            log.cleared("trail");
        } else {
            log.deferred_once("trail", &format!("trail records wait for {}", s.url));
        }
        tokio::time::sleep(if ok {
            Duration::from_millis(500)
        } else {
            RETRY
        })
        .await;
    }
}

/// Publishes the trail mark `offset` after this host's records: every file
/// this host held before its events reached `offset` was published (and
/// acked) in the pass that started there or the one after it. Two passes,
/// because a file moving during a scan can be missed by that scan but not by
/// the next. The mirror then knows a file it lacks is not lag
/// (docs/transcript-and-audit.md, "Lag is not loss").
async fn publish_mark(js: &jetstream::Context, subject: &str, host: &str, offset: u64) -> bool {
    let mut h = async_nats::HeaderMap::new();
    h.insert("Nats-Msg-Id", format!("trmark:{host}:{offset}").as_str());
    h.insert("Swarm-Mark", offset.to_string().as_str());
    let msg = jetstream::message::PublishMessage::build()
        .payload(bytes::Bytes::new())
        .headers(h);
    match js.send_publish(subject.to_string(), msg).await {
        Ok(a) => matches!(tokio::time::timeout(ACK_TIMEOUT, a).await, Ok(Ok(_))),
        Err(_) => false,
    }
}

/// Every other host's message files → `.swarmforge/bridge/hosts/<host>/`.
async fn trail_mirror_loop(
    s: Arc<Settings>,
    js: jetstream::Context,
    log: Shared,
    seen: Arc<AtomicU64>,
) {
    let prefix = format!("swarm.{}.trail.", s.name());
    let mirrors = Arc::new(Mutex::new(vouch::Mirrors::default()));
    loop {
        let st = stream(&s, &js, &log).await;
        let durable = format!("trail-{}", s.host);
        let Some(mut messages) =
            mirror_messages(&st, &durable, &prefix, &log, "trail-consumer").await
        else {
            continue;
        };
        while let Some(Ok(m)) = messages.next().await {
            let host = publisher(&m, &prefix);
            if host == s.host {
                let _ = m.ack().await;
                continue;
            }
            let h = |k: &str| {
                m.headers
                    .as_ref()
                    .and_then(|h| h.get(k))
                    .map(|v| v.as_str().to_string())
                    .unwrap_or_default()
            };
            let mark = h("Swarm-Mark");
            if !mark.is_empty() {
                let s2 = s.clone();
                let h2 = host.clone();
                let res = match mark.parse::<u64>() {
                    Ok(o) => blocking(move || trail::apply_mark(&s2.project, &h2, o)).await,
                    Err(_) => Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "not an offset",
                    )),
                };
                settle(&m, res, &log, "trail-mirror", |e| {
                    format!("trail mark of {host}: {e}")
                })
                .await;
                continue;
            }
            let (wt, rel) = (h("Swarm-Worktree"), h("Swarm-Path"));
            let cited = h(vouch::HEADER).parse::<u64>().ok();
            let published = m.info().map_or(u64::MAX, |i| i.stream_sequence);
            let payload = m.payload.to_vec();
            let (s2, mi, seen) = (s.clone(), mirrors.clone(), seen.clone());
            let (h2, w2, r2) = (host.clone(), wt.clone(), rel.clone());
            let res = blocking(move || {
                // The events mirror settled something published after this
                // record: the line it cites, published before it, is there
                // by now or never comes.
                let overtaken = seen.load(Ordering::Relaxed) > published;
                let mut mi = mi.lock().unwrap_or_else(|e| e.into_inner());
                let record = trail::Received {
                    host: &h2,
                    worktree: &w2,
                    rel: &r2,
                    bytes: &payload,
                    cited,
                };
                trail::apply_vouched(&s2.project, &s2.config, &mut mi, &record, overtaken)
            })
            .await;
            settle(&m, res, &log, "trail-mirror", |e| {
                format!("trail record {host}:{wt}:{rel}: {e}")
            })
            .await;
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// This host's control records → the stream, oldest first, one at a time:
/// a record leaves the control outbox only after its PubAck, and the next
/// is published only then, so one host's records keep their order.
async fn control_publish_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    let _ = stream(&s, &js, &log).await;
    let subject = s.control_subject(&s.host);
    loop {
        let waiting = {
            let s = s.clone();
            blocking(move || control::waiting(&s.project)).await
        };
        let mut ok = true;
        for (path, r) in waiting {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("ctl:{}", r.id).as_str());
            let bytes = serde_json::to_vec(&r).unwrap_or_default();
            let msg = jetstream::message::PublishMessage::build()
                .payload(bytes::Bytes::from(bytes))
                .headers(h);
            let acked = match js.send_publish(subject.clone(), msg).await {
                Ok(a) => matches!(tokio::time::timeout(ACK_TIMEOUT, a).await, Ok(Ok(_))),
                Err(_) => false,
            };
            if !acked {
                ok = false;
                break;
            }
            let (p2, id) = (path.clone(), r.id.clone());
            match blocking(move || control::mark_sent(&p2)).await {
                Ok(()) => log.line("published", &format!("control {id}")),
                Err(e) => {
                    log.deferred(&path.display().to_string(), &e.to_string());
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            log.cleared("control");
        } else {
            log.deferred_once("control", &format!("control records wait for {}", s.url));
        }
        tokio::time::sleep(if ok { IDLE } else { RETRY }).await;
    }
}

/// Every host's control records → applied here in the stream's order (one
/// out at a time, see `mirror_messages`).
async fn control_apply_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    let prefix = format!("swarm.{}.control.", s.name());
    loop {
        let st = stream(&s, &js, &log).await;
        let durable = format!("control-{}", s.host);
        let Some(mut messages) =
            mirror_messages(&st, &durable, &prefix, &log, "control-consumer").await
        else {
            continue;
        };
        while let Some(Ok(m)) = messages.next().await {
            let from = publisher(&m, &prefix);
            let payload = m.payload.to_vec();
            let (s2, f2) = (s.clone(), from.clone());
            let outcome = blocking(move || control_receive::receive(&s2, &f2, &payload)).await;
            let ack = match outcome {
                control_receive::Outcome::Applied => {
                    log.line("control", &format!("applied a record from {from}"));
                    m.ack().await
                }
                control_receive::Outcome::Again => m.ack().await,
                control_receive::Outcome::Refused(why) => {
                    log.line(
                        "rejected",
                        &format!("control record on {}: {why}", m.subject),
                    );
                    m.ack_with(AckKind::Term).await
                }
                control_receive::Outcome::Wait(why) => {
                    log.deferred_once("control-apply", &why);
                    m.ack_with(AckKind::Nak(Some(RETRY))).await
                }
            };
            if let Err(e) = ack {
                log.deferred_once("control-consumer", &format!("ack not sent: {e}"));
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Control records waiting here for what they act on (`control_wait`):
/// applied as soon as they need not wait any longer.
async fn control_wait_loop(s: Arc<Settings>, log: Shared) {
    loop {
        let s2 = s.clone();
        let applied = blocking(move || super::control_wait::retry(&s2.project)).await;
        if applied > 0 {
            log.line("control", &format!("applied {applied} waiting record(s)"));
        }
        tokio::time::sleep(IDLE).await;
    }
}
