//! `mcp: true` on a role in swarm.yaml: `swarm up` writes the agent CLI's
//! MCP configuration into the role's worktree, so the agent starts with the
//! `swarm mcp` tools. Project-local files only, never the user's own config:
//!
//! - Claude Code: `.mcp.json` (project scope), with the server approved in
//!   `.claude/settings.local.json` (`enabledMcpjsonServers`) and its tools
//!   allowed there (`permissions.allow`: `mcp__swarm`);
//! - Codex: `.codex/config.toml` `[mcp_servers.swarm]`, with `CODEX_HOME`
//!   pointed at that folder for the role;
//! - Gemini CLI: `.gemini/settings.json` `mcpServers`.
//!
//! The server is named `swarm` and started as `swarm --root <worktree> mcp
//! --role <role>`, so it needs no inherited environment (Codex passes only a
//! short whitelist to its servers). JSON files are merged (other keys kept).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::fsx;
use crate::launch::init::write_if_changed;
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};
use crate::protocol::config::Config;
use crate::protocol::layout::Project;

/// The server's name in every agent's configuration.
pub const SERVER: &str = "swarm";

/// The agent CLIs we can configure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    Claude,
    Codex,
    Gemini,
}

impl Client {
    /// The CLI a role runs: a SwarmForge model name, or the first word of
    /// its command line (a path's last part).
    pub fn of(agent: &AgentSpec) -> Option<Client> {
        let word = match agent {
            AgentSpec::Human | AgentSpec::Api => return None,
            AgentSpec::Model { name, .. } => name.as_str(),
            AgentSpec::Preset { cli, .. } => cli.name(),
            AgentSpec::Command(c) => c.split_whitespace().next()?,
        };
        match word.rsplit('/').next()? {
            "claude" => Some(Client::Claude),
            "codex" => Some(Client::Codex),
            "gemini" => Some(Client::Gemini),
            _ => None,
        }
    }
}

fn wants_mcp(config: &Config, role: &str) -> bool {
    config.roles.iter().any(|r| r.name == role && r.mcp)
}

/// The command line of the server for role `r`.
fn server(swarm: &Path, r: &PlannedRole) -> (String, Vec<String>) {
    (
        swarm.display().to_string(),
        vec![
            "--root".into(),
            r.worktree_path.display().to_string(),
            "mcp".into(),
            "--role".into(),
            r.name.clone(),
        ],
    )
}

/// `<worktree>/.codex`, the `CODEX_HOME` of a Codex role with `mcp: true`.
pub fn codex_home(r: &PlannedRole) -> PathBuf {
    r.worktree_path.join(".codex")
}

/// Extra environment for the role's agent (`CODEX_HOME` for Codex with
/// `mcp: true`), read from the project's config.
pub fn env(project: &Project, r: &PlannedRole) -> Result<Vec<(&'static str, PathBuf)>> {
    let config = Config::load(&project.config_file())?;
    Ok(
        if wants_mcp(&config, &r.name) && Client::of(&r.agent) == Some(Client::Codex) {
            vec![("CODEX_HOME", codex_home(r))]
        } else {
            Vec::new()
        },
    )
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
        if Client::of(&r.agent).is_none() {
            return Err(Error::env(format!(
                "{}: role '{}' has `mcp: true`, but its agent is not claude, codex or gemini.\n  hint: remove `mcp: true`, or start the agent with one of those commands",
                path.display(),
                r.name
            )));
        }
        let shared = plan.roles.iter().find(|o| {
            o.name != r.name
                && o.worktree_path == r.worktree_path
                && wants_mcp(&plan.config, &o.name)
        });
        if let Some(o) = shared {
            return Err(Error::env(format!(
                "{}: roles '{}' and '{}' both have `mcp: true` in one worktree ({}); an agent's MCP configuration is per folder.\n  hint: give one of them a worktree of its own",
                path.display(),
                r.name,
                o.name,
                r.worktree_path.display()
            )));
        }
    }
    Ok(())
}

/// Reads a JSON object to merge into; a missing file is an empty object.
fn read_object(path: &Path) -> Result<serde_json::Map<String, Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(Error::io(path, e)),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(Error::env(format!(
            "{}: not a JSON object, so the swarm MCP server cannot be added to it.\n  hint: fix or remove the file, then run `swarm up` again",
            path.display()
        ))),
    }
}

fn write_json(path: &Path, v: &Value) -> Result<()> {
    if let Some(dir) = path.parent() {
        fsx::ensure_dirs(&[dir]).map_err(|e| Error::io(dir, e))?;
    }
    let mut text = serde_json::to_string_pretty(v).unwrap_or_default();
    text.push('\n');
    write_if_changed(path, text.as_bytes()).map(|_| ())
}

