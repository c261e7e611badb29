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

/// One mount of the sandbox, in bubblewrap's words: `op` (`--bind`,
/// `--ro-bind`, `--tmpfs`) from `src` (none for a tmpfs) onto `dest`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mount {
    op: &'static str,
    src: Option<PathBuf>,
    dest: PathBuf,
}

impl Mount {
    fn same(op: &'static str, p: &Path) -> Mount {
        Mount {
            op,
            src: Some(p.to_path_buf()),
            dest: p.to_path_buf(),
        }
    }
    fn onto(op: &'static str, src: &Path, dest: &Path) -> Mount {
        Mount {
            op,
            src: Some(src.to_path_buf()),
            dest: dest.to_path_buf(),
        }
    }
    fn tmpfs(dest: &Path) -> Mount {
        Mount {
            op: "--tmpfs",
            src: None,
            dest: dest.to_path_buf(),
        }
    }
}

/// The mounts in the order bubblewrap must make them. A mount covers
/// everything made before it below its destination, so a mount at a
/// shallower path goes first: the private home at `$HOME` before a project
/// that lives inside the home folder (`~/code/proj`), the project before a
/// home that lives inside it. Mounts at the same depth keep the order they
/// were listed in (the later one wins on the same path).
fn ordered(mut mounts: Vec<Mount>) -> Vec<Mount> {
    mounts.sort_by_key(|m| m.dest.components().count());
    mounts
}

/// `rel` below `base` (a folder no agent can replace: the canonical
/// project root), checked as what the sandbox may bind: every component a
/// real folder, none a link, the last one owned by this user. An agent can
/// write inside its worktree, its queue folders and its launcher folder; a
/// link planted there would make the next start bind whatever it points at
/// (the project's `.swarmforge/`, the person's home, `/`), so none is
/// followed (docs/security.md, "What an agent can write").
fn real_dir(base: &Path, rel: &Path, make: bool) -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut at = base.to_path_buf();
    let mut last = None;
    for c in rel.components() {
        match c {
            std::path::Component::Normal(n) => at.push(n),
            std::path::Component::CurDir => continue,
            _ => {
                return Err(Error::bad_file(
                    base.join(rel),
                    "not a plain path below the project root, so the sandbox will not bind it",
                ))
            }
        }
        let mut meta = std::fs::symlink_metadata(&at);
        if make
            && meta
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            // Every folder above is real (checked on the way down), so
            // this makes it where it is named; a racing maker is fine.
            match std::fs::create_dir(&at) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io(&at, e)),
            }
            meta = std::fs::symlink_metadata(&at);
        }
        let meta = meta.map_err(|e| Error::io(&at, e))?;
        if !meta.file_type().is_dir() {
            let what = if meta.file_type().is_symlink() {
                "a link"
            } else {
                "not a folder"
            };
            return Err(Error::bad_file_hint(
                &at,
                format!("{what}, where a confined agent's sandbox needs a real folder: an agent may have planted it, and the sandbox follows no link"),
                "look at what it points to, then remove it (the link itself, not its target); `swarm up` makes the folder again",
            ));
        }
        last = Some(meta);
    }
    let owner = crate::launch::agents::claude_root::euid();
    if let Some(meta) = last.filter(|m| m.uid() != owner) {
        return Err(Error::bad_file_hint(
            &at,
            format!(
                "owned by uid {}, not by this user (uid {owner}), so the sandbox will not bind it",
                meta.uid()
            ),
            "give it back to the user who runs the swarm (chown), or remove it",
        ));
    }
    Ok(at)
}

/// [`real_dir`] for `p` inside the project (made if missing); a path
/// outside the project is the person's own choice and is only resolved.
fn project_dir(root: &Path, project_root: &Path, p: &Path) -> Result<PathBuf> {
    match p
        .strip_prefix(project_root)
        .or_else(|_| p.strip_prefix(root))
    {
        Ok(rel) => real_dir(root, rel, true),
        Err(_) => Ok(canon(p)),
    }
}

