//! SwarmForge's rejected-task folder, `.swarmforge/rejected-tasks/<task-id>/`
//! at the project root (docs/swarmforge-compat.md §5), and the git branch
//! names its Retry and Delete snapshot a commit under.
//!
//! Upstream's dashboard (sgo/forgelet-swarmforge `pack_web.bb`:
//! `task-reviews-file`, `append-task-review!`, `archive-rejected!`,
//! `rejected-ref`, `rejected-latest`) keeps there, per task:
//!
//! - `reviews.json`, the history of a person's review comments, one list
//!   per document: `{"<path>": [{"at": "<ISO instant>", "text": "…"}]}`;
//!   a comment is appended when it is saved and when the task is sent back
//!   (Retry), and the file goes when the task is approved or deleted;
//! - copies of the task's files when it is deleted (the held handoff, its
//!   comments, the card's text);
//!
//! and names a snapshot of the rejected commit `rejected/<task-id>/<n>`
//! (the first free `n` from 1) and `rejected/<task-id>/latest` (moved to
//! the newest), both branches (`refs/heads/`).
//!
//! Invariant kept here: nothing but a folder named by a task id is in
//! `rejected-tasks/`, and a `reviews.json` in one is a history of that
//! shape; anything else is a [`Problem`] that `swarm status` shows and
//! `swarm audit --check` counts. The history is rewritten whole (temp +
//! fsync + rename) under an OS lock beside the folder, so two appends
//! cannot lose one another.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::fsx;
use crate::protocol::commit_id::CommitId;
use crate::protocol::header::{names, Header, Message};
use crate::protocol::layout::Project;

/// The folder, at the project's `.swarmforge/`.
const FOLDER: &str = "rejected-tasks";
/// A task's review history, in its folder.
pub const REVIEWS: &str = "reviews.json";
/// The largest history read.
pub const MAX_REVIEWS_BYTES: u64 = 4 * 1024 * 1024;
/// The largest file Delete copies into a task's folder.
pub const MAX_ARCHIVED_BYTES: u64 = 16 * 1024 * 1024;
/// The longest task id kept (a folder and a git ref component).
const MAX_TASK_ID: usize = 200;

/// One comment in a document's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub at: String,
    pub text: String,
}

/// A task's review history: each document's comments, oldest first.
pub type History = std::collections::BTreeMap<String, Vec<Entry>>;

/// Something in `rejected-tasks/` that is not as upstream keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub path: PathBuf,
    pub why: String,
}

/// One task's folder, as `swarm status` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Kept {
    pub task_id: String,
    pub dir: PathBuf,
    /// The review history (empty when there is none or it is unreadable:
    /// the problem is reported by [`problems`]).
    pub history: History,
    /// The other files in the folder: what Delete archived.
    pub archived: Vec<String>,
}

/// `.swarmforge/rejected-tasks/`.
pub fn dir(project: &Project) -> PathBuf {
    project.swarmforge().join(FOLDER)
}

/// The lock serialising rewrites of any history (beside the folder, so
/// the folder holds only what upstream puts there).
fn lock_file(project: &Project) -> PathBuf {
    project.swarmforge().join("rejected-tasks.lock")
}

/// Whether `id` can name a task's folder and a git ref component: 1 to
/// 200 of `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`, no `..`, not
/// ending in `.lock` (upstream's ids are `<yyyyMMddTHHmmss…Z>-<slug>` or a
/// card's name).
pub fn valid_task_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_TASK_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !id.starts_with(['.', '-'])
        && !id.contains("..")
        && !id.ends_with(".lock")
}

/// The task a held handoff belongs to, as upstream reads it (`task_id`,
/// else `task`), when it can name a folder.
pub fn task_of(m: &Message) -> Option<String> {
    [names::TASK_ID, names::TASK]
        .iter()
        .filter_map(|h| m.get(*h).map(str::trim))
        .find(|v| !v.is_empty())
        .filter(|v| valid_task_id(v))
        .map(str::to_string)
}

/// The documents a held handoff is reviewed by: the paths of its
/// `artifact` headers (`<sha256> <bytes> <path>`), as upstream's
/// `approval-doc-paths` takes its `artifacts`.
pub fn documents_of(m: &Message) -> Vec<String> {
    m.get_all(names::ARTIFACT)
        .map(|a| a.splitn(3, ' ').nth(2).unwrap_or(a).to_string())
        .collect()
}

