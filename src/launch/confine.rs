//! Confinement (docs/security.md, "Confinement"): by default (`launch:
//! {confine: false}` turns it off) every agent runs inside a bubblewrap
//! sandbox where the whole system is read-only except its own worktree,
//! its own queue folders, its own launcher folder (where it asks handoffd
//! for its forum and board writes and leaves its turn-end requests), a
//! private `/tmp` and a private home holding its CLI's state folder
//! (launch/cli_state.rs); the project's `.swarmforge/` (approvals, pause,
//! the daemon's files, the forum, the board, the telemetry: activity,
//! usage, budget raises), other roles' worktrees and inboxes are
//! read-only, and the cockpit's token folder and other roles' homes are
//! hidden. Its own pid namespace hides the other agents' processes (and
//! their environments).
//!
//! Bubblewrap, not Landlock: a mount namespace can also hide (the token)
//! and give a private `/tmp` and home, which Landlock's allow-lists cannot;
//! it needs unprivileged user namespaces (or root), which [`check`] tries
//! once and explains when missing.
//!
//! The invariant: everything an agent of a confined swarm runs starts from
//! the one command [`wrap_shell`] builds, both headless and in tmux. What
//! records an agent's activity and usage is not the agent's and runs
//! outside ([`wrap_agent`]): a headless turn (`swarm turn`) reads its CLI's
//! stream unconfined and confines the CLI alone; in tmux the confined hook
//! leaves a turn-end request the daemon reads (agents/turn_end.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, Result};
use crate::launch::cli_state;
use crate::launch::plan::{Plan, PlannedRole};
use crate::protocol::launch_files::agent_own_dir;
use crate::protocol::layout::Project;

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

