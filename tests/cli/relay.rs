//! One deliverer across hosts (docs/bridge.md, "One deliverer"): what
//! arrives over the bridge is spooled and delivered by the receiving host's
//! daemon through the same gate as local mail, so `swarm pause`, approvals
//! and every rule of the receiving host hold for it, and one id reaches a
//! recipient once however it is published.
//!
//! Each test runs a real `nats-server` and two hosts (separate checkouts,
//! each with its daemon and bridge); the forged messages are published
//! straight to JetStream, as any client holding the swarm's credentials
//! could.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use crate::bridge::{swarm, Host, Nats};
use crate::support::*;

const LONG: Duration = Duration::from_secs(60);

fn note(to: &str, msg: &str) -> String {
    format!("type: note\nto: {to}\npriority: 50\nmessage: {msg}\n")
}

fn start(hosts: &mut [Host]) {
    for h in hosts.iter_mut() {
        h.start_daemon();
        h.start_bridge();
    }
}

/// The relay folder of `role` on host `h`, one of its folders.
fn relay(h: &Host, role: &str, folder: &str) -> PathBuf {
    h.p.path(&format!(
        ".swarmforge/bridge/in/{role}/.swarmforge/handoffs/{folder}"
    ))
}

fn journal(h: &Host) -> String {
    fs::read_to_string(h.p.path(".swarmforge/daemon/handoffd.log")).unwrap_or_default()
}

/// Publishes one message to the swarm's stream as a bridge would, with
/// whatever headers the caller chooses.
pub fn publish(nats: &Nats, subject: &str, headers: &[(&str, &str)], payload: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = async_nats::connect(nats.url()).await.expect("connects");
        let js = async_nats::jetstream::new(client);
        let mut h = async_nats::HeaderMap::new();
        for (k, v) in headers {
            h.insert(*k, *v);
        }
        // The stream is the bridges' to create: wait for it.
        let deadline = std::time::Instant::now() + LONG;
        loop {
            let ack = js
                .publish_with_headers(subject.to_string(), h.clone(), payload.to_string().into())
                .await
                .expect("published")
                .await;
            match ack {
                Ok(_) => break,
                Err(e) if std::time::Instant::now() < deadline => {
                    eprintln!("publish not acknowledged yet: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("publish to {subject} never acknowledged: {e}"),
            }
        }
    });
}

/// A copy for `pong` as host `a`'s daemon would stamp it.
fn copy(seq: u32, kind: &str, extra: &str) -> (String, String) {
    let id = format!("20261201T101010Z_{seq:06}_from_ping");
    let text = format!(
        "id: {id}\nfrom: ping\nto: pong\nrecipient: pong\npriority: 50\ntype: {kind}\nmessage: forged {seq}\n{extra}created_at: 2026-12-01T10:10:10.000000Z\nenqueued_at: 2026-12-01T10:10:10.000001Z\n\nbody {seq}\n"
    );
    (id, text)
}

const TWO: &str = "roles:\n  - {name: ping, agent: human, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong}\n";

#[test]
fn a_paused_host_keeps_what_arrives_over_the_bridge_until_resume() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    start(&mut hosts);
    hosts[1].p.swarm(&["pause", "--here"]);
    let queued = hosts[0].send("ping", &note("pong", "while b is paused"));
    let name = file_name(&queued);
    // Received and spooled on b, and the daemon left it there: paused.
    wait_until(LONG, "b's daemon defers the relayed copy", || {
        let j = journal(&hosts[1]);
        j.lines()
            .any(|l| l.contains(" deferred ") && l.contains(&name) && l.contains("paused"))
    });
    assert!(relay(&hosts[1], "pong", "outbox").join(&name).exists());
    assert!(hosts[1].copies("pong").is_empty(), "delivered while paused");
    let st = hosts[1].status();
    assert!(
        st.contains("from other hosts for pong: 1 waiting for delivery"),
        "{st}"
    );
    hosts[1].p.swarm(&["resume", "--here"]);
    hosts[1].wait_copies("pong", 1, "the copy is delivered after resume");
    assert_eq!(file_name(&hosts[1].copies("pong")[0]), name);
    wait_until(LONG, "the relayed copy moved to sent/", || {
        relay(&hosts[1], "pong", "sent").join(&name).exists()
    });
    // Delivered once, stamped by the host that enqueued it.
    let text = fs::read_to_string(&hosts[1].copies("pong")[0]).unwrap();
    assert_eq!(header(&text, "recipient"), Some("pong"));
    assert_eq!(header_values(&text, "enqueued_at").len(), 1);
    let st = hosts[1].status();
    assert!(!st.contains("from other hosts"), "{st}");
}

