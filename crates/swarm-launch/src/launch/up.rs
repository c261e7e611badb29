//! `swarm up`: init, wrappers, the daemon, then the agents (in tmux, or under
//! the headless supervisor); a foreground run tears down on a signal.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::command::check_programs;
use super::process::{lock_holder, spawn_alone, start_daemon, tail};
use super::sessions::write_prompts;
use super::supervisor::Running;
use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::launch::init;
use crate::launch::plan::Plan;
use crate::launch::shims;
use crate::protocol::launch_files::{shim_dir, supervisor_output, supervisor_pid_file};
use crate::protocol::layout::Project;
use crate::protocol::tmux_socket::socket_path;

pub use super::supervisor::{Outcome, UpOptions};

/// SIGINT/SIGTERM/SIGHUP set a flag instead of killing us, for as long as
/// this guard lives.
pub(super) struct Signals {
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
pub(super) fn check_no_supervisor(project: &Project) -> Result<()> {
    let f = supervisor_pid_file(project);
    if let Some(pid) = lock_holder(&f) {
        return Err(Error::conflict(format!(
            "A `swarm up` (pid {pid}) already runs this swarm ({}).\n  hint: run `swarm down {}` first",
            f.display(),
            project.root.display()
        )));
    }
    Ok(())
}

pub(super) fn take_supervisor_lock(project: &Project) -> Result<fsx::Lock> {
    let f = supervisor_pid_file(project);
    fsx::ensure_dirs(&[project.daemon_dir()]).at(project.daemon_dir())?;
    let lock = fsx::try_lock(&f).at(&f)?.ok_or_else(|| {
        Error::conflict(format!(
            "Another `swarm up` holds {}.\n  hint: run `swarm down {}` first",
            f.display(),
            project.root.display()
        ))
    })?;
    fsx::rewrite_locked(&lock, format!("{}\n", std::process::id()).as_bytes()).at(&f)?;
    Ok(lock)
}

/// `reservations: guard`: the pre-commit hook in the repository's hooks
/// folder, which every role worktree shares (docs/reservations.md); a hook
/// of someone else's is kept. Also for a role added to a running swarm.
pub(crate) fn install_guard(project: &Project, say: &mut dyn FnMut(&str)) -> Result<()> {
    use crate::reservations::guard::{self, Installed};
    match guard::install(&project.root, &shims::own_bin_dir()?.join("swarm"))? {
        Installed::Written(p) => say(&format!("reservations guard: {}", p.display())),
        Installed::Foreign(p) => say(&format!(
            "reservations guard NOT installed: {} is another pre-commit hook; add `swarm reservations --guard` to it",
            p.display()
        )),
    }
    Ok(())
}

/// Runs a swarm. Prints progress through `say`.
pub fn up(plan: &Plan, opts: &UpOptions, say: &mut dyn FnMut(&str)) -> Result<Outcome> {
    let headless;
    let plan = if opts.tmux {
        plan
    } else {
        headless = plan.with_headless_presets();
        &headless
    };
    let project = &plan.project;
    check_can_start(plan, opts.tmux)?;
    write_swarm_files(plan, say)?;
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
    point_at_runtime(project, opts.tmux, &sock)?;
    let daemon = start_daemon_for(project, opts.tmux, say)?;
    // Roles on other hosts are reached through the bridge (docs/bridge.md).
    let bridge = super::bridge::start_bridge(plan, say)?;
    first_delivery(plan);
    let mut run = Running::new(plan, daemon);
    let outcome = if opts.tmux {
        run.tmux(opts, &sock, stagger, &signals.flag, say)
    } else {
        run.headless(opts, stagger, &signals.flag, say)
    };
    if matches!(outcome, Ok(Outcome::Detached)) {
        say(&format!(
            "the swarm runs; stop it with: swarm down {}",
            project.root.display()
        ));
        return Ok(Outcome::Detached);
    }
    say("stopping the swarm");
    let torn = run.teardown(say);
    if bridge.is_some() {
        super::bridge::stop_bridge(project, super::GRACE);
    }
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

/// Refuses to start what could not run: a second supervisor, a missing
/// program, a sandbox that cannot be made, an MCP server that cannot be
/// configured.
fn check_can_start(plan: &Plan, tmux: bool) -> Result<()> {
    check_no_supervisor(&plan.project)?;
    check_programs(plan, tmux)?;
    if super::confine::needed(plan) {
        super::confine::check()?;
    }
    super::role_mcp::check(plan)
}

/// What the swarm's agents find before they start: the project's folders
/// and worktrees (`init`), the wrappers, the primers, each role's MCP
/// configuration and, with `reservations: guard`, the pre-commit hook.
fn write_swarm_files(plan: &Plan, say: &mut dyn FnMut(&str)) -> Result<()> {
    let project = &plan.project;
    let report = init::init(plan)?;
    for c in &report.changes {
        say(c);
    }
    let shims_dir = shim_dir(project);
    fsx::ensure_dirs(&[&shims_dir]).at(&shims_dir)?;
    shims::install(&shims_dir, &shims::own_bin_dir()?)?;
    for note in write_prompts(plan)? {
        say(&note);
    }
    for p in super::role_mcp::write_all(plan, &shims::own_bin_dir()?.join("swarm"))? {
        say(&format!("MCP configuration: {}", p.display()));
    }
    if plan.config.reservations == crate::protocol::config::ReservationsMode::Guard {
        install_guard(project, say)?;
    }
    Ok(())
}

/// Tells the daemon how the roles run: in tmux, the socket `sock` written
/// to `.swarmforge/tmux-socket` (which makes it wake roles through tmux);
/// headless, no such file.
fn point_at_runtime(project: &Project, tmux: bool, sock: &Path) -> Result<()> {
    if !tmux {
        return fsx::remove_file(&project.tmux_socket()).at(project.tmux_socket());
    }
    // The sessions of an earlier run: until this run has started its
    // own (and written the list again), a session the daemon does not
    // find is not yet started, not dead (daemon::watchdog).
    let listed = crate::protocol::launch_files::sessions_file(project);
    fsx::remove_file(&listed).at(&listed)?;
    let dir = sock.parent().unwrap_or(Path::new("/tmp"));
    fsx::ensure_dirs(&[dir]).at(dir)?;
    let mut line = sock.to_string_lossy().into_owned();
    line.push('\n');
    crate::launch::repo::write_if_changed(&project.tmux_socket(), line.as_bytes())?;
    Ok(())
}

/// Starts handoffd and says so; when it does not start, a tmux swarm's
/// socket pointer goes again.
fn start_daemon_for(
    project: &Project,
    tmux: bool,
    say: &mut dyn FnMut(&str),
) -> Result<std::process::Child> {
    let (pid, daemon) = start_daemon(project, say).inspect_err(|_| {
        if tmux {
            let _ = fsx::remove_file(&project.tmux_socket());
        }
    })?;
    say(&format!(
        "handoffd runs (pid {pid}); its log: {}",
        project.log_file().display()
    ));
    Ok(daemon)
}

/// Longest the agents' start waits for the daemon's first delivery.
const FIRST_DELIVERY: Duration = Duration::from_secs(5);

/// Mail queued before `swarm up` (a person's first item, a whole backlog)
/// is in the agents' inboxes when they start: the agents are started once
/// no outbox of the swarm holds a message any more, or after
/// [`FIRST_DELIVERY`] (mail that waits for an approval, a retry or a peer
/// host stays). Before, under load, an agent's first look could come before
/// the daemon's first pass and find nothing. A paused swarm delivers
/// nothing: no wait.
fn first_delivery(plan: &Plan) {
    if plan.project.pause_file().exists() {
        return;
    }
    let outboxes: Vec<_> = plan.roles.iter().map(|r| r.worktree().outbox()).collect();
    let queued = || {
        outboxes
            .iter()
            .any(|o| super::supervisor::entries(o, true) > 0)
    };
    if !queued() {
        return;
    }
    let end = Instant::now() + FIRST_DELIVERY;
    let mut watch = crate::sys::watch::DirWatch::new(outboxes.clone());
    while queued() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        watch.wait_for(left.min(Duration::from_millis(200)));
    }
}

/// Re-runs `swarm up --no-tmux <root>` in a session of its own (output in
/// `swarm-up.out`) and waits until it supervises and every agent's first run
/// has outlived the start window (its `swarm-up.started`): an agent that died
/// at start is named as a `warning:` with its log's first lines; when none
/// could start the background `swarm up` exits, and so does this one (1).
pub(super) fn spawn_detached_supervisor(
    plan: &Plan,
    opts: &UpOptions,
    say: &mut dyn FnMut(&str),
) -> Result<Outcome> {
    let project = &plan.project;
    let exe = std::env::current_exe().map_err(|e| Error::io("current executable", e))?;
    let out = supervisor_output(project);
    fsx::ensure_dirs(&[project.daemon_dir()]).at(project.daemon_dir())?;
    let report = crate::protocol::start_failure::start_report_file(project);
    fsx::remove_file(&report).at(&report)?;
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
        .arg(&out);
    let mut child = spawn_alone(&mut cmd, &exe)?;
    // The agents start `stagger` apart after the supervisor runs.
    let agents = plan.roles.iter().filter(|r| !r.is_human()).count() as u32;
    let stagger = opts.stagger.unwrap_or(plan.config.launch.stagger.0);
    let end = Instant::now()
        + Duration::from_secs(30)
        + stagger * agents
        + super::supervisor::START_WINDOW;
    let mut supervising = None;
    loop {
        if supervising.is_none() {
            supervising = lock_holder(&supervisor_pid_file(project));
        }
        if let Some(pid) = supervising.filter(|_| report.exists()) {
            for r in plan.roles.iter().filter(|r| !r.is_human()) {
                if let Some(d) = crate::protocol::start_failure::Death::read(project, &r.name) {
                    say(&format!(
                        "warning: {}: its agent exited at once (exit {}); not started again until its inbox changes. Its log ({}) says:\n{}",
                        r.name,
                        d.status,
                        crate::protocol::launch_files::agent_log(project, &r.name).display(),
                        d.quoted()
                    ));
                }
            }
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
            return Err(Error::process(format!(
                "the background `swarm up` exited ({st}); its output ({}):\n{}",
                out.display(),
                tail(&out, 15)
            )));
        }
        if Instant::now() >= end {
            return Err(Error::process(format!(
                "the background `swarm up` did not start its agents in time; see {}",
                out.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
