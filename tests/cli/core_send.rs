//! `swarm-handoff` end to end: every text of §5.1–5.4 in its order with its exit
//! code, the exact queued file, `--json`, concurrent senders, and the §15
//! weaknesses of sending (each test named after the weakness it proves fixed).

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Stdio;

use crate::core_queue::deliver_note;
use crate::support::{
    self, clean_command, git, header, is_iso_micros, wait_until, Project, DEADLINE,
};

/// SwarmForge's usage text, byte for byte (§5.1).
const USAGE: &str = "Usage: swarm_handoff.sh <draft-file>

Draft formats:

type: git_handoff
to: <role>[,<role>...]
priority: NN
task: <short-stable-task-name>
commit: <10-char-commit-abbrev>

type: note
to: <role>[,<role>...]
priority: NN
message: <one line, max 80 chars>
";

fn project() -> Project {
    Project::new(&[("coder", "task"), ("qa", "batch"), ("reviewer", "task")])
}

fn report(draft: &str, errors: &[&str]) -> String {
    let mut s = format!("HANDOFF INVALID: {draft}\n\nErrors:\n");
    for e in errors {
        s.push_str(&format!("- {e}\n"));
    }
    s.push('\n');
    s.push_str(USAGE);
    s
}

/// Sends `draft` as coder and checks the refusal: exit 2, the exact report, the
/// draft kept byte for byte, and nothing written (not even a sequence number).
fn assert_invalid(p: &Project, draft: &str, errors: &[&str]) {
    assert_invalid_bytes(p, draft.as_bytes(), errors);
}

fn assert_invalid_bytes(p: &Project, draft: &[u8], errors: &[&str]) {
    let path = p.path("draft.txt");
    fs::write(&path, draft).unwrap();
    let r = p.run(Some("coder"), "swarm-handoff", &["draft.txt"]);
    assert_eq!(r.stderr, report("draft.txt", errors), "draft: {draft:?}");
    assert_eq!(r.code, 2);
    assert_eq!(r.stdout, "");
    assert_eq!(fs::read(&path).unwrap(), draft, "draft must be kept");
    assert!(
        !p.path(".swarmforge/handoffs").exists(),
        "an invalid draft must write nothing"
    );
}

fn queued_path(r: &support::Run) -> String {
    r.ok();
    let line = r.stdout.strip_suffix('\n').unwrap_or(&r.stdout);
    line.strip_prefix("HANDOFF QUEUED: ")
        .unwrap_or_else(|| panic!("no queued line: {:?}", r.stdout))
        .to_string()
}

fn short(p: &Project, rev: &str) -> String {
    git(&p.root, &["rev-parse", "--short=10", rev])
}

#[test]
fn usage_on_wrong_argument_count() {
    let p = project();
    for args in [&[][..], &["a", "b"][..]] {
        let r = p.run(Some("coder"), "swarm-handoff", args);
        assert_eq!(r.code, 1, "{args:?}");
        assert_eq!(r.stderr, USAGE);
        assert_eq!(r.stdout, "");
    }
}

