//! Confinement (docs/security.md, "Confinement"): by default (`launch:
//! {confine: false}` turns it off) every agent runs inside a bubblewrap
//! sandbox where the whole system is read-only except its own worktree,
//! its own queue folders, its own launcher folder (where it asks handoffd
//! for its forum and board writes and leaves its turn-end requests), a
//! private `/tmp` and a private home holding its CLI's state folder
//! (launch/cli_state/); the project's `.swarmforge/` (approvals, pause,
//! the daemon's files, the forum, the board, the telemetry: activity,
//! usage, budget raises), other roles' worktrees and inboxes are
//! read-only, and the cockpit's token folder and other roles' homes are
//! hidden. Its own pid namespace hides the other agents' processes (and
//! their environments).
//!
//! Bubblewrap for the mounts: a mount namespace can also hide (the token)
//! and give a private `/tmp` and home, which Landlock's allow-lists cannot;
//! it needs unprivileged user namespaces (or root), which [`check`] tries
//! once and explains when missing. Landlock for what no mount hides:
//! abstract Unix sockets and signals outside ([`exec`]).
//!
//! - `paths`: what may be bound, checked (no link an agent could plant);
//! - `mounts`: the mounts of one role's sandbox and their order.
//!
//! The invariant: everything an agent of a confined swarm runs starts from
//! the one command [`wrap_shell`] builds, both headless and in tmux. What
//! records an agent's activity and usage is not the agent's and runs
//! outside ([`wrap_agent`]): a headless turn (`swarm turn`) reads its CLI's
//! stream unconfined and confines the CLI alone; in tmux the confined hook
//! leaves a turn-end request the daemon reads (agents/turn_end.rs).

mod mounts;
mod paths;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, Result};
use crate::launch::plan::{Plan, PlannedRole};
use crate::protocol::launch_files::agent_own_dir;
use crate::protocol::layout::Project;

pub use mounts::args;

/// The sandbox program: `SWARM_BWRAP` when set (a bubblewrap binary not on
/// PATH), else `bwrap` from PATH (Debian's `bubblewrap`). Codex's own
/// sandbox also takes a `bwrap` from PATH, which fails when its CODEX_HOME
/// is in the temp folder (launch::agents::codex_sandbox).
pub fn program() -> String {
    std::env::var("SWARM_BWRAP")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "bwrap".to_string())
}

/// Whether the swarm's agents are confined (swarm.yaml `launch.confine`).
pub fn enabled(plan: &Plan) -> bool {
    plan.config.launch.confine
}

/// Why a sandbox cannot be made here, and how to repair it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub message: String,
    pub fix: String,
}

const OPT_OUT: &str = "or set `launch: {confine: false}` in swarm.yaml (agents then run unconfined as your user, see docs/security.md \"Confinement\")";

/// Why a trial sandbox did not start.
#[derive(Debug)]
pub enum TrialError {
    /// The sandbox program could not be run at all.
    Spawn(std::io::Error),
    /// It ran and failed: bwrap's own words (its first lines, escaped and
    /// bounded), or how it ended when it said nothing.
    Failed(String),
}

/// Longest a trial sandbox may take to run `true` (it starts in
/// milliseconds; a hung mount must not hang `swarm up` or doctor).
const TRIAL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);
/// Most of bwrap's error quoted.
const MAX_QUOTED: usize = 400;

