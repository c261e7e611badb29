//! Will a Claude Code role with `permission: full` start? (docs/agents.md,
//! "Claude Code as root").
//!
//! `permission: full` maps to Claude Code's `--permission-mode
//! bypassPermissions`, and Claude Code (2.1) refuses that mode when it runs
//! as root: it prints "--dangerously-skip-permissions cannot be used with
//! root/sudo privileges for security reasons" and exits, unless
//! `IS_SANDBOX=1` says the machine is a sandbox made for it. Containers and
//! CI machines often run everything as root, so a swarm started there would
//! show the role's pane dying at every wake-up. `swarm up` refuses to start
//! such a swarm and `swarm doctor` reports CLAUDE_FULL_AS_ROOT; setting
//! `IS_SANDBOX=1` is the person's own statement, never made for them.

use std::ffi::OsString;

use super::Cli;
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};
use crate::protocol::config::Permission;

/// A Claude Code role that will refuse to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub role: String,
}

impl Problem {
    pub fn message(&self) -> String {
        format!(
            "role {}: Claude Code refuses `permission: full` (bypassPermissions) when run as root, so the role would never start",
            self.role
        )
    }

    pub fn fix(&self) -> String {
        format!(
            "run the swarm as an ordinary user, or give role {} `permission: edits`, or, on a machine made to be a sandbox (a throw-away container or VM), set IS_SANDBOX=1 (Claude Code's own switch; docs/agents.md)",
            self.role
        )
    }
}

/// The roles of `plan` that Claude Code will refuse, for a swarm run with
/// effective uid `euid` and the environment read through `var`.
pub fn problems(plan: &Plan, euid: u32, var: impl Fn(&str) -> Option<OsString>) -> Vec<Problem> {
    if euid != 0 || var("IS_SANDBOX").is_some_and(|v| v == "1") {
        return Vec::new();
    }
    plan.roles
        .iter()
        .filter(|r| bypasses(r))
        .map(|r| Problem {
            role: r.name.clone(),
        })
        .collect()
}

/// A Claude Code role with `permission: full`: started in bypassPermissions
/// mode (refused as root; a disclaimer at its first start, launch::trust).
pub fn bypasses(r: &PlannedRole) -> bool {
    matches!(
        &r.agent,
        AgentSpec::Preset {
            cli: Cli::Claude,
            permission: Permission::Full,
            ..
        }
    )
}

/// This process's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}
