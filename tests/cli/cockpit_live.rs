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

/// `coder` at the root and `qa` in its own worktree, no wake-ups.
fn coder_and_qa() -> Project {
    Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .config("wake: {method: none}\n")
        .build()
}

/// Sends note `item <i>` from coder to qa; the queued outbox file.
fn send_item(p: &Project, i: usize) -> std::path::PathBuf {
    p.send_as(
        "coder",
        &format!("type: note\nto: qa\npriority: 50\nmessage: item {i}\n"),
    )
    .ok()
    .queued()
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn a_cards_counts_follow_arrivals_takes_and_completions() {
    let p = coder_and_qa();
    let c = start(&p);
    let mut sent = Vec::new();
    for i in 0..3 {
        sent.push(name(&send_item(&p, i)));
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

/// The queue-depth and latency charts show what happened before the server
/// started, as the daemon's journal says it (`dequeued` and `completed`
/// lines with the copies' stamps; docs/cockpit.md, "Charts"), without the
/// server reading a copy's file.
#[test]
fn the_charts_show_the_history_from_before_the_server_started_as_the_journal_says() {
    let p = coder_and_qa();
    let d = p.spawn_daemon(&[]);
    let mut ids = Vec::new();
    for i in 0..3 {
        let q = send_item(&p, i);
        crate::support::wait_delivered(&p, &q);
        ids.push(
            crate::support::file_header(&p.hq("master", "sent").join(name(&q)), "id").unwrap(),
        );
    }
    // Item 0 finished, item 1 in process, item 2 waiting.
    p.cmd("ready-next").role("qa").stdout_has("item 0").run();
    p.cmd("done-current").role("qa").stdout_has("item 1").run();
    let journaled = |kind: &str, id: &str| {
        p.events()
            .into_iter()
            .find(|e| e["kind"] == kind && e["id"] == id)
    };
    crate::support::wait_until(DEADLINE, "the journal's lines", || {
        journaled("completed", &ids[0]).is_some() && journaled("dequeued", &ids[1]).is_some()
    });
    let before = chrono::Utc::now().timestamp_millis();
    let c = start(&p);
    drop(d);

    // What the journal says: each copy waited from its enqueued_at to its
    // dequeued_at; item 2 waits still, since its enqueued_at.
    let secs = |v: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    let events = p.events();
    let first = secs(&events[0]["time"]);
    let mut waits = std::collections::BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| (e["kind"] == "dequeued" || e["kind"] == "completed") && e["recipient"] == "qa")
    {
        waits
            .entry(e["id"].as_str().unwrap().to_string())
            .or_insert((
                secs(&e["stamps"]["enqueued_at"]),
                secs(&e["stamps"]["dequeued_at"]),
            ));
    }
    let mut steps: Vec<(i64, i64)> = waits
        .values()
        .flat_map(|(a, b)| [(*a, 1), (*b, -1)])
        .collect();
    let waiting = crate::support::handoff_names(&p.hq("qa", "inbox/new"));
    assert_eq!(waiting.len(), 1);
    let enq =
        crate::support::file_header(&p.hq("qa", "inbox/new").join(&waiting[0]), "enqueued_at")
            .unwrap();
    steps.push((secs(&serde_json::Value::from(enq)), 1));
    steps.sort();
    let mut want: Vec<(i64, u64)> = Vec::new();
    let mut n = 0i64;
    for (t, d) in steps {
        n += d;
        let t = t.max(first);
        match want.last_mut() {
            Some(l) if l.0 == t => l.1 = n as u64,
            _ => want.push((t, n as u64)),
        }
    }
    assert!(want.iter().any(|p| p.1 >= 2), "{want:?}");

    let snap = c.with_cookie("GET", "/api/snapshot", &[], "").json();
    let depth: Vec<(i64, u64)> = snap["depth"]["qa"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_i64().unwrap(), p[1].as_u64().unwrap()))
        .collect();
    assert_eq!(depth, want, "{:#}", snap["depth"]);
    assert!(
        depth[0].0 <= before,
        "history from before the server started: {depth:?}"
    );

    // The latency of item 0's work, as its `completed` line's stamps say.
    let done = journaled("completed", &ids[0]).unwrap();
    let ms = |k: &str| {
        chrono::DateTime::parse_from_rfc3339(done["stamps"][k].as_str().unwrap())
            .unwrap()
            .timestamp_micros()
    };
    let card = snap["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "qa")
        .unwrap()
        .clone();
    let work = &card["latency"]["dequeued_to_completed"];
    assert_eq!(work["count"], 1, "{card:#}");
    assert_eq!(
        work["p50_ms"].as_i64().unwrap(),
        (ms("completed_at") - ms("dequeued_at")) / 1000,
        "{card:#}"
    );
}

/// `GET /api/audit` reads the trail once, then only what changed: after
/// deliveries, takes, completions and a refusal it says what `swarm audit
/// --json` (a full read) says.
#[test]
fn the_audit_kept_between_requests_says_what_a_full_read_says() {
    let p = coder_and_qa();
    let c = start(&p);
    let first = c.with_cookie("GET", "/api/audit", &[], "").json();
    assert_eq!(first["overall"]["copies"]["completed"], 0, "{first:#}");
    for i in 0..3 {
        send_item(&p, i);
    }
    p.deliver_once().ok();
    p.cmd("ready-next").role("qa").stdout_has("item 0").run();
    p.cmd("done-current").role("qa").stdout_has("item 1").run();
    // A file nobody can deliver: refused to failed/.
    crate::support::drop_in_outbox(
        &p.wt_path("master"),
        "50_20260615T140531Z_000009_from_coder_to_nobody.handoff",
        b"id: x\n\nbody\n",
    );
    p.deliver_once();
    let shape = |v: &serde_json::Value| {
        let mut v = v.clone();
        for k in ["now", "schema_version", "spend"] {
            v.as_object_mut().unwrap().remove(k);
        }
        let strip = |t: &mut serde_json::Value| {
            if let Some(o) = t["oldest_waiting"].as_object_mut() {
                o.remove("age_ms");
            }
        };
        strip(&mut v["overall"]);
        for r in v["roles"].as_array_mut().unwrap() {
            strip(r);
        }
        v
    };
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let full = shape(&p.swarm(&["audit", "--json"]).ok().json());
        let kept = shape(&c.with_cookie("GET", "/api/audit", &[], "").json());
        if kept == full {
            assert_eq!(kept["overall"]["copies"]["completed"], 1, "{kept:#}");
            assert_eq!(kept["overall"]["originals"]["failed"], 1, "{kept:#}");
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "the kept audit never said what a full read says:\n{kept:#}\n{full:#}"
        );
        std::thread::yield_now();
    }
}
