//! `ready-next` / `done-current` end to end: every token and refusal of §7.9
//! with its stream and exit code, resume, batch selection, `--json`, malformed
//! inbox files, concurrent loops on one inbox, and `swarm shims`.
//!
//! Items are put into `inbox/new` directly (temp file + rename, as a delivery
//! would), so these tests do not depend on the daemon.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::support::{
    self, clean_command, entries, header_values, is_iso_micros, publish, snapshot, wait_until,
    Project, Role, Run, CREATED, DEADLINE,
};

const ENQUEUED: &str = "2026-06-15T14:05:32.123456Z";
const PREAMBLE: &str = "Re-read your role and constitution.\n\n";

/// `batch_<IDTS>_<NNNNNN>`
fn is_batch_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("batch_") else {
        return false;
    };
    let b = rest.as_bytes();
    b.len() == 23
        && chrono::NaiveDateTime::parse_from_str(&rest[..16], "%Y%m%dT%H%M%SZ").is_ok()
        && b[16] == b'_'
        && b[17..].iter().all(u8::is_ascii_digit)
}

/// Publishes `bytes` at `<handoffs>/<rel>` the way a delivery does.
fn put(p: &Project, rel: &str, bytes: &[u8]) -> PathBuf {
    publish(&p.handoffs(rel), bytes)
}

fn note_text(id: &str, priority: &str, from: &str, msg: &str) -> String {
    format!(
        "id: {id}\nfrom: {from}\nto: coder\nrecipient: coder\npriority: {priority}\ntype: note\n\
         message: {msg}\ncreated_at: {CREATED}\nenqueued_at: {ENQUEUED}\n\n{PREAMBLE}{msg}\n"
    )
}

/// A delivered note in `inbox/new/<name>`.
pub(crate) fn deliver_note(
    p: &Project,
    name: &str,
    priority: &str,
    from: &str,
    msg: &str,
) -> PathBuf {
    let id = name.trim_end_matches(".handoff");
    put(
        p,
        &format!("inbox/new/{name}"),
        note_text(id, priority, from, msg).as_bytes(),
    )
}

/// A git_handoff as SwarmForge's daemon delivered it (`task` rendered last).
fn git_text(id: &str, priority: &str, task: &str) -> String {
    format!(
        "id: {id}\nfrom: qa\nto: coder\nrecipient: coder\npriority: {priority}\ntype: git_handoff\n\
         role: qa\ncommit: 0123456789\ncreated_at: {CREATED}\nenqueued_at: {ENQUEUED}\ntask: {task}\n\n\
         {PREAMBLE}merge_and_process qa 0123456789\n"
    )
}

/// §7.2 printout of one item.
fn task_block(
    path: &Path,
    from: &str,
    ty: &str,
    prio: &str,
    task: Option<&str>,
    body: &str,
) -> String {
    let mut s = format!(
        "TASK: {}\nFROM: {from}\nTYPE: {ty}\nPRIORITY: {prio}\n",
        path.display()
    );
    if let Some(t) = task {
        s.push_str(&format!("TASK_NAME: {t}\n"));
    }
    s.push_str("PAYLOAD:\n");
    s.push_str(body);
    s
}

fn note_block(path: &Path, prio: &str, msg: &str) -> String {
    task_block(
        path,
        "qa",
        "note",
        prio,
        None,
        &format!("{PREAMBLE}{msg}\n"),
    )
}

fn ready(p: &Project, args: &[&str]) -> Run {
    p.run(Some("coder"), "ready-next", args)
}

fn done(p: &Project, args: &[&str]) -> Run {
    p.run(Some("coder"), "done-current", args)
}

fn one_header(path: &Path, name: &str) -> String {
    let text = fs::read_to_string(path).unwrap();
    let v = header_values(&text, name);
    assert_eq!(v.len(), 1, "{name} in {}:\n{text}", path.display());
    v[0].clone()
}

fn project() -> Project {
    Project::builder()
        .role("coder")
        .role(Role::new("qa").mode("batch"))
        .queue_dirs()
        .build()
}

#[test]
fn ready_task_prints_the_first_item_and_stamps_dequeued_at() {
    let p = project();
    put(
        &p,
        "inbox/new/05_a.handoff",
        git_text("a", "05", "fix-it").as_bytes(),
    );
    deliver_note(&p, "10_b.handoff", "10", "qa", "later");
    let ip = p.handoffs("inbox/in_process/05_a.handoff");
    let r = ready(&p, &["--task"]);
    let body = format!("{PREAMBLE}merge_and_process qa 0123456789\n");
    r.is(
        0,
        &task_block(&ip, "qa", "git_handoff", "05", Some("fix-it"), &body),
        "",
    );
    assert_eq!(entries(&p.handoffs("inbox/new")), ["10_b.handoff"]);
    assert_eq!(entries(&p.handoffs("inbox/in_process")), ["05_a.handoff"]);
    let dequeued = one_header(&ip, "dequeued_at");
    assert!(is_iso_micros(&dequeued), "{dequeued}");
    // Rendered in the delivered order of D5, body untouched.
    assert_eq!(
        fs::read_to_string(&ip).unwrap(),
        format!(
            "id: a\nfrom: qa\nto: coder\nrecipient: coder\npriority: 05\ntype: git_handoff\nrole: qa\n\
             task: fix-it\ncommit: 0123456789\ncreated_at: {CREATED}\nenqueued_at: {ENQUEUED}\n\
             dequeued_at: {dequeued}\n\n{body}"
        )
    );

    // Resume: the same printout, the file byte for byte unchanged.
    let before = fs::read(&ip).unwrap();
    let again = ready(&p, &["--task"]);
    again.is(0, &r.stdout, "");
    assert_eq!(fs::read(&ip).unwrap(), before);
    // The dispatcher resumes it too (coder is a task role).
    ready(&p, &[]).is(0, &r.stdout, "");
}

