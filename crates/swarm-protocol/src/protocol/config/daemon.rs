//! How handoffd delivers: `daemon:` (its intervals), `wake:`, `types:`
//! (which need approval), `notify:` and `limits:`.
//!
//! Invariant: every key has a default (documented in the README); what
//! parses but cannot work (a zero interval, a zero size) is refused by
//! `Config::check`, not here.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Config;
use crate::protocol::duration::Dur;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// fsync every publish and move (docs/protocol.md §8). Off trades crash
    /// durability for speed.
    pub fsync: bool,
    /// Safety-net rescan of every outbox even without file events.
    pub rescan: Dur,
    /// Poll instead of file events (filesystems without inotify).
    pub poll: bool,
    /// Pass interval when polling.
    pub poll_interval: Dur,
    /// How often the re-wake / watchdog sweep runs.
    pub sweep: Dur,
    /// How often the agents' panes and sessions are looked at (a dialog
    /// waiting for a person, a session gone): one `tmux list-panes` a
    /// look, and a capture only of panes that drew something since.
    pub pane_check: Dur,
    /// A role with waiting items and nothing in process is woken again after this.
    pub ack_within: Dur,
    /// Upper bound of the re-wake backoff.
    pub rewake_cap: Dur,
    /// An in-process item older than this logs `expectation_violated` (off when unset).
    pub complete_within: Option<Dur>,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            fsync: true,
            rescan: Dur::secs(2),
            poll: false,
            poll_interval: Dur::millis(200),
            sweep: Dur::secs(10),
            pane_check: Dur::secs(2),
            ack_within: Dur::secs(60),
            rewake_cap: Dur::secs(600),
            complete_within: None,
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum WakeMethod {
    /// tmux when `.swarmforge/tmux-socket` exists, else the command if set, else none.
    #[default]
    Auto,
    Tmux,
    Command,
    None,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WakeConfig {
    pub method: WakeMethod,
    /// Run through `sh -c` with `SWARMFORGE_ROLE`, `SWARMFORGE_HANDOFF` (the inbox
    /// copy) and `SWARMFORGE_PROJECT` in its environment.
    pub command: Option<String>,
    /// `wake: idle`: a pane whose text did not change for this long is idle.
    pub quiet: Dur,
    /// `wake: idle`: give up waiting for a busy pane after this long (the
    /// re-wake sweep tries again later).
    pub busy_timeout: Dur,
}

impl Default for WakeConfig {
    fn default() -> Self {
        WakeConfig {
            method: WakeMethod::Auto,
            command: None,
            quiet: Dur::secs(1),
            busy_timeout: Dur::secs(600),
        }
    }
}

/// Whether a person must approve a message before it is delivered.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    /// Delivered as soon as the daemon sees it.
    #[default]
    None,
    /// Moved to the sender's `pending_approval/` until `swarm approve` or `swarm deny`.
    Required,
}

/// One message type's settings (`types.<type>` in swarm.yaml).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TypeConfig {
    pub approval: Approval,
}

/// `notify.command`: run on attention events, off the delivery path.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct NotifyConfig {
    /// Run through `sh -c` with `SWARMFORGE_EVENT`, `SWARMFORGE_ROLE`,
    /// `SWARMFORGE_ID`, `SWARMFORGE_SUMMARY` and `SWARMFORGE_PROJECT` set.
    pub command: Option<String>,
    /// A notify command still running after this is killed.
    pub timeout: Dur,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            command: None,
            timeout: Dur::secs(10),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest handoff file the daemon and helpers accept.
    pub max_file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 1024 * 1024,
        }
    }
}

impl Limits {
    /// The `limits.max_file_bytes` of the project whose config file is
    /// `config_file`, for a reader that shows what it can: the default when
    /// the file is missing or invalid (the commands that change state
    /// refuse an invalid config themselves).
    pub fn max_file_bytes_of(config_file: &Path) -> u64 {
        Config::load(config_file)
            .map(|c| c.limits.max_file_bytes)
            .unwrap_or_else(|_| Limits::default().max_file_bytes)
    }
}
