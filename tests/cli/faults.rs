//! Fault injection (issue 8): a full disk, failing fsyncs and renames, folders
//! that refuse writes, a role removed from roles.tsv while messages wait, and
//! clocks that step. For each: nothing is lost, the problem is logged with its
//! cause, and delivery resumes when the fault clears.
//!
//! The faults come from the real kernel where we can: a tiny tmpfs mounted for
//! the test (ENOSPC), `chattr +i` (EPERM even for root), and `strace --inject`
//! attached to the running daemon (EIO). A test whose tool or privilege is
//! missing prints a `NOTE:` and returns, or fails when `CI=true` (see
//! `support::require_tool`); `.ci/run` installs what they need.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::support::{
    bin, clean_command, header_count, require_capability, require_tool, wait_until, Project, Role,
    Run, DEADLINE,
};

// ---------------------------------------------------------------- fixtures

// The names this file used to export, kept for test files written against
// them (hardening.rs); new tests use `support` directly.
pub(crate) use compat::*;

#[allow(dead_code, unused_imports)]
mod compat {
    use std::path::Path;
    use std::process::Stdio;

    use crate::support::{bin, clean_command, Daemon, Project, Role, Run};
    pub(crate) use crate::support::{
        copies_of, drop_in_outbox, entries, hq, log_count as count, log_lines as lines, note,
        note_at, post, wait_delivered, Note, CREATED,
    };

    /// Writes roles.tsv for `(name, worktree path, agent)` rows (all task mode)
    /// in the `swarm init` layout.
    pub(crate) fn set_roles(p: &Project, rows: &[(&str, &Path, &str)]) {
        let roles: Vec<Role> = rows
            .iter()
            .map(|(name, path, agent)| Role::new(name).at(path).agent(agent))
            .collect();
        p.set_roles(&roles);
    }

    pub(crate) fn write_config(p: &Project, yaml: &str) {
        p.config(yaml);
    }

    /// Starts `handoffd <root>` and waits until it is ready.
    pub(crate) fn start(p: &Project) -> Daemon {
        p.spawn_daemon(&[])
    }

    /// Asserts the daemon is still running.
    pub(crate) fn alive(d: &mut Daemon) {
        d.alive();
    }

    /// Runs a helper as `role` with `dir` as its working directory.
    pub(crate) fn run_at(dir: &Path, role: &str, program: &str, args: &[&str]) -> Run {
        clean_command(&bin(program), dir)
            .env("SWARMFORGE_ROLE", role)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("binary runs")
            .into()
    }
}

/// Waits for the one `deferred <path> <reason>` line of a file; returns the reason.
fn wait_deferred(p: &Project, outbox_path: &Path) -> String {
    let prefix = format!("deferred {} ", outbox_path.display());
    let mut reason = String::new();
    wait_until(DEADLINE, &prefix, || {
        let found: Vec<String> = lines(&p.log(), "deferred")
            .into_iter()
            .filter(|l| l.starts_with(&prefix))
            .collect();
        if let Some(l) = found.first() {
            reason = l[prefix.len()..].to_string();
        }
        !found.is_empty()
    });
    reason
}

fn deferred_lines(p: &Project, outbox_path: &Path) -> usize {
    let prefix = format!("deferred {} ", outbox_path.display());
    lines(&p.log(), "deferred")
        .iter()
        .filter(|l| l.starts_with(&prefix))
        .count()
}

