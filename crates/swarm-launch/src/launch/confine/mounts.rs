//! The mounts of one role's sandbox (docs/security.md, "Confinement"):
//! what the agent may write, what it may only read, what is hidden, and the
//! order bubblewrap makes them in.

use std::path::{Path, PathBuf};

use super::home_dir;
use super::paths::{canon, program_tree, project_dir, real_dir};
use crate::error::{Error, Result};
use crate::launch::cli_state;
use crate::launch::plan::{Plan, PlannedRole};
use crate::protocol::launch_files::agent_own_dir;

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
    // A folder on PATH reached through a link under a hidden one (NixOS's
    // `/run/current-system/sw/bin`, a `~/bin` linked elsewhere): the folder
    // it resolves to, at the path PATH names.
    let mut linked: Vec<Mount> = Vec::new();
    let add = |d: PathBuf, out: &mut Vec<PathBuf>| {
        if wanted(&d) && d.is_dir() && !out.iter().any(|o| d.starts_with(o)) {
            out.retain(|o| !o.starts_with(&d));
            out.push(d);
        }
    };
    for raw in dirs.iter().filter(|d| d.is_absolute()) {
        let d = canon(raw);
        if !wanted(&d) {
            if wanted(raw) && d.is_dir() && !linked.iter().any(|m| &m.dest == raw) {
                linked.push(Mount::onto("--ro-bind", &d, raw));
            }
            continue;
        }
        add(program_tree(&d), &mut out);
        // A folder of programs on PATH, not a store of the swarm's.
        let Ok(rd) = d.read_dir() else {
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
    out.iter()
        .map(|d| Mount::same("--ro-bind", d))
        .chain(linked)
        .collect()
}

/// Where one role's sandbox is: the project root (resolved), the role's
/// worktree, its launcher folder and private home (each checked by
/// [`real_dir`]), and the person's home, resolved (a symlinked HOME is
/// mounted where it really is, which the unresolved path reaches through
/// the same link).
struct Site<'a> {
    plan: &'a Plan,
    role: &'a PlannedRole,
    root: PathBuf,
    own: PathBuf,
    own_dir: PathBuf,
    home: PathBuf,
    person_home: Option<PathBuf>,
}

