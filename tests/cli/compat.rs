//! Today's SwarmForge, as its own files document it (docs/swarmforge-compat.md):
//! each case from upstream's documented example, in both layouts.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{file_header, git, handoff_names, Layout, Project, Role, Run};

const LAYOUTS: [Layout; 2] = [Layout::Init, Layout::SwarmForge];

/// `coder` in the main worktree (task mode), `qa` in `.worktrees/qa` (batch
/// mode); no wake-ups.
fn project(layout: Layout) -> Project {
    Project::builder()
        .layout(layout)
        .role("coder")
        .role(Role::new("qa").worktree("qa").mode("batch"))
        .config("wake: {method: none}\n")
        .queue_dirs()
        .build()
}

/// The SwarmForge-named wrappers (`swarm shims`), first on PATH.
struct Shims {
    dir: tempfile::TempDir,
}

impl Shims {
    fn install(p: &Project) -> Shims {
        let dir = tempfile::tempdir().unwrap();
        p.swarm(&["shims", dir.path().to_str().unwrap()]).ok();
        Shims { dir }
    }

    /// Runs `script` with `sh -c` as `role`, from its worktree.
    fn run(&self, p: &Project, role: &str, script: &str) -> Run {
        let path = format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        p.cmd("sh")
            .role(role)
            .env("PATH", path)
            .args(["-c", script])
            .run()
    }
}

fn note(to: &str, priority: &str, message: &str) -> String {
    format!("type: note\nto: {to}\npriority: {priority}\nmessage: {message}\n")
}

/// The one `*.handoff` name in `dir` (a queue folder).
fn only(dir: &Path) -> String {
    let names = handoff_names(dir);
    assert_eq!(names.len(), 1, "{}: {names:?}", dir.display());
    names[0].clone()
}

/// Upstream's test/swarmforge/script_test.clj,
/// `done-with-current-task-completes-without-accepting-next`: "Given a
/// current task and more mail in the inbox / When done_with_current runs /
/// Then it completes the current task, leaves the next item queued, and
/// prints MAIL_WAITING"; and its handoff-protocol.md example:
///
/// ```text
/// COMPLETED: .swarmforge/handoffs/inbox/completed/00_20260615T140531Z_000042_from_architect_to_coder.handoff
/// MAIL_WAITING
/// ```
///
/// With nothing queued the same line is `NO_TASK`.
#[test]
fn done_with_current_sh_prints_mail_waiting_and_leaves_the_next_item_queued() {
    for layout in LAYOUTS {
        let p = project(layout);
        let sh = Shims::install(&p);
        p.send_as("qa", &note("coder", "50", "first")).ok();
        p.send_as("qa", &note("coder", "50", "second")).ok();
        p.deliver_once().ok();
        let new = p.hq("master", "inbox/new");
        let done = p.hq("master", "inbox/completed");

        sh.run(&p, "coder", "ready_for_next.sh")
            .ok()
            .stdout_has("\n\nfirst\n");
        let first = only(&p.hq("master", "inbox/in_process"));
        let second = only(&new);
        sh.run(&p, "coder", "done_with_current.sh").is(
            0,
            &format!("COMPLETED: {}\nMAIL_WAITING\n", done.join(&first).display()),
            "",
        );
        // Left queued, not accepted: still in new/, never stamped.
        assert_eq!(only(&new), second, "{layout:?}");
        assert_eq!(file_header(&new.join(&second), "dequeued_at"), None);

        sh.run(&p, "coder", "ready_for_next.sh")
            .ok()
            .stdout_has("\n\nsecond\n");
        sh.run(&p, "coder", "done_with_current_task.sh").is(
            0,
            &format!("COMPLETED: {}\nNO_TASK\n", done.join(&second).display()),
            "",
        );
    }
}

