//! Forum sessions with a moderator, round-robin discussions and the agent
//! watchdog (issue 6), driven through the real binaries and a real daemon;
//! each role works in its own worktree, so every inbox is its own.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{handoff_names, wait_until, Project, Role, Run, Tmux, DEADLINE};

/// A project whose roles each have their own worktree (`.worktrees/<role>`),
/// so every inbox is its own.
fn forum(roles: &[&str], config: &str) -> Project {
    Project::builder()
        .roles(
            roles
                .iter()
                .map(|r| Role::new(r).worktree(r).agent("script")),
        )
        .config(config)
        .build()
}

/// Runs a shell script (a scripted agent) as `role` in its worktree, with
/// the binaries on PATH.
fn agent(s: &Project, role: &str, script: &Path, args: &[&str]) -> Run {
    s.cmd("sh")
        .role(role)
        .bins_on_path()
        .env("SWARMFORGE_PROJECT", &s.root)
        .arg(script)
        .args(args)
        .run()
}

/// Handoff file names in a role's folder.
fn names(s: &Project, role: &str, rel: &str) -> Vec<String> {
    handoff_names(&s.hq(role, rel))
}

/// Events of `kind` for `recipient` whose reason contains `reason`.
fn count_events(s: &Project, kind: &str, recipient: &str, reason: &str) -> usize {
    s.events()
        .iter()
        .filter(|e| {
            e["kind"] == kind
                && e["recipient"] == recipient
                && e["reason"].as_str().unwrap_or("").contains(reason)
        })
        .count()
}

fn header<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
}

/// The id of the only `HANDOFF QUEUED:` line of a send.
fn queued_id(r: &Run) -> String {
    r.ok();
    // From the name: the daemon may have moved the file already.
    let path = r.stdout.trim().strip_prefix("HANDOFF QUEUED: ").unwrap();
    let name = Path::new(path).file_name().unwrap().to_string_lossy();
    name[3..name.find("_to_").unwrap()].to_string()
}

/// The text of the file a send queued, in the outbox or (delivered) in sent/.
fn queued_text(r: &Run) -> String {
    r.ok();
    let path = PathBuf::from(r.stdout.trim().strip_prefix("HANDOFF QUEUED: ").unwrap());
    let sent = path
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("sent")
        .join(path.file_name().unwrap());
    let mut text = None;
    wait_until(DEADLINE, "the queued file readable", || {
        text = fs::read_to_string(&path)
            .or_else(|_| fs::read_to_string(&sent))
            .ok();
        text.is_some()
    });
    text.unwrap()
}