#[test]
fn missing_headers_print_defaults_and_empty_task_name_is_printed() {
    let p = project();
    put(&p, "inbox/new/a.handoff", b"id: a\n\nno newline at end");
    let r = ready(&p, &["--task"]);
    let ip = p.handoffs("inbox/in_process/a.handoff");
    r.is(
        0,
        &task_block(&ip, "unknown", "unknown", "50", None, "no newline at end"),
        "",
    );
    done(&p, &["--task"]).ok();
    put(&p, "inbox/new/b.handoff", b"id: b\ntask: \n\nx\n");
    let ip = p.handoffs("inbox/in_process/b.handoff");
    ready(&p, &["--task"]).is(
        0,
        &task_block(&ip, "unknown", "unknown", "50", Some(""), "x\n"),
        "",
    );
}

#[test]
fn no_task_in_every_mode() {
    let p = project();
    for args in [&["--task"][..], &["--batch"][..]] {
        ready(&p, args).is(0, "NO_TASK\n", "");
    }
    ready(&p, &[]).is(0, "NO_TASK\n", "");
    p.run(Some("qa"), "ready-next", &[]).is(0, "NO_TASK\n", "");
    // Forced modes need no role at all.
    p.run(None, "ready-next", &["--task"])
        .is(0, "NO_TASK\n", "");
}

#[test]
fn done_task_completes_then_hands_out_the_next() {
    let p = project();
    deliver_note(&p, "10_a.handoff", "10", "qa", "first");
    deliver_note(&p, "20_b.handoff", "20", "qa", "second");
    ready(&p, &["--task"]).ok();
    let dequeued = one_header(&p.handoffs("inbox/in_process/10_a.handoff"), "dequeued_at");
    let completed_a = p.handoffs("inbox/completed/10_a.handoff");
    let ip_b = p.handoffs("inbox/in_process/20_b.handoff");
    done(&p, &["--task"]).is(
        0,
        &format!(
            "COMPLETED: {}\n{}",
            completed_a.display(),
            note_block(&ip_b, "20", "second")
        ),
        "",
    );
    let text = fs::read_to_string(&completed_a).unwrap();
    let completed_at = one_header(&completed_a, "completed_at");
    assert!(is_iso_micros(&completed_at));
    assert!(text.ends_with(&format!(
        "enqueued_at: {ENQUEUED}\ndequeued_at: {dequeued}\ncompleted_at: {completed_at}\n\n{PREAMBLE}first\n"
    )));
    assert!(!p.handoffs("inbox/in_process/10_a.handoff").exists());
    assert!(ip_b.exists());
    let completed_b = p.handoffs("inbox/completed/20_b.handoff");
    done(&p, &[]).is(
        0,
        &format!("COMPLETED: {}\nNO_TASK\n", completed_b.display()),
        "",
    );
    done(&p, &["--task"]).is(1, "", "NO_CURRENT_TASK\n");
    done(&p, &["--batch"]).is(1, "", "NO_CURRENT_BATCH\n");
    assert_eq!(
        entries(&p.handoffs("inbox/completed")),
        ["10_a.handoff", "20_b.handoff"]
    );
    assert_eq!(entries(&p.handoffs("inbox/tmp")), Vec::<String>::new());
}

/// Splits `BATCH: <dir>` off a batch printout.
fn batch_dir(stdout: &str) -> PathBuf {
    let first = stdout.lines().next().unwrap_or("");
    PathBuf::from(
        first
            .strip_prefix("BATCH: ")
            .unwrap_or_else(|| panic!("not a batch: {stdout}")),
    )
}

fn batch_text(dir: &Path, prio: &str, items: &[String]) -> String {
    let mut s = format!(
        "BATCH: {}\nCOUNT: {}\nPRIORITY: {prio}\n",
        dir.display(),
        items.len()
    );
    for (i, item) in items.iter().enumerate() {
        s.push_str(&format!("\nBATCH_ITEM: {}\n{item}", i + 1));
    }
    s
}

