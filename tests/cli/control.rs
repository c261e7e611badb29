//! One control for the whole swarm (docs/bridge.md, "One control"): `swarm
//! pause`, `resume`, `approve`, `deny` and `answer` run on one host act on
//! every host, carried over the bridge, journaled on every host, applied
//! once and in order, also by a host that was away when they were sent.
//!
//! Each test runs a real `nats-server` and two or three hosts (separate
//! checkouts, each with its daemon and bridge), as tests/cli/bridge.rs does.

use crate::bridge::{exactly_once, id_of, note, start_all, swarm, Host, Nats, LONG};
use crate::relay::publish;
use crate::support::*;
use std::fs;
use std::io::Write;
use std::path::Path;

/// This host's control events (`control_sent`, `_applied`, `_refused`).
fn controls(h: &Host) -> Vec<serde_json::Value> {
    h.p.events()
        .into_iter()
        .filter(|e| e["kind"].as_str().unwrap_or("").starts_with("control_"))
        .collect()
}

/// Whether host `h` journaled `kind` for control `id`.
fn journaled(h: &Host, kind: &str, id: &str) -> bool {
    controls(h)
        .iter()
        .any(|e| e["kind"] == kind && e["reason"].as_str().unwrap_or("").starts_with(id))
}

/// The control id a command printed (`CONTROL SENT: <id> (…)`).
fn control_id(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("CONTROL SENT: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no CONTROL SENT line:\n{out}"))
        .to_string()
}

fn paused(h: &Host) -> bool {
    h.p.path(".swarmforge/paused").exists()
}

fn status_json(h: &Host) -> serde_json::Value {
    h.p.swarm(&["status", "--json"]).ok().json()
}

/// The daemon of `h` left file `name` waiting because delivery is paused.
fn deferred_paused(h: &Host, name: &str) -> bool {
    h.p.log()
        .lines()
        .any(|l| l.contains(" deferred ") && l.contains(name) && l.contains("paused"))
}

fn audit_clean(h: &Host) {
    h.p.swarm(&["audit", "--check", "--wait", "60s"])
        .ok()
        .stdout_has("CHECK OK");
}

const THREE: &str = "roles:\n  - {name: ping, agent: human, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong}\n  - {name: peer, agent: human, host: b, worktree: peer}\n  - {name: far, agent: human, host: c, worktree: far}\n";

#[test]
fn a_pause_on_one_host_stops_delivery_everywhere_and_a_resume_on_another_releases_it() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b", "c"], THREE);
    start_all(&mut hosts);
    let out = hosts[0].p.swarm(&["pause"]).ok().stdout.clone();
    assert!(out.starts_with("PAUSED: all delivery since "), "{out}");
    let id = control_id(&out);
    assert!(paused(&hosts[0]));
    assert!(journaled(&hosts[0], "control_sent", &id));
    wait_until(LONG, "hosts b and c applied a's pause", || {
        paused(&hosts[1])
            && paused(&hosts[2])
            && journaled(&hosts[1], "control_applied", &id)
            && journaled(&hosts[2], "control_applied", &id)
    });
    // Nothing is delivered on b or c (what arrives at a paused host from
    // another is proven by the next test).
    let local = hosts[1].send("pong", &note("peer", "local on b"));
    let remote = hosts[2].send("far", &note("pong", "from c"));
    wait_until(LONG, "both notes wait, paused", || {
        deferred_paused(&hosts[1], &file_name(&local))
            && deferred_paused(&hosts[2], &file_name(&remote))
    });
    assert!(hosts[1].copies("peer").is_empty());
    assert!(hosts[1].copies("pong").is_empty());
    // Any host shows the swarm-wide state, with who paused it.
    wait_until(
        LONG,
        "c's status shows every host paused by a's control",
        || {
            let st = hosts[2].status();
            ["a", "b", "c"]
                .iter()
                .all(|h| st.contains(&format!("host {h:<12} paused")))
                && st.contains(&format!("(last: {id} pause by "))
        },
    );
    let out = hosts[1].p.swarm(&["resume"]).ok().stdout.clone();
    assert!(out.starts_with("RESUMED\n"), "{out}");
    let rid = control_id(&out);
    wait_until(LONG, "a and c applied b's resume", || {
        !paused(&hosts[0]) && !paused(&hosts[2]) && journaled(&hosts[0], "control_applied", &rid)
    });
    hosts[1].wait_copies("peer", 1, "b's local note is delivered after the resume");
    hosts[1].wait_copies("pong", 1, "c's note is delivered after the resume");
    // a sees every host running once the others' journals reached it.
    wait_until(LONG, "a's status shows every host running", || {
        let st = status_json(&hosts[0]);
        st["swarm_control"]["hosts"]
            .as_array()
            .is_some_and(|h| h.iter().all(|h| h["state"] == "running"))
    });
    for h in &hosts {
        audit_clean(h);
    }
}