/// Asserts `cond` stays false for `d` (a negative check needs some time).
fn stays_false(d: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        assert!(!cond(), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ------------------------------------------------------------ moderator

const SPEAKER: &str = r#"#!/bin/sh
# A forum speaker: posts one contribution. speaker.sh <to> <subject>
set -eu
draft=.swarmforge/speaker-draft.txt
printf 'type: post\nto: %s\npriority: 50\nsubject: %s\n\n%s thinks: %s\n' \
    "$1" "$2" "$SWARMFORGE_ROLE" "$2" >"$draft"
swarm-handoff "$draft"
"#;

const MODERATOR: &str = r#"#!/bin/sh
# The moderator: takes the next item; a digest_request is digested (one
# `digest` to all quoting each listed contribution) and completed, or, with
# an argument, completed as failed with that reason.
set -eu
out=$(ready-next)
printf '%s\n' "$out"
[ "$out" = NO_TASK ] && exit 0
if printf '%s\n' "$out" | grep -qx 'TYPE: digest_request'; then
    if [ -n "${1:-}" ]; then
        done-current --failed "$1"
        exit 0
    fi
    n=$(printf '%s\n' "$out" | grep -c '^[0-9][0-9]*\. \[')
    {
        printf 'type: digest\nto: all\npriority: 90\nsubject: digest of %s contributions\n\n' "$n"
        printf '%s\n' "$out" | sed -n 's/^\([0-9][0-9]*\)\. \[[^]]*\] \[\([^]]*\)\] \(.*\)$/\1. \2 \3/p'
    } >.swarmforge/digest-draft.txt
    swarm-handoff .swarmforge/digest-draft.txt
fi
done-current
"#;

/// The digest requests the daemon made (originals in the moderator's
/// outbox or sent/), oldest first, with the ids each lists.
fn requests(s: &Project) -> Vec<(String, Vec<String>)> {
    let mut v: std::collections::BTreeMap<String, (String, Vec<String>)> = Default::default();
    for dir in ["outbox", "sent"] {
        for n in names(s, "mod", dir) {
            if !n.contains("_from_handoffd_") {
                continue;
            }
            // Moved on meanwhile: the next folder lists it.
            let Ok(text) = fs::read_to_string(s.hq("mod", dir).join(&n)) else {
                continue;
            };
            let (head, body) = text.split_once("\n\n").unwrap();
            assert!(head.contains("type: digest_request"), "{text}");
            let ids = body
                .lines()
                .filter(|l| l.contains("_from_"))
                .map(str::to_string)
                .collect();
            v.insert(n[3..].to_string(), (n, ids));
        }
    }
    v.into_values().collect()
}

/// An original of `role` by name, once it is in the outbox or sent/.
fn original(s: &Project, role: &str, name: &str) -> String {
    let mut text = None;
    wait_until(DEADLINE, "the original readable", || {
        text = fs::read_to_string(s.hq(role, "outbox").join(name))
            .or_else(|_| fs::read_to_string(s.hq(role, "sent").join(name)))
            .ok();
        text.is_some()
    });
    text.unwrap()
}

/// Three speakers and a moderator in one session: a digest_request after
/// exactly every 3 contributions, never two open at once (contributions
/// made meanwhile wait for the next one, in order); the moderator sees the
/// contributions listed, its digest goes to everyone, the others' next
/// `ready-next` shows LATEST_DIGEST; a failed request (`done-current
/// --failed`) delays the next one by `forum.retry_after`.
#[test]
fn moderated_session_digests_every_n_contributions_single_flight() {
    let s = forum(
        &["a", "b", "c", "mod"],
        "daemon: {rescan: 500ms, sweep: 200ms}\n\
         forum: {moderator: mod, digest_every: 3, retry_after: 1s}\n",
    );
    let speaker = s.write("agents/speaker.sh", SPEAKER);
    let moderator = s.write("agents/moderator.sh", MODERATOR);
    let _d = s.spawn_daemon(&[]);
    let r = s.swarm(&["session", "start", "--title", "kick-off"]);
    r.ok();
    let session = r
        .stdout
        .trim()
        .strip_prefix("SESSION_STARTED: ")
        .unwrap()
        .to_string();

    // Contributions one at a time (each delivered before the next), so the
    // delivery order is known: a -> b, b -> c, c -> a, ...
    let mut said: Vec<String> = Vec::new();
    let speak = |said: &mut Vec<String>, n: usize| {
        let (from, to) = [("a", "b"), ("b", "c"), ("c", "a")][(n - 1) % 3];
        let out = agent(&s, from, &speaker, &[to, &format!("point {n}")]);
        let id = queued_id(&out);
        let sent = s.hq(from, "sent");
        wait_until(DEADLINE, &format!("contribution {n} delivered"), || {
            fs::read_dir(&sent)
                .map(|rd| {
                    rd.flatten()
                        .any(|e| e.file_name().to_string_lossy().contains(&id))
                })
                .unwrap_or(false)
        });
        said.push(id);
    };
    for n in 1..=2 {
        speak(&mut said, n);
    }
    assert!(requests(&s).is_empty(), "no request before 3 contributions");
    speak(&mut said, 3);
    wait_until(DEADLINE, "the first digest request", || {
        requests(&s).len() == 1
    });
    assert_eq!(requests(&s)[0].1, said[..3].to_vec());

    // Four more while the first is open: no second request.
    for n in 4..=7 {
        speak(&mut said, n);
    }
    // A barrier: the moderator's own note is no contribution; once it is
    // delivered, the passes that delivered 4..7 have been counted.
    let barrier = s.send_as(
        "mod",
        "type: note\nto: a\npriority: 50\nmessage: listening\n",
    );
    let barrier = queued_id(&barrier);
    wait_until(DEADLINE, "the moderator's note delivered", || {
        names(&s, "mod", "sent")
            .iter()
            .any(|n| n.contains(&barrier))
    });
    assert_eq!(requests(&s).len(), 1, "a second request while one is open");

    // The moderator digests the first request.
    let out = agent(&s, "mod", &moderator, &[]);
    out.ok();
    out.stdout_has("TYPE: digest_request\n");
    out.stdout_has("CONTRIBUTIONS:\n1. [");
    for (i, (from, to)) in [("a", "b"), ("b", "c"), ("c", "a")].iter().enumerate() {
        let want = format!("] [{from} -> {to}] post point {}\n", i + 1);
        assert!(out.stdout.contains(&want), "{want} in {}", out.stdout);
    }
    assert!(!out.stdout.contains("LATEST_DIGEST"), "{}", out.stdout);
    out.stdout_has("COMPLETED: ");
    let find_digest = || {
        names(&s, "mod", "sent")
            .into_iter()
            .find(|n| n.contains("_from_mod_to_all"))
    };
    wait_until(DEADLINE, "the digest delivered", || find_digest().is_some());
    let digest = &find_digest().unwrap();
    let digest_path = s.hq("mod", "sent").join(digest);
    let digest_text = fs::read_to_string(&digest_path).unwrap();
    assert_eq!(header(&digest_text, "session"), Some(session.as_str()));
    assert!(
        digest_text.contains("\n1. a -> b post point 1\n"),
        "{digest_text}"
    );
    for r in ["a", "b", "c"] {
        wait_until(DEADLINE, "the digest delivered to everyone", || {
            names(&s, r, "inbox/new").iter().any(|n| n == digest)
        });
    }
    assert!(names(&s, "mod", "inbox/new").iter().all(|n| n != digest));

    // The next request lists the following three, in order, not the 7th.
    wait_until(DEADLINE, "the second digest request", || {
        requests(&s).len() == 2
    });
    assert_eq!(requests(&s)[1].1, said[3..6].to_vec());

    // Everyone else sees the digest on their next item of the session.
    let r = s.cmd("ready-next").role("a").run();
    r.ok();
    r.stdout_has(&format!("LATEST_DIGEST: {}\n", digest_path.display()));
    let j = s.cmd("ready-next").role("b").args(["--json"]).run();
    let j: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(j["latest_digest"], digest_path.display().to_string());
    // What a restarted agent is shown: the item again, then the last lines
    // that involve it, then the session's latest digest.
    let again = s
        .cmd("ready-next")
        .role("a")
        .args(["--resume-context", "4"])
        .run();
    again.ok();
    let (item, context) = again.stdout.split_once("RESUME_CONTEXT:\n").unwrap();
    assert_eq!(item, r.stdout, "the item is printed again first");
    let context: Vec<&str> = context.lines().collect();
    assert_eq!(context.len(), 5, "{}", again.stdout);
    for (line, want) in context.iter().zip([
        "] [c -> a] post point 6",
        "] [a -> b] post point 7",
        "] [mod -> a] note listening",
        "] [mod -> all] digest digest of 3 contributions",
    ]) {
        assert!(
            line.starts_with("[20") && line.ends_with(want),
            "{line} / {want}"
        );
    }
    assert_eq!(
        context[4],
        format!("LATEST_DIGEST: {}", digest_path.display())
    );
    let j = s
        .cmd("ready-next")
        .role("a")
        .args(["--json", "--resume-context", "2"])
        .run();
    let j: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(j["resumed"], true);
    assert_eq!(j["resume_context"]["lines"].as_array().unwrap().len(), 2);
    assert_eq!(
        j["resume_context"]["latest_digest"],
        digest_path.display().to_string()
    );
    let latest = s.swarm(&["digest", "latest"]);
    latest.ok();
    assert!(latest
        .stdout
        .starts_with(&format!("LATEST_DIGEST: {}\n", digest_path.display())));

    // The moderator fails the second request: the third waits retry_after.
    wait_until(DEADLINE, "the second request delivered", || {
        names(&s, "mod", "inbox/new").len() == 1
    });
    let out = agent(&s, "mod", &moderator, &["model timed out"]);
    out.ok();
    out.stdout_has("\nFAILED: model timed out\n");
    out.stdout_has("CONTRIBUTIONS:\n1. ");
    assert!(
        !out.stdout.contains("LATEST_DIGEST"),
        "shown to its author: {}",
        out.stdout
    );
    let failed = names(&s, "mod", "inbox/completed");
    let failed = failed
        .iter()
        .map(|n| fs::read_to_string(s.hq("mod", "inbox/completed").join(n)).unwrap())
        .find(|t| header(t, "failed").is_some())
        .expect("the failed request");
    assert_eq!(header(&failed, "failed"), Some("model timed out"));
    let failed_at =
        chrono::DateTime::parse_from_rfc3339(header(&failed, "completed_at").unwrap()).unwrap();
    for n in 8..=9 {
        speak(&mut said, n);
    }
    wait_until(DEADLINE, "the third digest request", || {
        requests(&s).len() == 3
    });
    let third = requests(&s)[2].clone();
    assert_eq!(third.1, said[6..9].to_vec());
    let text = original(&s, "mod", &third.0);
    let created =
        chrono::DateTime::parse_from_rfc3339(header(&text, "created_at").unwrap()).unwrap();
    assert!(
        created - failed_at >= chrono::Duration::milliseconds(1000),
        "the request after a failure came after {:?}, before retry_after",
        created - failed_at
    );
    // Every request listed exactly three contributions, each once.
    let all: Vec<String> = requests(&s).into_iter().flat_map(|r| r.1).collect();
    assert_eq!(all, said[..9].to_vec());
    let audit = s.swarm(&["audit", "--check"]);
    assert_eq!(audit.code, 0, "{}{}", audit.stdout, audit.stderr);
}

/// `done-current --failed <reason>` stamps `failed` with `completed_at` and
/// prints `FAILED:` after `COMPLETED:`; a bad reason changes nothing.
#[test]
fn done_current_failed_stamps_the_reason() {
    let p = Project::new(&[("coder", "task"), ("qa", "task")]);
    p.send(
        "coder",
        "type: note\nto: qa\npriority: 10\nmessage: check\n",
    )
    .ok();
    p.deliver_once().ok();
    p.run(Some("qa"), "ready-next", &[]).ok();
    for bad in ["", "two\nlines", &"x".repeat(201)] {
        let r = p.run(Some("qa"), "done-current", &["--failed", bad]);
        assert_eq!(r.code, 1, "{r:?}");
        assert!(r.stderr.starts_with("--failed reason "), "{}", r.stderr);
        assert!(r.stdout.is_empty());
    }
    assert_eq!(p.files(&p.handoffs("inbox/in_process")).len(), 1);
    let r = p.run(Some("qa"), "done-current", &["--failed", "build is red"]);
    r.ok();
    let done = p.files(&p.handoffs("inbox/completed"));
    let path = p.handoffs("inbox/completed").join(&done[0]);
    assert_eq!(
        r.stdout,
        format!(
            "COMPLETED: {}\nFAILED: build is red\nNO_TASK\n",
            path.display()
        )
    );
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(header(&text, "failed"), Some("build is red"));
    assert!(header(&text, "completed_at").is_some());
    p.send(
        "coder",
        "type: note\nto: qa\npriority: 10\nmessage: again\n",
    )
    .ok();
    p.deliver_once().ok();
    p.run(Some("qa"), "ready-next", &[]).ok();
    let r = p.run(Some("qa"), "done-current", &["--json", "--failed", "flaky"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["failed"], "flaky");
    assert_eq!(v["next"]["status"], "no_task");
    // A batch: every item is stamped.
    for m in ["one", "two"] {
        p.send(
            "coder",
            &format!("type: note\nto: qa\npriority: 10\nmessage: {m}\n"),
        )
        .ok();
    }
    p.deliver_once().ok();
    p.run(Some("qa"), "ready-next", &["--batch"]).ok();
    let r = p.run(
        Some("qa"),
        "done-current",
        &["--batch", "--failed", "no time"],
    );
    r.ok();
    r.stdout_has("\nFAILED: no time\nNO_TASK\n");
    let batch = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("COMPLETED_BATCH: "))
        .unwrap();
    let files = p.files(Path::new(batch));
    assert_eq!(files.len(), 2);
    for f in files {
        let text = fs::read_to_string(Path::new(batch).join(f)).unwrap();
        assert_eq!(header(&text, "failed"), Some("no time"));
    }
}

// ------------------------------------------------------------ discussions

fn turn(s: &Project, role: &str, text: &str) -> Run {
    s.send_as(
        role,
        &format!("type: post\nto: all\npriority: 50\ndiscussion: design\n\n{text}\n"),
    )
}

fn status(s: &Project, id: &str) -> serde_json::Value {
    let r = s.swarm(&["discussion", "status", id, "--json"]);
    r.ok();
    serde_json::from_str(&r.stdout).unwrap()
}

/// A file as `swarm-handoff` would queue it, planted straight in an outbox.
fn plant(s: &Project, from: &str, priority: &str, seq: &str, text: &str) -> (PathBuf, String) {
    let now = chrono::Utc::now();
    let id = format!("{}_{seq}_from_{from}", now.format("%Y%m%dT%H%M%SZ"));
    let body = format!(
        "id: {id}\nfrom: {from}\nto: all\npriority: {priority}\ntype: post\ncreated_at: {}\ndiscussion: design\n\n{text}\n",
        now.format("%Y-%m-%dT%H:%M:%S%.6fZ")
    );
    let tmp = s.hq(from, "outbox/tmp");
    fs::create_dir_all(&tmp).unwrap();
    let name = format!("{priority}_{id}_to_all.handoff");
    fs::write(tmp.join(&name), body).unwrap();
    (tmp.join(&name), name)
}

/// Silent when it is only someone else's turn; an unknown or closed
/// discussion is said on stderr.
fn can_send(s: &Project, role: &str, id: &str) -> i32 {
    let r = s
        .cmd("swarm")
        .role(role)
        .args(["can-send", "--discussion", id])
        .run();
    assert!(r.stdout.is_empty(), "{r:?}");
    if r.code == 1 && !r.stderr.is_empty() {
        assert!(
            r.stderr.starts_with("UNKNOWN_DISCUSSION: ")
                || r.stderr.starts_with("DISCUSSION_CLOSED: "),
            "{r:?}"
        );
    } else {
        assert!(r.stderr.is_empty(), "{r:?}");
    }
    r.code
}

/// A four-turn round robin: an out-of-turn draft is refused with
/// NOT_YOUR_TURN naming the expected role; a daemon restart in the middle
/// changes nothing; of two racing files the out-of-turn one is refused at
/// delivery (`out_of_turn`); `ready-next` shows the recent turns; the cap
/// closes the discussion (`cap_reached`) and later drafts are refused.
#[test]
fn round_robin_turns_races_restart_and_cap() {
    let s = forum(&["a", "b", "c"], "daemon: {rescan: 500ms, sweep: 200ms}\n");
    let d = s.spawn_daemon(&[]);
    let r = s.swarm(&[
        "discussion",
        "open",
        "design",
        "--order",
        "a,b,c",
        "--max-turns",
        "4",
    ]);
    r.ok();
    assert_eq!(
        r.stdout,
        "DISCUSSION: design\nORDER: a,b,c\nTURNS: 0/4\nSKIPS: 0\nSTATE: open\nEXPECTED: a\n"
    );
    assert_eq!(
        (can_send(&s, "a", "design"), can_send(&s, "b", "design")),
        (0, 1)
    );
    assert_eq!(can_send(&s, "a", "nope"), 1);

    // Out of turn: refused, exactly, and nothing queued.
    let r = turn(&s, "b", "me first");
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        "NOT_YOUR_TURN: discussion 'design' expects a to speak, got b.\n"
    );
    assert!(r.stdout.is_empty());
    assert!(
        s.wt_path("b").join("draft-b.txt").exists(),
        "the draft is kept"
    );
    assert!(names(&s, "b", "outbox").is_empty());

    let t1 = queued_id(&turn(&s, "a", "keep the state in files"));
    // The turn is logged before its copies appear: whoever a copy wakes
    // already sees the next speaker.
    wait_until(DEADLINE, "turn 1 reaches b", || {
        names(&s, "b", "inbox/new").iter().any(|n| n.contains(&t1))
    });
    assert_eq!(can_send(&s, "b", "design"), 0);
    wait_until(DEADLINE, "turn 1 delivered", || {
        status(&s, "design")["turns"] == 1
    });
    assert_eq!(status(&s, "design")["expected"], "b");
    assert_eq!(
        (can_send(&s, "a", "design"), can_send(&s, "b", "design")),
        (1, 0)
    );

    // A daemon restart in the middle: the expected speaker comes from the files.
    let before = status(&s, "design");
    drop(d);
    let d = s.spawn_daemon(&[]);
    assert_eq!(status(&s, "design"), before);
    let r = turn(&s, "c", "jumping in");
    assert_eq!(
        r.stderr,
        "NOT_YOUR_TURN: discussion 'design' expects b to speak, got c.\n"
    );

    // Two racing files planted at once: c's sorts first and is refused at
    // delivery; b's (the expected speaker's) is delivered.
    let (c_tmp, c_name) = plant(&s, "c", "10", "900001", "racing c");
    let (b_tmp, b_name) = plant(&s, "b", "50", "900002", "agreed, plain files");
    fs::rename(&c_tmp, s.hq("c", "outbox").join(&c_name)).unwrap();
    fs::rename(&b_tmp, s.hq("b", "outbox").join(&b_name)).unwrap();
    let note = s.hq("c", "failed").join(format!("{c_name}.error"));
    wait_until(DEADLINE, "both racing files handled", || {
        note.exists() && names(&s, "b", "sent").contains(&b_name)
    });
    assert_eq!(fs::read_to_string(note).unwrap(), "out_of_turn\n");
    assert!(s.log().contains(&format!(
        "failed {}",
        s.hq("c", "outbox").join(&c_name).display()
    )));
    let st = status(&s, "design");
    assert_eq!(
        (st["turns"].as_u64(), st["expected"].as_str()),
        (Some(2), Some("c"))
    );
    for r in ["a", "b", "c"] {
        assert!(
            !names(&s, r, "inbox/new").contains(&c_name),
            "a refused turn reached {r}"
        );
    }

    queued_id(&turn(&s, "c", "and one lock per inbox"));
    wait_until(DEADLINE, "turn 3 delivered", || {
        status(&s, "design")["turns"] == 3
    });

    // a's next item is b's turn: the CONTEXT block holds the turns so far.
    let r = s.cmd("ready-next").role("a").run();
    r.ok();
    assert!(r.stdout.starts_with("TASK: "), "{}", r.stdout);
    r.stdout_has(&b_name);
    r.stdout_has("CONTEXT:\n- a: keep the state in files\n- b: agreed, plain files\n- c: and one lock per inbox\nPAYLOAD:\n");
    let j = s.cmd("ready-next").role("a").args(["--json"]).run();
    let j: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(j["context"][0]["speaker"], "a");
    assert_eq!(j["context"][0]["id"], t1);
    assert_eq!(j["context"].as_array().unwrap().len(), 3);

    // The fourth turn reaches the cap.
    queued_id(&turn(&s, "a", "done: files it is"));
    wait_until(DEADLINE, "the cap closes the discussion", || {
        status(&s, "design")["open"] == false
    });
    let st = status(&s, "design");
    assert_eq!(st["close_reason"], "cap_reached");
    assert_eq!(st["turns"], 4);
    assert!(st["expected"].is_null());
    let text = s.swarm(&["discussion", "status", "design"]);
    assert!(
        text.stdout
            .ends_with("TURNS: 4/4\nSKIPS: 0\nSTATE: closed cap_reached\nEXPECTED: -\n"),
        "{}",
        text.stdout
    );
    let r = turn(&s, "b", "one more thing");
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        "DISCUSSION_CLOSED: discussion 'design' is closed (cap_reached).\n"
    );
    assert_eq!(can_send(&s, "b", "design"), 1);
    // A planted turn to the closed discussion is refused at delivery.
    let (tmp, name) = plant(&s, "b", "50", "900003", "late");
    fs::rename(&tmp, s.hq("b", "outbox").join(&name)).unwrap();
    let note = s.hq("b", "failed").join(format!("{name}.error"));
    wait_until(DEADLINE, "the late turn refused", || note.exists());
    assert_eq!(fs::read_to_string(note).unwrap(), "discussion_closed\n");

    // An explicit close, and its reason.
    s.swarm(&["discussion", "open", "side", "--order", "b,c"])
        .ok();
    let r = s.swarm(&["discussion", "close", "side", "--reason", "explicit_close"]);
    r.ok();
    r.stdout_has("STATE: closed explicit_close\n");
    drop(d);
    let audit = s.swarm(&["audit", "--check"]);
    assert_eq!(audit.code, 0, "{}{}", audit.stdout, audit.stderr);
}

