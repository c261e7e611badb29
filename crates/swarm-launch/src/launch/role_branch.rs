//! Where a role's branch lives (docs/security.md, "Branches"). git's files
//! backend moves a branch by creating `<branch>.lock` in `.git/refs/heads/`
//! and renaming it, so a sandbox that lets an agent move its own branch
//! there lets it move every branch. A confined role's worktree is therefore
//! *pinned*: checked out on the per-worktree ref [`WORKTREE_REF`], which git
//! keeps in that worktree's own `.git/worktrees/<id>/` (the sandbox's to
//! write), and its branch `swarmforge-<name>` is a symbolic ref to
//! `worktrees/<id>/refs/worktree/swarmforge`, so the person's git sees the
//! branch move while `.git/refs/` stays read-only inside the sandbox
//! (launch/confine/). An unconfined role's worktree is *released*: an
//! ordinary checkout of an ordinary branch, as SwarmForge makes it.
//!
//! Invariants: every step runs outside the sandbox (swarm init / up, role
//! removal) and never writes through a symbolic ref (`--no-deref`), since
//! the agent may have made its worktree's ref point at another branch; a
//! branch whose worktree is gone is made an ordinary branch again before
//! git forgets the worktree (`git worktree prune` would take its commits'
//! last ref with it). Each step is one git ref write and the order makes a
//! crash between two steps repaired by the next run.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::launch::repo::git;
use crate::protocol::commit_id::CommitId;

/// The per-worktree ref a pinned worktree is checked out on.
pub const WORKTREE_REF: &str = "refs/worktree/swarmforge";

/// The role branch of the worktree named `worktree_name` (protocol.md §2).
pub fn branch_name(worktree_name: &str) -> String {
    format!("swarmforge-{worktree_name}")
}

fn git_opt(dir: &Path, args: &[&str]) -> Option<String> {
    git(dir, args).ok().filter(|s| !s.is_empty())
}

/// A role worktree as the project's own git folder knows it. Its git runs
/// with the worktree's git folder and the project's common folder named
/// (`GIT_DIR`, `GIT_COMMON_DIR`), never found through the worktree's `.git`
/// file or the `commondir` file beside its HEAD: both are the agent's to
/// write, and a common folder of its making would bring a config and hooks
/// (`reference-transaction` runs on every ref write) that this unconfined
/// process would run.
struct Located {
    root: PathBuf,
    path: PathBuf,
    id: String,
    gitdir: PathBuf,
    common: PathBuf,
}

/// Finds `wt`'s id under the project's `.git/worktrees/` (git names it
/// after the folder, with a number when that is taken): the one whose
/// `gitdir` file names `wt`.
fn locate(root: &Path, wt: &Path) -> Result<Located> {
    let common = root.join(".git");
    let Some((id, gitdir)) = crate::sys::git::linked_gitdir(root, wt) else {
        return Err(Error::not_found(format!(
            "{}: not a worktree of the repository {} (no .git/worktrees/<id>/gitdir names it)\n  hint: run `git worktree list` in the project; `swarm init` makes the role worktrees",
            wt.display(),
            common.display()
        )));
    };
    Ok(Located {
        root: root.to_path_buf(),
        path: wt.to_path_buf(),
        gitdir,
        id,
        common,
    })
}

impl Located {
    /// git for this worktree (see [`Located`]).
    fn git(&self, args: &[&str]) -> Result<String> {
        let gitdir = self.gitdir.to_string_lossy();
        let common = self.common.to_string_lossy();
        let out = crate::sys::git::call_with(
            &self.root,
            args,
            &[("GIT_DIR", &gitdir), ("GIT_COMMON_DIR", &common)],
        )
        .map_err(Error::process)?;
        if !out.ok {
            return Err(Error::process(format!(
                "git {} failed for the worktree {}: {}",
                args.join(" "),
                self.path.display(),
                out.stderr.trim()
            )));
        }
        Ok(out.stdout.trim().to_string())
    }

    fn git_opt(&self, args: &[&str]) -> Option<String> {
        self.git(args).ok().filter(|s| !s.is_empty())
    }

    /// What HEAD names, one level deep (None: detached or unreadable).
    fn head_ref(&self) -> Option<String> {
        self.git_opt(&["symbolic-ref", "-q", "--no-recurse", "HEAD"])
    }

    /// What its [`WORKTREE_REF`] points to symbolically (the swarm never
    /// makes it so).
    fn symbolic_worktree_ref(&self) -> Option<String> {
        self.git_opt(&["symbolic-ref", "-q", "--no-recurse", WORKTREE_REF])
    }

    fn commit_of(&self, rev: &str) -> Option<String> {
        self.git_opt(&["rev-parse", "--verify", "-q", &format!("{rev}^{{commit}}")])
    }
}

