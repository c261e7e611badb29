//! The `confinement` check: can the agents of this swarm start in their
//! sandbox (launch/confine/)? First bubblewrap itself ([`confine::probe`]);
//! then, in an initialised confined swarm, each agent role's own sandbox,
//! built with the arguments `swarm up` builds ([`confine::args`]) and run
//! once with `true` as its command, within a deadline. A sandbox that
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

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{Context, Finding};
use crate::launch::confine;
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};

/// Longest one role's trial may take (a sandbox starts in milliseconds).
const DEADLINE: Duration = Duration::from_secs(10);
/// Most of bwrap's error quoted in a finding.
const MAX_QUOTED: usize = 400;

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
    let child = Command::new(&bwrap)
        .args(&args)
        .args(["--", "sh", "-c", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        // probe() ran it a moment ago: gone since, say so.
        Err(e) => {
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
    let stderr = child.stderr.take();
    let (ok, why) = match crate::sys::child::wait_bounded(child, DEADLINE) {
        Ok(st) => (st.success(), format!("it exits with {st}")),
        Err(e) => (false, format!("it did not start: {e}")),
    };
    if ok {
        return None;
    }
    // Read after the exit: bwrap's error is one short line, far under a
    // pipe's buffer; bounded all the same.
    let mut said = Vec::new();
    if let Some(s) = stderr {
        let _ = s.take(MAX_QUOTED as u64 * 4).read_to_end(&mut said);
    }
    let said = String::from_utf8_lossy(&said);
    let said = said.trim();
    let quoted = if said.is_empty() {
        why
    } else {
        let mut q = crate::text::escape(&said.lines().take(3).collect::<Vec<_>>().join("; "));
        if let Some((i, _)) = q.char_indices().nth(MAX_QUOTED) {
            q.truncate(i);
            q.push('…');
        }
        q
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
