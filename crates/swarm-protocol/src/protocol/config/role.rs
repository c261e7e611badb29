//! One entry of `roles:`: its agent (a command, a preset, `api`, `human`),
//! how it receives and is woken, its permission and runtime, and what it
//! may send.
//!
//! Invariant: serde checks the shape; what serde cannot (names, agents and
//! the keys each takes) launch/plan/validate.rs checks, with positions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Approval, Budget};
use crate::protocol::duration::Dur;
use crate::protocol::roles::ReceiveMode;

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

/// What the swarm answers an ACP agent's permission request for a tool
/// without asking a person (`permissions:`; docs/agents.md, "Decided in
/// swarm.yaml").
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum ToolDecision {
    /// Allowed once, as if a person had chosen the agent's "allow once".
    Allow,
    /// Rejected, as if a person had chosen the agent's "reject".
    Deny,
    /// A person decides (the default for every tool).
    Ask,
}

impl ToolDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolDecision::Allow => "allow",
            ToolDecision::Deny => "deny",
            ToolDecision::Ask => "ask",
        }
    }
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
    /// by `swarm turn` (crates/swarm-launch/src/launch/turn/).
    Headless,
    /// The CLI as an Agent Client Protocol agent, one session driven by
    /// `swarm acp` (src/launch/acp/).
    Acp,
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
    /// `runtime: acp`: the tool (`<kind>: <title>`, a glob) → what the swarm
    /// answers its permission request without asking a person.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub permissions: BTreeMap<String, ToolDecision>,
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
            permissions: BTreeMap::new(),
            from: None,
            propagation: Propagation::ForwardOnly,
        }
    }
}
