//! The third adversarial round (docs/security.md): each break reproduced as
//! a malicious agent would do it, and refused.

use std::fs;
use std::path::Path;

use crate::support::{copies_of, file_name, files, tomorrow, Project, Role};

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

    // PERSON_ONLY, as every person-only action (`swarm inbox done` too).
    let refused = "PERSON_ONLY";
    p.cmd("swarm")
        .role("coder")
        .args(["answer", &id, "--choice", "1"])
        .code(2)
        .stderr_has(refused)
        .stderr_has("boss is a person")
        .run();
    // Claiming the person's role from the agent's own shell; dropping the
    // variable (the agent's shell still carries it).
    for how in ["SWARMFORGE_ROLE=boss", "env -u SWARMFORGE_ROLE"] {
        p.cmd("sh")
            .role("coder")
            .bins_on_path()
            .args([
                "-c",
                &format!("{how} swarm answer {id} --choice 1; exit $?"),
            ])
            .code(2)
            .stderr_has(refused)
            .run();
    }
    assert!(copy[0].exists(), "the person's copy stays open");
    assert!(files(&p.hq("master", "outbox")).is_empty());

    // The person, from their own pane (whose shell names only their role).
    p.cmd("swarm")
        .role("boss")
        .args(["answer", &id, "--choice", "2"])
        .code(0)
        .stdout_has("HANDOFF QUEUED: ")
        .run();
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

/// A gated project whose coder's note to qa is held: the project, the
/// queued path and the id.
fn held_note() -> (Project, std::path::PathBuf, String) {
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
    (p, queued, id)
}

