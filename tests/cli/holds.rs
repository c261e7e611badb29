//! Approval holds and pause/resume through the CLI alone (issue 15): a held
//! handoff survives kill -9 of the daemon and is delivered exactly once after
//! `swarm approve`; `swarm deny` refuses it to failed/ with the reason; a
//! paused type stays in the outbox without the daemon spinning on it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{copies_of, file_name, files, wait_until, Layout, Project, Role, DEADLINE};

const NOTE: &str = "type: note\nto: qa\npriority: 50\nmessage: ship it\n";
const POST: &str = "type: post\nto: qa\npriority: 50\nsubject: hello\n\nbody\n";

fn project(config: &str) -> Project {
    Project::builder()
        .role("coder")
        .role(crate::support::Role::new("qa").worktree("qa"))
        .config(&format!("wake: {{method: none}}\n{config}"))
        .build()
}

fn id_of(queued: &Path) -> String {
    let name = file_name(queued);
    let rest = name.split_once('_').unwrap().1;
    rest.split("_to_").next().unwrap().to_string()
}

fn kinds(p: &Project) -> Vec<String> {
    p.events()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

/// SIGKILL (`Child::kill`), reaped so its pid is free for the restart.
fn kill_9(d: &mut crate::support::Daemon) {
    let mut c = d.child.take().unwrap();
    c.kill().unwrap();
    c.wait().unwrap();
}

/// `swarm approve <id> --sha256 <what status shows>`, as a person does
/// after reviewing it.
fn approve(p: &Project, id: &str, extra: &[&str]) -> crate::support::Run {
    let st = p.swarm(&["status", "--json"]).ok().json();
    let h = st["held"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == id)
        .unwrap_or_else(|| panic!("{id} is not held: {st}"));
    let sha = h["sha256"].as_str().unwrap().to_string();
    let mut args = vec!["approve", id, "--sha256", &sha];
    args.extend_from_slice(extra);
    p.swarm(&args)
}

fn held(p: &Project) -> PathBuf {
    p.hq("master", "pending_approval")
}

#[test]
fn held_handoff_survives_kill_9_and_is_delivered_once_when_approved() {
    let p = project("roles:\n  - {name: coder, approval: required}\n");
    let mut d = p.spawn_daemon(&[]);
    let queued = p.send_as("coder", NOTE).ok().queued();
    let id = id_of(&queued);
    // The journal line follows the move: wait for both.
    wait_until(DEADLINE, "the note is held and journaled", || {
        files(&held(&p)).len() == 1 && !queued.exists() && kinds(&p).contains(&"held".to_string())
    });
    assert!(copies_of(&p.wt_path("qa"), &file_name(&queued)).is_empty());
    let st = p.swarm(&["status", "--json"]).ok().json();
    assert_eq!(st["held"][0]["id"], id.as_str());
    p.swarm(&["status"])
        .ok()
        .stdout_has(&format!("swarm approve {id}"));
    p.swarm(&["audit"]).ok().stdout_has("held 1");
    p.swarm(&["transcript"]).ok().stdout_has("[held:");

    // kill -9 and restart: the file is still held, never delivered.
    kill_9(&mut d);
    let _d = p.spawn_daemon(&[]);
    assert_eq!(files(&held(&p)).len(), 1);

    let out = approve(&p, &id, &["--json"]).ok().json();
    assert_eq!(out["status"], "approved");
    wait_until(DEADLINE, "the approved note is delivered", || {
        copies_of(&p.wt_path("qa"), &file_name(&queued)).len() == 1
            && kinds(&p).contains(&"delivered".to_string())
    });
    assert!(files(&held(&p)).is_empty());
    assert!(p.path(&format!(".swarmforge/approvals/{id}")).is_file());
    let k = kinds(&p);
    assert_eq!(k.iter().filter(|k| *k == "held").count(), 1, "{k:?}");
    assert_eq!(k.iter().filter(|k| *k == "approved").count(), 1, "{k:?}");
    assert_eq!(k.iter().filter(|k| *k == "delivered").count(), 1, "{k:?}");
    assert_eq!(copies_of(&p.wt_path("qa"), &file_name(&queued)).len(), 1);
    p.cmd("ready-next").role("qa").stdout_has("ship it").run();
}

#[test]
fn approve_finishes_after_a_crash_between_record_and_move() {
    let p = project("types:\n  note:\n    approval: required\n");
    let queued = p.send_as("coder", NOTE).ok().queued();
    let id = id_of(&queued);
    p.deliver_once().ok();
    assert_eq!(files(&held(&p)).len(), 1);
    // A `swarm approve` killed after its record was published (as if: the
    // record is there, the file still held).
    approve(&p, &id, &[]).ok();
    let record = p.path(&format!(".swarmforge/approvals/{id}"));
    let outbox = p.hq("master", "outbox");
    let back = outbox.join(file_name(&queued));
    fs::rename(&back, held(&p).join(file_name(&queued))).unwrap();
    // The daemon does not touch held/ on its own, approved or not.
    p.deliver_once().ok();
    assert_eq!(files(&held(&p)).len(), 1);
    approve(&p, &id, &[]).ok().stdout_has("APPROVED: ");
    assert!(fs::read_to_string(&record).unwrap().contains("sha256: "));
    p.deliver_once().ok();
    assert_eq!(copies_of(&p.wt_path("qa"), &file_name(&queued)).len(), 1);
    // A post by the same sender was never held (per type only).
    let post = p.send_as("coder", POST).ok().queued();
    p.deliver_once().ok();
    assert_eq!(copies_of(&p.wt_path("qa"), &file_name(&post)).len(), 1);
    // Nothing left to approve.
    p.cmd("swarm")
        .args(["approve", &id])
        .code(1)
        .stderr_has("no held handoff")
        .run();
}

#[test]
fn an_approved_id_reused_for_other_content_is_held_again() {
    let p = project("roles:\n  - {name: coder, approval: required}\n");
    let queued = p.send_as("coder", NOTE).ok().queued();
    let id = id_of(&queued);
    p.deliver_once().ok();
    approve(&p, &id, &[]).ok();
    p.deliver_once().ok();
    assert_eq!(copies_of(&p.wt_path("qa"), &file_name(&queued)).len(), 1);
    // The agent plants a file with the approved id, other content, another recipient.
    let sent = p.hq("master", "sent").join(file_name(&queued));
    let forged = fs::read_to_string(&sent)
        .unwrap()
        .replace("to: qa", "to: coder")
        .replace("ship it", "something else");
    let name = file_name(&queued).replace("_to_qa", "_to_coder");
    fs::write(p.hq("master", "outbox").join(&name), forged).unwrap();
    p.deliver_once().ok();
    assert_eq!(files(&held(&p)), vec![name.clone()]);
    assert!(copies_of(&p.wt_path("master"), &name).is_empty());
}

#[test]
fn deny_refuses_to_failed_with_the_reason() {
    let p = project("roles:\n  - {name: coder, approval: required}\n");
    let queued = p.send_as("coder", NOTE).ok().queued();
    let id = id_of(&queued);
    p.deliver_once().ok();
    p.cmd("swarm")
        .args(["deny", &id, "--reason", ""])
        .code(1)
        .stderr_has("needs a reason")
        .run();
    p.swarm(&["deny", &id, "--reason", "not before the release"])
        .ok()
        .stdout_has("DENIED: ");
    let failed = p.hq("master", "failed");
    let note = fs::read_to_string(failed.join(format!("{}.error", file_name(&queued)))).unwrap();
    assert_eq!(note, "denied: not before the release\n");
    assert!(files(&held(&p)).is_empty());
    assert!(copies_of(&p.wt_path("qa"), &file_name(&queued)).is_empty());
    p.swarm(&["audit"])
        .ok()
        .stdout_has("denied: not before the release");
    p.cmd("swarm")
        .args(["deny", &id, "--reason", "again"])
        .code(1)
        .stderr_has("no held handoff")
        .run();
}

#[test]
fn bad_ids_and_types_are_refused_before_any_path_is_built() {
    let p = project("");
    for bad in [
        "../../etc/passwd",
        "x",
        "20260101T000000Z_000001_from_../qa",
    ] {
        p.cmd("swarm")
            .args(["approve", bad])
            .code(1)
            .stderr_has("is not a message id")
            .run();
        p.cmd("swarm")
            .args(["deny", bad, "--reason", "r"])
            .code(1)
            .stderr_has("is not a message id")
            .run();
    }
    p.cmd("swarm")
        .args(["pause", "--type", "bogus"])
        .code(1)
        .stderr_has("is not a message type")
        .run();
    assert!(!p.path(".swarmforge/paused").exists());
}

/// A pause decided after a killed daemon published a copy does not keep
/// its original back: the copy is out, so the delivery is finished (the
/// original to `sent/`, one `delivered` line), not left in the outbox
/// while the recipient works on it.
#[test]
fn a_delivery_a_killed_daemon_began_is_finished_under_a_pause() {
    let p = project("");
    let queued = p.send_as("coder", NOTE).ok().queued();
    let text = fs::read_to_string(&queued).unwrap();
    let (head, body) = text.split_once("\n\n").unwrap();
    let at = crate::support::header(&text, "created_at").unwrap();
    let new = p.hq("qa", "inbox/new");
    fs::create_dir_all(&new).unwrap();
    let copy = format!("{head}\nrecipient: qa\nenqueued_at: {at}\n\n{body}");
    fs::write(new.join(file_name(&queued)), copy).unwrap();
    p.swarm(&["pause"]).ok();
    let _d = p.spawn_daemon(&[]);
    wait_until(DEADLINE, "the begun delivery is journaled", || {
        kinds(&p).iter().any(|k| k == "delivered")
    });
    assert!(!queued.exists());
    let sent = queued.parent().unwrap().with_file_name("sent");
    assert!(sent.join(file_name(&queued)).exists());
    assert_eq!(copies_of(&p.wt_path("qa"), &file_name(&queued)).len(), 1);
    assert_eq!(kinds(&p).iter().filter(|k| *k == "delivered").count(), 1);
    p.swarm(&["audit", "--check"]).ok();
}

/// The same, where the "copy" is one the sender could write itself (its
/// recipient shares its worktree, so its inbox): a hostile agent planting
/// it does not get its note past the pause, or vouched as delivered.
#[test]
fn a_copy_the_sender_could_plant_itself_does_not_finish_a_delivery() {
    let p = Project::builder()
        .role("coder")
        .role("helper")
        .role(crate::support::Role::new("qa").worktree("qa"))
        .config("wake: {method: none}\n")
        .build();
    let queued = p
        .send_as(
            "coder",
            "type: note\nto: helper\npriority: 50\nmessage: sneak\n",
        )
        .ok()
        .queued();
    let text = fs::read_to_string(&queued).unwrap();
    let (head, body) = text.split_once("\n\n").unwrap();
    let at = crate::support::header(&text, "created_at").unwrap();
    let new = queued.parent().unwrap().with_file_name("inbox").join("new");
    fs::create_dir_all(&new).unwrap();
    let copy = format!("{head}\nrecipient: helper\nenqueued_at: {at}\n\n{body}");
    fs::write(new.join(file_name(&queued)), copy).unwrap();
    p.swarm(&["pause"]).ok();
    let _d = p.spawn_daemon(&[]);
    let line = format!("deferred {}", queued.display());
    wait_until(DEADLINE, "the paused note is deferred", || {
        p.log().lines().any(|l| l.contains(&line))
    });
    assert!(queued.exists());
    assert!(!kinds(&p).iter().any(|k| k == "delivered"));
}

#[test]
fn paused_type_waits_in_the_outbox_across_kill_9_and_resume_delivers_it() {
    let p = project("");
    let mut d = p.spawn_daemon(&[]);
    p.swarm(&["pause", "--type", "note"])
        .ok()
        .stdout_has("PAUSED: delivery of note");
    p.swarm(&["status"])
        .ok()
        .stdout_has("PAUSED: delivery of note since ");
    let st = p.swarm(&["status", "--json"]).ok().json();
    assert_eq!(st["paused"]["types"][0], "note");
    let queued = p.send_as("coder", NOTE).ok().queued();
    let post = p.send_as("coder", POST).ok().queued();
    // Everything else keeps working.
    wait_until(DEADLINE, "the post is delivered", || {
        copies_of(&p.wt_path("qa"), &file_name(&post)).len() == 1
    });
    let paused_line = format!("deferred {}", queued.display());
    wait_until(DEADLINE, "the daemon defers the paused note", || {
        p.log()
            .lines()
            .any(|l| l.contains(&paused_line) && l.contains("paused"))
    });
    assert!(queued.exists());
    kill_9(&mut d);
    let _d = p.spawn_daemon(&[]);
    wait_until(DEADLINE, "the restarted daemon defers it again", || {
        p.log().lines().filter(|l| l.contains(&paused_line)).count() == 2
    });
    assert!(queued.exists());
    assert!(copies_of(&p.wt_path("qa"), &file_name(&queued)).is_empty());
    p.swarm(&["resume"]).ok().stdout_has("RESUMED");
    wait_until(DEADLINE, "the note is delivered after resume", || {
        copies_of(&p.wt_path("qa"), &file_name(&queued)).len() == 1 && !queued.exists()
    });
    p.swarm(&["resume"]).ok().stdout_has("NOT PAUSED");
    // Logged once per daemon, not once per retry: no spin in the journal.
    let n = p.log().lines().filter(|l| l.contains(&paused_line)).count();
    assert_eq!(n, 2);
}

/// Resume takes effect at once: with the safety-net rescan an hour away,
/// only the pause file's own event can get the waiting note out.
#[test]
fn resume_delivers_what_waited_without_a_rescan() {
    let p = project("daemon: {rescan: 1h}\n");
    let _d = p.spawn_daemon(&[]);
    p.swarm(&["pause", "--type", "note"]).ok();
    let queued = p.send_as("coder", NOTE).ok().queued();
    let paused_line = format!("deferred {}", queued.display());
    wait_until(DEADLINE, "the daemon defers the paused note", || {
        p.log().lines().any(|l| l.contains(&paused_line))
    });
    p.swarm(&["resume"]).ok().stdout_has("RESUMED");
    wait_until(DEADLINE, "the note is delivered after resume", || {
        copies_of(&p.wt_path("qa"), &file_name(&queued)).len() == 1 && !queued.exists()
    });
}

#[test]
fn pause_everything_then_add_nothing() {
    let p = project("");
    let j = p.swarm(&["pause", "--json"]).ok().json();
    assert_eq!(j["types"], serde_json::json!([]));
    let queued = p.send_as("coder", POST).ok().queued();
    p.deliver_once().ok();
    assert!(queued.exists());
    p.swarm(&["pause", "--type", "note"])
        .ok()
        .stdout_has("PAUSED: all delivery");
    p.swarm(&["resume"]).ok();
    p.deliver_once().ok();
    assert!(!queued.exists());
}

#[test]
fn an_approval_run_without_user_names_the_account_not_unknown() {
    let p = project("types:\n  note:\n    approval: required\n");
    let queued = p.send_as("coder", NOTE).ok().queued();
    let id = id_of(&queued);
    p.deliver_once().ok();
    let st = p.swarm(&["status", "--json"]).ok().json();
    let sha = st["held"][0]["sha256"].as_str().unwrap().to_string();
    // A service or `env -i` has no $USER: the uid's account names the person.
    p.cmd("swarm")
        .under(&["env", "-u", "USER"])
        .args(["approve", &id, "--sha256", &sha])
        .stdout_has("APPROVED: ")
        .run();
    let account = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    let account = String::from_utf8(account.stdout)
        .unwrap()
        .trim()
        .to_string();
    let record = fs::read_to_string(p.path(&format!(".swarmforge/approvals/{id}"))).unwrap();
    assert!(record.contains(&format!("\nby: {account}\n")), "{record}");
    let approved = p
        .events()
        .into_iter()
        .find(|e| e["kind"] == "approved")
        .unwrap();
    assert!(
        approved["reason"]
            .as_str()
            .unwrap()
            .starts_with(&format!("by {account} ")),
        "{approved}"
    );
}

const LAYOUTS: [Layout; 2] = [Layout::Init, Layout::SwarmForge];

/// `coder` at the main checkout (SwarmForge's master role, whose worktree
/// is the project root), `qa` in its own worktree.
fn project_in(layout: Layout, config: &str) -> Project {
    Project::builder()
        .layout(layout)
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .config(&format!("wake: {{method: none}}\n{config}"))
        .build()
}

/// `swarm audit --check`: its exit code and stdout.
fn audit_check(p: &Project) -> (i32, String) {
    let r = p.cmd("swarm").args(["audit", "--check"]).run();
    (r.code, r.stdout.clone())
}

/// Upstream's dashboard keeps approvals in the project root's
/// `.swarmforge/handoffs/pending_approval/` (sgo/forgelet-swarmforge
/// `swarmforge/scripts/pack_web.bb`: `(defn pending-dir [root] (fs/path
/// root ".swarmforge" "handoffs" "pending_approval"))`; `pending-files`
/// lists the regular files ending `.handoff`; `approval-id` is the name
/// without `.handoff`; `reviews-file` is `<id>.reviews.json` beside it,
/// written by `save-review!` as `{"<path>": "<comments>"}` and dropped by
/// `approve!`). A hold here is that file, in both layouts: the one place
/// `swarm status`, `swarm approve` and the audit read.
#[test]
fn a_held_handoff_is_a_file_in_swarmforges_pending_approval_folder() {
    for layout in LAYOUTS {
        let p = project_in(layout, "roles:\n  - {name: coder, approval: required}\n");
        let queued = p.send_as("coder", NOTE).ok().queued();
        let id = id_of(&queued);
        p.deliver_once().ok();
        let pending = p.path(".swarmforge/handoffs/pending_approval");
        let hold = pending.join(file_name(&queued));
        assert!(hold.is_file(), "{layout:?}: {:?}", files(&pending));
        assert!(!p.path(".swarmforge/handoffs/held").exists());
        let st = p.swarm(&["status", "--json"]).ok().json();
        assert_eq!(st["held"][0]["id"], id.as_str());
        assert_eq!(st["approval_problems"], serde_json::json!([]));
        assert_eq!(audit_check(&p).0, 0, "{layout:?}");

        // A person's review comments, as upstream writes them, beside it.
        let stem = file_name(&queued).trim_end_matches(".handoff").to_string();
        let reviews = pending.join(format!("{stem}.reviews.json"));
        fs::write(&reviews, r#"{"docs/spec.md":"Name the parser."}"#).unwrap();
        let st = p.swarm(&["status", "--json"]).ok().json();
        assert_eq!(
            st["held"][0]["reviews"],
            serde_json::json!({"docs/spec.md": "Name the parser."})
        );
        assert_eq!(audit_check(&p).0, 0, "comments beside a hold are fine");

        // Approved: the file leaves, its comments with it; delivered once.
        approve(&p, &id, &[]).ok();
        assert!(!hold.exists() && !reviews.exists(), "{:?}", files(&pending));
        p.deliver_once().ok();
        assert_eq!(copies_of(&p.wt_path("qa"), &file_name(&queued)).len(), 1);

        // What is no hold there is NOT OK: comments of no held handoff, a
        // stray file, a held file that is no message.
        fs::write(&reviews, r#"{"docs/spec.md":"Name the parser."}"#).unwrap();
        fs::write(pending.join("notes.txt"), "x").unwrap();
        let bad = pending.join("50_20260101T000000Z_000009_from_coder_to_qa.handoff");
        fs::write(&bad, "no headers here\n").unwrap();
        let st = p.swarm(&["status", "--json"]).ok().json();
        assert_eq!(
            st["approval_problems"].as_array().unwrap().len(),
            3,
            "{:#}",
            st["approval_problems"]
        );
        p.swarm(&["status"])
            .ok()
            .stdout_has("approvals: NOT OK: ")
            .stdout_has("review comments of no held handoff")
            .stdout_has("notes.txt: neither a held handoff")
            .stdout_has("is not a message");
        let (code, out) = audit_check(&p);
        assert_eq!(code, 2, "{out}");
        assert_eq!(
            out.matches("VIOLATION approval_folder ").count(),
            2,
            "{out}"
        );
        assert!(out.contains("VIOLATION malformed "), "{out}");
        for f in [&reviews, &pending.join("notes.txt"), &bad] {
            fs::remove_file(f).unwrap();
        }
        assert_eq!(audit_check(&p).0, 0);
    }
}

/// A project held before the folder was SwarmForge's keeps its holds: a
/// file in the old `held/` folder is reported (NOT OK, with the repair)
/// until handoffd starts, which moves it to `pending_approval/` without
/// clobbering one of the same name; then it is approved as any other.
#[test]
fn holds_in_the_old_held_folder_move_to_pending_approval_when_handoffd_starts() {
    for layout in LAYOUTS {
        let p = project_in(layout, "roles:\n  - {name: coder, approval: required}\n");
        let queued = p.send_as("coder", NOTE).ok().queued();
        let id = id_of(&queued);
        p.deliver_once().ok();
        let pending = p.hq("master", "pending_approval");
        let old = p.hq("master", "held");
        // As the previous version left it.
        fs::create_dir_all(&old).unwrap();
        fs::rename(
            pending.join(file_name(&queued)),
            old.join(file_name(&queued)),
        )
        .unwrap();
        let st = p.swarm(&["status", "--json"]).ok().json();
        assert_eq!(st["held"], serde_json::json!([]));
        p.swarm(&["status"])
            .ok()
            .stdout_has("approvals: NOT OK: ")
            .stdout_has("left in the old held/ folder: handoffd moves it");
        let (code, out) = audit_check(&p);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains("VIOLATION approval_folder "), "{out}");

        // handoffd's start moves it; a second start finds nothing to move.
        p.deliver_once().ok();
        assert!(pending.join(file_name(&queued)).is_file());
        assert!(!old.exists());
        p.deliver_once().ok();
        assert_eq!(files(&pending).len(), 1);
        assert_eq!(audit_check(&p).0, 0);
        approve(&p, &id, &[]).ok();
        p.deliver_once().ok();
        assert_eq!(copies_of(&p.wt_path("qa"), &file_name(&queued)).len(), 1);
        assert!(files(&pending).is_empty());
    }
}
