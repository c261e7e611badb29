//! `swarm.yaml`, the optional project config. Every key is optional and has a
//! default (documented in the README); unknown keys are errors, reported with
//! line and column.

use std::path::{Path, PathBuf};

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
    /// ordered route (docs/swarmforge-compat.md §4; the board, src/board/).
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
    pub search: crate::protocol::search_bounds::Bounds,
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

/// `a2a:` in swarm.yaml (docs/a2a.md): who outside work comes from.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct A2aConfig {
    /// The role (in roles.tsv) every A2A task is sent from and every reply
    /// and clarify goes back to; `swarm a2a` refuses to start without it.
    pub sender: Option<String>,
}

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

/// How a preset agent runs (`runtime:`; docs/headless.md).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// The interactive CLI in the role's tmux pane (`swarm up --no-tmux`
    /// makes it headless).
    #[default]
    Tmux,
    /// One non-interactive invocation per turn, its JSON event stream read
    /// by `swarm turn` (src/launch/turn.rs).
    Headless,
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
    /// The host this role works on (one of `hosts`; default: the first).
    pub host: Option<String>,
    /// `agent: api`: the OpenAI-compatible server, e.g.
    /// `http://127.0.0.1:11434/v1` (Ollama); `/chat/completions` is appended.
    pub base_url: Option<String>,
    /// `agent: api`: the environment variable holding the API key (read
    /// once at start; never written anywhere). None: no key (local servers).
    pub api_key_env: Option<String>,
    /// `agent: api`: one completion call may take this long.
    pub request_timeout: Dur,
    /// `agent: api`: further attempts after a timeout, a lost connection,
    /// a 429 or a 5xx answer (backing off from 500 ms, doubling).
    pub retries: u32,
    /// `required`: everything this role sends waits for a person's approval.
    pub approval: Approval,
    /// Preset agents: `tmux` (interactive) or `headless` (docs/headless.md).
    pub runtime: Runtime,
    /// `swarm a2a` offers this role to outside agents (docs/a2a.md).
    pub a2a: bool,
    /// The role's token or cost budget (docs/cost.md).
    pub budget: Option<Budget>,
    /// The agent definition this role starts from (docs/lineups.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Merge-only copies of this role's forward `git_handoff`s to earlier
    /// roles on the card's route (SwarmForge's propagation token).
    pub propagation: Propagation,
}

/// Where a role's forward `git_handoff`s also go as merge-only copies
/// (today's SwarmForge, docs/swarmforge-compat.md §4): nowhere, to the
/// previous role on the card's route, or to every earlier one.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Propagation {
    #[default]
    ForwardOnly,
    BackOne,
    BackAll,
}

impl Propagation {
    /// SwarmForge's token.
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::ForwardOnly => "forward-only",
            Propagation::BackOne => "back-one",
            Propagation::BackAll => "back-all",
        }
    }

    pub fn parse(word: &str) -> Option<Propagation> {
        [
            Propagation::ForwardOnly,
            Propagation::BackOne,
            Propagation::BackAll,
        ]
        .into_iter()
        .find(|p| p.as_str() == word)
    }
}

impl RoleConfig {
    /// `agent: human` (any case, as `swarm init` reads it).
    pub fn is_human(&self) -> bool {
        self.agent.eq_ignore_ascii_case("human")
    }
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
            host: None,
            base_url: None,
            api_key_env: None,
            request_timeout: Dur::secs(120),
            retries: 2,
            approval: Approval::None,
            runtime: Runtime::Tmux,
            a2a: false,
            budget: None,
            from: None,
            propagation: Propagation::ForwardOnly,
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
    pub fn policy(&self) -> crate::sys::logfile::Policy {
        crate::sys::logfile::Policy {
            max_bytes: self.max_bytes,
            keep: self.keep as usize,
        }
    }
}

/// This checkout's host: `SWARM_HOST`, else `.swarmforge/host` (written by
/// `swarm init --host`), else the only host there is.
pub fn this_host(
    project: &crate::protocol::layout::Project,
    config: &Config,
) -> Result<Option<String>> {
    if config.hosts.is_empty() {
        return Ok(None);
    }
    let named = match std::env::var("SWARM_HOST") {
        Ok(h) if !h.is_empty() => Some((h, "SWARM_HOST".to_string())),
        _ => std::fs::read_to_string(project.host_file())
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .map(|t| (t, project.host_file().display().to_string())),
    };
    match named {
        Some((h, _)) if config.hosts.contains(&h) => Ok(Some(h)),
        Some((h, from)) => Err(Error::not_found(format!(
            "{from} names host '{}', which is not one of the hosts in {} ({})\n  hint: run `swarm init --host <host>` with one of them",
            crate::text::escape(&h),
            project.config_file().display(),
            config.hosts.join(", ")
        ))),
        None if config.hosts.len() == 1 => Ok(config.hosts.first().cloned()),
        None => Err(Error::env(format!(
            "{} spans several hosts ({}) and this checkout does not say which it is\n  hint: run `swarm init --host <host>` once in this checkout (or set SWARM_HOST)",
            project.config_file().display(),
            config.hosts.join(", ")
        ))),
    }
}

