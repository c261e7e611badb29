//! Finding the project: one test per row of the layout table in
//! docs/protocol.md ("Finding the project"). SwarmForge's rule comes first
//! (git's top level holding `roles.tsv`, then the parent of git's common
//! dir), then ours (the `project-root` pointer, a worktree's main checkout,
//! the nearest `roles.tsv` without git); a folder `roles.tsv` lists as a
//! role's worktree is that role's worktree of the enclosing project.
//!
//! Role `ping` works in the layout under test, `pong` in a `swarm init`
//! worktree. Every agent helper runs under each of its names (ours,
//! SwarmForge's wrapper as `swarm shims` writes it, and SwarmForge's
//! task-mode helper) from ping's worktree and from a folder inside it;
//! `swarm` runs from those folders, with `--root` and with the positional
//! root; `handoffd` is refused on ping's worktree. Found right, ping is
//! held to the project's swarm.yaml, its mail carries the open session, and
//! its queue is its own worktree's.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{bin, clean_command, git, hq, Project, Run};

/// Where role ping works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The main checkout, which holds roles.tsv.
    MainCheckout,
    /// A git worktree in `.worktrees/ping` with nothing of ours in it.
    GitWorktree,
    /// The same with a copy of roles.tsv and the queue folders (SwarmForge's launcher).
    GitWorktreeWithCopy,
    /// The same with a `project-root` pointer (`swarm init`).
    GitWorktreeWithPointer,
    /// A git worktree outside the project folder.
    GitWorktreeOutside,
    /// A plain folder of the repository, `agents/ping`, nothing in it.
    PlainFolder,
    /// The same with a copy of roles.tsv and the queue folders.
    PlainFolderWithCopy,
    /// A plain folder outside any repository with a `project-root` pointer.
    PointerOutside,
    /// A project without git; ping in its plain folder `agents/ping`.
    NoGit,
    /// The same with a copy of roles.tsv in ping's folder.
    NoGitWithCopy,
}

/// The project with ping placed; `outside` holds folders outside it.
struct Case {
    place: Place,
    p: Project,
    ping: PathBuf,
    shims: PathBuf,
    _outside: tempfile::TempDir,
}

const CONFIG: &str =
    "wake: {method: none}\nroles:\n  - {name: ping, allowed_types: [note]}\n  - {name: pong}\n";

fn setup(place: Place) -> Case {
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path().canonicalize().unwrap();
    let no_git = matches!(place, Place::NoGit | Place::NoGitWithCopy);
    let p = if no_git {
        Project::empty()
    } else {
        Project::builder().build()
    };
    let ping = match place {
        Place::MainCheckout => p.root.clone(),
        Place::GitWorktree | Place::GitWorktreeWithCopy | Place::GitWorktreeWithPointer => {
            p.path(".worktrees/ping")
        }
        Place::GitWorktreeOutside | Place::PointerOutside => out.join("ping"),
        Place::PlainFolder | Place::PlainFolderWithCopy | Place::NoGit | Place::NoGitWithCopy => {
            p.path("agents/ping")
        }
    };
    let git_worktree = matches!(
        place,
        Place::GitWorktree
            | Place::GitWorktreeWithCopy
            | Place::GitWorktreeWithPointer
            | Place::GitWorktreeOutside
    );
    if git_worktree {
        let at = ping.to_str().unwrap();
        git(
            &p.root,
            &["worktree", "add", "-q", "-B", "swarmforge-ping", at, "HEAD"],
        );
    }
    fs::create_dir_all(&ping).unwrap();
    let pong = p.path(".worktrees/pong");
    let tsv = format!(
        "ping\tping\t{}\tswarmforge-ping\tping\tcodex\ttask\npong\tpong\t{}\tswarmforge-pong\tpong\tcodex\ttask\n",
        ping.display(),
        pong.display()
    );
    p.write_roles_raw(&tsv);
    p.config(CONFIG);
    fs::create_dir_all(hq(&pong, "")).unwrap();
    fs::write(
        pong.join(".swarmforge/project-root"),
        format!("{}\n", p.root.display()),
    )
    .unwrap();
    let copy = matches!(
        place,
        Place::GitWorktreeWithCopy | Place::PlainFolderWithCopy | Place::NoGitWithCopy
    );
    if copy {
        fs::create_dir_all(hq(&ping, "outbox/tmp")).unwrap();
        for d in [
            "sent",
            "failed",
            "inbox/new",
            "inbox/in_process",
            "inbox/completed",
        ] {
            fs::create_dir_all(hq(&ping, d)).unwrap();
        }
        fs::write(ping.join(".swarmforge/roles.tsv"), &tsv).unwrap();
    }
    if matches!(place, Place::GitWorktreeWithPointer | Place::PointerOutside) {
        fs::create_dir_all(hq(&ping, "")).unwrap();
        fs::write(
            ping.join(".swarmforge/project-root"),
            format!("{}\n", p.root.display()),
        )
        .unwrap();
    }
    let shims = out.join("shims");
    fs::create_dir_all(&shims).unwrap();
    p.swarm(&["shims", shims.to_str().unwrap()]).ok();
    Case {
        place,
        p,
        ping,
        shims,
        _outside: outside,
    }
}

