//! `swarm ingest` (issue 13): a log file followed as it grows, a partial
//! last line held back, a truncated or replaced file started over, and
//! every matching line posted exactly once across kill -9 and restarts.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::support::{handoff_names, require_tool, signal, wait_until, Project, Role, DEADLINE};

const PATTERN: &str = r"^\[INFO\] \[SPEAKER\] (?P<text>.+)$";

fn project() -> Project {
    Project::builder()
        .role(Role::new("speaker").worktree("speaker").agent("human"))
        .role(Role::new("ada").worktree("ada").agent("human"))
        .build()
}

/// The bodies of the speaker's posts, oldest first (outbox, then sent/: a
/// post the daemon moves meanwhile is seen in both, and counted once).
fn posts(p: &Project) -> Vec<String> {
    let mut all = std::collections::BTreeMap::new();
    for dir in ["outbox", "sent"] {
        let d = p.hq("speaker", dir);
        for n in handoff_names(&d) {
            let Ok(text) = fs::read_to_string(d.join(&n)) else {
                continue; // moved to sent/ since the listing
            };
            let (head, body) = text.split_once("\n\n").unwrap();
            assert!(
                head.contains("\ntype: post\n") && head.contains("\nto: all\n"),
                "{text}"
            );
            // Ordered by id (timestamp, then sequence).
            let id = n[3..n.find("_to_").unwrap()].to_string();
            all.insert(id, body.trim_end().to_string());
        }
    }
    all.into_values().collect()
}