/// A turn nobody takes is skipped after `discussion.skip_after` (logged
/// once, `expectation_violated` once for `turn_within` before it), the next
/// speaker may speak, and the CONTEXT block shows the skip.
#[test]
fn a_slow_turn_is_skipped_after_the_deadline() {
    let s = forum(
        &["a", "b", "c"],
        "daemon: {rescan: 500ms, sweep: 100ms}\n\
         discussion: {turn_within: 300ms, skip_after: 3s}\n",
    );
    let _d = s.spawn_daemon(&[]);
    s.swarm(&["discussion", "open", "design", "--order", "a,b,c"])
        .ok();
    queued_id(&turn(&s, "a", "who takes the parser?"));
    // The skip is recorded, then journaled: wait for both.
    wait_until(DEADLINE, "b skipped", || {
        status(&s, "design")["skips"] == 1 && count_events(&s, "skipped", "b", "") == 1
    });
    let st = status(&s, "design");
    assert_eq!(
        (st["turns"].as_u64(), st["expected"].as_str()),
        (Some(1), Some("c"))
    );
    assert_eq!(
        count_events(&s, "skipped", "b", "skip_after 3s in discussion design"),
        1
    );
    assert_eq!(
        count_events(
            &s,
            "expectation_violated",
            "b",
            "turn_within 300ms in discussion design"
        ),
        1
    );
    assert_eq!(can_send(&s, "c", "design"), 0);
    queued_id(&turn(&s, "c", "I will"));
    // A turn is logged when admitted, before its copies are written: wait
    // for the delivery itself.
    wait_until(DEADLINE, "c's turn delivered", || {
        status(&s, "design")["turns"] == 2 && crate::support::log_count(&s.log(), "delivered") == 2
    });
    // Stop the clock: a closed discussion skips nobody.
    s.swarm(&[
        "discussion",
        "close",
        "design",
        "--reason",
        "explicit_close",
    ])
    .ok();
    let st = status(&s, "design");
    assert_eq!(
        (st["turns"].as_u64(), st["skips"].as_u64()),
        (Some(2), Some(1)),
        "{st}"
    );
    assert_eq!(st["open"], false);
    let r = s.cmd("ready-next").role("a").run();
    r.stdout_has("CONTEXT:\n- a: who takes the parser?\n- b: (skipped)\n- c: I will\nPAYLOAD:\n");
    assert_eq!(count_events(&s, "skipped", "b", ""), 1);
}

