//! Processes the launcher starts and stops: detached groups, the daemon,
//! and who holds a lock.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::daemon::control;
use rustix::process::{kill_process, kill_process_group, test_kill_process_group, Pid, Signal};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::launch::shims;
use crate::protocol::layout::Project;

/// Runs in the forked child before exec: a session of its own (no terminal
/// signals from the person's Ctrl-C) and, for agents, SIGTERM when the
/// supervisor dies so nothing is orphaned.
pub(super) fn detach(cmd: &mut Command, die_with_parent: bool) {
    // SAFETY: pre_exec runs between fork and exec; setsid and prctl are
    // async-signal-safe system calls that touch no Rust state.
    unsafe {
        cmd.pre_exec(move || {
            let _ = rustix::process::setsid();
            if die_with_parent {
                let _ = rustix::process::set_parent_process_death_signal(Some(Signal::TERM));
            }
            Ok(())
        });
    }
}

/// Spawns `cmd` (a `sh -c` that redirects its own output) in a session of
/// its own with no standard streams; `program` names it in the error.
pub(super) fn spawn_alone(cmd: &mut Command, program: &Path) -> Result<Child> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    detach(cmd, false);
    cmd.spawn()
        .map_err(|e| Error::env(format!("cannot start {}: {e}", program.display())))
}

/// Stops the process holding the flock on `lock`: TERM, then KILL when it
/// still holds it after `grace`. Never this process. Returns its pid.
pub(super) fn stop_lock_holder(lock: &Path, grace: Duration) -> Option<u32> {
    let pid = lock_holder(lock)?;
    if pid == std::process::id() {
        return None;
    }
    kill(pid as i32, Signal::TERM);
    let end = Instant::now() + grace;
    while lock_holder(lock).is_some() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    if lock_holder(lock).is_some() {
        kill(pid as i32, Signal::KILL);
    }
    Some(pid)
}

/// kill(2): a negative `pid` names a process group, as in the shell.
pub(super) fn kill(pid: i32, sig: Signal) -> bool {
    match Pid::from_raw(pid.abs()) {
        Some(p) if pid < 0 => kill_process_group(p, sig).is_ok(),
        Some(p) => kill_process(p, sig).is_ok(),
        None => false,
    }
}

/// Whether any process of group `pgid` is alive.
pub(super) fn group_alive(pgid: i32) -> bool {
    pgid > 1 && Pid::from_raw(pgid).is_some_and(|p| test_kill_process_group(p).is_ok())
}

/// SIGTERM to each group, wait up to `grace` for all of them, SIGKILL the rest.
pub(super) fn stop_groups(pgids: &[i32], grace: Duration, children: &mut [&mut Child]) {
    for &g in pgids.iter().filter(|g| **g > 1) {
        kill(-g, Signal::TERM);
    }
    let end = Instant::now() + grace;
    loop {
        for c in children.iter_mut() {
            let _ = c.try_wait();
        }
        if !pgids.iter().any(|g| group_alive(*g)) || Instant::now() >= end {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for &g in pgids.iter().filter(|g| group_alive(**g)) {
        kill(-g, Signal::KILL);
    }
    for c in children.iter_mut() {
        let _ = c.wait();
    }
}

/// Field 22 of `/proc/<pid>/stat`: the start time, to tell a pid from its reuse.
pub(super) fn start_time(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The pid that holds the flock on `path` and wrote itself into it.
pub fn lock_holder(path: &Path) -> Option<u32> {
    let end = Instant::now() + Duration::from_millis(500);
    loop {
        let holders = fsx::flock_holders(path);
        if holders.is_empty() {
            return None;
        }
        let pid = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        if let Some(pid) = pid.filter(|p| holders.contains(p)) {
            return Some(pid);
        }
        // The holder writes its pid right after locking.
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub(super) fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// The `handoffd` next to this executable, else the one on PATH.
pub(super) fn handoffd_program() -> PathBuf {
    match shims::own_bin_dir() {
        Ok(d) if d.join("handoffd").is_file() => d.join("handoffd"),
        _ => PathBuf::from("handoffd"),
    }
}

/// Starts `handoffd <root>` in a session of its own, output appended to
/// `handoffd.out`, and waits until it holds its pid lock. A daemon already
/// running is restarted so it picks up the current wake method.
pub fn start_daemon(project: &Project, say: &mut dyn FnMut(&str)) -> Result<(u32, Child)> {
    if let Some(pid) = lock_holder(&project.pid_file()) {
        say(&format!("restarting handoffd (pid {pid})"));
        control::stop(project, control::GRACE)?;
    }
    let dir = project.daemon_dir();
    fsx::ensure_dirs(&[&dir]).at(&dir)?;
    fsx::remove_file(&project.stop_file()).at(project.stop_file())?;
    let out = project.daemon_output();
    let prog = handoffd_program();
    spawn_holding(&Spawn {
        name: "handoffd",
        program: &prog,
        args: &[project.root.as_os_str()],
        root: &project.root,
        output: &out,
        lock: &project.pid_file(),
    })
}

/// A detached program whose output is appended to a file and which takes a
/// lock file once it is ready (the daemon, the bridge).
pub(crate) struct Spawn<'a> {
    /// As named in errors.
    pub name: &'a str,
    pub program: &'a Path,
    pub args: &'a [&'a std::ffi::OsStr],
    pub root: &'a Path,
    pub output: &'a Path,
    pub lock: &'a Path,
}

/// Starts `s.program args…` in a session of its own and waits (15 s at
/// most) until that very process holds `s.lock`; an exit or a timeout is an
/// error showing the end of its output.
pub(crate) fn spawn_holding(s: &Spawn) -> Result<(u32, Child)> {
    let mut cmd = Command::new("sh");
    // The shell opens the output file (append) and execs the program, so the
    // child's pid is the program's own.
    cmd.arg("-c")
        .arg("out=$1; prog=$2; shift 2; exec \"$prog\" \"$@\" >>\"$out\" 2>&1 </dev/null")
        .arg("sh")
        .arg(s.output)
        .arg(s.program)
        .args(s.args)
        .current_dir(s.root);
    let mut child = spawn_alone(&mut cmd, s.program)?;
    let pid = child.id();
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        if fsx::flock_holders(s.lock).contains(&pid) {
            return Ok((pid, child));
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(Error::env(format!(
                "{} exited at start ({st}); its output ({}):\n{}\n  hint: fix the cause above, then run `swarm up` again",
                s.name,
                s.output.display(),
                tail(s.output, 15)
            )));
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::env(format!(
                "{} did not take its lock {} within 15 s; its output ({}):\n{}",
                s.name,
                s.lock.display(),
                s.output.display(),
                tail(s.output, 15)
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