/// The commit a held handoff names, and the commit its task started from,
/// trimmed: each only when it is a [`CommitId`] git takes as an
/// abbreviation (4 to 64 hex digits), so nothing an agent wrote reaches git
/// as an option or a revision expression.
pub fn commits_of(m: &Message) -> (Option<CommitId>, Option<CommitId>) {
    let get = |h: Header| {
        m.get(h)
            .and_then(|v| CommitId::parse(v.trim()).ok())
            .filter(CommitId::is_abbrev)
    };
    (get(names::COMMIT), get(names::TASK_BASE_COMMIT))
}

/// A task's folder.
pub fn task_dir(project: &Project, task_id: &str) -> PathBuf {
    dir(project).join(task_id)
}

/// A task's review history file.
pub fn reviews_file(project: &Project, task_id: &str) -> PathBuf {
    task_dir(project, task_id).join(REVIEWS)
}

/// The numbered snapshot branch `n` of a task, and its `latest`.
pub fn snapshot_ref(task_id: &str, n: u32) -> String {
    format!("refs/heads/rejected/{task_id}/{n}")
}
pub fn latest_ref(task_id: &str) -> String {
    format!("refs/heads/rejected/{task_id}/latest")
}

/// Why a task's review history file cannot be read: refused as a file
/// (a symlink, too large, unreadable) or not the JSON shape a review
/// history has (the text shows the shape to repair it to).
#[derive(Debug, thiserror::Error)]
pub enum BadHistory {
    #[error("{0}")]
    File(#[from] fsx::ReadRefusal),
    #[error("not a review history ({{\"<path>\": [{{\"at\": …, \"text\": …}}]}}): {0}")]
    Shape(#[from] serde_json::Error),
}

fn parse(bytes: &[u8]) -> Result<History, BadHistory> {
    Ok(serde_json::from_slice::<History>(bytes)?)
}

/// A task's review history (none: empty). Err says why the file is not one.
pub fn read(project: &Project, task_id: &str) -> Result<History, BadHistory> {
    let file = reviews_file(project, task_id);
    if !std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_file()) {
        return Ok(History::new());
    }
    let bytes = fsx::read_bounded(&file, MAX_REVIEWS_BYTES)?;
    parse(&bytes)
}

fn tmp(project: &Project) -> PathBuf {
    project.approvals_tmp()
}

/// A task's folder, made if missing, refused when a symlink is on the way
/// (writing through one could write outside the project).
fn open_dir(project: &Project, task_id: &str) -> std::io::Result<PathBuf> {
    let folder = task_dir(project, task_id);
    for d in [dir(project), folder.clone()] {
        if std::fs::symlink_metadata(&d).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(std::io::Error::other(format!(
                "{} is a symlink: nothing is written through it; make it a plain folder of the project",
                d.display()
            )));
        }
    }
    fsx::ensure_dirs(&[&folder, &tmp(project)])?;
    Ok(folder)
}

/// Appends `text` (trimmed; blank: nothing) at `at` to the history of
/// each of `docs` of task `task_id`. An unreadable history is not
/// overwritten: the error names it.
pub fn append(
    project: &Project,
    task_id: &str,
    docs: &[String],
    text: &str,
    at: &str,
) -> std::io::Result<()> {
    let text = text.trim();
    let docs: Vec<&String> = docs.iter().filter(|d| !d.trim().is_empty()).collect();
    if text.is_empty() || docs.is_empty() || !valid_task_id(task_id) {
        return Ok(());
    }
    open_dir(project, task_id)?;
    let _lock = fsx::lock(&lock_file(project))?;
    let mut h = read(project, task_id).map_err(|why| {
        std::io::Error::other(format!(
            "{}: {why}; fix or delete it",
            reviews_file(project, task_id).display()
        ))
    })?;
    for d in docs {
        h.entry(d.clone()).or_default().push(Entry {
            at: at.to_string(),
            text: text.to_string(),
        });
    }
    let bytes = serde_json::to_vec(&h).unwrap_or_default();
    let file = reviews_file(project, task_id);
    match fsx::publish(&tmp(project), &file, &bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            fsx::replace(&tmp(project), &file, &bytes)
        }
        other => other,
    }
}

