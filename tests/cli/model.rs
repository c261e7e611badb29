//! The message model beyond the pipeline (issue 5): the collaboration types
//! and their exact validation messages, `allowed_types` at send and at the
//! daemon, `to: all` and `cc` (who got a copy, who was woken), the hop limit
//! on an agent loop, a clarify → answer round trip through the binaries,
//! artifacts, and `swarm transcript --thread`.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::support::{file_header as header, handoff_names, publish, Project, Run};

// ---------------------------------------------------------------- fixtures

/// The `Errors:` list of a `HANDOFF INVALID` (or `ANSWER INVALID`) report;
/// asserts exit 2.
fn errors(r: &Run) -> Vec<String> {
    assert_eq!(r.code, 2, "{r:?}");
    r.stderr
        .split("\nErrors:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Errors: list: {r:?}"))
        .lines()
        .map_while(|l| l.strip_prefix("- "))
        .map(str::to_string)
        .collect()
}

fn id_of(path: &Path) -> String {
    header(path, "id").unwrap()
}

fn error_note(failed: &Path, name: &str) -> String {
    fs::read_to_string(failed.join(format!("{name}.error"))).unwrap_or_default()
}

const CREATED: &str = "2026-06-16T00:00:00.000000Z";

/// Plants a well-formed original in `<wt>/<dir>/` (outbox, sent) as `from`
/// would write it; `extra` headers and `body` as given. Returns its path.
fn plant(
    p: &Project,
    wt: &str,
    dir: &str,
    seq: u32,
    (from, to, ty): (&str, &str, &str),
    extra: &[(&str, &str)],
    body: &str,
) -> PathBuf {
    let id = format!("20260616T000000Z_{seq:06}_from_{from}");
    let mut text = format!(
        "id: {id}\nfrom: {from}\nto: {to}\npriority: 50\ntype: {ty}\ncreated_at: {CREATED}\n"
    );
    for (k, v) in extra {
        text.push_str(&format!("{k}: {v}\n"));
    }
    text.push('\n');
    text.push_str(body);
    let name = format!("50_{id}_to_{}.handoff", to.replace(',', "_"));
    // What swarm-handoff creates; the daemon writes refusal notes through it.
    fs::create_dir_all(p.hq(wt, "outbox/tmp")).unwrap();
    publish(&p.hq(wt, dir).join(name), text.as_bytes())
}

// ---------------------------------------------------------------- validation

/// A draft and the exact error list it must get.
fn case(draft: impl Into<String>, want: &[&str]) -> (String, Vec<String>) {
    (draft.into(), want.iter().map(|w| w.to_string()).collect())
}

fn validation_swarm() -> Project {
    Project::with_roles(&[
        ("coder", "master", "codex", "task"),
        ("qa", "qa", "codex", "task"),
        ("boss", "boss", "human", "task"),
    ])
}

/// Each draft → its exact error list; nothing is written for any of them.
#[test]
fn each_type_validates_with_exact_messages() {
    let p = validation_swarm();
    let long = |n: usize| "x".repeat(n);
    let cases = vec![
        // post
        case(
            "type: post\nto: qa\npriority: 10\n",
            &["Missing body or header 'subject' for post."],
        ),
        case(
            format!("type: post\nto: qa\npriority: 10\nsubject: {}\n\nbody\n", long(121)),
            &["Header 'subject' must be no longer than 120 characters; got 121."],
        ),
        case(
            format!("type: post\nto: qa\npriority: 10\n\n{}\n", long(16384)),
            &["Body must be no larger than 16384 bytes for post; got 16385."],
        ),
        case(
            "type: post\nto: qa\npriority: 10\nmessage: m\n\nfine\nbad \x1b[2J\n",
            &[
                "Line 7: body must not contain control characters.",
                "Header 'message' is not allowed for type 'post'.",
                "Header 'message' is only allowed for note.",
            ],
        ),
        // clarify
        case(
            "type: clarify\nto: boss,qa\npriority: 10\nallow_multiple: maybe\nallow_custom: no\n",
            &[
                "Missing required header 'question' for clarify.",
                "Header 'allow_multiple' must be yes or no; got 'maybe'.",
                "Header 'to' must name exactly one role for clarify; got 'boss,qa'.",
                "Missing options for clarify: list one per body line when 'allow_custom' is no.",
            ],
        ),
        case(
            format!(
                "type: clarify\nto: all\npriority: 10\nquestion: {}\n\nA\nB\nA\n",
                long(501)
            ),
            &[
                "Header 'question' must be no longer than 500 characters; got 501.",
                "Header 'to' must name exactly one role for clarify; got 'all'.",
                "Duplicate option 'A'.",
            ],
        ),
        // answer
        case(
            "type: answer\nto: coder\npriority: 10\nchoices: 1,x\n",
            &[
                "Header 'choices' must be option numbers separated by commas; got '1,x'.",
                "Missing required header 'in_reply_to' for answer.",
            ],
        ),
        case(
            "type: answer\nto: coder\npriority: 10\nin_reply_to: 20260616T000000Z_000009_from_coder\n\nyes\n",
            &[
                "Header 'in_reply_to' must name a message in your inbox; got '20260616T000000Z_000009_from_coder'.",
            ],
        ),
        case(
            "type: answer\nto: coder\npriority: 10\nin_reply_to: nope\nchoices: 2,2\n",
            &[
                "Header 'in_reply_to' must be a message id; got 'nope'.",
                "Duplicate choice 2.",
            ],
        ),
        // close
        case(
            "type: close\nto: qa\npriority: 10\n\nwhy not\n",
            &["Missing required header 'reason' for close."],
        ),
        // digest
        case(
            "type: digest\nto: all\npriority: 10\n",
            &["Missing required body for digest."],
        ),
        case(
            format!("type: digest\nto: all\npriority: 10\n\n{}\n", long(4096)),
            &["Body must be no larger than 4096 bytes for digest; got 4097."],
        ),
        // the daemon's own type
        case(
            "type: digest_request\nto: qa\npriority: 10\n\nx\n",
            &[
                "Header 'type' must be one of git_handoff, note, post, clarify, answer, digest, close or react; got 'digest_request'.",
            ],
        ),
        // headers any type may carry
        case(
            "type: note\nto: qa\npriority: 10\nmessage: m\ncc: ghost,qa,boss,boss\nwake: maybe\nthread: t\n",
            &[
                "Unknown cc role 'ghost'.",
                "Role 'qa' is in both 'to' and 'cc'.",
                "Duplicate cc role 'boss'.",
                "Header 'wake' must be yes or no; got 'maybe'.",
                "Header 'thread' must be a message id; got 't'.",
            ],
        ),
        case(
            "type: post\nto: all\npriority: 10\ncc: qa\n\nhi\n",
            &["Header 'cc' is not allowed with 'to: all'."],
        ),
        case(
            "type: note\nto: all,qa\npriority: 10\nmessage: m\n",
            &["Recipient 'all' must be the only recipient in 'to'."],
        ),
        case(
            "type: note\nto: qa\npriority: 10\nmessage: m\nhop: 0\nmentions: qa\nsession: s1\n",
            &[
                "Line 5: header 'hop' is reserved and must not be written by agents.",
                "Line 6: header 'mentions' is reserved and must not be written by agents.",
                "Line 7: header 'session' is reserved and must not be written by agents.",
            ],
        ),
        case(
            "type: note\nto: qa\npriority: 10\nmessage: m\nsubject: s\n\nbody\n",
            &[
                "Line 7: draft handoffs may contain headers only; payloads are generated by swarm_handoff.sh.",
                "Header 'subject' is not allowed for type 'note'.",
            ],
        ),
    ];
    for (draft, want) in cases {
        let r = p.send_as("coder", &draft);
        assert_eq!(errors(&r), want, "draft: {draft:?}");
        assert!(
            !p.handoffs("outbox").exists() || handoff_names(&p.handoffs("outbox")).is_empty(),
            "nothing queued for {draft:?}"
        );
    }
    assert!(
        !p.handoffs("sequence").exists(),
        "no sequence number used by invalid drafts"
    );
}