#[test]
fn pause_on_a_stops_what_arrives_at_b_from_other_hosts() {
    // The relayed copy waits in b's relay folder, not in a's outbox: a
    // paused by --here alone keeps delivering, b paused from a does not.
    let Some(nats) = Nats::start() else { return };
    let (_hub, hosts) = two_hosts(&nats);
    let id = control_id(&hosts[0].p.swarm(&["pause"]).ok().stdout);
    wait_until(LONG, "b applied a's pause", || {
        journaled(&hosts[1], "control_applied", &id)
    });
    hosts[0].p.swarm(&["resume", "--here"]).ok();
    assert!(paused(&hosts[1]));
    let q = hosts[0].send("ping", &note("pong", "a runs, b is paused"));
    wait_until(LONG, "b holds the relayed copy back, paused", || {
        deferred_paused(&hosts[1], &file_name(&q))
    });
    assert!(hosts[1].copies("pong").is_empty());
    hosts[0].p.swarm(&["resume"]).ok();
    hosts[1].wait_copies("pong", 1, "b delivers after a's resume");
}

/// Hosts a and b (b with pong and peer), daemons and bridges running.
fn two_hosts(nats: &Nats) -> (crate::bridge::Hub, Vec<Host>) {
    let (hub, mut hosts) = swarm(nats, &["a", "b"], &THREE.replace("host: c", "host: a"));
    start_all(&mut hosts);
    (hub, hosts)
}

const HELD: &str = "roles:\n  - {name: ping, agent: human, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong, approval: required}\n  - {name: peer, agent: human, host: b, worktree: peer}\n";

/// The sha256 host `h`'s status shows for `id` held on another host.
fn remote_sha(h: &Host, id: &str) -> Option<String> {
    let st = status_json(h);
    st["swarm_control"]["held_elsewhere"]
        .as_array()?
        .iter()
        .find(|r| r["id"] == id)
        .map(|r| r["sha256"].as_str().unwrap().to_string())
}

