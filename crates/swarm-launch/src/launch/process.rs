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
        .map_err(|e| Error::process(format!("cannot start {}: {e}", program.display())))
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
pub(crate) fn stop_groups(pgids: &[i32], grace: Duration, children: &mut [&mut Child]) {
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
            return Err(Error::process(format!(
                "{} exited at start ({st}); its output ({}):\n{}\n  hint: fix the cause above, then run `swarm up` again",
                s.name,
                s.output.display(),
                tail(s.output, 15)
            )));
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::process(format!(
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

/// Largest `/proc/<pid>/environ` read.
const MAX_ENVIRON: u64 = 1024 * 1024;

/// `/proc/<pid>/stat` field 4, the parent.
fn parent_of(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// This process and its ancestors: never stopped (a `swarm down` typed in
/// a role's pane must finish).
fn self_and_ancestors() -> Vec<i32> {
    let mut out = vec![std::process::id() as i32];
    while let Some(p) = out.last().and_then(|p| parent_of(*p)).filter(|p| *p > 1) {
        if out.contains(&p) || out.len() > 256 {
            break;
        }
        out.push(p);
    }
    out
}

/// Every process (of this user: others' environments cannot be read) that
/// carries an agent's environment for `root`: `SWARMFORGE_PROJECT=<root>`
/// with `SWARMFORGE_ROLE` one of `roles`. Whatever an agent started keeps
/// that environment, also when it left the agent's process group (a CLI's
/// background server that called setsid), so this finds what group kills
/// miss.
pub(crate) fn agent_processes(root: &Path, roles: &[String]) -> Vec<i32> {
    use std::io::Read;
    let mine = self_and_ancestors();
    let want_root = format!("SWARMFORGE_PROJECT={}", root.display());
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if pid <= 1 || mine.contains(&pid) {
            continue;
        }
        let mut env = Vec::new();
        let read = std::fs::File::open(e.path().join("environ"))
            .and_then(|f| f.take(MAX_ENVIRON).read_to_end(&mut env));
        if read.is_err() {
            continue;
        }
        let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
        let has_root = vars.contains(&want_root.as_bytes());
        let has_role = vars.iter().any(|v| {
            v.strip_prefix(b"SWARMFORGE_ROLE=")
                .is_some_and(|r| roles.iter().any(|x| x.as_bytes() == r))
        });
        if has_root && has_role && start_time(pid).is_some() {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

/// SIGTERM to each process, wait up to `grace` for all of them, SIGKILL
/// the rest (each checked by its start time, so a reused pid is spared).
pub(crate) fn stop_pids(pids: &[i32], grace: Duration) {
    let born: Vec<(i32, Option<u64>)> = pids.iter().map(|p| (*p, start_time(*p))).collect();
    let same = |(p, t): &(i32, Option<u64>)| t.is_some() && start_time(*p) == *t;
    let alive = |(p, t): &(i32, Option<u64>)| {
        // A zombie has a start time but no more life in it.
        same(&(*p, *t))
            && std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    s.rfind(')')
                        .and_then(|i| s[i + 1..].split_whitespace().next().map(str::to_string))
                })
                .is_some_and(|st| st != "Z" && st != "X")
    };
    for b in born.iter().filter(|b| same(b)) {
        kill(b.0, Signal::TERM);
    }
    let end = Instant::now() + grace;
    while born.iter().any(alive) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    for b in born.iter().filter(|b| alive(b)) {
        kill(b.0, Signal::KILL);
    }
}
