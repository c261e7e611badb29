//! The trail both ways: this host's message files → the stream, each time
//! one appears or moves, and every other host's files →
//! `.swarmforge/bridge/hosts/<host>/`. The invariants: a record is
//! published only with the journal line that vouches for it
//! (bridge::vouch), a trail mark follows every record of the two passes it
//! covers (so a mirror can tell lag from loss), and a mirrored record is
//! believed only against the line it cites.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use futures_util::StreamExt;

use super::{
    blocking, mirror_consumer, publish_acked, publisher, settle, stream, Shared, ACK_TIMEOUT,
    RETRY, WINDOW,
};
use crate::bridge::{events, trail, vouch, Log, Settings};
use crate::fsx;

/// This host's message files → the stream, each time one appears or moves.
pub(super) async fn publish_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    let _ = stream(&s, &js, &log).await;
    let subject = format!("swarm.{}.trail.{}", s.name(), s.host);
    let mut published: HashSet<String> = Default::default();
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
        let ok = publish_records(&s, &js, &subject, &own, &mut published).await;
        if ok {
            if let Some(e) = prev_start.filter(|&e| marked.is_none_or(|m| e > m)) {
                if publish_mark(&js, &subject, &s.host, e).await {
                    marked = Some(e);
                }
            }
            prev_start = start;
            log.cleared("trail");
        } else {
            prev_start = None;
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

/// One pass: every file of this host not published yet, in windows of
/// [`WINDOW`] whose PubAcks are awaited before the next. False when one
/// could not be published (the pass ends there).
async fn publish_records(
    s: &Arc<Settings>,
    js: &jetstream::Context,
    subject: &str,
    own: &Arc<Mutex<vouch::Own>>,
    published: &mut HashSet<String>,
) -> bool {
    let records = {
        let s = s.clone();
        blocking(move || trail::scan(&s.project)).await
    };
    let max = s.config.limits.max_file_bytes;
    let fresh: Vec<trail::Record> = records
        .into_iter()
        .filter(|r| r.len <= max && !published.contains(&r.msg_id(&s.host)))
        .collect();
    for chunk in fresh.chunks(WINDOW) {
        let mut ok = true;
        let mut acks = Vec::new();
        for r in chunk {
            // Moved on meanwhile (its new place is seen next pass), or
            // no line of the journal published so far vouches for it
            // (an outbox file, a move not journaled yet, a file an
            // agent put there): looked at again next pass.
            let Some((bytes, cited)) = read_cited(r, max, own).await else {
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
            match js.send_publish(subject.to_string(), msg).await {
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
            return false;
        }
    }
    true
}

/// A record's bytes and the journal offset that vouches for it; `None`
/// when it is gone or no published line vouches for it yet.
async fn read_cited(
    r: &trail::Record,
    max: u64,
    own: &Arc<Mutex<vouch::Own>>,
) -> Option<(Vec<u8>, u64)> {
    let (p, rel, own) = (r.path.clone(), r.rel.clone(), own.clone());
    blocking(move || {
        let bytes = fsx::read_bounded(&p, max).ok()?;
        let msg = crate::protocol::header::Message::parse_bytes(&bytes).ok()?;
        let own = own.lock().unwrap_or_else(|e| e.into_inner());
        Some((bytes, own.cite(&rel, &msg)?))
    })
    .await
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
    publish_acked(js, subject.to_string(), h, bytes::Bytes::new()).await
}

/// Every other host's message files → `.swarmforge/bridge/hosts/<host>/`.
pub(super) async fn mirror_loop(
    s: Arc<Settings>,
    js: jetstream::Context,
    log: Shared,
    seen: Arc<AtomicU64>,
) {
    let prefix = format!("swarm.{}.trail.", s.name());
    let mirrors = Arc::new(Mutex::new(vouch::Mirrors::default()));
    loop {
        let mut messages = mirror_consumer(&s, &js, &log, "trail", &prefix).await;
        while let Some(Ok(m)) = messages.next().await {
            let host = publisher(&m, &prefix);
            if host == s.host {
                let _ = m.ack().await;
                continue;
            }
            let mark = header(&m, "Swarm-Mark");
            if mark.is_empty() {
                mirror_record(&s, &log, &mirrors, &seen, &host, &m).await;
            } else {
                mirror_mark(&s, &log, &host, &mark, &m).await;
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// The header `k` of `m` (empty when it has none).
fn header(m: &jetstream::Message, k: &str) -> String {
    m.headers
        .as_ref()
        .and_then(|h| h.get(k))
        .map(|v| v.as_str().to_string())
        .unwrap_or_default()
}

/// Another host's trail mark: every file it held before its events reached
/// the mark has reached this mirror.
async fn mirror_mark(s: &Arc<Settings>, log: &Log, host: &str, mark: &str, m: &jetstream::Message) {
    let s2 = s.clone();
    let h2 = host.to_string();
    let res = match mark.parse::<u64>() {
        Ok(o) => blocking(move || trail::apply_mark(&s2.project, &h2, o)).await,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not an offset",
        )),
    };
    settle(m, res, log, "trail-mirror", |e| {
        format!("trail mark of {host}: {e}")
    })
    .await;
}

/// Another host's message file, kept in its mirror once the journal line
/// it cites vouches for it.
async fn mirror_record(
    s: &Arc<Settings>,
    log: &Log,
    mirrors: &Arc<Mutex<vouch::Mirrors>>,
    seen: &Arc<AtomicU64>,
    host: &str,
    m: &jetstream::Message,
) {
    let (wt, rel) = (header(m, "Swarm-Worktree"), header(m, "Swarm-Path"));
    let cited = header(m, vouch::HEADER).parse::<u64>().ok();
    let published = m.info().map_or(u64::MAX, |i| i.stream_sequence);
    let payload = m.payload.to_vec();
    let (s2, mi, seen) = (s.clone(), mirrors.clone(), seen.clone());
    let (h2, w2, r2) = (host.to_string(), wt.clone(), rel.clone());
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
    settle(m, res, log, "trail-mirror", |e| {
        format!("trail record {host}:{wt}:{rel}: {e}")
    })
    .await;
}
