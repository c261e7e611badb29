//! Root discovery (D3): from any subdirectory, find the worktree whose
//! `.swarmforge/` holds the state, and the project root that holds `roles.tsv`.
//! Never creates anything; never depends on `HOME`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};
use crate::protocol::layout::{Project, Worktree};

pub const NO_ROOT: &str = "Cannot find SwarmForge project root";

#[derive(Clone, Debug)]
pub struct Located {
    pub worktree: Worktree,
    pub project: Project,
}

fn has_state(dir: &Path) -> bool {
    let sf = dir.join(".swarmforge");
    sf.join("handoffs").is_dir() || sf.join("roles.tsv").is_file()
}

/// Walks up from `cwd` to the nearest directory with `.swarmforge/handoffs` or
/// `.swarmforge/roles.tsv`, stopping at a git worktree boundary (`.git`), so a
/// role worktree nested in the project never resolves to the project's state.
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
    let abs = abs.canonicalize().ok()?;
    abs.parent().map(Path::to_path_buf)
}

/// The project root for a worktree: the worktree itself when it holds
/// `roles.tsv`, else the root named by its `project-root` pointer, else the
/// parent of git's common dir (the main checkout).
pub fn project_of(wt: &Worktree) -> Option<Project> {
    if wt.swarmforge().join("roles.tsv").is_file() {
        return Some(Project::new(&wt.root));
    }
    if let Ok(b) = crate::fsx::read_bounded(&wt.project_pointer(), 4096) {
        let p = PathBuf::from(String::from_utf8_lossy(&b).trim());
        if p.join(".swarmforge").join("roles.tsv").is_file() {
            return Some(Project::new(p));
        }
    }
    let candidate = git_common_dir_parent(&wt.root)?;
    candidate
        .join(".swarmforge")
        .join("roles.tsv")
        .is_file()
        .then(|| Project::new(candidate))
}

/// Both roots from `cwd`, or `Cannot find SwarmForge project root` (exit 1).
pub fn locate(cwd: &Path) -> Result<Located> {
    let cwd = cwd.canonicalize().map_err(|e| Error::io(cwd, e))?;
    let wt = find_worktree(&cwd).ok_or_else(|| Error::env(NO_ROOT))?;
    let worktree = Worktree::new(wt);
    let project = project_of(&worktree).ok_or_else(|| Error::env(NO_ROOT))?;
    Ok(Located { worktree, project })
}

/// Just the worktree (the forced `--task`/`--batch` helpers need no roles).
pub fn locate_worktree(cwd: &Path) -> Result<Worktree> {
    let cwd = cwd.canonicalize().map_err(|e| Error::io(cwd, e))?;
    find_worktree(&cwd)
        .map(Worktree::new)
        .ok_or_else(|| Error::env(NO_ROOT))
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