/// A tmpfs of the given size mounted on a fresh temp dir; unmounted on drop.
pub(crate) struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` after a NOTE (a failure in CI) when it cannot be mounted.
    pub(crate) fn mount(size: &str) -> Option<Tmpfs> {
        if !require_tool("mount", "apt-get install -y mount") {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .map_err(|e| e.to_string())
            .and_then(|o| match o.status.success() {
                true => Ok(Tmpfs { dir }),
                false => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            });
        require_capability(
            "mount a tmpfs for the full-disk test",
            "run as root (CAP_SYS_ADMIN)",
            out,
        )
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Fills the filesystem with one file until a write fails with ENOSPC.
    fn fill(&self) -> PathBuf {
        let p = self.path().join("filler");
        let mut f = fs::File::create(&p).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        loop {
            match f.write_all(&chunk) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling the tmpfs: {e}"),
            }
        }
        p
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// `chattr +i` on a path (refuses writes even to root); undone on drop.
struct Immutable(PathBuf);

impl Immutable {
    /// `None` after a NOTE (a failure in CI) when chattr is missing or this
    /// filesystem (or our privilege) does not allow it.
    fn set(path: &Path) -> Option<Immutable> {
        if !require_tool("chattr", "apt-get install -y e2fsprogs") {
            return None;
        }
        let out = Command::new("chattr")
            .arg("+i")
            .arg(path)
            .output()
            .map_err(|e| e.to_string())
            .and_then(|o| match o.status.success() {
                true => Ok(Immutable(path.to_path_buf())),
                false => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            });
        require_capability(
            &format!("chattr +i {}", path.display()),
            "run as root (CAP_LINUX_IMMUTABLE) on ext4, xfs or btrfs",
            out,
        )
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

/// strace attached to a running process, injecting faults until dropped
/// (detaching clears the fault; the process goes on).
pub(crate) struct Strace {
    child: Option<Child>,
}

fn traced(pid: u32) -> bool {
    let Ok(rd) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let tasks: Vec<_> = rd.flatten().collect();
    !tasks.is_empty()
        && tasks.iter().all(|t| {
            fs::read_to_string(t.path().join("status")).is_ok_and(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("TracerPid:"))
                    .is_some_and(|v| v.trim() != "0")
            })
        })
}

impl Strace {
    /// `None` after a NOTE (a failure in CI) when strace is missing or
    /// cannot attach (ptrace not permitted here).
    pub(crate) fn attach(pid: u32, args: &[&str]) -> Option<Strace> {
        if !require_tool("strace", "apt-get install -y strace") {
            return None;
        }
        let child = Command::new("strace")
            .args(["-f", "-qq", "-o", "/dev/null", "-p", &pid.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("strace starts");
        let mut s = Strace { child: Some(child) };
        let end = Instant::now() + DEADLINE;
        while !traced(pid) {
            if let Some(Ok(Some(_))) = s.child.as_mut().map(|c| c.try_wait()) {
                let out = s.child.take().unwrap().wait_with_output().unwrap();
                let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
                return require_capability(
                    "attach strace to the daemon",
                    "run as root, or allow ptrace (kernel.yama.ptrace_scope=0, CAP_SYS_PTRACE)",
                    Err(why),
                );
            }
            assert!(Instant::now() < end, "strace did not attach");
            std::thread::sleep(Duration::from_millis(5));
        }
        Some(s)
    }

    pub(crate) fn detach(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SIGINT makes strace detach cleanly, leaving the tracee running.
            // SAFETY: kill(2) on our own child, not reaped yet.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGINT) };
            let _ = c.wait();
        }
    }
}

impl Drop for Strace {
    fn drop(&mut self) {
        self.detach();
    }
}

const QUICK: &str = "daemon: {rescan: 100ms}\nwake: {method: none}\n";

/// A project: `coder` in the main worktree, `reviewer` in `rev` (both agents
/// with no wake-up), rescans every 100 ms so retries are quick.
fn two_roles() -> (Project, PathBuf) {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("reviewer").at("rev"))
        .config(QUICK)
        .build();
    let rev = p.root.join("rev");
    (p, rev)
}

// ------------------------------------------------------------------ tests

/// A full disk (a 1 MiB tmpfs holding the recipient's and a sender's
/// worktrees): the daemon defers the copy with `No space left on device`,
/// keeps delivering elsewhere, and delivers once the space is back; the
/// sender's `swarm-handoff` fails with the cause and keeps the draft; ready
/// and done fail with the cause, lose nothing, and finish on the next call.
#[test]
fn a_full_disk_defers_and_everything_resumes_when_space_returns() {
    let Some(disk) = Tmpfs::mount("1m") else {
        return;
    };
    let rev = disk.path().join("rev");
    let qa = disk.path().join("qa");
    // Every queue folder made up front: a full disk must not stop mkdir.
    let p = Project::builder()
        .role("coder")
        .role(Role::new("reviewer").at(&rev))
        .role(Role::new("QA").at(&qa))
        .queue_dirs()
        .config(QUICK)
        .build();
    let mut d = p.spawn_daemon(&[]);

    let filler = disk.fill();
    let n1 = note("coder", 1, "reviewer", "disk full");
    let n1_path = post(&p.root, &n1);
    let reason = wait_deferred(&p, &n1_path);
    assert!(
        reason.starts_with(&format!(
            "{}: ",
            hq(&rev, "inbox/new").join(&n1.name).display()
        )) && reason.contains("No space left on device"),
        "{reason}"
    );
    // Other traffic is not held up, and the stuck file is not logged again.
    for i in 2..=3 {
        let n = note("coder", i, "coder", "elsewhere");
        let path = post(&p.root, &n);
        wait_delivered(&p, &path);
    }
    assert!(n1_path.exists(), "the original left the outbox");
    assert!(entries(&hq(&rev, "inbox/new")).is_empty());
    assert_eq!(deferred_lines(&p, &n1_path), 1);

    // A sender on the full disk: exit 1 with the cause, draft kept, nothing queued.
    let draft = p.root.join("qa-draft.txt");
    fs::write(
        &draft,
        "type: note\nto: coder\npriority: 50\nmessage: from qa\n",
    )
    .unwrap();
    let r = p.cmd("swarm-handoff").role("QA").arg(&draft).run();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("No space left on device"), "{r:?}");
    assert!(draft.exists(), "the draft was deleted");
    assert!(entries(&hq(&qa, "outbox"))
        .iter()
        .all(|n| !n.ends_with(".handoff")));

    fs::remove_file(&filler).unwrap();
    wait_delivered(&p, &n1_path);
    assert_eq!(copies_of(&rev, &n1.name).len(), 1);
    assert!(entries(&hq(&rev, "inbox/tmp")).is_empty(), "temp file left");
    let r = p.cmd("swarm-handoff").role("QA").arg(&draft).run();
    r.ok();
    let queued = PathBuf::from(r.stdout.trim().strip_prefix("HANDOFF QUEUED: ").unwrap());
    wait_delivered(&p, &queued);
    // The draft is in the coder's worktree, not QA's: never QA's to delete.
    assert!(draft.exists());
    assert!(
        r.stderr
            .contains("is outside your worktree and was left in place"),
        "{r:?}"
    );
    assert_eq!(deferred_lines(&p, &n1_path), 1);
    assert_eq!(count(&p.log(), "failed"), 0);

    // ready-next on a full disk: the item may already be in process, but it
    // is never lost, and the next call finishes the dequeued_at stamp.
    let filler = disk.fill();
    let r = p.cmd("ready-next").role("reviewer").run();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("No space left on device"), "{r:?}");
    assert_eq!(copies_of(&rev, &n1.name).len(), 1);
    fs::remove_file(&filler).unwrap();
    let r = p.cmd("ready-next").role("reviewer").run();
    r.ok();
    let ip = hq(&rev, "inbox/in_process").join(&n1.name);
    assert!(
        r.stdout.starts_with(&format!("TASK: {}\n", ip.display())),
        "{r:?}"
    );
    assert_eq!(header_count(&ip, "dequeued_at"), 1);

    // done-current on a full disk: exit 1 with the cause, the item stays in
    // process unchanged; the next call completes it.
    let filler = disk.fill();
    let before = fs::read(&ip).unwrap();
    let r = p.cmd("done-current").role("reviewer").run();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("No space left on device"), "{r:?}");
    assert_eq!(fs::read(&ip).unwrap(), before);
    fs::remove_file(&filler).unwrap();
    let done = reviewer_completes(&p, &rev, &n1.name);
    assert_eq!(header_count(&done, "completed_at"), 1);
    assert_eq!(copies_of(&rev, &n1.name), vec![done]);
    d.alive();
}

/// EIO injected by strace into the running daemon's fsync(2), then into its
/// renameat2(2): each time the file is deferred with `Input/output error`, no
/// partial copy or temp file is left, and once strace detaches the message is
/// delivered exactly once.
#[test]
fn injected_eio_on_fsync_and_rename_defers_and_delivery_resumes() {
    let (p, rev) = two_roles();
    let mut d = p.spawn_daemon(&[]);
    for (i, syscall) in [(1, "fsync"), (2, "renameat2")] {
        let Some(mut st) = Strace::attach(
            d.pid(),
            &[
                "-e",
                &format!("trace={syscall}"),
                "-e",
                &format!("inject={syscall}:error=EIO"),
            ],
        ) else {
            return;
        };
        let n = note("coder", i, "reviewer", syscall);
        let path = post(&p.root, &n);
        let reason = wait_deferred(&p, &path);
        assert!(reason.contains("Input/output error"), "{syscall}: {reason}");
        assert!(path.exists(), "{syscall}: the original left the outbox");
        assert!(copies_of(&rev, &n.name).is_empty(), "{syscall}: a copy");
        st.detach();
        wait_delivered(&p, &path);
        // Retries run every 100 ms, so a temp file may exist for an instant
        // during the fault; none may be left behind.
        assert!(entries(&hq(&rev, "inbox/tmp")).is_empty(), "temp file left");
        assert_eq!(copies_of(&rev, &n.name).len(), 1, "{syscall}");
        assert!(hq(&p.root, "sent").join(&n.name).exists());
        assert_eq!(deferred_lines(&p, &path), 1, "{syscall}");
    }
    assert_eq!(count(&p.log(), "failed"), 0);
    d.alive();
}

/// The fsync of `sent/` fails after the original was already renamed into
/// it: the message is delivered (every copy is out, the original left the
/// outbox), so the journal must say `delivered`, exactly once, and no copy is
/// written twice.
#[test]
fn a_failed_fsync_after_the_move_to_sent_still_logs_delivered() {
    let (p, rev) = two_roles();
    let sent = hq(&p.root, "sent");
    fs::create_dir_all(&sent).unwrap();
    let mut d = p.spawn_daemon(&[]);
    let Some(mut st) = Strace::attach(
        d.pid(),
        &[
            "-P",
            sent.to_str().unwrap(),
            "-e",
            "trace=fsync",
            "-e",
            "inject=fsync:error=EIO",
        ],
    ) else {
        return;
    };
    let n = note("coder", 1, "reviewer", "late fsync");
    let path = post(&p.root, &n);
    wait_delivered(&p, &path);
    st.detach();
    assert!(sent.join(&n.name).exists());
    assert_eq!(copies_of(&rev, &n.name).len(), 1);
    // A later pass finds nothing left to do.
    let n2 = note("coder", 2, "reviewer", "next");
    let path2 = post(&p.root, &n2);
    wait_delivered(&p, &path2);
    let log = p.log();
    let want = format!("delivered {}", path.display());
    assert_eq!(
        lines(&log, "delivered")
            .iter()
            .filter(|l| **l == want)
            .count(),
        1,
        "{log}"
    );
    assert_eq!(copies_of(&rev, &n.name).len(), 1);
    d.alive();
}

/// The helpers under injected EIO: a failing rename leaves the item in
/// `new/`, a failing fsync of the stamp leaves the in-process item as it was;
/// both exit 1 naming the cause, and the next call succeeds.
#[test]
fn helpers_report_injected_eio_and_lose_nothing() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let (p, rev) = two_roles();
    let n = note("coder", 1, "reviewer", "helpers");
    post(&p.root, &n);
    p.deliver_once().ok();
    let under_strace = |inject: &str, program: &str| -> Run {
        let inject = format!("inject={inject}:error=EIO");
        p.cmd(program)
            .role("reviewer")
            .under(&["strace", "-f", "-qq", "-o", "/dev/null", "-e", &inject])
            .run()
    };
    let r = under_strace("renameat2", "ready-next");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("Input/output error"), "{r:?}");
    assert_eq!(entries(&hq(&rev, "inbox/new")), vec![n.name.clone()]);
    assert!(entries(&hq(&rev, "inbox/in_process")).is_empty());
    p.cmd("ready-next").role("reviewer").run().ok();
    let ip = hq(&rev, "inbox/in_process").join(&n.name);
    let before = fs::read(&ip).unwrap();

    let r = under_strace("fsync", "done-current");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("Input/output error"), "{r:?}");
    assert_eq!(fs::read(&ip).unwrap(), before, "in-process item changed");
    assert!(entries(&hq(&rev, "inbox/tmp")).is_empty(), "temp file left");
    let done = reviewer_completes(&p, &rev, &n.name);
    assert_eq!(copies_of(&rev, &n.name), vec![done]);
}

/// Runs `done-current` as reviewer (worktree `rev`): it must complete `name`
/// and find nothing next. The completed path.
#[track_caller]
fn reviewer_completes(p: &Project, rev: &Path, name: &str) -> PathBuf {
    let r = p.cmd("done-current").role("reviewer").run();
    r.ok();
    let done = hq(rev, "inbox/completed").join(name);
    assert_eq!(
        r.stdout,
        format!("COMPLETED: {}\nNO_TASK\n", done.display())
    );
    done
}

/// Posts `n` in the main worktree's outbox and waits for its `deferred`
/// line: `dir` refused the write (`Operation not permitted`). The outbox path.
#[track_caller]
fn post_refused_by(p: &Project, n: &Note, dir: &Path) -> PathBuf {
    let path = post(&p.root, n);
    let reason = wait_deferred(p, &path);
    assert!(
        reason.contains(&dir.display().to_string()) && reason.contains("Operation not permitted"),
        "{reason}"
    );
    path
}

/// Folders that refuse writes even to root (`chattr +i`): the recipient's
/// `inbox/new`, then the sender's `sent/` after the copy is out (and the
/// recipient has meanwhile accepted it), then the recipient's `completed/`
/// for done-current. Each is deferred or refused with `Operation not
/// permitted`; once writable again everything completes exactly once.
#[test]
fn unwritable_folders_defer_and_delivery_resumes() {
    let (p, rev) = two_roles();
    let new = hq(&rev, "inbox/new");
    let sent = hq(&p.root, "sent");
    let completed = hq(&rev, "inbox/completed");
    for dir in [&new, &sent, &completed, &hq(&rev, "inbox/in_process")] {
        fs::create_dir_all(dir).unwrap();
    }
    let mut d = p.spawn_daemon(&[]);

    let Some(guard) = Immutable::set(&new) else {
        return;
    };
    let n1 = note("coder", 1, "reviewer", "one");
    let n1_path = post_refused_by(&p, &n1, &new);
    drop(guard);
    wait_delivered(&p, &n1_path);
    assert_eq!(copies_of(&rev, &n1.name).len(), 1);

    // sent/ refuses the original: the copy is out, the original waits.
    let Some(guard) = Immutable::set(&sent) else {
        return;
    };
    let n2 = note("coder", 2, "reviewer", "two");
    let n2_path = post_refused_by(&p, &n2, &sent);
    assert_eq!(copies_of(&rev, &n2.name).len(), 1);
    // The recipient works through n1 and accepts n2 meanwhile.
    p.cmd("ready-next").role("reviewer").run().ok();
    p.cmd("done-current").role("reviewer").run().ok();
    assert!(hq(&rev, "inbox/in_process").join(&n2.name).exists());
    drop(guard);
    wait_delivered(&p, &n2_path);
    assert_eq!(
        copies_of(&rev, &n2.name),
        vec![hq(&rev, "inbox/in_process").join(&n2.name)],
        "a second copy was written"
    );

    // done-current cannot move into completed/.
    let Some(guard) = Immutable::set(&completed) else {
        return;
    };
    let r = p.cmd("done-current").role("reviewer").run();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("Operation not permitted"), "{r:?}");
    assert!(hq(&rev, "inbox/in_process").join(&n2.name).exists());
    drop(guard);
    let done = reviewer_completes(&p, &rev, &n2.name);
    assert_eq!(header_count(&done, "completed_at"), 1);
    assert_eq!(count(&p.log(), "failed"), 0);
    d.alive();
}