#[test]
fn batch_takes_every_item_with_the_first_items_priority_header() {
    let p = project();
    for (name, prio) in [
        ("10_a", Some("10")),
        ("10_b", Some("10")),
        ("10_d", Some("10")),
        ("20_c", Some("20")),
        ("x_item", Some("10")),
        ("y_item", Some("20")),
        ("z_item", None),
    ] {
        let text = match prio {
            Some(pr) => note_text(name, pr, "qa", name),
            None => format!("id: {name}\nfrom: qa\ntype: note\n\n{PREAMBLE}{name}\n"),
        };
        put(&p, &format!("inbox/new/{name}.handoff"), text.as_bytes());
    }
    let r = ready(&p, &["--batch"]);
    let dir = batch_dir(&r.stdout);
    assert_eq!(dir.parent().unwrap(), p.handoffs("inbox/in_process"));
    let dir_name = dir.file_name().unwrap().to_str().unwrap().to_string();
    assert!(is_batch_name(&dir_name), "{dir_name}");
    assert!(dir_name.ends_with("_000001"), "{dir_name}");
    let first = ["10_a", "10_b", "10_d", "x_item"];
    let items: Vec<String> = first
        .iter()
        .map(|n| note_block(&dir.join(format!("{n}.handoff")), "10", n))
        .collect();
    r.is(0, &batch_text(&dir, "10", &items), "");
    assert_eq!(
        entries(&p.handoffs("inbox/new")),
        ["20_c.handoff", "y_item.handoff", "z_item.handoff"]
    );
    for n in first {
        let d = one_header(&dir.join(format!("{n}.handoff")), "dequeued_at");
        assert!(is_iso_micros(&d));
    }

    // Resume: the same batch, unchanged.
    let before = snapshot(&p.handoffs("inbox"));
    ready(&p, &["--batch"]).is(0, &r.stdout, "");
    p.run(Some("qa"), "ready-next", &[]).is(0, &r.stdout, "");
    assert_eq!(snapshot(&p.handoffs("inbox")), before);

    // Done: every file, then the batch, then the next batch (priority 20).
    let d = done(&p, &["--batch"]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let completed = p.handoffs("inbox/completed").join(&dir_name);
    let next = batch_dir(d.stdout.lines().nth(5).unwrap_or(""));
    let mut want = String::new();
    for n in first {
        want.push_str(&format!(
            "COMPLETED: {}\n",
            completed.join(format!("{n}.handoff")).display()
        ));
    }
    want.push_str(&format!("COMPLETED_BATCH: {}\n", completed.display()));
    let items: Vec<String> = [("20_c", "20"), ("y_item", "20")]
        .iter()
        .map(|(n, pr)| note_block(&next.join(format!("{n}.handoff")), pr, n))
        .collect();
    want.push_str(&batch_text(&next, "20", &items));
    d.is(0, &want, "");
    assert!(!dir.exists());
    assert_eq!(entries(&completed), first.map(|n| format!("{n}.handoff")));
    let stamps: BTreeSet<String> = first
        .iter()
        .map(|n| one_header(&completed.join(format!("{n}.handoff")), "completed_at"))
        .collect();
    assert_eq!(stamps.len(), 1, "one completion time for the whole batch");

    // The last batch: the item without a priority header counts as 50.
    let d = p.run(Some("qa"), "done-current", &[]);
    d.ok();
    let last = batch_dir(d.stdout.lines().nth(3).unwrap_or(""));
    let tail = batch_text(
        &last,
        "50",
        &[task_block(
            &last.join("z_item.handoff"),
            "qa",
            "note",
            "50",
            None,
            &format!("{PREAMBLE}z_item\n"),
        )],
    );
    assert!(d.stdout.ends_with(&tail), "{}", d.stdout);
    let d = done(&p, &["--batch"]);
    assert!(d.stdout.ends_with("\nNO_TASK\n"), "{}", d.stdout);
    done(&p, &["--batch"]).is(1, "", "NO_CURRENT_BATCH\n");
    let batches = entries(&p.handoffs("inbox/completed"));
    assert_eq!(batches.len(), 3);
    assert!(batches.iter().all(|b| is_batch_name(b)), "{batches:?}");
    assert_eq!(
        entries(&p.handoffs("inbox/in_process")),
        Vec::<String>::new()
    );
}

#[test]
fn batch_name_skips_names_taken_in_completed() {
    let p = project();
    // SwarmForge only looked in in_process/, so a second batch in the same
    // second collided at completion.
    let now = chrono::Utc::now();
    for s in -1..=10 {
        let t = now + chrono::Duration::seconds(s);
        let name = format!("batch_{}_000001", t.format("%Y%m%dT%H%M%SZ"));
        fs::create_dir(p.handoffs("inbox/completed").join(name)).unwrap();
    }
    deliver_note(&p, "10_a.handoff", "10", "qa", "a");
    let r = ready(&p, &["--batch"]);
    r.ok();
    let dir = batch_dir(&r.stdout);
    let name = dir.file_name().unwrap().to_str().unwrap();
    assert!(is_batch_name(name) && name.ends_with("_000002"), "{name}");
    done(&p, &["--batch"]).ok();
    assert!(p
        .handoffs("inbox/completed")
        .join(name)
        .join("10_a.handoff")
        .is_file());
}

/// Runs `args` and checks exit 2, the exact stderr, and an untouched inbox.
fn refused(p: &Project, program: &str, args: &[&str], stderr: &str) {
    let before = snapshot(&p.handoffs("inbox"));
    let r = p.run(Some("coder"), program, args);
    r.is(2, "", stderr);
    assert_eq!(
        snapshot(&p.handoffs("inbox")),
        before,
        "{program} {args:?} changed the inbox"
    );
}

#[test]
fn mode_mismatch_refusals() {
    let p = project();
    let batch = p.handoffs("inbox/in_process/batch_20260101T000000Z_000001");
    put(
        &p,
        "inbox/in_process/batch_20260101T000000Z_000001/10_a.handoff",
        note_text("a", "10", "qa", "a").as_bytes(),
    );
    deliver_note(&p, "10_n.handoff", "10", "qa", "n");
    refused(
        &p,
        "ready-next",
        &["--task"],
        &format!(
            "TASK_IN_PROCESS_IS_BATCH: use ready_for_next.sh or done_with_current.sh.\n- {}\n",
            batch.display()
        ),
    );
    refused(
        &p,
        "done-current",
        &["--task"],
        &format!(
            "CURRENT_WORK_IS_BATCH: use done_with_current.sh.\n- {}\n",
            batch.display()
        ),
    );
    fs::remove_dir_all(&batch).unwrap();
    let file = put(
        &p,
        "inbox/in_process/10_b.handoff",
        note_text("b", "10", "qa", "b").as_bytes(),
    );
    refused(
        &p,
        "ready-next",
        &["--batch"],
        &format!(
            "TASK_IN_PROCESS_IS_SINGLE: use ready_for_next.sh or done_with_current.sh.\n- {}\n",
            file.display()
        ),
    );
    refused(
        &p,
        "done-current",
        &["--batch"],
        &format!(
            "CURRENT_WORK_IS_SINGLE_TASK: use done_with_current.sh.\n- {}\n",
            file.display()
        ),
    );
}

#[test]
fn ambiguous_states_are_refused_and_left_alone() {
    let p = project();
    let a = put(
        &p,
        "inbox/in_process/10_a.handoff",
        note_text("a", "10", "qa", "a").as_bytes(),
    );
    let b = put(
        &p,
        "inbox/in_process/20_b.handoff",
        note_text("b", "20", "qa", "b").as_bytes(),
    );
    let list = format!("- {}\n- {}\n", a.display(), b.display());
    refused(
        &p,
        "ready-next",
        &["--task"],
        &format!("AMBIGUOUS_TASK_STATE: multiple tasks are already in process.\n{list}"),
    );
    refused(
        &p,
        "done-current",
        &["--task"],
        &format!("AMBIGUOUS_TASK_STATE: multiple tasks are in process.\n{list}"),
    );
    fs::remove_file(&a).unwrap();
    fs::remove_file(&b).unwrap();

    let b1 = p.handoffs("inbox/in_process/batch_20260101T000000Z_000001");
    let b2 = p.handoffs("inbox/in_process/batch_20260101T000000Z_000002");
    put(
        &p,
        "inbox/in_process/batch_20260101T000000Z_000001/10_a.handoff",
        note_text("a", "10", "qa", "a").as_bytes(),
    );
    put(
        &p,
        "inbox/in_process/batch_20260101T000000Z_000002/10_b.handoff",
        note_text("b", "10", "qa", "b").as_bytes(),
    );
    let list = format!("- {}\n- {}\n", b1.display(), b2.display());
    refused(
        &p,
        "ready-next",
        &["--batch"],
        &format!("AMBIGUOUS_TASK_STATE: multiple batches are already in process.\n{list}"),
    );
    refused(
        &p,
        "done-current",
        &["--batch"],
        &format!("AMBIGUOUS_TASK_STATE: multiple batches are in process.\n{list}"),
    );
    fs::remove_dir_all(&b2).unwrap();
    fs::remove_file(b1.join("10_a.handoff")).unwrap();

    // A batch holding no handoff (only a stray file) is not guessed at.
    fs::write(b1.join("notes.txt"), "x").unwrap();
    let msg = format!(
        "AMBIGUOUS_TASK_STATE: batch contains no tasks: {}\n",
        b1.display()
    );
    refused(&p, "ready-next", &["--batch"], &msg);
    refused(&p, "done-current", &["--batch"], &msg);
    fs::remove_dir_all(&b1).unwrap();
}

#[test]
fn weakness_08_refused_done_changes_nothing() {
    let p = project();
    // SwarmForge stamped completed_at before finding the target taken.
    put(
        &p,
        "inbox/in_process/10_a.handoff",
        note_text("a", "10", "qa", "a").as_bytes(),
    );
    let taken = put(&p, "inbox/completed/10_a.handoff", b"older\n");
    refused(
        &p,
        "done-current",
        &["--task"],
        &format!(
            "AMBIGUOUS_TASK_STATE: completed file already exists: {}\n",
            taken.display()
        ),
    );
    fs::remove_file(p.handoffs("inbox/in_process/10_a.handoff")).unwrap();

    let name = "batch_20260101T000000Z_000001";
    put(
        &p,
        &format!("inbox/in_process/{name}/10_a.handoff"),
        note_text("a", "10", "qa", "a").as_bytes(),
    );
    put(
        &p,
        &format!("inbox/in_process/{name}/10_b.handoff"),
        note_text("b", "10", "qa", "b").as_bytes(),
    );
    fs::create_dir(p.handoffs("inbox/completed").join(name)).unwrap();
    refused(
        &p,
        "done-current",
        &["--batch"],
        &format!(
            "AMBIGUOUS_TASK_STATE: completed batch already exists: {}\n",
            p.handoffs("inbox/completed").join(name).display()
        ),
    );
}

#[test]
fn dispatcher_refusals() {
    let p = project();
    for program in ["ready-next", "done-current"] {
        for role in [None, Some("")] {
            p.run(role, program, &[])
                .is(1, "", "Set SWARMFORGE_ROLE.\n");
        }
        p.run(Some("ghost"), program, &[]).is(
            1,
            "",
            &format!(
                "Unknown role: ghost\n  hint: the roles in {}: coder, qa\n",
                p.path(".swarmforge/roles.tsv").display()
            ),
        );
    }
    p.write_roles(&[("coder", "bogus")]);
    for program in ["ready-next", "done-current"] {
        p.run(Some("coder"), program, &[]).is(
            2,
            "",
            "INVALID_RECEIVE_MODE: bogus for role coder\n",
        );
    }
    fs::remove_file(p.path(".swarmforge/roles.tsv")).unwrap();
    for program in ["ready-next", "done-current"] {
        // SwarmForge's line first, byte for byte; a hint follows it.
        let r = p.run(Some("coder"), program, &[]);
        assert_eq!(
            (r.code, r.stdout.as_str(), r.stderr.lines().next()),
            (1, "", Some("Cannot find SwarmForge project root"))
        );
    }
}

#[test]
fn weakness_21_empty_mode_column_is_task() {
    let p = project();
    let root = p.root.display();
    // An empty 7th column, and a row with only six columns.
    p.write_roles_raw(&format!(
        "coder\tmaster\t{root}\tswarmforge-coder\tCoder\tcodex\t\n\
         qa\tmaster\t{root}\tswarmforge-qa\tQa\tcodex\n"
    ));
    for role in ["coder", "qa"] {
        p.run(Some(role), "ready-next", &[]).is(0, "NO_TASK\n", "");
    }
    deliver_note(&p, "10_a.handoff", "10", "qa", "a");
    let ip = p.handoffs("inbox/in_process/10_a.handoff");
    p.run(Some("coder"), "ready-next", &[])
        .is(0, &note_block(&ip, "10", "a"), "");
    p.run(Some("qa"), "done-current", &[]).is(
        0,
        &format!(
            "COMPLETED: {}\nNO_TASK\n",
            p.handoffs("inbox/completed/10_a.handoff").display()
        ),
        "",
    );
}

#[test]
fn json_output_of_ready_and_done() {
    let p = project();
    let r = ready(&p, &["--json", "--task"]);
    assert_eq!(
        (r.code, r.json()),
        (
            0,
            serde_json::json!({"status": "no_task", "schema_version": 1})
        )
    );
    put(
        &p,
        "inbox/new/05_a.handoff",
        git_text("a", "05", "fix-it").as_bytes(),
    );
    let r = ready(&p, &["--json"]);
    r.ok();
    let v = r.json();
    let ip = p.handoffs("inbox/in_process/05_a.handoff");
    assert_eq!(v["status"], "task");
    assert_eq!(v["resumed"], false);
    assert_eq!(v["path"], ip.display().to_string());
    assert_eq!(v["id"], "a");
    assert_eq!(v["from"], "qa");
    assert_eq!(v["type"], "git_handoff");
    assert_eq!(v["priority"], "05");
    assert_eq!(v["task_name"], "fix-it");
    assert_eq!(
        v["payload"],
        format!("{PREAMBLE}merge_and_process qa 0123456789\n")
    );
    assert_eq!(v["headers"]["commit"], "0123456789");
    assert_eq!(v["headers"]["dequeued_at"], one_header(&ip, "dequeued_at"));
    assert_eq!(ready(&p, &["--json"]).json()["resumed"], true);

    // A refusal: the same facts on stdout, the text on stderr.
    let r = ready(&p, &["--json", "--batch"]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        format!(
            "TASK_IN_PROCESS_IS_SINGLE: use ready_for_next.sh or done_with_current.sh.\n- {}\n",
            ip.display()
        )
    );
    let v = r.json();
    assert_eq!(v["status"], "error");
    assert_eq!(v["token"], "TASK_IN_PROCESS_IS_SINGLE");
    assert_eq!(v["exit_code"], 2);
    assert_eq!(v["paths"], serde_json::json!([ip.display().to_string()]));

    let r = done(&p, &["--json"]);
    r.ok();
    assert_eq!(
        r.json(),
        serde_json::json!({
            "schema_version": 1,
            "status": "completed",
            "completed": [p.handoffs("inbox/completed/05_a.handoff")],
            "completed_batch": null,
            "next": {"status": "no_task"},
        })
    );
    let r = done(&p, &["--json", "--task"]);
    assert_eq!((r.code, r.stderr.as_str()), (1, "NO_CURRENT_TASK\n"));
    let v = r.json();
    assert_eq!(v["token"], "NO_CURRENT_TASK");
    assert_eq!(v["exit_code"], 1);

    deliver_note(&p, "10_b.handoff", "10", "qa", "b");
    deliver_note(&p, "10_c.handoff", "10", "qa", "c");
    let r = p.run(Some("qa"), "ready-next", &["--json"]);
    r.ok();
    let v = r.json();
    assert_eq!(v["status"], "batch");
    assert_eq!(v["resumed"], false);
    assert_eq!(v["count"], 2);
    assert_eq!(v["priority"], "10");
    let dir = PathBuf::from(v["path"].as_str().unwrap());
    assert_eq!(
        v["items"][1]["path"],
        dir.join("10_c.handoff").display().to_string()
    );
    assert_eq!(v["items"][0]["payload"], format!("{PREAMBLE}b\n"));
    let r = p.run(Some("qa"), "done-current", &["--json"]);
    r.ok();
    let v = r.json();
    let completed = p.handoffs("inbox/completed").join(dir.file_name().unwrap());
    assert_eq!(v["completed_batch"], completed.display().to_string());
    assert_eq!(
        v["completed"],
        serde_json::json!([
            completed.join("10_b.handoff"),
            completed.join("10_c.handoff")
        ])
    );
    assert_eq!(v["next"]["status"], "no_task");
}

/// One planted item of each malformed kind: (name, how to plant it, reason).
type Plant = Box<dyn Fn(&Project, &Path)>;

fn plants() -> Vec<(&'static str, Plant, String)> {
    let bytes = |b: &'static [u8]| -> Plant {
        Box::new(move |_: &Project, path: &Path| fs::write(path, b).unwrap())
    };
    vec![
        (
            "00_noblank.handoff",
            bytes(b"id: x\nfrom: qa\n"),
            "no blank line after the headers".into(),
        ),
        (
            "00_dup.handoff",
            bytes(b"id: x\nfrom: qa\nfrom: boss\n\nbody\n"),
            "line 3: duplicate header 'from'".into(),
        ),
        (
            "00_ctl.handoff",
            bytes(b"id: x\ntask: a\x1b[31mb\n\nbody\n"),
            "line 2: header 'task' contains a control character".into(),
        ),
        (
            "00_ctlbody.handoff",
            bytes(b"id: x\n\nTASK: fake\r\x1b[2J\n"),
            "body contains control character U+000D".into(),
        ),
        (
            "00_utf8.handoff",
            bytes(b"id: \xff\xfe\n\nbody\n"),
            "not valid UTF-8".into(),
        ),
        (
            "00_big.handoff",
            Box::new(|_: &Project, path: &Path| {
                let mut b = b"id: x\n\n".to_vec();
                // Past the limit and the room kept for delivery stamps.
                b.resize(1024 * 1024 + 4096 + 1, b'x');
                fs::write(path, b).unwrap()
            }),
            "file too large (1052673 bytes)".into(),
        ),
        (
            "00_link.handoff",
            Box::new(|_: &Project, path: &Path| {
                std::os::unix::fs::symlink("/etc/passwd", path).unwrap()
            }),
            "symlink".into(),
        ),
        (
            "00_fifo.handoff",
            Box::new(|p: &Project, path: &Path| {
                let r: Run = clean_command(Path::new("mkfifo"), &p.root)
                    .arg(path)
                    .output()
                    .unwrap()
                    .into();
                r.ok();
            }),
            "not a regular file".into(),
        ),
        (
            "00 space.handoff",
            bytes(b"id: x\n\nbody\n"),
            "invalid file name".into(),
        ),
    ]
}

