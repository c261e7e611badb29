//! `swarm.yaml`, the optional project config. Every key is optional and has a
//! default (documented in the README); unknown keys are errors, reported with
//! line and column.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::protocol::duration::Dur;
use crate::protocol::roles::ReceiveMode;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub daemon: DaemonConfig,
    pub wake: WakeConfig,
    pub limits: Limits,
    /// Replies deeper than this are refused with reason `hop_limit`.
    pub max_hops: u32,
    pub roles: Vec<RoleConfig>,
    pub forum: ForumConfig,
    pub discussion: DiscussionConfig,
    pub launch: LaunchConfig,
    pub notify: NotifyConfig,
    pub logs: LogsConfig,
    /// Per message type: `types: {handoff: {approval: required}}`.
    pub types: std::collections::BTreeMap<String, TypeConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            daemon: DaemonConfig::default(),
            wake: WakeConfig::default(),
            limits: Limits::default(),
            max_hops: 20,
            roles: Vec::new(),
            forum: ForumConfig::default(),
            discussion: DiscussionConfig::default(),
            launch: LaunchConfig::default(),
            notify: NotifyConfig::default(),
            logs: LogsConfig::default(),
            types: std::collections::BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// fsync every publish and move (D7). Off trades crash durability for speed.
    pub fsync: bool,
    /// Safety-net rescan of every outbox even without file events.
    pub rescan: Dur,
    /// Poll instead of file events (filesystems without inotify).
    pub poll: bool,
    /// Pass interval when polling.
    pub poll_interval: Dur,
    /// How often the re-wake / watchdog sweep runs.
    pub sweep: Dur,
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
    /// Moved to the sender's `held/` until `swarm approve` or `swarm deny`.
    Required,
}

/// One message type's settings (`types.<type>` in swarm.yaml).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TypeConfig {
    pub approval: Approval,
}

/// How a role's agent is told about new mail.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum WakeMode {
    /// Type the wake text only once the pane has been quiet for `wake.quiet`.
    #[default]
    Idle,
    /// Never type: the agent's turn-end hook or its own loop picks the mail up.
    Queue,
    /// Type at once, busy or not (SwarmForge's behaviour).
    Immediate,
}

impl WakeMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeMode::Idle => "idle",
            WakeMode::Queue => "queue",
            WakeMode::Immediate => "immediate",
        }
    }
}

/// What a preset agent may do without asking (mapped onto each CLI's own
/// setting; see docs/agents.md).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Ask before edits and commands.
    Ask,
    /// Edit files in the worktree without asking; ask for the rest.
    #[default]
    Edits,
    /// Everything without asking (only in a sandbox you trust).
    Full,
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

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RoleConfig {
    pub name: String,
    /// `claude`, `codex` or `gemini` (a preset), a command line, or `human`.
    pub agent: String,
    /// Preset agents: the model to ask for (passed with the CLI's model flag).
    pub model: Option<String>,
    /// Preset agents: extra arguments, one word each, appended as written.
    pub args: Vec<String>,
    /// Preset agents: what the agent may do without asking.
    pub permission: Permission,
    /// The role's job, told to its agent (`swarm prompt <role>`).
    pub prompt: Option<String>,
    /// One line about the role, told to its peers (and to it without `prompt`).
    pub description: Option<String>,
    /// How new mail reaches the agent.
    pub wake: WakeMode,
    /// `master`, `none` or a worktree name under `.worktrees/`.
    pub worktree: String,
    pub mode: ReceiveMode,
    /// Message types this role may send (default: every type a role may send).
    pub allowed_types: Option<Vec<String>>,
    /// Restart the agent when its pane or process is gone.
    pub restart: bool,
    /// Restarts allowed per hour.
    pub restart_budget: u32,
    pub ack_within: Option<Dur>,
    pub complete_within: Option<Dur>,
    /// `swarm up` writes the agent CLI's MCP configuration (claude, codex,
    /// gemini) for `swarm mcp` into the role's worktree.
    pub mcp: bool,
    /// `required`: everything this role sends waits for a person's approval.
    pub approval: Approval,
}