/// Appends `text` to the history of the documents of held message `m`
/// (its artifacts and those a person commented on) under its task.
pub fn record(
    project: &Project,
    m: &Message,
    reviewed: &[String],
    text: &str,
) -> crate::error::Result<()> {
    let Some(task) = task_of(m) else {
        return Ok(());
    };
    let mut docs = documents_of(m);
    for d in reviewed {
        if !docs.contains(d) {
            docs.push(d.clone());
        }
    }
    append(
        project,
        &task,
        &docs,
        text,
        &crate::protocol::clock::iso_now(),
    )
    .map_err(|e| crate::error::Error::io(reviews_file(project, &task), e))
}

/// Drops the history of held message `m`'s task (it was approved).
pub fn forget(project: &Project, m: &Message) -> crate::error::Result<()> {
    match task_of(m) {
        Some(task) => {
            drop(project, &task).map_err(|e| crate::error::Error::io(task_dir(project, &task), e))
        }
        None => Ok(()),
    }
}

/// Removes a task's review history, and its folder when that leaves it
/// empty (upstream's `drop-task-reviews!`).
pub fn drop(project: &Project, task_id: &str) -> std::io::Result<()> {
    if !valid_task_id(task_id) {
        return Ok(());
    }
    let _lock = fsx::lock(&lock_file(project));
    fsx::remove_file(&reviews_file(project, task_id))?;
    let folder = task_dir(project, task_id);
    if fsx::is_empty_dir(&folder).unwrap_or(false) {
        fsx::remove_empty_dir(&folder)?;
    }
    Ok(())
}

/// Copies `bytes` into a task's folder as `name`, or `<n>_<name>` when
/// that is taken by other content (never over a file); returns where.
pub fn archive(
    project: &Project,
    task_id: &str,
    name: &str,
    bytes: &[u8],
) -> std::io::Result<PathBuf> {
    let folder = open_dir(project, task_id)?;
    for n in 1..=100u32 {
        let dest = if n == 1 {
            folder.join(name)
        } else {
            folder.join(format!("{n}_{name}"))
        };
        match fsx::publish(&tmp(project), &dest, bytes) {
            Ok(()) => return Ok(dest),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if fsx::read_bounded(&dest, bytes.len() as u64 + 1).is_ok_and(|b| b == bytes) {
                    return Ok(dest);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!(
        "{}: a hundred files named like {name} already",
        folder.display()
    )))
}

/// Every task folder, by task id.
pub fn list(project: &Project) -> Vec<Kept> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir(project)) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.file_type().is_ok_and(|t| t.is_dir()) || !valid_task_id(&name) {
            continue;
        }
        let mut archived: Vec<String> = std::fs::read_dir(e.path())
            .map(|rd| {
                rd.flatten()
                    .map(|f| f.file_name().to_string_lossy().into_owned())
                    .filter(|f| f != REVIEWS)
                    .collect()
            })
            .unwrap_or_default();
        archived.sort();
        out.push(Kept {
            history: read(project, &name).unwrap_or_default(),
            task_id: name,
            dir: e.path(),
            archived,
        });
    }
    out.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    out
}