/// Sets `obj[key][SERVER] = entry`, keeping the other servers.
fn merge_server(path: &Path, key: &str, entry: Value) -> Result<()> {
    let mut obj = read_object(path)?;
    let servers = obj.entry(key.to_string()).or_insert_with(|| json!({}));
    if !servers.is_object() {
        *servers = json!({});
    }
    servers[SERVER] = entry;
    write_json(path, &Value::Object(obj))
}

/// TOML basic string.
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The first line of a Codex config we wrote (rewritten freely; any other
/// file is left alone).
const CODEX_MARK: &str = "# Written by `swarm up` for role ";

fn write_codex(r: &PlannedRole, command: &str, args: &[String]) -> Result<PathBuf> {
    let path = codex_home(r).join("config.toml");
    if let Ok(old) = std::fs::read_to_string(&path) {
        if !old.starts_with(CODEX_MARK) {
            return Err(Error::env(format!(
                "{} exists and was not written by swarm up; it is CODEX_HOME's config for role {}.\n  hint: move it away, or add [mcp_servers.{SERVER}] yourself and remove `mcp: true`",
                path.display(),
                r.name
            )));
        }
    }
    let args: Vec<String> = args.iter().map(|a| toml_str(a)).collect();
    let text = format!(
        "{CODEX_MARK}{}: CODEX_HOME points here.\n[mcp_servers.{SERVER}]\ncommand = {}\nargs = [{}]\n",
        r.name,
        toml_str(command),
        args.join(", ")
    );
    fsx::ensure_dirs(&[&codex_home(r)]).map_err(|e| Error::io(codex_home(r), e))?;
    write_if_changed(&path, text.as_bytes())?;
    Ok(path)
}

/// Writes the configuration of every role with `mcp: true`; returns the
/// files written (for `swarm up`'s report).
pub fn write_all(plan: &Plan, swarm: &Path) -> Result<Vec<PathBuf>> {
    check(plan)?;
    let mut out = Vec::new();
    for r in plan
        .roles
        .iter()
        .filter(|r| wants_mcp(&plan.config, &r.name))
    {
        let (command, args) = server(swarm, r);
        let stdio = json!({"command": command, "args": args});
        let wt = &r.worktree_path;
        match Client::of(&r.agent) {
            Some(Client::Claude) => {
                let mut entry = stdio.clone();
                entry["type"] = json!("stdio");
                let mcp = wt.join(".mcp.json");
                merge_server(&mcp, "mcpServers", entry)?;
                // Approves the project server, so the agent is not asked.
                let local = wt.join(".claude/settings.local.json");
                let mut obj = read_object(&local)?;
                let list = obj
                    .entry("enabledMcpjsonServers".to_string())
                    .or_insert_with(|| json!([]));
                if !list.is_array() {
                    *list = json!([]);
                }
                if let Some(a) = list.as_array_mut() {
                    if !a.iter().any(|v| v == SERVER) {
                        a.push(json!(SERVER));
                    }
                }
                // Approving the server does not permit its tools: without
                // this rule Claude Code asks before every call (found with
                // the real CLI, tests/cli/real_agents.rs).
                let perms = obj
                    .entry("permissions".to_string())
                    .or_insert_with(|| json!({}));
                if !perms.is_object() {
                    *perms = json!({});
                }
                let allow = perms
                    .as_object_mut()
                    .map(|p| p.entry("allow").or_insert_with(|| json!([])));
                if let Some(allow) = allow {
                    if !allow.is_array() {
                        *allow = json!([]);
                    }
                    if let Some(a) = allow.as_array_mut() {
                        let rule = format!("mcp__{SERVER}");
                        if !a.iter().any(|v| *v == rule.as_str()) {
                            a.push(json!(rule));
                        }
                    }
                }
                write_json(&local, &Value::Object(obj))?;
                out.extend([mcp, local]);
            }
            Some(Client::Codex) => out.push(write_codex(r, &command, &args)?),
            Some(Client::Gemini) => {
                let p = wt.join(".gemini/settings.json");
                let mut entry = stdio.clone();
                entry["cwd"] = json!(wt.display().to_string());
                merge_server(&p, "mcpServers", entry)?;
                out.push(p);
            }
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_by_command() {
        let c = |s: &str| Client::of(&AgentSpec::Command(s.into()));
        assert_eq!(c("claude --model x"), Some(Client::Claude));
        assert_eq!(c("/usr/local/bin/codex -C ."), Some(Client::Codex));
        assert_eq!(c("gemini"), Some(Client::Gemini));
        assert_eq!(c("sh agent.sh"), None);
        assert_eq!(Client::of(&AgentSpec::Human), None);
    }
}
