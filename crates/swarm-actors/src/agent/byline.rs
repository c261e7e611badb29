//! The role byline, as today's SwarmForge keeps it (docs/swarmforge-compat.md
//! §8): every commit a role makes ends with `By <role>.`, added by a marked
//! `commit-msg` hook that `swarm init` / `swarm up` install in the
//! repository's hooks folder. A `commit-msg` hook the project had already is
//! kept as `commit-msg.before-swarmforge` and run after ours (its exit
//! status decides); `swarm hooks remove` puts it back. Why here: the
//! byline's text, whose commit gets one, and the hook that adds it are one
//! concept, which the accept step's own commit (`task_doc`) also uses.
//!
//! Invariants: the hook adds nothing to a message that already holds the
//! byline, and nothing in a worktree that is no role's (with no
//! `SWARMFORGE_ROLE`); installing is idempotent and never overwrites a saved
//! hook; removing refuses a `commit-msg` that is no longer ours. The hook
//! runs where the commit is made, so inside a confined agent's sandbox too:
//! it only reads roles.tsv and rewrites the message file git gave it.

use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::sys::git_hooks::{self, Owner};

/// The marker line of the hook, upstream's own words, so SwarmForge's
/// startup and ours each take the other's hook for theirs to update or
/// remove instead of wrapping it again.
pub const MARK: &str = "# SWARMFORGE COMBINED COMMIT-MSG HOOK";

/// What upstream recognises its hook by (a substring of [`MARK`]).
const UPSTREAM_MARK: &str = "SWARMFORGE COMBINED COMMIT-MSG HOOK";

/// Where a project's own `commit-msg` is kept while ours is installed.
pub const SAVED: &str = "commit-msg.before-swarmforge";

/// Longest commit message the hook rewrites.
const MAX_MESSAGE_BYTES: u64 = 1024 * 1024;

/// `By <role>.`
pub fn text(role: &str) -> String {
    format!("By {role}.")
}

/// The message with the byline added (after a blank line, trailing blanks
/// trimmed), or None when it already holds it. Bytes, so a message in
/// another encoding than UTF-8 is kept as it was.
pub fn appended(message: &[u8], role: &str) -> Option<Vec<u8>> {
    let by = text(role);
    if message.windows(by.len()).any(|w| w == by.as_bytes()) {
        return None;
    }
    let end = message
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    let mut out = message[..end].to_vec();
    out.extend_from_slice(format!("\n\n{by}\n").as_bytes());
    Some(out)
}

/// Whose commit one in `worktree` is: `SWARMFORGE_ROLE` when set, else the
/// one role roles.tsv gives this worktree (as the reservations guard asks);
/// None in a worktree that is no role's or several roles'.
pub fn role_of(project: &Project, worktree: &Path) -> Result<Option<String>> {
    crate::reservations::guard::me(project, worktree)
}

/// [`role_of`] with roles.tsv already read.
pub fn role_in(project: &Project, roles: &Roles, worktree: &Path) -> Result<Option<String>> {
    crate::reservations::guard::me_in(project, roles, worktree)
}

/// What the hook does with git's message file `msg`: adds the byline of
/// the role whose commit this is (see [`role_of`]). Returns the role.
pub fn apply(project: &Project, worktree: &Path, msg: &Path) -> Result<Option<String>> {
    let Some(role) = role_of(project, worktree)? else {
        return Ok(None);
    };
    let bytes = fsx::read_bounded(msg, MAX_MESSAGE_BYTES).map_err(|e| {
        Error::bad_file_hint(
            msg,
            format!("cannot read the commit message: {e}"),
            "commit again; git writes this file for its commit-msg hook",
        )
    })?;
    let Some(new) = appended(&bytes, &role) else {
        return Ok(Some(role));
    };
    fsx::write_file(msg, &new).at(msg)?;
    Ok(Some(role))
}

/// The hook's state in a repository, for `swarm doctor` and the commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Ours, as the running `swarm` would write it.
    Installed {
        hook: PathBuf,
    },
    /// Ours, but written for another `swarm` binary or an older text.
    Stale {
        hook: PathBuf,
    },
    Missing {
        hook: PathBuf,
    },
    /// Someone else's `commit-msg`; installing moves it to [`SAVED`].
    Foreign {
        hook: PathBuf,
    },
    /// Someone else's `commit-msg` and a saved one both there: installing
    /// would overwrite one of them, so it stops.
    Blocked {
        hook: PathBuf,
        saved: PathBuf,
    },
}