#[test]
fn approve_on_a_of_a_message_held_on_b_delivers_it_once_and_only_as_reviewed() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], HELD);
    start_all(&mut hosts);
    let q = hosts[1].send("pong", &note("peer", "needs a person"));
    let id = id_of(&q);
    let held = hosts[1]
        .p
        .hq("pong", "pending_approval")
        .join(file_name(&q));
    wait_until(LONG, "the note is held on b", || held.exists());
    wait_until(LONG, "a sees it held on b", || {
        remote_sha(&hosts[0], &id).is_some()
    });
    let seen = remote_sha(&hosts[0], &id).unwrap();
    let st = hosts[0].status();
    assert!(st.contains(&format!("held on host b: {id}")), "{st}");
    // A fingerprint that is not what the mirror shows: refused on a.
    let wrong = "0".repeat(64);
    let r = hosts[0].p.swarm(&["approve", &id, "--sha256", &wrong]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("CHANGED_SINCE_REVIEW"), "{r:?}");
    // Content changed on b after a's review, while b's bridge is away (a's
    // mirror still shows the old content): b refuses the approval.
    hosts[1].kill_bridge();
    let text = fs::read_to_string(&held).unwrap();
    fs::write(&held, text.replace("needs a person", "swapped")).unwrap();
    let out = hosts[0]
        .p
        .swarm(&["approve", &id, "--sha256", &seen])
        .ok()
        .stdout
        .clone();
    assert!(
        out.starts_with(&format!("APPROVAL SENT: {id} is held on host b")),
        "{out}"
    );
    let stale = control_id(&out);
    hosts[1].start_bridge();
    wait_until(LONG, "b refused the stale approval", || {
        journaled(&hosts[1], "control_refused", &stale)
    });
    assert!(held.exists(), "approved although changed");
    assert!(controls(&hosts[1]).iter().any(|e| e["reason"]
        .as_str()
        .unwrap()
        .contains("CHANGED_SINCE_REVIEW")));
    // Reviewed again: a sees the new content and approves it.
    wait_until(LONG, "a's mirror shows the new content", || {
        remote_sha(&hosts[0], &id).is_some_and(|s| s != seen)
    });
    let now = remote_sha(&hosts[0], &id).unwrap();
    let cid = control_id(
        &hosts[0]
            .p
            .swarm(&["approve", &id, "--sha256", &now])
            .ok()
            .stdout,
    );
    hosts[1].wait_copies("peer", 1, "the approved note is delivered on b");
    // Journaled just after the approval's effect, which the copy may beat.
    wait_until(LONG, "b journaled the approval applied", || {
        journaled(&hosts[1], "control_applied", &cid)
    });
    assert!(journaled(&hosts[0], "control_sent", &cid));
    wait_until(LONG, "a's mirror shows it held no more", || {
        remote_sha(&hosts[0], &id).is_none()
    });
    // Nothing is held any more: a second approval is refused at once.
    let again = hosts[0].p.swarm(&["approve", &id, "--sha256", &now]);
    assert_eq!(again.code, 1, "{again:?}");
    assert!(hosts[1].p.hq("pong", "sent").join(file_name(&q)).exists());
    exactly_once(&hosts[1], "peer", &[file_name(&q).into()]);
    let body = fs::read_to_string(&hosts[1].copies("peer")[0]).unwrap();
    assert!(body.contains("swapped"), "{body}");
    for h in &hosts {
        audit_clean(h);
    }
}

#[test]
fn deny_on_a_refuses_a_message_held_on_b() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], HELD);
    start_all(&mut hosts);
    let q = hosts[1].send("pong", &note("peer", "no way"));
    let id = id_of(&q);
    wait_until(LONG, "a sees it held on b", || {
        remote_sha(&hosts[0], &id).is_some()
    });
    let out = hosts[0]
        .p
        .swarm(&["deny", &id, "--reason", "not now"])
        .ok()
        .stdout
        .clone();
    assert!(
        out.starts_with(&format!("DENIAL SENT: {id} is held on host b")),
        "{out}"
    );
    let failed = hosts[1].p.hq("pong", "failed").join(file_name(&q));
    let error = format!("{}.error", failed.display());
    wait_until(LONG, "b denied it", || Path::new(&error).exists());
    let note = fs::read_to_string(&error).unwrap();
    assert_eq!(note, "denied: not now\n");
    assert!(hosts[1].copies("peer").is_empty());
}

const RELAYED: &str = "roles:\n  - {name: ping, agent: human, host: a, approval: required}\n  - {name: pong, agent: human, host: b, worktree: pong}\n";

