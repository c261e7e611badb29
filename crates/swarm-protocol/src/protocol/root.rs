//! The one root resolver: from any folder, the project that holds
//! `roles.tsv` and the worktree whose `.swarmforge/` holds the state. Every
//! binary and every `swarm` subcommand asks here.
//!
//! The project is found the way SwarmForge's own helpers find it first
//! (git's top level when it holds `roles.tsv`, else the parent of git's
//! common dir), then by this project's additions (the `project-root`
//! pointer `swarm init` writes, the nearest `roles.tsv` where there is no
//! git); a copy of `roles.tsv` in a role worktree never makes a project of
//! its own. The worktree is the nearest folder that roles.tsv lists as a
//! role's worktree, the project root, or a folder with state or a `.git`.
//! docs/protocol.md ("Finding the project") has the table of layouts, each
//! tested in tests/cli/discovery.rs. Never creates anything; never depends
//! on `HOME`.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::text::escape;

/// SwarmForge's words when no project is found (the agent helpers print
/// exactly this).
pub const NO_ROOT: &str = "Cannot find SwarmForge project root";

/// Where a command stands: its worktree and the project that worktree is of.
#[derive(Clone, Debug)]
pub struct Located {
    pub worktree: Worktree,
    pub project: Project,
}

impl Located {
    /// True when the worktree is a role's own, not the project's checkout.
    pub fn in_role_worktree(&self) -> bool {
        self.worktree.root != self.project.root
    }

    /// `/p/.worktrees/ping is role ping's worktree of project /p`, for the
    /// commands that refuse to run there (they name both folders).
    pub fn describe(&self) -> String {
        let wt = &self.worktree.root;
        let names: Vec<String> = role_worktrees(&self.project.root)
            .into_iter()
            .filter(|(_, path)| path == wt)
            .map(|(name, _)| name)
            .collect();
        let whose = match names.as_slice() {
            [] => "a worktree".to_string(),
            [one] => format!("role {one}'s worktree"),
            many => format!("the worktree of roles {}", many.join(", ")),
        };
        format!(
            "{} is {whose} of project {}",
            shown(wt),
            shown(&self.project.root)
        )
    }
}

fn shown(p: &Path) -> String {
    escape(&p.to_string_lossy())
}

fn has_state(dir: &Path) -> bool {
    let sf = dir.join(".swarmforge");
    sf.join("handoffs").is_dir()
        || sf.join("roles.tsv").is_file()
        || sf.join("project-root").is_file()
}

/// The folders from `dir` up to the file system's root.
fn upwards(dir: &Path) -> impl Iterator<Item = &Path> {
    std::iter::successors(Some(dir), |d| d.parent())
}

/// git's top level of `dir`: the nearest folder holding `.git` (a folder in
/// a main checkout, a `gitdir:` file in a linked worktree).
fn git_top_level(dir: &Path) -> Option<&Path> {
    upwards(dir).find(|d| d.join(".git").exists())
}

/// The main checkout of the git worktree at `wt` (the parent of git's common
/// dir). Read from git's own files where they have the usual shape (`.git`
/// a folder: `wt` is the main checkout; `.git` a `gitdir:` file whose folder
/// has a `commondir`), else asked of git.
fn main_checkout(wt: &Path) -> Option<PathBuf> {
    let dotgit = wt.join(".git");
    let meta = std::fs::symlink_metadata(&dotgit).ok()?;
    if meta.is_dir() {
        return Some(wt.to_path_buf());
    }
    let read = |p: &Path| {
        fsx::read_bounded(p, 4096)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
    };
    let from_files = (|| {
        let gitdir = read(&dotgit)?.strip_prefix("gitdir:")?.trim().to_string();
        let gitdir = wt.join(gitdir);
        let common = gitdir.join(read(&gitdir.join("commondir"))?);
        common.canonicalize().ok()?.parent().map(Path::to_path_buf)
    })();
    from_files.or_else(|| git_common_dir_parent(wt))
}

fn git_common_dir_parent(wt: &Path) -> Option<PathBuf> {
    let r = crate::sys::git::call_with(
        wt,
        &["rev-parse", "--git-common-dir"],
        &[("GIT_CONFIG_NOSYSTEM", "1")],
    )
    .ok()?;
    if !r.ok {
        return None;
    }
    let s = r.stdout.trim().to_string();
    if s.is_empty() {
        return None;
    }
    let p = PathBuf::from(s);
    let abs = if p.is_absolute() { p } else { wt.join(p) };
    abs.canonicalize().ok()?.parent().map(Path::to_path_buf)
}

fn holds_roles(dir: &Path) -> bool {
    Project::new(dir).roles_tsv().is_file()
}