// ------------------------------------------------------------ sessions

/// Sessions stamp messages, close by themselves when idle (`idle_timeout`),
/// and `swarm transcript --session` shows one session between its markers.
#[test]
fn idle_sessions_close_and_the_transcript_frames_them() {
    let s = forum(
        &["a", "b"],
        "daemon: {rescan: 500ms, sweep: 100ms}\nforum: {idle_close: 1s}\n",
    );
    let _d = s.spawn_daemon(&[]);
    let before = queued_id(&s.send_as("a", "type: note\nto: b\npriority: 50\nmessage: before\n"));
    let r = s.swarm(&["session", "start", "--title", "kick-off"]);
    r.ok();
    let id = r
        .stdout
        .trim()
        .strip_prefix("SESSION_STARTED: ")
        .unwrap()
        .to_string();
    let r = s.swarm(&["session", "start"]);
    assert_eq!(r.code, 1, "a second open session: {r:?}");
    let q = s.send_as(
        "a",
        "type: post\nto: b\npriority: 50\nsubject: hello forum\n",
    );
    assert_eq!(header(&queued_text(&q), "session"), Some(id.as_str()));
    // The record is closed first, the journal line follows: wait for both.
    wait_until(DEADLINE, "the idle session closed and logged", || {
        let r = s.swarm(&["session", "list", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        v["sessions"][0]["close_reason"] == "idle_timeout" && s.log().contains(" closed ")
    });
    let list = s.swarm(&["session", "list"]);
    assert!(
        list.stdout.starts_with(&format!("{id}\tclosed\t"))
            && list.stdout.contains("\tidle_timeout\tkick-off\n"),
        "{}",
        list.stdout
    );
    let after = s.send_as("b", "type: note\nto: a\npriority: 50\nmessage: after\n");
    assert_eq!(header(&queued_text(&after), "session"), None);

    let t = s.swarm(&["transcript", "--session", &id]);
    t.ok();
    let lines: Vec<&str> = t.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", t.stdout);
    assert!(
        lines[0].starts_with(&format!("=== session {id} started "))
            && lines[0].ends_with(" by human: kick-off ==="),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with("--- "), "{}", lines[1]);
    assert!(
        lines[2].ends_with("] [a -> b] post hello forum"),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].starts_with(&format!("=== session {id} closed "))
            && lines[3].ends_with(": idle_timeout ==="),
        "{}",
        lines[3]
    );
    assert!(!t.stdout.contains(&before));
    let j = s.swarm(&["transcript", "--session", &id, "--format", "jsonl"]);
    let v: Vec<serde_json::Value> = j
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0]["marker"], "session_started");
    assert_eq!(v[1]["headers"]["session"], id.as_str());
    assert_eq!(v[2]["marker"], "session_closed");
    assert_eq!(v[2]["reason"], "idle_timeout");
    let md = s.swarm(&["transcript", "--session", &id, "--format", "md"]);
    md.stdout_has(&format!("**=== session {id} started "));
    let r = s.swarm(&["transcript", "--session", "s-nope"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stderr, "Unknown session: s-nope\n");
    // A new session is open until closed by hand.
    let r = s.swarm(&["session", "start"]);
    let id2 = r
        .stdout
        .trim()
        .strip_prefix("SESSION_STARTED: ")
        .unwrap()
        .to_string();
    let t = s.swarm(&["transcript", "--session", &id2]);
    assert_eq!(
        t.stdout.lines().last(),
        Some(format!("=== session {id2} open ===").as_str())
    );
    let r = s.swarm(&["session", "close", "--reason", "wrap-up"]);
    assert_eq!(r.stdout, format!("SESSION_CLOSED: {id2} wrap-up\n"));
}