#[test]
fn malformed_inbox_files_are_rejected_and_the_queue_moves_on() {
    let p = project();
    for (i, (name, plant, reason)) in plants().into_iter().enumerate() {
        let good = format!("50_good{i}.handoff");
        deliver_note(&p, &good, "50", "qa", "good");
        plant(&p, &p.handoffs("inbox/new").join(name));
        let rejected = p.handoffs("inbox/rejected").join(name);
        ready(&p, &["--task"]).is(
            2,
            "",
            &format!("MALFORMED_HANDOFF: {reason}\n- {}\n", rejected.display()),
        );
        assert!(
            !p.handoffs("inbox/new").join(name).exists(),
            "{name} left new/"
        );
        assert!(
            fs::symlink_metadata(&rejected).is_ok(),
            "{name} not in rejected/"
        );
        assert_eq!(
            fs::read_to_string(p.handoffs("inbox/rejected").join(format!("{name}.error"))).unwrap(),
            format!("{reason}\n")
        );
        assert_eq!(
            entries(&p.handoffs("inbox/in_process")),
            Vec::<String>::new()
        );
        // The next call proceeds with the good item.
        let ip = p.handoffs("inbox/in_process").join(&good);
        ready(&p, &["--task"]).is(0, &note_block(&ip, "50", "good"), "");
        done(&p, &["--task"]).ok();
    }
    assert!(fs::read_to_string("/etc/passwd").is_ok());
    assert_eq!(entries(&p.handoffs("inbox/new")), Vec::<String>::new());
}

