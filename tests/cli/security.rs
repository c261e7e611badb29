//! The third adversarial round (docs/security.md): each break reproduced as
//! a malicious agent would do it, and refused.

use std::fs;
use std::path::Path;

use crate::support::{copies_of, file_name, files, Project, Role};

/// `coder` (an agent, main worktree), `boss` (a person, worktree `boss`).
fn with_boss() -> Project {
    Project::builder()
        .role("coder")
        .role(Role::new("boss").worktree("boss").agent("human"))
        .config("wake: {method: none}\n")
        .build()
}

fn id_of(queued: &Path) -> String {
    let name = file_name(queued);
    let rest = name.split_once('_').unwrap().1;
    rest.split("_to_").next().unwrap().to_string()
}

const ASK_BOSS: &str =
    "type: clarify\nto: boss\npriority: 50\nquestion: Ship it?\n\nyes\nnot yet\n";

/// An agent sends a blocking clarify to the person and answers it itself
/// with `swarm answer`: refused, whether it runs as itself, claims the
/// person's role, or drops SWARMFORGE_ROLE (its shell's environment still
/// names it); the person's copy stays open; the person then answers.
#[test]
fn an_agent_cannot_answer_a_clarify_as_the_person() {
    let p = with_boss();
    let queued = p.send_as("coder", ASK_BOSS).ok().queued();
    let id = id_of(&queued);
    p.deliver_once().ok();
    let copy = copies_of(&p.wt_path("boss"), &file_name(&queued));
    assert_eq!(copy.len(), 1);

    let refused = "NOT_YOUR_CLARIFY";
    p.cmd("swarm")
        .role("coder")
        .args(["answer", &id, "--choice", "1"])
        .code(2)
        .stderr_has(refused)
        .stderr_has("boss is a person")
        .run();
    // Claiming the person's role from the agent's own shell.
    p.cmd("sh")
        .role("coder")
        .bins_on_path()
        .args([
            "-c",
            &format!("SWARMFORGE_ROLE=boss swarm answer {id} --choice 1; exit $?"),
        ])
        .code(2)
        .stderr_has(refused)
        .run();
    // Dropping the variable: the agent's shell still carries it.
    p.cmd("sh")
        .role("coder")
        .bins_on_path()
        .args([
            "-c",
            &format!("env -u SWARMFORGE_ROLE swarm answer {id} --choice 1; exit $?"),
        ])
        .code(2)
        .stderr_has(refused)
        .run();
    assert!(copy[0].exists(), "the person's copy stays open");
    assert!(files(&p.hq("master", "outbox")).is_empty());

    // The person, from a shell of their own.
    p.swarm(&["answer", &id, "--choice", "2"])
        .ok()
        .stdout_has("HANDOFF QUEUED: ");
    assert!(!copy[0].exists());
}

/// `coder` gated by `approval: required`, `qa` in worktree `qa`.
fn gated() -> Project {
    Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .config("wake: {method: none}\nroles:\n  - {name: coder, approval: required}\n")
        .build()
}

