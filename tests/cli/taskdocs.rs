//! Today's SwarmForge's task documents and role byline
//! (docs/swarmforge-compat.md §8), in both layouts, each case from upstream's
//! own words or code.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::{git, Layout, Project, Role, Run};

const LAYOUTS: [Layout; 2] = [Layout::Init, Layout::SwarmForge];

/// The operator's document, as a New Task leaves it in the project.
const DOC: &str = "# change-1\n\nDig the cave.\n";

/// `lead` in the project root (SwarmForge's `master`), `coder` in its own
/// worktree; unconfined, no wake-ups. `before` runs on the repository
/// before `swarm init` (which installs the byline hook).
fn project_with(layout: Layout, before: impl FnOnce(&Project)) -> Project {
    let settings = "wake: {method: none}\nlaunch: {confine: false}\n";
    let p = match layout {
        Layout::SwarmForge => {
            let p = Project::builder()
                .layout(layout)
                .role("lead")
                .role(Role::new("coder").worktree("coder"))
                .queue_dirs()
                .build();
            p.write(
                "swarmforge/swarmforge.conf",
                "window lead codex master\nwindow coder claude coder\n",
            );
            p.write("swarmforge/constitution.prompt", "Be kind.\n");
            p.write("swarmforge/roles/lead.prompt", "Lead.\n");
            p.write("swarmforge/roles/coder.prompt", "Code.\n");
            p.config(settings);
            p
        }
        Layout::Init => {
            let p = Project::empty();
            git(&p.root, &["init", "-q", "-b", "master"]);
            p.write("README", "x\n");
            git(&p.root, &["add", "README"]);
            git(&p.root, &["commit", "-q", "-m", "init"]);
            p.config(&format!(
                "{settings}roles:\n  - {{name: lead, agent: codex, worktree: master}}\n  - {{name: coder, agent: claude, worktree: coder}}\n"
            ));
            p
        }
    };
    before(&p);
    p.swarm(&["init"]).ok();
    p
}

fn project(layout: Layout) -> Project {
    project_with(layout, |_| {})
}

/// Commits `what.txt` in `wt`; the new HEAD (10 characters).
fn commit_work(wt: &Path, what: &str) -> String {
    fs::write(wt.join(format!("{what}.txt")), what).unwrap();
    git(wt, &["add", &format!("{what}.txt")]);
    git(wt, &["commit", "-q", "-m", what]);
    git(wt, &["rev-parse", "--short=10", "HEAD"])
}

/// `swarm-handoff` of a git_handoff of `task` from `role` to `to`, the draft
/// in the role's `./tmp/`.
fn send(p: &Project, role: &str, to: &str, task: &str) -> Run {
    let wt = p.role_dir(role);
    fs::create_dir_all(wt.join("tmp")).unwrap();
    fs::write(
        wt.join("tmp/handoff.txt"),
        format!("type: git_handoff\nto: {to}\npriority: 50\ntask: {task}\n"),
    )
    .unwrap();
    p.cmd("swarm-handoff")
        .role(role)
        .arg("./tmp/handoff.txt")
        .run()
}

/// The full message of `rev` in `wt`.
fn message(wt: &Path, rev: &str) -> String {
    git(wt, &["log", "-1", "--format=%B", rev])
}

/// Upstream's `lieutenant` README: "When a role accepts work, the receive
/// helper copies the operator's `tasks/<task-name>.md` into that role's
/// worktree when necessary and commits the current document before work
/// begins." Its `ready_for_next_guard.bb` (`ensure-task-document-committed!`,
/// called by `ready_for_next_task.bb` for a new item and for the one in
/// process): the copy when the worktree is not the project, then `git add`
/// and `git commit --only -m "Record task document" -- tasks/<task>.md`
/// unless HEAD holds those bytes. Before: nothing was copied.
#[test]
fn a_task_document_is_copied_and_committed_when_a_role_takes_the_work() {
    for layout in LAYOUTS {
        let p = project(layout);
        p.write("tasks/change-1.md", DOC);
        // The lead (in the project) records the document with its work.
        git(&p.root, &["add", "tasks/change-1.md"]);
        commit_work(&p.root, "plan");
        send(&p, "lead", "coder", "change-1").queued();
        p.deliver_once().ok();

        let wt = p.role_dir("coder");
        assert!(!wt.join("tasks/change-1.md").exists(), "{layout:?}");
        p.cmd("ready-next")
            .role("coder")
            .run()
            .ok()
            .stdout_has("TASK:");
        assert_eq!(
            fs::read_to_string(wt.join("tasks/change-1.md")).unwrap(),
            DOC,
            "{layout:?}"
        );
        assert_eq!(
            git(&wt, &["show", "HEAD:tasks/change-1.md"]),
            DOC.trim_end()
        );
        let m = message(&wt, "HEAD");
        assert!(
            m.starts_with("Record task document") && m.matches("By coder.").count() == 1,
            "{layout:?}: {m}"
        );
        assert_eq!(git(&wt, &["status", "--porcelain", "--", "tasks"]), "");

        // The operator changes the document: the item in process is taken
        // up again with the current one.
        let newer = format!("{DOC}Mind the pits.\n");
        p.write("tasks/change-1.md", &newer);
        p.cmd("ready-next").role("coder").run().ok();
        assert_eq!(
            git(&wt, &["show", "HEAD:tasks/change-1.md"]),
            newer.trim_end(),
            "{layout:?}"
        );
        // Nothing more to record: no new commit.
        let head = git(&wt, &["rev-parse", "HEAD"]);
        p.cmd("ready-next").role("coder").run().ok();
        assert_eq!(git(&wt, &["rev-parse", "HEAD"]), head, "{layout:?}");
    }
}

