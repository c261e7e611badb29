//! The event journal both ways: this host's `events.jsonl` → the stream,
//! from the offset saved after the last acknowledged line, and every
//! host's lines → `.swarmforge/bridge/events/<host>.jsonl`. The
//! invariants: only lines a power cut cannot take back are published (a
//! line published and then lost would let the next line reuse its offset,
//! bridge::events), the offset moves only past acknowledged lines, and a
//! journal found shorter than what was published is published again from
//! before the loss.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use futures_util::StreamExt;

use super::{blocking, mirror_consumer, publisher, settle, stream, Shared, ACK_TIMEOUT, RETRY};
use crate::bridge::events::{self, Mirror};
use crate::bridge::{Log, Settings};

/// This host's `events.jsonl` → the stream, from the offset saved after the
/// last acknowledged line.
pub(super) async fn publish_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    let _ = stream(&s, &js, &log).await;
    let (mut offset, lost) = {
        let s = s.clone();
        blocking(move || {
            let (offset, tail) = events::load_published(&s.project);
            let lost = events::lost_since_published(&s.project, offset, tail.as_deref());
            (offset, lost)
        })
        .await
    };
    // Shorter than what was published, or written again past the old end
    // before this start (the length alone cannot tell that, see
    // events::tail_fingerprint): told before anything is read, so a
    // daemon appending meanwhile cannot hide the loss.
    if let Some((why, end)) = lost {
        offset = rewind(&s, &log, why, end).await;
    }
    loop {
        let (durable, end) = durable_end(&s, &log, offset).await;
        if let Some(end) = end.filter(|&e| e < offset) {
            let why = events::shorter_than_published(end, offset);
            offset = rewind(&s, &log, why, end).await;
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
        if publish_lines(&s, &js, &lines).await {
            offset = next;
            save_offset(&s, &log, next).await;
        } else {
            log.deferred_once("events", &format!("event lines wait for {}", s.url));
            tokio::time::sleep(RETRY).await;
        }
    }
}

/// How far the journal is durable from `offset` (logged once when it
/// cannot be fsynced: then only what handoffd's progress mark vouches for
/// counts), and where the journal ends now.
async fn durable_end(s: &Arc<Settings>, log: &Log, offset: u64) -> (u64, Option<u64>) {
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
    (durable, end)
}

/// Where to publish from when the journal lost lines already published
/// before `end` (`why`: how that was seen): a power cut took them before
/// this version published only durable lines, or the journal was replaced,
/// and what was written since may already reach back into them. So
/// publish again from before the loss, where the other hosts' mirrors skip
/// the lines they hold and refuse the rewritten ones (bridge::events).
async fn rewind(s: &Arc<Settings>, log: &Log, why: String, end: u64) -> u64 {
    let s2 = s.clone();
    let from = blocking(move || events::rewind_point(&s2.project, end))
        .await
        .unwrap_or(0);
    log.line(
        "journal",
        &format!(
            "{} {why}: it lost published lines; publishing again from {from}",
            s.project.events_file().display()
        ),
    );
    from
}

/// Publishes `lines` and waits for every PubAck: true when all of them are
/// in the stream.
async fn publish_lines(s: &Settings, js: &jetstream::Context, lines: &[events::Line]) -> bool {
    let mut acks = Vec::new();
    let mut ok = true;
    for l in lines {
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
    ok
}

/// Saves the offset after the lines acknowledged last.
async fn save_offset(s: &Arc<Settings>, log: &Log, next: u64) {
    let s2 = s.clone();
    if let Err(e) = blocking(move || events::save_offset(&s2.project, next)).await {
        log.deferred_once(
            "events",
            &format!("{}: {e}", s.project.bridge_events_offset().display()),
        );
    } else {
        log.cleared("events");
    }
}

/// Every host's events → `.swarmforge/bridge/events/<host>.jsonl`.
pub(super) async fn mirror_loop(
    s: Arc<Settings>,
    js: jetstream::Context,
    log: Shared,
    seen: Arc<AtomicU64>,
) {
    let mirror = Arc::new(Mutex::new(Mirror::default()));
    let prefix = format!("swarm.{}.events.", s.name());
    loop {
        let mut messages = mirror_consumer(&s, &js, &log, "events", &prefix).await;
        while let Some(Ok(m)) = messages.next().await {
            mirror_line(&s, &log, &mirror, &prefix, &m).await;
            if let Ok(i) = m.info() {
                seen.fetch_max(i.stream_sequence, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// One host's event line, appended to its mirror at the offset it names
/// (a message without a valid host or offset is refused for good).
async fn mirror_line(
    s: &Arc<Settings>,
    log: &Log,
    mirror: &Arc<Mutex<Mirror>>,
    prefix: &str,
    m: &jetstream::Message,
) {
    let host = publisher(m, prefix);
    let offset = m
        .headers
        .as_ref()
        .and_then(|h| h.get("Swarm-Offset"))
        .and_then(|v| v.as_str().parse::<u64>().ok());
    let text = String::from_utf8_lossy(&m.payload).into_owned();
    let valid = crate::protocol::grammar::valid_role(&host) && m.payload.len() <= events::MAX_LINE;
    let Some(offset) = offset.filter(|_| valid) else {
        log.line(
            "rejected",
            &format!("event on {} without a host or offset", m.subject),
        );
        let _ = m.ack_with(AckKind::Term).await;
        return;
    };
    let (s2, mi) = (s.clone(), mirror.clone());
    let res = blocking(move || {
        mi.lock()
            .unwrap_or_else(|e| e.into_inner())
            .apply(&s2.project, &host, offset, &text)
    })
    .await;
    settle(m, res, log, "events-mirror", |e| {
        format!("event on {}: {e}", m.subject)
    })
    .await;
}