/// The project a `project-root` pointer in `dir` names, when that folder
/// holds `roles.tsv`.
fn pointed_project(dir: &Path) -> Option<PathBuf> {
    let b = fsx::read_bounded(&Worktree::new(dir).project_pointer(), 4096).ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&b).trim())
        .canonicalize()
        .ok()?;
    holds_roles(&p).then_some(p)
}

/// Each role of `project`'s roles.tsv with its worktree as a canonical
/// folder (a relative column 3 is relative to the project root).
fn role_worktrees(project: &Path) -> Vec<(String, PathBuf)> {
    let roles = Roles::load(&Project::new(project).roles_tsv()).unwrap_or_default();
    roles
        .roles
        .into_iter()
        .filter_map(|r| {
            let path = project.join(&r.worktree_path).canonicalize().ok()?;
            Some((r.name, path))
        })
        .collect()
}

/// The role worktrees `project`'s roles.tsv lists, as canonical folders.
fn listed_worktrees(project: &Path) -> Vec<PathBuf> {
    role_worktrees(project)
        .into_iter()
        .map(|(_, p)| p)
        .collect()
}

/// SwarmForge's rule (its helpers' `project-root`): git's top level when it
/// holds `roles.tsv`, else the parent of git's common dir when that does.
fn swarmforge_project(dir: &Path) -> Option<PathBuf> {
    let top = git_top_level(dir)?;
    if holds_roles(top) {
        return Some(top.to_path_buf());
    }
    main_checkout(top).filter(|m| holds_roles(m))
}

/// Ours, where SwarmForge's finds none: the nearest `project-root` pointer,
/// else the nearest folder holding `roles.tsv`, looking no further up than
/// git's top level.
fn our_project(dir: &Path) -> Option<PathBuf> {
    for d in upwards(dir) {
        if let Some(p) = pointed_project(d) {
            return Some(p);
        }
        if holds_roles(d) {
            return Some(d.to_path_buf());
        }
        if d.join(".git").exists() {
            return None;
        }
    }
    None
}

/// A folder holding `roles.tsv` that is a role's worktree of another
/// project stands for that project: a copy of `roles.tsv` (SwarmForge's
/// launcher makes one in every role worktree) never makes a project. It is
/// a role worktree when its `project-root` pointer names the project, when
/// it is a linked git worktree whose main checkout holds `roles.tsv`, or
/// when an enclosing folder's `roles.tsv` lists it.
fn enclosing_project(found: PathBuf) -> PathBuf {
    if let Some(p) = pointed_project(&found) {
        return p;
    }
    if let Some(main) = main_checkout(&found).filter(|m| *m != found && holds_roles(m)) {
        return main;
    }
    let lists_it = |d: &&Path| holds_roles(d) && listed_worktrees(d).contains(&found);
    let lister = upwards(&found)
        .skip(1)
        .find(lists_it)
        .map(Path::to_path_buf);
    lister.unwrap_or(found)
}

/// The project of the folder `dir` (canonical): SwarmForge's rule, then
/// ours, then a role worktree's copy of `roles.tsv` resolved to its project.
/// The table of layouts is in docs/protocol.md ("Finding the project").
pub fn project_from(dir: &Path) -> Option<Project> {
    swarmforge_project(dir)
        .or_else(|| our_project(dir))
        .map(enclosing_project)
        .map(Project::new)
}

/// The worktree `dir` (canonical) is in, of `project`: the nearest folder
/// up from `dir` that roles.tsv lists as a role's worktree, is the project
/// root, holds swarm state (`.swarmforge/handoffs`, `roles.tsv` or a
/// `project-root` pointer) or is a git top level. So a role worktree nested
/// in the project, git worktree or plain folder, is never taken for the
/// project's own.
fn worktree_in(dir: &Path, project: &Project) -> Worktree {
    // The listing is read only when a folder passes the cheaper tests: an
    // agent runs in its worktree's top folder, which holds state.
    let listed = std::cell::OnceCell::new();
    let stop = |d: &&Path| {
        *d == project.root
            || has_state(d)
            || d.join(".git").exists()
            || listed
                .get_or_init(|| listed_worktrees(&project.root))
                .iter()
                .any(|l| l == d)
    };
    Worktree::new(upwards(dir).find(stop).unwrap_or(dir))
}

/// Without a project (the forced `--task`/`--batch` helpers need none): the
/// nearest folder with swarm state or a git top level.
fn bare_worktree(dir: &Path) -> Option<PathBuf> {
    upwards(dir)
        .find(|d| has_state(d) || d.join(".git").exists())
        .map(Path::to_path_buf)
}

fn canonical(start: &Path) -> Result<PathBuf> {
    start.canonicalize().map_err(|e| {
        Error::io_hint(
            start,
            e,
            "name an existing folder: the project root or any folder inside it",
        )
    })
}

