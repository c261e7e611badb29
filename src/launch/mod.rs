//! `swarm up` and `swarm down`: start and stop a whole swarm.
//!
//! `up` = `init`, the SwarmForge-named wrappers in `.swarmforge/bin/`,
//! `handoffd <root>` (detached, its output in `.swarmforge/daemon/handoffd.out`),
//! then one agent per role, `launch.stagger` apart:
//!
//! * with tmux: one session `swarmforge-<role>` per role on the private socket
//!   `/tmp/swarmforge-<user>/<crc32 of root>.sock` (recorded in
//!   `.swarmforge/tmux-socket`, which makes the daemon wake roles through tmux).
//!   The pane runs the agent in a loop that waits for a line between runs, so
//!   the daemon's wake text (text, C-m, C-j) re-runs an agent that has exited:
//!   a model agent gets restarted, a script gets another pass over its queue.
//! * headless (`--no-tmux`): this process is the supervisor. It runs every
//!   agent once, then polls the role inboxes and runs an agent again whenever
//!   work waits for it and it is not running. A run that leaves the queue
//!   exactly as it found it counts as a stall; stalls back off and, after
//!   five, the role is parked until its inbox changes. Scripted agents drain
//!   their queue with `ready-next`/`done-current` until `NO_TASK` and exit.
//!
//! A foreground `up` tears everything down on Ctrl-C, SIGTERM or SIGHUP;
//! `down` does the same from anywhere. Neither touches a handoff file.

pub mod demo;
pub mod init;
pub mod shims;
pub mod swarmforge_conf;

use std::ffi::{CStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::daemon::control;
use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::launch::init::{AgentSpec, Plan, PlannedRole};
use crate::launch::swarmforge_conf::error_prefix;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;

/// Time an agent or a tmux pane gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);
/// How often the supervisor looks at the inboxes.
const TICK: Duration = Duration::from_millis(100);
/// No-progress runs in a row before a role is parked.
pub const MAX_STALLS: u32 = 5;

// ---------------------------------------------------------------- paths

/// `.swarmforge/bin`: the SwarmForge-named wrappers, first on agents' PATH.
pub fn shim_dir(p: &Project) -> PathBuf {
    p.swarmforge().join("bin")
}
/// `.swarmforge/agents`: headless agents' output (`<role>.log`) and pids.
pub fn agents_dir(p: &Project) -> PathBuf {
    p.swarmforge().join("agents")
}
pub fn agent_log(p: &Project, role: &str) -> PathBuf {
    agents_dir(p).join(format!("{role}.log"))
}
fn agent_pid_file(p: &Project, role: &str) -> PathBuf {
    agents_dir(p).join(format!("{role}.pid"))
}
/// `.swarmforge/run/<role>.sh`: what a tmux pane runs.
fn run_file(p: &Project, role: &str) -> PathBuf {
    p.swarmforge().join("run").join(format!("{role}.sh"))
}
fn prompt_file(p: &Project, role: &str) -> PathBuf {
    p.swarmforge().join("prompts").join(format!("{role}.md"))
}
/// Held (flock) by a foreground `swarm up` for its whole life.
pub fn supervisor_pid_file(p: &Project) -> PathBuf {
    p.daemon_dir().join("swarm-up.pid")
}
/// Output of a detached headless `swarm up`.
pub fn supervisor_output(p: &Project) -> PathBuf {
    p.daemon_dir().join("swarm-up.out")
}
fn tmux_env_file(p: &Project) -> PathBuf {
    p.swarmforge().join("tmux-env")
}
fn sessions_file(p: &Project) -> PathBuf {
    p.swarmforge().join("sessions.tsv")
}

// ---------------------------------------------------------------- tmux socket

/// CRC-32 (ISO-HDLC, as zlib and Java's `CRC32`).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// `$UID` when exported, else the account name (SwarmForge's rule), else the
/// numeric uid. Never reads `HOME`.
pub fn user_name() -> String {
    if let Ok(u) = std::env::var("UID") {
        if !u.is_empty() {
            return u;
        }
    }
    // SAFETY: getpwuid_r writes into the buffers we own; the name is copied
    // out before they go away.
    unsafe {
        let uid = libc::getuid();
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut res);
        if rc == 0 && !res.is_null() && !pwd.pw_name.is_null() {
            return CStr::from_ptr(pwd.pw_name).to_string_lossy().into_owned();
        }
        uid.to_string()
    }
}

/// `/tmp/swarmforge-<user>/<crc32 of the root path>.sock` (§12.2): short
/// enough for a socket path, outside any sandboxed worktree (§14).
pub fn socket_path(root: &Path) -> PathBuf {
    let crc = crc32(root.to_string_lossy().as_bytes());
    PathBuf::from("/tmp")
        .join(format!("swarmforge-{}", user_name()))
        .join(format!("{crc}.sock"))
}

// ---------------------------------------------------------------- commands

/// POSIX single-quoting.
pub fn sq(s: &str) -> String {
    shims::quote(s)
}

fn sqp(p: &Path) -> String {
    sq(&p.to_string_lossy())
}

fn wants_auto_approve(extra: &str) -> bool {
    extra.contains("--always-approve")
        || extra.contains("--yolo")
        || extra
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .any(|w| w == ["--permission-mode", "bypassPermissions"])
}

