//! The handoffs themselves, both ways: proxy inboxes → JetStream, and
//! JetStream → this host's inboxes through one durable consumer per host.
//! The invariants: a copy leaves its proxy inbox only after its PubAck, a
//! commit reaches the git remote before its message is published, and a
//! received message is acked only once its copy is durable (or already
//! held).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;
use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, context::PublishAckFuture};
use futures_util::StreamExt;

use super::{blocking, stream, Shared, ACK_TIMEOUT, ACK_WAIT, IDLE, RETRY, WINDOW};
use crate::bridge::inbound::{self, Verdict};
use crate::bridge::outbound::{self, Outgoing};
use crate::bridge::{Log, Settings};
use crate::fsx;
use crate::protocol::roles::Roles;

/// A copy published, its PubAck not awaited yet (with its log key).
type InFlight = (Outgoing, String, PublishAckFuture);

/// Proxy inboxes → JetStream. A copy leaves its proxy inbox only after its
/// PubAck; a commit reaches the git remote before its message is published.
pub(super) async fn publish_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    let _ = stream(&s, &js, &log).await;
    let wake = Arc::new(tokio::sync::Notify::new());
    let _watcher = watch_proxies(&s, wake.clone());
    let mut pushed: HashSet<String> = Default::default();
    loop {
        let batch = {
            let (s, log) = (s.clone(), log.clone());
            blocking(move || outbound::scan(&s, &log, WINDOW)).await
        };
        if batch.is_empty() {
            let _ = tokio::time::timeout(IDLE, wake.notified()).await;
            continue;
        }
        let (inflight, sent_all) = send_copies(&s, &js, &log, batch, &mut pushed).await;
        let settled_all = settle_copies(&s, &log, inflight).await;
        if !(sent_all && settled_all) {
            tokio::time::sleep(RETRY).await;
        }
    }
}

/// Publishes each copy of `batch` without waiting for its PubAck, its
/// commit pushed first (once per run and message). False with them when
/// one could not be sent: a copy whose commit did not reach the remote is
/// left for the next pass, and the first refused publish ends the batch.
async fn send_copies(
    s: &Arc<Settings>,
    js: &jetstream::Context,
    log: &Log,
    batch: Vec<Outgoing>,
    pushed: &mut HashSet<String>,
) -> (Vec<InFlight>, bool) {
    let mut inflight = Vec::new();
    let mut ok = true;
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
                    ok = false;
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
                    &format!(
                        "copies for remote roles wait in their proxy: cannot publish to {}: {e}",
                        s.url
                    ),
                );
                ok = false;
                break;
            }
        }
    }
    (inflight, ok)
}

/// Awaits each copy's PubAck and moves the acknowledged ones to their
/// proxy's `sent/`; false when one was not acknowledged or not moved (it
/// is published again, and JetStream drops the duplicate).
async fn settle_copies(s: &Settings, log: &Log, inflight: Vec<InFlight>) -> bool {
    let mut ok = true;
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
                        log.deferred(&key, &format!("acknowledged but not moved to sent/: {e}"));
                        ok = false;
                    }
                }
            }
            Ok(Err(e)) => {
                log.deferred_once(
                    "bridge",
                    &format!(
                        "copies for remote roles wait in their proxy: not acknowledged by {}: {e}",
                        s.url
                    ),
                );
                ok = false;
            }
            Err(_) => {
                log.deferred_once(
                    "bridge",
                    &format!("copies for remote roles wait in their proxy: no acknowledgement from {} within {ACK_TIMEOUT:?}", s.url),
                );
                ok = false;
            }
        }
    }
    ok
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
pub(super) async fn consume_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    loop {
        let durable = format!("to-{}", s.host);
        let Some(mut messages) = inbound_messages(&s, &js, &log, &durable).await else {
            continue;
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
            receive(&s, &log, &m).await;
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// The messages of this host's durable consumer `durable`, or `None` after
/// a pause when the server is not ready (the caller asks again).
async fn inbound_messages(
    s: &Settings,
    js: &jetstream::Context,
    log: &Log,
    durable: &str,
) -> Option<pull::Stream> {
    let st = stream(s, js, log).await;
    let cfg = pull::Config {
        durable_name: Some(durable.to_string()),
        filter_subject: s.inbound_filter(),
        ack_policy: AckPolicy::Explicit,
        ack_wait: ACK_WAIT,
        max_deliver: -1,
        ..Default::default()
    };
    let messages = match st
        .get_or_create_consumer::<pull::Config>(durable, cfg)
        .await
    {
        Ok(c) => c.messages().await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match messages {
        Ok(m) => Some(m),
        Err(e) => {
            log.deferred_once("consumer", &format!("{durable}: {e}"));
            tokio::time::sleep(RETRY).await;
            None
        }
    }
}

/// One message for a role of this host: spooled for the daemon (or found
/// held already) and acked, refused for good, or put back for later.
async fn receive(s: &Arc<Settings>, log: &Log, m: &jetstream::Message) {
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
