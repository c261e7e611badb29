//! `ready-next --wait` / `done-current --wait`: the long poll for shell
//! agents, and reactions as annotations rather than work items.

use std::path::Path;

use crate::support::*;

/// Waits until a waiting `ready-next` has made its first look (the inbox
/// lock exists) and is still waiting.
fn waiting(started: &mut Started, wt: &Path) {
    let lock = hq(wt, "inbox.flock");
    wait_until(DEADLINE, "ready-next took its first look", || lock.exists());
    assert!(
        started.child.try_wait().unwrap().is_none(),
        "ready-next --wait returned with an empty inbox"
    );
}

#[test]
fn wait_returns_when_an_item_is_delivered() {
    let p = Project::coder_and_reviewer();
    let _d = p.spawn_daemon(&[]);
    // A wait far longer than the test's deadline: returning at all proves
    // it returned on the delivery, not at the end of the wait.
    let mut r = p
        .cmd("ready-next")
        .role("reviewer")
        .args(["--wait", "3600"])
        .start();
    waiting(&mut r, &p.wt_path("rev"));
    let q = p
        .send_as(
            "coder",
            "type: note\nto: reviewer\npriority: 50\nmessage: hi\n",
        )
        .queued();
    let run = r.finish(DEADLINE, "ready-next --wait returns on delivery");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("TASK: "), "{}", run.stdout);
    assert!(run.stdout.contains(&file_name(&q)), "{}", run.stdout);
    assert_count(&p.hq("rev", "inbox/in_process"), 1);
}

#[test]
fn wait_ends_with_no_task() {
    let p = Project::coder_and_reviewer();
    p.cmd("ready-next")
        .role("reviewer")
        .args(["--wait", "1"])
        .stdout("NO_TASK\n")
        .code(0)
        .run_within(DEADLINE);
    p.cmd("ready-next")
        .role("reviewer")
        .args(["--wait", "1", "--json"])
        .stdout("{\"schema_version\":1,\"status\":\"no_task\"}\n")
        .run_within(DEADLINE);
}

#[test]
fn wait_is_refused_when_malformed() {
    let p = Project::coder_and_reviewer();
    for bad in ["-1", "x", "3601", "1.5"] {
        p.cmd("ready-next")
            .role("reviewer")
            .arg(format!("--wait={bad}"))
            .code(1)
            .stderr_has("expected whole seconds from 0 to 3600")
            .run();
    }
}

#[test]
fn done_current_waits_for_the_next_item() {
    let p = Project::coder_and_reviewer();
    let _d = p.spawn_daemon(&[]);
    let first = p
        .send_as(
            "coder",
            "type: note\nto: reviewer\npriority: 50\nmessage: one\n",
        )
        .queued();
    wait_delivered(&p, &first);
    p.cmd("ready-next")
        .role("reviewer")
        .stdout_has("TASK: ")
        .run();
    let mut r = p
        .cmd("done-current")
        .role("reviewer")
        .args(["--wait", "3600"])
        .start();
    wait_until(DEADLINE, "the first item completed", || {
        files(&p.hq("rev", "inbox/completed")).len() == 1
    });
    assert!(
        r.child.try_wait().unwrap().is_none(),
        "done-current --wait did not wait"
    );
    p.send_as(
        "coder",
        "type: note\nto: reviewer\npriority: 50\nmessage: two\n",
    )
    .queued();
    let run = r.finish(DEADLINE, "done-current --wait returns on delivery");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("COMPLETED: "), "{}", run.stdout);
    assert!(run.stdout.contains("\nTASK: "), "{}", run.stdout);
}

#[test]
fn the_wrapper_passes_wait_through() {
    let p = Project::coder_and_reviewer();
    let shims = p.path("shims");
    std::fs::create_dir_all(&shims).unwrap();
    p.swarm(&["shims", shims.to_str().unwrap()]);
    p.cmd(shims.join("ready_for_next.sh").to_str().unwrap())
        .role("reviewer")
        .args(["--wait", "1"])
        .stdout("NO_TASK\n")
        .run_within(DEADLINE);
}

#[test]
fn a_reaction_is_an_annotation_not_a_task() {
    let p = Project::coder_and_reviewer();
    let wakes = p.record_wakes("");
    p.send_as(
        "coder",
        "type: note\nto: reviewer\npriority: 50\nmessage: review pls\n",
    )
    .queued();
    p.deliver_once().ok();
    let task = p
        .cmd("ready-next")
        .role("reviewer")
        .arg("--json")
        .run()
        .json();
    let id = task["id"].as_str().unwrap().to_string();
    // The reviewer reacts to the item in process (in_reply_to stamped).
    p.send_as(
        "reviewer",
        "type: react\nto: coder\npriority: 50\nreaction: thumbs_up\n",
    )
    .queued();
    p.deliver_once().ok();
    let woken = std::fs::read_to_string(&wakes).unwrap_or_default();
    assert_eq!(
        woken, "reviewer\n",
        "only the note wakes; the reaction does not"
    );
    // Nothing in process for coder: the reaction is shown, then NO_TASK.
    let out = p.cmd("ready-next").role("coder").code(0).run();
    assert_eq!(
        out.stdout,
        format!("REACTION: thumbs_up from reviewer on {id}\nNO_TASK\n")
    );
    assert!(files(&p.hq("master", "inbox/in_process")).is_empty());
    assert_count(&p.hq("master", "inbox/completed"), 1);
    // Shown once.
    p.cmd("ready-next").role("coder").stdout("NO_TASK\n").run();
    // Beside the message in the transcript, and counted by the audit.
    let t = p.swarm(&["transcript"]);
    assert!(t.stdout.contains("review pls"), "{}", t.stdout);
    assert!(t.stdout.contains("[thumbs_up reviewer]"), "{}", t.stdout);
    assert_eq!(t.stdout.matches("react").count(), 0, "{}", t.stdout);
}

#[test]
fn a_reaction_needs_a_message_and_a_known_reaction() {
    let p = Project::coder_and_reviewer();
    let r = p.send_as(
        "coder",
        "type: react\nto: reviewer\npriority: 50\nreaction: heart\n",
    );
    assert_eq!(r.code, 2);
    r.stderr_has("\n\nErrors:\n- Header 'reaction' must be one of thumbs_up, thumbs_down, fire, check, x or thinking; got 'heart'.\n- Missing required header 'in_reply_to' for react.\n");
}