// ------------------------------------------------------------ watchdog

const FAKE_AGENT: &str = "echo \"fake agent of $SWARMFORGE_ROLE is up\"\nexec sleep 600\n";

/// The watchdog reads the item in process with the project's
/// `limits.max_file_bytes` (and the stamps' headroom), not a fixed 1 MiB: an
/// item larger than 1 MiB that the config allows is still reported when it
/// stays in process past `complete_within` (issue #23).
#[test]
fn watchdog_reads_an_item_in_process_up_to_the_configured_limit() {
    let s = forum(
        &["w", "k"],
        "daemon: {rescan: 500ms, sweep: 200ms}\n\
         limits: {max_file_bytes: 4000000}\n\
         roles:\n  - {name: w, agent: script, complete_within: 300ms}\n  - {name: k, agent: script}\n",
    );
    let id = "20260101T000000Z_000001_from_k";
    let mut text = format!(
        "id: {id}\nfrom: k\nto: w\npriority: 50\ntype: note\nmessage: a long log\n\
         created_at: 2026-01-01T00:00:00Z\nrecipient: w\nenqueued_at: 2026-01-01T00:00:01Z\n\
         dequeued_at: 2026-01-01T00:00:02Z\n\n"
    );
    let line = format!("{}\n", "x".repeat(99));
    while text.len() < 1_500_000 {
        text.push_str(&line);
    }
    let dir = s.wt_path("w").join(".swarmforge/handoffs/inbox/in_process");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(format!("50_{id}_to_w.handoff")), &text).unwrap();
    let _d = s.spawn_daemon(&[]);
    wait_until(DEADLINE, "complete_within reported", || {
        count_events(&s, "expectation_violated", "w", "complete_within 300ms") == 1
    });
}

