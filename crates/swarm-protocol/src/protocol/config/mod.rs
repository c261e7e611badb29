//! `swarm.yaml`, the optional project config. Every key is optional and has a
//! default (documented in the README); unknown keys are errors, reported with
//! line and column.
//!
//! The sections live by concern: [`daemon`] (delivery), [`role`] (one
//! entry of `roles:`), [`features`], [`hosts`] and [`spend`]; this module
//! holds the whole and its checks. Invariant: a config that loads has
//! passed every check (`Config::check`); none is half-applied.

use serde::{Deserialize, Serialize};

use crate::protocol::duration::Dur;
use crate::protocol::search_bounds::Bounds;
use crate::protocol::types;

mod daemon;
mod features;
mod hosts;
mod problem;
mod role;
mod spend;

pub use daemon::{
    Approval, DaemonConfig, Limits, NotifyConfig, TypeConfig, WakeConfig, WakeMethod,
};
pub use features::{
    A2aConfig, DiscussionConfig, ForumConfig, LaunchConfig, LineupConfig, LogsConfig,
    ReservationsMode, Retired, Seats, MIN_LOG_BYTES,
};
pub use hosts::{check_bridge_url, this_host};
pub use problem::ConfigProblem;
pub use role::{Permission, Propagation, RoleConfig, Runtime, ToolDecision, WakeMode};
pub use spend::{Budget, BudgetPeriod, OtelConfig, Price};

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
    /// The hosts a swarm spans (docs/bridge.md); empty: one host, no bridge.
    pub hosts: Vec<String>,
    /// The NATS server (or cluster, comma-separated) the hosts' bridges share:
    /// `nats://host:port`. Never with credentials in it (see docs/bridge.md).
    pub bridge: Option<String>,
    /// A file holding the bridge's credentials (a `.creds` file, or a token on
    /// one line); else `SWARM_NATS_CREDS` / `SWARM_NATS_TOKEN`.
    pub bridge_credentials_file: Option<String>,
    /// The swarm's name on the bridge: its JetStream stream and subjects.
    pub bridge_name: String,
    /// The NATS server's monitoring endpoint (`http://host:8222`), where
    /// `swarm doctor` reads whether JetStream syncs every write.
    pub bridge_monitor: Option<String>,
    /// How many servers of a JetStream cluster keep each message (1 to 5);
    /// unset: one per server `bridge` names, at most 5 (docs/bridge.md).
    pub bridge_replicas: Option<u32>,
    /// The git remote a `git_handoff`'s commit travels through between hosts.
    pub git_remote: Option<String>,
    /// Per message type: `types: {handoff: {approval: required}}`.
    pub types: std::collections::BTreeMap<String, TypeConfig>,
    /// Today's SwarmForge's audit gate: a `git_handoff` is queued only by
    /// a second, unchanged `swarm-handoff` call (docs/swarmforge-compat.md §3).
    pub audit_gate: bool,
    /// Today's SwarmForge's `card <type> <role>...` lines: each card type's
    /// ordered route (docs/swarmforge-compat.md §4; the board, crates/swarm-records/src/board/).
    pub cards: std::collections::BTreeMap<String, Vec<String>>,
    /// `reservations: guard` installs the pre-commit guard (docs/reservations.md).
    pub reservations: ReservationsMode,
    /// `swarm a2a`: the outside door (docs/a2a.md).
    pub a2a: A2aConfig,
    /// US dollars per million tokens, per model (docs/cost.md).
    pub prices: std::collections::BTreeMap<String, Price>,
    /// The whole swarm's token or cost budget (docs/cost.md).
    pub budget: Option<Budget>,
    /// Trace export (docs/cost.md, "Traces").
    pub otel: OtelConfig,
    /// Agent definitions roles start from (`from:`; docs/lineups.md).
    pub agents: Vec<RoleConfig>,
    /// Who may change the running lineup by message (docs/lineups.md).
    pub lineup: LineupConfig,
    /// The lineup changes merged in from `.swarmforge/lineup.json`
    /// (never read from swarm.yaml).
    #[serde(skip)]
    pub seats: Seats,
    /// How much of what agents write the search index takes in
    /// (docs/search.md, "Bounds").
    pub search: Bounds,
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
            hosts: Vec::new(),
            bridge: None,
            bridge_credentials_file: None,
            bridge_name: "swarm".into(),
            bridge_monitor: None,
            bridge_replicas: None,
            git_remote: None,
            audit_gate: false,
            cards: Default::default(),
            types: std::collections::BTreeMap::new(),
            reservations: ReservationsMode::default(),
            a2a: A2aConfig::default(),
            prices: std::collections::BTreeMap::new(),
            budget: None,
            otel: OtelConfig::default(),
            agents: Vec::new(),
            lineup: LineupConfig::default(),
            seats: Seats::default(),
            search: Default::default(),
        }
    }
}

