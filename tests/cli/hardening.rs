//! Hardening, second round (issue 12): two daemons on one set of outboxes, a
//! deferred file spinning the daemon, symlinked recipient folders, drafts
//! behind symlinked directories, unreadable inbox files, reserved role names,
//! cost with many roles, stale temp files, one OLDEST definition, bidi
//! controls, hard-linked artifacts. docs/hostile-layouts.md lists the
//! behaviour these tests pin down.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::faults::{
    alive, copies_of, entries, hq, lines, note, post, run_at, set_roles, start, wait_delivered,
    write_config, Strace,
};
use crate::support::{bin, chown_tree, clean_command, wait_until, Project, Run, DEADLINE};

/// `coder` in the main worktree, `reviewer` in `rev`; no wake-ups; the
/// default rescan interval, so an idle daemon has no reason to work.
fn project() -> (Project, PathBuf) {
    let p = Project::new(&[]);
    let rev = p.root.join("rev");
    set_roles(
        &p,
        &[("coder", &p.root, "codex"), ("reviewer", &rev, "codex")],
    );
    write_config(&p, "wake: {method: none}\n");
    (p, rev)
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the `(comm)`, which may hold spaces: state is field 3,
    // utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 {
        n as u64
    } else {
        100
    }
}

/// The share of one core `pid` used over `window` (0.0 ..= 1.0 per core).
///
/// The one fixed sleep in these tests: CPU use is a rate, so it needs an
/// observation window; nothing waits for a state change here.
fn cpu_share(pid: u32, window: Duration) -> f64 {
    let before = cpu_ticks(pid);
    let t = Instant::now();
    std::thread::sleep(window);
    let used = cpu_ticks(pid) - before;
    used as f64 / clock_ticks_per_second() as f64 / t.elapsed().as_secs_f64()
}

/// A busy core is 1.0; a daemon waiting for events is ~0 (with 2 000 roles,
/// ~0.04 in a debug build, start-up passes included); the code before issue
/// 12 used 1.0 with one deferred file and 0.27–0.42 idle with 2 000 roles.
/// The bound is far from both, so a loaded machine cannot fail it falsely
/// (load only lowers the share a spinning process gets).
const IDLE_BOUND: f64 = 0.15;

