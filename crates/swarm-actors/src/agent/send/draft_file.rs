//! The draft file: how its path is shown, where it really is (inside the
//! project, or refused), and deleting it once the handoff is queued.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::root::Located;

/// The draft path as shown in messages, normalised like Java's
/// `Path.normalize` (which SwarmForge applied to the argument): empty and `.`
/// segments dropped, `name/..` folded, `..` at the root dropped.
pub fn shown_path(arg: &str) -> String {
    let absolute = arg.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in arg.split('/') {
        match seg {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// The canonical folder holding `path` (every symlinked folder on the way
/// resolved), or None when it cannot be resolved.
fn real_folder(path: &Path) -> Option<PathBuf> {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .canonicalize()
        .ok()
}

fn inside_any(p: &Path, roots: &[&Path]) -> bool {
    roots
        .iter()
        .filter_map(|r| r.canonicalize().ok())
        .any(|r| p.starts_with(r))
}

/// The draft's real path, which must lie inside the project: O_NOFOLLOW
/// guards only the last component, and `dirlink/secret.txt` through a
/// symlinked folder (or a draft that is itself a symlink) would otherwise
/// read, and then delete, a file anywhere. The resolved path is what is
/// read, so a folder swapped for a link after the check is not followed.
pub(super) fn real_draft(path: &Path, at: &Located, shown: &str) -> Result<PathBuf> {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let real = path
        .canonicalize()
        .map_err(|e| Error::env(format!("Cannot read draft {shown}: {e}")))?;
    if !inside_any(&real, &[&at.worktree.root, &at.project.root]) {
        let how = if is_link {
            "is a symlink to"
        } else {
            "resolves to"
        };
        // Where drafts belong, said with the refusal (the primers say it too).
        return Err(Error::bad_input(format!(
            "Draft file {shown} {how} {} outside the project; refusing to read it.\n  hint: drafts belong in your worktree, {}: write the draft there (not in /tmp or your home folder) and pass that path; it is deleted once queued",
            real.display(),
            at.worktree.root.display()
        )));
    }
    Ok(real)
}

/// Deletes the draft after the queued line was printed (best effort: the
/// handoff is queued whatever happens here, docs/protocol.md §7.1).
/// `worktree` is the sender's worktree root ([`super::Queued::worktree`]):
/// the send located it already, so the project is not looked up again.
pub fn discard_draft(draft_arg: &str, cwd: &Path, worktree: &Path) -> Option<String> {
    let p = if Path::new(draft_arg).is_absolute() {
        PathBuf::from(draft_arg)
    } else {
        cwd.join(draft_arg)
    };
    // Only a file in the sender's own worktree is ours to delete (a symlink
    // there is removed as a link; its target is never touched).
    let mine = real_folder(&p).is_some_and(|dir| inside_any(&dir, &[worktree]));
    if !mine {
        return Some(format!(
            "warning: handoff queued; the draft {} is outside your worktree and was left in place",
            p.display()
        ));
    }
    fsx::remove_file(&p).err().map(|e| {
        format!(
            "warning: handoff queued, but the draft {} could not be deleted: {e}",
            p.display()
        )
    })
}
