//! Agent Cards (A2A v1.0, "Agent Discovery"): one per role with `a2a: true`
//! in swarm.yaml, at `/a2a/<role>/.well-known/agent-card.json`, its
//! JSON-RPC interface at `/a2a/<role>`; and at `/.well-known/agent-card.json`
//! the swarm's own card, one skill per offered role, whose interfaces list
//! each role's endpoint (the first is the default). A role's skill is its
//! `description` (swarm.yaml), else a sentence naming the role.

use serde_json::{json, Value};

use crate::error::Result;
use crate::protocol::config::Config;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;

/// A role outside agents may reach, with its one-line description.
#[derive(Clone, Debug, PartialEq)]
pub struct Offered {
    pub name: String,
    pub description: String,
}

/// The roles with `a2a: true` that roles.tsv knows, in swarm.yaml order
/// (the sender is never one: it would hand work to itself).
pub fn offered(project: &Project, config: &Config) -> Result<Vec<Offered>> {
    let roles = Roles::load(&project.roles_tsv())?;
    Ok(config
        .roles
        .iter()
        .filter(|r| r.a2a && roles.find(&r.name).is_some())
        .filter(|r| config.a2a.sender.as_deref() != Some(r.name.as_str()))
        .map(|r| Offered {
            name: r.name.clone(),
            description: r
                .description
                .clone()
                .unwrap_or_else(|| format!("The {} role of this swarm.", r.name)),
        })
        .collect())
}

fn security() -> (Value, Value) {
    (
        json!({"bearer": {"httpAuthSecurityScheme": {
            "scheme": "Bearer",
            "description": "the token in .swarmforge/a2a/token of the swarm's project",
        }}}),
        json!([{"schemes": {"bearer": {"list": []}}}]),
    )
}

fn interface(base: &str, role: &str) -> Value {
    json!({"url": format!("{base}/a2a/{role}"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
}

fn skill(r: &Offered) -> Value {
    json!({
        "id": r.name,
        "name": r.name,
        "description": r.description,
        "tags": ["swarm-handoff", r.name],
        "inputModes": ["text/plain"],
        "outputModes": ["text/plain"],
    })
}

fn card(name: &str, description: &str, interfaces: Vec<Value>, skills: Vec<Value>) -> Value {
    let (schemes, requirements) = security();
    json!({
        "name": name,
        "description": description,
        "supportedInterfaces": interfaces,
        "version": env!("CARGO_PKG_VERSION"),
        "capabilities": {"streaming": true, "pushNotifications": true},
        "securitySchemes": schemes,
        "securityRequirements": requirements,
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    })
}

/// One role's card; `base` is `http://host:port`.
pub fn role_card(base: &str, r: &Offered) -> Value {
    card(
        &r.name,
        &r.description,
        vec![interface(base, &r.name)],
        vec![skill(r)],
    )
}

/// The swarm's card.
pub fn swarm_card(base: &str, project: &Project, roles: &[Offered]) -> Value {
    let name = project
        .root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "swarm".into());
    card(
        &name,
        "A swarm of agents that hand work to each other; each skill is one role, reached at its own interface.",
        roles.iter().map(|r| interface(base, &r.name)).collect(),
        roles.iter().map(skill).collect(),
    )
}