/// A role with `restart: true` whose tmux session is gone is restarted on
/// `ready-next --resume-context 20` within its budget, and not beyond it
/// (refused and logged once); an item kept in process past
/// `complete_within` is reported once.
#[test]
fn watchdog_restarts_a_killed_agent_within_its_budget() {
    let s = forum(
        &["w", "k"],
        "daemon: {rescan: 500ms, sweep: 200ms}\n\
         roles:\n  - {name: w, agent: sh fake.sh, restart: true, restart_budget: 1, complete_within: 300ms}\n  - {name: k, agent: cat}\n",
    );
    let Some(tmux) = Tmux::of_project(&s.root) else {
        return;
    };
    let run = s.write(".swarmforge/run/w.sh", FAKE_AGENT);
    fs::write(
        s.path(".swarmforge/tmux-socket"),
        format!("{}\n", tmux.sock.display()),
    )
    .unwrap();
    let k_dir = s.wt_path("k").display().to_string();
    tmux.session("swarmforge-k", Some(&k_dir), "cat");
    let w_dir = s.wt_path("w").display().to_string();
    tmux.session(
        "swarmforge-w",
        Some(&w_dir),
        &format!("sh {}", run.display()),
    );
    let _d = s.spawn_daemon(&[]);
    let note = s.send_as(
        "k",
        "type: note\nto: w\npriority: 50\nmessage: check the build\n",
    );
    let note = queued_id(&note);
    wait_until(DEADLINE, "the note delivered", || {
        names(&s, "w", "inbox/new")
            .iter()
            .any(|n| n.contains(&note))
    });

    // The agent dies: restarted, shown its item and the recent transcript.
    tmux.cmd(&["kill-session", "-t", "=swarmforge-w"]);
    wait_until(DEADLINE, "the agent restarted", || {
        s.log().contains(" restarted ")
    });
    assert!(tmux.has("swarmforge-w"));
    wait_until(DEADLINE, "the resume context in the pane", || {
        tmux.pane("swarmforge-w").contains("fake agent of w is up")
    });
    let pane = tmux.pane("swarmforge-w");
    assert!(pane.contains("TASK: "), "{pane}");
    assert!(pane.contains("\nRESUME_CONTEXT:\n"), "{pane}");
    assert!(pane.contains("] [k -> w] note check the build\n"), "{pane}");
    assert_eq!(
        count_events(&s, "restarted", "w", "session swarmforge-w was gone"),
        1
    );

    // The item stays in process past complete_within: reported once.
    wait_until(DEADLINE, "complete_within reported", || {
        count_events(&s, "expectation_violated", "w", "complete_within 300ms") == 1
    });

    // Dies again: the budget (1 an hour) is used; refused, logged once.
    tmux.cmd(&["kill-session", "-t", "=swarmforge-w"]);
    wait_until(DEADLINE, "the refused restart logged", || {
        count_events(
            &s,
            "notify_failed",
            "w",
            "restart budget used (1/1 in the last hour)",
        ) == 1
    });
    stays_false(
        Duration::from_millis(1000),
        "restarted beyond the budget",
        || tmux.has("swarmforge-w"),
    );
    assert_eq!(count_events(&s, "restarted", "w", ""), 1);
    assert_eq!(count_events(&s, "notify_failed", "w", "restart budget"), 1);
    assert_eq!(
        count_events(&s, "expectation_violated", "w", "complete_within"),
        1
    );
    // The other role was never touched.
    assert!(tmux.has("swarmforge-k"));
}