#[test]
fn an_approval_on_the_senders_host_travels_with_its_copy_bound_to_its_content() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], RELAYED);
    start_all(&mut hosts);
    let q = hosts[0].send("ping", &note("pong", "reviewed on a"));
    let id = id_of(&q);
    let held = hq(&hosts[0].p.role_dir("ping"), "pending_approval").join(file_name(&q));
    wait_until(LONG, "the note is held on a", || held.exists());
    let st = status_json(&hosts[0]);
    let sha = st["held"][0]["sha256"].as_str().unwrap().to_string();
    let out = hosts[0]
        .p
        .swarm(&["approve", &id, "--sha256", &sha])
        .ok()
        .stdout
        .clone();
    assert!(out.starts_with("APPROVED: "), "{out}");
    // b's gate asks for the same approval: the one made on a counts there.
    hosts[1].wait_copies("pong", 1, "the approved note reached pong on b");
    exactly_once(&hosts[1], "pong", &[file_name(&q).into()]);
    let cid = control_id(&out);
    wait_until(LONG, "b applied a's approval", || {
        journaled(&hosts[1], "control_applied", &cid)
    });
    let held_on_b = |h: &Host| {
        h.p.events()
            .into_iter()
            .filter(|e| e["kind"] == "held")
            .count()
    };
    assert_eq!(held_on_b(&hosts[1]), 0, "held again on b");
    // A peer cannot stretch an approval: one for an id and a fingerprint
    // does not cover a copy of that id with other content, and a header in
    // the message approves nothing.
    let forged = "20261201T101010Z_000009_from_ping";
    let other = "ab".repeat(32);
    let rid = format!("a.{:020}.42", u64::MAX / 2);
    publish(
        &nats,
        "swarm.swarm.control.a",
        &[],
        &format!(
            r#"{{"id":"{rid}","host":"a","by":"mallory","at":"2026-12-02T00:00:00Z","kind":"approve","message":"{forged}","sha256":"{other}"}}"#
        ),
    );
    let name = format!("50_{forged}_to_pong.handoff");
    let text = format!("id: {forged}\nfrom: ping\nto: pong\nrecipient: pong\npriority: 50\ntype: note\nmessage: swapped\napproved_by: alice\ncreated_at: 2026-12-01T10:10:10.000000Z\nenqueued_at: 2026-12-01T10:10:10.000001Z\n\nswapped\n");
    publish(
        &nats,
        "swarm.swarm.to.b.pong",
        &[("Swarm-Name", &name), ("Swarm-From-Host", "a")],
        &text,
    );
    let relay_held = hosts[1]
        .p
        .path(".swarmforge/bridge/in/pong/.swarmforge/handoffs/pending_approval")
        .join(&name);
    wait_until(LONG, "b holds the copy approved for other content", || {
        relay_held.exists()
    });
    // Applied before the copy came (recorded for that content) or after
    // (refused: CHANGED_SINCE_REVIEW); either way the copy stays held.
    wait_until(LONG, "b took the approve record in", || {
        journaled(&hosts[1], "control_applied", &rid)
            || journaled(&hosts[1], "control_refused", &rid)
    });
    assert!(relay_held.exists());
    assert_eq!(hosts[1].copies("pong").len(), 1);
}

#[test]
fn the_cockpit_pauses_resumes_and_approves_for_the_whole_swarm() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], HELD);
    start_all(&mut hosts);
    let cockpit = crate::serve::start(&hosts[0].p);
    let r = cockpit.post("/api/pause", serde_json::json!({}));
    assert_eq!(r.code, 200, "{}", r.body);
    let id = r.json()["control"].as_str().unwrap().to_string();
    wait_until(LONG, "b applied the cockpit's pause", || {
        paused(&hosts[1]) && journaled(&hosts[1], "control_applied", &id)
    });
    let r = cockpit.post("/api/resume", serde_json::json!({}));
    assert_eq!(r.code, 200, "{}", r.body);
    let id = r.json()["control"].as_str().unwrap().to_string();
    wait_until(LONG, "b applied the cockpit's resume", || {
        !paused(&hosts[1]) && journaled(&hosts[1], "control_applied", &id)
    });
    // A handoff held on b, approved in a's cockpit as a's mirror shows it.
    let q = hosts[1].send("pong", &note("peer", "approve me from a"));
    let msg = id_of(&q);
    wait_until(LONG, "a sees it held on b", || {
        remote_sha(&hosts[0], &msg).is_some()
    });
    let sha = remote_sha(&hosts[0], &msg).unwrap();
    let r = cockpit.post(
        "/api/approve",
        serde_json::json!({"id": msg, "sha256": sha}),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["status"], "sent", "{v}");
    assert_eq!(v["host"], "b", "{v}");
    hosts[1].wait_copies(
        "peer",
        1,
        "the note approved in a's cockpit is delivered on b",
    );
    exactly_once(&hosts[1], "peer", &[file_name(&q).into()]);
    for h in &hosts {
        audit_clean(h);
    }
}

const ASK: &str = "roles:\n  - {name: lead, agent: sh lead.sh, host: a}\n  - {name: boss, agent: human, host: b, worktree: boss}\n";

