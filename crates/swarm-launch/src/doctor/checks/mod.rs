//! The checks of `swarm doctor`, one function each (see [`super::CHECKS`]).
//! Codes are stable: scripts match on them (docs/doctor.md lists them).

//!
//! Grouped by what they look at: [`project`] (the set-up files),
//! [`worktrees`] (inboxes, branches, hooks), [`agents`] (the CLIs) and
//! [`runtime`] (daemon, logs, disk, clocks, the trail). Invariant: a check
//! only reads, and says OK only where it could have said not OK.

use std::path::{Path, PathBuf};

use super::Context;

mod agents;
mod project;
mod runtime;
mod worktrees;

pub use agents::{
    agent_cli_missing, agent_cli_trust, claude_full_as_root, codex_sandbox_helper,
    gemini_sandbox_confined,
};
pub use project::{config, project, swarmforge_features};
pub use runtime::{audit, clock_skew, daemon, disk_space, logs};
pub use worktrees::{
    commit_msg_hook, launch_files_ignored, person_mail_elsewhere, role_branch, shared_inbox,
};

/// `p` as an absolute path (a relative one from the project root).
fn absolute(cx: &Context, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cx.project.root.join(p)
    }
}