/// Starts `handoffd <arg>` and reports how it ended: `Ok(run)` when it
/// exited by itself, `Err(..)` when it got as far as logging `started` in
/// `log` (it was then killed).
fn second_daemon(p: &Project, arg: &Path, log: &Path) -> Result<Run, String> {
    let started = |l: &Path| lines(&fs::read_to_string(l).unwrap_or_default(), "started").len();
    let before = started(log);
    let mut child = clean_command(&bin("handoffd"), &p.root)
        .arg(arg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + DEADLINE;
    loop {
        if child.try_wait().unwrap().is_some() {
            return Ok(child.wait_with_output().unwrap().into());
        }
        if started(log) > before {
            let _ = child.kill();
            let _ = child.wait();
            return Err("a second handoffd started on the same outboxes".into());
        }
        assert!(
            Instant::now() < end,
            "the second handoffd neither ran nor exited"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ------------------------------------------------------- 1: two daemons

/// Deleting `handoffd.pid` while a daemon runs must not let a second one
/// start: the lock lives on the outboxes' state folders, not on the pid file.
#[test]
fn deleting_the_pid_file_does_not_let_a_second_daemon_start() {
    let (p, _rev) = project();
    let mut d = start(&p);
    fs::remove_file(p.path(".swarmforge/daemon/handoffd.pid")).unwrap();
    let r = second_daemon(&p, &p.root, &p.path(".swarmforge/daemon/handoffd.log")).unwrap();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("another handoffd") && r.stderr.contains(&format!("{}", d.pid())),
        "{r:?}"
    );
    // The first one keeps delivering.
    let n = note("coder", 1, "reviewer", "still one daemon");
    let path = post(&p.root, &n);
    wait_delivered(&p, &path);
    alive(&mut d);
}

/// A daemon started on a role worktree that holds a copy of roles.tsv
/// reaches the same outboxes by another path: refused.
#[test]
fn a_daemon_on_a_role_worktree_with_a_roles_copy_is_refused() {
    let (p, rev) = project();
    let mut d = start(&p);
    fs::copy(
        p.path(".swarmforge/roles.tsv"),
        rev.join(".swarmforge/roles.tsv"),
    )
    .unwrap();
    let r = second_daemon(&p, &rev, &rev.join(".swarmforge/daemon/handoffd.log")).unwrap();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(!r.stderr.is_empty(), "{r:?}");
    let n = note("coder", 1, "reviewer", "one daemon");
    let path = post(&p.root, &n);
    wait_delivered(&p, &path);
    assert_eq!(copies_of(&rev, &n.name).len(), 1);
    alive(&mut d);
}

/// An outbox file someone else moves away while the daemon delivers it (its
/// renames slowed down by strace to open the window) is skipped quietly: no
/// `deferred … No such file or directory` line, and delivery goes on.
#[test]
fn a_file_moved_away_mid_delivery_is_not_logged_as_deferred() {
    let (p, rev) = project();
    let mut d = start(&p);
    let Some(mut st) = Strace::attach(
        d.pid(),
        &[
            "-e",
            "trace=renameat2",
            "-e",
            "inject=renameat2:delay_enter=1500000",
        ],
    ) else {
        assert!(!ci(), "CI=true: strace cannot attach to handoffd");
        return;
    };
    let n = note("coder", 1, "reviewer", "taken away");
    let path = post(&p.root, &n);
    let copy = hq(&rev, "inbox/new").join(&n.name);
    wait_until(DEADLINE, "the copy", || copy.exists());
    // The daemon's rename of the original into sent/ is still held back.
    fs::rename(&path, p.path("moved-away.handoff")).unwrap();
    let n2 = note("coder", 2, "reviewer", "next");
    let path2 = post(&p.root, &n2);
    wait_delivered(&p, &path2);
    st.detach();
    let log = p.log();
    assert!(
        !lines(&log, "deferred")
            .iter()
            .any(|l| l.contains(&path.display().to_string())),
        "{log}"
    );
    assert_eq!(lines(&log, "failed").len(), 0, "{log}");
    alive(&mut d);
}

// ------------------------------------------------ 2: a deferred file spins

/// A file deferred for good (the recipient's `inbox` is a plain file) must
/// leave the daemon idle: its own reads of the outbox file never wake it, and
/// its retries back off. Measured by CPU time, not by log lines.
#[test]
fn a_deferred_file_does_not_make_the_daemon_spin() {
    let (p, rev) = project();
    let d = start(&p);
    let inbox = hq(&rev, "inbox");
    let _ = fs::remove_dir_all(&inbox);
    fs::write(&inbox, "not a folder\n").unwrap();
    let n = note("coder", 1, "reviewer", "stuck");
    let path = post(&p.root, &n);
    let prefix = format!("deferred {} ", path.display());
    wait_until(DEADLINE, "the deferred line", || {
        lines(&p.log(), "deferred")
            .iter()
            .any(|l| l.starts_with(&prefix))
    });
    let share = cpu_share(d.pid(), Duration::from_secs(3));
    assert!(
        share < IDLE_BOUND,
        "handoffd used {:.0}% of a core with one deferred file",
        share * 100.0
    );
    assert!(path.exists());
}

// ----------------------------------------- 3: symlinked recipient folders

/// A recipient `inbox/new` that is a symlink (out of the project), or an
/// `inbox` that is a symlink (into another role's inbox), gets no copy: the
/// file is deferred with the reason, nothing lands at the target, and
/// `swarm status` says why.
#[test]
fn symlinked_recipient_folders_are_refused() {
    let p = Project::new(&[]);
    let rev = p.root.join("rev");
    let qa = p.root.join("qa");
    set_roles(
        &p,
        &[
            ("coder", &p.root, "codex"),
            ("reviewer", &rev, "codex"),
            ("qa", &qa, "codex"),
        ],
    );
    write_config(&p, "wake: {method: none}\n");
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(hq(&rev, "inbox")).unwrap();
    std::os::unix::fs::symlink(outside.path(), hq(&rev, "inbox/new")).unwrap();
    // qa's inbox is the coder's.
    fs::create_dir_all(hq(&p.root, "inbox/new")).unwrap();
    std::os::unix::fs::symlink(hq(&p.root, "inbox"), hq(&qa, "inbox")).unwrap();

    let to_rev = note("coder", 1, "reviewer", "to a symlinked new");
    let to_qa = note("coder", 2, "qa", "to a symlinked inbox");
    let rev_path = post(&p.root, &to_rev);
    let qa_path = post(&p.root, &to_qa);
    let r = p.deliver_once();
    assert_eq!(
        r.stdout, "handoffd: delivered 0, failed 0, deferred 2\n",
        "{r:?}"
    );
    assert!(rev_path.exists() && qa_path.exists());
    assert_eq!(entries(outside.path()), Vec::<String>::new());
    assert_eq!(entries(&hq(&p.root, "inbox/new")), Vec::<String>::new());
    let log = p.log();
    let deferred = lines(&log, "deferred");
    assert!(
        deferred.iter().any(
            |l| l.starts_with(&format!("deferred {} ", rev_path.display()))
                && l.contains("symlink")
        ),
        "{log}"
    );
    assert!(
        deferred.iter().any(
            |l| l.starts_with(&format!("deferred {} ", qa_path.display())) && l.contains("symlink")
        ),
        "{log}"
    );
    let s = p.run(None, "swarm", &["status", p.root.to_str().unwrap()]);
    s.ok();
    assert!(
        s.stdout.lines().any(|l| l.starts_with("reviewer: ")
            && l.contains(&hq(&rev, "inbox/new").display().to_string())
            && l.contains("symlink")),
        "{}",
        s.stdout
    );
    assert!(
        s.stdout
            .lines()
            .any(|l| l.starts_with("qa: ") && l.contains("symlink")),
        "{}",
        s.stdout
    );
}

// ------------------------------------- 4: drafts behind symlinked folders

/// `swarm-handoff dirlink/secret.txt`, where `dirlink` points outside the
/// project: refused before reading, and the file outside is left alone.
#[test]
fn a_draft_behind_a_symlinked_directory_is_refused_and_kept() {
    let (p, _rev) = project();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    let text = "type: note\nto: reviewer\npriority: 50\nmessage: secret\n";
    fs::write(&secret, text).unwrap();
    std::os::unix::fs::symlink(outside.path(), p.path("dirlink")).unwrap();
    let r = p.run(Some("coder"), "swarm-handoff", &["dirlink/secret.txt"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("outside the project"), "{r:?}");
    assert_eq!(fs::read_to_string(&secret).unwrap(), text);
    assert!(entries(&hq(&p.root, "outbox"))
        .iter()
        .all(|n| !n.ends_with(".handoff")));

    // A draft behind a symlinked folder inside the project is read, queued
    // and deleted as usual.
    fs::create_dir_all(p.path("drafts")).unwrap();
    std::os::unix::fs::symlink(p.path("drafts"), p.path("inlink")).unwrap();
    fs::write(p.path("drafts/d.txt"), text).unwrap();
    let r = p.run(Some("coder"), "swarm-handoff", &["inlink/d.txt"]);
    r.ok();
    assert!(!p.path("drafts/d.txt").exists());
}

// ------------------------------------------ 5: an unreadable inbox file

/// Runs `program` as uid/gid `id` via setpriv (util-linux), or None when that
/// cannot be done here (not root, no setpriv).
fn run_as(id: u32, dir: &Path, role: &str, program: &str) -> Option<Run> {
    let probe = Command::new("setpriv")
        .args([
            &format!("--reuid={id}"),
            &format!("--regid={id}"),
            "--clear-groups",
            "true",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        return None;
    }
    let r = clean_command(Path::new("setpriv"), dir)
        .args([
            &format!("--reuid={id}"),
            &format!("--regid={id}"),
            "--clear-groups",
        ])
        .arg(bin(program))
        .env("SWARMFORGE_ROLE", role)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Some(r.into())
}

/// A file of another user with mode 600 in `inbox/new`: moved aside with the
/// reason, and the valid item behind it is handed out. The reader runs as a
/// user who owns the project but not that file (root reads everything).
#[test]
fn an_unreadable_inbox_file_is_moved_aside_and_the_queue_moves_on() {
    const READER: u32 = 47_101;
    const OTHER: u32 = 47_102;
    let (p, rev) = project();
    let good = note("coder", 1, "reviewer", "good");
    post(&p.root, &good);
    p.deliver_once().ok();
    let new = hq(&rev, "inbox/new");
    let bad = new.join("00_20260615T140531Z_000009_from_coder_to_reviewer.handoff");
    fs::write(&bad, note("coder", 9, "reviewer", "private").text).unwrap();
    chown_tree(&p.root, (READER, READER));
    std::os::unix::fs::chown(&bad, Some(OTHER), Some(OTHER)).unwrap();
    fs::set_permissions(&bad, fs::Permissions::from_mode(0o600)).unwrap();
    let Some(r) = run_as(READER, &rev, "reviewer", "ready-next") else {
        assert!(
            !ci(),
            "CI=true: cannot run a helper as another user (setpriv)"
        );
        eprintln!("NOTE: cannot run as another user here; skipping");
        return;
    };
    let rejected = hq(&rev, "inbox/rejected").join(bad.file_name().unwrap());
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(
        r.stderr,
        format!(
            "MALFORMED_HANDOFF: unreadable: Permission denied (os error 13)\n- {}\n",
            rejected.display()
        )
    );
    assert!(!bad.exists() && rejected.exists());
    let r = run_as(READER, &rev, "reviewer", "ready-next").unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with(&format!(
            "TASK: {}\n",
            hq(&rev, "inbox/in_process").join(&good.name).display()
        )),
        "{r:?}"
    );
}

// ------------------------------------------------ 6: reserved role names

/// An empty temp folder (not a project) and its canonical path.
fn temp_root() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    (d, root)
}

/// `swarm init` in `root`, stdin closed.
fn swarm_init(root: &Path) -> Run {
    clean_command(&bin("swarm"), root)
        .arg("init")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// `handoffd` and `all` are refused as role names wherever roles come from:
/// roles.tsv (the line is skipped, with the reason), swarm.yaml and
/// swarmforge.conf (`swarm init` exits 1 naming the rule).
#[test]
fn reserved_role_names_are_refused() {
    let p = Project::new(&[]);
    let tsv = |name: &str| {
        format!(
            "{name}\tmaster\t{}\tswarmforge-{name}\t{name}\tcodex\ttask\n",
            p.root.display()
        )
    };
    p.write_roles_raw(&format!(
        "{}{}{}",
        tsv("coder"),
        tsv("handoffd"),
        tsv("all")
    ));
    p.write(
        "draft.txt",
        "type: note\nto: coder\npriority: 50\nmessage: hi\n",
    );
    let r = p.run(Some("handoffd"), "swarm-handoff", &["draft.txt"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.starts_with("Unknown sender role: handoffd\n")
            && r.stderr
                .contains("line 2: role name 'handoffd' is reserved"),
        "{r:?}"
    );
    let s = p.run(None, "swarm", &["status", p.root.to_str().unwrap()]);
    assert!(
        s.stdout
            .contains("roles.tsv: line 3: role name 'all' is reserved"),
        "{s:?}"
    );

    for name in ["all", "handoffd"] {
        let (_d, root) = temp_root();
        fs::write(
            root.join("swarm.yaml"),
            format!("roles:\n  - name: {name}\n    agent: human\n"),
        )
        .unwrap();
        let r = swarm_init(&root);
        assert_eq!(r.code, 1, "{name}: {r:?}");
        assert!(r.stderr.contains(&format!("'{name}' is reserved")), "{r:?}");
        assert!(!root.join(".swarmforge").exists());

        let (_d, root) = temp_root();
        fs::create_dir_all(root.join("swarmforge/roles")).unwrap();
        fs::write(
            root.join("swarmforge/swarmforge.conf"),
            format!("window {name} codex master\n"),
        )
        .unwrap();
        fs::write(root.join("swarmforge/constitution.prompt"), "x\n").unwrap();
        fs::write(root.join(format!("swarmforge/roles/{name}.prompt")), "x\n").unwrap();
        let r = swarm_init(&root);
        assert_eq!(r.code, 1, "{name}: {r:?}");
        assert!(
            r.stderr
                .contains(&format!("Invalid role '{name}' on line 1"))
                && r.stderr.contains("reserved"),
            "{r:?}"
        );
        assert!(!root.join(".swarmforge").exists());
    }
}

// --------------------------------------------------- 8: many roles

/// An idle daemon serving 2 000 roles, each in its own worktree folder, stays
/// near zero CPU (nothing it does per rescan may grow faster than the table,
/// and quiet outboxes are not listed again), and still delivers at once from
/// an outbox it had stopped listing.
#[test]
fn an_idle_daemon_with_many_roles_stays_idle() {
    const ROLES: usize = 2000;
    let p = Project::new(&[]);
    let mut tsv = format!(
        "coder\tmaster\t{}\tswarmforge-coder\tCoder\tcodex\ttask\n",
        p.root.display()
    );
    for i in 0..ROLES {
        fs::create_dir_all(p.path(&format!("wt/r{i}"))).unwrap();
        tsv.push_str(&format!(
            "r{i}\tr{i}\t{}/wt/r{i}\tswarmforge-r{i}\tR{i}\tcodex\ttask\n",
            p.root.display()
        ));
    }
    p.write_roles_raw(&tsv);
    write_config(&p, "wake: {method: none}\n");
    let mut d = start(&p);
    // The window includes the start-up passes, which list every outbox.
    let share = cpu_share(d.pid(), Duration::from_secs(6));
    assert!(
        share < IDLE_BOUND,
        "an idle handoffd with {ROLES} roles used {:.0}% of a core",
        share * 100.0
    );
    let n = note("coder", 1, "r1999", "still delivering");
    let path = post(&p.root, &n);
    wait_delivered(&p, &path);
    // From an outbox that has been quiet long enough to be skipped by the
    // rescan: its file event brings it back at once.
    let n = note("r1500", 2, "coder", "from a quiet outbox");
    let path = post(&p.path("wt/r1500"), &n);
    wait_delivered(&p, &path);
    alive(&mut d);
}

// --------------------------------------------------------- 9: smaller

/// Temp files a kill left in `inbox/tmp`, `outbox/tmp` and the daemon's
/// folder (a log's base, mid-rotation) are removed at start once older than
/// the bound; fresh ones (a writer may be mid-publish)
/// and anything that is not a plain temp file stay.
#[test]
fn stale_temp_files_are_cleaned_at_start() {
    let (p, rev) = project();
    let old = SystemTime::now() - Duration::from_secs(3 * 86_400);
    let mut stale = Vec::new();
    let mut kept = Vec::new();
    for dir in [
        hq(&p.root, "outbox/tmp"),
        hq(&rev, "inbox/tmp"),
        p.root.join(".swarmforge/daemon"),
    ] {
        fs::create_dir_all(&dir).unwrap();
        let s = dir.join(".x.handoff.123.0.456.tmp");
        fs::write(&s, "half").unwrap();
        fs::File::options()
            .write(true)
            .open(&s)
            .unwrap()
            .set_modified(old)
            .unwrap();
        stale.push(s);
        let f = dir.join(".y.handoff.123.1.456.tmp");
        fs::write(&f, "in flight").unwrap();
        kept.push(f);
        let sub = dir.join("keep-me");
        fs::create_dir_all(&sub).unwrap();
        kept.push(sub);
    }
    let mut d = start(&p);
    for s in &stale {
        wait_until(DEADLINE, &format!("{} removed", s.display()), || {
            !s.exists()
        });
    }
    for k in &kept {
        assert!(k.exists(), "{} was removed", k.display());
    }
    alive(&mut d);
}

/// `swarm status` OLDEST counts from `enqueued_at`, like `swarm audit`, not
/// from the file's mtime (which a copy, a backup or `touch` changes).
#[test]
fn status_oldest_counts_from_enqueued_at() {
    let (p, rev) = project();
    let n = note("coder", 1, "reviewer", "waiting");
    post(&p.root, &n);
    p.deliver_once().ok();
    let copy = hq(&rev, "inbox/new").join(&n.name);
    fs::File::options()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(5 * 3600))
        .unwrap();
    let s = p.run(
        None,
        "swarm",
        &["status", p.root.to_str().unwrap(), "--json"],
    );
    s.ok();
    let v: serde_json::Value = serde_json::from_str(&s.stdout).unwrap();
    let age = v["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "reviewer")
        .unwrap()["oldest_new_age_s"]
        .as_u64()
        .unwrap();
    assert!(age < 3600, "OLDEST is {age}s: it used the mtime");
}

/// Bidi overrides, isolates and line/paragraph separators in header values
/// are escaped in forum.log and in what the helpers print.
#[test]
fn bidi_controls_are_escaped_in_logs_and_printouts() {
    let (p, rev) = project();
    let msg = "a\u{202e}b\u{2066}c\u{2069}d\u{2028}e\u{2029}f";
    let r = p.send(
        "coder",
        &format!("type: note\nto: reviewer\npriority: 50\nmessage: {msg}\n"),
    );
    r.ok();
    p.deliver_once().ok();
    let bad = |s: &str| {
        s.chars()
            .any(|c| matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}'))
    };
    let forum = fs::read_to_string(p.path(".swarmforge/forum.log")).unwrap();
    assert!(!bad(&forum), "{forum:?}");
    assert!(forum.contains("a\\u{202e}b"), "{forum:?}");
    let r = run_at(&rev, "reviewer", "ready-next", &[]);
    r.ok();
    let head = r.stdout.split("\n\n").next().unwrap().to_string();
    assert!(!bad(&head), "{head:?}");
}

/// An artifact that is a hard link (link count > 1) is refused: its other
/// name may be outside the worktree, and its content would change with it.
#[test]
fn a_hard_linked_artifact_is_refused() {
    let (p, _rev) = project();
    let outside = tempfile::tempdir_in(p.root.parent().unwrap()).unwrap();
    let secret = outside.path().join("secret.txt");
    fs::write(&secret, "secret\n").unwrap();
    if fs::hard_link(&secret, p.path("linked.txt")).is_err() {
        assert!(
            !ci(),
            "CI=true: cannot make a hard link across the temp dirs"
        );
        eprintln!("NOTE: cannot hard-link here; skipping");
        return;
    }
    assert_eq!(fs::metadata(p.path("linked.txt")).unwrap().nlink(), 2);
    let r = p.send(
        "coder",
        "type: post\nto: reviewer\npriority: 10\nsubject: files\nartifact: linked.txt\n",
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(
            "- Header 'artifact' path 'linked.txt' has 2 hard links; copy the file instead of linking it."
        ),
        "{r:?}"
    );
}