/// Whether `wt` is checked out on [`WORKTREE_REF`].
pub fn is_pinned(root: &Path, wt: &Path) -> bool {
    locate(root, wt).is_ok_and(|w| w.head_ref().as_deref() == Some(WORKTREE_REF))
}

/// The symbolic ref's target for the worktree `id`.
fn target(id: &str) -> String {
    format!("worktrees/{id}/{WORKTREE_REF}")
}

/// What `refs/heads/<branch>` points to symbolically (None: an ordinary
/// branch, or none).
fn symref_of(root: &Path, branch: &str) -> Option<String> {
    git_opt(
        root,
        &[
            "symbolic-ref",
            "-q",
            "--no-recurse",
            &format!("refs/heads/{branch}"),
        ],
    )
}

fn commit_of(dir: &Path, rev: &str) -> Option<String> {
    git_opt(
        dir,
        &["rev-parse", "--verify", "-q", &format!("{rev}^{{commit}}")],
    )
}

fn refuse_symbolic_worktree_ref(w: &Located) -> Result<()> {
    if let Some(to) = w.symbolic_worktree_ref() {
        return Err(Error::conflict(format!(
            "{}: its {WORKTREE_REF} is a symbolic ref to {}, which the swarm never makes (an agent could have made it, so that git writing the role's branch moves that one)\n  hint: look at it (git -C {} log -1 {WORKTREE_REF}), then make it an ordinary ref: git -C {} update-ref --no-deref {WORKTREE_REF} <commit>",
            w.path.display(),
            crate::text::escape(&to),
            w.path.display(),
            w.path.display()
        )));
    }
    Ok(())
}

/// Why the worktree `wt` of a confined role is not pinned as `swarm up`
/// leaves it (None: it is), for `swarm doctor`.
pub fn unpinned(root: &Path, wt: &Path) -> Option<String> {
    let w = match locate(root, wt) {
        Ok(w) => w,
        Err(e) => return Some(e.to_string()),
    };
    if let Some(to) = w.symbolic_worktree_ref() {
        return Some(format!(
            "its {WORKTREE_REF} is a symbolic ref to {}",
            crate::text::escape(&to)
        ));
    }
    match w.head_ref() {
        Some(h) if h == WORKTREE_REF => None,
        Some(h) => Some(format!("it is checked out on {}", crate::text::escape(&h))),
        None => Some("its HEAD is detached".into()),
    }
}

/// Pins the worktree `wt` of the role branch `branch` (see the module doc);
/// returns what changed, for the report (None: already pinned).
pub fn pin(root: &Path, wt: &Path, branch: &str) -> Result<Option<String>> {
    let w = locate(root, wt)?;
    let head = w.head_ref();
    let full = format!("refs/heads/{branch}");
    refuse_symbolic_worktree_ref(&w)?;
    let mut moved = false;
    if head.as_deref() != Some(WORKTREE_REF) {
        if head.as_deref() != Some(full.as_str()) {
            return Err(Error::conflict(format!(
                "{}: the worktree is on {}, not on its role branch {branch}, so its confined agent could not commit (the sandbox keeps .git/refs read-only, docs/security.md \"Branches\")\n  hint: put it back on its branch (git -C {} switch {branch}, after keeping that work on {branch}), then run the command again",
                wt.display(),
                head.as_deref().map(crate::text::escape).unwrap_or_else(|| "a detached HEAD".into()),
                wt.display()
            )));
        }
        let Some(at) = commit_of(root, &full) else {
            return Err(Error::conflict(format!(
                "{}: its branch {branch} names no commit\n  hint: git -C {} log -1 {branch}",
                wt.display(),
                root.display()
            )));
        };
        // 1. the worktree's own ref, 2. the worktree onto it.
        w.git(&["update-ref", "--no-deref", WORKTREE_REF, &at])?;
        w.git(&["symbolic-ref", "HEAD", WORKTREE_REF])?;
        moved = true;
    }
    // 3. the branch a symbolic ref to it (also after a crash before this).
    let want = target(&w.id);
    if symref_of(root, branch).as_deref() != Some(want.as_str()) {
        let pinned = w.commit_of(WORKTREE_REF);
        if let (Some(b), Some(p), None) = (commit_of(root, &full), &pinned, symref_of(root, branch))
        {
            // An ordinary branch the person moved past the worktree's work
            // is not overwritten.
            let behind = b == *p
                || std::process::Command::new("git")
                    .arg("-C")
                    .arg(root)
                    .args(["merge-base", "--is-ancestor", &b, p])
                    .status()
                    .is_ok_and(|s| s.success());
            if !behind {
                return Err(Error::conflict(format!(
                    "{}: its branch {branch} is at {b}, which the worktree's work ({WORKTREE_REF} at {p}) does not contain\n  hint: merge one into the other (git -C {} merge {branch}), then run the command again",
                    wt.display(),
                    wt.display()
                )));
            }
        }
        git(root, &["symbolic-ref", &full, &want])?;
        moved = true;
    }
    Ok(moved.then(|| {
        format!(
            "{}: its branch {branch} now lives in the worktree's own git folder ({WORKTREE_REF}; {branch} points to it), so its confined agent can commit there and cannot move any other branch (docs/security.md \"Branches\")",
            wt.display()
        )
    }))
}