#[test]
fn draft_not_found_shows_the_normalised_path() {
    let p = project();
    fs::create_dir(p.path("adir")).unwrap();
    for (arg, shown) in [
        (".//missing.txt", "missing.txt"),
        ("sub/../gone.txt", "gone.txt"),
    ] {
        let r = p.run(Some("coder"), "swarm-handoff", &[arg]);
        assert_eq!(r.stderr, format!("Draft file not found: {shown}\n"));
        assert_eq!(r.code, 1);
    }
    // A folder is named as one (issue 42.10).
    let r = p.run(Some("coder"), "swarm-handoff", &["adir"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .starts_with("Draft file adir is a folder, not a file\n"),
        "{}",
        r.stderr
    );
    // The report names the draft the same way.
    p.write("draft.txt", "type: note\n");
    let r = p.run(Some("coder"), "swarm-handoff", &["./draft.txt"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with("HANDOFF INVALID: draft.txt\n"),
        "{}",
        r.stderr
    );
}

#[test]
fn environment_refusals_exit_1_in_swarmforge_order() {
    let p = project();
    p.write(
        "draft.txt",
        "type: note\nto: qa\npriority: 10\nmessage: hi\n",
    );
    for role in [None, Some("")] {
        let r = p.run(role, "swarm-handoff", &["draft.txt"]);
        assert_eq!((r.code, r.stderr.as_str()), (1, "Set SWARMFORGE_ROLE.\n"));
    }
    // The draft check comes before the role check (§5.1 steps 2 and 3).
    let r = p.run(None, "swarm-handoff", &["nope.txt"]);
    assert_eq!(r.stderr, "Draft file not found: nope.txt\n");
    let r = p.run(Some("ghost"), "swarm-handoff", &["draft.txt"]);
    let known = format!(
        "\n  hint: the roles in {}: coder, qa, reviewer",
        p.path(".swarmforge/roles.tsv").display()
    );
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (1, format!("Unknown sender role: ghost{known}\n").as_str())
    );
    fs::remove_file(p.path(".swarmforge/roles.tsv")).unwrap();
    let r = p.run(Some("coder"), "swarm-handoff", &["draft.txt"]);
    assert_eq!(
        (r.code, r.stderr.lines().next()),
        (1, Some("Cannot find SwarmForge project root"))
    );
    assert!(p.path("draft.txt").exists());
    assert!(!p.path(".swarmforge/handoffs").exists());
}

#[test]
fn parse_errors_in_line_order() {
    let p = project();
    assert_invalid(
        &p,
        "type: note\nno colon here\nto:qa\n: x\nto: \nid: 1\nfrom: me\nrole: r\nrecipient: r\n\
         created_at: t\nenqueued_at: t\ndequeued_at: t\ncompleted_at: t\n type: x\nbogus: 1\n\
         type: git_handoff\nto: qa\npriority: 10\nmessage: hello: world\n\nbody text\n\n",
        &[
            "Line 2: expected 'field: value'.",
            "Line 3: expected 'field: value'.",
            "Line 4: field and value must both be non-empty.",
            "Line 5: field and value must both be non-empty.",
            "Line 6: header 'id' is reserved and must not be written by agents.",
            "Line 7: header 'from' is reserved and must not be written by agents.",
            "Line 8: header 'role' is reserved and must not be written by agents.",
            "Line 9: header 'recipient' is reserved and must not be written by agents.",
            "Line 10: header 'created_at' is reserved and must not be written by agents.",
            "Line 11: header 'enqueued_at' is reserved and must not be written by agents.",
            "Line 12: header 'dequeued_at' is reserved and must not be written by agents.",
            "Line 13: header 'completed_at' is reserved and must not be written by agents.",
            "Line 14: unknown header ' type'.",
            "Line 15: unknown header 'bogus'.",
            "Line 16: duplicate header 'type'.",
            "Line 21: draft handoffs may contain headers only; payloads are generated by swarm_handoff.sh.",
        ],
    );
}

#[test]
fn base_recipient_and_per_field_errors_in_order() {
    let p = project();
    assert_invalid(
        &p,
        "\n",
        &[
            "Missing required header 'type'.",
            "Missing required header 'to'.",
            "Missing required header 'priority'.",
        ],
    );
    assert_invalid(
        &p,
        "type: foo\nto: qa,,a_b,qa, ,ghost\npriority: 5\nmessage: m\ncommit: c\ntask: t\n",
        &[
            "Header 'type' must be one of git_handoff, note, post, clarify, answer, digest, close or react; got 'foo'.",
            "Header 'priority' must be two digits from 00 to 99; got '5'.",
            "Header 'to' contains an empty recipient.",
            "Recipient role 'a_b' is invalid; role names may not contain underscores.",
            "Unknown recipient role 'a_b'.",
            "Duplicate recipient 'qa'.",
            "Header 'to' contains an empty recipient.",
            "Unknown recipient role 'ghost'.",
        ],
    );
    // No trimming anywhere: ` qa` is a different (unknown) role, `note ` a
    // different type (with a did-you-mean); an unknown type is reported
    // alone, without the per-field knock-on errors.
    assert_invalid(
        &p,
        "type: note \nto: qa, qa\npriority: 1x\nmessage: m\n",
        &[
            "Header 'type' must be one of git_handoff, note, post, clarify, answer, digest, close or react; got 'note '. Did you mean 'note'?",
            "Header 'priority' must be two digits from 00 to 99; got '1x'.",
            "Unknown recipient role ' qa'.",
        ],
    );
}

#[test]
fn misplaced_fields_give_both_errors() {
    let p = project();
    let c = short(&p, "HEAD");
    assert_invalid(
        &p,
        &format!("type: note\ntask: t\nto: qa\ncommit: {c}\npriority: 10\nmessage: m\n"),
        &[
            "Header 'task' is not allowed for type 'note'.",
            "Header 'commit' is not allowed for type 'note'.",
            "Header 'commit' is only allowed for git_handoff.",
            "Header 'task' is only allowed for git_handoff.",
        ],
    );
    assert_invalid(
        &p,
        &format!("type: git_handoff\nto: qa\npriority: 10\ntask: t\ncommit: {c}\nmessage: m\n"),
        &[
            "Header 'message' is not allowed for type 'git_handoff'.",
            "Header 'message' is only allowed for note.",
        ],
    );
}

#[test]
fn git_group_errors() {
    let p = project();
    let tree = short(&p, "HEAD^{tree}");
    let blob = short(&p, "HEAD:README");
    let cases: Vec<(String, Vec<String>)> = vec![
        (
            // No commit: today's SwarmForge fills it from HEAD
            // (docs/swarmforge-compat.md §2), so only the task is missing.
            "type: git_handoff\nto: qa\npriority: 10\n".into(),
            vec!["Missing required header 'task' for git_handoff.".into()],
        ),
        (
            // 41 astral characters are 82 UTF-16 units, as SwarmForge counts.
            format!(
                "type: git_handoff\nto: qa\npriority: 10\ntask: {}\ncommit: xyz\n",
                "😀".repeat(41)
            ),
            vec![
                "Header 'task' must be no longer than 80 characters; got 82.".into(),
                "Header 'commit' must be exactly 10 hexadecimal characters; got 'xyz'.".into(),
            ],
        ),
        (
            "type: git_handoff\nto: qa\npriority: 10\ntask: t\ncommit: 0123456789a\n".into(),
            vec![
                "Header 'commit' must be exactly 10 hexadecimal characters; got '0123456789a'."
                    .into(),
            ],
        ),
        (
            format!("type: git_handoff\nto: qa\npriority: 10\ntask: t\ncommit: {tree}\n"),
            vec![format!(
                "Header 'commit' must resolve to a commit; '{tree}' resolves to 'tree'."
            )],
        ),
        (
            format!("type: git_handoff\nto: qa\npriority: 10\ntask: t\ncommit: {blob}\n"),
            vec![format!(
                "Header 'commit' must resolve to a commit; '{blob}' resolves to 'blob'."
            )],
        ),
    ];
    for (draft, errors) in cases {
        let errors: Vec<&str> = errors.iter().map(String::as_str).collect();
        assert_invalid(&p, &draft, &errors);
    }
    // Exactly 80 units is fine.
    let c = short(&p, "HEAD");
    let r = p.send(
        "coder",
        &format!(
            "type: git_handoff\nto: qa\npriority: 10\ntask: {}\ncommit: {c}\n",
            "😀".repeat(40)
        ),
    );
    queued_path(&r);
    // With no HEAD to take (an unborn branch) the commit is missing.
    let p = project();
    support::git(&p.root, &["checkout", "-q", "--orphan", "unborn"]);
    assert_invalid(
        &p,
        "type: git_handoff\nto: qa\npriority: 10\n",
        &[
            "Missing required header 'task' for git_handoff.",
            "Missing required header 'commit' for git_handoff.",
        ],
    );
}

#[test]
fn note_group_errors() {
    let p = project();
    assert_invalid(
        &p,
        "type: note\nto: qa\npriority: 10\n",
        &["Missing required header 'message' for note."],
    );
    assert_invalid(
        &p,
        &format!(
            "type: note\nto: qa\npriority: 10\nmessage: {}\n",
            "m".repeat(81)
        ),
        &["Header 'message' must be no longer than 80 characters; got 81."],
    );
    let r = p.send(
        "coder",
        &format!(
            "type: note\nto: qa\npriority: 10\nmessage: {}\n",
            "m".repeat(80)
        ),
    );
    queued_path(&r);
}

#[test]
fn weakness_20_missing_commit_matched_0() {
    let p = project();
    assert_invalid(
        &p,
        "type: git_handoff\nto: qa\npriority: 10\ntask: t\ncommit: 0000000000\n",
        &["Header 'commit' must resolve to exactly one Git object; '0000000000' matched 0."],
    );
}

#[test]
fn git_handoff_is_queued_exactly_and_the_draft_deleted() {
    let p = project();
    let full = p.commit("work");
    let c = short(&p, "HEAD");
    // Upper case input is canonicalised through git, as SwarmForge does.
    let r = p.send(
        "coder",
        &format!(
            "type: git_handoff\nto: qa,reviewer\npriority: 05\ntask: fix-login\ncommit: {}\n",
            c.to_uppercase()
        ),
    );
    assert_eq!(r.stderr, "");
    let path = queued_path(&r);
    assert!(!p.path("draft.txt").exists(), "draft deleted after success");
    let outbox = p.handoffs("outbox");
    let names = p.files(&outbox);
    assert_eq!(names.len(), 1);
    assert_eq!(path, outbox.join(&names[0]).display().to_string());
    let text = fs::read_to_string(&path).unwrap();
    let id = header(&text, "id").unwrap();
    let created = header(&text, "created_at").unwrap();
    let idts = id.split('_').next().unwrap();
    assert_eq!(id, format!("{idts}_000001_from_coder"));
    assert_eq!(
        names[0],
        format!("05_{idts}_000001_from_coder_to_qa_reviewer.handoff")
    );
    assert!(is_iso_micros(created), "{created}");
    assert!(full.starts_with(&c));
    assert_eq!(
        text,
        format!(
            "id: {id}\nfrom: coder\nto: qa,reviewer\npriority: 05\ntype: git_handoff\nrole: coder\n\
             task: fix-login\ncommit: {c}\ncreated_at: {created}\n\n\
             Re-read your role and constitution.\n\nmerge_and_process coder {c}\n"
        )
    );
    assert_eq!(
        fs::read_to_string(p.handoffs("sequence")).unwrap(),
        "000001\n"
    );
    for d in ["outbox/tmp", "sent", "failed"] {
        assert!(p.handoffs(d).is_dir(), "{d}");
    }
    assert_eq!(p.files(&p.handoffs("outbox/tmp")), Vec::<String>::new());
}

#[test]
fn note_is_queued_exactly_and_sequences_increment() {
    let p = project();
    // CRLF line ends and trailing blank lines are fine (§5.2).
    let first = p.send(
        "qa",
        "type: note\r\nto: coder\r\npriority: 99\r\nmessage: ready: see PR 7\r\n\r\n\r\n",
    );
    let first = queued_path(&first);
    let second = queued_path(&p.send(
        "qa",
        "type: note\nto: coder,qa\npriority: 00\nmessage: second\n",
    ));
    let text = fs::read_to_string(&first).unwrap();
    let id = header(&text, "id").unwrap();
    let created = header(&text, "created_at").unwrap();
    assert!(id.ends_with("_000001_from_qa"), "{id}");
    assert_eq!(
        text,
        format!(
            "id: {id}\nfrom: qa\nto: coder\npriority: 99\ntype: note\nmessage: ready: see PR 7\n\
             created_at: {created}\n\nRe-read your role and constitution.\n\nready: see PR 7\n"
        )
    );
    let text2 = fs::read_to_string(&second).unwrap();
    assert!(header(&text2, "id").unwrap().ends_with("_000002_from_qa"));
    assert_eq!(header(&text2, "to").unwrap(), "coder,qa");
    assert!(
        second.ends_with("_000002_from_qa_to_coder_qa.handoff"),
        "{second}"
    );
    assert!(Path::new(&second)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("00_"));
    assert_eq!(
        fs::read_to_string(p.handoffs("sequence")).unwrap(),
        "000002\n"
    );
}

#[test]
fn invalid_draft_uses_no_sequence_number() {
    let p = project();
    assert_invalid(
        &p,
        "type: note\nto: ghost\npriority: 10\nmessage: m\n",
        &["Unknown recipient role 'ghost'."],
    );
    let path = queued_path(&p.send("coder", "type: note\nto: qa\npriority: 10\nmessage: m\n"));
    assert!(path.contains("_000001_from_coder_"), "{path}");
}

#[test]
fn json_output_for_queued_invalid_and_error() {
    let p = project();
    p.write(
        "draft.txt",
        "type: note\nto: qa,coder\npriority: 20\nmessage: m\n",
    );
    let r = p.run(Some("coder"), "swarm-handoff", &["--json", "draft.txt"]);
    r.ok();
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["status"], "queued");
    assert_eq!(v["type"], "note");
    assert_eq!(v["priority"], "20");
    assert_eq!(v["sequence"], "000001");
    assert_eq!(v["to"], serde_json::json!(["qa", "coder"]));
    let path = v["path"].as_str().unwrap();
    let id = v["id"].as_str().unwrap();
    assert!(path.starts_with(&p.handoffs("outbox/").display().to_string()));
    assert!(Path::new(path).is_file());
    assert_eq!(
        header(&fs::read_to_string(path).unwrap(), "id").unwrap(),
        id
    );
    assert!(!p.path("draft.txt").exists());

    p.write("draft.txt", "type: note\nto: qa\npriority: 2\nmessage: m\n");
    let r = p.run(Some("coder"), "swarm-handoff", &["draft.txt", "--json"]);
    assert_eq!(r.code, 2);
    let errors = ["Header 'priority' must be two digits from 00 to 99; got '2'."];
    assert_eq!(r.stderr, report("draft.txt", &errors));
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "schema_version": 1,
            "status": "invalid",
            "token": "HANDOFF INVALID",
            "message": format!("HANDOFF INVALID: {}", errors[0]),
            "paths": ["draft.txt"],
            "draft": "draft.txt",
            "errors": errors,
            "exit_code": 2,
        })
    );

    let r = p.run(Some("ghost"), "swarm-handoff", &["--json", "draft.txt"]);
    assert_eq!(r.code, 1);
    let known = format!(
        "\n  hint: the roles in {}: coder, qa, reviewer",
        p.path(".swarmforge/roles.tsv").display()
    );
    assert_eq!(r.stderr, format!("Unknown sender role: ghost{known}\n"));
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["status"], "error");
    assert_eq!(v["message"], format!("Unknown sender role: ghost{known}"));
    assert_eq!(v["exit_code"], 1);
}