/// The folders on PATH (and this binary's own, which holds the agent
/// helpers) that the sandbox would hide, each given back read-only: those
/// under the private `/tmp` (a build tree) and under the person's home
/// (`npm install -g` into `~/.npm-global`, nvm's node, `~/.cargo/bin`,
/// `~/.local/bin`). A link in such a folder (npm's `bin/claude ->
/// ../lib/node_modules/...`) gets its target's package tree too, or it
/// would dangle inside. Never the home folder itself or a folder above it,
/// and nothing inside the project (mounted on its own).
fn program_mounts(hidden: &[PathBuf], home: Option<&Path>, root: &Path) -> Vec<Mount> {
    const MAX_ENTRIES: usize = 4096;
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf)),
    );
    let wanted = |d: &Path| {
        d.is_absolute()
            && hidden.iter().any(|h| d.starts_with(h) && d != h)
            && !home.is_some_and(|h| h.starts_with(d))
            && !d.starts_with(root)
            && !root.starts_with(d)
    };
    let mut out: Vec<PathBuf> = Vec::new();
    let add = |d: PathBuf, out: &mut Vec<PathBuf>| {
        if wanted(&d) && d.is_dir() && !out.iter().any(|o| d.starts_with(o)) {
            out.retain(|o| !o.starts_with(&d));
            out.push(d);
        }
    };
    for d in dirs.iter().filter(|d| d.is_absolute()) {
        let d = canon(d);
        if !wanted(&d) {
            continue;
        }
        add(program_tree(&d), &mut out);
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten().take(MAX_ENTRIES) {
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                if let Some(parent) = e
                    .path()
                    .canonicalize()
                    .ok()
                    .and_then(|t| t.parent().map(Path::to_path_buf))
                {
                    add(program_tree(&parent), &mut out);
                }
            }
        }
    }
    out.iter().map(|d| Mount::same("--ro-bind", d)).collect()
}

/// The bwrap arguments for `r` (without the command): the mounts
/// [`ordered`], each source an agent could write checked by [`real_dir`].
pub fn args(plan: &Plan, r: &PlannedRole) -> Result<Vec<String>> {
    let project = &plan.project;
    let root = canon(&project.root);
    let in_project = |p: &Path| project_dir(&root, &project.root, p);
    let own = match r.worktree_path.strip_prefix(&project.root) {
        Ok(rel) => real_dir(&root, rel, false)?,
        Err(_) => canon(&r.worktree_path),
    };
    let own_dir = in_project(&agent_own_dir(project, &r.name))?;
    let home = real_dir(&own_dir, Path::new("home"), true)?;
    let var = |k: &str| std::env::var_os(k);
    // The person's home, resolved (a symlinked HOME is mounted where it
    // really is, which the unresolved path reaches through the same link).
    let person_home = var("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .map(|h| canon(&h))
        .filter(|h| h.parent().is_some());
    let mut m: Vec<Mount> = vec![Mount::tmpfs(Path::new("/tmp"))];
    // A private home at the person's home path, and in it the state folder
    // of the role's own CLI, shared (launch/cli_state.rs).
    if let Some(h) = &person_home {
        m.push(Mount::onto("--bind", &home, h));
    }
    let hidden: Vec<PathBuf> = std::iter::once(PathBuf::from("/tmp"))
        .chain(person_home.clone())
        .collect();
    m.extend(program_mounts(&hidden, person_home.as_deref(), &root));
    // The project, read-only (also where it lies under /tmp or the home).
    m.push(Mount::same("--ro-bind", &root));
    // The policy is the person's, also for an agent at the root.
    for f in [project.config_file(), project.swarmforge_conf()] {
        if std::fs::symlink_metadata(&f).is_ok_and(|t| t.is_file()) {
            m.push(Mount::same(
                "--ro-bind",
                &root.join(f.strip_prefix(&project.root).unwrap_or(&f)),
            ));
        }
    }
    // Its own worktree, writable.
    m.push(Mount::same("--bind", &own));
    // What lies inside it but is not its own: read-only again.
    let swarmforge = root.join(".swarmforge");
    if swarmforge.starts_with(&own) {
        m.push(Mount::same("--ro-bind", &swarmforge));
    }
    for o in &plan.roles {
        let wt = canon(&o.worktree_path);
        if wt != own && wt.starts_with(&own) && wt.exists() {
            m.push(Mount::same("--ro-bind", &wt));
        }
    }
    // What its git needs to commit, and not git's config, hooks or the
    // pointers that say where its git folder is.
    m.extend(git_mounts(&root, &own)?);
    // Its own queue folders (under .swarmforge when it works in the root).
    let handoffs = in_project(&crate::protocol::layout::Worktree::new(&own).handoffs())?;
    m.push(Mount::same("--bind", &handoffs));
    // Its own launcher folder (conversation id, hook state, turn-end
    // requests, and its forum and board requests: the forum and the board
    // are handoffd's to write, forum/requests.rs). Not the telemetry:
    // activity and usage are written outside (see the module doc), budget
    // raises are a person's.
    m.push(Mount::same("--bind", &own_dir));
    // Other agents' private homes (copies of the person's CLI state):
    // hidden, made first if need be (an agent started later has one too).
    for o in plan
        .roles
        .iter()
        .filter(|o| o.name != r.name && !o.is_human())
    {
        let theirs = in_project(&home_dir(project, &o.name))?;
        m.push(Mount::tmpfs(&theirs));
    }
    // Secrets of the person's side: the cockpit's token and the A2A
    // server's token, hidden, also when their server starts after the
    // agent (the folders are made now); a bridge credentials file kept in
    // the project, emptied.
    for d in [project.serve_dir(), project.a2a_dir()] {
        m.push(Mount::tmpfs(&in_project(&d)?));
    }
    if let Some(f) = plan.config.bridge_credentials_file.as_deref() {
        let f = canon(&project.root.join(f));
        if f.starts_with(&root) && f.is_file() {
            m.push(Mount::onto("--ro-bind", Path::new("/dev/null"), &f));
        }
    }
    // The person's session: its bus, its systemd manager, its keyring and
    // agent sockets live in the runtime folder.
    if let Some(run) = runtime_dir() {
        m.push(Mount::tmpfs(&run));
    }
    let cli = crate::launch::trust::cli_of(r);
    if let Some(cli) = cli {
        m.extend(cli_mounts(cli, &home, person_home.as_deref(), &own, &var)?);
    }
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let mut a: Vec<String> = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-pid",
        "--die-with-parent",
    ]
    .map(String::from)
    .to_vec();
    // Its forum and board writes go through handoffd (forum/requests.rs).
    a.extend([
        "--setenv".into(),
        crate::forum::requests::CONFINED_ENV.into(),
        r.name.clone(),
    ]);
    if person_home.is_none() {
        a.extend(["--setenv".into(), "HOME".into(), s(&home)]);
        m.push(Mount::same("--bind", &home));
    }
    // The person's agent sockets are not passed in (the runtime folder above
    // hides the rest of the session).
    for v in PERSON_SOCKETS {
        a.extend(["--unsetenv".into(), (*v).into()]);
    }
    for mount in ordered(m) {
        a.push(mount.op.into());
        a.extend(mount.src.as_deref().map(s));
        a.push(s(&mount.dest));
    }
    a.extend(["--chdir".into(), s(&own)]);
    Ok(a)
}