#[test]
fn a_clarify_on_b_is_answered_from_a() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], ASK);
    start_all(&mut hosts);
    let q = hosts[0].send(
        "lead",
        "type: clarify\nto: boss\npriority: 10\nquestion: Ship on Friday?\n\nYes\nNo\n",
    );
    let id = id_of(&q);
    hosts[1].wait_copies("boss", 1, "the clarify reached boss on b");
    // An answer b's checks refuse (no option 9) is refused there, journaled.
    let bad = control_id(
        &hosts[0]
            .p
            .swarm(&["answer", &id, "--choice", "9"])
            .ok()
            .stdout_has(&format!("ANSWER SENT: {id}"))
            .stdout,
    );
    wait_until(LONG, "b refused the bad answer", || {
        journaled(&hosts[1], "control_refused", &bad)
    });
    let good = control_id(
        &hosts[0]
            .p
            .swarm(&["answer", &id, "--choice", "1"])
            .ok()
            .stdout,
    );
    hosts[0].wait_copies("lead", 1, "boss's answer reached lead on a");
    let a = &hosts[0].copies("lead")[0];
    assert_eq!(file_header(a, "type").as_deref(), Some("answer"));
    assert_eq!(file_header(a, "in_reply_to").as_deref(), Some(id.as_str()));
    assert_eq!(file_header(a, "from").as_deref(), Some("boss"));
    // b journals the answer applied after its effect, the copy sent on.
    wait_until(LONG, "b journaled the answer applied", || {
        journaled(&hosts[1], "control_applied", &good)
    });
    wait_until(LONG, "a's status shows where its answer went", || {
        hosts[0]
            .status()
            .contains(&format!("control {good} answer by "))
    });
    // An id no host knows is refused, nothing is sent.
    let r = hosts[0].p.swarm(&[
        "answer",
        "20200101T000000Z_000001_from_lead",
        "--choice",
        "1",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("No clarify"), "{r:?}");
    // An agent cannot answer for a person on another host.
    let r = hosts[0]
        .p
        .cmd("swarm")
        .role("lead")
        .args(["answer", &id, "--choice", "2"])
        .run();
    assert_eq!(r.code, 2, "{r:?}");
}

const CLARIFY: &str =
    "type: clarify\nto: boss\npriority: 10\nquestion: Ship on Friday?\n\nYes\nNo\n";

#[test]
fn an_answer_that_arrives_before_the_clarify_waits_for_its_copy_across_a_restart() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], ASK);
    start_all(&mut hosts);
    // b's daemon is down: the clarify reaches b's relay folder, not boss.
    hosts[1].kill_daemon();
    let q = hosts[0].send("lead", CLARIFY);
    let id = id_of(&q);
    let relay = hosts[1]
        .p
        .path(".swarmforge/bridge/in/boss/.swarmforge/handoffs/outbox");
    wait_until(LONG, "the clarify waits in b's relay folder", || {
        files(&relay).len() == 1
    });
    let cid = control_id(
        &hosts[0]
            .p
            .swarm(&["answer", &id, "--choice", "1"])
            .ok()
            .stdout_has(&format!("ANSWER SENT: {id}"))
            .stdout,
    );
    wait_until(LONG, "b keeps the answer until the copy is there", || {
        journaled(&hosts[1], "control_waiting", &cid)
    });
    assert!(!journaled(&hosts[1], "control_applied", &cid));
    assert!(hosts[1].copies("boss").is_empty());
    // Said on b's audit and on a's status, never judged lost.
    let audit = hosts[1].p.swarm(&["audit", "--check"]);
    assert!(
        audit
            .stdout
            .contains(&format!("PENDING control_waiting {cid}")),
        "{audit:?}"
    );
    wait_until(LONG, "a's status shows the answer waiting on b", || {
        hosts[0]
            .status()
            .contains("on b it waits for the clarify's copy to reach boss")
    });
    // Nothing is lost across a restart: b's bridge is killed, the copy is
    // delivered meanwhile, and the bridge that comes back applies it.
    hosts[1].kill_bridge();
    hosts[1].start_daemon();
    hosts[1].wait_copies("boss", 1, "the clarify reached boss on b");
    hosts[1].start_bridge();
    hosts[0].wait_copies("lead", 1, "boss's answer reached lead on a");
    let a = &hosts[0].copies("lead")[0];
    assert_eq!(file_header(a, "type").as_deref(), Some("answer"));
    assert_eq!(file_header(a, "in_reply_to").as_deref(), Some(id.as_str()));
    // b journals the record applied, then removes it from waiting/, both
    // after its effect: the answer can reach a first.
    wait_until(LONG, "b journaled the answer applied", || {
        journaled(&hosts[1], "control_applied", &cid)
    });
    wait_until(LONG, "b's waiting folder is empty", || {
        files(&hosts[1].p.path(".swarmforge/bridge/control/waiting")).is_empty()
    });
    for h in &hosts {
        audit_clean(h);
    }
}