/// The person reviews a held note; the agent swaps its body and recipient
/// afterwards: the approval of what was reviewed is refused and nothing is
/// recorded or delivered; the person reviews again and approves what they
/// now see. `swarm approve` without the reviewed sha256 shows the message and
/// approves nothing; an agent cannot approve at all.
#[test]
fn an_approval_covers_exactly_the_content_the_person_reviewed() {
    let p = gated();
    let queued = p
        .send_as(
            "coder",
            "type: note\nto: qa\npriority: 50\nmessage: ship it\n",
        )
        .ok()
        .queued();
    let id = id_of(&queued);
    p.deliver_once().ok();
    let held = p.hq("master", "held").join(file_name(&queued));
    assert!(held.is_file());

    // Reviewing: the whole message and its fingerprint, nothing approved.
    let st = p.swarm(&["status", "--json"]).ok().json();
    let seen = st["held"][0]["sha256"].as_str().unwrap().to_string();
    assert!(st["held"][0]["text"]
        .as_str()
        .unwrap()
        .contains("message: ship it"));
    let r = p
        .cmd("swarm")
        .args(["approve", &id])
        .code(1)
        .stdout_has("message: ship it")
        .stdout_has(&format!("sha256: {seen}"))
        .stderr_has(&format!("swarm approve {id} --sha256 {seen}"))
        .run();
    assert!(r.stderr.contains("nothing approved"), "{r:?}");
    let record = p.path(&format!(".swarmforge/approvals/{id}"));
    assert!(!record.exists() && held.is_file());

    // The agent rewrites its held file after the review.
    let swapped = fs::read_to_string(&held)
        .unwrap()
        .replace("to: qa", "to: coder")
        .replace("ship it", "rm -rf everything");
    fs::write(&held, swapped).unwrap();
    p.cmd("swarm")
        .args(["approve", &id, "--sha256", &seen])
        .code(2)
        .stderr_has("CHANGED_SINCE_REVIEW")
        .stderr_has("nothing approved")
        .run();
    assert!(!record.exists() && held.is_file());
    p.deliver_once().ok();
    assert!(copies_of(&p.wt_path("qa"), &file_name(&queued)).is_empty());

    // An agent approving: refused, whatever it names.
    p.cmd("swarm")
        .role("coder")
        .args(["approve", &id, "--sha256", &seen])
        .code(2)
        .stderr_has("PERSON_ONLY")
        .run();
    for args in [
        vec!["pause"],
        vec!["resume"],
        vec!["deny", &id, "--reason", "x"],
    ] {
        p.cmd("swarm")
            .role("coder")
            .args(&args)
            .code(2)
            .stderr_has("PERSON_ONLY")
            .run();
    }
    assert!(!record.exists() && held.is_file());

    // The person reviews again and approves what they see now.
    let r = p
        .cmd("swarm")
        .args(["approve", &id, "--json"])
        .code(1)
        .run();
    let now = r.json();
    assert_eq!(now["status"], "review");
    assert!(now["message"]
        .as_str()
        .unwrap()
        .contains("rm -rf everything"));
    let fp = now["sha256"].as_str().unwrap();
    assert_ne!(fp, seen);
    p.swarm(&["approve", &id, "--sha256", fp])
        .ok()
        .stdout_has("APPROVED: ");
    assert!(fs::read_to_string(&record)
        .unwrap()
        .contains(&format!("sha256: {fp}")));
}

fn tomorrow() -> String {
    (chrono::Utc::now() + chrono::Duration::days(1))
        .format("%Y-%m-%d")
        .to_string()
}

/// Every `.handoff` file under a worktree's `archive/` named `name`.
fn archived(wt: &Path, name: &str) -> usize {
    crate::support::walk(&crate::support::hq(wt, "archive"))
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == name))
        .count()
}

/// The daemon dies after a copy and before the original's move to `sent/`;
/// the item is completed and archived; the restarted daemon must see the
/// archived copy and not deliver a second one. A running daemon must not
/// deliver an original re-planted after the archive either.
#[test]
fn an_archived_copy_still_counts_as_delivered() {
    for mode in ["task", "batch"] {
        let p = Project::builder()
            .role("coder")
            .role(Role::new("qa").worktree("qa").mode(mode))
            .config("wake: {method: none}\ndaemon: {rescan: 100ms}\n")
            .build();
        let queued = p
            .send_as("coder", "type: note\nto: qa\npriority: 50\nmessage: once\n")
            .ok()
            .queued();
        let name = file_name(&queued);
        p.deliver_once().ok();
        // As if killed before the move: the original is back in the outbox.
        let sent = p.hq("master", "sent").join(&name);
        fs::rename(&sent, &queued).unwrap();
        p.cmd("ready-next").role("qa").run().ok();
        p.cmd("done-current").role("qa").run().ok();
        p.swarm(&["archive", "--before", &tomorrow()]).ok();
        assert_eq!(archived(&p.wt_path("qa"), &name), 1, "{mode}");
        p.deliver_once().ok();
        assert!(!queued.exists(), "{mode}: the original left the outbox");
        assert!(
            copies_of(&p.wt_path("qa"), &name).is_empty(),
            "{mode}: a second copy was delivered"
        );

        // Re-planted from the archive while a daemon runs.
        let d = p.spawn_daemon(&[]);
        let original = crate::support::walk(&p.hq("master", "archive"))
            .into_iter()
            .find(|f| f.file_name().is_some_and(|n| n == name.as_str()))
            .unwrap_or_else(|| p.hq("master", "sent").join(&name));
        let tmp = p.hq("master", "outbox/tmp");
        fs::create_dir_all(&tmp).unwrap();
        fs::copy(&original, tmp.join("x")).unwrap();
        fs::rename(tmp.join("x"), &queued).unwrap();
        crate::support::wait_until(crate::support::DEADLINE, "the re-plant is handled", || {
            !queued.exists()
        });
        drop(d);
        assert!(
            copies_of(&p.wt_path("qa"), &name).is_empty(),
            "{mode}: the re-planted original was delivered again"
        );
    }
}

