//! `swarm init`, `swarm up`, `swarm down`, `swarm demo` and swarmforge.conf,
//! driven through the real binaries in temp dirs. Every test that starts
//! processes holds a guard that stops them again, even when it fails.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{
    clean_command, git, require_tool, signal, wait_until, walk, Layout, Project, Role, Run,
    SwarmGuard, MESSAGE_DIRS,
};

/// SwarmForge's red `Error:` is printed only on a terminal; tests read a pipe.
const RED_ERROR: &str = "Error: ";

/// Every path under `dir` with its kind, size, mode and mtime: two equal
/// snapshots mean nothing was created, removed or written.
fn snapshot(dir: &Path) -> Vec<(String, bool, u64, u32, i64, i64)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, bool, u64, u32, i64, i64)>) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let m = fs::symlink_metadata(e.path()).unwrap();
            let rel = e.path().strip_prefix(base).unwrap().display().to_string();
            out.push((
                rel,
                m.is_dir(),
                if m.is_dir() { 0 } else { m.len() },
                m.mode(),
                m.mtime(),
                m.mtime_nsec(),
            ));
            if m.is_dir() {
                walk(base, &e.path(), out);
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, dir, &mut v);
    v
}

/// `*.handoff` files under `dir`, recursively (batch dirs included).
fn handoffs_in(dir: &Path) -> Vec<PathBuf> {
    walk(dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".handoff"))
        .collect()
}

fn count(root: &Path, wt: &str, sub: &str) -> usize {
    handoffs_in(&root.join(wt).join(".swarmforge/handoffs").join(sub)).len()
}

/// A live process (zombies waiting for init to reap them do not count).
fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s
                .rfind(')')
                .and_then(|i| s[i + 1..].split_whitespace().next())
                .unwrap_or("");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

