//! The features' sections of `swarm.yaml`: `forum:`, `discussion:`,
//! `launch:`, `logs:`, `lineup:`, `a2a:` and `reservations:`.
//!
//! Invariant: each section is optional with defaults; a feature reads only
//! its own section.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::RoleConfig;
use crate::protocol::duration::Dur;
use crate::sys::logfile::Policy;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ForumConfig {
    pub moderator: Option<String>,
    pub digest_every: u32,
    /// A digest request still open after this logs `expectation_violated`.
    pub digest_within: Dur,
    /// First pause after the moderator failed a request (`done-current
    /// --failed`); doubles per failure in a row, up to 10 minutes.
    pub retry_after: Dur,
    pub idle_close: Dur,
}

impl Default for ForumConfig {
    fn default() -> Self {
        ForumConfig {
            moderator: None,
            digest_every: 5,
            digest_within: Dur::secs(600),
            retry_after: Dur::secs(30),
            idle_close: Dur::secs(7200),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DiscussionConfig {
    pub turn_within: Dur,
    pub skip_after: Option<Dur>,
}

impl Default for DiscussionConfig {
    fn default() -> Self {
        DiscussionConfig {
            turn_within: Dur::secs(120),
            skip_after: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LaunchConfig {
    /// Pause between starting two agents.
    pub stagger: Dur,
    /// Run every agent in a bubblewrap sandbox (docs/security.md,
    /// "Confinement"). On by default; `confine: false` runs agents unconfined.
    pub confine: bool,
}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig {
            stagger: Dur::millis(1500),
            confine: true,
        }
    }
}

/// How the daemon bounds `handoffd.log`, `events.jsonl` and `forum.log`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LogsConfig {
    /// Rotate a log once it holds this many bytes (0: never rotate).
    pub max_bytes: u64,
    /// Rotated files kept per log; older ones are removed (0: none kept).
    pub keep: u32,
}

impl Default for LogsConfig {
    fn default() -> Self {
        LogsConfig {
            max_bytes: 16 * 1024 * 1024,
            keep: 4,
        }
    }
}

impl LogsConfig {
    pub fn policy(&self) -> Policy {
        Policy {
            max_bytes: self.max_bytes,
            keep: self.keep as usize,
        }
    }
}

/// Smallest `logs.max_bytes` (other than 0): a smaller log would rotate on
/// nearly every line.
pub const MIN_LOG_BYTES: u64 = 1024;

/// `lineup:` in swarm.yaml.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LineupConfig {
    /// Roles whose `seat_request` messages the daemon acts on; any other
    /// role's is refused with a reason.
    pub may_change: Vec<String>,
}

/// A role taken out of the lineup: its worktree stays (its branch and its
/// completed mail are history), so audits still read it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct Retired {
    pub name: String,
    pub worktree_name: String,
    pub worktree_path: PathBuf,
    /// When it was removed (ISO 8601 UTC).
    pub at: String,
}

/// The lineup's changes, as stored.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Seats {
    /// Bumped by every write; the daemon reports the one it acts on.
    pub generation: u64,
    /// Roles added after swarm.yaml was written (a role of the same name in
    /// swarm.yaml wins: a person's file is never overruled).
    pub added: Vec<RoleConfig>,
    /// Roles being removed: refused as recipients, still in roles.tsv.
    pub leaving: Vec<String>,
    /// Roles removed.
    pub removed: Vec<Retired>,
}

impl Seats {
    pub fn is_leaving(&self, role: &str) -> bool {
        self.leaving.iter().any(|r| r == role)
    }

    pub fn retired(&self, role: &str) -> Option<&Retired> {
        self.removed.iter().find(|r| r.name == role)
    }

    /// Why mail for `role` is refused now, if it is.
    pub fn refusal(&self, role: &str) -> Option<String> {
        if self.is_leaving(role) {
            Some(format!(
                "role {role} is being removed from the lineup (swarm role remove)"
            ))
        } else {
            self.retired(role).map(|r| {
                format!(
                    "role {role} was removed from the lineup at {} (swarm role remove)",
                    r.at
                )
            })
        }
    }
}

/// `a2a:` in swarm.yaml (docs/a2a.md): who outside work comes from.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct A2aConfig {
    /// The role (in roles.tsv) every A2A task is sent from and every reply
    /// and clarify goes back to; `swarm a2a` refuses to start without it.
    pub sender: Option<String>,
}

/// What file reservations do at commit time.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ReservationsMode {
    /// Advisory: shown, never enforced.
    #[default]
    Advisory,
    /// `swarm up` installs a pre-commit hook refusing commits that touch
    /// files another role holds.
    Guard,
}