#[test]
fn concurrent_senders_get_unique_ids_and_sequences() {
    const N: usize = 40;
    let p = project();
    for i in 0..N {
        p.write(
            &format!("d{i}.txt"),
            &format!("type: note\nto: qa\npriority: 10\nmessage: m{i}\n"),
        );
    }
    let barrier = std::sync::Barrier::new(N);
    let runs: Vec<support::Run> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let (p, barrier) = (&p, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    p.run(Some("coder"), "swarm-handoff", &[&format!("d{i}.txt")])
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut seqs = Vec::new();
    let mut ids = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let path = queued_path(r);
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(header(&text, "message").unwrap(), format!("m{i}"));
        let id = header(&text, "id").unwrap().to_string();
        seqs.push(id.split('_').nth(1).unwrap().parse::<usize>().unwrap());
        ids.push(id);
        assert!(!p.path(&format!("d{i}.txt")).exists());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=N).collect::<Vec<_>>());
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), N);
    assert_eq!(p.files(&p.handoffs("outbox")).len(), N);
    assert_eq!(p.files(&p.handoffs("outbox/tmp")), Vec::<String>::new());
    assert_eq!(
        fs::read_to_string(p.handoffs("sequence")).unwrap(),
        format!("{N:06}\n")
    );
}

/// Waits until `pid` is queued behind a held flock on the file with inode `ino`.
fn blocked_on_lock(pid: u32, ino: u64) -> bool {
    let locks = fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        l.contains("->")
            && f.contains(&pid.to_string().as_str())
            && f.iter().any(|x| x.ends_with(&format!(":{ino}")))
    })
}