/// Variables that hand a process the person's session: ssh-agent, gpg-agent,
/// the session bus, X11 and Wayland displays, a Docker daemon.
const PERSON_SOCKETS: &[&str] = &[
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "DOCKER_HOST",
];

/// The person's runtime folder (`$XDG_RUNTIME_DIR`, else
/// `/run/user/<uid>`): D-Bus, systemd's user manager (whose
/// `systemd-run --user` runs anything outside), keyrings, Wayland.
fn runtime_dir() -> Option<PathBuf> {
    let uid = crate::launch::agents::claude_root::euid();
    std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain(std::iter::once(PathBuf::from(format!("/run/user/{uid}"))))
        .map(|d| canon(&d))
        .find(|d| d.is_absolute() && d != Path::new("/") && d.is_dir())
}

/// The role's CLI state folder, shared writable, with what the person's
/// own unconfined sessions load from it read-only; the files a CLI keeps
/// outside it.
fn cli_mounts(
    cli: crate::launch::agents::Cli,
    home: &Path,
    person_home: Option<&Path>,
    own: &Path,
    var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Vec<Mount>> {
    use crate::launch::agents::Cli;
    let mut m = Vec::new();
    let shared = cli_state::folder(cli, var);
    if let Some(dir) = &shared {
        crate::fsx::ensure_dirs(&[dir]).map_err(|e| Error::io(dir, e))?;
        m.push(Mount::same("--bind", &canon(dir)));
        // What the person's own unconfined sessions load from it (user
        // settings, plugins, commands, rules, memory), read-only.
        for (f, shape) in cli_state::read_only(cli, &canon(dir)) {
            cli_state::ensure_read_only(&f, shape)?;
            m.push(Mount::onto("--ro-bind", &canon(&f), &f));
        }
    }
    let shared = shared.map(|d| canon(&d));
    match cli {
        Cli::Gemini => {
            // Trust kept elsewhere (GEMINI_CLI_TRUSTED_FOLDERS_PATH), which a
            // private home or /tmp would hide: what `swarm trust` wrote.
            if let Some(f) = cli_state::gemini_trusted_folders(var).filter(|f| {
                f.is_file() && !shared.as_ref().is_some_and(|d| canon(f).starts_with(d))
            }) {
                m.push(Mount::onto("--ro-bind", &canon(&f), &canon(&f)));
            }
        }
        Cli::Codex => {
            // Codex's own sandbox mounts over `~/.agents` (the person's
            // skills) and cannot make the folder in a read-only root: the
            // person's, read-only, or an empty one of its own.
            match person_home
                .map(|h| h.join(".agents"))
                .filter(|d| d.is_dir())
            {
                Some(d) => m.push(Mount::same("--ro-bind", &canon(&d))),
                None => {
                    real_dir(home, Path::new(".agents"), true)?;
                }
            }
        }
        Cli::Claude => {
            if let Some(person) = cli_state::claude_json(var) {
                cli_state::seed_claude_json(&person, &home.join(".claude.json"), own)?;
            }
        }
    }
    Ok(m)
}

/// The mounts that let the agent commit in its worktree (docs/security.md,
/// "Confinement" and "Branches"): the project's `.git` stays read-only
/// except the object store and the worktree's own git folder
/// (`.git/worktrees/<id>`, where its pinned branch lives,
/// launch/role_branch.rs); `.git/refs`, `packed-refs` and the refs' logs
/// stay read-only, so no other branch moves. The pointers that say where a
/// worktree's git folder is (the worktree's `.git` file, the git folder's
/// `gitdir` and `commondir`) are read-only too: rewritten, they would make
/// the person's own git in that worktree read a config (and run an
/// fsmonitor or hook) of the agent's. A role working in the root gets
/// `.git` itself (its index, HEAD and branch live there, so it can still
/// move branches) but never `config` or `hooks`, which the person's own
/// git would run, nor the refs a commit never moves.
fn git_mounts(root: &Path, own: &Path) -> Result<Vec<Mount>> {
    let git = root.join(".git");
    if !std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir()) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    if own != root {
        out.push(Mount::same("--ro-bind", &git));
        if let Some(gitdir) = worktree_gitdir(root, own)? {
            out.push(Mount::same("--bind", &gitdir));
            for f in ["gitdir", "commondir"] {
                let p = gitdir.join(f);
                if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                    out.push(Mount::same("--ro-bind", &p));
                }
            }
            out.push(Mount::same("--ro-bind", &own.join(".git")));
        }
        out.push(Mount::same(
            "--bind",
            &real_dir(root, Path::new(".git/objects"), true)?,
        ));
        return Ok(out);
    }
    out.push(Mount::same("--bind", &git));
    for f in ["config", "hooks", "commondir"] {
        let p = git.join(f);
        if p.exists() {
            out.push(Mount::same("--ro-bind", &p));
        }
    }
    // Refs a commit never moves, read-only (made first, or the agent could
    // make them): `refs/replace` would swap any object the person's git
    // shows (a reviewed commit for another), tags and remote-tracking
    // branches would mislead a release or a push.
    for d in ["replace", "tags", "remotes", "notes"] {
        let rel = Path::new(".git/refs").join(d);
        out.push(Mount::same("--ro-bind", &real_dir(root, &rel, true)?));
    }
    Ok(out)
}

/// The git folder of the worktree `own`, believed only when it links
/// back (sys::git::linked_gitdir); the repair when it does not.
fn worktree_gitdir(root: &Path, own: &Path) -> Result<Option<PathBuf>> {
    crate::sys::git::linked_gitdir(root, own).map_err(|why| {
        Error::env(format!(
            "{why}, so the sandbox will not give this role a git folder\n  hint: run `git worktree repair {}` from the project root (or remove the worktree; `swarm up` adds it again)",
            own.display()
        ))
    })
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
        AgentSpec::Preset { headless: true, .. } | AgentSpec::Api => Ok(cmd.to_string()),
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