/// SwarmForge's instruction file for a model agent (§12.3 step 14).
pub fn prompt_text(role: &str) -> String {
    format!(
        "Read swarmforge/constitution.prompt, then read every file it refers to recursively, and obey all of those instructions.\n\
         Read swarmforge/roles/{role}.prompt, then read every file it refers to recursively, and follow all of those instructions.\n"
    )
}

/// The shell command line that runs a role's agent (None for a person).
/// Model agents get SwarmForge's start commands; anything else runs as written.
pub fn agent_command(project: &Project, r: &PlannedRole) -> Option<String> {
    match &r.agent {
        AgentSpec::Human => None,
        AgentSpec::Command(c) => Some(c.clone()),
        AgentSpec::Model { name, extra } => {
            let p = sqp(&prompt_file(project, &r.name));
            let wt = sqp(&r.worktree_path);
            let extra_s = extra.as_deref().unwrap_or("");
            let x = if extra_s.trim().is_empty() {
                String::new()
            } else {
                format!("{extra_s} ")
            };
            let perm = if wants_auto_approve(extra_s) {
                "--permission-mode bypassPermissions "
            } else {
                "--permission-mode acceptEdits "
            };
            let title = sq(&format!("SwarmForge {}", r.display));
            Some(match name.as_str() {
                "claude" => format!(
                    "claude --append-system-prompt-file {p} {perm}-n {title} {x}\"$(cat {p})\""
                ),
                "codex" => format!("codex -C {wt} {x}\"$(cat {p})\""),
                "copilot" => format!("copilot -C {wt} --name {title} {x}-i \"$(cat {p})\""),
                _ => format!(
                    "grok --cwd {wt} {perm}{x}--rules \"$(cat {p})\" --verbatim \"$(cat {p})\""
                ),
            })
        }
    }
}

/// Shell words that are not programs on PATH.
const SHELL_WORDS: &[&str] = &[
    ".", ":", "exec", "cd", "set", "export", "env", "if", "for", "while", "case", "until", "{",
    "(", "!", "eval", "command", "true", "false", "test", "[", "echo", "printf", "read",
];

/// The program a command line starts, when it is a plain word we can check.
fn program_word(cmd: &str) -> Option<&str> {
    let w = cmd.split_whitespace().next()?;
    let plain = w
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-' | b'+'));
    (plain && !SHELL_WORDS.contains(&w)).then_some(w)
}

/// Every agent's program must be installed before anything starts.
fn check_programs(plan: &Plan, need_tmux: bool) -> Result<()> {
    let mut words: Vec<String> = Vec::new();
    if need_tmux {
        words.push("tmux".into());
    }
    for r in &plan.roles {
        let w = match &r.agent {
            AgentSpec::Human => continue,
            AgentSpec::Model { name, .. } => Some(name.as_str()),
            AgentSpec::Command(c) => program_word(c),
        };
        if let Some(w) = w {
            if !words.iter().any(|x| x == w) {
                words.push(w.to_string());
            }
        }
    }
    for w in words {
        if !crate::launch::swarmforge_conf::is_command(&w) {
            let hint = if w == "tmux" {
                "install tmux, or run headless with `swarm up --no-tmux`".to_string()
            } else {
                format!(
                    "install it, or change the agent in {}",
                    plan.source.path().display()
                )
            };
            return Err(Error::env(format!(
                "{}'{w}' is required but not installed.\n  hint: {hint}",
                error_prefix()
            )));
        }
    }
    Ok(())
}

/// PATH for agents: the wrappers, the folder of our binaries, then the
/// inherited PATH.
fn agent_path(project: &Project) -> Result<OsString> {
    let mut dirs = vec![shim_dir(project), shims::own_bin_dir()?];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).map_err(|e| Error::env(format!("cannot build PATH: {e}")))
}

/// The lines every agent script starts with: identity, PATH, worktree.
fn env_prelude(project: &Project, r: &PlannedRole) -> Result<String> {
    Ok(format!(
        "export SWARMFORGE_ROLE={}\nexport SWARMFORGE_PROJECT={}\nexport PATH={}:{}:\"$PATH\"\ncd {} || exit 1\n",
        sq(&r.name),
        sqp(&project.root),
        sqp(&shim_dir(project)),
        sqp(&shims::own_bin_dir()?),
        sqp(&r.worktree_path)
    ))
}

// ---------------------------------------------------------------- processes

/// Runs in the forked child before exec: a session of its own (no terminal
/// signals from the person's Ctrl-C) and, for agents, SIGTERM when the
/// supervisor dies so nothing is orphaned.
fn detach(cmd: &mut Command, die_with_parent: bool) {
    // SAFETY: setsid and prctl are async-signal-safe and touch no Rust state.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            if die_with_parent {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            }
            Ok(())
        });
    }
}