/// A role removed from roles.tsv while messages wait: a message to it (and a
/// message from a removed role sharing a worktree with another role) waits
/// in the outbox with one `deferred` line naming the cause, its own outbox
/// waits unread, its inbox is left alone; when the role is back everything
/// is delivered, nothing to `failed/`.
#[test]
fn a_role_removed_from_roles_tsv_defers_until_it_returns() {
    let (p, rev) = two_roles();
    let all = |p: &Project| {
        p.set_roles(&[
            Role::new("coder"),
            Role::new("boss"),
            Role::new("reviewer").at(&rev),
        ])
    };
    all(&p);
    let mut d = p.spawn_daemon(&[]);
    // Something already waits in the reviewer's inbox.
    let n0 = note("coder", 1, "reviewer", "waiting");
    let n0_path = post(&p.root, &n0);
    wait_delivered(&p, &n0_path);

    p.set_roles(&[Role::new("coder")]);
    let to_removed = note("coder", 2, "reviewer", "to a removed role");
    let to_path = post(&p.root, &to_removed);
    let reason = wait_deferred(&p, &to_path);
    assert_eq!(reason, "recipient reviewer is no longer in roles.tsv");
    let from_removed = note("boss", 3, "coder", "from a removed role");
    let from_path = post(&p.root, &from_removed);
    let reason = wait_deferred(&p, &from_path);
    assert_eq!(reason, "sender boss is no longer in roles.tsv");
    let own = note("reviewer", 4, "coder", "from its own outbox");
    let own_path = post(&rev, &own);
    // More passes: all three stay put, each logged once.
    for i in 5..=6 {
        let n = note("coder", i, "coder", "traffic");
        let path = post(&p.root, &n);
        wait_delivered(&p, &path);
    }
    assert!(to_path.exists() && from_path.exists() && own_path.exists());
    assert_eq!(deferred_lines(&p, &to_path), 1);
    assert_eq!(deferred_lines(&p, &from_path), 1);
    assert_eq!(deferred_lines(&p, &own_path), 0);
    assert_eq!(
        entries(&hq(&rev, "inbox/new")),
        vec![n0.name.clone()],
        "the removed role's inbox was touched"
    );

    all(&p);
    for path in [&to_path, &from_path, &own_path] {
        wait_delivered(&p, path);
    }
    assert_eq!(copies_of(&rev, &to_removed.name).len(), 1);
    assert_eq!(copies_of(&p.root, &from_removed.name).len(), 1);
    assert_eq!(copies_of(&p.root, &own.name).len(), 1);
    assert!(entries(&hq(&p.root, "failed")).is_empty());
    assert_eq!(count(&p.log(), "failed"), 0);
    d.alive();
}