/// Upstream's `done-with-current-batch-completes-without-accepting-next`:
/// "Given a current batch and more mail in the inbox / When done_with_current
/// runs / Then it completes the batch, leaves the next item queued, and
/// prints MAIL_WAITING" (after `COMPLETED_BATCH:`).
#[test]
fn done_with_current_sh_after_a_batch_prints_mail_waiting() {
    for layout in LAYOUTS {
        let p = project(layout);
        let sh = Shims::install(&p);
        p.send_as("coder", &note("qa", "10", "a")).ok();
        p.send_as("coder", &note("qa", "10", "b")).ok();
        p.send_as("coder", &note("qa", "20", "c")).ok();
        p.deliver_once().ok();

        sh.run(&p, "qa", "ready_for_next.sh")
            .ok()
            .stdout_has("COUNT: 2\n");
        let r = sh.run(&p, "qa", "done_with_current.sh");
        r.ok().stdout_has("COMPLETED_BATCH: ");
        assert!(
            r.stdout.ends_with("\nMAIL_WAITING\n"),
            "{layout:?}: {}",
            r.stdout
        );
        let left = only(&p.hq("qa", "inbox/new"));
        assert!(left.starts_with("20_"), "{left}");

        sh.run(&p, "qa", "ready_for_next.sh")
            .ok()
            .stdout_has("COUNT: 1\n");
        let r = sh.run(&p, "qa", "done_with_current_batch.sh");
        assert!(
            r.stdout.ends_with("\nNO_TASK\n"),
            "{layout:?}: {}",
            r.stdout
        );
    }
}

/// `swarm_handoff.sh ./tmp/handoff.txt` with upstream's documented draft,
/// which names no commit (swarmforge/handoff-protocol.md, "The helper
/// replaces any draft `commit` value with the sender worktree's current
/// HEAD"; the lieutenant README: "The agent does not type a SHA;
/// `swarm_handoff.sh` fills `commit` from the sender worktree HEAD (exactly 10
/// hexadecimal characters, resolved to a single commit)"):
///
/// ```text
/// type: git_handoff
/// to: cleaner
/// priority: 50
/// task: task-1-cave-setup
/// ```
///
/// A draft that does name a commit keeps it (SwarmForge's earlier prompts
/// tell agents to type it).
#[test]
fn git_handoff_without_commit_takes_head_and_drafts_live_in_tmp() {
    for layout in LAYOUTS {
        let p = project(layout);
        let wt = p.role_dir("qa");
        let commit_in_qa = |what: &str| {
            fs::write(wt.join(format!("{what}.txt")), what).unwrap();
            git(&wt, &["add", &format!("{what}.txt")]);
            git(&wt, &["commit", "-q", "-m", what]);
            git(&wt, &["rev-parse", "--short=10", "HEAD"])
        };
        let send = |draft: &str| -> PathBuf {
            fs::create_dir_all(wt.join("tmp")).unwrap();
            fs::write(wt.join("tmp/handoff.txt"), draft).unwrap();
            let queued = p
                .cmd("swarm-handoff")
                .role("qa")
                .arg("./tmp/handoff.txt")
                .run()
                .queued();
            assert!(
                !wt.join("tmp/handoff.txt").exists(),
                "{layout:?}: draft deleted"
            );
            queued
        };
        let draft = "type: git_handoff\nto: coder\npriority: 50\ntask: task-1-cave-setup\n";

        let older = commit_in_qa("cave");
        let queued = send(draft);
        assert_eq!(
            file_header(&queued, "commit").as_deref(),
            Some(older.as_str())
        );
        let text = fs::read_to_string(&queued).unwrap();
        assert!(
            text.ends_with(&format!("\n\nmerge_and_process qa {older}\n")),
            "{layout:?}: {text}"
        );

        let head = commit_in_qa("wumpus");
        assert_ne!(head, older);
        let queued = send(&format!("{draft}commit: {older}\n"));
        assert_eq!(
            file_header(&queued, "commit").as_deref(),
            Some(older.as_str())
        );
        let queued = send(draft);
        assert_eq!(
            file_header(&queued, "commit").as_deref(),
            Some(head.as_str())
        );
    }
}

