//! `swarm archive`: old finished items leave the live folders, the trail
//! stays whole (transcript, receipts and audit see them), and a kill -9 in
//! the middle is finished by running it again.

use std::path::Path;

use crate::support::{tomorrow, wait_until, walk, Project, Role, DEADLINE};

/// A finished exchange: `n` notes coder -> qa, delivered, taken and done
/// (qa takes batches), one refused draft-less file in coder's failed/.
fn finished(n: usize) -> Project {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa").mode("batch"))
        .build();
    for i in 0..n {
        let draft = format!("type: note\nto: qa\npriority: 10\nmessage: m{i}\n");
        p.send_as("coder", &draft).ok();
    }
    // One the daemon refuses (a forged header): an original in failed/.
    let bad = p.hq(
        "master",
        "outbox/10_20260101T000000Z_000999_from_coder_to_qa.handoff",
    );
    std::fs::write(
        &bad,
        "id: 20260101T000000Z_000999_from_coder\nfrom: coder\nto: qa\npriority: 10\ntype: note\nmessage: x\ncreated_at: 2026-01-01T00:00:00Z\nrecipient: qa\n\nbody\n",
    )
    .unwrap();
    p.deliver_once().ok();
    p.cmd("ready-next").role("qa").run().ok();
    p.cmd("done-current").role("qa").run().ok();
    p
}

fn handoff_files(dir: &Path) -> usize {
    walk(dir)
        .iter()
        .filter(|f| f.to_string_lossy().ends_with(".handoff"))
        .count()
}

#[test]
fn archived_items_leave_the_live_folders_and_stay_in_the_trail() {
    let p = finished(5);
    let before = p.cmd("swarm").args(["transcript"]).run();
    before.ok();
    let receipts = |p: &Project| {
        let id = p.cmd("swarm").args(["transcript", "--json"]).run();
        let first = id.stdout.lines().next().unwrap().to_string();
        let v: serde_json::Value = serde_json::from_str(&first).unwrap();
        let id = v["id"].as_str().unwrap().to_string();
        p.cmd("swarm").args(["receipts", &id]).run()
    };
    let receipts_before = receipts(&p);
    receipts_before.ok();
    let sent = p.hq("master", "sent");
    let failed = p.hq("master", "failed");
    let completed = p.hq("qa", "inbox/completed");
    assert_eq!(handoff_files(&sent), 5);
    assert_eq!(handoff_files(&failed), 1);
    assert_eq!(handoff_files(&completed), 5);

    // Nothing is older than the oldest day: nothing moves.
    let r = p
        .cmd("swarm")
        .args(["archive", "--before", "2000-01-01"])
        .run();
    r.ok();
    assert_eq!(handoff_files(&sent), 5);

    let r = p
        .cmd("swarm")
        .args(["archive", "--before", &tomorrow()])
        .run();
    r.ok();
    r.stdout_has("archived 6 originals and 1 completed items");
    assert_eq!(handoff_files(&sent), 0, "sent/ is empty");
    assert_eq!(handoff_files(&failed), 0, "failed/ is empty");
    assert_eq!(handoff_files(&completed), 0, "completed/ is empty");
    assert_eq!(handoff_files(&p.hq("master", "archive")), 6);
    assert_eq!(
        handoff_files(&p.hq("qa", "archive")),
        5,
        "the batch moved whole"
    );
    // The refusal's reason moved with it.
    let notes: Vec<_> = walk(&p.hq("master", "archive"))
        .into_iter()
        .filter(|f| f.to_string_lossy().ends_with(".error"))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");

    let after = p.cmd("swarm").args(["transcript"]).run();
    assert_eq!(after.stdout, before.stdout, "the transcript is unchanged");
    let receipts_after = receipts(&p);
    assert_eq!(
        receipts_after
            .stdout
            .replace("/archive/", "/")
            .lines()
            .count(),
        receipts_before.stdout.lines().count()
    );
    p.cmd("swarm").args(["audit", "--check"]).run().ok();
    // A second run finds nothing left to move.
    let r = p
        .cmd("swarm")
        .args(["archive", "--before", &tomorrow(), "--json"])
        .run();
    let v = r.json();
    assert!(v["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .all(|w| w["originals"] == 0 && w["completed"] == 0));
}

#[test]
fn a_killed_archive_is_finished_by_running_it_again() {
    let p = finished(300);
    let sent = p.hq("master", "sent");
    let failed = p.hq("master", "failed");
    let archive = p.hq("master", "archive");
    let mut child = p
        .cmd("swarm")
        .args(["archive", "--before", &tomorrow()])
        .spawn();
    wait_until(DEADLINE, "the archive has started", || {
        handoff_files(&archive) > 0
    });
    let _ = child.kill();
    let _ = child.wait();
    let live = handoff_files(&sent) + handoff_files(&failed);
    let archived = handoff_files(&archive);
    assert_eq!(live + archived, 301, "nothing lost or doubled mid-way");
    p.cmd("swarm")
        .args(["archive", "--before", &tomorrow()])
        .run()
        .ok();
    assert_eq!(handoff_files(&sent) + handoff_files(&failed), 0);
    assert_eq!(handoff_files(&archive), 301);
    p.cmd("swarm").args(["audit", "--check"]).run().ok();
}

#[test]
fn a_bad_day_is_refused_with_the_form_it_takes() {
    let p = finished(1);
    let r = p
        .cmd("swarm")
        .args(["archive", "--before", "last week"])
        .run();
    assert_eq!(r.code, 1);
    r.stderr_has("--before must be a day, YYYY-MM-DD (UTC); got 'last week'.");
}
