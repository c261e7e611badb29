//! What a sandbox may bind, checked (docs/security.md, "What an agent can
//! plant"): an agent writes its worktree, its queue folders and its
//! launcher folder, and whatever it leaves there is read at the next start;
//! a link planted there would make that start bind whatever it points at.
//! The invariant: every source inside the project is walked from the
//! project root, component by component, and none is a link.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The folder to give back for a program folder on PATH: an npm
/// `node_modules/.bin` holds only links into its packages (`codex ->
/// ../@openai/codex/bin/codex.js`), so the whole `node_modules` goes back,
/// or the links would dangle inside the sandbox.
pub(super) fn program_tree(d: &Path) -> PathBuf {
    d.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .unwrap_or(d)
        .to_path_buf()
}

pub(super) fn canon(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// `rel` below `base` (a folder no agent can replace: the canonical
/// project root), checked as what the sandbox may bind: every component a
/// real folder, none a link, the last one owned by this user. An agent can
/// write inside its worktree, its queue folders and its launcher folder; a
/// link planted there would make the next start bind whatever it points at
/// (the project's `.swarmforge/`, the person's home, `/`), so none is
/// followed (docs/security.md, "What an agent can write").
pub(super) fn real_dir(base: &Path, rel: &Path, make: bool) -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut at = base.to_path_buf();
    let mut last = None;
    for c in rel.components() {
        match c {
            std::path::Component::Normal(n) => at.push(n),
            std::path::Component::CurDir => continue,
            _ => {
                return Err(Error::bad_file(
                    base.join(rel),
                    "not a plain path below the project root, so the sandbox will not bind it",
                ))
            }
        }
        let mut meta = std::fs::symlink_metadata(&at);
        if make
            && meta
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            // Every folder above is real (checked on the way down), so
            // this makes it where it is named; a racing maker is fine.
            match std::fs::create_dir(&at) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io(&at, e)),
            }
            meta = std::fs::symlink_metadata(&at);
        }
        let meta = meta.map_err(|e| Error::io(&at, e))?;
        if !meta.file_type().is_dir() {
            let what = if meta.file_type().is_symlink() {
                "a link"
            } else {
                "not a folder"
            };
            return Err(Error::bad_file_hint(
                &at,
                format!("{what}, where a confined agent's sandbox needs a real folder: an agent may have planted it, and the sandbox follows no link"),
                "look at what it points to, then remove it (the link itself, not its target); `swarm up` makes the folder again",
            ));
        }
        last = Some(meta);
    }
    let owner = crate::launch::agents::claude_root::euid();
    if let Some(meta) = last.filter(|m| m.uid() != owner) {
        return Err(Error::bad_file_hint(
            &at,
            format!(
                "owned by uid {}, not by this user (uid {owner}), so the sandbox will not bind it",
                meta.uid()
            ),
            "give it back to the user who runs the swarm (chown), or remove it",
        ));
    }
    Ok(at)
}

/// [`real_dir`] for `p` inside the project (made if missing); a path
/// outside the project is the person's own choice and is only resolved.
pub(super) fn project_dir(root: &Path, project_root: &Path, p: &Path) -> Result<PathBuf> {
    match p
        .strip_prefix(project_root)
        .or_else(|_| p.strip_prefix(root))
    {
        Ok(rel) => real_dir(root, rel, true),
        Err(_) => Ok(canon(p)),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn an_npm_bin_folder_gives_back_its_node_modules() {
        assert_eq!(
            super::program_tree(Path::new("/tmp/x/target/agent-clis/node_modules/.bin")),
            Path::new("/tmp/x/target/agent-clis/node_modules")
        );
        assert_eq!(
            super::program_tree(Path::new("/tmp/b/bin")),
            Path::new("/tmp/b/bin")
        );
    }
}