#[test]
fn malformed_item_among_batch_candidates_is_rejected_first() {
    let p = project();
    deliver_note(&p, "10_a.handoff", "10", "qa", "a");
    put(
        &p,
        "inbox/new/10_b.handoff",
        b"id: b\npriority: 10\npriority: 10\n\nx\n",
    );
    deliver_note(&p, "10_c.handoff", "10", "qa", "c");
    let rejected = p.handoffs("inbox/rejected/10_b.handoff");
    ready(&p, &["--batch"]).is(
        2,
        "",
        &format!(
            "MALFORMED_HANDOFF: line 3: duplicate header 'priority'\n- {}\n",
            rejected.display()
        ),
    );
    assert_eq!(
        entries(&p.handoffs("inbox/in_process")),
        Vec::<String>::new()
    );
    let r = ready(&p, &["--batch"]);
    r.ok();
    assert_eq!(
        entries(&batch_dir(&r.stdout)),
        ["10_a.handoff", "10_c.handoff"]
    );
}

#[test]
fn done_reports_completion_even_when_the_next_item_is_malformed() {
    let p = project();
    deliver_note(&p, "10_a.handoff", "10", "qa", "a");
    ready(&p, &["--task"]).ok();
    put(&p, "inbox/new/20_bad.handoff", b"id: x\n");
    done(&p, &["--task"]).is(
        2,
        &format!(
            "COMPLETED: {}\n",
            p.handoffs("inbox/completed/10_a.handoff").display()
        ),
        &format!(
            "MALFORMED_HANDOFF: no blank line after the headers\n- {}\n",
            p.handoffs("inbox/rejected/20_bad.handoff").display()
        ),
    );
    ready(&p, &["--task"]).is(0, "NO_TASK\n", "");
}

