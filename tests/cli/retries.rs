//! Delivery retries and the wake-up queue on disk (docs/swarmforge-compat.md
//! §6, docs/protocol.md §7.2). Upstream's protocol text (TT1410/swarm-forge
//! `swarmforge/handoff-protocol.md`, 390621d) says:
//!
//! > Leave transient failures in `outbox/`, record attempt/error/next-at
//! > metadata, and retry with exponential backoff capped at 60 seconds.
//! > Show a delivery in dashboard Attention after three failed attempts
//! > while continuing retries. Queue failed tmux wake-ups separately so
//! > notification trouble cannot turn a stored handoff into a failed
//! > delivery. Resume unfinished delivery and wake-up retries after daemon
//! > restart without duplicating recipient copies.
//!
//! Each `handoffd --once` below is a new process: a restart between every
//! attempt. The transient fault is the recipient's `inbox/new` being a
//! regular file (no copy can be written; removing it is the repair).

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{log_count as count, note, wait_delivered, wait_until, Project, DEADLINE};

fn two_roles() -> Project {
    Project::with_roles(&[
        ("coder", "master", "codex", "task"),
        ("reviewer", "rev", "codex", "task"),
    ])
}

/// Makes the reviewer's `inbox/new` a regular file; returns it.
fn break_inbox(p: &Project) -> PathBuf {
    let new = p.hq("rev", "inbox/new");
    fs::create_dir_all(new.parent().unwrap()).unwrap();
    fs::write(&new, "not a folder\n").unwrap();
    new
}

fn sidecar(outbox_file: &Path) -> PathBuf {
    let mut s = outbox_file.as_os_str().to_owned();
    s.push(".retry.edn");
    PathBuf::from(s)
}