/// The person reviews a held note; the agent swaps its body and recipient
/// afterwards: the approval of what was reviewed is refused and nothing is
/// recorded or delivered; the person reviews again and approves what they
/// now see. `swarm approve` without the reviewed sha256 shows the message and
/// approves nothing; an agent cannot approve at all.
#[test]
fn an_approval_covers_exactly_the_content_the_person_reviewed() {
    let (p, queued, id) = held_note();
    let held = p.hq("master", "pending_approval").join(file_name(&queued));
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
    let (p, queued, id) = held_note();
    let held = p.hq("master", "pending_approval");
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
        // Not listed, but not silent either: the folder is NOT OK.
        let problems = st["approval_problems"].to_string();
        assert!(problems.contains("symlink"), "{how}: {problems}");
        assert_eq!(
            p.cmd("swarm").args(["audit", "--check"]).run().code,
            2,
            "{how}"
        );
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

/// A hostile scripted agent in a confined swarm tries every write and read
/// a person's decisions and the other roles depend on: each is refused, and
/// its own work (a note to another role, its own queue) goes on.
#[test]
fn a_confined_agent_does_its_own_work_and_nothing_else() {
    confined_run(false);
}

/// The same in tmux: the pane runs the agent confined.
#[test]
fn a_confined_agent_in_tmux_does_its_own_work_and_nothing_else() {
    if !crate::support::require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    confined_run(true);
}

/// A bubblewrap for the confinement tests: the one the pinned Codex ships
/// (kept off PATH: Codex prefers a `bwrap` on PATH to its own and fails with
/// Debian 12's), else `bwrap` on PATH; None after a NOTE (a failure in CI).
fn bwrap() -> Option<String> {
    let clis = crate::support::agent_clis_dir();
    let shipped = clis.join(
        "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/codex-resources/bwrap",
    );
    if shipped.is_file() {
        return Some(shipped.to_string_lossy().into_owned());
    }
    crate::support::require_tool(
        "bwrap",
        "apt-get install -y bubblewrap, or install the real agent CLIs (.ci/run)",
    )
    .then(|| "bwrap".to_string())
}

fn confined_run(tmux: bool) {
    let Some(bwrap) = bwrap() else {
        return;
    };
    let g = Project::empty();
    let root = g.path("swarm");
    fs::create_dir_all(root.join("agents")).unwrap();
    fs::write(root.join("agents/hostile.sh"), HOSTILE).unwrap();
    fs::write(
        root.join("agents/drain.sh"),
        "out=$(ready-next)\nuntil printf '%s\\n' \"$out\" | grep -qx NO_TASK; do out=$(done-current); done\n",
    )
    .unwrap();
    fs::write(
        root.join("swarm.yaml"),
        "launch: {stagger: 0ms}\ncards: {fix: [hostile, victim]}\nroles:\n  - {name: hostile, worktree: hostile, agent: sh \"$SWARMFORGE_PROJECT/agents/hostile.sh\"}\n  - {name: victim, worktree: victim, agent: sh \"$SWARMFORGE_PROJECT/agents/drain.sh\"}\n  - {name: boss, worktree: boss, agent: human}\n  - {name: helper, worktree: helper, agent: api, base_url: 'http://127.0.0.1:9/v1', model: m, api_key_env: HELPER_KEY}\n",
    )
    .unwrap();
    g.cmd("swarm")
        .at(&root)
        .args(["init", "--quiet"])
        .run()
        .ok();
    g.cmd("swarm")
        .at(&root)
        .args(["pause", "--type", "post"])
        .run()
        .ok();
    let theirs = root.join(".swarmforge/agents/victim/home");
    fs::create_dir_all(&theirs).unwrap();
    fs::write(theirs.join(".claude.json"), "victim-copy-SECRET\n").unwrap();
    let token = root.join(".swarmforge/serve/token");
    fs::create_dir_all(token.parent().unwrap()).unwrap();
    fs::write(&token, "cockpit-secret\n").unwrap();

    // A repository as a clone leaves it: its branches in `packed-refs`.
    let packed = std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["pack-refs", "--all"])
        .status()
        .unwrap();
    assert!(packed.success());
    // The refs the person's git keeps, as before the agent ran.
    let git_state = || {
        let run = |args: &[&str]| {
            let o = std::process::Command::new("git")
                .arg("-C")
                .arg(&root)
                .args(args)
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let packed = fs::read_to_string(root.join(".git/packed-refs")).unwrap_or_default();
        format!(
            "{}\n{}\n{packed}",
            run(&["rev-parse", "master", "swarmforge-victim"]),
            run(&["for-each-ref", "--format=%(refname)", "refs/heads/"])
        )
    };
    let refs_before = git_state();
    let mut guard = crate::support::SwarmGuard::new(&root);
    let up = g
        .cmd("swarm")
        .at(&root)
        .env("HELPER_KEY", "helper-key-SECRET")
        .env("SWARM_BWRAP", &bwrap)
        .arg("up");
    let results_file = root.join(".worktrees/hostile/results.txt");
    if tmux {
        let r = up.arg("--detach").run();
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        guard.socket = Some(std::path::PathBuf::from(
            fs::read_to_string(root.join(".swarmforge/tmux-socket"))
                .unwrap()
                .trim(),
        ));
        crate::support::wait_until(
            crate::support::DEADLINE,
            "the agent in tmux is done",
            || fs::read_to_string(&results_file).is_ok_and(|r| r.contains("own: sent")),
        );
    } else {
        guard.guard(
            up.args(["--no-tmux", "--until-idle", "--timeout", "60s"])
                .start(),
        );
        let out = guard.finish(std::time::Duration::from_secs(70), "the swarm finishes");
        // Idle, with the hostile agent's real clarify still open for the
        // person: --until-idle says so with its own exit code.
        assert_eq!(
            out.code, 3,
            "stdout:\n{}\nstderr:\n{}",
            out.stdout, out.stderr
        );
        assert!(out.stderr.contains("wait for a person"), "{}", out.stderr);
    }
    let results = fs::read_to_string(&results_file).unwrap_or_else(|e| {
        let log =
            fs::read_to_string(root.join(".swarmforge/agents/hostile.log")).unwrap_or_default();
        panic!("no results: {e}\n{log}")
    });
    for attempt in [
        "approval",
        "unpause",
        "token",
        "victim_inbox",
        "victim_file",
        "boss_inbox",
        "daemon_stop",
        "key",
        "answer_as_boss",
        "other_home",
        "git_hooks",
        "git_config",
        "forum_forge",
        "forum_erase",
        "board_forge",
        "git_replace",
        "git_tag",
        "git_main",
        "git_branch_f",
        "git_push",
        "git_other",
        "git_delete",
        "git_delete_ref",
        "git_new_branch",
        "git_pack",
        "git_packed",
        "git_main_log",
        "git_store",
        "git_store_dir",
        "card_new",
    ] {
        assert!(
            results.contains(&format!("{attempt}: refused")),
            "{attempt} was not refused:\n{results}"
        );
    }
    let log = fs::read_to_string(root.join(".swarmforge/agents/hostile.log")).unwrap_or_default();
    assert!(results.contains("own: sent"), "{results}\n{log}");
    assert!(results.contains("own: committed"), "{results}\n{log}");
    // The byline hook `swarm init` installed ran inside the sandbox
    // (docs/swarmforge-compat.md §8).
    let hostile_log = |format: &str| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["log", &format!("--format={format}"), "swarmforge-hostile"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let bylines = hostile_log("%B");
    assert!(bylines.contains("work\n\nBy hostile."), "{bylines}\n{log}");
    assert!(results.contains("own: home and tmp"), "{results}\n{log}");
    // Its forum actions, carried out by handoffd in its name.
    assert!(results.contains("own: session"), "{results}\n{log}");
    assert!(results.contains("own: discussion"), "{results}\n{log}");
    let sessions = g
        .cmd("swarm")
        .at(&root)
        .args(["session", "list", "--json"])
        .run()
        .json();
    assert_eq!(
        sessions["sessions"][0]["started_by"], "hostile",
        "{sessions}"
    );
    assert_eq!(sessions["sessions"][0]["close_reason"], "from the sandbox");
    let d = g
        .cmd("swarm")
        .at(&root)
        .args(["discussion", "status", "d1", "--json"])
        .run()
        .json();
    assert_eq!(d["order"], serde_json::json!(["hostile", "victim"]), "{d}");
    assert!(
        !root
            .join(".swarmforge/forum/sessions/s-forged.session")
            .exists()
            && !root.join(".swarmforge/board/forged.txt").exists()
    );
    assert!(!root
        .join(".swarmforge/approvals/20260101T000000Z_000001_from_hostile")
        .exists());
    assert!(root.join(".swarmforge/paused").exists());
    // The person's question is still theirs to answer.
    let boss = root.join(".worktrees/boss");
    assert_eq!(crate::support::inbox_copies(&boss).len(), 1);
    assert!(files(&crate::support::hq(&boss, "outbox")).is_empty());
    assert!(!root.join(".worktrees/victim/planted.txt").exists());
    assert!(!root.join(".git/hooks/post-commit").exists());
    // No branch but its own moved, none was made or deleted, packed-refs
    // is as it was; its own commits (amended) are on its branch for the
    // person's git.
    assert!(results.contains("own: amended"), "{results}\n{log}");
    // A commit says nothing about a lock it could not take (issue 42,
    // point 8), and what it wrote beside the project's `.git` entries
    // stayed in the sandbox (a `commondir` the person's git would follow).
    let said = fs::read_to_string(root.join(".worktrees/hostile/commit-stderr.txt")).unwrap();
    assert_eq!(said, "", "a confined commit printed an error");
    assert!(!root.join(".git/commondir").exists() && !root.join(".git/planted").exists());
    assert_eq!(git_state(), refs_before);
    let own = fs::read_to_string(root.join(".worktrees/hostile/own-head.txt")).unwrap();
    let branch = hostile_log("%H %s");
    assert!(
        branch.starts_with(&format!("{} work2-amended\n", own.trim())),
        "{branch}"
    );
    assert!(branch.contains(" work\n"), "{branch}");
    // Its objects reached the store only checked (issue 43, way 12): the
    // reviewed blob is what it was, the object forged under another's name
    // is not in the store but kept and reported, and nothing waits.
    let work = crate::support::git(&root, &["cat-file", "-p", "swarmforge-hostile~1:work.txt"]);
    assert_eq!(work, "w");
    let forged = fs::read_to_string(root.join(".worktrees/hostile/forged-id.txt")).unwrap();
    let forged = forged.trim();
    assert!(!crate::support::git_ok(&root, &["cat-file", "-e", forged]));
    crate::support::git(&root, &["rev-list", "--objects", "swarmforge-hostile"]);
    let refused = files(&root.join(".swarmforge/objects/refused"));
    assert!(
        refused
            .iter()
            .any(|n| n.ends_with(&format!("_hostile_{forged}"))),
        "{refused:?}"
    );
    crate::support::doctor_reports_refused_object(&g, &root, forged);
    // `swarm card new` from inside says who can run it.
    let card = fs::read_to_string(root.join(".worktrees/hostile/card-error.txt")).unwrap();
    assert!(
        card.contains("a confined agent cannot start a card") && card.contains("ask a person"),
        "{card}"
    );
    assert!(!root.join(".swarmforge/board/c1.txt").exists());
    // The swarm's own books still balance, and its status reads.
    g.cmd("swarm")
        .at(&root)
        .args(["audit", "--check"])
        .run()
        .ok();
    g.cmd("swarm").at(&root).args(["status"]).run().ok();
    let t = g.cmd("swarm").at(&root).args(["transcript"]).run();
    assert!(
        t.stdout
            .contains("[hostile -> victim] note from the sandbox"),
        "{}",
        t.stdout
    );
}

/// What the hostile agent tries (each line of results.txt: `<what>: refused`
/// or `<what>: DONE`).
const HOSTILE: &str = r#"set -u
r="$PWD/results.txt"
: >"$r"
P="$SWARMFORGE_PROJECT"
try() { what=$1; shift; if ( "$@" ) >/dev/null 2>&1; then echo "$what: DONE" >>"$r"; else echo "$what: refused" >>"$r"; fi; }
try approval sh -c "echo sha256: x >'$P/.swarmforge/approvals/20260101T000000Z_000001_from_hostile'"
try unpause rm "$P/.swarmforge/paused"
try token cat "$P/.swarmforge/serve/token"
try victim_inbox sh -c "echo x >'$P/.worktrees/victim/.swarmforge/handoffs/inbox/new/50_x.handoff'"
try victim_file sh -c "echo x >'$P/.worktrees/victim/planted.txt'"
try boss_inbox sh -c "echo x >'$P/.worktrees/boss/.swarmforge/handoffs/inbox/new/50_x.handoff'"
try daemon_stop sh -c "echo x >'$P/.swarmforge/daemon/stop'"
try key sh -c 'test -n "${HELPER_KEY:-}"'
try other_home grep -q SECRET "$P/.swarmforge/agents/victim/home/.claude.json"
try git_hooks sh -c "echo 'echo pwned' >'$P/.git/hooks/post-commit'"
try git_config git config --file "$P/.git/config" core.hooksPath /tmp
swarm session start --title sandbox >/dev/null && echo "own: session" >>"$r"
s=$(ls "$P/.swarmforge/forum/sessions")
try forum_forge sh -c "printf 'id: s-forged\nstarted_at: x\n\n' >'$P/.swarmforge/forum/sessions/s-forged.session'"
try forum_erase rm "$P/.swarmforge/forum/sessions/$s"
try board_forge sh -c "echo x >'$P/.swarmforge/board/forged.txt'"
swarm session close --reason 'from the sandbox' >/dev/null && swarm discussion open d1 --order hostile,victim >/dev/null && echo "own: discussion" >>"$r"
printf 'type: clarify\nto: boss\npriority: 50\nquestion: Ship it?\n\nyes\nno\n' >q.txt && swarm-handoff q.txt >/dev/null
box="$P/.worktrees/boss/.swarmforge/handoffs/inbox/new"
i=0
until [ -n "$(ls "$box" 2>/dev/null)" ] || [ $i -ge 200 ]; do sleep 0.1; i=$((i+1)); done
id=$(ls "$box" | head -n 1 | sed 's/^[0-9]*_\(.*\)_to_.*/\1/')
try answer_as_boss env -u SWARMFORGE_ROLE swarm answer "$id" --choice 1
echo x >"$HOME/x" && echo x >/tmp/x && echo "own: home and tmp" >>"$r"
echo w >work.txt && git add work.txt && git -c user.name=h -c user.email=h@invalid commit -qm work 2>commit-stderr.txt && echo "own: committed" >>"$r"
echo /tmp >"$P/.git/commondir" 2>/dev/null; echo planted >"$P/.git/planted" 2>/dev/null
# The reviewed blob's object, once handoffd took it in: rewritten in the
# store, or under its name again; and an object under a name not its own.
o=$(git rev-parse --git-path objects)
w=$(git rev-parse HEAD:work.txt)
wd=$(echo "$w" | cut -c1-2); wf=$(echo "$w" | cut -c3-)
i=0
until [ ! -e "$o/$wd/$wf" ] || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done
try git_store sh -c "echo evil >'/run/swarm-handoff/objects/$wd/$wf'"
try git_store_dir sh -c "echo evil >'/run/swarm-handoff/objects/$wd/planted'"
git init -q /tmp/scratch && e=$(printf 'evil\n' | git -C /tmp/scratch hash-object -w --stdin)
evil="/tmp/scratch/.git/objects/$(echo "$e" | cut -c1-2)/$(echo "$e" | cut -c3-)"
mkdir -p "$o/$wd" && cp "$evil" "$o/$wd/$wf"
h=$(printf 'reviewed\n' | git hash-object --stdin) && echo "$h" >forged-id.txt
mkdir -p "$o/$(echo "$h" | cut -c1-2)" && cp "$evil" "$o/$(echo "$h" | cut -c1-2)/$(echo "$h" | cut -c3-)"
try git_replace git replace -f "$(git rev-parse HEAD~1)" HEAD
try git_tag git tag -f v1.0 HEAD
try git_main git update-ref refs/heads/master HEAD
try git_branch_f git branch -f master HEAD
try git_push git push -f . HEAD:master
try git_other git update-ref refs/heads/swarmforge-victim HEAD
try git_delete git branch -D swarmforge-victim
try git_delete_ref git update-ref -d refs/heads/swarmforge-victim
try git_new_branch git branch evil HEAD
try git_pack git pack-refs --all
try git_packed sh -c "git rev-parse HEAD >>'$P/.git/packed-refs'"
try git_main_log sh -c "echo x >>'$P/.git/logs/refs/heads/master'"
echo w2 >work2.txt && git add work2.txt && git -c user.name=h -c user.email=h@invalid commit -qm work2 && git -c user.name=h -c user.email=h@invalid commit -q --amend -m work2-amended && git rev-parse HEAD >own-head.txt && echo "own: amended" >>"$r"
try card_new sh -c "swarm card new fix c1 --text t 2>card-error.txt"
printf 'type: note\nto: victim\npriority: 50\nmessage: from the sandbox\n' >d.txt && swarm-handoff d.txt && echo "own: sent" >>"$r"
out=$(ready-next)
until printf '%s\n' "$out" | grep -qx NO_TASK; do out=$(done-current); done
"#;

/// On a machine without bubblewrap (a bwrap that cannot run), a swarm of
/// agents (confined by default) does not start: `swarm up` says why and
/// both ways out, exit 1, no agent run; `swarm doctor` reports
/// CONFINEMENT, and not once `launch: {confine: false}` opts out, with
/// which the same swarm starts; a swarm of people only needs no sandbox.
/// `swarm demo` runs its scripted agents unconfined there and says so.
#[test]
fn a_machine_that_cannot_confine_is_explained_and_the_opt_out_works() {
    let p = Project::builder()
        .role("coder")
        .config("wake: {method: none}\nlaunch: {stagger: 0ms}\nroles:\n  - {name: coder, agent: sh -c 'echo ran >ran.txt'}\n")
        .build();
    let missing = p.path("no-such-bwrap");
    let r = p
        .cmd("swarm")
        .args(["up", "--no-tmux", "--until-idle", "--timeout", "20s"])
        .env("SWARM_BWRAP", &missing)
        .code(1)
        .stderr_has("agents are confined by default")
        .stderr_has("apt-get install bubblewrap")
        .stderr_has("launch: {confine: false}")
        .run();
    assert!(
        r.stderr.contains(&missing.display().to_string()),
        "{}",
        r.stderr
    );
    assert!(!p.root.join("ran.txt").exists());
    let doctor_says = || {
        p.cmd("swarm")
            .args(["doctor", "--json"])
            .env("SWARM_BWRAP", &missing)
            .run()
            .json()
            .to_string()
    };
    let doctor = doctor_says();
    assert!(doctor.contains("CONFINEMENT"), "{doctor}");

    p.write(
        "swarm.yaml",
        "wake: {method: none}\nlaunch: {stagger: 0ms, confine: false}\nroles:\n  - {name: coder, agent: sh -c 'echo ran >ran.txt'}\n",
    );
    let doctor = doctor_says();
    assert!(!doctor.contains("CONFINEMENT"), "{doctor}");
    let r = p
        .cmd("swarm")
        .args(["up", "--no-tmux", "--until-idle", "--timeout", "20s"])
        .env("SWARM_BWRAP", &missing)
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(p.root.join("ran.txt").is_file());

    let g = Project::empty();
    let dir = g.path("demo");
    let mut guard = crate::support::SwarmGuard::new(&dir);
    guard.guard(
        g.cmd("swarm")
            .args(["demo", "--timeout", "90s", "--dir"])
            .arg(&dir)
            .env("SWARM_BWRAP", &missing)
            .start(),
    );
    let out = guard.finish(std::time::Duration::from_secs(120), "swarm demo returns");
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("run unconfined"), "{said}");
    assert!(said.contains("the demo finished after"), "{said}");
}

/// A confined agent's forum and board writes go through handoffd
/// (docs/security.md, "Forum and board writes go through handoffd"): a
/// `swarm session start` in a sandbox (SWARM_CONFINED names its role) is
/// answered by the running daemon in the folder's role's name, whatever
/// role it claims. A request the daemon took and was killed in (kill -9)
/// before or after carrying it out is carried out once by the next daemon:
/// the session is closed once, and each time answered as done.
#[test]
fn a_confined_agents_forum_request_is_carried_out_once_across_a_daemon_kill() {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("reviewer").at("rev"))
        .config("daemon: {rescan: 100ms}\nwake: {method: none}\n")
        .build();
    let d = p.spawn_daemon(&[]);
    let r = p
        .cmd("swarm")
        .role("reviewer")
        .env("SWARM_CONFINED", "coder")
        .args(["session", "start", "--title", "asked"])
        .run();
    r.ok();
    let id = r
        .stdout
        .strip_prefix("SESSION_STARTED: ")
        .unwrap()
        .trim()
        .to_string();
    let list = p
        .cmd("swarm")
        .args(["session", "list", "--json"])
        .run()
        .json();
    assert_eq!(list["sessions"][0]["started_by"], "coder", "{list}");
    let asked = p.path(".swarmforge/agents/coder/requests");
    assert!(files(&asked).is_empty(), "{:?}", files(&asked));
    drop(d); // kill -9

    // Taken, then killed before it was carried out: the next daemon does it.
    let taken = p.path(".swarmforge/daemon/requests/coder");
    fs::create_dir_all(&taken).unwrap();
    let req = "0000000000000000c105e";
    let plant = || {
        fs::write(
            taken.join(format!("{req}.request")),
            "op: session_close\nreason: wrap-up\n\n",
        )
        .unwrap()
    };
    let answer = asked.join(format!("{req}.answer"));
    for round in 0..2 {
        // Round 1: killed after carrying it out, before removing it.
        plant();
        p.cmd("swarm").args(["status"]).run().ok().stdout_has(
            "requests: coder has 0 forum/board request(s) handoffd has not taken and 1 taken but not answered",
        );
        let d = p.spawn_daemon(&[]);
        crate::support::wait_until(crate::support::DEADLINE, "the request answered", || {
            answer.exists() && !taken.join(format!("{req}.request")).exists()
        });
        drop(d);
        let a = fs::read_to_string(&answer).unwrap();
        assert!(
            a.contains("outcome: done") && a.contains(&format!("record: {id}")),
            "round {round}: {a}"
        );
        fs::remove_file(&answer).unwrap();
        let list = p
            .cmd("swarm")
            .args(["session", "list", "--json"])
            .run()
            .json();
        assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "{list}");
        assert_eq!(list["sessions"][0]["close_reason"], "wrap-up", "{list}");
    }
    let st = p.cmd("swarm").args(["status"]).run();
    assert!(!st.stdout.contains("requests: "), "{}", st.stdout);
}