/// The good forms of the new types are queued with their headers and body.
#[test]
fn good_drafts_are_queued_with_their_headers_and_body() {
    let p = validation_swarm();
    let path = p.send_as("coder", "type: post\nto: all\npriority: 20\nsubject: Findings for @qa\n\n\nAll green, @boss.\n\tIndented: @ghost me@qa.dev\n\n",
    ).queued();
    let text = fs::read_to_string(&path).unwrap();
    let id = id_of(&path);
    let created = header(&path, "created_at").unwrap();
    assert_eq!(
        text,
        format!(
            "id: {id}\nfrom: coder\nto: all\npriority: 20\ntype: post\ncreated_at: {created}\n\
             mentions: qa,boss\nsubject: Findings for @qa\n\n\
             All green, @boss.\n\tIndented: @ghost me@qa.dev\n"
        )
    );
    assert!(path.ends_with(format!("20_{id}_to_all.handoff")));

    let path = p.send_as("coder", "type: clarify\nto: boss\npriority: 05\nquestion: Which database?\nallow_multiple: yes\n\nPostgres\n  SQLite  \n",
    ).queued();
    let body = fs::read_to_string(&path).unwrap();
    assert!(
        body.ends_with("allow_multiple: yes\nquestion: Which database?\n\nPostgres\n  SQLite  \n"),
        "{body}"
    );

    let path = p
        .send_as("qa", "type: close\nto: coder\npriority: 50\nreason: done\n")
        .queued();
    assert_eq!(header(&path, "reason").as_deref(), Some("done"));
    assert!(fs::read_to_string(&path)
        .unwrap()
        .ends_with("reason: done\n\n"));
}

/// allowed_types: a core-only role gets SwarmForge's exact text; a role
/// limited otherwise gets its own list; a bad config names the key.
#[test]
fn allowed_types_are_enforced_at_send() {
    let p = validation_swarm();
    p.config("roles:\n  - {name: coder, allowed_types: [git_handoff, note]}\n  - {name: qa, allowed_types: [post, close]}\n",
    );
    let r = p.send_as("coder", "type: post\nto: qa\npriority: 10\n\nhi\n");
    assert_eq!(
        errors(&r),
        vec!["Header 'type' must be one of git_handoff or note; got 'post'."]
    );
    let r = p.send_as("qa", "type: note\nto: coder\npriority: 10\nmessage: m\n");
    assert_eq!(
        errors(&r),
        vec!["Header 'type' must be one of post or close; got 'note'."]
    );
    p.send_as("qa", "type: post\nto: coder\npriority: 10\n\nhi\n")
        .queued();
    p.send_as("coder", "type: note\nto: qa\npriority: 10\nmessage: m\n")
        .queued();

    p.config("roles:\n  - {name: qa, allowed_types: [post, digest_request]}\n");
    let r = p.send_as("qa", "type: post\nto: coder\npriority: 10\n\nhi\n");
    assert_eq!(r.code, 1, "{r:?}");
    r.stderr_has("roles[qa].allowed_types: 'digest_request' is not a type a role may send");
}

