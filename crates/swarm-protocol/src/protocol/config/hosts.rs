//! A swarm across hosts (docs/bridge.md): `hosts:`, `bridge:` and each
//! role's `host:`, and which host this checkout is.
//!
//! Invariant: host names follow the role-name grammar; the bridge URL names
//! a server and carries no credentials in plain sight; a role's host is one
//! of `hosts`.

use super::{Config, ConfigProblem};
use crate::error::{Error, Result};
use crate::protocol::config;
use crate::protocol::grammar;
use crate::protocol::layout::Project;
use crate::text;

/// This checkout's host: `SWARM_HOST`, else `.swarmforge/host` (written by
/// `swarm init --host`), else the only host there is.
pub fn this_host(project: &Project, config: &Config) -> Result<Option<String>> {
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
            text::escape(&h),
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
pub fn check_bridge_url(url: &str) -> std::result::Result<(), ConfigProblem> {
    for part in url.split(',') {
        let rest = part
            .strip_prefix("nats://")
            .or_else(|| part.strip_prefix("tls://"))
            .ok_or_else(|| ConfigProblem::NotNats(part.to_string()))?;
        if rest.contains('@') {
            return Err(ConfigProblem::Credentials);
        }
        if rest.is_empty() || rest.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(ConfigProblem::NoServer(part.to_string()));
        }
    }
    Ok(())
}

impl Config {
    /// Hosts, the bridge URL and every role's host (docs/bridge.md).
    pub(super) fn check_hosts(&self) -> std::result::Result<(), ConfigProblem> {
        for (i, h) in self.hosts.iter().enumerate() {
            if !grammar::valid_role(h) {
                return Err(ConfigProblem::HostName(h.clone()));
            }
            if self.hosts[..i].contains(h) {
                return Err(ConfigProblem::HostTwice(h.clone()));
            }
        }
        if !grammar::valid_role(&self.bridge_name) {
            return Err(ConfigProblem::BridgeName(self.bridge_name.clone()));
        }
        if let Some(url) = &self.bridge {
            config::check_bridge_url(url)?;
            if self.hosts.is_empty() {
                return Err(ConfigProblem::NoHosts);
            }
        } else if self.hosts.len() > 1 {
            return Err(ConfigProblem::NoBridge);
        }
        if let Some(r) = self.bridge_replicas {
            if !(1..=5).contains(&r) {
                return Err(ConfigProblem::Replicas(r));
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
                return Err(ConfigProblem::Monitor(m.clone()));
            }
        }
        if let Some(r) = &self.git_remote {
            if r.is_empty()
                || r.starts_with('-')
                || r.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                return Err(ConfigProblem::GitRemote(r.clone()));
            }
        }
        for r in &self.roles {
            if let Some(h) = &r.host {
                if !self.hosts.contains(h) {
                    return Err(ConfigProblem::RoleHost {
                        role: r.name.clone(),
                        host: h.clone(),
                        hosts: self.hosts.clone(),
                    });
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
}