/// Clock steps, simulated with files dated in the far past and the far future
/// (id second and `created_at`): all are delivered, `enqueued_at` is stamped
/// whatever the order, and the queue hands them out in file-name order
/// (priority, then id time, then sequence) without losing one.
#[test]
fn messages_dated_in_the_past_or_future_are_all_delivered_in_name_order() {
    let (p, _rev) = two_roles();
    let future = note_at(
        "coder",
        "20990101T000000Z",
        1,
        "reviewer",
        "future",
        "2099-01-01T00:00:00.000000Z",
    );
    let past = note_at(
        "coder",
        "20010101T000000Z",
        2,
        "reviewer",
        "past",
        "2001-01-01T00:00:00.000000Z",
    );
    let now = note("coder", 3, "reviewer", "now");
    for n in [&future, &past, &now] {
        post(&p.root, n);
    }
    let r = p.deliver_once();
    assert_eq!(r.stdout, "handoffd: delivered 3, failed 0, deferred 0\n");
    p.cmd("ready-next").role("reviewer").run().ok();
    let mut order = Vec::new();
    loop {
        let r = p.cmd("done-current").role("reviewer").run();
        r.ok();
        let done = PathBuf::from(
            r.stdout
                .lines()
                .find_map(|l| l.strip_prefix("COMPLETED: "))
                .unwrap(),
        );
        for h in ["enqueued_at", "dequeued_at", "completed_at"] {
            assert_eq!(header_count(&done, h), 1, "{h} in {}", done.display());
        }
        order.push(done.file_name().unwrap().to_string_lossy().into_owned());
        if r.stdout.ends_with("NO_TASK\n") {
            break;
        }
        assert!(order.len() < 3, "{r:?}");
    }
    assert_eq!(order, vec![past.name, now.name, future.name]);
}