/// An agent helper's names: ours, SwarmForge's wrapper, and SwarmForge's
/// task-mode helper (`ready_for_next_task.sh`: no role, no roles.tsv row).
#[derive(Clone, Copy, Debug)]
enum Spelling {
    Ours,
    SwarmForge,
    SwarmForgeTask,
}

const SPELLINGS: [Spelling; 3] = [
    Spelling::Ours,
    Spelling::SwarmForge,
    Spelling::SwarmForgeTask,
];

impl Case {
    fn helper(&self, spelling: Spelling, ours: &str) -> PathBuf {
        let theirs = match (ours, spelling) {
            (_, Spelling::Ours) => return bin(ours),
            ("swarm-handoff", _) => "swarm_handoff.sh",
            ("ready-next", Spelling::SwarmForge) => "ready_for_next.sh",
            ("ready-next", _) => "ready_for_next_task.sh",
            ("done-current", Spelling::SwarmForge) => "done_with_current.sh",
            ("done-current", _) => "done_with_current_task.sh",
            (other, _) => panic!("no helper {other}"),
        };
        self.shims.join(theirs)
    }

    fn run(&self, program: &Path, cwd: &Path, role: Option<&str>, args: &[&str]) -> Run {
        let mut c = clean_command(program, cwd);
        if let Some(r) = role {
            c.env("SWARMFORGE_ROLE", r);
        }
        c.args(args).output().unwrap().into()
    }

    /// Writes `draft` into `cwd` and sends it there as `role` with `send`.
    fn send(&self, send: &Path, cwd: &Path, role: &str, draft: &str) -> Run {
        fs::write(cwd.join("draft.txt"), draft).unwrap();
        self.run(send, cwd, Some(role), &["draft.txt"])
    }

    fn pong(&self) -> PathBuf {
        self.p.path(".worktrees/pong")
    }

    fn deliver(&self) {
        let root = self.p.root.to_str().unwrap();
        let r = self.run(&bin("handoffd"), &self.p.root, None, &["--once", root]);
        assert_eq!(r.code, 0, "{:?}: {r:?}", self.place);
        assert!(
            r.stdout.contains("delivered 1, failed 0, deferred 0"),
            "{:?}: {r:?}",
            self.place
        );
    }

