//! `swarm role add|remove|list` and `swarm agents`: change the lineup of a
//! running swarm, and show the library of agent definitions
//! (docs/lineups.md).

use crate::error::{exit, Result};
use crate::lineup::{change, definitions, state};
use crate::protocol::config::Config;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: RoleCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum RoleCommand {
    /// Add a role to the swarm (it starts at once when the swarm runs)
    Add(AddArgs),
    /// Remove a role: its agent stops, its waiting mail goes back to the senders
    Remove(RemoveArgs),
    /// The lineup (roles, with where each came from) and the definitions
    List(ListArgs),
}

#[derive(clap::Args, Debug)]
pub struct AddArgs {
    /// The new role's name
    pub name: String,
    /// Start from this agent definition (`swarm agents` lists them)
    #[arg(long, value_name = "DEFINITION")]
    pub from: Option<String>,
    /// A command line, a preset (claude, codex, gemini) or `human`
    #[arg(long)]
    pub agent: Option<String>,
    /// Its worktree (default: one of the role's name)
    #[arg(long)]
    pub worktree: Option<String>,
    /// One line about the role, told to its peers
    #[arg(long)]
    pub description: Option<String>,
    /// Preset agents: the model
    #[arg(long)]
    pub model: Option<String>,
    /// Preset agents: tmux or headless
    #[arg(long)]
    pub runtime: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct RemoveArgs {
    /// The role to remove
    pub name: String,
    /// Told to the senders of the mail it had not done
    #[arg(long, default_value = "role removed from the lineup")]
    pub reason: String,
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

fn say(line: &str) {
    eprintln!("{}", crate::text::escape(line));
}

pub fn run(args: Args) -> i32 {
    match args.command {
        RoleCommand::Add(a) => add(a),
        RoleCommand::Remove(a) => remove(a),
        RoleCommand::List(a) => list(a.json),
    }
}

fn add(a: AddArgs) -> i32 {
    let req = change::AddRequest {
        name: a.name.clone(),
        from: a.from,
        agent: a.agent,
        worktree: a.worktree,
        description: a.description,
        model: a.model,
        runtime: a.runtime,
    };
    let r = super::project(None).and_then(|p| change::add(&p, &req, &mut |l| say(l)));
    match r {
        Ok(()) => {
            crate::cli::out(&format!("ROLE ADDED: {}\n", a.name));
            exit::OK
        }
        Err(e) => crate::cli::report(&e, false),
    }
}

fn remove(a: RemoveArgs) -> i32 {
    let r =
        super::project(None).and_then(|p| change::remove(&p, &a.name, &a.reason, &mut |l| say(l)));
    match r {
        Ok(r) => {
            crate::cli::out(&format!(
                "ROLE REMOVED: {} ({} waiting item(s) returned to their senders; its worktree stays at {})\n",
                a.name,
                r.returned,
                r.worktree.display()
            ));
            exit::OK
        }
        Err(e) => crate::cli::report(&e, false),
    }
}

/// The lineup and the library, as JSON.
fn listing() -> Result<serde_json::Value> {
    let project = super::project(None)?;
    let config = Config::load(&project.config_file())?;
    let seats = state::load(&project)?;
    let roles: Vec<serde_json::Value> = config
        .roles
        .iter()
        .map(|r| {
            let source = if seats.added.iter().any(|a| a.name == r.name) {
                "swarm role add"
            } else {
                "swarm.yaml"
            };
            serde_json::json!({
                "name": r.name, "agent": r.agent, "from": r.from,
                "source": source, "leaving": seats.is_leaving(&r.name),
            })
        })
        .collect();
    let removed: Vec<serde_json::Value> = seats
        .removed
        .iter()
        .map(|r| serde_json::json!({"name": r.name, "at": r.at, "worktree": r.worktree_path}))
        .collect();
    Ok(serde_json::json!({
        "status": "ok", "roles": roles, "removed": removed,
        "agents": agents_json(&project)?,
        "may_change": config.lineup.may_change,
    }))
}

fn agents_json(project: &crate::protocol::layout::Project) -> Result<serde_json::Value> {
    let (defs, problems) = definitions::list(project)?;
    let defs: Vec<serde_json::Value> = defs
        .iter()
        .map(|d| {
            let origin = match &d.origin {
                definitions::Origin::SwarmYaml => project.config_file(),
                definitions::Origin::UserFile(p) => p.clone(),
            };
            serde_json::json!({
                "name": d.name, "agent": d.role.agent, "model": d.role.model,
                "runtime": d.role.runtime, "description": d.role.description,
                "file": origin,
            })
        })
        .collect();
    Ok(serde_json::json!({
        "definitions": defs, "problems": problems,
        "user_folder": definitions::user_dir(),
    }))
}

fn defs_text(v: &serde_json::Value) -> String {
    let esc = |k: &serde_json::Value| crate::text::escape(k.as_str().unwrap_or(""));
    let mut s = String::from("agent definitions:\n");
    for d in v["definitions"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "  {}  agent: {}  {}  ({})\n",
            esc(&d["name"]),
            esc(&d["agent"]),
            esc(&d["description"]),
            esc(&d["file"])
        ));
    }
    if v["definitions"].as_array().is_none_or(|a| a.is_empty()) {
        s.push_str("  (none)\n");
    }
    for p in v["problems"].as_array().into_iter().flatten() {
        s.push_str(&format!("  problem: {}\n", esc(p)));
    }
    s.push_str(&format!(
        "user folder: {}\n",
        v["user_folder"]
            .as_str()
            .unwrap_or("(unset: no XDG_CONFIG_HOME or HOME)")
    ));
    s
}

fn list(json: bool) -> i32 {
    match listing() {
        Ok(v) if json => {
            crate::cli::emit_json(v);
            exit::OK
        }
        Ok(v) => {
            let esc = |k: &serde_json::Value| crate::text::escape(k.as_str().unwrap_or(""));
            let mut s = String::from("roles:\n");
            for r in v["roles"].as_array().into_iter().flatten() {
                let from = r["from"]
                    .as_str()
                    .map(|f| format!(" from {f}"))
                    .unwrap_or_default();
                let leaving = if r["leaving"] == true {
                    " (leaving)"
                } else {
                    ""
                };
                s.push_str(&format!(
                    "  {}  agent: {}{}  [{}]{leaving}\n",
                    esc(&r["name"]),
                    esc(&r["agent"]),
                    crate::text::escape(&from),
                    esc(&r["source"])
                ));
            }
            for r in v["removed"].as_array().into_iter().flatten() {
                s.push_str(&format!(
                    "  {}  removed at {}\n",
                    esc(&r["name"]),
                    esc(&r["at"])
                ));
            }
            s.push_str(&defs_text(&v["agents"]));
            crate::cli::out(&s);
            exit::OK
        }
        Err(e) => crate::cli::report(&e, json),
    }
}

/// `swarm agents`: the library of agent definitions.
#[derive(clap::Args, Debug)]
pub struct AgentsArgs {
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run_agents(a: AgentsArgs) -> i32 {
    match super::project(None).and_then(|p| agents_json(&p)) {
        Ok(v) if a.json => {
            crate::cli::emit_json(v);
            exit::OK
        }
        Ok(v) => {
            crate::cli::out(&defs_text(&v));
            exit::OK
        }
        Err(e) => crate::cli::report(&e, a.json),
    }
}
