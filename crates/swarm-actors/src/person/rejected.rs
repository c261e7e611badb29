//! What becomes of a held handoff a person rejects, as today's SwarmForge
//! keeps it (docs/swarmforge-compat.md §5 and §7; upstream's dashboard,
//! `pack_web.bb` `save-review!`, `retry-approval!`, `delete-approval!`):
//!
//! - its review history: every comment a person saves on one of its
//!   documents, and the comments it is sent back (or denied) with, are
//!   appended to `.swarmforge/rejected-tasks/<task-id>/reviews.json`
//!   (protocol::rejected_tasks, which holds and drops it);
//! - a snapshot of its commit, before anything else: branches
//!   `rejected/<task-id>/<n>` and `rejected/<task-id>/latest` in the
//!   sender's repository, on Retry and on Delete;
//! - Delete: the snapshot, the held file denied to the sender's `failed/`
//!   (a message is never deleted here), copies of it, its comments and its
//!   card's text in the task's folder, its history dropped, and the
//!   sender's worktree rolled back to where the task started.
//!
//! Invariant kept here: no commit is lost. The only reset is Delete's, and
//! it runs only after the snapshot branch names the commit, only when the
//! worktree's HEAD is that commit (nothing newer to lose) and only when no
//! tracked file has uncommitted changes; otherwise the worktree is left as
//! it is and the answer says why.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::commit_id::CommitId;
use crate::protocol::header::{names, Message};
use crate::protocol::layout::Project;
use crate::protocol::rejected_tasks as store;
use crate::sys::git;

use super::holds;

/// The branches a rejected commit was kept under.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    pub commit: String,
    pub refs: Vec<String>,
}

/// What a Delete did.
#[derive(Clone, Debug, Serialize)]
pub struct Deleted {
    pub id: String,
    pub task_id: String,
    /// Where the held file went (the sender's `failed/`).
    pub denied: PathBuf,
    /// The copies in the task's folder.
    pub archived: Vec<PathBuf>,
    pub snapshot: Option<Snapshot>,
    /// The commit the sender's worktree was reset to, if it was.
    pub reset_to: Option<String>,
    /// Why the worktree was not reset, when it was not.
    pub not_reset: Option<String>,
}

/// The task a held message is kept under: upstream's (`task_id`, else
/// `task`), else its message id (upstream's Delete needs a task; ours
/// keeps a task-less hold under its own id).
fn task_key(m: &Message, id: &str) -> String {
    store::task_of(m).unwrap_or_else(|| id.to_string())
}

/// Keeps `commit` under `rejected/<task>/<n>` (the first free `n`, never
/// over a branch) and `rejected/<task>/latest`, in the repository of
/// worktree `wt`. None when `wt` is no git worktree (upstream skips the
/// snapshot there too) or its repository does not have the commit.
pub fn snapshot(wt: &Path, task: &str, commit: &CommitId) -> Result<Option<Snapshot>> {
    if !store::valid_task_id(task) {
        return Err(Error::process(format!(
            "'{}' cannot name a branch",
            crate::text::escape(task)
        )));
    }
    // The worktree is the agent's to write: git pinned to the project's
    // own folders, its pointer files not believed (sys::git::Pinned).
    let g = match git::Pinned::find(wt) {
        Ok(g) => g,
        Err(_) if !wt.ancestors().any(|a| a.join(".git").exists()) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    // A commit this repository does not have (a copy relayed from
    // another host): nothing here to keep, or to lose.
    let Ok(sha) = g.stdout(&["rev-parse", "--verify", "--quiet", &commit.peeled()]) else {
        return Ok(None);
    };
    for n in 1..=10_000u32 {
        let r = store::snapshot_ref(task, n);
        if g.call(&["show-ref", "--verify", "--quiet", &r])?.ok {
            continue;
        }
        // The empty old value: created only if it still does not exist.
        let made = g.call(&["update-ref", "-m", "swarm: rejected", &r, &sha, ""])?;
        if !made.ok {
            if g.call(&["show-ref", "--verify", "--quiet", &r])?.ok {
                continue;
            }
            return Err(Error::process(format!(
                "git update-ref {r}: {}",
                made.stderr.trim()
            )));
        }
        let latest = store::latest_ref(task);
        g.stdout(&["update-ref", "-m", "swarm: rejected", &latest, &sha])
            .map_err(|e| Error::process(format!("git update-ref {latest}: {e}")))?;
        return Ok(Some(Snapshot {
            commit: sha,
            refs: vec![r, latest],
        }));
    }
    Err(Error::process(format!(
        "{}: ten thousand snapshots already",
        store::snapshot_ref(task, 1)
    )))
}

/// Resets worktree `wt` from `sha` (already snapshotted) to `base`, else
/// `sha`'s parent, when nothing can be lost: HEAD is `sha` and no tracked
/// file has uncommitted changes. Ok(the commit reset to), or Err(why not).
fn roll_back(wt: &Path, sha: &str, base: Option<&CommitId>) -> Result<String> {
    let g = git::Pinned::find(wt)?;
    let head = g.stdout(&["rev-parse", "--verify", "HEAD"])?;
    if head != sha {
        return Err(Error::process(format!(
            "{} has moved on (HEAD {head}, the rejected commit {sha}): left as it is",
            wt.display()
        )));
    }
    let dirty = g.stdout(&["status", "--porcelain", "--untracked-files=no"])?;
    if !dirty.is_empty() {
        return Err(Error::process(format!(
            "{} has uncommitted changes: left as it is",
            wt.display()
        )));
    }
    let want = base
        .map(CommitId::to_string)
        .unwrap_or_else(|| format!("{sha}^"));
    let target = g
        .stdout(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{want}^{{commit}}"),
        ])
        .map_err(|_| {
            Error::process(format!(
                "{} is no commit in {}: left as it is",
                crate::text::escape(&want),
                wt.display()
            ))
        })?;
    if !g.call(&["merge-base", "--is-ancestor", &target, sha])?.ok {
        return Err(Error::process(format!(
            "{target} (where the task started) is not behind {sha}: left as it is"
        )));
    }
    g.stdout(&["reset", "--hard", "--quiet", &target])?;
    Ok(target)
}

