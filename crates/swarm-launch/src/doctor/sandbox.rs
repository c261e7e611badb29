//! The `confinement` check: can the agents of this swarm start in their
//! sandbox (launch/confine/)? First bubblewrap itself ([`confine::probe`]);
//! then, in an initialised confined swarm, each agent role's own sandbox,
//! built with the arguments `swarm up` builds ([`confine::args`]) and run
//! once with `true` as its command, within a deadline (`confine::trial`, the
//! runner `confine::probe` uses too). A sandbox that
//! fails (a folder it binds gone, a mount hidden by a later one, `bwrap:
//! Can't chdir to …`) names the role and bwrap's own words, so the person
//! learns it here rather than from an agent that dies at its start.
//!
//! What the trial writes: `confine::args` makes the role's empty state
//! folders in the project (its launcher folder and private home, its queue
//! folders, the cockpit's token folder), the same `swarm up` makes. It is
//! given the role with a plain command as its agent, so it writes nothing
//! in the person's home (a CLI's state folder, its placeholders) and does
//! not replace the copy of `~/.claude.json` a running Claude Code agent
//! uses; the binds of that state folder are therefore not tried.
//!
//! Also the `git_planted` check ([`planted`]): a `commondir` an agent
//! working in the project root planted in the project's git folder, which
//! stops every sandbox while it is there (daemon/git_guard.rs). And the
//! `git_objects` check ([`objects`]): git objects a confined agent wrote
//! that handoffd refused (their content is not their name), or that wait
//! in a role's quarantine because no handoffd takes them in
//! (daemon/objects/).

use super::{Context, Finding};
use crate::launch::confine;
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};

const OPT_OUT: &str = "or set `launch: {confine: false}` in swarm.yaml (agents then run unconfined as your user, see docs/security.md \"Confinement\")";

/// Bubblewrap can make a sandbox here, and each agent's would start.
/// Confinement is the default, so when the swarm's settings cannot be read
/// (before roles are written, a broken swarm.yaml) bubblewrap is still
/// tried.
pub fn confinement(cx: &Context) -> Vec<Finding> {
    let plan = cx.plan.as_ref().ok();
    if plan.is_some_and(|p| !confine::needed(p)) {
        return Vec::new();
    }
    if let Some(p) = confine::probe() {
        return vec![Finding::new("CONFINEMENT", p.message, p.fix)];
    }
    match plan {
        Some(plan) if cx.initialised => plan
            .roles
            .iter()
            .filter(|r| tried(r))
            .filter_map(|r| trial(plan, r))
            .collect(),
        _ => Vec::new(),
    }
}

/// The roles `swarm up` starts in a sandbox of their own whose worktree is
/// there to bind (`swarm init` makes a missing one; `agent: api` runs the
/// swarm's own runner unconfined, launch::confine::wrap_agent).
fn tried(r: &PlannedRole) -> bool {
    !r.is_human() && r.agent != AgentSpec::Api && r.worktree_path.is_dir()
}

/// Starts `r`'s sandbox once; the finding when it does not start.
fn trial(plan: &Plan, r: &PlannedRole) -> Option<Finding> {
    let stand_in = PlannedRole {
        agent: AgentSpec::Command("true".into()),
        ..r.clone()
    };
    let fix = format!("repair what bwrap names (every folder the sandbox binds must exist and be reachable); {OPT_OUT}");
    let args = match confine::args(plan, &stand_in) {
        Ok(a) => a,
        Err(e) => {
            return Some(
                Finding::new(
                    "CONFINEMENT_ROLE",
                    format!(
                        "role {}: its sandbox cannot be set up: {}",
                        r.name,
                        e.to_string().lines().next().unwrap_or("")
                    ),
                    fix,
                )
                .at(&r.worktree_path),
            )
        }
    };
    let bwrap = confine::program();
    let quoted = match confine::trial(&bwrap, &args) {
        Ok(()) => return None,
        Err(confine::TrialError::Failed(said)) => said,
        // probe() ran it a moment ago: gone since, say so.
        Err(confine::TrialError::Spawn(e)) => {
            return Some(Finding::new(
                "CONFINEMENT_ROLE",
                format!(
                    "role {}: cannot run {}: {e}",
                    r.name,
                    crate::text::escape(&bwrap)
                ),
                fix,
            ))
        }
    };
    Some(
        Finding::new(
            "CONFINEMENT_ROLE",
            format!(
                "role {}: its sandbox would not start, so its agent would die at its start: {}",
                r.name, quoted
            ),
            fix,
        )
        .at(&r.worktree_path),
    )
}