/// Makes `wt` an ordinary checkout of `branch` again (see the module doc);
/// returns what changed (None: it was not pinned).
pub fn release(root: &Path, wt: &Path, branch: &str) -> Result<Option<String>> {
    let Ok(w) = locate(root, wt) else {
        return Ok(None);
    };
    if w.head_ref().as_deref() != Some(WORKTREE_REF) {
        return Ok(None);
    }
    let full = format!("refs/heads/{branch}");
    let Some(at) = w.commit_of("HEAD") else {
        return Err(Error::conflict(format!(
            "{}: its {WORKTREE_REF} names no commit\n  hint: git -C {} log -1 HEAD",
            wt.display(),
            wt.display()
        )));
    };
    // 1. the branch an ordinary one at the work, 2. the worktree onto it,
    // 3. its own ref gone.
    git(root, &["update-ref", "--no-deref", &full, &at])?;
    w.git(&["symbolic-ref", "HEAD", &full])?;
    w.git(&["update-ref", "--no-deref", "-d", WORKTREE_REF])?;
    Ok(Some(format!(
        "{}: back on its ordinary branch {branch} (unconfined)",
        wt.display()
    )))
}

/// Makes every branch that points into a worktree whose folder is gone an
/// ordinary branch at its commit, before `git worktree prune` forgets that
/// worktree's refs; returns what changed.
pub fn rescue_orphans(root: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let listed = git(
        root,
        &[
            "for-each-ref",
            "--format=%(refname)%09%(symref)",
            "refs/heads/",
        ],
    )?;
    let common = PathBuf::from(git(
        root,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?);
    for line in listed.lines() {
        let Some((name, to)) = line.split_once('\t') else {
            continue;
        };
        let Some(id) = to
            .strip_prefix("worktrees/")
            .and_then(|r| r.strip_suffix(&format!("/{WORKTREE_REF}")))
        else {
            continue;
        };
        let wt_dir = common.join("worktrees").join(id);
        let folder = crate::fsx::read_bounded(&wt_dir.join("gitdir"), 4096)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .map(|s| PathBuf::from(s.trim()));
        if folder.is_some_and(|f| f.exists()) {
            continue;
        }
        let Some(at) = crate::fsx::read_bounded(&wt_dir.join(WORKTREE_REF), 4096)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| CommitId::parse(s.trim()).ok())
            .filter(CommitId::is_full)
        else {
            continue;
        };
        git(root, &["update-ref", "--no-deref", name, &at])?;
        out.push(format!(
            "{name} pointed into the worktree {id}, whose folder is gone: now an ordinary branch at {at}"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A repository with the worktree `.worktrees/a` on `swarmforge-a`.
    fn repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("p");
        std::fs::create_dir_all(&root).unwrap();
        run(&root, &["init", "-q", "-b", "master"]);
        run(&root, &["commit", "-q", "--allow-empty", "-m", "init"]);
        let wt = root.join(".worktrees/a");
        run(
            &root,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "swarmforge-a",
                wt.to_str().unwrap(),
            ],
        );
        (d, root, wt)
    }

    #[test]
    fn a_pinned_worktree_moves_its_branch_and_is_released_again() {
        let (_d, root, wt) = repo();
        let note = pin(&root, &wt, "swarmforge-a").unwrap().unwrap();
        assert!(note.contains("own git folder"), "{note}");
        assert!(is_pinned(&root, &wt));
        assert_eq!(
            run(&root, &["symbolic-ref", "refs/heads/swarmforge-a"]),
            "worktrees/a/refs/worktree/swarmforge"
        );
        assert_eq!(pin(&root, &wt, "swarmforge-a").unwrap(), None);
        run(&wt, &["commit", "-q", "--allow-empty", "-m", "work"]);
        assert_eq!(
            run(&root, &["log", "-1", "--format=%s", "swarmforge-a"]),
            "work"
        );
        assert_eq!(run(&root, &["log", "-1", "--format=%s", "master"]), "init");
        release(&root, &wt, "swarmforge-a").unwrap().unwrap();
        assert_eq!(
            run(&wt, &["symbolic-ref", "HEAD"]),
            "refs/heads/swarmforge-a"
        );
        assert!(git_opt(&root, &["symbolic-ref", "-q", "refs/heads/swarmforge-a"]).is_none());
        assert_eq!(
            run(&root, &["log", "-1", "--format=%s", "swarmforge-a"]),
            "work"
        );
        assert_eq!(release(&root, &wt, "swarmforge-a").unwrap(), None);
    }

    #[test]
    fn pinning_refuses_another_branch_and_a_planted_symbolic_ref() {
        let (_d, root, wt) = repo();
        run(&wt, &["switch", "-q", "-c", "feature"]);
        let e = pin(&root, &wt, "swarmforge-a").unwrap_err().to_string();
        assert!(
            e.contains("refs/heads/feature") && e.contains("hint:"),
            "{e}"
        );
        run(&wt, &["switch", "-q", "swarmforge-a"]);
        pin(&root, &wt, "swarmforge-a").unwrap();
        // The agent points its ref at master: never written through.
        run(&wt, &["symbolic-ref", WORKTREE_REF, "refs/heads/master"]);
        let e = pin(&root, &wt, "swarmforge-a").unwrap_err().to_string();
        assert!(e.contains("symbolic ref to refs/heads/master"), "{e}");
        release(&root, &wt, "swarmforge-a").unwrap();
        assert_eq!(run(&root, &["log", "-1", "--format=%s", "master"]), "init");
        assert!(git_opt(&root, &["rev-parse", "-q", "--verify", "refs/heads/master"]).is_some());
    }

    /// The agent points its worktree's `commondir` at a git folder of its
    /// own making, whose config names hooks of its own: the swarm's git for
    /// that worktree (unconfined) runs none of them.
    #[test]
    fn a_common_folder_planted_by_the_agent_runs_nothing() {
        let (d, root, wt) = repo();
        pin(&root, &wt, "swarmforge-a").unwrap();
        let fake = wt.join("fake");
        std::fs::create_dir_all(fake.join("refs")).unwrap();
        std::fs::create_dir_all(fake.join("hooks")).unwrap();
        let copy = std::process::Command::new("cp")
            .arg("-r")
            .arg(root.join(".git/objects"))
            .arg(&fake)
            .status()
            .unwrap();
        assert!(copy.success());
        std::fs::write(
            fake.join("config"),
            format!(
                "[core]\n\trepositoryformatversion = 0\n\thooksPath = {}\n",
                fake.join("hooks").display()
            ),
        )
        .unwrap();
        let pwned = d.path().join("pwned");
        let hook = fake.join("hooks/reference-transaction");
        std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", pwned.display())).unwrap();
        crate::fsx::set_mode(&hook, 0o755).unwrap();
        std::fs::write(
            root.join(".git/worktrees/a/commondir"),
            format!("{}\n", fake.display()),
        )
        .unwrap();
        release(&root, &wt, "swarmforge-a").unwrap().unwrap();
        pin(&root, &wt, "swarmforge-a").unwrap().unwrap();
        assert!(unpinned(&root, &wt).is_none());
        assert!(!pwned.exists());
    }

    #[test]
    fn a_branch_whose_worktree_folder_is_gone_is_kept_before_the_prune() {
        let (_d, root, wt) = repo();
        pin(&root, &wt, "swarmforge-a").unwrap();
        run(&wt, &["commit", "-q", "--allow-empty", "-m", "work"]);
        let at = run(&wt, &["rev-parse", "HEAD"]);
        std::fs::remove_dir_all(&wt).unwrap();
        let notes = rescue_orphans(&root).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        run(&root, &["worktree", "prune"]);
        assert_eq!(run(&root, &["rev-parse", "swarmforge-a"]), at);
        assert!(rescue_orphans(&root).unwrap().is_empty());
    }

    /// The commit a gone worktree's ref file names is taken by the one rule
    /// (a full `CommitId`): anything else is left alone, never handed to
    /// `git update-ref`, and the rescue of the other branches goes on.
    #[test]
    fn a_worktree_ref_that_is_no_full_commit_id_is_left_alone() {
        let (_d, root, wt) = repo();
        pin(&root, &wt, "swarmforge-a").unwrap();
        std::fs::remove_dir_all(&wt).unwrap();
        let file = root.join(".git/worktrees/a").join(WORKTREE_REF);
        for bad in [
            "a".repeat(65),
            "HEAD~1".into(),
            "abcdef0".into(),
            "--output=x".into(),
        ] {
            std::fs::write(&file, format!("{bad}\n")).unwrap();
            assert!(rescue_orphans(&root).unwrap().is_empty(), "{bad}");
        }
    }
}