fn daemon_pid(root: &Path) -> Option<u32> {
    fs::read_to_string(root.join(".swarmforge/daemon/handoffd.pid"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

const THREE_ROLES: &str = "\
# a person, a coder in the root, a reviewer in its own worktree
launch:
  stagger: 100ms
roles:
  - name: boss
    agent: human
  - name: coder
    agent: sh agents/coder.sh --fast
    worktree: master
  - name: code-reviewer
    agent: ./agents/review.sh
    worktree: review
    mode: batch
";

#[test]
fn init_creates_everything_and_a_second_run_changes_nothing() {
    let d = Project::empty();
    d.write("swarm.yaml", THREE_ROLES);
    d.write("agents/coder.sh", "exit 0\n");
    let r = d.swarm(&["init", d.root.to_str().unwrap()]);
    r.ok();
    let root = &d.root;
    assert!(root.join(".git").is_dir());
    assert_eq!(
        git(root, &["log", "--format=%s"]),
        "Initial swarmforge repository"
    );
    // The example files are in the first commit, the state is not.
    assert!(git(root, &["ls-files"]).contains("agents/coder.sh"));
    let exclude = d.read(".git/info/exclude");
    assert!(exclude.lines().any(|l| l == ".swarmforge/"), "{exclude}");
    assert!(exclude.lines().any(|l| l == ".worktrees/"), "{exclude}");
    let wt = root.join(".worktrees/review");
    assert!(wt.join(".git").is_file(), "worktree created");
    // Its agent is confined (the default): the worktree is on its own
    // ref, its branch a symbolic ref to it (docs/security.md "Branches").
    assert_eq!(
        git(&wt, &["symbolic-ref", "HEAD"]),
        "refs/worktree/swarmforge"
    );
    assert_eq!(
        git(root, &["symbolic-ref", "refs/heads/swarmforge-review"]),
        "worktrees/review/refs/worktree/swarmforge"
    );
    assert_eq!(
        d.read(".swarmforge/roles.tsv"),
        format!(
            "boss\tpeople/boss\t{r}/.swarmforge/people/boss\tswarmforge-boss\tBoss\thuman\ttask\n\
             coder\tmaster\t{r}\tswarmforge-coder\tCoder\tsh\ttask\n\
             code-reviewer\treview\t{r}/.worktrees/review\tswarmforge-code-reviewer\tCode Reviewer\t./agents/review.sh\tbatch\n",
            r = root.display()
        )
    );
    // The person's inbox is a state-only folder of its own (no checkout).
    let person = root.join(".swarmforge/people/boss");
    assert!(!person.join(".git").exists());
    for base in [root.clone(), wt.clone(), person] {
        for sub in MESSAGE_DIRS.iter().chain(&["outbox/tmp", "inbox/tmp"]) {
            let p = base.join(".swarmforge/handoffs").join(sub);
            assert!(p.is_dir(), "{}", p.display());
        }
    }
    assert_eq!(
        fs::read_to_string(wt.join(".swarmforge/project-root")).unwrap(),
        format!("{}\n", root.display())
    );
    assert!(!wt.join(".swarmforge/roles.tsv").exists());
    // git sees no state as untracked.
    assert_eq!(git(root, &["status", "--porcelain"]), "");
    assert_eq!(git(&wt, &["status", "--porcelain"]), "");

    let before = snapshot(root);
    let again = d.swarm(&["init"]);
    again.ok();
    again.stdout_has("is up to date");
    assert_eq!(snapshot(root), before, "a second init changed the tree");
}

#[test]
fn init_in_an_existing_repository_keeps_its_history() {
    let d = Project::empty();
    git(&d.root, &["init", "-q", "-b", "main"]);
    d.write("README", "x\n");
    git(&d.root, &["add", "README"]);
    git(&d.root, &["commit", "-q", "-m", "mine"]);
    d.write(
        "swarm.yaml",
        "roles:\n  - name: a\n    agent: human\n    worktree: wa\n",
    );
    d.swarm(&["init"]).ok();
    assert_eq!(git(&d.root, &["log", "--format=%s"]), "mine");
    assert_eq!(
        git(&d.path(".worktrees/wa"), &["log", "--format=%s"]),
        "mine"
    );
    // A worktree removed by hand comes back on its own branch, commits kept.
    d.write(".worktrees/wa/f", "y\n");
    git(&d.path(".worktrees/wa"), &["add", "f"]);
    git(&d.path(".worktrees/wa"), &["commit", "-q", "-m", "work"]);
    fs::remove_dir_all(d.path(".worktrees/wa")).unwrap();
    d.swarm(&["init"]).ok();
    assert_eq!(
        git(&d.path(".worktrees/wa"), &["log", "-1", "--format=%s"]),
        "work"
    );
}

/// A project as SwarmForge's launcher leaves it: conf, prompts, worktrees,
/// roles.tsv (and its copies), and messages in every kind of folder.
fn swarmforge_project() -> Project {
    let d = Project::builder()
        .layout(Layout::SwarmForge)
        .file(
            "swarmforge/swarmforge.conf",
            "# SwarmForge config\nwindow architect claude master\n\nwindow coder Codex coder batch --yolo\n  window QA copilot qa\n",
        )
        .file("swarmforge/constitution.prompt", "Be good.\n")
        .file("swarmforge/roles/architect.prompt", "Do it.\n")
        .file("swarmforge/roles/coder.prompt", "Do it.\n")
        .file("swarmforge/roles/QA.prompt", "Do it.\n")
        .file(".gitignore", ".swarmforge/\n.worktrees/\n")
        .role(Role::new("architect").agent("claude").display("Architect"))
        .role(
            Role::new("coder")
                .worktree("coder")
                .mode("batch")
                .display("Coder"),
        )
        .role(
            Role::new("QA")
                .worktree("qa")
                .agent("copilot")
                .display("Qa"),
        )
        .build();
    let note = |from: &str, to: &str, seq: &str, msg: &str| {
        format!(
            "id: 20260615T140531Z_{seq}_from_{from}\nfrom: {from}\nto: {to}\nrecipient: {to}\npriority: 50\ntype: note\nmessage: {msg}\ncreated_at: 2026-06-15T14:05:31.123Z\nenqueued_at: 2026-06-15T14:05:32.456Z\n\nRe-read your role and constitution.\n\n{msg}\n"
        )
    };
    d.write(
        ".worktrees/qa/.swarmforge/handoffs/inbox/new/50_20260615T140531Z_000007_from_coder_to_QA.handoff",
        &note("coder", "QA", "000007", "please test the parser"),
    );
    d.write(
        ".worktrees/coder/.swarmforge/handoffs/inbox/completed/batch_20260615T140000Z_000001/50_20260615T135900Z_000003_from_architect_to_coder.handoff",
        &note("architect", "coder", "000003", "build the parser"),
    );
    d.write(
        ".worktrees/coder/.swarmforge/handoffs/sent/50_20260615T140531Z_000007_from_coder_to_QA.handoff",
        &note("coder", "QA", "000007", "please test the parser"),
    );
    d.write(".worktrees/coder/.swarmforge/handoffs/sequence", "000007\n");
    d
}

#[test]
fn swarmforge_project_is_picked_up_unchanged() {
    let d = swarmforge_project();
    let root = d.root.clone();
    let tsv_before = d.read(".swarmforge/roles.tsv");
    let qa_hs = root.join(".worktrees/qa/.swarmforge/handoffs");
    let coder_hs = root.join(".worktrees/coder/.swarmforge/handoffs");
    // Files only: adding a folder (inbox/tmp) touches its parent's mtime.
    let files = |d: &Path| {
        let mut v = snapshot(d);
        v.retain(|e| !e.1);
        v
    };
    let before_qa = files(&qa_hs);
    let before_coder = files(&coder_hs);
    let before_head = git(&root, &["rev-parse", "HEAD"]);

    d.swarm(&["init"]).ok();

    // roles.tsv written by our rules is byte for byte the original's.
    assert_eq!(d.read(".swarmforge/roles.tsv"), tsv_before);
    assert_eq!(git(&root, &["rev-parse", "HEAD"]), before_head);
    // Existing messages, batches and the sequence are untouched.
    assert_eq!(files(&qa_hs), before_qa);
    assert_eq!(files(&coder_hs), before_coder);

    // Our helpers serve the waiting message and continue the sequence.
    let r = d.cmd("ready-next").role("QA").code(0).run();
    assert!(r.stdout.starts_with(&format!(
        "TASK: {}/inbox/in_process/50_20260615T140531Z_000007_from_coder_to_QA.handoff\nFROM: coder\nTYPE: note\n",
        qa_hs.display()
    )), "{}", r.stdout);
    assert!(
        r.stdout.ends_with("please test the parser\n"),
        "{}",
        r.stdout
    );
    let r = d.cmd("ready-next").role("coder").run();
    assert_eq!(r.stdout, "NO_TASK\n", "{}", r.stderr);
    fs::write(
        root.join(".worktrees/coder/draft.txt"),
        "type: note\nto: QA\npriority: 50\nmessage: again\n",
    )
    .unwrap();
    let r = d
        .cmd("swarm-handoff")
        .role("coder")
        .arg("draft.txt")
        .code(0)
        .run();
    r.stdout_has("_000008_from_coder_to_QA.handoff");
}

/// Writes a SwarmForge project whose conf is `conf` and runs `swarm init`.
fn conf_error(conf: &str, prompts: &[&str], constitution: bool) -> (Project, Run) {
    let d = Project::empty();
    d.write("swarmforge/swarmforge.conf", conf);
    if constitution {
        d.write("swarmforge/constitution.prompt", "x\n");
    }
    for p in prompts {
        d.write(&format!("swarmforge/roles/{p}.prompt"), "x\n");
    }
    let r = d.swarm(&["init"]);
    (d, r)
}

#[test]
fn swarmforge_conf_errors_are_exact() {
    let conf_path = |d: &Project| d.path("swarmforge/swarmforge.conf").display().to_string();
    type Want = Box<dyn Fn(&Project) -> String>;
    let cases: Vec<(&str, &[&str], Want)> = vec![
        (
            "window a codex\n",
            &[],
            Box::new(|_| "Invalid config line 1: window a codex".into()),
        ),
        (
            "\n# c\n  frame a codex master  \n",
            &[],
            Box::new(|_| "Unknown config directive on line 3: frame".into()),
        ),
        (
            "window a_b codex master\n",
            &[],
            Box::new(|_| {
                "Invalid role 'a_b' on line 1: role names may not contain underscores".into()
            }),
        ),
        (
            "window a codex master\nwindow a claude master\n",
            &["a"],
            Box::new(move |d| format!("Duplicate role 'a' in {}", conf_path(d))),
        ),
        (
            "window a codex w\nwindow b codex w\n",
            &["a", "b"],
            Box::new(move |d| format!("Duplicate worktree 'w' in {}", conf_path(d))),
        ),
        (
            "window a codex x/y\n",
            &["a"],
            Box::new(|_| "Invalid worktree 'x/y' for role 'a'".into()),
        ),
        (
            "window a NoSuchAgentAnywhere master\n",
            &["a"],
            Box::new(|_| "Unsupported agent 'nosuchagentanywhere' for role 'a'".into()),
        ),
        (
            "window a codex master\n",
            &[],
            Box::new(|d: &Project| {
                format!(
                    "Missing role prompt {}",
                    d.path("swarmforge/roles/a.prompt").display()
                )
            }),
        ),
        (
            "# nothing\n\n",
            &[],
            Box::new(move |d| format!("No windows defined in {}", conf_path(d))),
        ),
        (
            "window a.b codex master\n",
            &[],
            Box::new(|_| {
                "Invalid role 'a.b' on line 1: role names must start with a letter or digit and contain only letters, digits and '-' (at most 64 characters)".into()
            }),
        ),
    ];
    for (conf, prompts, want) in cases {
        let (d, r) = conf_error(conf, prompts, true);
        assert_eq!(r.code, 1, "{conf:?}: {}", r.stderr);
        assert_eq!(r.stderr, format!("{RED_ERROR}{}\n", want(&d)), "{conf:?}");
        assert_eq!(r.stdout, "");
        assert!(!d.path(".git").exists(), "nothing is created on error");
    }
    let (d, r) = conf_error("window a codex master\n", &["a"], false);
    assert_eq!(
        r.stderr,
        format!(
            "{RED_ERROR}Constitution prompt not found at {}\n",
            d.path("swarmforge/constitution.prompt").display()
        )
    );
    // Our extensions: a person, or any command; prompts only for models.
    let (d, r) = conf_error(
        "window boss human master\nwindow bot sh bot extra args\n",
        &[],
        true,
    );
    r.ok();
    assert!(d
        .read(".swarmforge/roles.tsv")
        .starts_with("boss\tmaster\t"));
    assert!(d
        .read(".swarmforge/roles.tsv")
        .contains("\tBot\tsh\ttask\n"));
}

#[test]
fn swarm_yaml_errors_name_line_and_column() {
    let d = Project::empty();
    d.write("swarm.yaml", "launch:\n  stagger: 1s\n  stager: 2s\n");
    let r = d.swarm(&["init"]);
    assert_eq!(r.code, 1);
    let file = d.path("swarm.yaml").display().to_string();
    assert!(
        r.stderr.contains(&file) && r.stderr.contains("stager"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("line 3") || r.stderr.contains(":3:"),
        "{}",
        r.stderr
    );

    d.write(
        "swarm.yaml",
        "roles:\n  - name: coder\n    agent: human\n  - name: tester\n    agent: human\n  -   name: coder\n      agent: human\n",
    );
    let r = d.swarm(&["init"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.starts_with(&format!("{file}:6:")), "{}", r.stderr);
    r.stderr_has("duplicate role 'coder' (first defined on line 2)");
    d.write(
        "swarm.yaml",
        "roles:\n  - name: a\n    agent: human\n    worktree: ../x\n",
    );
    let r = d.swarm(&["init"]);
    assert!(r.stderr.starts_with(&format!("{file}:4:")), "{}", r.stderr);
    r.stderr_has("invalid worktree '../x'");

    let e = Project::empty();
    let r = e.swarm(&["init"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.starts_with("No roles defined for "),
        "{}",
        r.stderr
    );
}

fn pipeline_done(root: &Path) -> bool {
    let (c, k) = (".worktrees/coder", ".worktrees/cleaner");
    let sent_back = count(root, k, "sent");
    count(root, c, "sent") == 3
        && count(root, k, "inbox/completed") == 3
        && sent_back >= 1
        && count(root, c, "inbox/completed") == sent_back
        && [c, k].iter().all(|w| {
            ["outbox", "inbox/new", "inbox/in_process", "failed"]
                .iter()
                .all(|s| count(root, w, s) == 0)
        })
}

fn check_pipeline_outcome(root: &Path) {
    assert!(pipeline_done(root), "not every handoff completed");
    let log = git(root, &["log", "--format=%s", "swarmforge-coder"]);
    for t in ["greet", "add", "shout"] {
        assert!(log.contains(&format!("coder: add {t}")), "{log}");
    }
    assert!(log.contains("cleaner: tidy"), "{log}");
    let wt = root.join(".worktrees/coder");
    for f in ["greet", "add", "shout"] {
        let text = fs::read_to_string(wt.join(format!("lib/{f}.sh"))).unwrap();
        assert!(
            !text.contains('\t') && text.lines().all(|l| !l.ends_with(' ')),
            "lib/{f}.sh is not tidy:\n{text}"
        );
    }
    let out = git(&wt, &["status", "--porcelain"]);
    assert_eq!(out, "", "coder worktree is clean");
    let sum = clean_command(Path::new("sh"), &wt)
        .args(["-c", ". lib/add.sh; . lib/shout.sh; add 2 3; shout ok"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&sum.stdout), "5\nOK\n");
}

#[test]
fn pipeline_example_runs_headless_to_completion() {
    let d = Project::empty();
    d.copy_example("pipeline");
    let mut guard = SwarmGuard::new(&d.root);
    let up = d
        .cmd("swarm")
        .args(["up", "--no-tmux", "--until-idle", "--timeout", "90s"]);
    guard.guard(up.arg(&d.root).start());
    let out = guard.finish(Duration::from_secs(120), "swarm up --until-idle returns");
    out.ok();
    out.stdout_has("swarm: coder: run 1 started");
    check_pipeline_outcome(&d.root);
    // Torn down: no daemon, no agent, no supervisor lock holder.
    let log = d.read(".swarmforge/daemon/handoffd.log");
    assert!(log.trim_end().ends_with(" stopped"), "{log}");
    assert!(!d.path(".swarmforge/daemon/swarm-up.pid").exists());
    assert!(!d.path(".swarmforge/tmux-socket").exists());
    assert_eq!(
        fs::read_dir(d.path(".swarmforge/agents"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".pid"))
            .count(),
        0
    );
}

#[test]
fn detached_headless_swarm_stops_with_down() {
    let d = Project::empty();
    d.copy_example("pipeline");
    let _guard = SwarmGuard::new(&d.root);
    d.swarm(&["up", "--no-tmux", "--detach"]).ok();
    let sup: u32 = d
        .read(".swarmforge/daemon/swarm-up.pid")
        .trim()
        .parse()
        .unwrap();
    assert!(alive(sup));
    wait_until(Duration::from_secs(60), "pipeline done", || {
        pipeline_done(&d.root)
    });
    let daemon = daemon_pid(&d.root).expect("daemon pid");
    let handoffs = handoffs_in(&d.path(".worktrees"));
    let r = d.swarm(&["down"]);
    r.ok();
    r.stdout_has(&format!("stopped swarm up (pid {sup})"));
    wait_until(
        Duration::from_secs(10),
        "supervisor and daemon gone",
        || !alive(sup) && !alive(daemon),
    );
    assert_eq!(
        handoffs_in(&d.path(".worktrees")),
        handoffs,
        "handoffs kept"
    );
    check_pipeline_outcome(&d.root);
    // A second down finds nothing to stop and says so.
    let r = d.swarm(&["down"]);
    r.ok();
    r.stdout_has("handoffd was not running");
}

#[test]
fn up_with_tmux_then_down_leaves_no_process() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    d.copy_example("pipeline");
    let mut guard = SwarmGuard::new(&d.root);
    let r = d.swarm(&["up", "--detach"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let sock = PathBuf::from(d.read(".swarmforge/tmux-socket").trim());
    guard.socket = Some(sock.clone());
    assert!(
        sock.starts_with("/tmp")
            && sock
                .file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with(".sock"),
        "{}",
        sock.display()
    );
    let tmux = |args: &[&str]| -> Run {
        clean_command(Path::new("tmux"), &d.root)
            .arg("-S")
            .arg(&sock)
            .args(args)
            .output()
            .unwrap()
            .into()
    };
    let sessions = tmux(&["list-sessions", "-F", "#{session_name}"]);
    sessions.ok();
    let mut names: Vec<&str> = sessions.stdout.lines().collect();
    names.sort();
    assert_eq!(names, ["swarmforge-cleaner", "swarmforge-coder"]);
    // The wake-ups (daemon -> tmux -> the pane's loop) carry the pipeline through.
    wait_until(Duration::from_secs(60), "pipeline done over tmux", || {
        pipeline_done(&d.root)
    });
    check_pipeline_outcome(&d.root);
    // The pipeline finished only through tmux wake-ups. (A single send-keys
    // may still fail on a loaded machine; the re-wake sweep covers it, so a
    // `notify_failed` line is no failure of this test.)
    let server: u32 = tmux(&["display-message", "-p", "-t", "=swarmforge-coder", "#{pid}"])
        .stdout
        .trim()
        .parse()
        .unwrap();
    let panes: Vec<u32> = tmux(&["list-panes", "-a", "-F", "#{pane_pid}"])
        .stdout
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(panes.len(), 2);
    let daemon = daemon_pid(&d.root).expect("daemon pid");
    let handoffs = handoffs_in(&d.path(".worktrees"));

    let r = d.swarm(&["down"]);
    r.ok();
    r.stdout_has("killed tmux sessions: swarmforge-coder swarmforge-cleaner");
    r.stdout_has(&format!("stopped handoffd (pid {daemon})"));
    wait_until(
        Duration::from_secs(10),
        "server, panes and daemon gone",
        || !alive(server) && !alive(daemon) && panes.iter().all(|p| !alive(*p)),
    );
    assert!(tmux(&["list-sessions"]).code != 0);
    assert!(!sock.exists(), "socket removed");
    assert!(!d.path(".swarmforge/tmux-socket").exists());
    assert_eq!(
        handoffs_in(&d.path(".worktrees")),
        handoffs,
        "handoffs kept"
    );
}

#[test]
fn foreground_up_stops_everything_on_sigint() {
    let d = Project::empty();
    d.copy_example("pipeline");
    let mut guard = SwarmGuard::new(&d.root);
    let pid = guard.guard(d.cmd("swarm").args(["up", "--no-tmux"]).start());
    wait_until(Duration::from_secs(60), "pipeline done", || {
        pipeline_done(&d.root)
    });
    let daemon = daemon_pid(&d.root).expect("daemon pid");
    signal(pid, libc::SIGINT);
    let out = guard.finish(Duration::from_secs(20), "swarm up exits");
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    out.stdout_has("swarm: stopping the swarm");
    assert!(!alive(daemon));
    assert!(d
        .read(".swarmforge/daemon/handoffd.log")
        .trim_end()
        .ends_with(" stopped"));
    // Nothing is left for `down` to stop.
    let r = d.swarm(&["down"]);
    r.ok();
}

#[test]
fn second_up_is_refused_while_one_supervises() {
    let d = Project::empty();
    d.copy_example("pipeline");
    let _guard = SwarmGuard::new(&d.root);
    d.swarm(&["up", "--no-tmux", "--detach"]).ok();
    let r = d.swarm(&["up", "--no-tmux"]);
    assert_eq!(r.code, 1);
    r.stderr_has("already runs this swarm");
    r.stderr_has("swarm down");
}

#[test]
fn down_without_a_swarm_is_an_error() {
    let d = Project::empty();
    let r = d.swarm(&["down"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .starts_with(&format!("No swarm at {}", d.root.display())),
        "{}",
        r.stderr
    );
}

#[test]
fn demo_runs_the_pipeline_and_shows_where_the_files_are() {
    let d = Project::empty();
    let dir = d.path("demo");
    let mut guard = SwarmGuard::new(&dir);
    let demo = d.cmd("swarm").args(["demo", "--timeout", "90s", "--dir"]);
    guard.guard(demo.arg(&dir).start());
    let start = Instant::now();
    let out = guard.finish(Duration::from_secs(120), "swarm demo returns");
    let took = start.elapsed();
    out.ok();
    for h in [
        "== transcript ==",
        "== audit ==",
        "== files ==",
        "the demo finished after",
    ] {
        assert!(out.stdout.contains(h), "missing {h}:\n{}", out.stdout);
    }
    out.stdout_has(&format!("project:     {}", dir.display()));
    check_pipeline_outcome(&dir);
    eprintln!("swarm demo took {took:?}");
    // The scripts of the copy are the example's.
    let script = dir.join("agents/coder.sh");
    assert!(script.is_file());
    assert_eq!(
        fs::metadata(&script).unwrap().permissions().mode() & 0o777,
        0o644
    );
}
