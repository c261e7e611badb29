//! Which roles of a plan get the `swarm mcp` tools (`mcp: true` in
//! swarm.yaml) and what `swarm up` writes for them: each role's CLI is
//! found from its agent, the plan is checked (a CLI we can configure, a
//! folder of its own), and the preset writes its files
//! (`launch::agents::mcp` holds what the presets share).
//!
//! The server is named `swarm` and started as `swarm --root <worktree> mcp
//! --role <role>`, so it needs no inherited environment (Codex passes only a
//! short whitelist to its servers).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::launch::agents::mcp::Server;
use crate::launch::agents::Cli;
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};
use crate::protocol::config::Config;

/// The preset CLI a role runs: a SwarmForge model name, or the first word
/// of its command line (a path's last part).
pub fn cli_of(agent: &AgentSpec) -> Option<Cli> {
    let word = match agent {
        AgentSpec::Human | AgentSpec::Api => return None,
        AgentSpec::Model { name, .. } => name.as_str(),
        AgentSpec::Preset { cli, .. } => cli.name(),
        AgentSpec::Command(c) => c.split_whitespace().next()?,
    };
    Cli::parse(word.rsplit('/').next()?)
}

fn wants_mcp(config: &Config, role: &str) -> bool {
    config.roles.iter().any(|r| r.name == role && r.mcp)
}

/// The command line of the server for role `r`.
fn server(swarm: &Path, r: &PlannedRole) -> Server {
    Server {
        command: swarm.display().to_string(),
        args: vec![
            "--root".into(),
            r.worktree_path.display().to_string(),
            "mcp".into(),
            "--role".into(),
            r.name.clone(),
        ],
    }
}

/// Extra environment for the role's agent (what its CLI needs to find the
/// configuration, when it has `mcp: true`), from the swarm's loaded config.
pub fn env(config: &Config, r: &PlannedRole) -> Vec<(&'static str, PathBuf)> {
    match cli_of(&r.agent) {
        Some(cli) if wants_mcp(config, &r.name) => cli.preset().mcp_env(&r.worktree_path),
        _ => Vec::new(),
    }
}

/// Checks the plan: a role with `mcp: true` runs a CLI we can configure and
/// has a worktree of its own (the configuration is per folder).
pub fn check(plan: &Plan) -> Result<()> {
    let path = plan.project.config_file();
    for r in plan
        .roles
        .iter()
        .filter(|r| wants_mcp(&plan.config, &r.name))
    {
        if cli_of(&r.agent).is_none() {
            return Err(Error::bad_file_hint(
                &path,
                format!(
                    "role '{}' has `mcp: true`, but its agent is not claude, codex or gemini.",
                    r.name
                ),
                "remove `mcp: true`, or start the agent with one of those commands",
            ));
        }
        // The configuration is per folder: another agent of the same CLI
        // there would load this role's server and act as this role.
        let shared = plan.roles.iter().find(|o| {
            o.name != r.name
                && o.worktree_path == r.worktree_path
                && (wants_mcp(&plan.config, &o.name)
                    || (cli_of(&o.agent).is_some() && cli_of(&o.agent) == cli_of(&r.agent)))
        });
        if let Some(o) = shared {
            return Err(Error::bad_file_hint(
                &path,
                format!(
                    "role '{}' has `mcp: true` and shares its folder ({}) with role '{}', whose agent would load the same MCP configuration and act as '{}'.",
                    r.name,
                    r.worktree_path.display(),
                    o.name,
                    r.name
                ),
                format!("give role '{}' a worktree of its own", r.name),
            ));
        }
    }
    Ok(())
}

/// Writes the configuration of every role with `mcp: true`; returns the
/// files written (for `swarm up`'s report).
pub fn write_all(plan: &Plan, swarm: &Path) -> Result<Vec<PathBuf>> {
    check(plan)?;
    let mut out = Vec::new();
    let mut excludes: Vec<String> = Vec::new();
    for r in plan
        .roles
        .iter()
        .filter(|r| wants_mcp(&plan.config, &r.name))
    {
        if let Some(cli) = cli_of(&r.agent) {
            let files = cli
                .preset()
                .write_mcp(&r.worktree_path, &r.name, &server(swarm, r))?;
            for f in &files {
                if let Ok(rel) = f.strip_prefix(&r.worktree_path) {
                    excludes.push(format!("/{}", rel.display()));
                }
            }
            out.extend(files);
        }
    }
    // Absolute paths of this machine: an agent's `git add -A` must not
    // commit them (a tracked file of the same name is not affected).
    excludes.sort_unstable();
    excludes.dedup();
    if !excludes.is_empty() && plan.project.root.join(".git").exists() {
        let refs: Vec<&str> = excludes.iter().map(String::as_str).collect();
        crate::launch::repo::add_excludes(&plan.project.root, &refs)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clis_by_command() {
        let c = |s: &str| cli_of(&AgentSpec::Command(s.into()));
        assert_eq!(c("claude --model x"), Some(Cli::Claude));
        assert_eq!(c("/usr/local/bin/codex -C ."), Some(Cli::Codex));
        assert_eq!(c("gemini"), Some(Cli::Gemini));
        assert_eq!(c("sh agent.sh"), None);
        assert_eq!(cli_of(&AgentSpec::Human), None);
    }
}
