//! Each agent gets only its own secrets (docs/security.md, "Secrets"):
//! `swarm up` runs with the person's environment, which may hold every API
//! role's key (`api_key_env`) and the bridge's credentials. An agent's
//! environment is that one minus the keys of the other roles and the
//! bridge's variables, headless (removed from the child's environment) and
//! in tmux (unset by the pane script, since the tmux server keeps the
//! environment it was started with).

use crate::protocol::config::Config;

/// The bridge's credentials (crate::bridge::credentials): no agent needs them.
pub const BRIDGE_SECRETS: &[&str] = &["SWARM_NATS_TOKEN", "SWARM_NATS_CREDS"];

/// The environment variables to remove from `role`'s agent: every other
/// role's `api_key_env` (unless `role` names the same one) and the bridge's.
pub fn foreign(config: &Config, role: &str) -> Vec<String> {
    let own = config.role(role).and_then(|r| r.api_key_env.as_deref());
    let mut out: Vec<String> = BRIDGE_SECRETS.iter().map(|s| s.to_string()).collect();
    for r in &config.roles {
        if let Some(k) = r.api_key_env.as_deref() {
            if Some(k) != own && !out.iter().any(|o| o == k) {
                out.push(k.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_roles_keys_and_the_bridges_go() {
        let c = Config::parse(
            "roles:\n  - {name: a, agent: api, base_url: 'http://x', model: m, api_key_env: A_KEY}\n  - {name: b, agent: api, base_url: 'http://x', model: m, api_key_env: B_KEY}\n  - {name: c, agent: sh x}\n",
        )
        .unwrap();
        let a = foreign(&c, "a");
        assert!(a.contains(&"B_KEY".into()) && !a.contains(&"A_KEY".into()));
        assert!(a.contains(&"SWARM_NATS_TOKEN".into()));
        let c_env = foreign(&c, "c");
        assert!(c_env.contains(&"A_KEY".into()) && c_env.contains(&"B_KEY".into()));
    }
}