/// Most planted files named one by one.
const MAX_PLANTED: usize = 20;

/// What an agent planted in the project's own git folder for the person's
/// git to follow (daemon/git_guard.rs): one still in place (no agent starts
/// while it is), and each that handoffd moved aside, until the person has
/// looked at it and removed it.
pub fn planted(cx: &Context) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(p) = crate::sys::git::planted_commondir(&cx.project.root) {
        out.push(
            Finding::new(
                "GIT_POINTER_PLANTED",
                format!(
                    "{}: the project's own git folder has a `commondir` (git makes one only in a linked worktree's folder); your own git in the project would follow it and run that folder's config and hooks, and no agent starts while it is there",
                    p.display()
                ),
                format!(
                    "do not run git in the project until it is gone: look at what it names (`cat {0}`), then `rm {0}`; if an agent works in the project root, it may have planted it",
                    p.display()
                ),
            )
            .at(p),
        );
    }
    let dir = cx.project.planted_dir();
    let names = crate::fsx::HeldDir::open(&dir)
        .and_then(|d| d.names())
        .unwrap_or_default();
    for name in names.iter().take(MAX_PLANTED) {
        let p = dir.join(name);
        let named = crate::fsx::read_bounded(&p, 512)
            .map(|b| crate::text::escape(String::from_utf8_lossy(&b).trim()))
            .unwrap_or_default();
        out.push(
            Finding::new(
                "GIT_POINTER_PLANTED",
                format!(
                    "handoffd moved aside a `commondir` planted in the project's own git folder (it named `{named}`): an agent working in the project root tried to make your git run a config of its own"
                ),
                format!(
                    "find which agent wrote it (`swarm transcript`, its worktree's history), then remove {}",
                    p.display()
                ),
            )
            .at(p),
        );
    }
    out
}

/// How long objects may wait in a quarantine before it is a finding:
/// handoffd takes them in at every turn of its loop, so only a swarm
/// without a running handoffd (or one that cannot write the store) lets
/// them wait this long.
const WAITING_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// Git objects of confined agents that are not in the project's store:
/// those handoffd refused because their content is not what their name
/// says (kept for the person until they remove them), and those still
/// waiting in a role's quarantine long after handoffd would have taken
/// them in.
pub fn objects(cx: &Context) -> Vec<Finding> {
    use crate::daemon::objects;
    let mut out = Vec::new();
    for r in objects::refused(&cx.project, MAX_PLANTED) {
        out.push(
            Finding::new(
                "GIT_OBJECT_REFUSED",
                format!(
                    "role {} wrote the git object {}, whose content is not what its name says (or a pack git would not index); handoffd kept it out of your repository, so a commit that names it is broken, not changed",
                    r.role, r.id
                ),
                format!(
                    "find the commit that names it in the role's branch (`git log` there fails on it) and do not merge that branch as it is; then remove {}",
                    r.path.display()
                ),
            )
            .at(&r.path),
        );
    }
    for (role, n, oldest) in objects::waiting(&cx.project.quarantine_dir()) {
        if oldest < WAITING_FOR {
            continue;
        }
        let q = cx.project.object_quarantine(&role);
        out.push(
            Finding::new(
                "GIT_OBJECTS_WAITING",
                format!(
                    "role {role} has {n} git object file(s) waiting in its quarantine for {} s: its commits are not in your repository yet (handoffd takes them in, checked, at every turn of its loop)",
                    oldest.as_secs()
                ),
                "start handoffd (`swarm up`; `swarm status` says whether it runs); if it runs, its log says why it cannot write the project's `.git/objects`".to_string(),
            )
            .at(q),
        );
    }
    out
}