fn script(swarm_bin: &Path, saved: &Path) -> String {
    format!(
        "#!/bin/sh\n\
{MARK} (written by swarm-handoff's `swarm init` / `swarm up`; `swarm hooks remove` takes it out and restores {SAVED}; docs/swarmforge-compat.md §8)\n\
swarm={bin}\n\
if [ -x \"$swarm\" ]; then\n\
\x20 \"$swarm\" hooks commit-msg \"$@\" || exit $?\n\
else\n\
\x20 echo \"commit-msg: $swarm is gone: no role byline added (run swarm up again, or swarm hooks remove)\" >&2\n\
fi\n\
saved={saved}\n\
if [ -x \"$saved\" ]; then\n\
\x20 exec \"$saved\" \"$@\"\n\
fi\n\
exit 0\n",
        bin = crate::sys::shell::quote_path(swarm_bin),
        saved = crate::sys::shell::quote_path(saved),
    )
}

fn paths(root: &Path) -> Result<(PathBuf, PathBuf)> {
    let dir = git_hooks::hooks_dir(root)?;
    Ok((dir.join("commit-msg"), dir.join(SAVED)))
}

fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// The hook's state in the repository at `root`, against the hook the
/// `swarm` at `swarm_bin` would write.
pub fn state(root: &Path, swarm_bin: &Path) -> Result<State> {
    let (hook, saved) = paths(root)?;
    Ok(match git_hooks::owner(&hook, &[UPSTREAM_MARK]) {
        Owner::Missing => State::Missing { hook },
        Owner::Swarm if git_hooks::holds(&hook, &script(swarm_bin, &saved)) => {
            State::Installed { hook }
        }
        Owner::Swarm => State::Stale { hook },
        Owner::Foreign if exists(&saved) => State::Blocked { hook, saved },
        Owner::Foreign => State::Foreign { hook },
    })
}

/// Installs the hook in the repository at `root` (once; again only when
/// its text would change). Returns what changed, for the report.
pub fn install(root: &Path, swarm_bin: &Path) -> Result<Vec<String>> {
    let (hook, saved) = paths(root)?;
    let mut done = Vec::new();
    match state(root, swarm_bin)? {
        State::Installed { .. } => return Ok(done),
        State::Blocked { hook, saved } => {
            return Err(Error::conflict(format!(
                "Cannot install the commit-msg byline hook: {} is another hook and {} already exists\n  hint: merge the two into one (or remove the one you no longer want), then run the command again",
                hook.display(),
                saved.display()
            )))
        }
        State::Foreign { .. } => {
            fsx::move_noreplace(&hook, &saved).at(&hook)?;
            done.push(format!(
                "kept the project's commit-msg hook as {} (run after the byline)",
                saved.display()
            ));
        }
        State::Missing { .. } | State::Stale { .. } => {}
    }
    git_hooks::write(&hook, &script(swarm_bin, &saved))?;
    done.push(format!(
        "commit-msg byline hook: {} (adds `By <role>.` to commits in role worktrees)",
        hook.display()
    ));
    Ok(done)
}

/// Removes our hook from the repository at `root` and restores the saved
/// one; refuses a `commit-msg` that is not ours while a saved one waits
/// (ours was changed since); nothing to do when neither is there.
pub fn remove(root: &Path) -> Result<Vec<String>> {
    let (hook, saved) = paths(root)?;
    let mut done = Vec::new();
    match git_hooks::owner(&hook, &[UPSTREAM_MARK]) {
        // Not ours and nothing of the project's kept aside: nothing of the
        // swarm's is installed (removed already, or never).
        Owner::Foreign if !exists(&saved) => return Ok(done),
        Owner::Foreign => {
            return Err(Error::conflict(format!(
                "Cannot remove the commit-msg byline hook: {} is not the swarm's (it was changed after the swarm installed it)\n  hint: look at it and remove the byline part by hand; the project's own hook is kept at {}",
                hook.display(),
                saved.display()
            )))
        }
        Owner::Swarm => {
            fsx::remove_file(&hook).at(&hook)?;
            done.push(format!("removed the commit-msg byline hook {}", hook.display()));
        }
        Owner::Missing => {}
    }
    if exists(&saved) {
        fsx::move_noreplace(&saved, &hook).at(&saved)?;
        done.push(format!(
            "restored the project's commit-msg hook {}",
            hook.display()
        ));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byline_goes_after_a_blank_line_once() {
        let add = |m: &[u8], r| appended(m, r).map(|v| String::from_utf8(v).unwrap());
        assert_eq!(
            add(b"Fix it\n\n", "coder").as_deref(),
            Some("Fix it\n\nBy coder.\n")
        );
        assert_eq!(add(b"Fix it\n\nBy coder.\n", "coder"), None);
        assert_eq!(
            add(b"Fix it\n\nBy coder.\n", "tester").as_deref(),
            Some("Fix it\n\nBy coder.\n\nBy tester.\n")
        );
        // Not UTF-8 (Latin-1): kept byte for byte.
        assert_eq!(
            appended(b"Caf\xe9\n", "coder"),
            Some(b"Caf\xe9\n\nBy coder.\n".to_vec())
        );
    }
}