/// SwarmForge's `Cannot find SwarmForge project root` as its first line,
/// byte for byte (scripts match it), then where it looked and what to do.
fn no_root(cwd: &Path) -> Error {
    Error::not_found(format!(
        "{NO_ROOT}\n  hint: no .swarmforge/roles.tsv in {} or any folder above it (nor a .swarmforge/project-root pointer); run this inside a swarm's project or a role's worktree (`swarm init` makes a project)",
        shown(cwd)
    ))
}

/// Both roots from `cwd`, or SwarmForge's `Cannot find SwarmForge project
/// root` (exit 1): the agent helpers' resolver.
pub fn locate(cwd: &Path) -> Result<Located> {
    let cwd = canonical(cwd)?;
    let project = project_from(&cwd).ok_or_else(|| no_root(&cwd))?;
    let worktree = worktree_in(&cwd, &project);
    Ok(Located { worktree, project })
}

/// The worktree, and the project when there is one (the forced
/// `--task`/`--batch` helpers need no roles).
pub fn locate_worktree(cwd: &Path) -> Result<(Worktree, Option<Project>)> {
    let cwd = canonical(cwd)?;
    if let Some(project) = project_from(&cwd) {
        return Ok((worktree_in(&cwd, &project), Some(project)));
    }
    bare_worktree(&cwd)
        .map(|wt| (Worktree::new(wt), None))
        .ok_or_else(|| no_root(&cwd))
}

/// The project for a `swarm` command or `handoffd`: found from `arg` (the
/// project root, any folder inside it, or a role worktree, which stands for
/// its project), else from the current directory. Outside any project the
/// error says where it looked and how to make one.
pub fn locate_project(arg: Option<&Path>) -> Result<Located> {
    let start = match arg {
        Some(p) => p.to_path_buf(),
        None => current_dir()?,
    };
    let start = canonical(&start)?;
    match project_from(&start) {
        Some(project) => Ok(Located {
            worktree: worktree_in(&start, &project),
            project,
        }),
        None => Err(not_a_project(&start, git_top_level(&start))),
    }
}

fn not_a_project(start: &Path, stopped_at: Option<&Path>) -> Error {
    let looked = match stopped_at {
        Some(w) if w != start => format!(
            "in it or in its parents up to the git checkout {}",
            shown(w)
        ),
        Some(_) => "in this git checkout".to_string(),
        None => "in it or in any parent folder".to_string(),
    };
    Error::not_found(format!(
        "No swarm at {}: no .swarmforge/roles.tsv {looked}.\n  hint: run `swarm init` in the project folder to make one, or name the project with --root DIR",
        shown(start)
    ))
}

/// `arg` (or the current directory) for a command that makes or serves a
/// project in exactly that folder (`swarm init`, `handoffd`): refused, naming
/// both folders, when it lies inside another project or is a role worktree.
/// `command` is what to run instead, with the project root appended.
pub fn exact_root(arg: Option<&Path>, command: &str) -> Result<PathBuf> {
    let start = match arg {
        Some(p) => p.to_path_buf(),
        None => current_dir()?,
    };
    let start = canonical(&start)?;
    if !start.is_dir() {
        return Err(Error::bad_input(format!(
            "{}: not a directory\n  hint: name the project folder",
            shown(&start)
        )));
    }
    if let Ok(at) = locate_project(Some(&start)) {
        if at.project.root != start {
            let what = if at.in_role_worktree() {
                at.describe()
            } else {
                format!(
                    "{} is inside project {}",
                    shown(&start),
                    shown(&at.project.root)
                )
            };
            return Err(Error::bad_input(format!(
                "{what}; run: {command} {}",
                shown(&at.project.root)
            )));
        }
    }
    Ok(start)
}

pub fn current_dir() -> Result<PathBuf> {
    std::env::current_dir().map_err(|e| Error::io(".", e))
}

/// The role named on the command line (`--role`), else the acting role.
pub fn named_or_acting_role(named: Option<String>) -> Result<String> {
    named.map(Ok).unwrap_or_else(acting_role)
}

/// The acting role from `SWARMFORGE_ROLE` (unset or empty: SwarmForge's
/// words; not UTF-8: said so; exit 1 either way).
pub fn acting_role() -> Result<String> {
    match std::env::var("SWARMFORGE_ROLE") {
        Ok(r) if !r.is_empty() => Ok(r),
        Err(std::env::VarError::NotUnicode(v)) => Err(Error::env(format!(
            "SWARMFORGE_ROLE is not valid UTF-8 ({}); set it to a role name of roles.tsv.",
            escape(&v.to_string_lossy())
        ))),
        _ => Err(Error::env("Set SWARMFORGE_ROLE.")),
    }
}