/// A bridge URL: `nats://` or `tls://` servers, comma-separated, without
/// credentials (those come from a file or the environment, never from a file
/// that is committed to git).
pub fn check_bridge_url(url: &str) -> std::result::Result<(), String> {
    for part in url.split(',') {
        let rest = part
            .strip_prefix("nats://")
            .or_else(|| part.strip_prefix("tls://"))
            .ok_or_else(|| {
                format!(
                    "bridge: '{}' is not a nats:// or tls:// URL",
                    crate::text::escape(part)
                )
            })?;
        if rest.contains('@') {
            return Err("bridge: the URL carries credentials; put them in bridge_credentials_file or SWARM_NATS_CREDS / SWARM_NATS_TOKEN instead".into());
        }
        if rest.is_empty() || rest.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(format!(
                "bridge: '{}' names no server",
                crate::text::escape(part)
            ));
        }
    }
    Ok(())
}

/// Smallest `logs.max_bytes` (other than 0): a smaller log would rotate on
/// nearly every line.
pub const MIN_LOG_BYTES: u64 = 1024;

/// Largest config file read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

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

impl Config {
    /// swarm.yaml's text as written, not empty: agent definitions not
    /// resolved yet, nothing checked (`Config::parse` in `config_read` does
    /// both, and takes an empty text for every default).
    pub(crate) fn from_text(text: &str) -> std::result::Result<Config, String> {
        serde_saphyr::from_str::<Config>(text).map_err(|e| e.to_string())
    }

    /// The checks a config passes once its definitions are resolved.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        self.check_allowed_types()?;
        self.check_ranges()?;
        self.check_hosts()?;
        self.check_spending()
    }

    /// Hosts, the bridge URL and every role's host (docs/bridge.md).
    fn check_hosts(&self) -> std::result::Result<(), String> {
        let esc = crate::text::escape;
        for (i, h) in self.hosts.iter().enumerate() {
            if !crate::protocol::grammar::valid_role(h) {
                return Err(format!(
                    "hosts: invalid host name '{}' (letters, digits and '-', at most 64 characters)",
                    esc(h)
                ));
            }
            if self.hosts[..i].contains(h) {
                return Err(format!("hosts: '{h}' is named twice"));
            }
        }
        if !crate::protocol::grammar::valid_role(&self.bridge_name) {
            return Err(format!(
                "bridge_name: invalid name '{}' (letters, digits and '-')",
                esc(&self.bridge_name)
            ));
        }
        if let Some(url) = &self.bridge {
            crate::protocol::config::check_bridge_url(url)?;
            if self.hosts.is_empty() {
                return Err(
                    "bridge is set but hosts is empty: name the hosts the swarm spans".into(),
                );
            }
        } else if self.hosts.len() > 1 {
            return Err(
                "hosts names several hosts but bridge is not set: name the NATS server (bridge: nats://host:4222)"
                    .into(),
            );
        }
        if let Some(r) = self.bridge_replicas {
            if !(1..=5).contains(&r) {
                return Err(format!(
                    "bridge_replicas: {r} is out of range: JetStream keeps 1 to 5 replicas of a stream"
                ));
            }
        }
        if let Some(m) = &self.bridge_monitor {
            let rest = m
                .strip_prefix("http://")
                .or_else(|| m.strip_prefix("https://"));
            let host = rest.map(|r| r.split('/').next().unwrap_or(""));
            if host.is_none_or(|h| h.is_empty() || h.contains('@'))
                || m.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                return Err(format!(
                    "bridge_monitor: '{}' is not an http:// or https:// URL of a server (no credentials in it), e.g. http://10.0.0.5:8222",
                    esc(m)
                ));
            }
        }
        if let Some(r) = &self.git_remote {
            if r.is_empty()
                || r.starts_with('-')
                || r.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                return Err(format!("git_remote: invalid remote name '{}'", esc(r)));
            }
        }
        for r in &self.roles {
            if let Some(h) = &r.host {
                if !self.hosts.contains(h) {
                    return Err(format!(
                        "roles[{}].host: '{}' is not one of hosts ({})",
                        esc(&r.name),
                        esc(h),
                        if self.hosts.is_empty() {
                            "none".to_string()
                        } else {
                            self.hosts.join(", ")
                        }
                    ));
                }
            }
        }
        Ok(())
    }

    /// The host `role` works on: its `host:`, else the first of `hosts`
    /// (None: a one-host swarm).
    pub fn role_host(&self, role: &str) -> Option<&str> {
        self.role(role)
            .and_then(|r| r.host.as_deref())
            .or(self.hosts.first().map(String::as_str))
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
        min("daemon.pane_check", d.pane_check, Dur::millis(100))?;
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

/// One model's price (`prices.<model>` in swarm.yaml): US dollars per
/// million tokens of each kind.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

/// Over what a budget counts.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum BudgetPeriod {
    /// The UTC day: a new day starts from zero.
    #[default]
    Day,
    /// The swarm's whole life.
    Swarm,
}

impl BudgetPeriod {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetPeriod::Day => "day",
            BudgetPeriod::Swarm => "swarm",
        }
    }
}