impl<'a> Site<'a> {
    fn of(plan: &'a Plan, role: &'a PlannedRole) -> Result<Site<'a>> {
        let project = &plan.project;
        let root = canon(&project.root);
        let own = match role.worktree_path.strip_prefix(&project.root) {
            Ok(rel) => real_dir(&root, rel, false)?,
            Err(_) => canon(&role.worktree_path),
        };
        let own_dir = project_dir(&root, &project.root, &agent_own_dir(project, &role.name))?;
        let home = real_dir(&own_dir, Path::new("home"), true)?;
        let person_home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .map(|h| canon(&h))
            .filter(|h| h.parent().is_some());
        Ok(Site {
            plan,
            role,
            root,
            own,
            own_dir,
            home,
            person_home,
        })
    }

    /// `p` inside the project, checked ([`project_dir`]).
    fn in_project(&self, p: &Path) -> Result<PathBuf> {
        project_dir(&self.root, &self.plan.project.root, p)
    }

    /// A private `/tmp`, a private home at the person's home path, and the
    /// programs both would hide.
    fn private(&self) -> Vec<Mount> {
        let mut m = vec![Mount::tmpfs(Path::new("/tmp"))];
        match &self.person_home {
            Some(h) => m.push(Mount::onto("--bind", &self.home, h)),
            None => m.push(Mount::same("--bind", &self.home)),
        }
        let hidden: Vec<PathBuf> = [PathBuf::from("/tmp"), PathBuf::from("/run")]
            .into_iter()
            .chain(self.person_home.clone())
            .collect();
        m.extend(program_mounts(
            &hidden,
            self.person_home.as_deref(),
            &self.root,
        ));
        m
    }

    /// The project read-only (also where it lies under /tmp or the home),
    /// its policy read-only also for an agent at the root, the role's own
    /// worktree, queue folders and launcher folder writable, and what lies
    /// inside them but is not the role's read-only again.
    fn project(&self) -> Result<Vec<Mount>> {
        let (project, root, own) = (&self.plan.project, &self.root, &self.own);
        let mut m = vec![Mount::same("--ro-bind", root)];
        for f in [project.config_file(), project.swarmforge_conf()] {
            if std::fs::symlink_metadata(&f).is_ok_and(|t| t.is_file()) {
                let rel = f.strip_prefix(&project.root).unwrap_or(&f);
                m.push(Mount::same("--ro-bind", &root.join(rel)));
            }
        }
        m.push(Mount::same("--bind", own));
        let swarmforge = root.join(".swarmforge");
        if swarmforge.starts_with(own) {
            m.push(Mount::same("--ro-bind", &swarmforge));
        }
        for o in &self.plan.roles {
            let wt = canon(&o.worktree_path);
            if &wt != own && wt.starts_with(own) && wt.exists() {
                m.push(Mount::same("--ro-bind", &wt));
            }
        }
        // What its git needs to commit, and not git's config, hooks or the
        // pointers that say where its git folder is.
        m.extend(self.git_mounts()?);
        // Its own queue folders (under .swarmforge when it works in the root).
        let handoffs = self.in_project(&crate::protocol::layout::Worktree::new(own).handoffs())?;
        m.push(Mount::same("--bind", &handoffs));
        // Its own launcher folder (conversation id, hook state, turn-end
        // requests, and its forum and board requests: the forum and the
        // board are handoffd's to write, forum/requests.rs). Not the
        // telemetry: activity and usage are written outside (see the module
        // doc), budget raises are a person's.
        m.push(Mount::same("--bind", &self.own_dir));
        Ok(m)
    }

    /// The mounts that let the agent commit in its worktree (docs/security.md,
    /// "Confinement" and "Branches"): the project's `.git` stays read-only
    /// except the object store (the role's quarantine,
    /// [`Site::object_mounts`]) and the worktree's own git folder
    /// (`.git/worktrees/<id>`, where its pinned branch lives,
    /// launch/role_branch.rs); `.git/refs`, `packed-refs` and the refs' logs
    /// stay read-only, so no other branch moves. The pointers that say where a
    /// worktree's git folder is (the worktree's `.git` file, the git folder's
    /// `gitdir` and `commondir`) are read-only too: rewritten, they would make
    /// the person's own git in that worktree read a config (and run an
    /// fsmonitor or hook) of the agent's. A role working in the root gets
    /// `.git` itself (its index, HEAD and branch live there, so it can still
    /// move branches) but never `config` or `hooks`, which the person's own
    /// git would run, nor the refs a commit never moves. What it could make
    /// there that the person's git would follow, a `commondir`, no mount can
    /// stop (a mount point would be a file git reads): handoffd moves one aside
    /// as soon as it appears (daemon/git_guard.rs), and no agent starts while
    /// one is there.
    fn git_mounts(&self) -> Result<Vec<Mount>> {
        let (root, own) = (&self.root, &self.own);
        let git = root.join(".git");
        if !std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir()) {
            return Ok(Vec::new());
        }
        if let Some(planted) = crate::sys::git::planted_commondir(root) {
            return Err(Error::env(format!(
                "{}: the project's own git folder has a `commondir`, which git makes only in a linked worktree's folder; your own git in the project would follow it (to a config and hooks of whoever wrote it, maybe an agent working in the root), so no agent starts\n  hint: look at what it names (`cat {0}`), then remove it (`rm {0}`); `swarm doctor` says where handoffd put any it moved aside",
                planted.display()
            )));
        }
        let objects = self.object_mounts(&git)?;
        if own != root {
            return linked_git_mounts(root, own, &git, objects);
        }
        let mut out = vec![Mount::same("--bind", &git)];
        // What the person's git runs or follows: its config and hooks, the
        // other worktrees' git folders (their `commondir` and `gitdir`), and
        // `info/` (grafts would rewrite the history it shows).
        for f in ["config", "hooks", "worktrees", "info"] {
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
        out.extend(objects);
        Ok(out)
    }

    /// The object store as the agent's git sees it: `.git/objects` is the
    /// role's own quarantine, writable, and the project's store is
    /// read-only at [`STORE_INSIDE`], named in the quarantine's
    /// `info/alternates` so git reads every object it already has. What
    /// the agent writes reaches the store only through handoffd, which
    /// hashes each object first (daemon/objects/): a loose object
    /// rewritten under a reviewed id is refused there, and the store
    /// itself cannot be written from inside.
    fn object_mounts(&self, git: &Path) -> Result<Vec<Mount>> {
        let project = &self.plan.project;
        let q = self.in_project(&project.object_quarantine(&self.role.name))?;
        for d in ["info", "pack"] {
            real_dir(&q, Path::new(d), true)?;
        }
        let info = q.join("info");
        let alternates = format!("{STORE_INSIDE}\n");
        crate::fsx::HeldDir::open(&info)
            .and_then(|d| {
                d.remove("alternates")?;
                d.publish("alternates", alternates.as_bytes())
            })
            .map_err(|e| {
                Error::bad_file_hint(
                    info.join("alternates"),
                    format!("cannot write the role's object alternates: {e}"),
                    "remove the role's quarantine folder (handoffd takes in what it holds first: run `swarm down` and `swarm up`), then start it again",
                )
            })?;
        let store = real_dir(&self.root, Path::new(".git/objects"), false)?;
        Ok(vec![
            Mount::onto("--bind", &q, &git.join("objects")),
            Mount::onto("--ro-bind", &store, Path::new(STORE_INSIDE)),
        ])
    }

    /// What is the person's and not even readable: other agents' private
    /// homes (copies of the person's CLI state), the cockpit's and the A2A
    /// server's tokens (the folders made now, so also when the server starts
    /// after the agent), a bridge credentials file kept in the project, and
    /// the sockets of the person's session and of the system
    /// ([`system_sockets`]).
    fn hidden(&self) -> Result<Vec<Mount>> {
        let project = &self.plan.project;
        let mut m = Vec::new();
        for o in self
            .plan
            .roles
            .iter()
            .filter(|o| o.name != self.role.name && !o.is_human())
        {
            m.push(Mount::tmpfs(&self.in_project(&home_dir(project, &o.name))?));
        }
        for d in [project.serve_dir(), project.a2a_dir()] {
            m.push(Mount::tmpfs(&self.in_project(&d)?));
        }
        if let Some(f) = self.plan.config.bridge_credentials_file.as_deref() {
            let f = canon(&project.root.join(f));
            if f.starts_with(&self.root) && f.is_file() {
                m.push(Mount::onto("--ro-bind", Path::new("/dev/null"), &f));
            }
        }
        m.extend(system_sockets());
        Ok(m)
    }

    /// bwrap's words for `mounts`: namespaces, environment, the mounts
    /// [`ordered`], the working folder.
    fn render(&self, mounts: Vec<Mount>) -> Vec<String> {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let mut a: Vec<String> = super::BASE.map(String::from).to_vec();
        // Its forum and board writes go through handoffd (forum/requests.rs).
        a.extend([
            "--setenv".into(),
            crate::forum::requests::CONFINED_ENV.into(),
            self.role.name.clone(),
        ]);
        if self.person_home.is_none() {
            a.extend(["--setenv".into(), "HOME".into(), s(&self.home)]);
        }
        // The person's agent sockets are not passed in (the runtime folder
        // hides the rest of the session).
        for v in PERSON_SOCKETS {
            a.extend(["--unsetenv".into(), (*v).into()]);
        }
        for mount in ordered(mounts) {
            a.push(mount.op.into());
            a.extend(mount.src.as_deref().map(s));
            a.push(s(&mount.dest));
        }
        a.extend(["--chdir".into(), s(&self.own)]);
        a
    }
}

