//! Task documents, as today's SwarmForge keeps them (docs/swarmforge-compat.md
//! §8): the operator writes `tasks/<task>.md` in the project (the master
//! worktree); when a role takes an item whose `task` has such a document,
//! the document is copied into the role's worktree when missing or
//! different and committed there before work begins; a `git_handoff` whose
//! commit does not hold the current document is refused. A task with no
//! document works as before.
//!
//! Invariants: the operator's copy is read only as a regular file of at most
//! [`MAX_BYTES`] in the project's own `tasks/` folder (a symlink, the file or
//! the folder, is refused, never followed out of the project); the copy in
//! the worktree is written by temp + rename, never through a symlink; a
//! document git ignores is neither committed nor required (upstream's rule).
//! The accept step runs in the agent's own process (inside its sandbox when
//! confined, where the project is readable and its worktree writable), so
//! its git is the agent's own, with the repository's hooks (the byline).

use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::commit_id::CommitId;
use crate::sys::git;

/// Largest task document copied or compared.
pub const MAX_BYTES: u64 = 1024 * 1024;

/// The subject of the commit that records a document (upstream's).
pub const COMMIT_MESSAGE: &str = "Record task document";

/// Where a worktree's accept step finds the operator's documents.
#[derive(Clone, Debug)]
pub struct TaskDocs {
    /// The project root, which holds the operator's `tasks/`.
    pub project_root: PathBuf,
    /// The role taking the work, for the commit's byline.
    pub role: Option<String>,
}

/// `tasks/<task>.md` for a task name upstream takes as a file name (not
/// blank, not padded, not `.` or `..`, no slash, backslash or control
/// character); None for any other.
pub fn relative(task: &str) -> Option<String> {
    let ok = !task.trim().is_empty()
        && task == task.trim()
        && task != "."
        && task != ".."
        && !task
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control());
    ok.then(|| format!("tasks/{task}.md"))
}

/// The operator's current document for a task.
struct Source {
    rel: String,
    path: PathBuf,
    bytes: Vec<u8>,
}

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// The operator's document for `task` in the project at `root`, when there
/// is one.
fn operator_copy(root: &Path, task: &str) -> Result<Option<Source>> {
    let Some(rel) = relative(task) else {
        return Ok(None);
    };
    let dir = root.join("tasks");
    if is_symlink(&dir) {
        return Err(Error::bad_file_hint(
            &dir,
            "is a symlink: task documents are read only from the project's own tasks/ folder",
            "make tasks/ a folder of the project holding the documents",
        ));
    }
    let path = root.join(&rel);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let bytes = fsx::read_bounded(&path, MAX_BYTES).map_err(|e| {
        Error::bad_file_hint(
            &path,
            format!("cannot be used as the task document: {e}"),
            format!(
                "make it a regular file (not a symlink) of at most {MAX_BYTES} bytes, or remove it"
            ),
        )
    })?;
    Ok(Some(Source { rel, path, bytes }))
}

fn git_run(wt: &Path, args: &[&str]) -> Result<git::Reply> {
    git::call(wt, args).map_err(Error::process)
}

/// The blob `rev` has at `rel`, None when it has none.
fn blob_at(wt: &Path, rev: &str, rel: &str) -> Option<String> {
    let r = git::call(
        wt,
        &["rev-parse", "-q", "--verify", &format!("{rev}:{rel}")],
    )
    .ok()?;
    let id = r.stdout.trim().to_string();
    (r.ok && !id.is_empty()).then_some(id)
}

/// The blob id `file`'s bytes would have (no filters: the bytes as they are).
fn blob_of(wt: &Path, file: &Path) -> Result<String> {
    let f = file.to_string_lossy();
    let r = git_run(wt, &["hash-object", "--no-filters", "--", &f])?;
    if !r.ok {
        return Err(Error::bad_file(
            file,
            format!("git hash-object failed: {}", r.stderr.trim()),
        ));
    }
    Ok(r.stdout.trim().to_string())
}

/// Whether git ignores `rel` in `wt` (then it is neither committed nor
/// required, as upstream does).
fn ignored(wt: &Path, rel: &str) -> bool {
    git::call(wt, &["check-ignore", "-q", "--no-index", "--", rel]).is_ok_and(|r| r.ok)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(b)
}