#[test]
fn weakness_05_killed_sender_never_blocks_sequence() {
    let p = project();
    let handoffs = p.handoffs("");
    fs::create_dir_all(&handoffs).unwrap();
    // SwarmForge's mkdir lock left behind by a crashed sender means nothing to us.
    fs::create_dir(handoffs.join("sequence.lock")).unwrap();
    let lock = handoffs.join("sequence.flock");
    // A "sender" that takes the sequence lock and is then killed mid-send; exec
    // keeps the locked descriptor in the process we kill.
    let mut holder = clean_command(Path::new("sh"), &p.root)
        .args([
            "-c",
            "exec 9>>\"$0\" && flock -x 9 && echo locked && exec sleep 60",
        ])
        .arg(&lock)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "locked\n");

    p.write(
        "draft.txt",
        "type: note\nto: qa\npriority: 10\nmessage: m\n",
    );
    let sender = clean_command(&support::bin("swarm-handoff"), &p.root)
        .env("SWARMFORGE_ROLE", "coder")
        .arg("draft.txt")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ino = fs::metadata(&lock).unwrap().ino();
    // The second sender really waits on the same lock...
    wait_until(DEADLINE, "sender queued behind the held lock", || {
        blocked_on_lock(sender.id(), ino)
    });
    // ...and the holder's death releases it: no stale lock, no timeout needed.
    holder.kill().unwrap();
    holder.wait().unwrap();
    let r: support::Run = sender.wait_with_output().unwrap().into();
    assert!(queued_path(&r).contains("_000001_from_coder_"));
    let r = p.send(
        "coder",
        "type: note\nto: qa\npriority: 10\nmessage: again\n",
    );
    assert!(queued_path(&r).contains("_000002_from_coder_"));
}

