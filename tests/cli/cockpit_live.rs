//! The cockpit's role cards follow the queue from the watcher's events
//! (docs/cockpit.md, "Live updates"; `serve/folders.rs`): an item that
//! arrives, is taken, and is completed moves the recipient's counts both
//! ways on the page, without the server listing the folders per change.

use std::path::Path;

use crate::serve::{start, Cockpit};
use crate::support::{Project, Role, DEADLINE};

/// The cards on the page once `want` holds for `role`'s card.
fn card_until(c: &Cockpit, role: &str, what: &str, want: &dyn Fn(&serde_json::Value) -> bool) {
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let snap = c.with_cookie("GET", "/api/snapshot", &[], "").json();
        let card = snap["roles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["role"] == role)
            .cloned()
            .unwrap();
        if want(&card) {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {role}'s card to show {what}: {card:#}"
        );
        std::thread::yield_now();
    }
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn a_cards_counts_follow_arrivals_takes_and_completions() {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .config("wake: {method: none}\n")
        .build();
    let c = start(&p);
    let mut sent = Vec::new();
    for i in 0..3 {
        let q = p
            .send_as(
                "coder",
                &format!("type: note\nto: qa\npriority: 50\nmessage: item {i}\n"),
            )
            .ok()
            .queued();
        sent.push(name(&q));
    }
    card_until(&c, "coder", "3 in its outbox", &|r| r["outbox"] == 3);
    p.deliver_once().ok();
    card_until(&c, "coder", "an empty outbox", &|r| r["outbox"] == 0);
    card_until(&c, "qa", "3 waiting", &|r| {
        r["new"] == 3 && r["in_process"].is_null()
    });
    p.cmd("ready-next").role("qa").stdout_has("item 0").run();
    card_until(&c, "qa", "2 waiting, item 0 in process", &|r| {
        r["new"] == 2 && r["in_process"]["summary"] == "item 0"
    });
    // done-current completes it and takes the next.
    p.cmd("done-current").role("qa").stdout_has("item 1").run();
    card_until(&c, "qa", "1 waiting, item 1 in process", &|r| {
        r["new"] == 1 && r["in_process"]["summary"] == "item 1"
    });
    p.cmd("done-current").role("qa").run();
    p.cmd("done-current").role("qa").run();
    card_until(&c, "qa", "nothing waiting or in process", &|r| {
        r["new"] == 0 && r["in_process"].is_null()
    });
    // A file dropped into failed/ by hand is counted too.
    let failed = p.hq("master", "failed");
    std::fs::create_dir_all(&failed).unwrap();
    std::fs::write(failed.join(&sent[0]), "x").unwrap();
    card_until(&c, "coder", "one failed", &|r| r["failed"] == 1);
    std::fs::remove_file(failed.join(&sent[0])).unwrap();
    card_until(&c, "coder", "none failed", &|r| r["failed"] == 0);
}