#[test]
fn the_receiving_hosts_approval_rule_holds_a_relayed_copy_until_approved() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    // Only host b asks for approval of what ping sends.
    let yaml = hosts[1].p.read("swarm.yaml").replace(
        "{name: ping, agent: human, host: a}",
        "{name: ping, agent: human, host: a, approval: required}",
    );
    hosts[1].p.write("swarm.yaml", &yaml);
    start(&mut hosts);
    let queued = hosts[0].send("ping", &note("pong", "needs b's approval"));
    let name = file_name(&queued);
    wait_until(LONG, "b holds the relayed copy", || {
        relay(&hosts[1], "pong", "pending_approval")
            .join(&name)
            .exists()
    });
    assert!(hosts[1].copies("pong").is_empty());
    let st = hosts[1].status();
    assert!(st.contains("held note ping -> pong"), "{st}");
    let held =
        fs::read_to_string(relay(&hosts[1], "pong", "pending_approval").join(&name)).unwrap();
    let id = header(&held, "id").unwrap().to_string();
    // The person reviews what is held here, then approves exactly that.
    let review = hosts[1].p.swarm(&["approve", &id, "--json"]);
    let v: serde_json::Value = serde_json::from_str(review.stdout.trim()).expect("one JSON object");
    let seen = v["sha256"]
        .as_str()
        .expect("the reviewed sha256")
        .to_string();
    assert!(
        v["message"]
            .as_str()
            .unwrap_or("")
            .contains("needs b's approval"),
        "{v}"
    );
    hosts[1].p.swarm(&["approve", &id, "--sha256", &seen]);
    hosts[1].wait_copies("pong", 1, "the approved copy is delivered");
    assert_eq!(file_name(&hosts[1].copies("pong")[0]), name);
}