/// SwarmForge's Delete of a held handoff (`POST /api/tasks/delete {id}`).
pub fn delete(project: &Project, id: &str, via: &str) -> Result<Deleted> {
    let (h, m) = holds::review(project, id)?;
    let task = task_key(&m, id);
    let wt = holds::sender_worktree(&h.path);
    let (commit, base) = store::commits_of(&m);
    // First the snapshot: refused, nothing else happens.
    let snapshot = match &commit {
        Some(c) => snapshot(&wt, &task, c)
            .map_err(|why| Error::process(format!("{id} was not deleted: {why}")))?,
        None => None,
    };
    let mut archived = Vec::new();
    let mut keep = |name: String, path: &Path| -> Result<()> {
        if let Ok(bytes) = fsx::read_bounded(path, store::MAX_ARCHIVED_BYTES) {
            archived.push(
                store::archive(project, &task, &name, &bytes)
                    .map_err(|e| Error::io(store::task_dir(project, &task), e))?,
            );
        }
        Ok(())
    };
    let file_name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    keep(file_name(&h.path), &h.path)?;
    let comments = crate::protocol::pending_approval::reviews_file(&h.path);
    keep(file_name(&comments), &comments)?;
    if let Some(card) = m.get(names::TASK).filter(|c| store::valid_task_id(c)) {
        let text = crate::board::text_file(project, card);
        keep(file_name(&text), &text)?;
    }
    let denied = holds::deny_as(project, id, "deleted by a person", via, None)?;
    store::drop(project, &task).map_err(|e| Error::io(store::task_dir(project, &task), e))?;
    let (reset_to, not_reset) = match &snapshot {
        Some(s) => match roll_back(&wt, &s.commit, base.as_ref()) {
            Ok(t) => (Some(t), None),
            Err(why) => (None, Some(why.to_string())),
        },
        None if commit.is_some() => (
            None,
            Some(format!(
                "{} is no git worktree or has no commit {}: nothing snapshotted, left as it is",
                wt.display(),
                crate::text::escape(commit.as_deref().unwrap_or_default())
            )),
        ),
        None => (None, Some("the handoff names no commit".to_string())),
    };
    Ok(Deleted {
        id: id.to_string(),
        task_id: task,
        denied,
        archived,
        snapshot,
        reset_to,
        not_reset,
    })
}

/// Keeps the commit of held message `m` under its task's snapshot
/// branches before it is sent back (upstream's Retry). None when it names
/// no commit or its sender's worktree is no git worktree.
pub fn snapshot_held(project: &Project, id: &str) -> Result<Option<Snapshot>> {
    let (h, m) = holds::review(project, id)?;
    let Some(commit) = store::commits_of(&m).0 else {
        return Ok(None);
    };
    let task = task_key(&m, id);
    snapshot(&holds::sender_worktree(&h.path), &task, &commit)
        .map_err(|why| Error::process(format!("{id} was not sent back: {why}")))
}