/// Runs `bwrap <args> -- sh -c true` once, within [`TRIAL_DEADLINE`]: the
/// one runner of a trial sandbox, for [`probe`] and doctor's per-role trial.
pub fn trial(bwrap: &str, args: &[String]) -> std::result::Result<(), TrialError> {
    use std::io::Read;
    let mut child = Command::new(bwrap)
        .args(args)
        .args(["--", "sh", "-c", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(TrialError::Spawn)?;
    let stderr = child.stderr.take();
    let why = match crate::sys::child::wait_bounded(child, TRIAL_DEADLINE) {
        Ok(st) if st.success() => return Ok(()),
        Ok(st) => format!("it exits with {st}"),
        Err(e) => format!("it did not start: {e}"),
    };
    // Read after the exit: bwrap's error is one short line, far under a
    // pipe's buffer; bounded all the same.
    let mut said = Vec::new();
    if let Some(s) = stderr {
        let _ = s.take(MAX_QUOTED as u64 * 4).read_to_end(&mut said);
    }
    let said = String::from_utf8_lossy(&said);
    let said = said.trim();
    if said.is_empty() {
        return Err(TrialError::Failed(why));
    }
    let mut q = crate::text::escape(&said.lines().take(3).collect::<Vec<_>>().join("; "));
    if let Some((i, _)) = q.char_indices().nth(MAX_QUOTED) {
        q.truncate(i);
        q.push('…');
    }
    Err(TrialError::Failed(q))
}

/// What every sandbox starts from: the system read-only, its own `/dev`
/// and `/proc`, its own pid namespace, gone with its parent.
const BASE: [&str; 9] = [
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-pid",
    "--die-with-parent",
];

/// Tries a sandbox once: bwrap is installed and can create its namespaces.
pub fn probe() -> Option<Problem> {
    let bwrap = program();
    match trial(&bwrap, &BASE.map(String::from)) {
        Ok(()) => None,
        Err(TrialError::Failed(said)) => Some(Problem {
            message: format!(
                "agents are confined by default, but bubblewrap cannot make a sandbox here: {} fails: {said}",
                crate::text::escape(&bwrap),
            ),
            fix: format!("bubblewrap needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0), or run as root; {OPT_OUT}"),
        }),
        Err(TrialError::Spawn(e)) => Some(Problem {
            message: format!(
                "agents are confined by default, which needs bubblewrap: cannot run {}: {e}",
                crate::text::escape(&bwrap)
            ),
            fix: format!("install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), or name a bwrap binary in SWARM_BWRAP; {OPT_OUT}"),
        }),
    }
}

/// Whether `plan` starts an agent this machine would have to confine.
pub fn needed(plan: &Plan) -> bool {
    enabled(plan) && plan.roles.iter().any(|r| !r.is_human())
}

/// Checks that a sandbox can be made here, once before any agent starts.
/// The error says why not and how to repair (or to turn confinement off).
pub fn check() -> Result<()> {
    match probe() {
        None => Ok(()),
        Some(p) => Err(Error::env(format!("{}\n  hint: {}", p.message, p.fix))),
    }
}

/// The role's private home inside the sandbox (kept between runs).
pub fn home_dir(project: &Project, role: &str) -> PathBuf {
    agent_own_dir(project, role).join("home")
}

/// Scopes this process, and so the sandbox it becomes, out of what a mount
/// namespace cannot hide: abstract Unix sockets made outside (a session
/// bus, X11's, an IDE's) and signals to processes outside (Landlock's
/// scopes, ABI 6, Linux 6.12). On an older kernel nothing is scoped and the
/// sandbox is the mount and pid namespaces alone (docs/security.md).
fn scope_out() -> Result<()> {
    use landlock::{Access, Ruleset, RulesetAttr, Scope, ABI};
    Ruleset::default()
        .scope(Scope::from_all(ABI::V6))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map(|_| ())
        .map_err(|e| Error::env(format!("cannot scope the sandbox with Landlock: {e}")))
}

/// What the supervisor or the tmux pane runs for `r`, whose agent command
/// is `cmd`: [`wrap_shell`], except for the two runners that are the
/// swarm's own code and run nothing the model names themselves: a headless
/// preset's `swarm turn` (it reads the CLI's stream into the telemetry and
/// confines the CLI with [`wrap_shell`]) and `agent: api`'s `swarm run-api`
/// (it only sends text through the helpers' validation).
pub fn wrap_agent(plan: &Plan, r: &PlannedRole, cmd: &str) -> Result<String> {
    use crate::launch::plan::AgentSpec;
    match r.agent {
        AgentSpec::Preset { headless: true, .. }
        | AgentSpec::Preset { acp: true, .. }
        | AgentSpec::Api => Ok(cmd.to_string()),
        _ => wrap_shell(plan, r, cmd),
    }
}

/// `cmd` (a shell command) as it runs for `r`: unchanged when confinement
/// is off, else `swarm sandbox --role <r> ... -- <cmd>`, which builds the
/// sandbox ([`args`]) afresh and runs the command in it ([`exec`]). Afresh
/// at every start, not once at `swarm up`: a pane or the supervisor runs
/// the same line again after the agent exits, and what the agent left in
/// its folders since (a link in place of its home) is checked then. The
/// sandbox is also built once here, so `swarm up` says what is wrong
/// before anything starts.
pub fn wrap_shell(plan: &Plan, r: &PlannedRole, cmd: &str) -> Result<String> {
    if !enabled(plan) || r.is_human() {
        return Ok(cmd.to_string());
    }
    args(plan, r)?;
    let q = crate::sys::shell::quote;
    let swarm = crate::launch::shims::own_bin_dir()?.join("swarm");
    Ok(format!(
        "{} sandbox --project {} --role {} --bwrap {} -- {}",
        crate::sys::shell::quote_path(&swarm),
        crate::sys::shell::quote_path(&plan.project.root),
        q(&r.name),
        q(&program()),
        q(cmd)
    ))
}

/// `swarm sandbox`: runs `cmd` with `sh -c` in the sandbox of `role` of the
/// swarm at `root`, built now, with `bwrap` (replacing this process, so the
/// agent's exit status is bwrap's). Returns only on an error.
pub fn exec(root: &Path, role: &str, bwrap: &str, cmd: &str) -> Error {
    use std::os::unix::process::CommandExt;
    let plan = match Plan::load(root) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let Some(r) = plan.roles.iter().find(|r| r.name == role && !r.is_human()) else {
        return Error::not_found(format!(
            "no agent role '{}' in {}",
            crate::text::escape(role),
            plan.source.path().display()
        ));
    };
    let a = match args(&plan, r) {
        Ok(a) => a,
        Err(e) => return e,
    };
    if let Err(e) = scope_out() {
        return e;
    }
    let e = Command::new(bwrap)
        .args(a)
        .args(["--", "sh", "-c", cmd])
        .exec();
    Error::env(format!(
        "cannot run the sandbox program {}: {e}",
        crate::text::escape(bwrap)
    ))
}