#[test]
fn weakness_06_bad_sequence_file_recovers_from_used_names() {
    let p = project();
    fs::create_dir_all(p.handoffs("sent")).unwrap();
    fs::write(
        p.handoffs("sent/10_20260101T000000Z_000007_from_coder_to_qa.handoff"),
        "",
    )
    .unwrap();
    // SwarmForge parsed "-5" as a number and went on at -00004; an empty file
    // (crash mid-write) silently restarted at 000001 and reused ids.
    for (bad, want) in [("-5\n", "000008"), ("", "000009")] {
        // The second recovery must also count the file queued by the first.
        fs::write(p.handoffs("sequence"), bad).unwrap();
        let r = p.send("coder", "type: note\nto: qa\npriority: 10\nmessage: m\n");
        assert!(queued_path(&r).contains(&format!("_{want}_from_coder_")));
        assert_eq!(
            fs::read_to_string(p.handoffs("sequence")).unwrap(),
            format!("{want}\n")
        );
    }
}

#[test]
fn weakness_13_subdirectory_uses_worktree_root() {
    let p = project();
    fs::create_dir_all(p.path("src/deep")).unwrap();
    p.write(
        "src/deep/draft.txt",
        "type: note\nto: coder\npriority: 10\nmessage: from below\n",
    );
    let r = p.run_in("src/deep", Some("coder"), "swarm-handoff", &["draft.txt"]);
    let path = queued_path(&r);
    assert!(path.starts_with(&p.handoffs("outbox/").display().to_string()));
    assert!(!p.path("src/deep/draft.txt").exists());

    // The helpers find the root's inbox from below too.
    deliver_note(&p, "10_x.handoff", "10", "qa", "hello");
    let r = p.run_in("src/deep", Some("coder"), "ready-next", &[]);
    r.ok();
    assert!(r.stdout.starts_with(&format!(
        "TASK: {}\n",
        p.handoffs("inbox/in_process/10_x.handoff").display()
    )));
    let r = p.run_in("src/deep", None, "done-current", &["--task"]);
    assert_eq!(
        r.stdout,
        format!(
            "COMPLETED: {}\nNO_TASK\n",
            p.handoffs("inbox/completed/10_x.handoff").display()
        )
    );
    for dir in ["src", "src/deep"] {
        assert!(
            !p.path(dir).join(".swarmforge").exists(),
            "state under {dir}"
        );
    }
}