/// Clock steps backwards, for real (libfaketime; CI installs it, and under
/// `CI=true` a missing faketime fails the test instead of skipping it).
///
/// A sender whose clock jumps to 2099, back to now, and to 2099 again: ids
/// and names stay unique because the per-worktree sequence never steps back,
/// sequences follow send order, and all three are delivered. The recipient's
/// helpers then run with their clock a day behind the daemon's: items are
/// handed out in file-name order, each exactly once, and every copy's
/// `enqueued_at <= dequeued_at <= completed_at` (a stamp is never earlier
/// than the item's earlier stamps).
#[test]
fn a_clock_stepping_back_keeps_ids_unique_and_stamps_in_order() {
    if !require_tool("faketime", "apt-get install -y faketime") {
        return;
    }
    let (p, rev) = two_roles();
    let faked = |at: Option<&str>, program: &str, cwd: &Path| -> Command {
        match at {
            Some(t) => {
                let mut c = clean_command(Path::new("faketime"), cwd);
                c.arg(t).arg(bin(program));
                c
            }
            None => clean_command(&bin(program), cwd),
        }
    };
    let send = |at: Option<&str>| -> PathBuf {
        let draft = p.root.join("draft.txt");
        fs::write(
            &draft,
            "type: note\nto: reviewer\npriority: 50\nmessage: m\n",
        )
        .unwrap();
        let r: Run = faked(at, "swarm-handoff", &p.root)
            .env("SWARMFORGE_ROLE", "coder")
            .arg(&draft)
            .output()
            .unwrap()
            .into();
        r.ok();
        PathBuf::from(r.stdout.trim().strip_prefix("HANDOFF QUEUED: ").unwrap())
    };
    let a = send(Some("2099-01-01 00:00:00"));
    let b = send(None);
    let c = send(Some("2099-01-01 00:00:00"));
    let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    let header = |p: &Path, h: &str| -> String {
        let text = fs::read_to_string(p).unwrap();
        let head = text.split("\n\n").next().unwrap().to_string();
        head.lines()
            .find_map(|l| l.strip_prefix(&format!("{h}: ")).map(str::to_string))
            .unwrap_or_else(|| panic!("no {h} in {}", p.display()))
    };
    assert!(name(&a).contains("_20990101T0000"), "{}", name(&a));
    assert!(name(&b).contains(&format!("_{}", chrono::Utc::now().format("%Y"))));
    assert!(name(&a).contains("_000001_") && name(&b).contains("_000002_"));
    assert!(name(&c).contains("_000003_"));
    let ids: std::collections::HashSet<String> =
        [&a, &b, &c].iter().map(|f| header(f, "id")).collect();
    assert_eq!(ids.len(), 3, "duplicate ids: {ids:?}");
    assert!(header(&a, "created_at").starts_with("2099-01-01T00:00:0"));
    let r = p.deliver_once();
    assert_eq!(r.stdout, "handoffd: delivered 3, failed 0, deferred 0\n");
    for f in [&a, &b, &c] {
        assert_eq!(copies_of(&rev, &name(f)).len(), 1);
    }

    // The recipient's clock is a day behind the daemon's.
    let behind = Some("1 day ago");
    let helper = |program: &str| -> Run {
        faked(behind, program, &rev)
            .env("SWARMFORGE_ROLE", "reviewer")
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into()
    };
    helper("ready-next").ok();
    let mut order = Vec::new();
    let mut done_ids = Vec::new();
    loop {
        let r = helper("done-current");
        r.ok();
        let done = PathBuf::from(
            r.stdout
                .lines()
                .find_map(|l| l.strip_prefix("COMPLETED: "))
                .unwrap(),
        );
        let t = |h: &str| chrono::DateTime::parse_from_rfc3339(&header(&done, h)).unwrap();
        assert!(
            t("enqueued_at") <= t("dequeued_at") && t("dequeued_at") <= t("completed_at"),
            "stamps out of order in {}:\n{}",
            done.display(),
            fs::read_to_string(&done).unwrap()
        );
        order.push(name(&done));
        done_ids.push(header(&done, "id"));
        if r.stdout.ends_with("NO_TASK\n") {
            break;
        }
        assert!(order.len() < 3, "{r:?}");
    }
    let mut by_name = vec![name(&a), name(&b), name(&c)];
    by_name.sort();
    assert_eq!(order, by_name, "handed out in file-name order");
    done_ids.sort();
    done_ids.dedup();
    assert_eq!(done_ids.len(), 3, "each item handed out once");
}

/// The re-wake sweep measures how long an item has waited from its mtime; an
/// item whose mtime is in the future (the clock stepped back after delivery)
/// must still be re-woken once it has waited `ack_within` by the daemon's own
/// monotonic clock, not only when the wall clock catches up.

#[test]
fn an_item_dated_in_the_future_is_still_rewoken() {
    let (p, rev) = two_roles();
    p.record_wakes("ack_within: 300ms, sweep: 100ms");
    let n = note("coder", 1, "reviewer", "from the future");
    post(&p.root, &n);
    p.deliver_once().ok();
    let copy = hq(&rev, "inbox/new").join(&n.name);
    let f = fs::File::options().write(true).open(&copy).unwrap();
    f.set_modified(SystemTime::now() + Duration::from_secs(86_400))
        .unwrap();
    drop(f);
    let mut d = p.spawn_daemon(&[]);
    wait_until(
        DEADLINE,
        "a renotified line for the future-dated item",
        || lines(&p.log(), "renotified").contains(&format!("renotified {}", copy.display())),
    );
    d.alive();
}