/// Upstream's README: "A Git handoff is rejected if its commit does not
/// contain that current task document." Its `swarm_handoff` state file
/// (`task-document-errors`): "Result commit <sha> does not include the task
/// document tasks/<task>.md. Receive the task and commit that document
/// before handoff." and "Result commit <sha> contains a stale task document
/// tasks/<task>.md. Commit the current operator task document before
/// handoff." Refused here as every invalid draft is (exit 2, the draft
/// kept). A task with no document is sent as before; a document that is a
/// symlink is never followed. Before: every one of them was queued.
#[test]
fn a_git_handoff_without_the_current_task_document_is_refused_until_it_is_committed() {
    for layout in LAYOUTS {
        let p = project(layout);
        p.write("tasks/change-1.md", DOC);
        let wt = p.role_dir("coder");

        let head = commit_work(&wt, "cave");
        let r = send(&p, "coder", "lead", "change-1");
        assert_eq!(r.code, 2, "{layout:?}: {}", r.stderr);
        r.stderr_has(&format!(
            "Result commit {head} does not include the task document tasks/change-1.md. Receive the task and commit that document before handoff."
        ))
        .stderr_has(&p.path("tasks/change-1.md").display().to_string());
        assert!(
            wt.join("tmp/handoff.txt").exists(),
            "{layout:?}: draft kept"
        );

        fs::create_dir_all(wt.join("tasks")).unwrap();
        fs::write(wt.join("tasks/change-1.md"), DOC).unwrap();
        git(&wt, &["add", "tasks/change-1.md"]);
        git(&wt, &["commit", "-q", "-m", "Record task document"]);
        send(&p, "coder", "lead", "change-1").queued();

        p.write("tasks/change-1.md", &format!("{DOC}Mind the pits.\n"));
        let head = commit_work(&wt, "pits");
        let r = send(&p, "coder", "lead", "change-1");
        assert_eq!(r.code, 2, "{layout:?}: {}", r.stderr);
        r.stderr_has(&format!(
            "Result commit {head} contains a stale task document tasks/change-1.md. Commit the current operator task document before handoff."
        ));

        // No document: as before.
        send(&p, "coder", "lead", "change-2").queued();
        // A document that is a symlink out of the project is not read.
        std::os::unix::fs::symlink("/etc/hostname", p.path("tasks/leak.md")).unwrap();
        let r = send(&p, "coder", "lead", "leak");
        assert_eq!(r.code, 2, "{layout:?}: {}", r.stderr);
        r.stderr_has("symlink");
    }
}

/// A worktree of the repository that is no role's.
fn scratch(p: &Project) -> PathBuf {
    let dir = p.path(".worktrees/scratch");
    git(
        &p.root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "scratch",
            dir.to_str().unwrap(),
        ],
    );
    dir
}

/// Upstream's prompt (`workflow.prompt`, commit a9a3ffa): "Include your role
/// byline in every git commit message in this form: `By <role>.`"; its
/// `commit_msg_hook.bb` appends it after a blank line unless the message
/// holds it, for `SWARMFORGE_ROLE` or the role roles.tsv gives the worktree
/// (its test `commit-msg-hook-infers-role-from-worktree`: a `master` role
/// in the project gets it too); `script_test.clj` counts exactly one
/// `By specifier.` when the message already ends with it. A worktree that
/// is no role's gets none. Before: no hook, no byline.
#[test]
fn a_real_commit_in_a_role_worktree_gets_the_byline_once() {
    for layout in LAYOUTS {
        let p = project(layout);
        let wt = p.role_dir("coder");
        commit_work(&wt, "dig");
        assert_eq!(message(&wt, "HEAD"), "dig\n\nBy coder.", "{layout:?}");
        fs::write(wt.join("more.txt"), "more").unwrap();
        git(&wt, &["add", "more.txt"]);
        git(&wt, &["commit", "-q", "-m", "Add a scenario\n\nBy coder."]);
        assert_eq!(message(&wt, "HEAD"), "Add a scenario\n\nBy coder.");

        commit_work(&p.root, "plan");
        assert_eq!(message(&p.root, "HEAD"), "plan\n\nBy lead.", "{layout:?}");

        let other = scratch(&p);
        commit_work(&other, "elsewhere");
        assert_eq!(message(&other, "HEAD"), "elsewhere", "{layout:?}");
    }
}