/// Tries a sandbox once: bwrap is installed and can create its namespaces.
pub fn probe() -> Option<Problem> {
    let bwrap = program();
    let out = Command::new(&bwrap)
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--unshare-pid", "--die-with-parent", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(Problem {
            message: format!(
                "agents are confined by default, but bubblewrap cannot make a sandbox here: {} fails: {}",
                crate::text::escape(&bwrap),
                crate::text::escape(String::from_utf8_lossy(&o.stderr).trim())
            ),
            fix: format!("bubblewrap needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0), or run as root; {OPT_OUT}"),
        }),
        Err(e) => Some(Problem {
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

/// The folder to give back for a program folder on PATH: an npm
/// `node_modules/.bin` holds only links into its packages (`codex ->
/// ../@openai/codex/bin/codex.js`), so the whole `node_modules` goes back,
/// or the links would dangle inside the sandbox.
fn program_tree(d: &Path) -> PathBuf {
    d.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .unwrap_or(d)
        .to_path_buf()
}

fn canon(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// The bwrap arguments for `r` (without the command), mounts in order: a
/// later mount covers an earlier one.
pub fn args(plan: &Plan, r: &PlannedRole) -> Result<Vec<String>> {
    let project = &plan.project;
    let root = canon(&project.root);
    let own = canon(&r.worktree_path);
    let home = home_dir(project, &r.name);
    crate::fsx::ensure_dirs(&[&home]).map_err(|e| Error::io(&home, e))?;
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let mut a: Vec<String> = vec![
        "--ro-bind".into(),
        "/".into(),
        "/".into(),
        "--dev".into(),
        "/dev".into(),
        "--proc".into(),
        "/proc".into(),
        "--tmpfs".into(),
        "/tmp".into(),
        "--unshare-pid".into(),
        "--die-with-parent".into(),
        // Its forum and board writes go through handoffd (forum/requests.rs).
        "--setenv".into(),
        crate::forum::requests::CONFINED_ENV.into(),
        r.name.clone(),
    ];
    let bind = |a: &mut Vec<String>, kind: &str, p: &Path| {
        a.extend([kind.to_string(), s(p), s(p)]);
    };
    // The private /tmp covers programs kept under /tmp (a build tree, the
    // folders on PATH, this binary's own, which holds the agent helpers):
    // back, read-only, or the agent could not run them.
    let mut programs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    programs.extend(
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf)),
    );
    let mut seen = std::collections::HashSet::new();
    for d in programs.iter().map(|d| program_tree(&canon(d))) {
        if d.starts_with("/tmp") && d.is_dir() && seen.insert(d.clone()) {
            bind(&mut a, "--ro-bind", &d);
        }
    }
    // And a project kept under /tmp: back, read-only.
    bind(&mut a, "--ro-bind", &root);
    // Its own worktree, writable.
    bind(&mut a, "--bind", &own);
    // What lies inside it but is not its own: read-only again.
    let swarmforge = root.join(".swarmforge");
    if swarmforge.starts_with(&own) {
        bind(&mut a, "--ro-bind", &swarmforge);
    }
    for o in &plan.roles {
        let wt = canon(&o.worktree_path);
        if wt != own && wt.starts_with(&own) && wt.exists() {
            bind(&mut a, "--ro-bind", &wt);
        }
    }
    // What its git needs to commit, and not git's config or hooks.
    for (kind, p) in git_binds(&root, &own) {
        bind(&mut a, kind, &p);
    }
    // Its own queue folders (under .swarmforge when it works in the root).
    let handoffs = crate::protocol::layout::Worktree::new(&own).handoffs();
    crate::fsx::ensure_dirs(&[&handoffs]).map_err(|e| Error::io(&handoffs, e))?;
    bind(&mut a, "--bind", &handoffs);
    // Its own launcher folder (conversation id, hook state, turn-end
    // requests, and its forum and board requests: the forum and the board
    // are handoffd's to write, forum/requests.rs). Not the telemetry:
    // activity and usage are written outside (see the module doc), budget
    // raises are a person's.
    let own_dir = agent_own_dir(project, &r.name);
    let writable = vec![own_dir];
    for d in writable {
        crate::fsx::ensure_dirs(&[&d]).map_err(|e| Error::io(&d, e))?;
        bind(&mut a, "--bind", &canon(&d));
    }
    // Other agents' private homes (copies of the person's CLI state):
    // hidden, made first if need be (an agent started later has one too).
    for o in plan
        .roles
        .iter()
        .filter(|o| o.name != r.name && !o.is_human())
    {
        let theirs = home_dir(project, &o.name);
        crate::fsx::ensure_dirs(&[&theirs]).map_err(|e| Error::io(&theirs, e))?;
        a.extend(["--tmpfs".into(), s(&canon(&theirs))]);
    }
    // The cockpit's token: not even readable, also when the cockpit starts
    // after the agent (the folder is made now, and hidden).
    let serve = project.serve_dir();
    crate::fsx::ensure_dirs(&[&serve]).map_err(|e| Error::io(&serve, e))?;
    a.extend(["--tmpfs".into(), s(&canon(&serve))]);
    // A private home at the person's home path, and in it the state folder
    // of the role's own CLI, shared (launch/cli_state.rs).
    let var = |k: &str| std::env::var_os(k);
    let person_home = var("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let home_at = person_home.clone().unwrap_or_else(|| home.clone());
    a.extend(["--bind".into(), s(&home), s(&home_at)]);
    if person_home.is_none() {
        a.extend(["--setenv".into(), "HOME".into(), s(&home)]);
    }
    if let Some(cli) = crate::launch::trust::cli_of(r) {
        if let Some(dir) = cli_state::folder(cli, &var) {
            crate::fsx::ensure_dirs(&[&dir]).map_err(|e| Error::io(&dir, e))?;
            let dir = canon(&dir);
            bind(&mut a, "--bind", &dir);
            // What the person's own unconfined sessions load from it (user
            // settings, plugins, commands, rules, memory), read-only.
            for (f, shape) in cli_state::read_only(cli, &dir) {
                cli_state::ensure_read_only(&f, shape)?;
                let real = canon(&f);
                a.extend(["--ro-bind".into(), s(&real), s(&f)]);
            }
        }
        if cli == crate::launch::agents::Cli::Gemini {
            // Trust kept elsewhere (GEMINI_CLI_TRUSTED_FOLDERS_PATH), which a
            // private home or /tmp would hide: what `swarm trust` wrote.
            let shared = cli_state::folder(cli, &var).map(|d| canon(&d));
            if let Some(f) = cli_state::gemini_trusted_folders(&var).filter(|f| {
                f.is_file() && !shared.as_ref().is_some_and(|d| canon(f).starts_with(d))
            }) {
                a.extend(["--ro-bind".into(), s(&canon(&f)), s(&f)]);
            }
        }
        if cli == crate::launch::agents::Cli::Codex {
            // Codex's own sandbox mounts over `~/.agents` (the person's
            // skills) and cannot make the folder in a read-only root: the
            // person's, read-only, or an empty one of its own.
            let skills = person_home.as_ref().map(|h| h.join(".agents"));
            match skills.filter(|d| d.is_dir()) {
                Some(d) => bind(&mut a, "--ro-bind", &canon(&d)),
                None => {
                    let d = home.join(".agents");
                    crate::fsx::ensure_dirs(&[&d]).map_err(|e| Error::io(&d, e))?;
                }
            }
        }
        if cli == crate::launch::agents::Cli::Claude {
            if let Some(person) = cli_state::claude_json(&var) {
                cli_state::seed_claude_json(&person, &home.join(".claude.json"), &own)?;
            }
        }
    }
    a.extend(["--chdir".into(), s(&own)]);
    Ok(a)
}

/// The mounts that let the agent commit in its worktree (docs/security.md,
/// "Confinement" and "Branches"): the project's `.git` stays read-only
/// except the object store and the worktree's own git folder
/// (`.git/worktrees/<id>`, read from the worktree's `.git` file), where
/// its pinned branch lives (launch/role_branch.rs); `.git/refs`,
/// `packed-refs` and the refs' logs stay read-only, so no other branch
/// moves. A role working in the root gets `.git` itself (its index, HEAD
/// and branch live there, so it can still move branches) but never
/// `config` or `hooks`, which the person's own git would run, nor the refs
/// a commit never moves.
fn git_binds(root: &Path, own: &Path) -> Vec<(&'static str, PathBuf)> {
    let git = root.join(".git");
    if !git.is_dir() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let objects = git.join("objects");
    if own != root {
        out.push(("--ro-bind", git.clone()));
        let pointer = crate::fsx::read_bounded(&own.join(".git"), 4096).ok();
        let gitdir = pointer
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|t| t.trim().strip_prefix("gitdir:"))
            .map(|d| canon(Path::new(d.trim())))
            .filter(|d| d.starts_with(git.join("worktrees")) && d.is_dir());
        out.extend(gitdir.map(|d| ("--bind", d)));
        if crate::fsx::ensure_dirs(&[&objects]).is_ok() {
            out.push(("--bind", objects));
        }
        return out;
    }
    out.push(("--bind", git.clone()));
    for f in ["config", "hooks"] {
        let p = git.join(f);
        if p.exists() {
            out.push(("--ro-bind", p));
        }
    }
    // Refs a commit never moves, read-only (made first, or the agent could
    // make them): `refs/replace` would swap any object the person's git
    // shows (a reviewed commit for another), tags and remote-tracking
    // branches would mislead a release or a push.
    for d in ["replace", "tags", "remotes", "notes"] {
        let p = git.join("refs").join(d);
        if crate::fsx::ensure_dirs(&[&p]).is_ok() {
            out.push(("--ro-bind", p));
        }
    }
    out
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
        AgentSpec::Preset { headless: true, .. } | AgentSpec::Api => Ok(cmd.to_string()),
        _ => wrap_shell(plan, r, cmd),
    }
}

/// `cmd` (a shell command) as it runs for `r`: unchanged when confinement
/// is off, else `bwrap <args> -- sh -c <cmd>`.
pub fn wrap_shell(plan: &Plan, r: &PlannedRole, cmd: &str) -> Result<String> {
    if !enabled(plan) || r.is_human() {
        return Ok(cmd.to_string());
    }
    let q = crate::sys::shell::quote;
    let mut out = q(&program());
    for a in args(plan, r)? {
        out.push(' ');
        out.push_str(&q(&a));
    }
    out.push_str(" -- sh -c ");
    out.push_str(&q(cmd));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn an_npm_bin_folder_gives_back_its_node_modules() {
        assert_eq!(
            super::program_tree(Path::new("/tmp/x/target/agent-clis/node_modules/.bin")),
            Path::new("/tmp/x/target/agent-clis/node_modules")
        );
        assert_eq!(
            super::program_tree(Path::new("/tmp/b/bin")),
            Path::new("/tmp/b/bin")
        );
    }
}