/// What `git symbolic-ref HEAD` says in `wt` ("" when detached).
fn head_of(wt: &Path) -> String {
    let o = std::process::Command::new("git")
        .arg("-C")
        .arg(wt)
        .args(["symbolic-ref", "-q", "HEAD"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn git_in(wt: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .arg("-C")
        .arg(wt)
        .args(["-c", "user.name=p", "-c", "user.email=p@invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A worktree made the old way (an ordinary checkout of `swarmforge-<name>`,
/// as SwarmForge and an unconfined swarm make it) is pinned by the next
/// `swarm init` of a confined swarm, which says so; commits there move the
/// branch the person's git sees; a person's worktree stays ordinary; a
/// worktree put on another branch is reported by `swarm doctor` and refused
/// with its repair; turning confinement off puts it back.
#[test]
fn a_confined_swarm_pins_its_agents_worktrees_and_an_unconfined_one_releases_them() {
    let g = Project::empty();
    let root = g.path("swarm");
    fs::create_dir_all(&root).unwrap();
    let yaml = |confine: bool| {
        format!("launch: {{confine: {confine}}}\nroles:\n  - {{name: dev, worktree: dev, agent: sh -c true}}\n  - {{name: boss, worktree: boss, agent: human}}\n")
    };
    let init = || g.cmd("swarm").at(&root).arg("init").run();
    fs::write(root.join("swarm.yaml"), yaml(false)).unwrap();
    init().ok();
    let dev = root.join(".worktrees/dev");
    let boss = root.join(".worktrees/boss");
    assert_eq!(head_of(&dev), "refs/heads/swarmforge-dev");

    fs::write(root.join("swarm.yaml"), yaml(true)).unwrap();
    let r = init();
    r.ok()
        .stdout_has("its branch swarmforge-dev now lives in the worktree's own git folder");
    assert_eq!(head_of(&dev), "refs/worktree/swarmforge");
    assert_eq!(head_of(&boss), "refs/heads/swarmforge-boss");
    assert_eq!(
        git_in(&root, &["symbolic-ref", "refs/heads/swarmforge-dev"]),
        "worktrees/dev/refs/worktree/swarmforge"
    );
    git_in(
        &dev,
        &["commit", "-q", "--allow-empty", "-m", "pinned work"],
    );
    assert_eq!(
        git_in(&root, &["log", "-1", "--format=%s", "swarmforge-dev"]),
        "pinned work"
    );
    assert!(!init().ok().stdout.contains("own git folder"));
    let doctor = g.cmd("swarm").at(&root).args(["doctor", "--json"]).run();
    assert!(!doctor.stdout.contains("ROLE_BRANCH"), "{}", doctor.stdout);

    git_in(&dev, &["switch", "-q", "-c", "feature"]);
    let doctor = g.cmd("swarm").at(&root).args(["doctor", "--json"]).run();
    assert!(doctor.stdout.contains("ROLE_BRANCH"), "{}", doctor.stdout);
    let r = init();
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("on refs/heads/feature, not on its role branch swarmforge-dev")
            && r.stderr.contains("hint: put it back on its branch"),
        "{}",
        r.stderr
    );
    git_in(&dev, &["switch", "-q", "swarmforge-dev"]);
    init().ok();
    assert_eq!(head_of(&dev), "refs/worktree/swarmforge");

    fs::write(root.join("swarm.yaml"), yaml(false)).unwrap();
    init()
        .ok()
        .stdout_has("back on its ordinary branch swarmforge-dev");
    assert_eq!(head_of(&dev), "refs/heads/swarmforge-dev");
    assert_eq!(
        git_in(
            &root,
            &["log", "-1", "--format=%s", "refs/heads/swarmforge-dev"]
        ),
        "pinned work"
    );
    assert!(std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["symbolic-ref", "-q", "refs/heads/swarmforge-dev"])
        .output()
        .unwrap()
        .stdout
        .is_empty());
}