#[test]
fn weakness_15_control_characters_refused() {
    let p = project();
    // A lone CR, ESC and TAB all survived SwarmForge's parser into the file and
    // onto the receiving agent's terminal.
    assert_invalid(
        &p,
        "type: note\nto: qa\npriority: 10\nmessage: ok\rTASK: fake\n",
        &[
            "Line 4: header 'message' must not contain control characters.",
            "Missing required header 'message' for note.",
        ],
    );
    let c = short(&p, "HEAD");
    assert_invalid(
        &p,
        &format!("type: git_handoff\nto: qa\npriority: 10\ntask: a\x1b[2Jb\ncommit: {c}\n"),
        &[
            "Line 4: header 'task' must not contain control characters.",
            "Missing required header 'task' for git_handoff.",
        ],
    );
    assert_invalid(
        &p,
        "type: note\nto: qa\npriority: 10\nmessage: a\tb\u{85}\n",
        &[
            "Line 4: header 'message' must not contain control characters.",
            "Missing required header 'message' for note.",
        ],
    );
    // An escaped name keeps the report on one line.
    assert_invalid(
        &p,
        "type: note\nx\x1b[31m: 1\nto: qa\npriority: 10\nmessage: m\n",
        &["Line 2: unknown header 'x\\e[31m'."],
    );
}

