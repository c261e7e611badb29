//! The pre-commit guard: a commit that touches a file another role holds
//! is refused, naming the holder and how to override. `swarm up` installs
//! the hook when `reservations: guard` is set in swarm.yaml
//! (docs/reservations.md); the hook runs `swarm reservations --guard`.

use std::path::{Path, PathBuf};

use super::glob::Pattern;
use crate::error::{Error, Result, Token};
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::sys::git_hooks;

/// The first line after the shebang of the hook we write: how we know a
/// hook is ours to replace.
pub const MARK: &str = "# swarm-handoff reservations guard";

/// Who "me" is in a worktree: `SWARMFORGE_ROLE` (as the agent helpers take
/// it), else the one role roles.tsv gives this worktree; `None` when
/// neither tells (a person at a checkout several roles share).
pub fn me(project: &Project, worktree: &Path) -> Result<Option<String>> {
    me_in(project, &Roles::load(&project.roles_tsv())?, worktree)
}

/// [`me`] with roles.tsv already read.
pub fn me_in(project: &Project, roles: &Roles, worktree: &Path) -> Result<Option<String>> {
    if let Ok(r) = std::env::var("SWARMFORGE_ROLE") {
        if !r.is_empty() {
            if roles.find(&r).is_none() {
                return Err(Error::not_found(format!(
                    "SWARMFORGE_ROLE={} is not a role of {}{}",
                    crate::text::escape(&r),
                    project.root.display(),
                    roles.unknown_hint(&project.roles_tsv())
                )));
            }
            return Ok(Some(r));
        }
    }
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let here = canon(worktree);
    let mine: Vec<&str> = roles
        .roles
        .iter()
        .filter(|r| {
            let p = r.worktree_in(&project.root);
            canon(&p) == here
        })
        .map(|r| r.name.as_str())
        .collect();
    Ok(match mine.as_slice() {
        [one] => Some(one.to_string()),
        _ => None,
    })
}

/// The staged paths of the commit being made in `worktree` (both sides of
/// a rename).
pub fn staged(worktree: &Path) -> Result<Vec<String>> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(worktree)
        .args(["diff", "--cached", "--name-only", "--no-renames", "-z"])
        .output()
        .map_err(|e| Error::process(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(Error::process(format!(
            "git diff --cached in {}: {}",
            worktree.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect())
}

/// One staged file another role holds.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Blocked {
    pub path: String,
    pub holder: String,
    pub glob: String,
    pub expires_at: String,
    pub reason: String,
}

/// The staged files of `worktree` that a live reservation of a role other
/// than `me` covers.
pub fn check(project: &Project, worktree: &Path, me: Option<&str>) -> Result<Vec<Blocked>> {
    let files = staged(worktree)?;
    let held = super::active(project)?;
    // Each glob compiled once, not once per staged file.
    let others: Vec<(&super::Reservation, Vec<Pattern>)> = held
        .iter()
        .filter(|r| Some(r.role.as_str()) != me)
        .map(|r| (r, r.globs.iter().map(|g| Pattern::new(g)).collect()))
        .collect();
    let mut out = Vec::new();
    for f in &files {
        for (r, patterns) in &others {
            if let Some(i) = patterns.iter().position(|p| p.matches(f)) {
                out.push(Blocked {
                    path: f.clone(),
                    holder: r.role.clone(),
                    glob: r.globs[i].clone(),
                    expires_at: r.expires_at.clone(),
                    reason: r.reason.clone(),
                });
                break;
            }
        }
    }
    Ok(out)
}

/// The refusal a blocked commit gets.
pub fn refusal(blocked: &[Blocked]) -> Error {
    let lines: Vec<String> = blocked
        .iter()
        .map(|b| {
            let reason = if b.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", crate::text::escape(&b.reason))
            };
            format!(
                "  {}: reserved by {} ({}) until {}{reason}",
                crate::text::escape(&b.path),
                b.holder,
                crate::text::escape(&b.glob),
                b.expires_at.get(..19).unwrap_or(&b.expires_at)
            )
        })
        .collect();
    let mut holders: Vec<&str> = blocked.iter().map(|b| b.holder.as_str()).collect();
    holders.dedup();
    Error::refused(
        Token::Reserved,
        format!(
            "commit refused: {} staged file(s) reserved by another role\n{}\n  hint: ask {} to run `swarm release`, wait until it expires, or override with `git commit --no-verify`",
            blocked.len(),
            lines.join("\n"),
            holders.join(", ")
        ),
        Vec::new(),
    )
}

/// What installing the hook did.
#[derive(Debug, PartialEq, Eq)]
pub enum Installed {
    Written(PathBuf),
    /// A pre-commit hook of someone else's is there: left alone.
    Foreign(PathBuf),
}

/// Installs the pre-commit hook in the hooks folder of the repository at
/// `root` (every worktree shares it), running `swarm` at `swarm_bin`.
pub fn install(root: &Path, swarm_bin: &Path) -> Result<Installed> {
    let hook = git_hooks::hooks_dir(root)?.join("pre-commit");
    if git_hooks::owner(&hook, &[MARK]) == git_hooks::Owner::Foreign {
        return Ok(Installed::Foreign(hook));
    }
    let script = format!(
        "#!/bin/sh\n{MARK} (written by `swarm up`; docs/reservations.md)\nexec {} reservations --guard\n",
        crate::sys::shell::quote_path(swarm_bin)
    );
    git_hooks::write(&hook, &script)?;
    Ok(Installed::Written(hook))
}