/// The daemon re-checks what a planted outbox file claims: a type the sender
/// may not send, a hop past max_hops, a digest request from a role, a
/// clarify without its question; each goes to failed/ with its reason, the
/// rest is delivered.
#[test]
fn the_daemon_rechecks_allowed_types_and_hops() {
    let p = validation_swarm();
    p.config("max_hops: 3\nroles:\n  - {name: coder, allowed_types: [git_handoff, note]}\n");
    // Planted in `wt`'s outbox as its role would write it.
    let outbox =
        |wt: &str, seq: u32, head: (&str, &str, &str), extra: &[(&str, &str)], body: &str| {
            plant(&p, wt, "outbox", seq, head, extra, body)
        };
    let planted = [
        (
            outbox("master", 1, ("coder", "qa", "post"), &[], "hi\n"),
            "type not allowed for sender",
        ),
        (
            outbox(
                "qa",
                2,
                ("qa", "coder", "note"),
                &[("message", "m"), ("hop", "4")],
                "m\n",
            ),
            "hop_limit",
        ),
        (
            outbox("qa", 3, ("qa", "coder", "digest_request"), &[], "x\n"),
            "type not allowed for sender",
        ),
        (
            outbox("qa", 5, ("qa", "coder", "clarify"), &[], "A\n"),
            "invalid: Missing required header 'question' for clarify.",
        ),
    ];
    let good = outbox(
        "qa",
        6,
        ("qa", "coder", "note"),
        &[("message", "m"), ("hop", "3")],
        "m\n",
    );
    p.deliver_once().ok();
    for (path, reason) in &planted {
        let name = path.file_name().unwrap().to_str().unwrap();
        let wt = if name.contains("_from_coder_") {
            "master"
        } else {
            "qa"
        };
        let failed = p.hq(wt, "failed");
        assert!(failed.join(name).exists(), "{name} not in failed/");
        assert_eq!(error_note(&failed, name), format!("{reason}\n"), "{name}");
    }
    let name = good.file_name().unwrap().to_str().unwrap();
    assert!(p.hq("qa", "sent").join(name).exists());
    assert!(p.hq("master", "inbox/new").join(name).exists());
}

// ---------------------------------------------------------------- broadcast

/// `to: all` reaches every role but the sender and wakes the agents; `cc`
/// copies and `wake: no` messages are delivered without a wake-up.
#[test]
fn broadcast_and_cc_deliver_to_everyone_and_wake_only_the_addressed() {
    let p = Project::with_roles(&[
        ("lead", "master", "codex", "task"),
        ("a", "a", "codex", "task"),
        ("b", "b", "codex", "task"),
        ("c", "c", "codex", "batch"),
        ("boss", "boss", "human", "task"),
    ]);
    let wakes = p.record_wakes("");
    // `handoffd --once` waits for the wake-ups it started (up to 10 s); the
    // deadline only guards a very slow machine. Reading empties the file.
    let woken = |n: usize| -> Vec<String> {
        let lines = || {
            fs::read_to_string(&wakes)
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect::<Vec<String>>()
        };
        crate::support::wait_until(crate::support::DEADLINE, "wake-ups", || lines().len() >= n);
        let mut v = lines();
        v.sort();
        fs::write(&wakes, "").unwrap();
        v
    };

    let all = p
        .send_as(
            "lead",
            "type: post\nto: all\npriority: 30\n\nKickoff: @b starts.\n",
        )
        .queued();
    let name = all.file_name().unwrap().to_str().unwrap().to_string();
    p.deliver_once().ok(); // --once waits for the wake-ups it started
    for wt in ["a", "b", "c", "boss"] {
        assert_eq!(
            handoff_names(&p.hq(wt, "inbox/new")),
            vec![name.clone()],
            "{wt}"
        );
        let copy = p.hq(wt, "inbox/new").join(&name);
        assert_eq!(header(&copy, "to").as_deref(), Some("all"));
        assert_eq!(header(&copy, "recipient").as_deref(), Some(wt));
    }
    assert!(
        handoff_names(&p.hq("master", "inbox/new")).is_empty(),
        "not to the sender"
    );
    assert_eq!(woken(3), vec!["a", "b", "c"], "the human is never woken");
    assert_eq!(
        header(&p.hq("master", "sent").join(&name), "to").as_deref(),
        Some("all")
    );
    let t = p.swarm(&["transcript", p.root.to_str().unwrap()]);
    assert!(
        t.ok()
            .stdout
            .contains("] [lead -> all] post Kickoff: @b starts.\n"),
        "{}",
        t.stdout
    );

    // b was mentioned; a was not.
    let r = p.cmd("ready-next").role("b").run();
    let b_copy = p.hq("b", "inbox/in_process").join(&name);
    assert_eq!(
        r.ok().stdout,
        format!(
            "TASK: {}\nFROM: lead\nTYPE: post\nPRIORITY: 30\nMENTIONED: yes\nPAYLOAD:\nKickoff: @b starts.\n",
            b_copy.display()
        )
    );
    let r = p.cmd("ready-next").role("a").run();
    assert!(!r.ok().stdout.contains("MENTIONED"), "{}", r.stdout);
    p.cmd("done-current").role("a").run().ok();

    // A note to a with a context copy for c: only a is woken.
    let cc = p
        .send_as(
            "lead",
            "type: note\nto: a\npriority: 30\nmessage: fyi\ncc: c,boss\n",
        )
        .queued();
    let cc_name = cc.file_name().unwrap().to_str().unwrap().to_string();
    assert!(cc_name.ends_with("_to_a.handoff"), "{cc_name}");
    p.deliver_once().ok();
    assert_eq!(woken(1), vec!["a"]);
    for (wt, recipient) in [("a", "a"), ("c", "c"), ("boss", "boss")] {
        let copy = p.hq(wt, "inbox/new").join(&cc_name);
        assert_eq!(
            header(&copy, "recipient").as_deref(),
            Some(recipient),
            "{wt}"
        );
        assert_eq!(header(&copy, "cc").as_deref(), Some("c,boss"));
    }
    assert!(!p.hq("b", "inbox/new").join(&cc_name).exists());
    let r = p.cmd("ready-next").role("c").run();
    let out = r.ok().stdout.clone();
    assert!(
        out.contains("\nFROM: lead\nTYPE: note\nPRIORITY: 30\nCC: yes\nPAYLOAD:\n"),
        "{out}"
    );
    let r = p.cmd("ready-next").role("a").args(["--json"]).run();
    let v = r.json();
    assert_eq!(
        (v["cc"].as_bool(), v["mentioned"].as_bool()),
        (Some(false), Some(false))
    );
    // Receipts mark context copies as cc, not as copies nobody addressed.
    let cc_id = header(&p.hq("master", "sent").join(&cc_name), "id").unwrap();
    let r = p.swarm(&["receipts", &cc_id, p.root.to_str().unwrap()]);
    let out = r.ok().stdout.clone();
    assert!(
        out.contains("\nc (cc)") && out.contains("\nboss (cc)"),
        "{out}"
    );
    assert!(!out.contains("not in to"), "{out}");

    // wake: no delivers durably and wakes nobody.
    let quiet = p
        .send_as(
            "lead",
            "type: note\nto: b\npriority: 30\nmessage: later\nwake: no\n",
        )
        .queued();
    p.deliver_once().ok();
    assert!(p
        .hq("b", "inbox/new")
        .join(quiet.file_name().unwrap())
        .exists());
    assert_eq!(woken(0), Vec::<String>::new());
    // And one with the default wakes again (the command still works).
    p.send_as("lead", "type: note\nto: b\npriority: 30\nmessage: now\n")
        .queued();
    p.deliver_once().ok();
    assert_eq!(woken(1), vec!["b"]);
}