/// Two completed batches of one name (the second made after the first was
/// archived): the archive keeps a batch name for the second, and
/// `audit --check` still finds every delivered, completed copy.
#[test]
fn an_archived_batch_whose_name_is_taken_stays_in_the_trail() {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa").mode("batch"))
        .config("wake: {method: none}\n")
        .build();
    let completed = p.hq("qa", "inbox/completed");
    let mut first = None;
    for m in ["one", "two"] {
        p.send_as(
            "coder",
            &format!("type: note\nto: qa\npriority: 50\nmessage: {m}\n"),
        )
        .ok();
        p.deliver_once().ok();
        p.cmd("ready-next").role("qa").run().ok();
        p.cmd("done-current").role("qa").run().ok();
        let batch = crate::support::entries(&completed)
            .into_iter()
            .find(|n| n.starts_with("batch_"))
            .unwrap();
        // The second batch gets the first one's name (a clock set back).
        let name = first.get_or_insert(batch.clone()).clone();
        if batch != name {
            fs::rename(completed.join(&batch), completed.join(&name)).unwrap();
        }
        p.swarm(&["archive", "--before", &tomorrow()]).ok();
    }
    let day = crate::support::entries(&p.hq("qa", "archive"))[0].clone();
    let dirs = crate::support::entries(&p.hq("qa", &format!("archive/{day}/completed")));
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    assert!(dirs.iter().all(|d| d.starts_with("batch_")), "{dirs:?}");
    p.swarm(&["audit", "--check"]).ok();
}

/// A held folder that is a symlink (or a held entry that is one) points
/// outside the project: neither `swarm status` lists it nor `swarm approve`
/// moves it into the outbox.
#[test]
fn a_symlinked_held_folder_or_file_is_not_followed() {
    let p = gated();
    let queued = p
        .send_as(
            "coder",
            "type: note\nto: qa\npriority: 50\nmessage: ship it\n",
        )
        .ok()
        .queued();
    let id = id_of(&queued);
    p.deliver_once().ok();
    let held = p.hq("master", "held");
    let outside = tempfile::tempdir().unwrap();
    let name = file_name(&queued);
    fs::rename(held.join(&name), outside.path().join(&name)).unwrap();
    let fp = {
        // What a listing would show for the planted file.
        fs::write(
            held.join(&name),
            fs::read(outside.path().join(&name)).unwrap(),
        )
        .unwrap();
        let st = p.swarm(&["status", "--json"]).ok().json();
        fs::remove_file(held.join(&name)).unwrap();
        st["held"][0]["sha256"].as_str().unwrap().to_string()
    };
    for how in ["folder", "file"] {
        fs::remove_dir_all(&held).unwrap();
        if how == "folder" {
            std::os::unix::fs::symlink(outside.path(), &held).unwrap();
        } else {
            fs::create_dir(&held).unwrap();
            std::os::unix::fs::symlink(outside.path().join(&name), held.join(&name)).unwrap();
        }
        let st = p.swarm(&["status", "--json"]).ok().json();
        assert_eq!(st["held"], serde_json::json!([]), "{how}");
        p.cmd("swarm")
            .args(["approve", &id, "--sha256", &fp])
            .code(1)
            .stderr_has("no held handoff")
            .run();
        assert!(outside.path().join(&name).is_file(), "{how}");
        assert!(files(&p.hq("master", "outbox")).is_empty(), "{how}");
        if how == "folder" {
            fs::remove_file(&held).unwrap();
            fs::create_dir(&held).unwrap();
        }
    }
}

/// Bidi overrides and line separators in a body reach `ready-next`'s
/// PAYLOAD escaped (`\u{202e}`), never raw.
#[test]
fn bidi_controls_in_a_payload_are_escaped() {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .config("wake: {method: none}\n")
        .build();
    p.send_as(
        "coder",
        "type: post\nto: qa\npriority: 50\nsubject: look\n\nsafe \u{202e}txt.exe\u{2028}next\u{2029}and \u{2066}x\u{2069}\n",
    )
    .ok();
    p.deliver_once().ok();
    let r = p.cmd("ready-next").role("qa").run();
    r.ok()
        .stdout_has("safe \\u{202e}txt.exe\\u{2028}next\\u{2029}and \\u{2066}x\\u{2069}");
    for c in ['\u{202e}', '\u{2028}', '\u{2029}', '\u{2066}', '\u{2069}'] {
        assert!(!r.stdout.contains(c), "{c:?} raw in {:?}", r.stdout);
    }
}
