//! Why a swarm.yaml that parses cannot be used: each problem names the
//! key at fault, the value found (escaped where a person wrote it) and
//! what it may be, so the text is its own repair; `Config::load` adds the
//! file. The texts are the ones the checks always gave: `swarm up`,
//! `swarm doctor` and the tests read them.

use super::{Dur, MIN_LOG_BYTES};
use crate::protocol::types;
use crate::text::escape;

/// One check of [`super::Config`] that failed (the first one, in the
/// order the checks run).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigProblem {
    /// The YAML does not parse, or names a key the config does not have
    /// (the parser's text, with line and column).
    #[error("{0}")]
    Yaml(String),
    #[error("{key} must be at least {least}; got {got}")]
    TooSmall {
        key: &'static str,
        least: Dur,
        got: Dur,
    },
    #[error("logs.max_bytes must be 0 (never rotate) or at least {MIN_LOG_BYTES}; got {0}")]
    LogBytes(u64),
    #[error("limits.max_file_bytes must be at least 128; got {0}")]
    FileBytes(u64),
    #[error(
        "roles[{}].allowed_types: '{}' is not a type a role may send (one of {})",
        escape(role),
        escape(ty),
        types::type_list()
    )]
    RoleType { role: String, ty: String },
    #[error(
        "types: '{}' is not a type a role may send (one of {})",
        escape(.0),
        types::type_list()
    )]
    Type(String),
    #[error("{key} must be a number of dollars, 0 or more; got {value}")]
    Amount { key: String, value: f64 },
    #[error("prices: invalid model name '{}'", escape(.0))]
    ModelName(String),
    #[error("{key} sets neither tokens nor cost (e.g. {key}: {{tokens: 2000000, per: day}})")]
    EmptyBudget { key: String },
    #[error(
        "otel.endpoint: '{}' is not an http:// or https:// URL of a collector (no credentials in it), e.g. http://127.0.0.1:4318",
        escape(.0)
    )]
    OtelEndpoint(String),
    #[error("bridge: '{}' is not a nats:// or tls:// URL", escape(.0))]
    NotNats(String),
    #[error("bridge: the URL carries credentials; put them in bridge_credentials_file or SWARM_NATS_CREDS / SWARM_NATS_TOKEN instead")]
    Credentials,
    #[error("bridge: '{}' names no server", escape(.0))]
    NoServer(String),
    #[error(
        "hosts: invalid host name '{}' (letters, digits and '-', at most 64 characters)",
        escape(.0)
    )]
    HostName(String),
    #[error("hosts: '{0}' is named twice")]
    HostTwice(String),
    #[error("bridge_name: invalid name '{}' (letters, digits and '-')", escape(.0))]
    BridgeName(String),
    #[error("bridge is set but hosts is empty: name the hosts the swarm spans")]
    NoHosts,
    #[error("hosts names several hosts but bridge is not set: name the NATS server (bridge: nats://host:4222)")]
    NoBridge,
    #[error("bridge_replicas: {0} is out of range: JetStream keeps 1 to 5 replicas of a stream")]
    Replicas(u32),
    #[error(
        "bridge_monitor: '{}' is not an http:// or https:// URL of a server (no credentials in it), e.g. http://10.0.0.5:8222",
        escape(.0)
    )]
    Monitor(String),
    #[error("git_remote: invalid remote name '{}'", escape(.0))]
    GitRemote(String),
    #[error(
        "roles[{}].host: '{}' is not one of hosts ({})",
        escape(role),
        escape(host),
        if hosts.is_empty() { "none".to_string() } else { hosts.join(", ") }
    )]
    RoleHost {
        role: String,
        host: String,
        hosts: Vec<String>,
    },
}