#[test]
fn weakness_19_ambiguous_files_are_refused_not_guessed() {
    let p = project();
    // SwarmForge's helpers took the first `from`, its daemon the last; a
    // whitespace-only line ended the helpers' headers but not the body split.
    for (name, text, reason) in [
        (
            "00_a.handoff",
            "id: a\nfrom: qa\nfrom: boss\n\nx\n",
            "line 3: duplicate header 'from'",
        ),
        (
            "00_b.handoff",
            "id: b\n  \npriority: 00\n\nx\n",
            "line 2: expected 'field: value'",
        ),
    ] {
        put(&p, &format!("inbox/new/{name}"), text.as_bytes());
        let r = ready(&p, &["--task"]);
        assert_eq!((r.code, r.stdout.as_str()), (2, ""));
        assert!(
            r.stderr
                .starts_with(&format!("MALFORMED_HANDOFF: {reason}\n")),
            "{}",
            r.stderr
        );
    }
    ready(&p, &["--task"]).is(0, "NO_TASK\n", "");
}

#[test]
fn weakness_04_stamp_keeps_mode_and_file_never_vanishes() {
    let p = project();
    let tmp = p.handoffs("inbox/.mode.tmp");
    fs::write(&tmp, note_text("a", "10", "qa", "a")).unwrap();
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o640)).unwrap();
    fs::rename(&tmp, p.handoffs("inbox/new/10_a.handoff")).unwrap();
    let ip = p.handoffs("inbox/in_process/10_a.handoff");
    ready(&p, &["--task"]).ok();
    assert_eq!(
        fs::metadata(&ip).unwrap().permissions().mode() & 0o7777,
        0o640
    );
    done(&p, &["--task"]).ok();
    let completed = p.handoffs("inbox/completed/10_a.handoff");
    assert_eq!(
        fs::metadata(&completed).unwrap().permissions().mode() & 0o7777,
        0o640
    );

    // An in-process item without dequeued_at (a crash after the move) is
    // stamped in place; a watcher never sees the path missing (SwarmForge's
    // unlink + rename left a gap, and lost the file if killed inside it). The
    // gap is microseconds wide, so it takes many rounds to be sure to hit it.
    for i in 0..100 {
        let name = format!("10_v{i}.handoff");
        let path = put(
            &p,
            &format!("inbox/in_process/{name}"),
            note_text("v", "10", "qa", "v").as_bytes(),
        );
        let ino = fs::metadata(&path).unwrap().ino();
        let stop = AtomicBool::new(false);
        let misses = AtomicUsize::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    if fs::symlink_metadata(&path).is_err() {
                        misses.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
            let r = ready(&p, &["--task"]);
            stop.store(true, Ordering::Relaxed);
            r.ok();
        });
        assert_eq!(
            misses.load(Ordering::Relaxed),
            0,
            "the file vanished during the stamp"
        );
        assert_ne!(
            fs::metadata(&path).unwrap().ino(),
            ino,
            "replaced, not rewritten in place"
        );
        assert!(is_iso_micros(&one_header(&path, "dequeued_at")));
        assert_eq!(entries(&p.handoffs("inbox/in_process")), [name]);
        fs::remove_file(&path).unwrap();
    }
    assert_eq!(entries(&p.handoffs("inbox/tmp")), Vec::<String>::new());
}

/// Distinct queue entries in `in_process/` (files and batch folders).
fn in_process_entries(dir: &Path) -> BTreeSet<String> {
    match fs::read_dir(dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".handoff") || n.starts_with("batch_"))
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

