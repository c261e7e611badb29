//! The project's git repository and files as `swarm init` and the
//! launcher prepare them: running git with an error that names the command
//! and git's message, the repository's `info/exclude` lines, and files
//! written only when their bytes change (so a second `swarm init` or `swarm
//! up` changes nothing).

use std::path::Path;
use std::process::Command;

use crate::error::{Error, IoContext, Result};
use crate::fsx;

/// Runs git in `dir`; the error names the command and git's message.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    git_with(dir, args, &[])
}

pub(super) fn git_with(dir: &Path, args: &[&str], pre: &[String]) -> Result<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(pre)
        .args(args)
        .output()
        .map_err(|e| {
            Error::process(format!(
                "cannot run git: {e}\n  hint: install git; swarm uses it for worktrees and commits"
            ))
        })?;
    if !out.status.success() {
        return Err(Error::process(format!(
            "git {} failed in {}: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Writes `bytes` at `path` unless it already holds exactly them.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        fsx::ensure_dirs(&[dir]).at(dir)?;
    }
    fsx::write_file(path, bytes).at(path)?;
    Ok(true)
}

/// Adds the missing `patterns` to the repository's `info/exclude` (shared
/// by every worktree); returns what changed, for the report.
pub fn add_excludes(root: &Path, patterns: &[&str]) -> Result<Option<String>> {
    let rel = git(root, &["rev-parse", "--git-path", "info/exclude"])?;
    let path = root.join(rel);
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let missing: Vec<&str> = patterns
        .iter()
        .copied()
        .filter(|e| !old.lines().any(|l| l.trim_end() == *e))
        .collect();
    if missing.is_empty() {
        return Ok(None);
    }
    let mut text = old.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for e in &missing {
        text.push_str(e);
        text.push('\n');
    }
    write_if_changed(&path, text.as_bytes())?;
    Ok(Some(format!(
        "added {} to {}",
        missing.join(" "),
        path.display()
    )))
}