// ---------------------------------------------------------------- hops

/// Two agents answering each other: each reply is one hop deeper, in one
/// thread, until `max_hops` stops the sender; a new git_handoff task starts
/// again at hop 0 (no header).
#[test]
fn hop_limit_stops_an_agent_loop_and_a_new_task_resets_it() {
    let p = Project::with_roles(&[
        ("a", "master", "codex", "task"),
        ("b", "b", "codex", "task"),
    ]);
    p.config("max_hops: 3\n");
    let first = p
        .send_as("a", "type: note\nto: b\npriority: 10\nmessage: ping 0\n")
        .queued();
    let root = id_of(&first);
    assert_eq!(header(&first, "hop"), None);
    assert_eq!(header(&first, "thread"), None);
    let mut parent = root.clone();
    // b answers (hop 1), a answers (2), b answers (3): each takes the item,
    // replies while it is in process, and completes it.
    for (n, (me, other)) in [("b", "a"), ("a", "b"), ("b", "a")].into_iter().enumerate() {
        p.deliver_once().ok();
        p.cmd("ready-next").role(me).run().ok();
        let reply = p
            .send_as(
                me,
                &format!(
                    "type: note\nto: {other}\npriority: 10\nmessage: ping {}\n",
                    n + 1
                ),
            )
            .queued();
        assert_eq!(header(&reply, "hop"), Some((n + 1).to_string()));
        assert_eq!(header(&reply, "in_reply_to"), Some(parent.clone()));
        assert_eq!(header(&reply, "thread"), Some(root.clone()));
        parent = id_of(&reply);
        p.cmd("done-current").role(me).run().ok();
    }
    p.deliver_once().ok();
    let r = p.cmd("ready-next").role("a").run();
    assert!(r.ok().stdout.contains("\nIN_REPLY_TO: "), "{}", r.stdout);
    r.stdout_has(&format!("\nTHREAD: {root}\n"));
    let r = p.send_as("a", "type: note\nto: b\npriority: 10\nmessage: ping 4\n");
    assert_eq!(
        errors(&r),
        vec![format!(
            "Reply would be hop 4, past max_hops 3 (in reply to '{parent}'); start a new task with a git_handoff or ask a person."
        )]
    );
    // A new task resets the count; it still records what caused it.
    let commit = crate::support::git(&p.root, &["rev-parse", "--short=10", "HEAD"]);
    let task = p
        .send_as(
            "a",
            &format!("type: git_handoff\nto: b\npriority: 10\ntask: fresh\ncommit: {commit}\n"),
        )
        .queued();
    assert_eq!(header(&task, "hop"), None);
    assert_eq!(header(&task, "in_reply_to"), Some(parent.clone()));
    let task_id = id_of(&task);
    p.cmd("done-current").role("a").run().ok();
    p.deliver_once().ok();
    p.cmd("ready-next").role("b").run().ok();
    let reply = p
        .send_as("b", "type: note\nto: a\npriority: 10\nmessage: on it\n")
        .queued();
    assert_eq!(header(&reply, "hop").as_deref(), Some("1"));
    assert_eq!(header(&reply, "in_reply_to"), Some(task_id));
}

// ---------------------------------------------------------------- clarify

/// `lead` in the main worktree, an agent `asker` in its own in `mode`, and
/// a human `owner`; with the project root as a string.
fn asker_swarm(asker: &str, mode: &str) -> (Project, String) {
    let p = Project::with_roles(&[
        ("lead", "master", "codex", "task"),
        (asker, asker, "codex", mode),
        ("owner", "owner", "human", "task"),
    ]);
    let root = p.root.to_str().unwrap().to_string();
    (p, root)
}