#[test]
fn weakness_07_concurrent_ready_never_two_in_process() {
    const N: usize = 8;
    let p = project();
    for mode in ["--task", "--batch"] {
        for i in 0..5 {
            deliver_note(&p, &format!("10_{i}.handoff"), "10", "qa", "m");
        }
        deliver_note(&p, "20_x.handoff", "20", "qa", "m");
        let barrier = std::sync::Barrier::new(N);
        let runs: Vec<Run> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..N)
                .map(|_| {
                    let (p, barrier) = (&p, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        ready(p, &[mode])
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in &runs {
            // Everyone gets the same work; nobody sees an ambiguous state.
            r.is(0, &runs[0].stdout, "");
        }
        let ip = in_process_entries(&p.handoffs("inbox/in_process"));
        assert_eq!(ip.len(), 1, "{mode}: {ip:?}");
        let left = if mode == "--task" { 5 } else { 1 };
        assert_eq!(entries(&p.handoffs("inbox/new")).len(), left, "{mode}");
        // Finish everything before the next mode.
        for _ in 0..10 {
            let d = done(&p, &[mode]);
            d.ok();
            if d.stdout.ends_with("NO_TASK\n") {
                break;
            }
        }
        assert_eq!(in_process_entries(&p.handoffs("inbox/in_process")).len(), 0);
    }
}

/// Runs ready/done loops in `workers` threads while a producer keeps adding
/// items; returns every `COMPLETED:` and `COMPLETED_BATCH:` line printed. A
/// monitor checks that `in_process/` never holds two entries.
fn run_loops(
    p: &Project,
    mode: &str,
    items: &[(String, String)],
    upfront: usize,
    workers: usize,
) -> (Vec<String>, Vec<String>) {
    for (name, prio) in &items[..upfront] {
        deliver_note(p, name, prio, "qa", name);
    }
    let produced = AtomicBool::new(false);
    let finished = AtomicBool::new(false);
    let completed = Mutex::new(Vec::new());
    let batches = Mutex::new(Vec::new());
    let worst = AtomicUsize::new(0);
    let no_current = if mode == "--task" {
        "NO_CURRENT_TASK\n"
    } else {
        "NO_CURRENT_BATCH\n"
    };
    let head = if mode == "--task" {
        "TASK: "
    } else {
        "BATCH: "
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let ip = p.handoffs("inbox/in_process");
            while !finished.load(Ordering::Relaxed) {
                std::thread::yield_now();
                let entries = in_process_entries(&ip);
                worst.fetch_max(entries.len(), Ordering::Relaxed);
                if mode == "--batch" {
                    assert!(
                        entries.iter().all(|e| e.starts_with("batch_")),
                        "{entries:?}"
                    );
                }
            }
        });
        s.spawn(|| {
            // Add the rest in chunks whenever the backlog runs low, so items
            // arrive while the loops are busy.
            for chunk in items[upfront..].chunks(10) {
                wait_until(DEADLINE, "backlog drains", || {
                    finished.load(Ordering::Relaxed) || entries(&p.handoffs("inbox/new")).len() < 5
                });
                if finished.load(Ordering::Relaxed) {
                    break; // every loop died; their panic is reported below
                }
                for (name, prio) in chunk {
                    deliver_note(p, name, prio, "qa", name);
                }
            }
            produced.store(true, Ordering::SeqCst);
        });
        let loops: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| loop {
                    let last_round = produced.load(Ordering::SeqCst);
                    let r = ready(p, &[mode]);
                    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "ready: {}", r.stdout);
                    if r.stdout == "NO_TASK\n" {
                        if last_round {
                            break;
                        }
                        continue;
                    }
                    assert!(r.stdout.starts_with(head), "{}", r.stdout);
                    let d = done(p, &[mode]);
                    match d.code {
                        0 => assert_eq!(d.stderr, ""),
                        1 => assert_eq!(d.stderr, no_current),
                        _ => panic!("done: {} {}", d.stdout, d.stderr),
                    }
                    for l in d.stdout.lines() {
                        if let Some(x) = l.strip_prefix("COMPLETED: ") {
                            completed.lock().unwrap().push(x.to_string());
                        } else if let Some(x) = l.strip_prefix("COMPLETED_BATCH: ") {
                            batches.lock().unwrap().push(x.to_string());
                        }
                    }
                })
            })
            .collect();
        // Stop the monitor and producer even when a loop panicked, then report it.
        let results: Vec<_> = loops.into_iter().map(|l| l.join()).collect();
        finished.store(true, Ordering::Relaxed);
        for r in results {
            if let Err(e) = r {
                std::panic::resume_unwind(e);
            }
        }
    });
    assert_eq!(
        worst.load(Ordering::Relaxed),
        1,
        "in_process never holds two entries"
    );
    for d in ["inbox/new", "inbox/in_process", "inbox/tmp"] {
        assert_eq!(entries(&p.handoffs(d)), Vec::<String>::new(), "{d}");
    }
    assert!(!p.handoffs("inbox/rejected").exists());
    let mut completed = completed.into_inner().unwrap();
    completed.sort();
    let mut batches = batches.into_inner().unwrap();
    batches.sort();
    (completed, batches)
}

fn numbered_items(n: usize, prios: &[&str]) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            let prio = prios[i % prios.len()];
            (format!("{prio}_{i:04}.handoff"), prio.to_string())
        })
        .collect()
}

#[test]
fn concurrent_task_loops_complete_every_item_once() {
    let p = project();
    let items = numbered_items(120, &["10", "20", "30"]);
    let (completed, batches) = run_loops(&p, "--task", &items, 40, 4);
    assert!(batches.is_empty());
    let dir = p.handoffs("inbox/completed");
    let mut want: Vec<String> = items
        .iter()
        .map(|(n, _)| dir.join(n).display().to_string())
        .collect();
    want.sort();
    // Each item reported completed exactly once, and there exactly once.
    assert_eq!(completed, want);
    let mut files: Vec<String> = items.iter().map(|(n, _)| n.clone()).collect();
    files.sort();
    assert_eq!(entries(&dir), files);
    for (name, _) in &items {
        let path = dir.join(name);
        one_header(&path, "dequeued_at");
        one_header(&path, "completed_at");
        assert!(fs::read_to_string(&path)
            .unwrap()
            .ends_with(&format!("\n\n{PREAMBLE}{name}\n")));
    }
}

