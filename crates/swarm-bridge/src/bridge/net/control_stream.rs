//! A person's control records (approve, deny, pause, ...) both ways: this
//! host's → the stream, and every host's → applied here. The invariant:
//! one host's records keep their order, because a record leaves the control
//! outbox only after its PubAck and the next is published only then, and
//! the mirror takes one message at a time (`mirror_messages`).

use std::sync::Arc;

use async_nats::jetstream::{self, AckKind};
use futures_util::StreamExt;

use super::{blocking, mirror_consumer, publish_acked, publisher, stream, Shared, IDLE, RETRY};
use crate::bridge::{control, control_receive, control_wait, Settings};

/// This host's control records → the stream, oldest first, one at a time:
/// a record leaves the control outbox only after its PubAck, and the next
/// is published only then, so one host's records keep their order.
pub(super) async fn publish_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    let _ = stream(&s, &js, &log).await;
    let subject = s.control_subject(&s.host);
    loop {
        let waiting = {
            let s = s.clone();
            blocking(move || control::waiting(&s.project)).await
        };
        let mut ok = true;
        for r in waiting {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("ctl:{}", r.id).as_str());
            let bytes = serde_json::to_vec(&r).unwrap_or_default();
            let acked = publish_acked(&js, subject.clone(), h, bytes::Bytes::from(bytes)).await;
            if !acked {
                ok = false;
                break;
            }
            let (s2, id) = (s.clone(), r.id.clone());
            match blocking(move || control::mark_sent(&s2.project, &id)).await {
                Ok(()) => log.line("published", &format!("control {}", r.id)),
                Err(e) => {
                    let path = control::outbox_ledger(&s.project).request_file(&r.id);
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
pub(super) async fn apply_loop(s: Arc<Settings>, js: jetstream::Context, log: Shared) {
    let prefix = format!("swarm.{}.control.", s.name());
    loop {
        let mut messages = mirror_consumer(&s, &js, &log, "control", &prefix).await;
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
pub(super) async fn wait_loop(s: Arc<Settings>, log: Shared) {
    loop {
        let s2 = s.clone();
        let applied = blocking(move || control_wait::retry(&s2.project)).await;
        if applied > 0 {
            log.line("control", &format!("applied {applied} waiting record(s)"));
        }
        tokio::time::sleep(IDLE).await;
    }
}