/// Puts the operator's copy at `rel` in the worktree `wt` when missing or
/// different.
fn copy_into(wt: &Path, src: &Source) -> Result<()> {
    let dir = wt.join("tasks");
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if !m.is_dir() => {
            return Err(Error::bad_file_hint(
                &dir,
                "is not a folder (a symlink is never written through), so the task document cannot be copied into it",
                "remove it; the next ready-next makes the folder",
            ))
        }
        Ok(_) => {}
        Err(_) => fsx::ensure_dirs(&[&dir]).at(&dir)?,
    }
    let dest = wt.join(&src.rel);
    if fsx::read_bounded(&dest, MAX_BYTES).is_ok_and(|b| b == src.bytes) {
        return Ok(());
    }
    fsx::write_file(&dest, &src.bytes).at(&dest)
}

impl TaskDocs {
    /// Before work on `tasks` begins in the worktree `wt`: each task's
    /// document copied in when missing or different, and committed there
    /// unless HEAD holds it already (or git ignores it). Returns the
    /// documents committed.
    pub fn record<'a>(
        &self,
        wt: &Path,
        tasks: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<String>> {
        let mut seen: Vec<&str> = Vec::new();
        let mut committed = Vec::new();
        for task in tasks {
            if seen.contains(&task) {
                continue;
            }
            seen.push(task);
            let Some(src) = operator_copy(&self.project_root, task)? else {
                continue;
            };
            if !same_dir(&self.project_root, wt) {
                copy_into(wt, &src)?;
            }
            let rel = src.rel.as_str();
            if ignored(wt, rel) {
                continue;
            }
            if blob_at(wt, "HEAD", rel) == Some(blob_of(wt, &wt.join(rel))?) {
                continue;
            }
            self.commit(wt, rel)?;
            committed.push(rel.to_string());
        }
        Ok(committed)
    }

    fn commit(&self, wt: &Path, rel: &str) -> Result<()> {
        let by = self.role.as_deref().map(crate::agent::byline::text);
        let mut args = vec!["commit", "--only", "-q", "-m", COMMIT_MESSAGE];
        if let Some(b) = &by {
            args.extend(["-m", b.as_str()]);
        }
        args.extend(["--", rel]);
        for step in [&["add", "--", rel][..], &args[..]] {
            let r = git_run(wt, step)?;
            if !r.ok {
                return Err(Error::process(format!(
                    "{}: the task document could not be committed (git {}: {})\n  hint: commit it yourself (git -C {} add {rel} && git -C {} commit -m '{COMMIT_MESSAGE}' -- {rel}), then run ready-next again",
                    wt.join(rel).display(),
                    step[0],
                    r.stderr.trim(),
                    wt.display(),
                    wt.display()
                )));
            }
        }
        Ok(())
    }
}

/// Why a `git_handoff` of `task` at `commit`, sent from the worktree `wt`,
/// is refused for its task document (upstream's texts), or None when it
/// holds the operator's current one (or the task has none).
pub fn refusal(root: &Path, wt: &Path, task: &str, commit: &CommitId) -> Option<String> {
    let src = match operator_copy(root, task) {
        Ok(Some(s)) => s,
        Ok(None) => return None,
        Err(e) => return Some(e.to_string()),
    };
    let rel = &src.rel;
    if ignored(wt, rel) {
        return None;
    }
    let hint = format!(
        " (the operator's copy is {}: copy it to {rel} in {}, commit it, then send again)",
        src.path.display(),
        wt.display()
    );
    let Some(blob) = blob_at(wt, commit, rel) else {
        return Some(format!(
            "Result commit {commit} does not include the task document {rel}. Receive the task and commit that document before handoff.{hint}"
        ));
    };
    match blob_of(wt, &src.path) {
        Ok(want) if want == blob => None,
        Ok(_) => Some(format!(
            "Result commit {commit} contains a stale task document {rel}. Commit the current operator task document before handoff.{hint}"
        )),
        Err(e) => Some(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_names_are_file_names_as_upstream_takes_them() {
        assert_eq!(relative("change-1").as_deref(), Some("tasks/change-1.md"));
        assert_eq!(relative("a b").as_deref(), Some("tasks/a b.md"));
        for bad in ["", " x", "x ", ".", "..", "a/b", "a\\b", "a\u{7}b"] {
            assert_eq!(relative(bad), None, "{bad:?}");
        }
    }
}