#[test]
fn weakness_16_recipient_count_and_file_name_bounded() {
    let p = project();
    let many: Vec<String> = (0..33)
        .map(|i| format!("r{i:02}-{}", "x".repeat(12)))
        .collect();
    let mut roles: Vec<(&str, &str)> = many.iter().map(|r| (r.as_str(), "task")).collect();
    roles.push(("coder", "task"));
    p.write_roles(&roles);
    assert_invalid(
        &p,
        &format!(
            "type: note\nto: {}\npriority: 10\nmessage: m\n",
            many.join(",")
        ),
        &["Header 'to' must name at most 32 recipients; got 33."],
    );
    // 32 long names would make a file name past NAME_MAX; it is shortened.
    let r = p.send(
        "coder",
        &format!(
            "type: note\nto: {}\npriority: 10\nmessage: m\n",
            many[..32].join(",")
        ),
    );
    let path = queued_path(&r);
    assert!(
        path.ends_with(&format!(
            "_000001_from_coder_to_{}_and_31_more.handoff",
            many[0]
        )),
        "{path}"
    );
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(header(&text, "to").unwrap(), many[..32].join(","));
    // Names SwarmForge accepted but that break `to` or paths are not roles.
    p.write_roles_raw(&format!(
        "a,b\tmaster\t{0}\ts\tA\tcodex\ttask\ncoder\tmaster\t{0}\ts\tC\tcodex\ttask\n",
        p.root.display()
    ));
    let r = p.send("a,b", "type: note\nto: coder\npriority: 10\nmessage: m\n");
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            1,
            format!(
                "Unknown sender role: a,b\n  hint: {0}: line 1: invalid role name 'a,b'; that line is skipped\n  hint: the roles in {0}: coder\n",
                p.path(".swarmforge/roles.tsv").display()
            )
            .as_str()
        )
    );
}

#[test]
fn weakness_17_oversize_draft_refused() {
    let p = project();
    let mut big = b"type: note\nto: qa\npriority: 10\nmessage: m\n".to_vec();
    big.resize(64 * 1024 + 1, b'\n');
    assert_invalid_bytes(
        &p,
        &big,
        &["Draft must be no larger than 65536 bytes; got 65537."],
    );
    assert_invalid_bytes(
        &p,
        b"type: note\nto: qa\npriority: 10\nmessage: \xff\n",
        &["Draft must be valid UTF-8; invalid byte at offset 40."],
    );
}