/// Largest config file read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

impl Config {
    /// swarm.yaml's text as written, not empty: agent definitions not
    /// resolved yet, nothing checked (`Config::parse` in `config_read` does
    /// both, and takes an empty text for every default).
    pub(crate) fn from_text(text: &str) -> std::result::Result<Config, ConfigProblem> {
        serde_saphyr::from_str::<Config>(text).map_err(|e| ConfigProblem::Yaml(e.to_string()))
    }

    /// The checks a config passes once its definitions are resolved.
    pub(crate) fn check(&self) -> std::result::Result<(), ConfigProblem> {
        self.check_allowed_types()?;
        self.check_ranges()?;
        self.check_hosts()?;
        self.check_spending()
    }

    /// Values that parse but cannot work: a zero interval would spin the
    /// daemon, a zero size limit would refuse every file.
    fn check_ranges(&self) -> std::result::Result<(), ConfigProblem> {
        let d = &self.daemon;
        let min = |key: &'static str, got: Dur, least: Dur| {
            if got < least {
                Err(ConfigProblem::TooSmall { key, least, got })
            } else {
                Ok(())
            }
        };
        min("daemon.rescan", d.rescan, Dur::millis(10))?;
        min("daemon.poll_interval", d.poll_interval, Dur::millis(10))?;
        min("daemon.sweep", d.sweep, Dur::millis(100))?;
        min("daemon.pane_check", d.pane_check, Dur::millis(100))?;
        min("wake.quiet", self.wake.quiet, Dur::millis(50))?;
        min("notify.timeout", self.notify.timeout, Dur::millis(100))?;
        if self.logs.max_bytes != 0 && self.logs.max_bytes < MIN_LOG_BYTES {
            return Err(ConfigProblem::LogBytes(self.logs.max_bytes));
        }
        if self.limits.max_file_bytes < 128 {
            return Err(ConfigProblem::FileBytes(self.limits.max_file_bytes));
        }
        Ok(())
    }

    /// Every name in a role's `allowed_types` is a type a role may send.
    fn check_allowed_types(&self) -> std::result::Result<(), ConfigProblem> {
        for r in &self.roles {
            for t in r.allowed_types.iter().flatten() {
                if !types::type_rule(t).is_some_and(|rule| rule.sendable) {
                    return Err(ConfigProblem::RoleType {
                        role: r.name.clone(),
                        ty: t.clone(),
                    });
                }
            }
        }
        for t in self.types.keys() {
            if !types::type_rule(t).is_some_and(|rule| rule.sendable) {
                return Err(ConfigProblem::Type(t.clone()));
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
    /// (plus `seat_request` for a role `lineup.may_change` names).
    pub fn allowed_types(&self, role: &str) -> Vec<&'static str> {
        use crate::protocol::types::{allowed_for, SEAT_REQUEST};
        let mut v = allowed_for(self.role(role).and_then(|r| r.allowed_types.as_deref()));
        if self.lineup.may_change.iter().any(|r| r == role) && !v.contains(&SEAT_REQUEST.name) {
            v.push(SEAT_REQUEST.name);
        }
        v
    }

    pub fn role(&self, name: &str) -> Option<&RoleConfig> {
        self.roles.iter().find(|r| r.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_budgets_and_the_trace_endpoint_are_checked() {
        let c = Config::parse(
            "prices:\n  m1: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}\nbudget: {tokens: 1000}\nroles:\n  - {name: a, budget: {cost: 2.5, per: swarm}}\notel: {endpoint: 'http://127.0.0.1:4318'}\n",
        )
        .unwrap();
        assert_eq!(c.prices["m1"].output, 15.0);
        assert_eq!(c.budget.as_ref().unwrap().per, BudgetPeriod::Day);
        assert_eq!(
            c.role("a").unwrap().budget.as_ref().unwrap().cost,
            Some(2.5)
        );
        let e = Config::parse("prices:\n  m: {input: -1}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("prices.m.input must be"), "{e}");
        let e = Config::parse("budget: {per: day}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sets neither tokens nor cost"), "{e}");
        assert!(Config::parse("budget: {tokens: 1, per: week}\n").is_err());
        assert!(Config::parse("prices:\n  m: {inptu: 1}\n").is_err());
        let e = Config::parse("otel: {endpoint: 'http://u:p@h:4318'}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("otel.endpoint"), "{e}");
    }

    #[test]
    fn intervals_that_would_spin_are_refused() {
        let e = Config::parse("daemon:\n  rescan: 0\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "daemon.rescan must be at least 10ms; got 0s");
        assert!(Config::parse("daemon:\n  sweep: 10ms\n").is_err());
        assert!(Config::parse("daemon:\n  pane_check: 10ms\n").is_err());
        assert_eq!(
            Config::parse("daemon:\n  pane_check: 500ms\n")
                .unwrap()
                .daemon
                .pane_check,
            Dur::millis(500)
        );
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
        let e = Config::parse("logs:\n  max_bytes: 10\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("logs.max_bytes must be 0"), "{e}");
        assert!(Config::parse("logs:\n  size: 10\n").is_err());
    }

    #[test]
    fn hosts_and_bridge_are_checked() {
        let ok = "hosts: [a, b]\nbridge: nats://127.0.0.1:4222\nroles:\n  - {name: x, agent: human, host: b}\n";
        let c = Config::parse(ok).unwrap();
        assert_eq!(c.role_host("x"), Some("b"));
        assert_eq!(c.role_host("y"), Some("a"));
        let e = Config::parse("hosts: [a, b]\nbridge: nats://u:p@h:1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("carries credentials"), "{e}");
        let e = Config::parse("hosts: [a, b]\n").unwrap_err().to_string();
        assert!(e.contains("bridge is not set"), "{e}");
        let e = Config::parse(
            "hosts: [a]\nbridge: nats://h:1\nroles:\n  - {name: x, agent: human, host: c}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("'c' is not one of hosts (a)"), "{e}");
        assert!(Config::parse("hosts: [a]\nbridge: http://h\n").is_err());
        assert!(Config::parse("hosts: [a_b]\nbridge: nats://h:1\n").is_err());
        for bad in ["0", "6"] {
            let e = Config::parse(&format!(
                "hosts: [a]\nbridge: nats://h:1\nbridge_replicas: {bad}\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(
                e.contains(&format!("bridge_replicas: {bad} is out of range")),
                "{e}"
            );
        }
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
        let e = Config::parse("roles:\n  - {name: qa, allowed_types: [digest_request]}\n")
            .unwrap_err()
            .to_string();
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
        let e = Config::parse("types:\n  bogus:\n    approval: required\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'bogus' is not a type"), "{e}");
        let e = Config::parse("types:\n  note:\n    approval: maybe\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains('3'), "{e}");
    }

    #[test]
    fn unknown_key_names_line_and_column() {
        let e = Config::parse("daemon:\n  fsink: true\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("fsink"), "{e}");
        assert!(e.contains('2'), "{e}");
    }
}