/// Today's SwarmForge `swarmforge.conf` (its `lieutenant` README, quoted in
/// docs/swarmforge-compat.md §4: "card <type> <role> [<role>...]",
/// "window-invisible <role> <agent> <worktree> [task|batch]
/// [forward-only|back-one|back-all] [extra-cli-args...]", "Lieutenant
/// <agent> [extra-cli-args...]") starts here: nothing SwarmForge accepts is
/// refused, and `swarm up` and `swarm doctor` say what is read but not acted
/// on (now only the Lieutenant). Before: `Unknown config directive on line
/// 1: Lieutenant`.
#[test]
fn todays_swarmforge_conf_lines_start_and_doctor_says_what_is_not_acted_on() {
    let p = Project::empty();
    git(&p.root, &["init", "-q", "-b", "master"]);
    p.write("README", "x\n");
    git(&p.root, &["add", "."]);
    git(&p.root, &["commit", "-q", "-m", "init"]);
    p.write("swarmforge/constitution.prompt", "Be kind.\n");
    p.write("agent.sh", "#!/bin/sh\nexit 0\n");
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(p.root.join("agent.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    }
    let agent = p.root.join("agent.sh").display().to_string();
    p.write(
        "swarmforge/swarmforge.conf",
        &format!(
            "Lieutenant claude --model opus\n\
             window boss human master\n\
             window-invisible coder {agent} coder task back-one --verbose\n\
             window qa {agent} qa batch forward-only\n\
             card feature coder qa\n"
        ),
    );
    p.swarm(&["init"]).ok();
    // The propagation token is not taken for an argument of the agent.
    let roles = p.read(".swarmforge/roles.tsv");
    assert!(roles.contains("coder\t"), "{roles}");
    let r = p.swarm(&["doctor", "--json"]);
    let notes = crate::support::doctor_messages(&r.json(), "SWARMFORGE_NOT_SUPPORTED");
    // Cards and propagation are acted on (the board, merge-only copies);
    // only the Lieutenant is not.
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert!(notes[0].contains("swarmforge.conf:1") && notes[0].contains("Lieutenant"));
    // A route naming a role no window defines is refused as upstream does.
    let conf = p.read("swarmforge/swarmforge.conf");
    p.write(
        "swarmforge/swarmforge.conf",
        &format!("{conf}card bug qa nobody\n"),
    );
    let r = p.swarm(&["init"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.stderr_has("Invalid card 'bug' on line 6: role 'nobody' is not defined by a window line");
}

/// [`project`] with the audit gate on (`audit_gate: true`).
fn gated(layout: Layout) -> Project {
    Project::builder()
        .layout(layout)
        .role("coder")
        .role(Role::new("qa").worktree("qa").mode("batch"))
        .config("wake: {method: none}\naudit_gate: true\n")
        .queue_dirs()
        .build()
}

/// Commits `<what>.txt` in the worktree `wt`; returns HEAD, abbreviated.
fn commit_in(wt: &Path, what: &str) -> String {
    fs::write(wt.join(format!("{what}.txt")), what).unwrap();
    git(wt, &["add", &format!("{what}.txt")]);
    git(wt, &["commit", "-q", "-m", what]);
    git(wt, &["rev-parse", "--short=10", "HEAD"])
}

/// Today's SwarmForge's audit gate, from its `swarm_handoff.bb` and its
/// `lieutenant` README (docs/swarmforge-compat.md §3): "Only an unchanged
/// second call queues the handoff … A changed draft, task, sender, recipient
/// set, or commit invalidates the earlier audit." The first call prints
/// `AUDIT_REQUIRED`, `HANDOFF_NOT_QUEUED`, `TASK_ID: <id>`, `COMMIT: <sha>`,
/// queues nothing, keeps the draft and exits 0. Here behind `audit_gate:
/// true`; without it a git_handoff is queued at once, as before.
#[test]
fn the_audit_gate_queues_a_git_handoff_only_on_an_unchanged_second_call() {
    for layout in LAYOUTS {
        let p = gated(layout);
        let wt = p.role_dir("qa");
        let commit_in_qa = |what: &str| commit_in(&wt, what);
        let outbox = wt.join(".swarmforge/handoffs/outbox");
        let queued = || handoff_names(&outbox).len();
        let call = |draft: &str| -> Run {
            fs::create_dir_all(wt.join("tmp")).unwrap();
            fs::write(wt.join("tmp/handoff.txt"), draft).unwrap();
            let r = p
                .cmd("swarm-handoff")
                .role("qa")
                .arg("./tmp/handoff.txt")
                .run();
            assert_eq!(r.code, 0, "{layout:?}: {}", r.stderr);
            r
        };
        let draft = "type: git_handoff\nto: coder\npriority: 50\ntask: task-1-cave-setup\n";
        let first = commit_in_qa("cave");

        let r = call(draft);
        assert!(
            r.stdout.starts_with(&format!(
                "AUDIT_REQUIRED\nHANDOFF_NOT_QUEUED\nTASK_ID: task-1-cave-setup\nCOMMIT: {first}\n\n"
            )),
            "{layout:?}: {}",
            r.stdout
        );
        assert_eq!(queued(), 0, "{layout:?}: nothing queued");
        assert!(
            wt.join("tmp/handoff.txt").exists(),
            "{layout:?}: draft kept"
        );
        // `swarm status` says a handoff is held back, and by whom.
        let st = p.swarm(&["status"]);
        assert!(
            st.stdout
                .contains("audit gate: qa's git_handoff is not queued"),
            "{}",
            st.stdout
        );

        // A change (here the priority) is challenged again.
        let r = call(&draft.replace("priority: 50", "priority: 40"));
        assert!(r.stdout.starts_with("AUDIT_REQUIRED\n"), "{}", r.stdout);
        assert_eq!(queued(), 0);
        // A new commit at HEAD changes the handoff too.
        let r = call(draft);
        assert!(r.stdout.starts_with("AUDIT_REQUIRED\n"), "{}", r.stdout);
        let head = commit_in_qa("wumpus");
        let r = call(draft);
        assert!(
            r.stdout.contains(&format!("COMMIT: {head}\n")),
            "{}",
            r.stdout
        );
        // The unchanged second call queues it, and leaves no challenge.
        let r = call(draft);
        assert!(r.stdout.starts_with("HANDOFF QUEUED: "), "{}", r.stdout);
        assert_eq!(queued(), 1);
        assert!(
            !wt.join("tmp/handoff.txt").exists(),
            "{layout:?}: draft deleted"
        );
        let pending = wt.join(".swarmforge/handoffs/audit_pending");
        let left: Vec<_> = fs::read_dir(&pending)
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_dir())
            .flat_map(|d| fs::read_dir(d.path()).unwrap().flatten())
            .collect();
        assert!(left.is_empty(), "{layout:?}: {left:?}");
        assert!(!p.swarm(&["status"]).stdout.contains("audit gate:"));
        // Other types are never gated.
        let r = call("type: note\nto: coder\npriority: 50\nmessage: hi\n");
        assert!(r.stdout.starts_with("HANDOFF QUEUED: "), "{}", r.stdout);
    }
}

/// The audit gate's two ends of a held-back handoff. Upstream's `lieutenant`
/// README: "The first valid Git handoff call returns `AUDIT_REQUIRED`
/// without queueing or completing the sender's current inbox item"; its
/// `swarm_handoff.bb` (`complete-current-after-git-handoff!`): once the
/// unchanged second call queued it, the helper runs `done_with_current.sh`
/// and passes its output through ("CURRENT COMPLETION FAILED after handoff
/// queued." when that fails). Until then the work is not finished here
/// (`AUDIT_PENDING`, exit 2): neither the current item by hand, nor a new
/// item taken while the held handoff waits (docs/swarmforge-compat.md §3);
/// `done_with_current.sh --drop` drops the held handoff.
#[test]
fn a_held_back_git_handoff_blocks_new_work_and_the_queueing_call_finishes_the_item() {
    for layout in LAYOUTS {
        let p = gated(layout);
        let sh = Shims::install(&p);
        let wt = p.role_dir("qa");
        let commit_in_qa = |what: &str| {
            commit_in(&wt, what);
        };
        p.send_as("coder", &note("qa", "50", "check the cave")).ok();
        p.deliver_once().ok();
        sh.run(&p, "qa", "ready_for_next.sh").ok();
        p.send_as("coder", &note("qa", "40", "then the bats")).ok();
        p.deliver_once().ok();
        let in_process = wt.join(".swarmforge/handoffs/inbox/in_process");
        let new = wt.join(".swarmforge/handoffs/inbox/new");
        fs::create_dir_all(wt.join("tmp")).unwrap();
        let draft = "type: git_handoff\nto: coder\npriority: 50\ntask: cave\n";
        fs::write(wt.join("tmp/handoff.txt"), draft).unwrap();
        commit_in_qa("cave");
        sh.run(&p, "qa", "swarm_handoff.sh ./tmp/handoff.txt")
            .ok()
            .stdout_has("AUDIT_REQUIRED\n");

        // Not finished by hand while the handoff is held back.
        let r = sh.run(&p, "qa", "done_with_current.sh");
        assert_eq!(r.code, 2, "{layout:?}: {}{}", r.stdout, r.stderr);
        r.stderr_has("AUDIT_PENDING: your git handoff was held back by the audit gate");
        assert_eq!(fs::read_dir(&in_process).unwrap().count(), 1, "{layout:?}");

        // The queueing call finishes the item: COMPLETED_BATCH, MAIL_WAITING.
        let r = sh.run(&p, "qa", "swarm_handoff.sh ./tmp/handoff.txt");
        r.ok().stdout_has("HANDOFF QUEUED: ");
        assert!(
            r.stdout.contains("\nCOMPLETED_BATCH: ") && r.stdout.ends_with("\nMAIL_WAITING\n"),
            "{layout:?}: {}",
            r.stdout
        );
        assert_eq!(fs::read_dir(&in_process).unwrap().count(), 0, "{layout:?}");

        // A git handoff held back with nothing in process: no new item.
        commit_in_qa("more");
        fs::write(wt.join("tmp/handoff.txt"), draft).unwrap();
        sh.run(&p, "qa", "swarm_handoff.sh ./tmp/handoff.txt")
            .ok()
            .stdout_has("AUDIT_REQUIRED\n");
        let r = sh.run(&p, "qa", "ready_for_next.sh");
        assert_eq!(r.code, 2, "{layout:?}: {}{}", r.stdout, r.stderr);
        r.stderr_has("AUDIT_PENDING: ")
            .stderr_has("so a new item is not taken");
        assert_eq!(handoff_names(&new).len(), 1, "{layout:?}: still waiting");
        // Seen: `swarm status` says the role waits on it, and the check
        // is not OK while it blocks the role.
        p.swarm(&["status"]).ok().stdout_has(
            "until then qa neither finishes its item nor takes a new one (AUDIT_PENDING)",
        );
        let c = p.swarm(&["audit", "--check"]);
        assert_eq!(c.code, 2, "{layout:?}: {}", c.stdout);
        c.stdout_has("VIOLATION audit_pending ");
        // Dropped, the held handoff no longer blocks.
        let r = sh.run(&p, "qa", "done_with_current.sh --drop");
        r.stdout_has("DROPPED: git handoff held back by the audit gate");
        assert!(
            !p.swarm(&["audit", "--check"])
                .stdout
                .contains("VIOLATION audit_pending"),
            "{layout:?}"
        );
        sh.run(&p, "qa", "ready_for_next.sh")
            .ok()
            .stdout_has("then the bats");
    }
}