#[test]
fn weakness_22_id_and_created_at_share_one_clock_read() {
    let p = project();
    for _ in 0..5 {
        let path = queued_path(&p.send("coder", "type: note\nto: qa\npriority: 10\nmessage: m\n"));
        let text = fs::read_to_string(path).unwrap();
        let idts = header(&text, "id")
            .unwrap()
            .split('_')
            .next()
            .unwrap()
            .to_string();
        let created = header(&text, "created_at").unwrap();
        // 2026-06-15T14:05:31.123456Z -> 20260615T140531Z
        let from_created: String = created[..19]
            .chars()
            .filter(|c| *c != '-' && *c != ':')
            .collect();
        assert_eq!(format!("{from_created}Z"), idts);
    }
}

#[test]
fn weakness_23_queued_line_printed_even_if_draft_delete_fails() {
    let p = project();
    p.write(
        "draft.txt",
        "type: note\nto: qa\npriority: 10\nmessage: m\n",
    );
    // /proc/self/fd/3 reads the draft but can never be unlinked (not even by root).
    let r: support::Run = clean_command(Path::new("sh"), &p.root)
        .env("SWARMFORGE_ROLE", "coder")
        .args(["-c", "exec 3<draft.txt && exec \"$0\" /proc/self/fd/3"])
        .arg(support::bin("swarm-handoff"))
        .output()
        .unwrap()
        .into();
    let path = queued_path(&r);
    assert!(Path::new(&path).is_file());
    // The link lives in /proc, outside the worktree: left in place (never
    // deleted), with the warning after the queued line.
    assert!(
        r.stderr.starts_with(
            "warning: handoff queued; the draft /proc/self/fd/3 is outside your worktree and was left in place"
        ),
        "{}",
        r.stderr
    );
    assert!(p.path("draft.txt").exists());
}

#[test]
fn symlinked_draft_is_read_only_inside_the_project() {
    let p = project();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().canonicalize().unwrap().join("secret.txt");
    fs::write(&secret, "type: note\nto: qa\npriority: 10\nmessage: m\n").unwrap();
    std::os::unix::fs::symlink(&secret, p.path("draft.txt")).unwrap();
    let r = p.run(Some("coder"), "swarm-handoff", &["draft.txt"]);
    assert_eq!(
        (r.code, r.stderr),
        (
            1,
            format!(
                "Draft file draft.txt is a symlink to {} outside the project; refusing to read it.\n  hint: drafts belong in your worktree, {}: write the draft there (not in /tmp or your home folder) and pass that path; it is deleted once queued\n",
                secret.display(),
                p.root.display()
            )
        )
    );
    assert!(!p.path(".swarmforge/handoffs").exists());

    // A link to a draft inside the worktree is followed; only the link is removed.
    fs::remove_file(p.path("draft.txt")).unwrap();
    p.write(
        "drafts/real.txt",
        "type: note\nto: qa\npriority: 10\nmessage: m\n",
    );
    std::os::unix::fs::symlink(p.path("drafts/real.txt"), p.path("draft.txt")).unwrap();
    let r = p.run(Some("coder"), "swarm-handoff", &["draft.txt"]);
    queued_path(&r);
    assert!(fs::symlink_metadata(p.path("draft.txt")).is_err());
    assert!(p.path("drafts/real.txt").exists());
}

/// A roles.tsv typed with spaces reads as empty: the unknown-role refusal
/// keeps SwarmForge's first line and names the skipped line and the cause.
#[test]
fn roles_tsv_typed_with_spaces_is_named_in_the_error() {
    let p = Project::new(&[]);
    p.write_roles_raw(&format!(
        "coder master {} s Coder codex task\n",
        p.root.display()
    ));
    p.write(
        "d.txt",
        "type: note\nto: coder\npriority: 10\nmessage: hi\n",
    );
    let r = p.run(Some("coder"), "swarm-handoff", &["d.txt"]);
    assert_eq!(r.code, 1);
    let tsv = p.path(".swarmforge/roles.tsv");
    assert_eq!(
        r.stderr,
        format!(
            "Unknown sender role: coder\n  hint: {0}: line 1: fewer than 3 TAB-separated columns (7 expected); that line is skipped\n  hint: the roles in {0}: none\n",
            tsv.display()
        )
    );
    let r = p.run(Some("coder"), "ready-next", &[]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.starts_with("Unknown role: coder\n  hint: "),
        "{}",
        r.stderr
    );
}
