//! Hooks the swarm writes into the repository's hooks folder: the
//! reservations guard's `pre-commit` (docs/reservations.md) and the role
//! byline's `commit-msg` (docs/swarmforge-compat.md §8). Why one module:
//! both need to know where that folder is, whether a hook there is the
//! swarm's (it carries a marker line) or someone else's, and how to write
//! one, and the first of those is a security question.
//!
//! Invariants: git is asked where the hooks live at the project root, with
//! the root's own git folder named (`GIT_DIR`) when it is one, never
//! through a role worktree's `.git` file or the `commondir` beside it (both
//! the agent's to rewrite: a folder of its making would have `swarm up`
//! write, and later the person's git run, hooks of its choosing). A hook is
//! written by temp + rename, mode 0755; a hook that is a symlink is never
//! read through or written through (it is someone else's).

use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::fsx;

/// The hooks folder git uses for the repository at `root` (core.hooksPath
/// honoured; every linked worktree shares it).
pub fn hooks_dir(root: &Path) -> Result<PathBuf> {
    let dotgit = root.join(".git");
    let own = std::fs::symlink_metadata(&dotgit).is_ok_and(|m| m.is_dir());
    let gitdir = dotgit.to_string_lossy().into_owned();
    let named = [("GIT_DIR", gitdir.as_str())];
    let env: &[(&str, &str)] = if own { &named } else { &[] };
    let out = crate::sys::git::call_with(
        root,
        &["rev-parse", "--path-format=absolute", "--git-path", "hooks"],
        env,
    )
    .map_err(Error::process)?;
    let dir = out.stdout.trim();
    if !out.ok || dir.is_empty() {
        return Err(Error::bad_file_hint(
            root,
            format!("not a git repository ({})", out.stderr.trim()),
            "run `swarm init` there, which makes one",
        ));
    }
    Ok(PathBuf::from(dir))
}

/// Whose a hook file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    Missing,
    /// A regular file carrying one of the marks.
    Swarm,
    /// Anything else there: a file without the mark, a symlink, a folder.
    Foreign,
}

/// Longest hook file read to look for the mark.
const MAX_HOOK_BYTES: u64 = 64 * 1024;

/// Whose the hook at `path` is: the swarm's when it is a regular file
/// holding any of `marks`.
pub fn owner(path: &Path, marks: &[&str]) -> Owner {
    match std::fs::symlink_metadata(path) {
        Err(_) => Owner::Missing,
        Ok(m) if !m.is_file() => Owner::Foreign,
        Ok(_) => match fsx::read_bounded(path, MAX_HOOK_BYTES) {
            Ok(b) => {
                let text = String::from_utf8_lossy(&b);
                if marks.iter().any(|m| text.contains(m)) {
                    Owner::Swarm
                } else {
                    Owner::Foreign
                }
            }
            Err(_) => Owner::Foreign,
        },
    }
}

/// Whether `path` holds exactly `script` (a rewrite would change nothing).
pub fn holds(path: &Path, script: &str) -> bool {
    fsx::read_bounded(path, MAX_HOOK_BYTES).is_ok_and(|b| b == script.as_bytes())
}

/// Writes the hook `path` (its folder made when missing), executable.
pub fn write(path: &Path, script: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        fsx::ensure_dirs(&[dir]).at(dir)?;
    }
    fsx::write_file(path, script.as_bytes()).at(path)?;
    fsx::set_mode(path, 0o755).at(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// core.hooksPath counts; a role worktree whose `.git` file the agent
    /// pointed at a git folder of its own making does not.
    #[test]
    fn the_hooks_folder_is_the_repositorys_whatever_a_worktree_says() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap().join("p");
        std::fs::create_dir_all(&root).unwrap();
        git(&root, &["init", "-q", "-b", "master"]);
        git(&root, &["commit", "-q", "--allow-empty", "-m", "init"]);
        assert_eq!(hooks_dir(&root).unwrap(), root.join(".git/hooks"));
        let wt = root.join(".worktrees/a");
        git(&root, &["worktree", "add", "-q", wt.to_str().unwrap()]);
        let fake = d.path().join("fake");
        std::fs::create_dir_all(&fake).unwrap();
        git(&fake, &["init", "-q", "--bare"]);
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", fake.display())).unwrap();
        assert_eq!(hooks_dir(&root).unwrap(), root.join(".git/hooks"));
        git(&root, &["config", "core.hooksPath", "shared-hooks"]);
        assert_eq!(hooks_dir(&root).unwrap(), root.join("shared-hooks"));
        assert_eq!(owner(&root.join("shared-hooks/x"), &["M"]), Owner::Missing);
        std::os::unix::fs::symlink("/etc/hostname", root.join("shared-hooks-x")).unwrap();
        assert_eq!(owner(&root.join("shared-hooks-x"), &["M"]), Owner::Foreign);
    }
}
