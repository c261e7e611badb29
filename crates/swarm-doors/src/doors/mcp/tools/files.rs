//! `reserve`, `release` and `reservations`: the files a role announces it
//! changes (reservations/), asked of handoffd as `swarm reserve` is.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{usage, Agent, Outcome, Refusal, Tool};
use crate::doors::mcp::args::{Line, Lines};

/// The agent's globs as repository paths (relative to the folder it runs in).
fn agent_globs(
    agent: &Agent,
    typed: &[String],
) -> Result<(crate::protocol::root::Located, Vec<String>), Refusal> {
    let at = crate::protocol::root::locate(&agent.cwd)?;
    let globs = crate::reservations::glob::normalise_all(typed, &at.worktree.root, &agent.cwd)
        .map_err(|e| usage(e.0))?;
    Ok((at, globs))
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct Reserve {
    /// repository paths; *, ?, **
    globs: Lines,
    /// how long (30m, 2h; default 1h)
    ttl: Option<Line>,
    /// why, one line
    reason: Option<Line>,
}

impl Tool for Reserve {
    const NAME: &'static str = "reserve";
    const DESCRIPTION: &'static str =
        "Announce files you are about to change; refused if another role holds them.";
    fn run(self, agent: &Agent) -> Outcome {
        reserve_tool(agent, &self)
    }
}

fn reserve_tool(agent: &Agent, a: &Reserve) -> Outcome {
    let (at, globs) = agent_globs(agent, &a.globs.0)?;
    let ttl = match &a.ttl {
        Some(t) => crate::protocol::duration::parse(&t.0)
            .map_err(|e| usage(format!("reserve: ttl: {e}")))?,
        None => crate::reservations::DEFAULT_TTL,
    };
    // From a confined agent, through handoffd (forum/requests.rs).
    let (r, _) = crate::forum::requests::reserve(
        &at.project,
        &crate::reservations::Request {
            role: &agent.role,
            globs,
            ttl,
            reason: a.reason.as_ref().map_or("", |r| r.0.as_str()),
            worktree: &at.worktree.root,
            force: false,
        },
    )?;
    Ok(json!({"status": "ok", "reservation": r}))
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct Release {
    globs: Option<Lines>,
}

impl Tool for Release {
    const NAME: &'static str = "release";
    const DESCRIPTION: &'static str = "Give back your reservations (all, or the globs named).";
    fn run(self, agent: &Agent) -> Outcome {
        let (at, globs) = agent_globs(agent, &self.globs.unwrap_or_default().0)?;
        let gone = crate::forum::requests::release(&at.project, &agent.role, &globs)?;
        Ok(json!({"status": "ok", "released": gone}))
    }
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct Reservations {}

impl Tool for Reservations {
    const NAME: &'static str = "reservations";
    const DESCRIPTION: &'static str = "Who holds which files now.";
    fn run(self, agent: &Agent) -> Outcome {
        let at = crate::protocol::root::locate(&agent.cwd)?;
        let rs = crate::reservations::active(&at.project)?;
        Ok(json!({"status": "ok", "reservations": rs}))
    }
}