fn attention(p: &Project) -> Vec<Value> {
    let r = p.swarm(&["status", "--json", p.root.to_str().unwrap()]);
    r.ok().json()["attention"].as_array().unwrap().clone()
}

/// The asker parks its item and asks a person; `swarm status` lists the open
/// question; `swarm answer` refuses what the clarify does not allow, then
/// answers as the human; the asker's next `ready-next` shows the answer with
/// the parked item, and the question leaves the attention list.
#[test]
fn clarify_answer_round_trip_through_the_binaries() {
    let (p, root) = asker_swarm("coder", "task");
    p.send_as(
        "lead",
        "type: note\nto: coder\npriority: 20\nmessage: build the store\n",
    )
    .queued();
    p.deliver_once().ok();
    let parked = p.cmd("ready-next").role("coder").run();
    let parked_path = PathBuf::from(
        parked
            .ok()
            .stdout
            .lines()
            .next()
            .unwrap()
            .strip_prefix("TASK: ")
            .unwrap(),
    );
    let work = id_of(&parked_path);

    let clarify = p.send_as("coder", "type: clarify\nto: owner\npriority: 05\nquestion: Which database for @owner?\n\nPostgres\nSQLite\nBoth\n",
    ).queued();
    let cid = id_of(&clarify);
    assert_eq!(header(&clarify, "in_reply_to"), Some(work.clone()));
    assert_eq!(header(&clarify, "hop").as_deref(), Some("1"));
    let att = attention(&p);
    assert_eq!(att.len(), 1, "{att:?}");
    assert_eq!(att[0]["kind"], "clarify");
    assert_eq!(att[0]["id"], cid.as_str());
    assert_eq!(att[0]["from"], "coder");
    assert_eq!(att[0]["role"], "owner");
    assert_eq!(att[0]["text"], "Which database for @owner?");
    assert_eq!(
        att[0]["options"],
        serde_json::json!(["Postgres", "SQLite", "Both"])
    );
    assert_eq!(
        att[0]["since"],
        header(&clarify, "created_at").unwrap().as_str()
    );
    // Not delivered yet: nothing to answer.
    let r = p.swarm(&["answer", &cid, &root, "--choice", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .starts_with(&format!("No copy of {cid} in any inbox")),
        "{}",
        r.stderr
    );

    p.deliver_once().ok();
    let text = p.swarm(&["status", &root]);
    let line = text
        .ok()
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("ATTENTION (1)"))
        .nth(1)
        .unwrap_or_else(|| panic!("no attention line: {}", text.stdout))
        .to_string();
    assert!(line.starts_with(&format!("clarify  {cid}")), "{line}");
    assert!(line.contains(" coder -> owner  since "), "{line}");
    assert!(
        line.ends_with("Which database for @owner?  [1. Postgres | 2. SQLite | 3. Both]"),
        "{line}"
    );
    // The person sees the question with numbered options.
    let r = p.cmd("ready-next").role("owner").run();
    let owner_copy = p
        .hq("owner", "inbox/in_process")
        .join(clarify.file_name().unwrap());
    assert_eq!(
        r.ok().stdout,
        format!(
            "TASK: {}\nFROM: coder\nTYPE: clarify\nPRIORITY: 05\nIN_REPLY_TO: {work}\nTHREAD: {work}\n\
             MENTIONED: yes\nQUESTION: Which database for @owner?\nOPTIONS:\n1. Postgres\n2. SQLite\n3. Both\n\
             ALLOW_MULTIPLE: no\nALLOW_CUSTOM: yes\nPAYLOAD:\nPostgres\nSQLite\nBoth\n",
            owner_copy.display()
        )
    );

    // Refusals: not an option, two choices, nothing at all, not a clarify.
    let r = p.swarm(&["answer", &cid, &root, "--choice", "4"]);
    assert_eq!(
        errors(&r),
        vec![format!(
            "Choice 4 is not an option of clarify '{cid}'; it has 3 options."
        )]
    );
    assert!(r.stderr.starts_with(&format!("ANSWER INVALID: {cid}\n")));
    let r = p.swarm(&["answer", &cid, &root, "--choice", "1", "--choice", "3"]);
    assert_eq!(
        errors(&r),
        vec![format!(
            "Only one choice is allowed for clarify '{cid}' (allow_multiple: no); got 2."
        )]
    );
    let r = p.swarm(&["answer", &cid, &root]);
    assert_eq!(r.code, 1);
    let r = p.swarm(&["answer", &work, &root, "--choice", "1"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .starts_with(&format!("NOT_A_CLARIFY: {work} is a note, not a clarify.")),
        "{}",
        r.stderr
    );
    assert!(
        handoff_names(&p.hq("owner", "outbox")).is_empty(),
        "refusals queue nothing"
    );

    let r = p.swarm(&[
        "answer",
        &cid,
        &root,
        "--choice",
        "2",
        "--text",
        "keep it small\nand local",
        "--json",
    ]);
    let v = r.ok().json();
    assert_eq!(v["status"], "answered");
    assert_eq!(v["role"], "owner");
    let answer = PathBuf::from(v["queued"]["path"].as_str().unwrap());
    let done_copy = p
        .hq("owner", "inbox/completed")
        .join(clarify.file_name().unwrap());
    assert_eq!(v["completed"], done_copy.display().to_string());
    assert!(header(&done_copy, "completed_at").is_some());
    assert!(handoff_names(&p.hq("owner", "inbox/in_process")).is_empty());
    let aid = id_of(&answer);
    assert!(answer.starts_with(p.hq("owner", "outbox")));
    assert_eq!(
        fs::read_to_string(&answer).unwrap(),
        format!(
            "id: {aid}\nfrom: owner\nto: coder\npriority: 05\ntype: answer\ncreated_at: {}\n\
             choices: 2\nin_reply_to: {cid}\nthread: {work}\n\n2. SQLite\n\nkeep it small\nand local\n",
            header(&answer, "created_at").unwrap()
        )
    );
    assert!(attention(&p).is_empty(), "answered: off the list");
    let r = p.swarm(&["answer", &cid, &root, "--choice", "1"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with(&format!(
            "CLARIFY_CLOSED: {cid} is already answered or withdrawn by {aid}."
        )),
        "{}",
        r.stderr
    );

    // The asker resumes its parked item with the answer.
    p.deliver_once().ok();
    let r = p.cmd("ready-next").role("coder").run();
    let answer_done = p
        .hq("coder", "inbox/completed")
        .join(answer.file_name().unwrap());
    assert_eq!(
        r.ok().stdout,
        format!(
            "TASK: {}\nFROM: lead\nTYPE: note\nPRIORITY: 20\n\
             ANSWER: {}\nANSWER_FROM: owner\nANSWER_IN_REPLY_TO: {cid}\nANSWER_CHOICE: 2. SQLite\n\
             ANSWER_TEXT: keep it small\nANSWER_TEXT: and local\n\
             PAYLOAD:\nRe-read your role and constitution.\n\nbuild the store\n",
            parked_path.display(),
            answer_done.display()
        )
    );
    for h in ["dequeued_at", "completed_at", "enqueued_at"] {
        assert!(header(&answer_done, h).is_some(), "{h}");
    }
    assert!(handoff_names(&p.hq("coder", "inbox/new")).is_empty());
    // Shown once: the next resume is the plain item.
    let r = p.cmd("ready-next").role("coder").run();
    assert!(!r.ok().stdout.contains("ANSWER"), "{}", r.stdout);
    let audit = p.swarm(&["audit", "--check", &root]);
    assert_eq!(audit.code, 0, "{}", audit.stdout);
}

/// A clarify withdrawn by its asker (`close` in reply to it) leaves the
/// attention list; items waiting for a human are listed until taken.
#[test]
fn withdrawn_clarify_and_waiting_items_in_the_attention_list() {
    let p = Project::with_roles(&[
        ("coder", "master", "codex", "task"),
        ("owner", "owner", "human", "task"),
    ]);
    let clarify = p
        .send_as(
            "coder",
            "type: clarify\nto: owner\npriority: 10\nquestion: Ship it?\n",
        )
        .queued();
    let cid = id_of(&clarify);
    let note = p
        .send_as(
            "coder",
            "type: note\nto: owner\npriority: 10\nmessage: FYI the build is red\n",
        )
        .queued();
    let nid = id_of(&note);
    p.deliver_once().ok();
    let att = attention(&p);
    let kinds: Vec<(&str, &str)> = att
        .iter()
        .map(|a| (a["kind"].as_str().unwrap(), a["id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        vec![("clarify", cid.as_str()), ("waiting", nid.as_str())]
    );
    assert_eq!(att[1]["text"], "FYI the build is red");
    assert_eq!(att[1]["role"], "owner");
    let close = p
        .send_as(
            "coder",
            &format!(
                "type: close\nto: owner\npriority: 10\nreason: withdrawn\nin_reply_to: {cid}\n"
            ),
        )
        .queued();
    assert_eq!(header(&close, "thread"), Some(cid.clone()));
    let att = attention(&p);
    assert_eq!(att.len(), 1);
    assert_eq!(att[0]["id"], nid.as_str());
    p.deliver_once().ok();
    // Taking items empties the list (the close itself waits too, then goes).
    for _ in 0..3 {
        p.cmd("ready-next").role("owner").run().ok();
        p.cmd("done-current").role("owner").run().ok();
    }
    assert!(attention(&p).is_empty());
}

/// An asker in batch mode: the answer is shown once, after the batch header
/// and before the first item, and completed.
#[test]
fn a_parked_batch_gets_its_answer_before_its_items() {
    let (p, root) = asker_swarm("qa", "batch");
    for m in ["one", "two"] {
        p.send_as(
            "lead",
            &format!("type: note\nto: qa\npriority: 40\nmessage: {m}\n"),
        )
        .queued();
    }
    p.deliver_once().ok();
    p.cmd("ready-next").role("qa").run().ok();
    let clarify = p.send_as("qa", "type: clarify\nto: owner\npriority: 40\nquestion: Release today?\nallow_custom: no\nallow_multiple: yes\n\nyes\nno\nafter review\n",
    ).queued();
    let cid = id_of(&clarify);
    p.deliver_once().ok();
    let r = p.swarm(&["answer", &cid, &root, "--text", "maybe"]);
    assert_eq!(
        errors(&r),
        vec![format!(
            "Custom text is not allowed for clarify '{cid}' (allow_custom: no); choose an option."
        )]
    );
    p.swarm(&["answer", &cid, &root, "--choice", "3", "--choice", "1"])
        .ok();
    p.deliver_once().ok();
    let r = p.cmd("ready-next").role("qa").run();
    let out = r.ok().stdout.clone();
    let head: Vec<&str> = out.lines().take(7).collect();
    assert!(head[0].starts_with("BATCH: "), "{out}");
    assert_eq!(head[1..3], ["COUNT: 2", "PRIORITY: 40"], "{out}");
    assert!(
        head[3].starts_with("ANSWER: ") && head[3].contains("/inbox/completed/"),
        "{out}"
    );
    assert_eq!(
        head[4..7],
        [
            "ANSWER_FROM: owner",
            &format!("ANSWER_IN_REPLY_TO: {cid}"),
            "ANSWER_CHOICE: 3. after review"
        ],
        "{out}"
    );
    assert!(
        out.contains("ANSWER_CHOICE: 1. yes\n\nBATCH_ITEM: 1\n"),
        "{out}"
    );
    let v = p.cmd("ready-next").role("qa").args(["--json"]).run().json();
    assert_eq!(v["answers"], serde_json::json!([]), "shown once");
    assert!(handoff_names(&p.hq("qa", "inbox/new")).is_empty());
}

// ---------------------------------------------------------------- artifacts

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The (path, state) pairs of `swarm artifacts --json` rows.
fn path_states(rows: &[(String, String, Value)]) -> Vec<(&str, &str)> {
    rows.iter()
        .map(|(p, s, _)| (p.as_str(), s.as_str()))
        .collect()
}

#[test]
fn artifact_paths_are_confined_and_rechecked() {
    let p = Project::with_roles(&[
        ("coder", "coder", "codex", "task"),
        ("qa", "master", "codex", "task"),
    ]);
    let wt = p.wt_path("coder");
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().canonicalize().unwrap().join("secret.txt");
    fs::write(&secret, "secret\n").unwrap();
    fs::create_dir_all(wt.join("docs")).unwrap();
    fs::write(wt.join("docs/plan.md"), "# plan\n").unwrap();
    fs::write(wt.join("data.bin"), [0u8, 1, 2]).unwrap();
    std::os::unix::fs::symlink(&secret, wt.join("out-link")).unwrap();
    std::os::unix::fs::symlink("docs/plan.md", wt.join("in-link")).unwrap();
    std::os::unix::fs::symlink("../../../..", wt.join("up")).unwrap();
    let fifo = std::ffi::CString::new(wt.join("pipe").to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);

    let draft = |arts: &[&str]| {
        let mut d = String::from("type: post\nto: qa\npriority: 10\nsubject: files\n");
        for a in arts {
            d.push_str(&format!("artifact: {a}\n"));
        }
        d
    };
    let r = p.send_as(
        "coder",
        &draft(&[
            "../outside.txt",
            "docs/../../x",
            "/etc/passwd",
            "out-link",
            "pipe",
            "docs",
            "nope.md",
            "up/etc/passwd",
            ".",
        ]),
    );
    assert_eq!(
        errors(&r),
        vec![
            "Header 'artifact' path '../outside.txt' leaves the worktree.".to_string(),
            "Header 'artifact' path 'docs/../../x' leaves the worktree.".into(),
            "Header 'artifact' must be a path relative to the worktree; got '/etc/passwd'.".into(),
            format!(
                "Header 'artifact' path 'out-link' resolves to '{}' outside the worktree.",
                secret.display()
            ),
            "Header 'artifact' path 'pipe' is not a regular file.".into(),
            "Header 'artifact' path 'docs' is not a regular file.".into(),
            "Header 'artifact' path 'nope.md' does not exist.".into(),
            "Header 'artifact' path 'up/etc/passwd' resolves to '/etc/passwd' outside the worktree."
                .into(),
            "Header 'artifact' path '.' names the worktree itself, not a file.".into(),
        ]
    );
    let r = p.send_as("coder", &draft(&["docs/plan.md", "./docs//plan.md"]));
    assert_eq!(errors(&r), vec!["Duplicate artifact 'docs/plan.md'."]);

    let path = p
        .send_as("coder", &draft(&["./docs/plan.md", "in-link", "data.bin"]))
        .queued();
    let text = fs::read_to_string(&path).unwrap();
    let plan = sha(b"# plan\n");
    assert!(
        text.contains(&format!(
            "artifact: {plan} 7 docs/plan.md\nartifact: {plan} 7 in-link\nartifact: {} 3 data.bin\n",
            sha(&[0, 1, 2])
        )),
        "{text}"
    );
    let id = id_of(&path);
    p.deliver_once().ok();
    let root = p.root.to_str().unwrap().to_string();
    let list = |p: &Project| -> Vec<(String, String, Value)> {
        let r = p.swarm(&["artifacts", &id, &root, "--json"]);
        r.ok().json()["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["path"].as_str().unwrap().to_string(),
                    a["state"].as_str().unwrap().to_string(),
                    a.clone(),
                )
            })
            .collect()
    };
    let rows = list(&p);
    let states = path_states(&rows);
    assert_eq!(
        states,
        vec![
            ("docs/plan.md", "ok"),
            ("in-link", "ok"),
            ("data.bin", "ok")
        ]
    );
    assert_eq!(rows[0].2["mime"], "text/markdown");
    assert_eq!(rows[2].2["mime"], "application/octet-stream");
    assert_eq!(rows[0].2["size"], 7);
    assert_eq!(rows[0].2["matches"], true);
    assert_eq!(rows[0].2["sha256"], plan.as_str());
    assert!(rows[0].2["modified"].as_str().unwrap().ends_with('Z'));
    let txt = p.swarm(&["artifacts", &id, &root]);
    let lines: Vec<&str> = txt.ok().stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", txt.stdout);
    assert!(lines[0].starts_with("STATE"), "{}", lines[0]);
    assert!(
        lines[1].starts_with("ok") && lines[1].ends_with(" text/markdown            docs/plan.md"),
        "{}",
        lines[1]
    );

    // Changed after sending, swapped for a link out, deleted.
    fs::write(wt.join("docs/plan.md"), "# plan v2\n").unwrap();
    fs::remove_file(wt.join("in-link")).unwrap();
    std::os::unix::fs::symlink(&secret, wt.join("in-link")).unwrap();
    fs::remove_file(wt.join("data.bin")).unwrap();
    let rows = list(&p);
    let states = path_states(&rows);
    assert_eq!(
        states,
        vec![
            ("docs/plan.md", "changed"),
            ("in-link", "outside"),
            ("data.bin", "missing")
        ]
    );
    assert_eq!(rows[0].2["matches"], false);
    assert_eq!(
        (rows[0].2["size"].as_u64(), rows[0].2["sent_size"].as_u64()),
        (Some(10), Some(7))
    );

    // No artifacts: an empty list, exit 0; an unknown id: exit 1.
    let plain = p
        .send_as("coder", "type: note\nto: qa\npriority: 10\nmessage: m\n")
        .queued();
    let r = p.swarm(&["artifacts", &id_of(&plain), &root]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
    let r = p.swarm(&["artifacts", &id_of(&plain), &root, "--json"]);
    assert_eq!(r.json()["artifacts"], serde_json::json!([]));
    let r = p.swarm(&["artifacts", "20260101T000000Z_000099_from_coder", &root]);
    assert_eq!(r.code, 1);

    // --session lists every message of the session.
    fs::write(wt.join("notes.txt"), "n\n").unwrap();
    let art = format!("{} 2 notes.txt", sha(b"n\n"));
    for (seq, session) in [(90, "s1"), (91, "s2")] {
        plant(
            &p,
            "coder",
            "sent",
            seq,
            ("coder", "qa", "post"),
            &[("session", session), ("artifact", &art)],
            "x\n",
        );
    }
    let r = p.swarm(&["artifacts", "--session", "s1", &root, "--json"]);
    let v = r.ok().json();
    let arts = v["artifacts"].as_array().unwrap();
    assert_eq!(arts.len(), 1);
    assert_eq!(arts[0]["id"], "20260616T000000Z_000090_from_coder");
    assert_eq!(arts[0]["state"], "ok");
    assert_eq!(arts[0]["mime"], "text/plain");
    let r = p.swarm(&["artifacts", "--session", "none", &root]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
}

// ---------------------------------------------------------------- threads

#[test]
fn transcript_thread_indents_replies_under_their_parent() {
    let p = Project::with_roles(&[
        ("a", "master", "codex", "task"),
        ("b", "b", "codex", "task"),
        ("c", "c", "codex", "task"),
    ]);
    let id = |seq: u32, from: &str| format!("20260616T000000Z_{seq:06}_from_{from}");
    let root_id = id(1, "a");
    let at = |s: &str| format!("2026-06-16T00:00:0{s}.000000Z");
    let msg = |seq: u32, from: &str, to: &str, parent: Option<String>, t: &str, text: &str| {
        let mut extra: Vec<(String, String)> = vec![("message".into(), text.into())];
        if let Some(pa) = parent {
            extra.push(("in_reply_to".into(), pa));
            extra.push(("thread".into(), root_id.clone()));
        }
        let wt = if from == "a" { "master" } else { from };
        let path = plant(
            &p,
            wt,
            "sent",
            seq,
            (from, to, "note"),
            &extra
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
            &format!("{text}\n"),
        );
        // created_at decides the order.
        let s = fs::read_to_string(&path).unwrap().replace(CREATED, &at(t));
        fs::write(&path, s).unwrap();
    };
    msg(1, "a", "b", None, "1", "root");
    msg(2, "b", "a", Some(id(1, "a")), "2", "first reply");
    msg(3, "c", "a", Some(id(1, "a")), "3", "second reply");
    msg(4, "a", "b", Some(id(2, "b")), "4", "reply to first");
    msg(5, "a", "c", None, "5", "unrelated");
    msg(6, "b", "a", Some(id(4, "a")), "6", "deeper");
    let root = p.root.to_str().unwrap().to_string();
    let want = "--- 2026-06-16 ---\n\
                [00:00:01] [a -> b] note root\n\
                \x20 [00:00:02] [b -> a] note first reply\n\
                \x20   [00:00:04] [a -> b] note reply to first\n\
                \x20     [00:00:06] [b -> a] note deeper\n\
                \x20 [00:00:03] [c -> a] note second reply\n";
    // Any message of the thread finds the whole conversation.
    for start in [id(1, "a"), id(4, "a"), id(6, "b")] {
        let r = p.swarm(&["transcript", &root, "--thread", &start]);
        assert_eq!(r.ok().stdout, want, "--thread {start}");
    }
    let r = p.swarm(&[
        "transcript",
        &root,
        "--thread",
        &id(1, "a"),
        "--format",
        "jsonl",
    ]);
    let depths: Vec<(String, u64)> = r
        .ok()
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            (
                v["id"].as_str().unwrap().to_string(),
                v["depth"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        depths,
        vec![
            (id(1, "a"), 0),
            (id(2, "b"), 1),
            (id(4, "a"), 2),
            (id(6, "b"), 3),
            (id(3, "c"), 1)
        ]
    );
    // Other filters still apply, with the tree's indentation.
    let r = p.swarm(&["transcript", &root, "--thread", &id(1, "a"), "--role", "c"]);
    assert_eq!(
        r.ok().stdout,
        "--- 2026-06-16 ---\n  [00:00:03] [c -> a] note second reply\n"
    );
    let r = p.swarm(&["transcript", &root, "--thread", &id(5, "a")]);
    assert_eq!(
        r.ok().stdout,
        "--- 2026-06-16 ---\n[00:00:05] [a -> c] note unrelated\n"
    );
    let r = p.swarm(&["transcript", &root, "--thread", &id(9, "a")]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.starts_with("No message with id "), "{}", r.stderr);
}