#[test]
fn the_cockpit_answers_a_clarify_whose_copy_is_on_another_host() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], ASK);
    start_all(&mut hosts);
    let q = hosts[0].send("lead", CLARIFY);
    let id = id_of(&q);
    hosts[1].wait_copies("boss", 1, "the clarify reached boss on b");
    let cockpit = crate::serve::start(&hosts[0].p);
    let r = cockpit.post("/api/answer", serde_json::json!({"id": id, "choices": [2]}));
    assert_eq!(r.code, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["status"], "sent", "{v}");
    let cid = v["control"].as_str().unwrap().to_string();
    hosts[0].wait_copies("lead", 1, "boss's answer reached lead on a");
    let a = &hosts[0].copies("lead")[0];
    assert_eq!(file_header(a, "in_reply_to").as_deref(), Some(id.as_str()));
    wait_until(LONG, "b journaled the cockpit's answer applied", || {
        journaled(&hosts[1], "control_applied", &cid)
    });
}

#[test]
fn controls_sent_while_a_host_is_away_are_applied_in_order_when_it_returns() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = two_hosts(&nats);
    hosts[1].kill_bridge();
    let ids: Vec<String> = [
        vec!["pause"],
        vec!["resume"],
        vec!["pause", "--type", "note"],
        vec!["pause", "--type", "post"],
    ]
    .iter()
    .map(|a| control_id(&hosts[0].p.swarm(a).ok().stdout))
    .collect();
    wait_until(LONG, "a's status shows them pending on b", || {
        let st = status_json(&hosts[0]);
        st["swarm_control"]["controls"]
            .as_array()
            .is_some_and(|c| c.len() == 4 && c.iter().all(|c| c["pending"][0] == "b"))
    });
    // a's own bridge away too: the next control waits in a's outbox.
    let out = hosts[0].p.path(".swarmforge/bridge/control/out");
    wait_until(LONG, "a published the four", || files(&out).is_empty());
    hosts[0].kill_bridge();
    let last = control_id(&hosts[0].p.swarm(&["resume"]).ok().stdout);
    assert_eq!(
        files(&hosts[0].p.path(".swarmforge/bridge/control/out")).len(),
        1
    );
    hosts[1].start_bridge();
    wait_until(LONG, "b applied the first four", || {
        ids.iter()
            .all(|i| journaled(&hosts[1], "control_applied", i))
    });
    let paused_b = fs::read_to_string(hosts[1].p.path(".swarmforge/paused")).unwrap();
    assert!(
        paused_b.contains("\"note\"") && paused_b.contains("\"post\""),
        "{paused_b}"
    );
    // In order: b's journal has them as a sent them.
    let order: Vec<String> = controls(&hosts[1])
        .iter()
        .filter(|e| e["kind"] == "control_applied")
        .map(|e| {
            e["reason"]
                .as_str()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(order, ids);
    hosts[0].start_bridge();
    wait_until(LONG, "b applied a's last resume", || {
        journaled(&hosts[1], "control_applied", &last) && !paused(&hosts[1])
    });
    // A moves a record to sent/ once its server acknowledged it, which may
    // come after B applied it.
    wait_until(LONG, "a's control outbox emptied", || {
        files(&hosts[0].p.path(".swarmforge/bridge/control/out")).is_empty()
    });
    for h in &hosts {
        audit_clean(h);
    }
}

/// A record as host `host`'s `swarm pause` writes it.
fn record(host: &str, n: u64) -> String {
    format!(
        r#"{{"id":"{host}.{n:020}.42","host":"{host}","by":"mallory","at":"2026-12-02T00:00:00Z","kind":"pause","types":[]}}"#
    )
}

#[test]
fn control_records_from_strangers_or_malformed_are_refused_and_a_redelivered_one_applies_once() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, hosts) = two_hosts(&nats);
    let subject = |h: &str| format!("swarm.swarm.control.{h}");
    // A host not in `hosts:`.
    publish(&nats, &subject("zed"), &[], &record("zed", 1));
    // Malformed, and a record naming another host than its subject.
    publish(&nats, &subject("a"), &[], "{\"id\": 1, not json");
    publish(&nats, &subject("a"), &[], &record("b", 2));
    // A good record of a's, published twice (as a bridge that crashed
    // after the PubAck would, past JetStream's de-duplication window).
    let good = record("a", 3);
    publish(&nats, &subject("a"), &[("Nats-Msg-Id", "x1")], &good);
    publish(&nats, &subject("a"), &[("Nats-Msg-Id", "x2")], &good);
    let id = format!("a.{:020}.42", 3);
    wait_until(LONG, "b applied the good record", || {
        journaled(&hosts[1], "control_applied", &id)
    });
    wait_until(LONG, "b refused the three bad ones", || {
        controls(&hosts[1])
            .iter()
            .filter(|e| e["kind"] == "control_refused")
            .count()
            == 3
    });
    let refused: Vec<String> = controls(&hosts[1])
        .iter()
        .filter(|e| e["kind"] == "control_refused")
        .map(|e| e["reason"].as_str().unwrap().to_string())
        .collect();
    assert!(
        refused[0].contains("host 'zed' is not one of the hosts"),
        "{refused:?}"
    );
    assert!(
        refused[1].contains("malformed control record"),
        "{refused:?}"
    );
    assert!(
        refused[2].contains("names host 'b' but host a published it"),
        "{refused:?}"
    );
    assert!(
        hosts[1].log().contains("rejected control record"),
        "{}",
        hosts[1].log()
    );
    // A later record proves the duplicate was consumed: applied once.
    publish(
        &nats,
        &subject("a"),
        &[],
        &record("a", 4).replace("pause", "resume"),
    );
    let later = format!("a.{:020}.42", 4);
    wait_until(LONG, "b applied the later record", || {
        journaled(&hosts[1], "control_applied", &later)
    });
    let applied = controls(&hosts[1])
        .iter()
        .filter(|e| e["reason"].as_str().unwrap().starts_with(&id))
        .count();
    assert_eq!(applied, 1);
    // The status shows the refusals, the daemons are alive.
    let st = hosts[1].status();
    assert!(st.contains("refused control record:"), "{st}");
    assert!(st.contains("handoffd: running"), "{st}");
}