/// `budget: {tokens: N, cost: X, per: day|swarm}`: a role (or the whole
/// swarm) is parked once either limit is reached (docs/cost.md).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    pub tokens: Option<u64>,
    /// US dollars.
    pub cost: Option<f64>,
    pub per: BudgetPeriod,
}

/// `otel:`: where the daemon sends traces (OTLP over HTTP).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct OtelConfig {
    /// The collector's base URL, e.g. `http://127.0.0.1:4318`
    /// (`/v1/traces` is appended); unset: no export.
    pub endpoint: Option<String>,
}

/// Longest model name in `prices:`.
const MAX_MODEL_NAME: usize = 200;

impl Config {
    /// Prices, budgets and the trace endpoint (docs/cost.md).
    fn check_spending(&self) -> std::result::Result<(), String> {
        let esc = crate::text::escape;
        let amount = |key: String, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(format!(
                    "{key} must be a number of dollars, 0 or more; got {v}"
                ))
            }
        };
        for (model, p) in &self.prices {
            if model.is_empty()
                || model.len() > MAX_MODEL_NAME
                || model.chars().any(|c| c.is_control())
            {
                return Err(format!("prices: invalid model name '{}'", esc(model)));
            }
            for (k, v) in [
                ("input", p.input),
                ("output", p.output),
                ("cache_read", p.cache_read),
                ("cache_write", p.cache_write),
            ] {
                amount(format!("prices.{}.{k}", esc(model)), v)?;
            }
        }
        let budget = |key: String, b: &Budget| {
            if b.tokens.is_none() && b.cost.is_none() {
                return Err(format!(
                    "{key} sets neither tokens nor cost (e.g. {key}: {{tokens: 2000000, per: day}})"
                ));
            }
            if let Some(c) = b.cost {
                amount(format!("{key}.cost"), c)?;
            }
            Ok(())
        };
        if let Some(b) = &self.budget {
            budget("budget".into(), b)?;
        }
        for r in &self.roles {
            if let Some(b) = &r.budget {
                budget(format!("roles[{}].budget", esc(&r.name)), b)?;
            }
        }
        if let Some(e) = &self.otel.endpoint {
            let host = e
                .strip_prefix("http://")
                .or_else(|| e.strip_prefix("https://"))
                .map(|r| r.split('/').next().unwrap_or(""));
            if host.is_none_or(|h| h.is_empty() || h.contains('@'))
                || e.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                return Err(format!(
                    "otel.endpoint: '{}' is not an http:// or https:// URL of a collector (no credentials in it), e.g. http://127.0.0.1:4318",
                    esc(e)
                ));
            }
        }
        Ok(())
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
        let e = Config::parse("prices:\n  m: {input: -1}\n").unwrap_err();
        assert!(e.contains("prices.m.input must be"), "{e}");
        let e = Config::parse("budget: {per: day}\n").unwrap_err();
        assert!(e.contains("sets neither tokens nor cost"), "{e}");
        assert!(Config::parse("budget: {tokens: 1, per: week}\n").is_err());
        assert!(Config::parse("prices:\n  m: {inptu: 1}\n").is_err());
        let e = Config::parse("otel: {endpoint: 'http://u:p@h:4318'}\n").unwrap_err();
        assert!(e.contains("otel.endpoint"), "{e}");
    }

    #[test]
    fn intervals_that_would_spin_are_refused() {
        let e = Config::parse("daemon:\n  rescan: 0\n").unwrap_err();
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
        let e = Config::parse("logs:\n  max_bytes: 10\n").unwrap_err();
        assert!(e.contains("logs.max_bytes must be 0"), "{e}");
        assert!(Config::parse("logs:\n  size: 10\n").is_err());
    }

    #[test]
    fn hosts_and_bridge_are_checked() {
        let ok = "hosts: [a, b]\nbridge: nats://127.0.0.1:4222\nroles:\n  - {name: x, agent: human, host: b}\n";
        let c = Config::parse(ok).unwrap();
        assert_eq!(c.role_host("x"), Some("b"));
        assert_eq!(c.role_host("y"), Some("a"));
        let e = Config::parse("hosts: [a, b]\nbridge: nats://u:p@h:1\n").unwrap_err();
        assert!(e.contains("carries credentials"), "{e}");
        let e = Config::parse("hosts: [a, b]\n").unwrap_err();
        assert!(e.contains("bridge is not set"), "{e}");
        let e = Config::parse(
            "hosts: [a]\nbridge: nats://h:1\nroles:\n  - {name: x, agent: human, host: c}\n",
        )
        .unwrap_err();
        assert!(e.contains("'c' is not one of hosts (a)"), "{e}");
        assert!(Config::parse("hosts: [a]\nbridge: http://h\n").is_err());
        assert!(Config::parse("hosts: [a_b]\nbridge: nats://h:1\n").is_err());
        for bad in ["0", "6"] {
            let e = Config::parse(&format!(
                "hosts: [a]\nbridge: nats://h:1\nbridge_replicas: {bad}\n"
            ))
            .unwrap_err();
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