impl Default for RoleConfig {
    fn default() -> Self {
        RoleConfig {
            name: String::new(),
            agent: String::new(),
            model: None,
            args: Vec::new(),
            permission: Permission::Edits,
            prompt: None,
            description: None,
            wake: WakeMode::Idle,
            worktree: "master".into(),
            mode: ReceiveMode::Task,
            allowed_types: None,
            restart: false,
            restart_budget: 3,
            ack_within: None,
            complete_within: None,
            mcp: false,
            approval: Approval::None,
        }
    }
}

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
}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig {
            stagger: Dur::millis(1500),
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
    pub fn policy(&self) -> crate::protocol::logfile::Policy {
        crate::protocol::logfile::Policy {
            max_bytes: self.max_bytes,
            keep: self.keep as usize,
        }
    }
}

/// Smallest `logs.max_bytes` (other than 0): a smaller log would rotate on
/// nearly every line.
pub const MIN_LOG_BYTES: u64 = 1024;

/// Largest config file read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

impl Config {
    pub fn parse(text: &str) -> std::result::Result<Config, String> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let c = serde_saphyr::from_str::<Config>(text).map_err(|e| e.to_string())?;
        c.check_allowed_types()?;
        c.check_ranges()?;
        Ok(c)
    }

    /// Values that parse but cannot work: a zero interval would spin the
    /// daemon, a zero size limit would refuse every file.
    fn check_ranges(&self) -> std::result::Result<(), String> {
        let d = &self.daemon;
        let min = |key: &str, v: Dur, least: Dur| {
            if v < least {
                Err(format!("{key} must be at least {least}; got {v}"))
            } else {
                Ok(())
            }
        };
        min("daemon.rescan", d.rescan, Dur::millis(10))?;
        min("daemon.poll_interval", d.poll_interval, Dur::millis(10))?;
        min("daemon.sweep", d.sweep, Dur::millis(100))?;
        min("wake.quiet", self.wake.quiet, Dur::millis(50))?;
        min("notify.timeout", self.notify.timeout, Dur::millis(100))?;
        if self.logs.max_bytes != 0 && self.logs.max_bytes < MIN_LOG_BYTES {
            return Err(format!(
                "logs.max_bytes must be 0 (never rotate) or at least {MIN_LOG_BYTES}; got {}",
                self.logs.max_bytes
            ));
        }
        if self.limits.max_file_bytes < 128 {
            return Err(format!(
                "limits.max_file_bytes must be at least 128; got {}",
                self.limits.max_file_bytes
            ));
        }
        Ok(())
    }

    /// Every name in a role's `allowed_types` is a type a role may send.
    fn check_allowed_types(&self) -> std::result::Result<(), String> {
        for r in &self.roles {
            for t in r.allowed_types.iter().flatten() {
                if !crate::protocol::types::type_rule(t).is_some_and(|rule| rule.sendable) {
                    return Err(format!(
                        "roles[{}].allowed_types: '{}' is not a type a role may send (one of {})",
                        crate::text::escape(&r.name),
                        crate::text::escape(t),
                        crate::protocol::types::type_list()
                    ));
                }
            }
        }
        for t in self.types.keys() {
            if !crate::protocol::types::type_rule(t).is_some_and(|rule| rule.sendable) {
                return Err(format!(
                    "types: '{}' is not a type a role may send (one of {})",
                    crate::text::escape(t),
                    crate::protocol::types::type_list()
                ));
            }
        }
        Ok(())
    }

    /// Whether a message of type `kind` sent by `from` must be approved by a
    /// person first (the sender's `approval`, or its type's).
    pub fn needs_approval(&self, from: &str, kind: &str) -> bool {
        self.role(from)
            .is_some_and(|r| r.approval == Approval::Required)
            || self
                .types
                .get(kind)
                .is_some_and(|t| t.approval == Approval::Required)
    }

    /// The types `role` may send: its `allowed_types`, or every sendable type.
    pub fn allowed_types(&self, role: &str) -> Vec<&'static str> {
        crate::protocol::types::allowed_for(
            self.role(role).and_then(|r| r.allowed_types.as_deref()),
        )
    }

    /// Loads `path`; a missing file means every default.
    pub fn load(path: &Path) -> Result<Config> {
        let bytes = match crate::fsx::read_bounded(path, MAX_CONFIG_BYTES) {
            Ok(b) => b,
            Err(crate::fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Config::default())
            }
            Err(e) => return Err(Error::env(format!("{}: {e}", path.display()))),
        };
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::env(format!("{}: not valid UTF-8", path.display())))?;
        Config::parse(&text).map_err(|e| {
            Error::env(format!(
                "{}: {e}\n  hint: every key is optional; see the README section \"swarm.yaml\"",
                path.display()
            ))
        })
    }

    pub fn role(&self, name: &str) -> Option<&RoleConfig> {
        self.roles.iter().find(|r| r.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_that_would_spin_are_refused() {
        let e = Config::parse("daemon:\n  rescan: 0\n").unwrap_err();
        assert_eq!(e, "daemon.rescan must be at least 10ms; got 0s");
        assert!(Config::parse("daemon:\n  sweep: 10ms\n").is_err());
        assert!(Config::parse("limits:\n  max_file_bytes: 0\n").is_err());
        assert!(Config::parse("limits:\n  max_file_bytes: 18446744073709551615\n").is_ok());
    }

    #[test]
    fn logs_rotate_at_16_mib_and_keep_4_by_default() {
        let c = Config::default();
        assert_eq!((c.logs.max_bytes, c.logs.keep), (16 * 1024 * 1024, 4));
        let c = Config::parse("logs:\n  max_bytes: 4096\n  keep: 0\n").unwrap();
        assert_eq!((c.logs.max_bytes, c.logs.keep), (4096, 0));
        assert!(Config::parse("logs:\n  max_bytes: 0\n").is_ok());
        let e = Config::parse("logs:\n  max_bytes: 10\n").unwrap_err();
        assert!(e.contains("logs.max_bytes must be 0"), "{e}");
        assert!(Config::parse("logs:\n  size: 10\n").is_err());
    }

    #[test]
    fn empty_is_default() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
        assert_eq!(Config::default().daemon.ack_within, Dur::secs(60));
    }

    #[test]
    fn reads_keys_and_durations() {
        let c = Config::parse("daemon:\n  fsync: false\n  ack_within: 2m\nmax_hops: 5\n").unwrap();
        assert!(!c.daemon.fsync);
        assert_eq!(c.daemon.ack_within, Dur::secs(120));
        assert_eq!(c.max_hops, 5);
    }

    #[test]
    fn allowed_types_are_checked_and_default_to_every_sendable_type() {
        let c = Config::parse("roles:\n  - {name: qa, allowed_types: [note, post]}\n").unwrap();
        assert_eq!(c.allowed_types("qa"), vec!["note", "post"]);
        assert!(c.allowed_types("other").contains(&"clarify"));
        assert!(!c.allowed_types("other").contains(&"digest_request"));
        let e =
            Config::parse("roles:\n  - {name: qa, allowed_types: [digest_request]}\n").unwrap_err();
        assert!(
            e.contains("'digest_request' is not a type a role may send"),
            "{e}"
        );
    }

    #[test]
    fn approval_per_role_and_per_type() {
        let c = Config::parse(
            "roles:\n  - {name: coder, approval: required}\ntypes:\n  git_handoff:\n    approval: required\n",
        )
        .unwrap();
        assert!(c.needs_approval("coder", "note"));
        assert!(c.needs_approval("qa", "git_handoff"));
        assert!(!c.needs_approval("qa", "note"));
        assert!(!Config::default().needs_approval("coder", "handoff"));
        let e = Config::parse("types:\n  bogus:\n    approval: required\n").unwrap_err();
        assert!(e.contains("'bogus' is not a type"), "{e}");
        let e = Config::parse("types:\n  note:\n    approval: maybe\n").unwrap_err();
        assert!(e.contains('3'), "{e}");
    }

    #[test]
    fn unknown_key_names_line_and_column() {
        let e = Config::parse("daemon:\n  fsink: true\n").unwrap_err();
        assert!(e.contains("fsink"), "{e}");
        assert!(e.contains('2'), "{e}");
    }
}