/// The bwrap arguments for `r` (without the command): the mounts
/// [`ordered`], each source an agent could write checked by [`real_dir`].
pub fn args(plan: &Plan, r: &PlannedRole) -> Result<Vec<String>> {
    let site = Site::of(plan, r)?;
    let mut m = site.private();
    m.extend(site.project()?);
    m.extend(site.hidden()?);
    if let Some(cli) = crate::launch::trust::cli_of(r) {
        let var = |k: &str| std::env::var_os(k);
        m.extend(cli_mounts(
            cli,
            &site.home,
            site.person_home.as_deref(),
            (&site.root, &site.own),
            &var,
        )?);
    }
    Ok(site.render(m))
}

/// Where a sandbox sees the project's object store, read-only: under the
/// private `/run`, so no path of the project's or the person's is taken.
pub const STORE_INSIDE: &str = "/run/swarm-handoff/objects";

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

/// The folders of the system's and the person's sockets, each an empty
/// one inside: a read-only mount does not stop a `connect()`, and behind
/// them run things outside the sandbox as the person or as root. `/run`
/// (and `/var/run` where it is not a link to it) holds Docker's,
/// containerd's, the system bus's; the person's runtime folder
/// (`$XDG_RUNTIME_DIR`, else `/run/user/<uid>`) their session bus, systemd's
/// user manager (whose `systemd-run --user` runs anything), keyrings,
/// Wayland. Given back read-only: the folder `/etc/resolv.conf` links into
/// when it is under `/run` (systemd-resolved's stub, resolvconf's,
/// NetworkManager's), or names would not resolve; and the programs on PATH
/// there ([`program_mounts`]).
fn system_sockets() -> Vec<Mount> {
    let run = Path::new("/run");
    let mut m = vec![Mount::tmpfs(run)];
    let var_run = Path::new("/var/run");
    if std::fs::symlink_metadata(var_run).is_ok_and(|t| t.is_dir()) {
        m.push(Mount::tmpfs(var_run));
    }
    if let Some(dir) = Path::new("/etc/resolv.conf")
        .canonicalize()
        .ok()
        .and_then(|f| f.parent().map(Path::to_path_buf))
        .filter(|d| d.starts_with(run) && d != run)
    {
        m.push(Mount::same("--ro-bind", &dir));
    }
    m.extend(
        runtime_dir()
            .filter(|d| !d.starts_with(run))
            .map(|d| Mount::tmpfs(&d)),
    );
    m
}