#[test]
fn the_audit_reports_a_control_that_was_skipped() {
    // A check that says OK must be able to say not OK: b's journal lacks
    // the first of two controls of a that it applied.
    let Some(nats) = Nats::start() else { return };
    let (_hub, hosts) = two_hosts(&nats);
    let first = control_id(&hosts[0].p.swarm(&["pause"]).ok().stdout);
    let second = control_id(&hosts[0].p.swarm(&["resume"]).ok().stdout);
    wait_until(LONG, "b applied both", || {
        journaled(&hosts[1], "control_applied", &second)
    });
    // b judges a's controls by a's journal, mirrored: wait for it.
    let mirror = hosts[1].p.path(".swarmforge/bridge/events/a.jsonl");
    wait_until(LONG, "a's control_sent events reached b", || {
        fs::read_to_string(&mirror).is_ok_and(|t| t.contains(&second))
    });
    audit_clean(&hosts[1]);
    let events = hosts[1].p.path(".swarmforge/daemon/events.jsonl");
    let text = fs::read_to_string(&events).unwrap();
    // Keep only what follows b's last line about the first control: b's
    // journal now also begins after a sent it (as when b's daemon was slow
    // to start), which is not a pruned journal and must still be judged.
    let lines: Vec<&str> = text.lines().collect();
    let last = lines.iter().rposition(|l| l.contains(&first)).unwrap();
    let kept: String = lines[last + 1..].iter().map(|l| format!("{l}\n")).collect();
    assert!(kept.contains(&second), "{kept}");
    fs::write(&events, kept).unwrap();
    let r = hosts[1].p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stdout
            .contains(&format!("VIOLATION control_not_applied {first}")),
        "{}",
        r.stdout
    );
}