/// Upstream's README: "When a project already has that hook, SwarmForge
/// preserves it as `commit-msg.before-swarmforge`, applies the SwarmForge
/// byline first, and then runs the preserved executable hook … Repeated
/// startup does not wrap it again. To remove SwarmForge's dispatcher and
/// restore the prior hook, run: `bb swarmforge/scripts/swarmforge.bb
/// --remove-hooks .`"; its test
/// `commit-msg-hook-composes-idempotently-and-restores-existing-hook` uses
/// this very hook (it fails without the byline). Here `swarm hooks remove`.
/// Before: the project's hook was left alone and no byline added, so its
/// commit in the role worktree failed.
#[test]
fn a_projects_own_commit_msg_hook_is_kept_run_after_and_restored() {
    let original = "#!/bin/sh\ngrep -q 'By coder\\.' \"$1\" || exit 42\nprintf 'called\\n' > \"$(git rev-parse --git-common-dir)/original-hook.called\"\n";
    for layout in LAYOUTS {
        let p = project_with(layout, |p| {
            let hook = p.write(".git/hooks/commit-msg", original);
            fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
        });
        let hook = p.path(".git/hooks/commit-msg");
        let saved = p.path(".git/hooks/commit-msg.before-swarmforge");
        let ours = fs::read_to_string(&hook).unwrap();
        assert!(
            ours.contains("SWARMFORGE COMBINED COMMIT-MSG HOOK"),
            "{ours}"
        );
        p.swarm(&["init"]).ok();
        assert_eq!(
            fs::read_to_string(&hook).unwrap(),
            ours,
            "{layout:?}: not wrapped again"
        );
        assert_eq!(fs::read_to_string(&saved).unwrap(), original);

        let wt = p.role_dir("coder");
        commit_work(&wt, "dig");
        assert_eq!(message(&wt, "HEAD"), "dig\n\nBy coder.", "{layout:?}");
        assert_eq!(
            fs::read_to_string(p.path(".git/original-hook.called")).unwrap(),
            "called\n"
        );
        // Its exit status decides: no byline in a worktree that is no
        // role's, so the project's hook refuses the commit.
        let other = scratch(&p);
        fs::write(other.join("x.txt"), "x").unwrap();
        git(&other, &["add", "x.txt"]);
        let r = p
            .cmd("git")
            .at(&other)
            .args(["commit", "-q", "-m", "x"])
            .run();
        assert_ne!(r.code, 0, "{layout:?}: {}", r.stderr);

        p.swarm(&["hooks", "remove"])
            .ok()
            .stdout_has("restored the project's commit-msg hook");
        assert_eq!(fs::read_to_string(&hook).unwrap(), original, "{layout:?}");
        assert!(!saved.exists());
        // Removing again changes nothing.
        p.swarm(&["hooks", "remove"]).ok();
        assert_eq!(fs::read_to_string(&hook).unwrap(), original);
        // Installed again, then changed by hand: removal refuses, keeping
        // the project's saved hook.
        p.swarm(&["hooks", "install"]).ok();
        fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
        let r = p.swarm(&["hooks", "remove"]);
        assert_ne!(r.code, 0, "{layout:?}");
        r.stderr_has("not the swarm's");
        assert_eq!(fs::read_to_string(&saved).unwrap(), original);
    }
}

/// The finding codes `swarm doctor --json` reports for the hook.
fn hook_findings(p: &Project) -> Vec<String> {
    crate::support::doctor_messages(&p.swarm(&["doctor", "--json"]).json(), "COMMIT_MSG_HOOK")
}

/// `swarm doctor` says what state the hook is in: nothing when installed,
/// else missing, or a project's own hook that `swarm up` would keep aside.
/// Before: doctor said nothing of it.
#[test]
fn doctor_reports_the_byline_hook() {
    for layout in LAYOUTS {
        let p = project(layout);
        assert_eq!(hook_findings(&p), Vec::<String>::new(), "{layout:?}");
        let hook = p.path(".git/hooks/commit-msg");
        fs::remove_file(&hook).unwrap();
        let f = hook_findings(&p);
        assert!(
            f.len() == 1 && f[0].contains("not installed"),
            "{layout:?}: {f:?}"
        );
        fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
        let f = hook_findings(&p);
        assert!(
            f.len() == 1 && f[0].contains("commit-msg.before-swarmforge"),
            "{layout:?}: {f:?}"
        );
        p.swarm(&["hooks", "install"])
            .ok()
            .stdout_has("commit-msg.before-swarmforge");
        assert_eq!(hook_findings(&p), Vec::<String>::new(), "{layout:?}");
    }
}