    /// `role` takes its one waiting item and finishes it.
    fn take(&self, spelling: Spelling, role: &str, cwd: &Path, want: &str) {
        let r = self.run(&self.helper(spelling, "ready-next"), cwd, Some(role), &[]);
        let what = format!(
            "{:?} {spelling:?} ready-next as {role} in {}",
            self.place,
            cwd.display()
        );
        assert_eq!(r.code, 0, "{what}: {r:?}");
        assert!(
            r.stdout.contains("TASK: ") && r.stdout.contains(want),
            "{what}: {r:?}"
        );
        let r = self.run(&self.helper(spelling, "done-current"), cwd, Some(role), &[]);
        assert_eq!(r.code, 0, "{what}: done-current: {r:?}");
        assert!(r.stdout.contains("COMPLETED: "), "{what}: {r:?}");
    }

    /// The agent helpers, under `spelling`, from `cwd` in ping's worktree.
    fn helpers_work_from(&self, spelling: Spelling, cwd: &Path, session: &str) {
        let what = format!("{:?} {spelling:?} in {}", self.place, cwd.display());
        let send = self.helper(spelling, "swarm-handoff");

        // Held to the project's swarm.yaml (ping may send notes only).
        let post = "type: post\nto: pong\npriority: 50\nsubject: hi\n\nbody\n";
        let r = self.send(&send, cwd, "ping", post);
        assert_eq!(r.code, 2, "{what}: the project's allowed_types: {r:?}");
        assert!(
            r.stderr
                .contains("Header 'type' must be one of note; got 'post'."),
            "{what}: {r:?}"
        );

        // Queued in ping's own outbox; delivered with the open session.
        let note = "type: note\nto: pong\npriority: 50\nmessage: from ping\n";
        let r = self.send(&send, cwd, "ping", note);
        assert_eq!(r.code, 0, "{what}: {r:?}");
        let queued = r
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("HANDOFF QUEUED: "))
            .unwrap_or_else(|| panic!("{what}: {r:?}"));
        assert!(
            Path::new(queued).starts_with(hq(&self.ping, "outbox")),
            "{what}: queued in ping's outbox, not {queued}"
        );
        self.deliver();
        let new = hq(&self.pong(), "inbox/new");
        let names = crate::support::files(&new);
        assert_eq!(names.len(), 1, "{what}: {names:?}");
        let text = fs::read_to_string(new.join(&names[0])).unwrap();
        assert!(
            text.lines().any(|l| l == format!("session: {session}")),
            "{what}: the message carries the open session {session}:\n{text}"
        );
        self.take(Spelling::Ours, "pong", &self.pong(), "from ping");

        // Mail for ping lands in ping's inbox and is handed out there.
        let note = "type: note\nto: ping\npriority: 50\nmessage: for ping\n";
        let r = self.send(&bin("swarm-handoff"), &self.pong(), "pong", note);
        assert_eq!(r.code, 0, "{what}: pong sends: {r:?}");
        self.deliver();
        assert_eq!(
            crate::support::files(&hq(&self.ping, "inbox/new")).len(),
            1,
            "{what}: delivered into ping's worktree"
        );
        self.take(spelling, "ping", cwd, "for ping");
    }

    /// `swarm status` from ping's folders, by both spellings, is the project's.
    fn swarm_reports_on_the_project(&self, cwd: &Path) {
        let status = |dir: &Path, args: &[&str]| {
            let r = self.run(&bin("swarm"), dir, None, args);
            assert_eq!(
                r.code,
                0,
                "{:?} swarm {args:?} in {}: {r:?}",
                self.place,
                dir.display()
            );
            let mut v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
            v.as_object_mut().unwrap().remove("now");
            v
        };
        let want = status(&self.p.root, &["status", "--json"]);
        let here = cwd.to_str().unwrap();
        let elsewhere = self._outside.path();
        assert_eq!(
            status(cwd, &["status", "--json"]),
            want,
            "{:?}: from {here}",
            self.place
        );
        for args in [
            &["--root", here, "status", "--json"][..],
            &["status", here, "--json"],
        ] {
            assert_eq!(status(elsewhere, args), want, "{:?}: {args:?}", self.place);
        }
    }

    /// `handoffd` on ping's worktree serves nothing and names the project.
    fn handoffd_is_refused_on_the_worktree(&self) {
        let wt = self.ping.to_str().unwrap();
        let r = self.run(&bin("handoffd"), &self.p.root, None, &["--once", wt]);
        assert_eq!(r.code, 1, "{:?}: {r:?}", self.place);
        assert!(
            r.stderr.contains(&format!(
                "is role ping's worktree of project {}; run: handoffd {}",
                self.p.root.display(),
                self.p.root.display()
            )),
            "{:?}: {}",
            self.place,
            r.stderr
        );
        assert!(
            !self.ping.join(".swarmforge/daemon").exists(),
            "{:?}",
            self.place
        );
    }
}