#[test]
fn a_pause_and_a_resume_issued_at_once_on_two_hosts_end_the_same_everywhere() {
    // b is away when it pauses and a resumes: a's resume reaches the
    // stream first, so b's pause is the later one on every host.
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = two_hosts(&nats);
    hosts[1].kill_bridge();
    let pause = control_id(&hosts[1].p.swarm(&["pause"]).ok().stdout);
    let resume = control_id(&hosts[0].p.swarm(&["resume"]).ok().stdout);
    let out = hosts[0].p.path(".swarmforge/bridge/control/out");
    wait_until(LONG, "a's resume is in the stream", || {
        files(&out).is_empty()
    });
    hosts[1].start_bridge();
    wait_until(LONG, "each applied the other's", || {
        journaled(&hosts[1], "control_applied", &resume)
            && journaled(&hosts[0], "control_applied", &pause)
    });
    wait_until(LONG, "both hosts end paused", || {
        paused(&hosts[0]) && paused(&hosts[1])
    });
    // b applied its own pause again after a's resume, and said so.
    wait_until(LONG, "b journaled its pause applied again", || {
        controls(&hosts[1]).iter().any(|e| {
            let r = e["reason"].as_str().unwrap_or("");
            e["kind"] == "control_applied"
                && r.starts_with(&pause)
                && r.contains("again, in the stream's order")
        })
    });
}

/// Blanks every line of `file` (spaces, newlines kept, so offsets stay).
fn blank(file: &Path) {
    let text = fs::read_to_string(file).unwrap();
    let blanked: String = text
        .chars()
        .map(|c| if c == '\n' { c } else { ' ' })
        .collect();
    fs::write(file, blanked).unwrap();
}

#[test]
fn status_reads_only_what_the_journals_gained_since_it_last_looked() {
    let p = Project::builder()
        .config("hosts: [a, b]\nbridge: nats://127.0.0.1:1\nroles:\n  - {name: ping, agent: human, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong}\n")
        .build();
    fs::write(p.path(".swarmforge/host"), "a\n").unwrap();
    // The journal's folder, as a daemon that ever ran leaves it.
    fs::create_dir_all(p.path(".swarmforge/daemon")).unwrap();
    let first = control_id(&p.swarm(&["pause"]).ok().stdout);
    // Host b applied it, as b's mirrored journal says.
    let mirror = p.path(".swarmforge/bridge/events/b.jsonl");
    fs::create_dir_all(mirror.parent().unwrap()).unwrap();
    let applied = |id: &str, offset: u64| {
        format!(
            "{}\n",
            serde_json::json!({"host": "b", "offset": offset, "event": {
                "kind": "control_applied", "time": "2026-12-02T00:00:00.000000Z",
                "reason": format!("{id} pause by alice on a: all delivery paused"),
            }})
        )
    };
    fs::write(&mirror, applied(&first, 10)).unwrap();
    let shown = |p: &Project, id: &str| {
        let st = p.swarm(&["status"]).ok().stdout.clone();
        st.lines().any(|l| {
            l.contains(&format!("control {id} pause by "))
                && l.contains(", b (all delivery paused)")
        })
    };
    assert!(shown(&p, &first), "{}", p.swarm(&["status"]).stdout);
    // What was read once is not read again: blanked, it still shows.
    blank(&p.path(".swarmforge/daemon/events.jsonl"));
    blank(&mirror);
    assert!(shown(&p, &first), "{}", p.swarm(&["status"]).stdout);
    // What comes after is read.
    let second = control_id(&p.swarm(&["pause", "--type", "note"]).ok().stdout);
    fs::OpenOptions::new()
        .append(true)
        .open(&mirror)
        .unwrap()
        .write_all(applied(&second, 20).as_bytes())
        .unwrap();
    assert!(shown(&p, &first) && shown(&p, &second));
    // A lost index is rebuilt from the files (here: only what they still say).
    fs::remove_file(p.path(".swarmforge/bridge/control/index.json")).unwrap();
    assert!(shown(&p, &second) && !shown(&p, &first));
}