fn kill(pid: i32, sig: i32) -> bool {
    // SAFETY: plain kill(2).
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Whether any process of group `pgid` is alive.
fn group_alive(pgid: i32) -> bool {
    pgid > 1 && kill(-pgid, 0)
}

/// SIGTERM to each group, wait up to `grace` for all of them, SIGKILL the rest.
fn stop_groups(pgids: &[i32], grace: Duration, children: &mut [&mut Child]) {
    for &g in pgids.iter().filter(|g| **g > 1) {
        kill(-g, libc::SIGTERM);
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
        kill(-g, libc::SIGKILL);
    }
    for c in children.iter_mut() {
        let _ = c.wait();
    }
}

/// Field 22 of `/proc/<pid>/stat`: the start time, to tell a pid from its reuse.
fn start_time(pid: i32) -> Option<u64> {
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

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// The `handoffd` next to this executable, else the one on PATH.
fn handoffd_program() -> PathBuf {
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
    let mut cmd = Command::new("sh");
    // The shell opens the output file (append) and execs the daemon, so the
    // child's pid is handoffd's own.
    cmd.arg("-c")
        .arg("exec \"$0\" \"$1\" >>\"$2\" 2>&1 </dev/null")
        .arg(&prog)
        .arg(&project.root)
        .arg(&out)
        .current_dir(&project.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    detach(&mut cmd, false);
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::env(format!("cannot start {}: {e}", prog.display())))?;
    let pid = child.id();
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        if fsx::flock_holders(&project.pid_file()).contains(&pid) {
            return Ok((pid, child));
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(Error::env(format!(
                "handoffd exited at start ({st}); its output ({}):\n{}\n  hint: fix the cause above, then run `swarm up` again",
                out.display(),
                tail(&out, 15)
            )));
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::env(format!(
                "handoffd did not take its lock {} within 15 s; its output ({}):\n{}",
                project.pid_file().display(),
                out.display(),
                tail(&out, 15)
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------- tmux

use crate::daemon::tmux::{self, ok as tmux_ok};

fn has_session(sock: &Path, session: &str) -> bool {
    tmux_ok(sock, &["has-session", "-t", &format!("={session}")])
}

/// What a role's pane runs: the agent in a loop that waits for a line (the
/// daemon's wake-up) between runs; for a person, their shell.
fn pane_script(project: &Project, r: &PlannedRole) -> Result<String> {
    let mut s = format!(
        "# Written by `swarm up`: role {} in its worktree.\n",
        r.name
    );
    s.push_str(&env_prelude(project, r)?);
    match agent_command(project, r) {
        None => s.push_str("exec \"${SHELL:-/bin/sh}\"\n"),
        // `$1`: seconds to wait first (the launch stagger), so every
        // session exists at once and no early wake-up misses its target.
        Some(cmd) => s.push_str(&format!(
            "[ -n \"${{1:-}}\" ] && sleep \"$1\"\nwhile :; do\n{cmd}\nstatus=$?\nprintf '\\n[swarm] the agent of role %s exited (status %s). A wake-up (Enter) runs it again; Ctrl-D closes this window.\\n' {} \"$status\"\nread -r _ || break\ndone\n",
            sq(&r.name)
        )),
    }
    Ok(s)
}

fn write_prompts(plan: &Plan) -> Result<()> {
    for r in &plan.roles {
        if matches!(r.agent, AgentSpec::Model { .. }) {
            init::write_if_changed(
                &prompt_file(&plan.project, &r.name),
                prompt_text(&r.name).as_bytes(),
            )?;
        }
    }
    Ok(())
}

/// Creates the missing sessions at once; the n-th new agent waits
/// n × `stagger` inside its pane before it starts. Returns the new roles.
fn start_sessions(
    plan: &Plan,
    sock: &Path,
    stagger: Duration,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<String>> {
    let project = &plan.project;
    let mut started = Vec::new();
    let mut agents = 0u32;
    for r in &plan.roles {
        if has_session(sock, &r.session) {
            say(&format!(
                "{}: session {} already runs; kept",
                r.name, r.session
            ));
            continue;
        }
        let file = run_file(project, &r.name);
        init::write_if_changed(&file, pane_script(project, r)?.as_bytes())?;
        let wt = r.worktree_path.to_string_lossy().into_owned();
        let mut run = format!("sh {}", sqp(&file));
        if !r.is_human() {
            let delay = stagger * agents;
            agents += 1;
            if !delay.is_zero() {
                run.push_str(&format!(
                    " {}.{:03}",
                    delay.as_secs(),
                    delay.subsec_millis()
                ));
            }
        }
        let o = tmux::call(
            sock,
            &[
                "new-session",
                "-d",
                "-s",
                &r.session,
                "-n",
                &r.display,
                "-c",
                &wt,
                &run,
            ],
        )
        .map_err(Error::env)?;
        if !o.ok {
            return Err(Error::env(format!(
                "tmux could not create session {} on {}: {}",
                r.session,
                sock.display(),
                o.stderr.trim()
            )));
        }
        say(&format!(
            "{}: started in tmux session {}",
            r.name, r.session
        ));
        started.push(r.name.clone());
    }
    Ok(started)
}

fn write_session_files(plan: &Plan, sock: &Path) -> Result<()> {
    let mut tsv = String::new();
    for (i, r) in plan.roles.iter().enumerate() {
        tsv.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            i + 1,
            r.name,
            r.session,
            r.display,
            r.agent.column()
        ));
    }
    init::write_if_changed(&sessions_file(&plan.project), tsv.as_bytes())?;
    if let Some(first) = plan.roles.first() {
        if let Ok(o) = tmux::call(
            sock,
            &[
                "display-message",
                "-p",
                "-t",
                &format!("={}", first.session),
                "#{socket_path},#{pid},#{pane_id}",
            ],
        ) {
            if o.ok {
                init::write_if_changed(&tmux_env_file(&plan.project), o.stdout.as_bytes())?;
            }
        }
    }
    Ok(())
}

/// Kills the project's tmux sessions and their pane processes, then the
/// server if nothing else runs on the socket. Returns the sessions killed.
pub fn stop_tmux(project: &Project) -> Result<Vec<String>> {
    let sock_file = project.tmux_socket();
    let Ok(text) = std::fs::read_to_string(&sock_file) else {
        return Ok(Vec::new());
    };
    let sock = PathBuf::from(text.trim());
    let mut killed = Vec::new();
    if !text.trim().is_empty() {
        let roles = Roles::load(&project.roles_tsv())?;
        let mut pgids: Vec<i32> = Vec::new();
        for r in &roles.roles {
            if r.session.is_empty() || !has_session(&sock, &r.session) {
                continue;
            }
            if let Ok(o) = tmux::call(
                &sock,
                &[
                    "list-panes",
                    "-s",
                    "-t",
                    &format!("={}", r.session),
                    "-F",
                    "#{pane_pid}",
                ],
            ) {
                pgids.extend(
                    o.stdout
                        .lines()
                        .filter_map(|l| l.trim().parse::<i32>().ok()),
                );
            }
            if tmux_ok(&sock, &["kill-session", "-t", &format!("={}", r.session)]) {
                killed.push(r.session.clone());
            }
        }
        // Pane shells got SIGHUP; anything that ignored it goes now.
        stop_groups(&pgids, GRACE, &mut []);
        let remaining = tmux::call(&sock, &["list-sessions", "-F", "#{session_name}"])
            .is_ok_and(|o| o.ok && !o.stdout.trim().is_empty());
        if !remaining {
            let _ = tmux::call(&sock, &["kill-server"]);
            let end = Instant::now() + GRACE;
            while tmux_ok(&sock, &["list-sessions"]) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
            if sock.exists() && !tmux_ok(&sock, &["list-sessions"]) {
                let _ = fsx::remove_file(&sock);
            }
        }
    }
    // Without a tmux-socket file the daemon's `auto` wake method stops using tmux.
    fsx::remove_file(&sock_file).at(&sock_file)?;
    fsx::remove_file(&tmux_env_file(project)).at(tmux_env_file(project))?;
    Ok(killed)
}

// ---------------------------------------------------------------- up

/// How `up` runs.
#[derive(Clone, Debug, Default)]
pub struct UpOptions {
    /// tmux sessions (true) or headless supervised processes (false).
    pub tmux: bool,
    /// Start and return instead of staying in the foreground.
    pub detach: bool,
    /// Headless: return once every queue is empty and no agent runs.
    pub until_idle: bool,
    /// Give up (and tear down) after this long.
    pub timeout: Option<Duration>,
    /// Overrides `launch.stagger`.
    pub stagger: Option<Duration>,
}

/// How a foreground `up` ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Started; this process returns and the swarm keeps running.
    Detached,
    /// Ctrl-C, SIGTERM, `swarm down`, or every tmux session ended.
    Stopped,
    /// `--until-idle`: all work done.
    Idle,
    TimedOut,
    /// `--until-idle`: work waits only for roles parked after stalls.
    Stalled(String),
    /// handoffd went away while the swarm ran.
    DaemonDied,
}

impl Outcome {
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Detached | Outcome::Stopped | Outcome::Idle => crate::error::exit::OK,
            _ => crate::error::exit::ENV,
        }
    }
}

/// SIGINT/SIGTERM/SIGHUP set a flag instead of killing us, for as long as
/// this guard lives.
struct Signals {
    flag: Arc<AtomicBool>,
    ids: Vec<signal_hook::SigId>,
}

impl Signals {
    fn install() -> Signals {
        let flag = Arc::new(AtomicBool::new(false));
        let mut ids: Vec<signal_hook::SigId> = Vec::new();
        // A second Ctrl-C ends us at once (agents still get SIGTERM through
        // PDEATHSIG; `swarm down` cleans up the rest).
        ids.extend(
            signal_hook::flag::register_conditional_shutdown(libc::SIGINT, 130, flag.clone()).ok(),
        );
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            ids.extend(signal_hook::flag::register(s, flag.clone()).ok());
        }
        Signals { flag, ids }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Refuses a second foreground `up` for the same project.
fn check_no_supervisor(project: &Project) -> Result<()> {
    let f = supervisor_pid_file(project);
    if let Some(pid) = lock_holder(&f) {
        return Err(Error::env(format!(
            "A `swarm up` (pid {pid}) already runs this swarm ({}).\n  hint: run `swarm down {}` first",
            f.display(),
            project.root.display()
        )));
    }
    Ok(())
}

fn take_supervisor_lock(project: &Project) -> Result<fsx::Lock> {
    let f = supervisor_pid_file(project);
    fsx::ensure_dirs(&[project.daemon_dir()]).at(project.daemon_dir())?;
    let lock = fsx::try_lock(&f).at(&f)?.ok_or_else(|| {
        Error::env(format!(
            "Another `swarm up` holds {}.\n  hint: run `swarm down {}` first",
            f.display(),
            project.root.display()
        ))
    })?;
    fsx::rewrite_locked(&lock, format!("{}\n", std::process::id()).as_bytes()).at(&f)?;
    Ok(lock)
}

/// Runs a swarm. Prints progress through `say`.
pub fn up(plan: &Plan, opts: &UpOptions, say: &mut dyn FnMut(&str)) -> Result<Outcome> {
    let project = &plan.project;
    check_no_supervisor(project)?;
    check_programs(plan, opts.tmux)?;
    let report = init::init(plan)?;
    for c in &report.changes {
        say(c);
    }
    let shims_dir = shim_dir(project);
    fsx::ensure_dirs(&[&shims_dir]).at(&shims_dir)?;
    shims::install(&shims_dir, &shims::own_bin_dir()?)?;
    write_prompts(plan)?;
    if opts.detach && !opts.tmux {
        return spawn_detached_supervisor(plan, opts, say);
    }
    let signals = Signals::install();
    let lock = if opts.detach {
        None
    } else {
        Some(take_supervisor_lock(project)?)
    };
    let stagger = opts.stagger.unwrap_or(plan.config.launch.stagger.0);
    let sock = socket_path(&project.root);
    if opts.tmux {
        let dir = sock.parent().unwrap_or(Path::new("/tmp"));
        fsx::ensure_dirs(&[dir]).at(dir)?;
        let mut line = sock.to_string_lossy().into_owned();
        line.push('\n');
        init::write_if_changed(&project.tmux_socket(), line.as_bytes())?;
    } else {
        fsx::remove_file(&project.tmux_socket()).at(project.tmux_socket())?;
    }
    let (pid, daemon) = match start_daemon(project, say) {
        Ok(d) => d,
        Err(e) => {
            if opts.tmux {
                let _ = fsx::remove_file(&project.tmux_socket());
            }
            return Err(e);
        }
    };
    say(&format!(
        "handoffd runs (pid {pid}); its log: {}",
        project.log_file().display()
    ));
    let mut run = Running {
        plan,
        daemon: Some(daemon),
        slots: Vec::new(),
    };
    let result = if opts.tmux {
        run.tmux(opts, &sock, stagger, &signals.flag, say)
    } else {
        run.headless(opts, stagger, &signals.flag, say)
    };
    let outcome = match result {
        Ok(Outcome::Detached) => {
            say(&format!(
                "the swarm runs; stop it with: swarm down {}",
                project.root.display()
            ));
            return Ok(Outcome::Detached);
        }
        Ok(o) => Ok(o),
        Err(e) => Err(e),
    };
    say("stopping the swarm");
    let torn = run.teardown(say);
    if let Some(l) = lock {
        // Nobody supervises any more; the lock file goes with us.
        let _ = fsx::remove_file(&supervisor_pid_file(project));
        drop(l);
    }
    drop(signals);
    let outcome = outcome?;
    torn?;
    Ok(outcome)
}

/// Re-runs `swarm up --no-tmux <root>` in a session of its own (output in
/// `swarm-up.out`) and waits until it supervises.
fn spawn_detached_supervisor(
    plan: &Plan,
    opts: &UpOptions,
    say: &mut dyn FnMut(&str),
) -> Result<Outcome> {
    let project = &plan.project;
    let exe = std::env::current_exe().map_err(|e| Error::io("current executable", e))?;
    let out = supervisor_output(project);
    fsx::ensure_dirs(&[project.daemon_dir()]).at(project.daemon_dir())?;
    let mut script = String::from("exec \"$0\" up --no-tmux");
    if let Some(s) = opts.stagger {
        script.push_str(&format!(" --stagger {}ms", s.as_millis()));
    }
    if let Some(t) = opts.timeout {
        script.push_str(&format!(" --timeout {}ms", t.as_millis()));
    }
    script.push_str(" \"$1\" >>\"$2\" 2>&1 </dev/null");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .arg(&exe)
        .arg(&project.root)
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    detach(&mut cmd, false);
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::env(format!("cannot start {}: {e}", exe.display())))?;
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(pid) = lock_holder(&supervisor_pid_file(project)) {
            say(&format!(
                "headless supervisor runs (pid {pid}); its output: {}",
                out.display()
            ));
            say(&format!(
                "stop the swarm with: swarm down {}",
                project.root.display()
            ));
            return Ok(Outcome::Detached);
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(Error::env(format!(
                "the background `swarm up` exited ({st}); its output ({}):\n{}",
                out.display(),
                tail(&out, 15)
            )));
        }
        if Instant::now() >= end {
            return Err(Error::env(format!(
                "the background `swarm up` did not start within 30 s; see {}",
                out.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A headless agent.
struct Slot<'a> {
    role: &'a PlannedRole,
    command: String,
    child: Option<Child>,
    runs: u32,
    initial_done: bool,
    stalls: u32,
    not_before: Instant,
    /// Parked after stalls; the inbox fingerprint at that moment.
    parked: Option<[usize; 4]>,
    before: [usize; 4],
}

struct Running<'a> {
    plan: &'a Plan,
    daemon: Option<Child>,
    slots: Vec<Slot<'a>>,
}

/// Entries of `dir` that a queue would list (no dot files).
fn entries(dir: &Path, handoff_only: bool) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    !n.starts_with('.') && (!handoff_only || n.ends_with(".handoff"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// new, in process, completed, outbox+sent: any change means progress.
fn fingerprint(w: &Worktree) -> [usize; 4] {
    [
        entries(&w.inbox_new(), true),
        entries(&w.in_process(), false),
        entries(&w.completed(), false),
        entries(&w.outbox(), true) + entries(&w.sent(), false),
    ]
}

/// Work waits in this inbox (new items, or one in process).
pub fn pending(w: &Worktree) -> bool {
    entries(&w.inbox_new(), true) > 0 || entries(&w.in_process(), false) > 0
}

fn backoff(stalls: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << stalls.min(6))).min(Duration::from_secs(30))
}

impl<'a> Running<'a> {
    fn tmux(
        &mut self,
        opts: &UpOptions,
        sock: &Path,
        stagger: Duration,
        stop: &AtomicBool,
        say: &mut dyn FnMut(&str),
    ) -> Result<Outcome> {
        let plan = self.plan;
        start_sessions(plan, sock, stagger, say)?;
        write_session_files(plan, sock)?;
        for r in &plan.roles {
            say(&format!(
                "attach to {}: tmux -S {} attach -t {}",
                r.name,
                sock.display(),
                r.session
            ));
        }
        if opts.detach {
            // The daemon outlives us: let init reap it.
            self.daemon = None;
            return Ok(Outcome::Detached);
        }
        say("Ctrl-C here (or `swarm down`) stops the swarm");
        let started = Instant::now();
        let mut last_check = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(Outcome::Stopped);
            }
            if opts.timeout.is_some_and(|t| started.elapsed() >= t) {
                return Ok(Outcome::TimedOut);
            }
            if last_check.elapsed() >= Duration::from_secs(1) {
                last_check = Instant::now();
                if !plan.roles.iter().any(|r| has_session(sock, &r.session)) {
                    say("every tmux session has ended");
                    return Ok(Outcome::Stopped);
                }
                if !self.daemon_alive() {
                    return Ok(Outcome::DaemonDied);
                }
            }
            std::thread::sleep(TICK);
        }
    }

    fn daemon_alive(&mut self) -> bool {
        match self.daemon.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => !fsx::flock_holders(&self.plan.project.pid_file()).is_empty(),
        }
    }

    fn spawn(&mut self, i: usize, say: &mut dyn FnMut(&str)) -> Result<()> {
        let project = &self.plan.project;
        let slot = &mut self.slots[i];
        let r = slot.role;
        let dir = agents_dir(project);
        fsx::ensure_dirs(&[&dir]).at(&dir)?;
        slot.runs += 1;
        let log = agent_log(project, &r.name);
        // The shell opens the log (append) itself; every run is marked in it.
        let script = format!(
            "exec >>{} 2>&1 </dev/null\nprintf '[swarm] run %s of role %s\\n' {} {}\n{}\n",
            sqp(&log),
            slot.runs,
            sq(&r.name),
            slot.command
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .current_dir(&r.worktree_path)
            .env("SWARMFORGE_ROLE", &r.name)
            .env("SWARMFORGE_PROJECT", &project.root)
            .env("PATH", agent_path(project)?)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        detach(&mut cmd, true);
        let child = cmd
            .spawn()
            .map_err(|e| Error::env(format!("cannot start the agent of role {}: {e}", r.name)))?;
        let pid = child.id() as i32;
        let pid_file = agent_pid_file(project, &r.name);
        let rec = format!("{pid} {}\n", start_time(pid).unwrap_or(0));
        fsx::write_file(&pid_file, rec.as_bytes()).at(&pid_file)?;
        slot.before = fingerprint(&r.worktree());
        slot.child = Some(child);
        say(&format!(
            "{}: run {} started (pid {pid})",
            r.name, slot.runs
        ));
        Ok(())
    }

    /// Collects finished agents and judges whether their run made progress.
    fn reap(&mut self, say: &mut dyn FnMut(&str)) {
        let project = &self.plan.project;
        for slot in &mut self.slots {
            let Some(c) = slot.child.as_mut() else {
                continue;
            };
            let Ok(Some(status)) = c.try_wait() else {
                continue;
            };
            let pid = c.id() as i32;
            slot.child = None;
            // Stragglers of the run (its process group) do not outlive it.
            if group_alive(pid) {
                kill(-pid, libc::SIGKILL);
            }
            let _ = fsx::remove_file(&agent_pid_file(project, &slot.role.name));
            let w = slot.role.worktree();
            let after = fingerprint(&w);
            let code = status
                .code()
                .map(|c| c.to_string())
                .unwrap_or_else(|| status.to_string());
            say(&format!(
                "{}: run {} ended (exit {code})",
                slot.role.name, slot.runs
            ));
            if after == slot.before && pending(&w) {
                slot.stalls += 1;
                slot.not_before = Instant::now() + backoff(slot.stalls);
                if slot.stalls >= MAX_STALLS {
                    slot.parked = Some(after);
                    say(&format!(
                        "{}: {} runs in a row left its queue untouched; not started again until its inbox changes (see {})",
                        slot.role.name,
                        slot.stalls,
                        agent_log(project, &slot.role.name).display()
                    ));
                }
            } else {
                slot.stalls = 0;
            }
        }
    }

    fn outboxes_empty(&self) -> bool {
        self.plan
            .worktree_paths()
            .iter()
            .all(|p| entries(&Worktree::new(p).outbox(), true) == 0)
    }

    fn headless(
        &mut self,
        opts: &UpOptions,
        stagger: Duration,
        stop: &AtomicBool,
        say: &mut dyn FnMut(&str),
    ) -> Result<Outcome> {
        let project = &self.plan.project;
        for r in &self.plan.roles {
            let Some(command) = agent_command(project, r) else {
                say(&format!(
                    "{}: a person works this role; not started",
                    r.name
                ));
                continue;
            };
            if matches!(r.agent, AgentSpec::Model { .. }) {
                say(&format!(
                    "warning: {} runs an interactive model agent, which gets no terminal with --no-tmux",
                    r.name
                ));
            }
            self.slots.push(Slot {
                role: r,
                command,
                child: None,
                runs: 0,
                initial_done: false,
                stalls: 0,
                not_before: Instant::now(),
                parked: None,
                before: [0; 4],
            });
        }
        let started = Instant::now();
        let mut last_initial: Option<Instant> = None;
        let mut last_daemon_check = Instant::now();
        let mut idle_ticks = 0;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(Outcome::Stopped);
            }
            if opts.timeout.is_some_and(|t| started.elapsed() >= t) {
                return Ok(Outcome::TimedOut);
            }
            self.reap(say);
            // Every agent runs once at start, `stagger` apart.
            if let Some(i) = self.slots.iter().position(|s| !s.initial_done) {
                if last_initial.is_none_or(|t| t.elapsed() >= stagger) {
                    self.slots[i].initial_done = true;
                    last_initial = Some(Instant::now());
                    self.spawn(i, say)?;
                }
            }
            for i in 0..self.slots.len() {
                let s = &mut self.slots[i];
                if !s.initial_done || s.child.is_some() || Instant::now() < s.not_before {
                    continue;
                }
                let w = s.role.worktree();
                if let Some(fp) = s.parked {
                    if fingerprint(&w) == fp {
                        continue;
                    }
                    s.parked = None;
                    s.stalls = 0;
                }
                if pending(&w) {
                    self.spawn(i, say)?;
                }
            }
            if last_daemon_check.elapsed() >= Duration::from_secs(1) {
                last_daemon_check = Instant::now();
                if !self.daemon_alive() {
                    say(&format!(
                        "handoffd is gone; see {}",
                        project.daemon_output().display()
                    ));
                    return Ok(Outcome::DaemonDied);
                }
            }
            if opts.until_idle {
                let quiet = self
                    .slots
                    .iter()
                    .all(|s| s.initial_done && s.child.is_none())
                    && self.outboxes_empty();
                let waiting: Vec<&Slot> = self
                    .slots
                    .iter()
                    .filter(|s| pending(&s.role.worktree()))
                    .collect();
                if quiet && waiting.iter().all(|s| s.parked.is_some()) {
                    if !waiting.is_empty() {
                        let names: Vec<&str> =
                            waiting.iter().map(|s| s.role.name.as_str()).collect();
                        return Ok(Outcome::Stalled(format!(
                            "work waits for {} but their agents make no progress; see {}",
                            names.join(", "),
                            agents_dir(project).display()
                        )));
                    }
                    idle_ticks += 1;
                    // Three quiet looks in a row: nothing is in flight.
                    if idle_ticks >= 3 {
                        return Ok(Outcome::Idle);
                    }
                } else {
                    idle_ticks = 0;
                }
            }
            std::thread::sleep(TICK);
        }
    }

    /// Agents first (they may still be handing off), then the daemon, then tmux.
    fn teardown(&mut self, say: &mut dyn FnMut(&str)) -> Result<()> {
        let project = &self.plan.project;
        let mut children: Vec<&mut Child> = self
            .slots
            .iter_mut()
            .filter_map(|s| s.child.as_mut())
            .collect();
        let pgids: Vec<i32> = children.iter().map(|c| c.id() as i32).collect();
        if !pgids.is_empty() {
            say(&format!("stopping {} agent(s)", pgids.len()));
        }
        stop_groups(&pgids, GRACE, &mut children);
        for s in &mut self.slots {
            if s.child.take().is_some() {
                let _ = fsx::remove_file(&agent_pid_file(project, &s.role.name));
            }
        }
        // Read before asking: a quick daemon is gone before `stop` looks.
        let daemon_pid = lock_holder(&project.pid_file());
        let stopped = control::stop(project, control::GRACE);
        if let Some(mut d) = self.daemon.take() {
            let _ = d.wait();
        }
        let killed = stop_tmux(project)?;
        if !killed.is_empty() {
            say(&format!("killed tmux sessions: {}", killed.join(" ")));
        }
        let r = stopped?;
        if let Some(pid) = r.pid.or(daemon_pid) {
            say(&format!(
                "handoffd (pid {pid}) {}",
                if r.killed { "killed" } else { "stopped" }
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- down

/// What `down` stopped.
#[derive(Clone, Debug, Default)]
pub struct DownReport {
    pub supervisor: Option<u32>,
    pub agents: Vec<String>,
    pub daemon: Option<u32>,
    pub sessions: Vec<String>,
}

/// Headless agents recorded by a supervisor that is gone (SIGKILLed).
fn stop_recorded_agents(project: &Project) -> Vec<String> {
    let mut stopped = Vec::new();
    let Ok(rd) = std::fs::read_dir(agents_dir(project)) else {
        return stopped;
    };
    let mut pgids = Vec::new();
    let mut files = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(role) = name.strip_suffix(".pid") else {
            continue;
        };
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let mut f = text.split_whitespace();
        let pid: Option<i32> = f.next().and_then(|s| s.parse().ok());
        let start: Option<u64> = f.next().and_then(|s| s.parse().ok());
        if let (Some(pid), Some(start)) = (pid, start) {
            // Only the very process we started (pids get reused), or its
            // group after it died: a group id stays taken while the group
            // has members, so it cannot belong to anyone else.
            let ours = match start_time(pid) {
                Some(t) => t == start,
                None => group_alive(pid),
            };
            if pid > 1 && ours {
                pgids.push(pid);
                stopped.push(role.to_string());
            }
        }
        files.push(e.path());
    }
    stop_groups(&pgids, GRACE, &mut []);
    for f in files {
        let _ = fsx::remove_file(&f);
    }
    stopped
}

/// Stops the swarm of `project`: a foreground `swarm up` (which tears down
/// its own agents), leftover agents, the daemon, the tmux sessions. Handoff
/// files are never touched.
pub fn down(project: &Project) -> Result<DownReport> {
    if !project.swarmforge().is_dir() {
        return Err(Error::env(format!(
            "No swarm at {} (missing .swarmforge/).\n  hint: give the project root as [root]",
            project.root.display()
        )));
    }
    let mut report = DownReport::default();
    let sup = supervisor_pid_file(project);
    if let Some(pid) = lock_holder(&sup) {
        if pid != std::process::id() {
            report.supervisor = Some(pid);
            kill(pid as i32, libc::SIGTERM);
            // It stops its agents (GRACE) and the daemon (GRACE) itself.
            let end = Instant::now() + GRACE * 3;
            while lock_holder(&sup).is_some() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
            if lock_holder(&sup).is_some() {
                kill(pid as i32, libc::SIGKILL);
            }
        }
    }
    report.agents = stop_recorded_agents(project);
    let daemon_pid = lock_holder(&project.pid_file());
    report.daemon = control::stop(project, control::GRACE)?.pid.or(daemon_pid);
    report.sessions = stop_tmux(project)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_zlib() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn socket_path_shape() {
        let p = socket_path(Path::new("/work/p"));
        let s = p.to_string_lossy();
        assert!(s.starts_with("/tmp/swarmforge-"), "{s}");
        assert!(s.ends_with(&format!("/{}.sock", crc32(b"/work/p"))), "{s}");
    }

    fn role(agent: AgentSpec) -> PlannedRole {
        PlannedRole {
            name: "code-reviewer".into(),
            worktree_name: "cr".into(),
            worktree_path: PathBuf::from("/p/.worktrees/cr"),
            session: "swarmforge-code-reviewer".into(),
            display: "Code Reviewer".into(),
            mode: crate::protocol::roles::ReceiveMode::Task,
            agent,
        }
    }

    #[test]
    fn model_commands_follow_swarmforge() {
        let p = Project::new("/p");
        let m = |name: &str, extra: Option<&str>| {
            agent_command(
                &p,
                &role(AgentSpec::Model {
                    name: name.into(),
                    extra: extra.map(str::to_string),
                }),
            )
            .unwrap()
        };
        let pf = "'/p/.swarmforge/prompts/code-reviewer.md'";
        assert_eq!(
            m("claude", None),
            format!("claude --append-system-prompt-file {pf} --permission-mode acceptEdits -n 'SwarmForge Code Reviewer' \"$(cat {pf})\"")
        );
        assert_eq!(
            m("claude", Some("--yolo")),
            format!("claude --append-system-prompt-file {pf} --permission-mode bypassPermissions -n 'SwarmForge Code Reviewer' --yolo \"$(cat {pf})\"")
        );
        assert_eq!(
            m("codex", Some("-m o3")),
            format!("codex -C '/p/.worktrees/cr' -m o3 \"$(cat {pf})\"")
        );
        assert_eq!(
            m("copilot", None),
            format!("copilot -C '/p/.worktrees/cr' --name 'SwarmForge Code Reviewer' -i \"$(cat {pf})\"")
        );
        assert_eq!(
            m("grok", None),
            format!("grok --cwd '/p/.worktrees/cr' --permission-mode acceptEdits --rules \"$(cat {pf})\" --verbatim \"$(cat {pf})\"")
        );
        assert_eq!(agent_command(&p, &role(AgentSpec::Human)), None);
    }

    #[test]
    fn program_words() {
        assert_eq!(program_word("sh agents/x.sh"), Some("sh"));
        assert_eq!(program_word("./x.sh"), None);
        assert_eq!(program_word("FOO=1 x"), None);
        assert_eq!(program_word("exec x"), None);
        assert_eq!(program_word("\"$X\"/a"), None);
    }
}