fn append(path: &Path, text: &str) {
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn once(p: &Project, log: &Path, extra: &[&str]) -> crate::support::Run {
    let r = p
        .cmd("swarm")
        .args(["ingest", "--role", "speaker", "--match", PATTERN, "--once"])
        .arg("--file")
        .arg(log)
        .args(extra)
        .run_within(DEADLINE);
    r.ok();
    r
}

#[test]
fn partial_lines_wait_and_a_truncated_or_replaced_log_starts_over() {
    let p = project();
    fs::create_dir_all(p.root.join("logs")).unwrap();
    let log = p.root.join("logs/speaker.log");
    append(
        &log,
        "[INFO] [SYSTEM] starting\n[INFO] [SPEAKER] first point\n[INFO] [SPEAKER] sec",
    );
    once(&p, &log, &[]);
    assert_eq!(posts(&p), ["first point"], "the partial line is not posted");
    once(&p, &log, &[]);
    assert_eq!(posts(&p), ["first point"], "nothing new, nothing twice");
    append(&log, "ond point\x1b[0m\r\n");
    once(&p, &log, &[]);
    assert_eq!(posts(&p), ["first point", "second point[0m"]);

    // Truncated: shorter than the cursor; starts over at 0.
    fs::write(&log, "[INFO] [SPEAKER] after\n").unwrap();
    once(&p, &log, &[]).stdout_has("NEW_LOG: the file was truncated");
    assert_eq!(posts(&p), ["first point", "second point[0m", "after"]);
    // Rewritten in place to the same length or longer: other first bytes.
    fs::write(&log, "[INFO] [SPEAKER] AFTER\n[INFO] [SPEAKER] more\n").unwrap();
    once(&p, &log, &[]).stdout_has("NEW_LOG: the file was rewritten");
    assert_eq!(posts(&p)[3..], ["AFTER", "more"]);

    // Replaced (a rotation): another inode; with --sessions a new session
    // is opened for the new log.
    p.swarm(&["session", "start", "--title", "before"]).ok();
    let fresh = p.root.join("logs/new.log");
    fs::write(&fresh, "[INFO] [SPEAKER] rotated\n").unwrap();
    fs::rename(&fresh, &log).unwrap();
    once(&p, &log, &["--sessions"]).stdout_has("NEW_LOG: the file was replaced; session ");
    assert_eq!(posts(&p).last().unwrap(), "rotated");
    let sessions = p.swarm(&["session", "list", "--json"]).json();
    let list = sessions["sessions"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{sessions}");
    assert_eq!(
        list.iter()
            .filter(|s| s["close_reason"] == "new_log")
            .count(),
        1,
        "{sessions}"
    );
    assert!(
        list.iter()
            .any(|s| s["started_by"] == "speaker" && s["close_reason"].is_null()),
        "{sessions}"
    );
    once(&p, &log, &["--sessions"]);
    assert_eq!(
        p.swarm(&["session", "list", "--json"]).json()["sessions"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "no session for a log already read"
    );
}

#[test]
fn a_follower_posts_lines_as_the_log_grows_and_a_second_one_is_refused() {
    let p = project();
    let log = p.root.join("speaker.log");
    let follow = p
        .cmd("swarm")
        .args([
            "ingest", "--role", "speaker", "--match", PATTERN, "--to", "ada",
        ])
        .arg("--file")
        .arg(&log)
        .start();
    // The file may appear after the follower starts.
    append(&log, "[INFO] [SPEAKER] hello\n");
    wait_until(DEADLINE, "the first post", || {
        handoff_names(&p.hq("speaker", "outbox")).len() == 1
    });
    let name = &handoff_names(&p.hq("speaker", "outbox"))[0];
    assert!(name.ends_with("_from_speaker_to_ada.handoff"), "{name}");
    p.cmd("swarm")
        .args(["ingest", "--role", "speaker", "--match", PATTERN])
        .arg("--file")
        .arg(&log)
        .code(1)
        .stderr_has("another `swarm ingest` follows")
        .run_within(DEADLINE);
    p.cmd("swarm")
        .args([
            "ingest", "--role", "ada", "--match", PATTERN, "--to", "ghost",
        ])
        .arg("--file")
        .arg(&log)
        .code(1)
        .stderr_has("--to names 'ghost', which is neither `all` nor a role")
        .run_within(DEADLINE);
    append(&log, "[INFO] [SPEAKER] part");
    append(&log, "ial\n[INFO] [SPEAKER] third\n");
    wait_until(DEADLINE, "three posts", || {
        handoff_names(&p.hq("speaker", "outbox")).len() == 3
    });
    signal(follow.pid(), libc::SIGTERM);
    let r = follow.finish(DEADLINE, "the follower stops on SIGTERM");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bodies: Vec<String> = handoff_names(&p.hq("speaker", "outbox"))
        .iter()
        .map(|n| fs::read_to_string(p.hq("speaker", "outbox").join(n)).unwrap())
        .map(|t| t.split_once("\n\n").unwrap().1.trim_end().to_string())
        .collect();
    let mut sorted = bodies.clone();
    sorted.sort();
    assert_eq!(sorted, ["hello", "partial", "third"]);
}

#[test]
fn every_line_is_posted_once_across_kill_9_and_restarts() {
    let p = project();
    let log = p.root.join("speaker.log");
    let lines: Vec<String> = (1..=60).map(|i| format!("point {i}")).collect();

    // The narrowest window: killed right after a post, before the cursor
    // moved. The restart finds the post and does not send it again. The
    // renames of one line: the cursor (pending), the sequence, the post
    // (renameat2), the cursor (advanced): SIGKILL on entering the third
    // rename(2) is that window.
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    append(&log, &format!("[INFO] [SPEAKER] {}\n", lines[0]));
    let r = p
        .cmd("swarm")
        .args(["ingest", "--role", "speaker", "--match", PATTERN, "--once"])
        .arg("--file")
        .arg(&log)
        .under(&[
            "strace",
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "trace=rename",
            "-e",
            "inject=rename:signal=KILL:when=3",
        ])
        .run_within(DEADLINE);
    assert_ne!(r.code, 0, "killed in the window: {r:?}");
    assert_eq!(posts(&p), [lines[0].clone()]);
    once(&p, &log, &[]).stdout_has("ALREADY_POSTED: line at byte 0");
    assert_eq!(posts(&p), [lines[0].clone()]);

    // kill -9 at whatever moment, while the log grows; a daemon delivers
    // meanwhile (posts move from outbox to sent/).
    let _d = p.spawn_daemon(&[]);
    let start = || {
        p.cmd("swarm")
            .args(["ingest", "--role", "speaker", "--match", PATTERN])
            .arg("--file")
            .arg(&log)
            .start()
    };
    let mut next = 1;
    for round in 0..4 {
        let follower = start();
        let until = (next + 15).min(lines.len());
        for l in &lines[next..until] {
            append(
                &log,
                &format!("[INFO] [SYSTEM] noise\n[INFO] [SPEAKER] {l}\n"),
            );
        }
        next = until;
        let want = next.saturating_sub(6 - round);
        wait_until(DEADLINE, "some posts before the kill", || {
            posts(&p).len() >= want
        });
        signal(follower.pid(), libc::SIGKILL);
        follower.finish(DEADLINE, "the killed follower");
    }
    let follower = start();
    wait_until(Duration::from_secs(60), "every line posted", || {
        posts(&p).len() >= lines.len()
    });
    signal(follower.pid(), libc::SIGTERM);
    follower.finish(DEADLINE, "the last follower stops");
    assert_eq!(posts(&p), lines, "each line once, in order");
}

/// A log rewritten in place behind the same banner (the first 256 bytes
/// unchanged, longer than the cursor): the follower notices and starts
/// over, never resuming mid-line in the new text.
#[test]
fn a_log_rewritten_behind_the_same_banner_starts_over() {
    let p = project();
    fs::create_dir_all(p.root.join("logs")).unwrap();
    let log = p.root.join("logs/speaker.log");
    let banner = format!("[INFO] [SYSTEM] {}\n", "=".repeat(300));
    append(&log, &format!("{banner}[INFO] [SPEAKER] short\n"));
    once(&p, &log, &[]);
    assert_eq!(posts(&p), ["short"]);
    fs::write(
        &log,
        format!("{banner}[INFO] [SPEAKER] a much longer first line\n[INFO] [SPEAKER] next\n"),
    )
    .unwrap();
    once(&p, &log, &[]).stdout_has("NEW_LOG: the file was rewritten");
    assert_eq!(posts(&p), ["short", "a much longer first line", "next"]);
}