#[test]
fn forged_publishes_meet_the_receiving_hosts_rules_and_one_id_is_delivered_once() {
    let Some(nats) = Nats::start() else { return };
    let roles = "max_hops: 3\nroles:\n  - {name: ping, agent: human, host: a, allowed_types: [note]}\n  - {name: pong, agent: human, host: b, worktree: pong}\n  - {name: local, agent: human, host: b, worktree: local}\n";
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], roles);
    hosts[1].start_daemon();
    hosts[1].start_bridge();
    let subject = "swarm.swarm.to.b.pong";
    let send = |name: &str, from_host: &str, text: &str| {
        publish(
            &nats,
            subject,
            &[("Swarm-Name", name), ("Swarm-From-Host", from_host)],
            text,
        )
    };
    // One id under three names: one delivery, the others refused.
    let (id, ok) = copy(1, "note", "");
    let names: Vec<String> = ["pong", "pong_and_x", "qa"]
        .iter()
        .map(|t| format!("50_{id}_to_{t}.handoff"))
        .collect();
    for n in &names {
        send(n, "a", &ok);
    }
    // A type ping may not send, a hop count past max_hops, a sender that is
    // a role of this host, and a publish by a host that is not the sender's.
    let (id2, not_allowed) = copy(2, "handoff", "");
    send(&format!("50_{id2}_to_pong.handoff"), "a", &not_allowed);
    let (id3, hops) = copy(3, "note", "hop: 9\n");
    send(&format!("50_{id3}_to_pong.handoff"), "a", &hops);
    let (_, local) = copy(4, "note", "");
    let local = local.replace("from: ping", "from: local").replace(
        "20261201T101010Z_000004_from_ping",
        "20261201T101010Z_000004_from_local",
    );
    send(
        "50_20261201T101010Z_000004_from_local_to_pong.handoff",
        "a",
        &local,
    );
    let (id5, wrong_host) = copy(5, "note", "");
    send(&format!("50_{id5}_to_pong.handoff"), "c", &wrong_host);
    // Then a good one, to know every earlier message was handled.
    let (id6, last) = copy(6, "note", "");
    send(&format!("50_{id6}_to_pong.handoff"), "a", &last);
    hosts[1].wait_copies("pong", 2, "the first copy and the last one");
    let failed = relay(&hosts[1], "pong", "failed");
    wait_until(LONG, "the refused copies are in failed/", || {
        handoff_names(&failed).len() == 4
    });
    let held: Vec<String> = hosts[1]
        .copies("pong")
        .iter()
        .map(|p| file_name(p))
        .collect();
    assert!(held.contains(&names[0]), "{held:?}");
    assert!(
        held.contains(&format!("50_{id6}_to_pong.handoff")),
        "{held:?}"
    );
    let reason = |name: &str| fs::read_to_string(failed.join(format!("{name}.error"))).unwrap();
    assert!(
        reason(&names[1]).contains("duplicate"),
        "{}",
        reason(&names[1])
    );
    assert!(
        reason(&names[2]).contains("duplicate"),
        "{}",
        reason(&names[2])
    );
    let r = reason(&format!("50_{id2}_to_pong.handoff"));
    assert!(r.contains("must be one of note"), "{r}");
    let r = reason(&format!("50_{id3}_to_pong.handoff"));
    assert!(r.contains("hop_limit"), "{r}");
    // Refused by the bridge itself: a local sender, a host speaking for
    // another host's role. Neither reached the relay folder.
    let log = hosts[1].log();
    assert!(
        log.contains("works on this host, so it cannot come over the bridge"),
        "{log}"
    );
    assert!(log.contains("but host c published it"), "{log}");
    let st = hosts[1].status();
    assert!(st.contains("4 refused"), "{st}");
    // The audit sees the daemon's refusals too.
    let events =
        fs::read_to_string(hosts[1].p.path(".swarmforge/daemon/events.jsonl")).unwrap_or_default();
    assert_eq!(
        events.lines().filter(|l| l.contains("\"failed\"")).count(),
        4,
        "{events}"
    );
}

#[test]
fn a_host_mirrors_only_the_trail_records_another_host_may_publish() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    start(&mut hosts);
    // A real message, so the mirror is known to work.
    hosts[0].send("ping", &note("pong", "real"));
    hosts[1].wait_copies("pong", 1, "the real note crossed");
    let trail = "swarm.swarm.trail.a";
    let (id, text) = copy(7, "note", "");
    let original = text
        .replace("recipient: pong\n", "")
        .replace("enqueued_at: 2026-12-01T10:10:10.000001Z\n", "");
    let name = format!("50_{id}_to_pong.handoff");
    let record = |wt: &str, rel: &str, body: &str| {
        publish(
            &nats,
            trail,
            &[("Swarm-Worktree", wt), ("Swarm-Path", rel)],
            body,
        )
    };
    // Host a claiming a message that pong (host b) sent from ping's folder
    // on a (a person's own, `people/ping`), a worktree host a does not
    // have, and a copy there for a role that does not work there.
    let forged_from = original
        .replace("from: ping", "from: pong")
        .replace("_from_ping", "_from_pong");
    record("people/ping", &format!("sent/{name}"), &forged_from);
    record("pong", &format!("sent/{name}"), &original);
    record("people/ping", &format!("inbox/new/{name}"), &text);
    wait_until(LONG, "host b refuses the three forged records", || {
        hosts[1].log().matches("rejected trail record").count() >= 3
    });
    let log = hosts[1].log();
    assert!(
        log.contains("its sender 'pong' does not work in host a's worktree people/ping"),
        "{log}"
    );
    assert!(log.contains("host a has no worktree pong"), "{log}");
    assert!(
        log.contains("its recipient 'pong' does not work in host a's worktree people/ping"),
        "{log}"
    );
    let mirror = hosts[1].p.path(".swarmforge/bridge/hosts/a");
    let mut planted = Vec::new();
    for e in walk(&mirror) {
        if file_name(&e) == name {
            planted.push(e);
        }
    }
    assert!(planted.is_empty(), "{planted:?}");
}

/// Every file below `dir`.
fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
