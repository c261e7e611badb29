//! The crash test of the control records, both sides on the ledger's
//! harness (`protocol::ledger::crash`): a child (this test binary again)
//! is SIGKILLed after each durable step in turn, then its restart after
//! each of its own, then a third run finishes. One host, `a`, of two:
//! - it issues a record and publishes it to a stand-in for the stream that
//!   keeps one message per id, as JetStream's `Nats-Msg-Id` does
//!   (`control::issue`, `waiting`, `mark_sent`);
//! - it takes three records of host `b` from a stand-in for its consumer
//!   (acknowledged by a cursor) through the real `control_receive::receive`:
//!   a pause, an approval of a message not held here, and an answer that
//!   must wait for its clarify's role (parked); then the role turns out to
//!   be on `b`, and `control_wait::retry` applies the answer.
//!
//! Every run ends with: one message per record in the stream, the same
//! bytes kept in `sent/`, the outbox empty; every record of `b`
//! acknowledged, tombstoned in `seen/` and applied, each effect once (one
//! pause, one fingerprint in the approval), nothing left waiting.

use std::path::{Path, PathBuf};

use super::control::{self, Action};
use super::{control_receive, control_wait, Settings};
use crate::fsx;
use crate::protocol::config::Config;
use crate::protocol::layout::Project;
use crate::protocol::ledger::crash::{self, kill_at_every_step, pause};

const CHILD_TEST: &str = "bridge::control_crash::crash_child";
const HELD: &str = "20260101T000000Z_000001_from_x";
const CLARIFY: &str = "20260101T000000Z_000002_from_x";
const SHA: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const LOCAL: &str = "pong\tpong\tpong\t\t\thuman\n";
const ELSEWHERE: &str = "pong\t@b\tpong\t\t\thuman\n";

fn project(root: &Path) -> Project {
    Project::new(root.join("project"))
}