fn check(place: Place) {
    let c = setup(place);
    let r = c.p.swarm(&["session", "start", "--json"]);
    r.ok();
    let session = r.json()["id"].as_str().unwrap().to_string();
    let sub = c.ping.join("src/deep");
    fs::create_dir_all(&sub).unwrap();
    for spelling in SPELLINGS {
        for cwd in [&c.ping, &sub] {
            c.helpers_work_from(spelling, cwd, &session);
        }
    }
    for cwd in [&c.ping, &sub] {
        c.swarm_reports_on_the_project(cwd);
    }
    if place != Place::MainCheckout {
        c.handoffd_is_refused_on_the_worktree();
    }
}

#[test]
fn a_role_in_the_main_checkout() {
    check(Place::MainCheckout);
}

#[test]
fn a_role_in_a_bare_git_worktree() {
    check(Place::GitWorktree);
}

#[test]
fn a_role_in_a_git_worktree_with_a_copy_of_roles_tsv() {
    check(Place::GitWorktreeWithCopy);
}

#[test]
fn a_role_in_a_git_worktree_with_a_project_root_pointer() {
    check(Place::GitWorktreeWithPointer);
}

#[test]
fn a_role_in_a_git_worktree_outside_the_project_folder() {
    check(Place::GitWorktreeOutside);
}

#[test]
fn a_role_in_a_plain_folder_of_the_repository() {
    check(Place::PlainFolder);
}

#[test]
fn a_role_in_a_plain_folder_with_a_copy_of_roles_tsv() {
    check(Place::PlainFolderWithCopy);
}

#[test]
fn a_role_in_a_plain_folder_outside_with_a_project_root_pointer() {
    check(Place::PointerOutside);
}

#[test]
fn a_role_in_a_plain_folder_of_a_project_without_git() {
    check(Place::NoGit);
}

#[test]
fn a_role_in_a_plain_folder_with_a_copy_in_a_project_without_git() {
    check(Place::NoGitWithCopy);
}

#[test]
fn outside_any_project_both_spellings_say_so() {
    let c = setup(Place::MainCheckout);
    let nowhere = tempfile::tempdir().unwrap();
    let here = nowhere.path().canonicalize().unwrap();
    for spelling in SPELLINGS {
        for helper in ["swarm-handoff", "ready-next", "done-current"] {
            let args: &[&str] = if helper == "swarm-handoff" {
                &["draft.txt"]
            } else {
                &[]
            };
            fs::write(
                here.join("draft.txt"),
                "type: note\nto: x\npriority: 50\nmessage: m\n",
            )
            .unwrap();
            let r = c.run(&c.helper(spelling, helper), &here, Some("ping"), args);
            assert_eq!(
                (r.code, r.stderr.lines().next()),
                (1, Some("Cannot find SwarmForge project root")),
                "{spelling:?} {helper}"
            );
        }
    }
    let elsewhere = here.to_str().unwrap();
    for args in [&["status"][..], &["--root", elsewhere, "status"]] {
        let r = c.run(&bin("swarm"), &here, None, args);
        assert_eq!(r.code, 1, "{args:?}: {r:?}");
        assert!(
            r.stderr.starts_with(&format!("No swarm at {elsewhere}")),
            "{r:?}"
        );
    }
}