/// What in `rejected-tasks/` is not as upstream keeps it, with why and
/// how to repair it.
pub fn problems(project: &Project) -> Vec<Problem> {
    let root = dir(project);
    let mut out = Vec::new();
    let mut p = |path: PathBuf, why: &str| {
        out.push(Problem {
            path,
            why: why.to_string(),
        })
    };
    if std::fs::symlink_metadata(&root).is_ok_and(|m| m.file_type().is_symlink()) {
        p(
            root,
            "a symlink: nothing is read through it; make it a plain folder of the project",
        );
        return out;
    }
    let Ok(rd) = std::fs::read_dir(&root) else {
        return out;
    };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let Ok(t) = e.file_type() else { continue };
        if !t.is_dir() {
            let why = if name.ends_with(".reviews.json") {
                "a review history beside the task folders: upstream keeps a task's history as rejected-tasks/<task-id>/reviews.json; move it there"
            } else {
                "not a task folder: rejected-tasks/ holds one folder per task id; move it out"
            };
            p(path, why);
            continue;
        }
        if !valid_task_id(&name) {
            p(path, "a folder whose name is no task id (A-Z a-z 0-9 . _ -, at most 200); rename or remove it");
            continue;
        }
        let Ok(inner) = std::fs::read_dir(&path) else {
            continue;
        };
        for f in inner.flatten() {
            let fp = f.path();
            if !f.file_type().is_ok_and(|t| t.is_file()) {
                p(fp, "not a plain file: a task folder holds its review history and archived files; remove it");
            } else if f.file_name() == REVIEWS {
                if let Err(why) = read(project, &name) {
                    p(fp, &format!("{why}; fix or delete it"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_that_name_a_folder_and_a_ref() {
        for ok in ["20261201T100000000000Z-parser", "parser", "a.b_c-1"] {
            assert!(valid_task_id(ok), "{ok}");
        }
        for bad in ["", ".x", "-x", "a..b", "a/b", "x.lock", "a b", "ü"] {
            assert!(!valid_task_id(bad), "{bad}");
        }
        assert!(!valid_task_id(&"a".repeat(201)));
        assert_eq!(snapshot_ref("t", 2), "refs/heads/rejected/t/2");
        assert_eq!(latest_ref("t"), "refs/heads/rejected/t/latest");
    }

    #[test]
    fn upstreams_history_shape_and_what_is_not_one() {
        let h = parse(br#"{"docs/a.md":[{"at":"2026-12-01T10:00:00Z","text":"x"}]}"#).unwrap();
        assert_eq!(h["docs/a.md"][0].text, "x");
        for bad in [
            &br#"{"docs/a.md":"x"}"#[..],
            br#"[]"#,
            br#"{"a":[{"at":"t"}]}"#,
            br#"{"a":[{"at":"t","text":"x","by":"me"}]}"#,
            b"not json",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn documents_task_and_commits_of_a_held_handoff() {
        let m = Message::parse(
            "task: parser\ncommit: abcd\ntask_base_commit: def0\nartifact: 00 3 docs/a.md\nartifact: 11 4 b.md\n\n",
        )
        .unwrap();
        assert_eq!(task_of(&m).as_deref(), Some("parser"));
        assert_eq!(documents_of(&m), ["docs/a.md", "b.md"]);
        let id = |s: &str| Some(CommitId::parse(s).unwrap());
        assert_eq!(commits_of(&m), (id("abcd"), id("def0")));
        let m = Message::parse("commit: --output=x\ntask_base_commit: HEAD~3\n\n").unwrap();
        assert_eq!(commits_of(&m), (None, None));
        // Too short for git to take as an abbreviation, or longer than an id.
        let long = "a".repeat(65);
        let m = Message::parse(&format!("commit: abc\ntask_base_commit: {long}\n\n")).unwrap();
        assert_eq!(commits_of(&m), (None, None));
        let m = Message::parse("task_id: 2026-x\ntask: p\n\n").unwrap();
        assert_eq!(task_of(&m).as_deref(), Some("2026-x"));
        let m = Message::parse("task: ../etc\n\n").unwrap();
        assert_eq!(task_of(&m), None);
    }

    #[test]
    fn appended_kept_dropped_and_never_written_through_a_symlink() {
        let t = tempfile::tempdir().unwrap();
        let p = Project::new(t.path());
        let docs = vec!["a.md".to_string()];
        append(&p, "task", &docs, " first ", "t1").unwrap();
        append(&p, "task", &docs, "  ", "t2").unwrap();
        append(&p, "task", &docs, "second", "t3").unwrap();
        let h = read(&p, "task").unwrap();
        let texts: Vec<&str> = h["a.md"].iter().map(|e| e.text.as_str()).collect();
        assert_eq!(texts, ["first", "second"]);
        assert!(problems(&p).is_empty());
        drop(&p, "task").unwrap();
        assert!(!task_dir(&p, "task").exists());

        let outside = tempfile::tempdir().unwrap();
        std::fs::remove_dir(dir(&p)).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir(&p)).unwrap();
        assert!(append(&p, "task", &docs, "x", "t4").is_err());
        assert!(archive(&p, "task", "f", b"x").is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        assert_eq!(problems(&p).len(), 1);
    }
}