/// The person's runtime folder (`$XDG_RUNTIME_DIR`, else
/// `/run/user/<uid>`).
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
    (root, own): (&Path, &Path),
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
                // Its worktree and the folders above it in the project,
                // where Claude Code keeps a worktree's folder trust.
                let folders: Vec<&Path> = own
                    .ancestors()
                    .take_while(|a| a.starts_with(root))
                    .collect();
                cli_state::seed_claude_json(&person, &home.join(".claude.json"), &folders)?;
            }
        }
    }
    Ok(m)
}

/// `.git` for an agent in a linked worktree: a private, empty `.git` with
/// each entry of the project's bound back into it read-only, except the
/// object store (`objects`, the role's quarantine) and the worktree's own
/// git folder. What git makes beside
/// them lands in the private folder and is gone with the sandbox: the lock
/// a commit takes on `packed-refs` to drop the worktree's `AUTO_MERGE`
/// (git 2.47 takes it for any ref deletion), which a read-only `.git`
/// refused with an error after every commit; and whatever an agent would
/// plant there (a `commondir`) never reaches the person's `.git`. A
/// folder is bound live; a file is the one it was when the sandbox was
/// made (a `packed-refs` that the person's git rewrites later is seen at
/// the next start, docs/security.md "Branches"). A link among the entries
/// is not followed (nothing of the project's is a link there).
fn linked_git_mounts(
    root: &Path,
    own: &Path,
    git: &Path,
    objects: Vec<Mount>,
) -> Result<Vec<Mount>> {
    const MAX_ENTRIES: usize = 256;
    let mut out = vec![Mount::tmpfs(git)];
    out.extend(objects);
    let entries = git.read_dir().map_err(|e| Error::io(git, e))?;
    for e in entries.flatten().take(MAX_ENTRIES) {
        let Ok(kind) = e.file_type() else { continue };
        if e.file_name() == "objects" {
            continue;
        }
        if kind.is_dir() || kind.is_file() {
            out.push(Mount::same("--ro-bind", &e.path()));
        }
    }
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
    Ok(out)
}

/// The git folder of the worktree `own` (sys::git::linked_gitdir, found
/// from the project's side), when its `.git` file names that folder too;
/// a `.git` file that names another is refused with the repair. None when
/// `own` has no `.git` file (not a linked worktree).
fn worktree_gitdir(root: &Path, own: &Path) -> Result<Option<PathBuf>> {
    let pointer = own.join(".git");
    if !std::fs::symlink_metadata(&pointer).is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let named = crate::fsx::read_bounded(&pointer, 4096)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| {
            t.trim()
                .strip_prefix("gitdir:")
                .map(|d| canon(Path::new(d.trim())))
        });
    match crate::sys::git::linked_gitdir(root, own) {
        Some((_, gitdir)) if named.as_ref() == Some(&canon(&gitdir)) => Ok(Some(gitdir)),
        _ => Err(Error::env(format!(
            "{}: it does not name the git folder the project keeps for this worktree, so the sandbox will not give this role one\n  hint: run `git worktree repair {}` from the project root (or remove the worktree; `swarm up` adds it again)",
            pointer.display(),
            own.display()
        ))),
    }
}