#[test]
fn concurrent_batch_loops_complete_every_item_once() {
    let p = project();
    let items = numbered_items(150, &["10", "20", "30"]);
    let (completed, batches) = run_loops(&p, "--batch", &items, 30, 4);
    let dir = p.handoffs("inbox/completed");
    let dirs = entries(&dir);
    assert!(dirs.iter().all(|d| is_batch_name(d)), "{dirs:?}");
    let want_batches: Vec<String> = dirs
        .iter()
        .map(|d| dir.join(d).display().to_string())
        .collect();
    assert_eq!(batches, want_batches, "each batch completed exactly once");
    let mut seen: Vec<String> = Vec::new();
    let mut reported: Vec<String> = Vec::new();
    for b in &dirs {
        let files = entries(&dir.join(b));
        assert!(!files.is_empty());
        let prios: BTreeSet<String> = files
            .iter()
            .map(|f| one_header(&dir.join(b).join(f), "priority"))
            .collect();
        assert_eq!(prios.len(), 1, "{b} mixes priorities: {prios:?}");
        let stamps: BTreeSet<String> = files
            .iter()
            .map(|f| one_header(&dir.join(b).join(f), "completed_at"))
            .collect();
        assert_eq!(stamps.len(), 1, "{b}: one completion time");
        for f in files {
            one_header(&dir.join(b).join(&f), "dequeued_at");
            reported.push(dir.join(b).join(&f).display().to_string());
            seen.push(f);
        }
    }
    seen.sort();
    let mut want: Vec<String> = items.iter().map(|(n, _)| n.clone()).collect();
    want.sort();
    assert_eq!(seen, want, "every item in exactly one completed batch");
    reported.sort();
    assert_eq!(
        completed, reported,
        "each item reported completed exactly once"
    );
}

#[test]
fn shims_write_executable_wrappers_that_work_from_path() {
    let p = Project::new(&[("coder", "task"), ("qa", "batch")]);
    let shims = tempfile::tempdir().unwrap();
    let dir = shims.path().canonicalize().unwrap();
    let bin = support::bin_dir();
    let table = [
        ("swarm_handoff.sh", "swarm-handoff", ""),
        ("ready_for_next.sh", "ready-next", ""),
        // Today's SwarmForge done helpers take nothing next: they print
        // MAIL_WAITING or NO_TASK (docs/swarmforge-compat.md §1).
        ("done_with_current.sh", "done-current", " --mail-waiting"),
        ("ready_for_next_task.sh", "ready-next", " --task"),
        ("ready_for_next_batch.sh", "ready-next", " --batch"),
        (
            "done_with_current_task.sh",
            "done-current",
            " --task --mail-waiting",
        ),
        (
            "done_with_current_batch.sh",
            "done-current",
            " --batch --mail-waiting",
        ),
        ("stop_handoff_daemon.sh", "swarm", " stop"),
    ];
    let listing: String = table
        .iter()
        .map(|(n, _, _)| format!("{}\n", dir.join(n).display()))
        .collect();
    // Twice: the second run rewrites the same wrappers and leaves nothing else.
    for _ in 0..2 {
        p.run(None, "swarm", &["shims", dir.to_str().unwrap()])
            .is(0, &listing, "");
        let mut want: Vec<&str> = table.iter().map(|(n, _, _)| *n).collect();
        want.sort_unstable();
        assert_eq!(entries(&dir), want);
        for (name, binary, flags) in table {
            let path = dir.join(name);
            assert_eq!(
                fs::read_to_string(&path).unwrap(),
                format!(
                    "#!/bin/sh\nexec '{}/{binary}'{flags} \"$@\"\n",
                    bin.display()
                )
            );
            assert_eq!(
                fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
                0o755
            );
        }
    }

    // Agents call them by name from PATH, as SwarmForge's prompts say.
    let sh = |role: Option<&str>, script: &str| -> Run {
        let mut c = clean_command(Path::new("sh"), &p.root);
        c.env(
            "PATH",
            format!(
                "{}:{}",
                dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .args(["-c", script]);
        if let Some(r) = role {
            c.env("SWARMFORGE_ROLE", r);
        }
        c.output().unwrap().into()
    };
    sh(None, "ready_for_next_task.sh").is(0, "NO_TASK\n", "");
    sh(None, "ready_for_next_batch.sh").is(0, "NO_TASK\n", "");
    sh(Some("coder"), "done_with_current.sh").is(1, "", "NO_CURRENT_TASK\n");
    sh(None, "done_with_current_batch.sh").is(1, "", "NO_CURRENT_BATCH\n");
    p.write(
        "draft.txt",
        "type: note\nto: coder\npriority: 10\nmessage: via shim\n",
    );
    let r = sh(Some("coder"), "swarm_handoff.sh draft.txt");
    r.ok();
    assert!(r.stdout.starts_with(&format!(
        "HANDOFF QUEUED: {}",
        p.handoffs("outbox/").display()
    )));
    deliver_note(&p, "10_a.handoff", "10", "qa", "a");
    let r = sh(Some("coder"), "ready_for_next.sh");
    r.is(
        0,
        &note_block(&p.handoffs("inbox/in_process/10_a.handoff"), "10", "a"),
        "",
    );
    let r = sh(None, "done_with_current_task.sh");
    assert!(r.stdout.starts_with("COMPLETED: "), "{}", r.stdout);
}

#[test]
fn shims_refuse_a_missing_directory() {
    let p = Project::new(&[("coder", "task")]);
    p.write("afile", "x");
    let deeper = p.path("gone/deeper");
    for (arg, shown) in [
        ("nope", p.path("nope")),
        ("afile", p.path("afile")),
        (deeper.to_str().unwrap(), deeper.clone()),
    ] {
        p.run(None, "swarm", &["shims", arg]).is(1,
            "",
            &format!(
                "Cannot install shims: {} is not a directory.\n  hint: create it first, then put it first on PATH\n",
                shown.display()
            ));
    }
    assert!(!p.path("nope").exists());
}

/// A `ready-next --batch` killed between creating its batch folder and
/// moving the first item in leaves an empty batch in process: `ready-next`
/// clears it (nothing is in it, so nothing is lost), and `done-current` must
/// not refuse it as ambiguous either. Found by the crash harness
/// (`crash::sigkill_anywhere_delivers_exactly_once`, which fails when its
/// random schedule hits this window).
#[test]
fn done_after_a_ready_killed_before_it_filled_its_batch() {
    let p = Project::builder()
        .role(Role::new("qa").mode("batch"))
        .queue_dirs()
        .build();
    let empty = p.handoffs("inbox/in_process/batch_20260615T140531Z_000001");
    fs::create_dir(&empty).unwrap();
    let r = p.cmd("done-current").role("qa").run();
    assert!(r.code != 2 && !r.stderr.contains("AMBIGUOUS"), "{r:?}");
    p.cmd("ready-next").role("qa").stdout("NO_TASK\n").run();
    support::assert_gone(&empty);
}
