//! The daemon journals work taken and finished (crates/swarm-delivery/src/daemon/progress.rs):
//! `dequeued` and `completed` lines with the copy's own stamps, also for
//! what moved while no daemon ran, never twice, and `swarm audit --check`
//! says when the journal and the files disagree.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::support::{file_header, note, wait_delivered, wait_until, Project, DEADLINE};

fn two_roles() -> Project {
    Project::with_roles(&[
        ("coder", "master", "codex", "task"),
        ("reviewer", "rev", "codex", "task"),
    ])
}

/// The journal's `kind` lines about message `id`.
fn lines(p: &Project, kind: &str, id: &str) -> Vec<Value> {
    p.events()
        .into_iter()
        .filter(|e| e["kind"] == kind && e["id"] == id)
        .collect()
}

/// The one file in a folder.
fn only_file(dir: &Path) -> std::path::PathBuf {
    let v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "handoff"))
        .collect();
    assert_eq!(v.len(), 1, "{v:?}");
    v[0].clone()
}

/// Sends note `seq` from coder to reviewer and waits for its delivery.
fn deliver(p: &Project, seq: u32) -> String {
    let n = note("coder", seq, "reviewer", &format!("work {seq}"));
    let out = p.post("master", &n);
    wait_delivered(p, &out);
    n.id
}

fn take_and_finish(p: &Project) {
    p.cmd("ready-next").role("reviewer").run().ok();
    p.cmd("done-current").role("reviewer").run().ok();
}

fn stamps_of(path: &Path) -> Value {
    let s = |n: &str| file_header(path, n).map_or(Value::Null, Value::from);
    serde_json::json!({
        "created_at": s("created_at"),
        "enqueued_at": s("enqueued_at"),
        "dequeued_at": s("dequeued_at"),
        "completed_at": s("completed_at"),
    })
}

#[test]
fn taking_and_finishing_are_journaled_once_with_the_files_stamps_also_after_a_crash() {
    let p = two_roles();
    let mut d = p.spawn_daemon(&[]);
    let first = deliver(&p, 1);
    p.cmd("ready-next").role("reviewer").run().ok();
    let taken = only_file(&p.hq("rev", "inbox/in_process"));
    wait_until(DEADLINE, "the dequeued line", || {
        lines(&p, "dequeued", &first).len() == 1
    });
    let l = &lines(&p, "dequeued", &first)[0];
    assert_eq!(l["recipient"], "reviewer");
    assert_eq!(l["stamps"], stamps_of(&taken), "{l}");
    p.cmd("done-current").role("reviewer").run().ok();
    let done = only_file(&p.hq("rev", "inbox/completed"));
    wait_until(DEADLINE, "the completed line", || {
        lines(&p, "completed", &first).len() == 1
    });
    let l = &lines(&p, "completed", &first)[0];
    assert_eq!(l["stamps"], stamps_of(&done), "{l}");
    assert_eq!(l["path"], done.display().to_string());

    // Killed (as a crash would), then work is taken and finished while no
    // daemon watches: the next daemon journals it before `started`.
    let second = deliver(&p, 2);
    drop(d);
    take_and_finish(&p);
    assert!(lines(&p, "completed", &second).is_empty());
    d = p.spawn_daemon(&[]);
    for kind in ["dequeued", "completed"] {
        assert_eq!(lines(&p, kind, &second).len(), 1, "{kind} {second}");
        // And what was journaled before is not journaled again.
        assert_eq!(lines(&p, kind, &first).len(), 1, "{kind} {first}");
    }
    let done2 = p.hq("rev", "inbox/completed").join(
        fs::read_dir(p.hq("rev", "inbox/completed"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.contains(&second))
            .unwrap(),
    );
    assert_eq!(
        lines(&p, "completed", &second)[0]["stamps"],
        stamps_of(&done2)
    );
    // Taken under one daemon, finished under the next: one `dequeued`.
    let third = deliver(&p, 3);
    p.cmd("ready-next").role("reviewer").run().ok();
    wait_until(DEADLINE, "the third's dequeued line", || {
        lines(&p, "dequeued", &third).len() == 1
    });
    drop(d);
    d = p.spawn_daemon(&[]);
    p.cmd("done-current").role("reviewer").run().ok();
    wait_until(DEADLINE, "the third's completed line", || {
        lines(&p, "completed", &third).len() == 1
    });
    assert_eq!(lines(&p, "dequeued", &third).len(), 1);
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 0, "{r:?}");
    drop(d);
}

#[test]
fn audit_check_says_when_the_journal_and_the_files_disagree() {
    let p = two_roles();
    let d = p.spawn_daemon(&[]);
    let id = deliver(&p, 1);
    take_and_finish(&p);
    let done = only_file(&p.hq("rev", "inbox/completed"));
    let finished = file_header(&done, "completed_at").unwrap();
    // The daemon's mark passes the copy's completion (written every few
    // seconds while work moves).
    let mark = p.path(".swarmforge/daemon/progress.json");
    wait_until(DEADLINE, "handoffd's mark after the completion", || {
        fs::read_to_string(&mark).is_ok_and(|s| {
            let v: Value = serde_json::from_str(&s).unwrap_or_default();
            let since = v["since_ns"].as_u64().unwrap_or(0);
            let done = chrono::DateTime::parse_from_rfc3339(&finished).unwrap();
            since as i128 > done.timestamp_nanos_opt().unwrap() as i128 + 3_000_000_000
        })
    });
    drop(d);
    let ok = p.swarm(&["audit", "--check"]);
    assert_eq!(ok.code, 0, "{ok:?}");

    // The line lost: the files say finished, the journal does not.
    let events = p.path(".swarmforge/daemon/events.jsonl");
    let text = fs::read_to_string(&events).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !(l.contains("\"kind\":\"completed\"") && l.contains(&id)))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&events, &kept).unwrap();
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stdout
            .contains(&format!("VIOLATION not_journaled {}", done.display())),
        "{}",
        r.stdout
    );

    // The file removed by hand: the journal says finished, the files do not.
    fs::write(&events, &text).unwrap();
    fs::remove_file(&done).unwrap();
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stdout
            .contains(&format!("VIOLATION journaled_without_file {id}")),
        "{}\n{}\n{}",
        r.stdout,
        fs::read_to_string(&events).unwrap(),
        fs::read_to_string(&mark).unwrap()
    );
}