/// The `:attempt` of a sidecar or record, when it is there.
fn attempt(f: &Path) -> Option<u32> {
    let t = fs::read_to_string(f).ok()?;
    let rest = &t[t.find(":attempt ")? + ":attempt ".len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn attention_record(p: &Project, name: &str) -> PathBuf {
    p.path(".swarmforge/handoffs/delivery_attention")
        .join(format!("{}.edn", name.strip_suffix(".handoff").unwrap()))
}

/// "A retry sidecar beside an outbox handoff records a transient delivery
/// failure. After three attempts, the daemon also writes a project-root
/// `delivery_attention` record for the dashboard while continuing
/// retries." The count goes on across restarts (every `--once` is one);
/// the sidecar is no message to any reader; the record shows in `swarm
/// status` and makes `swarm audit --check` fail; both go once the delivery
/// succeeds.
#[test]
fn a_failing_delivery_is_counted_beside_it_across_restarts_and_needs_attention_after_three() {
    let p = two_roles();
    let new = break_inbox(&p);
    let n = note("coder", 1, "reviewer", "stuck");
    let path = p.post("master", &n);
    let side = sidecar(&path);
    let record = attention_record(&p, &n.name);

    let r = p.deliver_once();
    assert_eq!(
        r.stdout, "handoffd: delivered 0, failed 0, deferred 1\n",
        "{r:?}"
    );
    assert!(path.exists());
    assert_eq!(attempt(&side), Some(1), "no sidecar after one failure");
    let text = fs::read_to_string(&side).unwrap();
    for key in [":handoff", ":last-error", ":next-at", ":first-failed-at"] {
        assert!(text.contains(key), "{key} missing: {text}");
    }
    let inbox = p.hq("rev", "inbox").display().to_string();
    assert!(text.contains(&format!(":last-error \"{inbox}")), "{text}");
    assert!(!record.exists(), "attention after one failure");

    // One failure is no violation (the broken inbox is one, and says so),
    // and the sidecar is no message.
    let r = p.swarm(&["audit", "--check"]);
    assert!(!r.stdout.contains("delivery_attention"), "{r:?}");
    assert!(!r.stdout.contains("retry.edn"), "{r:?}");
    let r = p.swarm(&["status", "--json"]);
    r.ok();
    let st: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let coder = st["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["role"] == "coder")
        .unwrap();
    assert_eq!(coder["outbox"], 1, "{st}");
    assert!(!r.stdout.contains("delivery_attention"), "{}", r.stdout);
    let r = p.swarm(&["transcript"]);
    r.ok();
    assert!(!r.stdout.contains("retry.edn"), "{}", r.stdout);
    let r = p.swarm(&["receipts", &n.id]);
    r.ok();
    assert!(!r.stdout.contains("retry.edn"), "{}", r.stdout);

    // Each restart counts on from the sidecar: 2, then 3, never back to 1.
    let mut seen = 1;
    wait_until(DEADLINE, "the third failed attempt", || {
        p.deliver_once();
        let a = attempt(&side).unwrap_or(0);
        assert!(a == seen || a == seen + 1, "attempt {a} after {seen}");
        if a == 2 {
            assert!(!record.exists(), "attention after two failures");
        }
        seen = a;
        a == 3
    });
    assert_eq!(attempt(&record), Some(3), "no attention record after three");
    let r = p.swarm(&["status"]);
    r.ok();
    assert!(r.stdout.contains("delivery "), "{}", r.stdout);
    assert!(r.stdout.contains(&n.name), "{}", r.stdout);
    let r = p.swarm(&["status", "--json"]);
    let st: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(
        st["attention"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "delivery"),
        "{st}"
    );
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stdout
            .contains(&format!("VIOLATION delivery_attention {}", path.display())),
        "{r:?}"
    );

    // The repair: the next attempt delivers, and both files go.
    fs::remove_file(&new).unwrap();
    wait_until(DEADLINE, "delivered after the repair", || {
        p.deliver_once();
        !path.exists()
    });
    assert!(p.hq("master", "sent").join(&n.name).exists());
    assert_eq!(p.files(&new), vec![n.name.clone()]);
    assert!(!side.exists(), "the sidecar outlived the delivery");
    assert!(
        !record.exists(),
        "the attention record outlived the delivery"
    );
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 0, "{r:?}");
}

/// kill -9 of a running daemon between the sidecar's write and the retry:
/// the next daemon goes on counting where the sidecar says ("Resume
/// unfinished delivery ... retries after daemon restart without
/// duplicating recipient copies"), and after the repair the reviewer holds
/// one copy.
#[test]
fn a_kill_9_between_the_sidecar_and_the_retry_resumes_the_count() {
    let p = two_roles();
    p.config("daemon: {rescan: 50ms}\n");
    let new = break_inbox(&p);
    let n = note("coder", 1, "reviewer", "stuck");
    let path = p.post("master", &n);
    let side = sidecar(&path);
    let d = p.spawn_daemon(&[]);
    wait_until(DEADLINE, "a sidecar", || attempt(&side).is_some());
    drop(d); // SIGKILL
    let before = attempt(&side).unwrap();
    assert!(path.exists());

    let _d = p.spawn_daemon(&[]);
    let mut next = before;
    wait_until(DEADLINE, "the next attempt", || {
        next = attempt(&side).unwrap_or(0);
        next != before
    });
    assert_eq!(
        next,
        before + 1,
        "the count started again after the restart"
    );
    wait_until(DEADLINE, "attention after the third attempt", || {
        attention_record(&p, &n.name).exists()
    });
    fs::remove_file(&new).unwrap();
    wait_delivered(&p, &path);
    assert_eq!(p.files(&new), vec![n.name.clone()]);
    wait_until(DEADLINE, "sidecar and record removed", || {
        !side.exists() && !attention_record(&p, &n.name).exists()
    });
}

/// A sidecar or an attention record whose handoff left the outbox another
/// way (removed by hand) is removed by the next pass; "malformed handoffs
/// and unknown recipients are permanent" still go to `failed/` at once,
/// with no sidecar.
#[test]
fn a_sidecar_without_its_handoff_is_removed_and_permanent_errors_still_fail() {
    let p = two_roles();
    let _new = break_inbox(&p);
    let n = note("coder", 1, "reviewer", "stuck");
    let path = p.post("master", &n);
    let side = sidecar(&path);
    let record = attention_record(&p, &n.name);
    wait_until(DEADLINE, "attention", || {
        p.deliver_once();
        record.exists()
    });
    fs::remove_file(&path).unwrap();
    p.deliver_once();
    assert!(!side.exists(), "orphan sidecar kept");
    assert!(!record.exists(), "orphan attention record kept");

    // An orphan left by a crash (no record of it in memory at all).
    let orphan = sidecar(
        &p.hq("master", "outbox")
            .join(&note("coder", 9, "reviewer", "x").name),
    );
    fs::write(&orphan, "{:attempt 1}\n").unwrap();
    p.deliver_once();
    assert!(!orphan.exists(), "orphan sidecar kept");

    let bad = note("coder", 2, "nobody", "unknown recipient");
    let bad_path = p.post("master", &bad);
    let r = p.deliver_once();
    assert!(r.stdout.contains("failed 1"), "{r:?}");
    assert!(p.hq("master", "failed").join(&bad.name).exists());
    assert!(!sidecar(&bad_path).exists());
    assert_eq!(count(&p.log(), "failed"), 1);
}

/// A delivered note whose wake-up failed (the wake command succeeds only
/// once `ok` exists, and appends the role to `wakes`), queued on disk in
/// `queued`, the daemon still running.
struct FailedWake {
    p: Project,
    ok: PathBuf,
    wakes: PathBuf,
    queued: PathBuf,
    daemon: crate::support::Daemon,
    note: crate::support::Note,
}

fn failed_wake() -> FailedWake {
    let p = two_roles();
    let ok = p.path("wake-ok");
    let wakes = p.path("wakes.txt");
    p.config(&format!(
        "daemon: {{sweep: 100ms, ack_within: 1h}}\nwake: {{method: command, command: \"test -e {} && echo $SWARMFORGE_ROLE >> {}\"}}\n",
        ok.display(),
        wakes.display()
    ));
    let queued = p.path(".swarmforge/daemon/wakeups/reviewer.edn");
    let d = p.spawn_daemon(&[]);
    let n = note("coder", 1, "reviewer", "hello");
    let path = p.post("master", &n);
    wait_delivered(&p, &path);
    wait_until(DEADLINE, "the failed wake-up queued", || {
        attempt(&queued).is_some()
    });
    FailedWake {
        p,
        ok,
        wakes,
        queued,
        daemon: d,
        note: n,
    }
}

/// "Queue failed tmux wake-ups separately so notification trouble cannot
/// turn a stored handoff into a failed delivery", in the durable queue
/// `.swarmforge/daemon/wakeups/`, resumed after a restart. The delivery
/// stands throughout; once the wake-up works it is retried and the record
/// goes. `ack_within: 1h` keeps the in-memory re-wake out of it.
#[test]
fn a_failed_wake_up_is_queued_on_disk_and_retried_after_a_restart() {
    let FailedWake {
        p,
        ok,
        wakes,
        queued,
        daemon: d,
        note: n,
    } = failed_wake();
    let r = p.swarm(&["status"]);
    assert!(r.stdout.contains("wake retry: reviewer failed"), "{r:?}");
    drop(d); // SIGKILL

    fs::write(&ok, "").unwrap();
    let _d = p.spawn_daemon(&[]);
    wait_until(DEADLINE, "the queued wake-up retried", || {
        fs::read_to_string(&wakes).is_ok_and(|w| w == "reviewer\n")
    });
    wait_until(DEADLINE, "the queue record removed", || !queued.exists());
    // Never undone, never repeated: one copy, the original in sent/.
    let copy = p.hq("rev", "inbox/new").join(&n.name);
    assert!(copy.exists());
    assert!(p.hq("master", "sent").join(&n.name).exists());
    assert_eq!(count(&p.log(), "delivered"), 1, "{}", p.log());
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 0, "{r:?}");
}

/// A queued wake-up whose mail the agent took meanwhile is dropped, not
/// typed: there is nothing left to wake for, and the item taken stays
/// where the agent put it.
#[test]
fn a_queued_wake_up_for_mail_already_taken_is_dropped() {
    let FailedWake {
        p,
        ok,
        wakes,
        queued,
        daemon: d,
        note: n,
    } = failed_wake();
    drop(d); // SIGKILL
    let r = p.cmd("ready-next").role("reviewer").run();
    r.ok();
    fs::write(&ok, "").unwrap();
    let _d = p.spawn_daemon(&[]);
    wait_until(DEADLINE, "the queue record dropped", || !queued.exists());
    assert!(
        !wakes.exists(),
        "a wake-up was typed for mail already taken"
    );
    assert!(p.hq("rev", "inbox/in_process").join(&n.name).exists());
}
