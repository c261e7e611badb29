//! The worktrees and inboxes: shared inboxes, a person's mail left in an old
//! inbox, launch files git would commit, each role's branch and its
//! commit-msg hook.

use std::path::{Path, PathBuf};

use super::super::{Context, Finding};
use super::absolute;
use crate::agent::queue::STAMP_HEADROOM;
use crate::launch::agents::Cli;
use crate::launch::confine;
use crate::launch::role_branch;
use crate::launch::role_branch::WORKTREE_REF;
use crate::launch::shims;
use crate::protocol::layout::Worktree;
use crate::protocol::people;
use crate::protocol::trail;
use crate::sys::git::Pinned;

/// A human role sharing its worktree (its inbox) with an agent.
pub fn shared_inbox(cx: &Context) -> Vec<Finding> {
    people::shared_inboxes(&cx.roles)
        .iter()
        .map(|s| {
            Finding::new(
                "SHARED_INBOX",
                s.what(),
                s.tsv_hint(&cx.project)
                    .lines()
                    .map(|l| l.trim().trim_start_matches("hint: "))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
            .at(cx.project.roles_tsv())
        })
        .collect()
}

/// Items for a person waiting in an inbox that is not theirs (left from a
/// layout where the person shared an agent's inbox).
pub fn person_mail_elsewhere(cx: &Context) -> Vec<Finding> {
    if !cx.initialised {
        return Vec::new();
    }
    let mut out = Vec::new();
    let local: Vec<_> = cx.roles.roles.iter().filter(|r| !r.is_remote()).collect();
    for h in local.iter().filter(|r| r.is_human()) {
        let own = absolute(cx, &h.worktree_path);
        let mut seen: Vec<PathBuf> = Vec::new();
        for r in &local {
            let wt = absolute(cx, &r.worktree_path);
            if wt == own || seen.contains(&wt) {
                continue;
            }
            seen.push(wt.clone());
            let there: Vec<&str> = local
                .iter()
                .filter(|o| absolute(cx, &o.worktree_path) == wt)
                .map(|o| o.name.as_str())
                .collect();
            let new = Worktree::new(&wt).inbox_new();
            for name in trail::handoff_names(&new).unwrap_or_default() {
                let path = new.join(&name);
                let trail::Loaded::Ok(m) =
                    trail::load_message(&path, cx.config.limits.max_file_bytes + STAMP_HEADROOM)
                else {
                    continue;
                };
                let for_person = m.recipient() == Some(h.name.as_str())
                    || (people::meant_for(&m, &h.name)
                        && !there.iter().any(|o| people::meant_for(&m, o)));
                if for_person {
                    out.push(
                        Finding::new(
                            "PERSON_MAIL_ELSEWHERE",
                            format!(
                                "{} waits for {} in {}, which is not {}'s inbox",
                                m.id().unwrap_or(&name),
                                h.name,
                                new.display(),
                                h.name
                            ),
                            format!(
                                "move it into {}/ (mv {} {}/)",
                                Worktree::new(&own).inbox_new().display(),
                                path.display(),
                                Worktree::new(&own).inbox_new().display()
                            ),
                        )
                        .at(path),
                    );
                }
            }
        }
    }
    out
}

/// Whether git ignores `rel` in the checkout `wt` (None: not a git
/// checkout, or one whose git pointers cannot be believed). Pinned: the
/// checkout may be an agent's (sys::git::Pinned).
fn git_ignores(wt: &Path, rel: &str) -> Option<bool> {
    let r = Pinned::find(wt)
        .ok()?
        .call(&["check-ignore", "-q", "--", rel])
        .ok()?;
    match (r.ok, r.stderr.trim().is_empty()) {
        (true, _) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

fn git_tracks(wt: &Path, rel: &str) -> bool {
    Pinned::find(wt)
        .and_then(|g| g.call(&["ls-files", "--error-unmatch", "--", rel]))
        .is_ok_and(|r| r.ok)
}

/// Files the launcher wrote into a checkout that git neither ignores nor
/// tracks: one `git add -A` would commit the swarm's state or settings.
pub fn launch_files_ignored(cx: &Context) -> Vec<Finding> {
    let mut candidates: Vec<(PathBuf, String)> =
        vec![(cx.project.root.clone(), ".worktrees/".into())];
    for r in cx.roles.roles.iter().filter(|r| !r.is_remote()) {
        if people::is_person_folder(&r.worktree_name) {
            continue;
        }
        let wt = absolute(cx, &r.worktree_path);
        let mut names = vec![".swarmforge/".to_string()];
        if let Some(cli) = Cli::from_agent(&r.agent) {
            let p = cli.preset();
            names.extend(p.instruction_file().map(str::to_string));
            names.push(p.hook_file().to_string());
            names.push(".mcp.json".into());
        }
        for n in names {
            if !candidates.iter().any(|(w, x)| *w == wt && *x == n) {
                candidates.push((wt.clone(), n));
            }
        }
    }
    candidates
        .into_iter()
        .filter(|(wt, rel)| wt.join(rel.trim_end_matches('/')).exists())
        .filter(|(wt, rel)| git_ignores(wt, rel) == Some(false) && !git_tracks(wt, rel))
        .map(|(wt, rel)| {
            Finding::new(
                "UNIGNORED_LAUNCH_FILE",
                format!(
                    "{} was written by swarm, but git neither ignores nor tracks it in {}",
                    rel,
                    wt.display()
                ),
                format!(
                    "add `{rel}` to the repository's info/exclude (git rev-parse --git-path info/exclude); `swarm init` adds .swarmforge/ and .worktrees/"
                ),
            )
            .at(wt.join(rel.trim_end_matches('/')))
        })
        .collect()
}

/// A confined agent's worktree not pinned (launch::role_branch): its agent
/// cannot commit (the sandbox keeps `.git/refs` read-only), or its
/// worktree ref points at another branch.
pub fn role_branch(cx: &Context) -> Vec<Finding> {
    let Ok(plan) = &cx.plan else {
        return Vec::new();
    };
    if !confine::enabled(plan) {
        return Vec::new();
    }
    plan.roles
        .iter()
        .filter(|r| r.has_own_checkout() && !r.is_human() && r.worktree_path.join(".git").exists())
        .filter_map(|r| {
            let why = role_branch::unpinned(&plan.project.root, &r.worktree_path)?;
            Some(
                Finding::new(
                    "ROLE_BRANCH",
                    format!(
                        "role {} runs confined, but {why} in its worktree {}, not on {} (its branch {}): its agent cannot commit there, or a write through its branch would move another",
                        r.name,
                        r.worktree_path.display(),
                        WORKTREE_REF,
                        role_branch::branch_name(&r.worktree_name)
                    ),
                    "run `swarm up` (or `swarm init`), which pins it or says what to repair first (docs/security.md, \"Branches\")",
                )
                .at(&r.worktree_path),
            )
        })
        .collect()
}

/// The role byline's commit-msg hook (agent::byline): installed as this
/// `swarm` would write it, or not.
pub fn commit_msg_hook(cx: &Context) -> Vec<Finding> {
    if !cx.initialised {
        return Vec::new();
    }
    use crate::agent::byline::{self, State, SAVED};
    let swarm = match shims::own_bin_dir() {
        Ok(d) => d.join("swarm"),
        Err(e) => return vec![Finding::new("COMMIT_MSG_HOOK", e.to_string(), "")],
    };
    let state = match byline::state(&cx.project.root, &swarm) {
        Ok(s) => s,
        Err(e) => {
            return vec![Finding::new(
                "COMMIT_MSG_HOOK",
                format!("cannot tell where git's hooks are: {e}"),
                "run `swarm init`, which makes the repository",
            )]
        }
    };
    let install = "run `swarm up` or `swarm hooks install` (docs/swarmforge-compat.md §8)";
    let (message, fix, at) = match state {
        State::Installed { .. } => return Vec::new(),
        State::Missing { hook } => (
            format!("the commit-msg byline hook is not installed ({}): role commits get no `By <role>.`", hook.display()),
            install.to_string(),
            hook,
        ),
        State::Stale { hook } => (
            format!("the commit-msg byline hook {} is not the one this swarm writes (another `swarm` binary, or SwarmForge's own)", hook.display()),
            install.to_string(),
            hook,
        ),
        State::Foreign { hook } => (
            format!("{} is a commit-msg hook of the project's own: `swarm up` will keep it as {SAVED} and run it after the byline hook", hook.display()),
            format!("{install}; or `swarm hooks remove` later to put it back"),
            hook,
        ),
        State::Blocked { hook, saved } => (
            format!("{} is a commit-msg hook of the project's own and {} exists too: the byline hook cannot be installed without overwriting one", hook.display(), saved.display()),
            "merge the two into one (or remove the one no longer wanted), then run `swarm up`".to_string(),
            hook,
        ),
    };
    vec![Finding::new("COMMIT_MSG_HOOK", message, fix).at(at)]
}