/// Host `b`'s records, in the stream's order.
fn b_records() -> [(String, String); 3] {
    let id = |n: u64| format!("b.{n:020}.7");
    let rec = |n: u64, kind: &str| {
        let head = format!(r#"{{"id":"{}","host":"b","by":"bob","at":"t","#, id(n));
        (id(n), format!("{head}{kind}}}"))
    };
    [
        rec(1, r#""kind":"pause","types":[]"#),
        rec(
            2,
            &format!(r#""kind":"approve","message":"{HELD}","sha256":"{SHA}""#),
        ),
        rec(
            3,
            &format!(
                r#""kind":"answer","message":"{CLARIFY}","choices":[],"text":"yes","to":["pong"]"#
            ),
        ),
    ]
}

fn setup(root: &Path) {
    let p = project(root);
    for d in [p.swarmforge(), p.daemon_dir(), root.join("stream")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        p.config_file(),
        "hosts: [a, b]\nbridge: nats://127.0.0.1:1\n",
    )
    .unwrap();
    std::fs::write(p.host_file(), "a\n").unwrap();
    std::fs::write(p.roles_tsv(), LOCAL).unwrap();
    for (n, (_, r)) in b_records().iter().enumerate() {
        std::fs::write(root.join("stream").join(n.to_string()), r).unwrap();
    }
}

/// This host's side: one record issued, published, retired into `sent/`.
fn publish_side(root: &Path, p: &Project) {
    let stream = root.join("published");
    fsx::ensure_dirs(&[&stream]).unwrap();
    // The person's command: killed before its record was durable, it did
    // nothing, and runs again.
    let sent = crate::protocol::layout::names_in(&control::sent(p));
    if control::waiting(p).is_empty() && sent.is_empty() {
        control::issue(p, Action::Resume, "resumed here").unwrap();
    }
    for r in control::waiting(p) {
        let msg = stream.join(&r.id);
        if !msg.exists() {
            let bytes = serde_json::to_vec(&r).unwrap();
            fsx::publish(&stream, &msg, &bytes).unwrap();
            pause("published");
        }
        control::mark_sent(p, &r.id).unwrap();
    }
}

/// The bridge's settings on host `a`.
fn settings(p: &Project) -> Settings {
    Settings {
        project: p.clone(),
        config: Config::load(&p.config_file()).unwrap(),
        host: "a".into(),
        url: "nats://127.0.0.1:1".into(),
    }
}

/// Host `b`'s records taken from the stream, acknowledged by a cursor.
fn receive_side(root: &Path, p: &Project) {
    let s = settings(p);
    let cursor = root.join("acked");
    loop {
        let acked: usize = std::fs::read_to_string(&cursor)
            .map(|t| t.parse().unwrap())
            .unwrap_or(0);
        let Ok(bytes) = std::fs::read(root.join("stream").join(acked.to_string())) else {
            break;
        };
        match control_receive::receive(&s, "b", &bytes) {
            control_receive::Outcome::Applied | control_receive::Outcome::Again => {}
            other => panic!("record {acked}: {other:?}"),
        }
        fsx::replace(root, &cursor, (acked + 1).to_string().as_bytes()).unwrap();
        pause("acked");
    }
    // What the answer waits for changes: its role is on host b after all.
    if std::fs::read_to_string(p.roles_tsv()).unwrap() == LOCAL {
        fsx::replace(&p.swarmforge(), &p.roles_tsv(), ELSEWHERE.as_bytes()).unwrap();
        pause("moved");
    }
    control_wait::retry(p);
}

/// The child's side: runs only in a child of the harness.
#[test]
fn crash_child() {
    let Some(root) = crash::child() else {
        return;
    };
    let p = project(&root);
    publish_side(&root, &p);
    receive_side(&root, &p);
}

fn names(d: &Path) -> Vec<String> {
    let mut v = crate::protocol::layout::names_in(d);
    v.retain(|n| !n.starts_with('.'));
    v.sort();
    v
}

fn journaled(p: &Project, kind: &str, id: &str) -> usize {
    let events = std::fs::read_to_string(p.events_file()).unwrap_or_default();
    let kind = format!(r#""kind":"{kind}""#);
    events
        .lines()
        .filter(|l| l.contains(&kind) && l.contains(&format!(r#""reason":"{id} "#)))
        .count()
}

fn check(root: &Path, after: &str) {
    let p = project(root);
    let control = p.bridge_dir().join("control");
    // This host's record: one message, kept whole in sent/.
    let published = names(&root.join("published"));
    assert_eq!(published.len(), 1, "one message in the stream, {after}");
    let id = &published[0];
    let kept = std::fs::read(control::sent(&p).join(format!("{id}.json")));
    let message = std::fs::read(root.join("published").join(id)).unwrap();
    assert_eq!(kept.unwrap(), message, "the same bytes kept, {after}");
    assert!(names(&control::outbox(&p)).is_empty(), "{after}");
    // Journaled after the record is durable: a kill between the two loses
    // the line (the command that was killed printed nothing either).
    assert!(journaled(&p, "control_sent", id) <= 1, "{after}");
    // Host b's records: acknowledged, tombstoned, applied.
    let ids: Vec<String> = b_records().into_iter().map(|(id, _)| id).collect();
    let acked = std::fs::read_to_string(root.join("acked")).unwrap();
    assert_eq!(acked, "3", "{after}");
    assert_eq!(names(&control.join("seen")), ids, "{after}");
    assert!(names(&control.join("waiting")).is_empty(), "{after}");
    for id in &ids {
        assert!(journaled(&p, "control_applied", id) >= 1, "{id} {after}");
    }
    assert!(journaled(&p, "control_waiting", &ids[2]) >= 1, "{after}");
    // Each effect once.
    assert!(p.pause_file().is_file(), "{after}");
    let approval = std::fs::read_to_string(p.approvals_dir().join(HELD)).unwrap();
    assert_eq!(
        approval.matches("sha256: ").count(),
        1,
        "{approval} {after}"
    );
}

#[test]
fn control_records_killed_after_any_step_are_carried_on_once() {
    let kills = kill_at_every_step(CHILD_TEST, setup, check);
    // Steps: requested, published, kept, three acks (the answer's requested
    // and tombstoned, the others' tombstoned, request and applied), moved,
    // and the answer's applied and retire.
    assert!(kills >= 14, "only {kills} kills");
    eprintln!("control crash test: {kills} SIGKILLs, each carried on once");
}

/// The control id is still the record's name in every folder it passes.
#[test]
fn a_control_id_names_its_files() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path());
    let p = project(d.path());
    let r = control::issue(&p, Action::Resume, "x").unwrap().unwrap();
    let out = control::outbox(&p).join(format!("{}.json", r.id));
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes, serde_json::to_vec(&r).unwrap());
    control::mark_sent(&p, &r.id).unwrap();
    assert!(!out.exists());
    let sent: PathBuf = control::sent(&p).join(format!("{}.json", r.id));
    assert_eq!(std::fs::read(sent).unwrap(), bytes);
}

/// A record parked, its host killed before its tombstone, and delivered
/// again once it need not wait is applied then and retired: not left
/// waiting to be applied a second time (which journaled a refusal).
#[test]
fn a_parked_record_delivered_again_once_it_need_not_wait_is_applied_once() {
    let d = tempfile::tempdir().unwrap();
    setup(d.path());
    let p = project(d.path());
    let s = settings(&p);
    let (id, record) = &b_records()[2];
    let applied = || control_receive::receive(&s, "b", record.as_bytes());
    assert_eq!(applied(), control_receive::Outcome::Applied);
    let waiting = p.bridge_dir().join("control").join("waiting");
    assert_eq!(names(&waiting), [format!("{id}.json")]);
    // What a kill after the park, before its tombstone, leaves.
    let seen = p.bridge_dir().join("control").join("seen").join(id);
    std::fs::remove_file(seen).unwrap();
    std::fs::write(p.roles_tsv(), ELSEWHERE).unwrap();
    assert_eq!(applied(), control_receive::Outcome::Applied);
    assert!(names(&waiting).is_empty());
    assert_eq!(control_wait::retry(&p), 0);
    assert_eq!(journaled(&p, "control_applied", id), 1);
    assert_eq!(journaled(&p, "control_refused", id), 0);
}
