//! The one root resolver (D3): from any folder, the worktree whose
//! `.swarmforge/` holds the state, and the project that holds `roles.tsv`.
//! Every binary and every `swarm` subcommand asks here.
//!
//! Two layouts are recognised. `swarm init` writes a `project-root` pointer
//! into each role worktree. SwarmForge's launcher copies `roles.tsv` into
//! every role worktree instead; there the main checkout (git's common dir)
//! is the project when it holds `roles.tsv` itself, so a copy never makes a
//! worktree look like a project of its own. Never creates anything; never
//! depends on `HOME`.

use std::path::{Path, PathBuf};
use std::process::Command;

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
        let roles = Roles::load(&self.project.roles_tsv()).unwrap_or_default();
        let wt = &self.worktree.root;
        let names: Vec<&str> = roles
            .roles
            .iter()
            .filter(|r| {
                let p = self.project.root.join(&r.worktree_path);
                p.canonicalize().is_ok_and(|c| &c == wt)
            })
            .map(|r| r.name.as_str())
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

/// Walks up from `cwd` to the nearest folder with swarm state
/// (`.swarmforge/handoffs`, `roles.tsv` or a `project-root` pointer),
/// stopping at a git worktree boundary (`.git`), so a role worktree nested in
/// the project never resolves to the project's own state.
pub fn find_worktree(cwd: &Path) -> Option<PathBuf> {
    let mut dir = Some(cwd);
    while let Some(d) = dir {
        if has_state(d) || d.join(".git").exists() {
            return Some(d.to_path_buf());
        }
        dir = d.parent();
    }
    None
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
    let out = Command::new("git")
        .arg("-C")
        .arg(wt)
        .args(["rev-parse", "--git-common-dir"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
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

/// The project of a worktree: the one its `project-root` pointer names; else
/// the main checkout when that holds `roles.tsv` (SwarmForge's layout, where
/// the worktree's own `roles.tsv` is only a copy); else the worktree itself
/// when it holds `roles.tsv`.
pub fn project_of(wt: &Worktree) -> Option<Project> {
    if let Ok(b) = fsx::read_bounded(&wt.project_pointer(), 4096) {
        let p = PathBuf::from(String::from_utf8_lossy(&b).trim());
        if let Ok(p) = p.canonicalize() {
            if holds_roles(&p) {
                return Some(Project::new(p));
            }
        }
    }
    if let Some(main) = main_checkout(&wt.root) {
        if main != wt.root && holds_roles(&main) {
            return Some(Project::new(main));
        }
    }
    holds_roles(&wt.root).then(|| Project::new(&wt.root))
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

/// Both roots from `cwd`, or SwarmForge's `Cannot find SwarmForge project
/// root` (exit 1): the agent helpers' resolver.
pub fn locate(cwd: &Path) -> Result<Located> {
    let cwd = canonical(cwd)?;
    let wt = find_worktree(&cwd).ok_or_else(|| Error::env(NO_ROOT))?;
    let worktree = Worktree::new(wt);
    let project = project_of(&worktree).ok_or_else(|| Error::env(NO_ROOT))?;
    Ok(Located { worktree, project })
}

/// Just the worktree (the forced `--task`/`--batch` helpers need no roles).
pub fn locate_worktree(cwd: &Path) -> Result<Worktree> {
    let cwd = canonical(cwd)?;
    find_worktree(&cwd)
        .map(Worktree::new)
        .ok_or_else(|| Error::env(NO_ROOT))
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
    let wt = find_worktree(&start);
    match wt.as_ref().map(|w| Worktree::new(w.clone())) {
        Some(worktree) => match project_of(&worktree) {
            Some(project) => Ok(Located { worktree, project }),
            None => Err(not_a_project(&start, Some(&worktree.root))),
        },
        None => Err(not_a_project(&start, None)),
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
    Error::env(format!(
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
        return Err(Error::env(format!(
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
            return Err(Error::env(format!(
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

/// The acting role from `SWARMFORGE_ROLE` (unset or empty: exit 1).
pub fn acting_role() -> Result<String> {
    match std::env::var("SWARMFORGE_ROLE") {
        Ok(r) if !r.is_empty() => Ok(r),
        _ => Err(Error::env("Set SWARMFORGE_ROLE.")),
    }
}
