//! `swarm mcp [--role R]`: the MCP server an agent CLI starts for its role.

use crate::doors::mcp::{self, Agent};
use crate::error::exit;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Speaks MCP (JSON-RPC) on stdin/stdout; start it from the agent's MCP \
configuration (swarm up writes one for roles with `mcp: true`). The project \
and the role's worktree are found from the working directory (or --root), \
like every other command. Tools: next, done, send, reply, ask, answer, react, \
read, status; they read and write the same files, under the same locks, as \
ready-next, done-current and swarm-handoff. See docs/mcp.md.")]
pub struct Args {
    /// The role to act as (default: SWARMFORGE_ROLE)
    #[arg(long, value_name = "ROLE")]
    pub role: Option<String>,
}

pub fn run(args: Args) -> i32 {
    let role = match args.role.filter(|r| !r.is_empty()) {
        Some(r) => Ok(r),
        None => crate::protocol::root::acting_role(),
    };
    let cwd = match super::named_root(None) {
        Ok(Some(dir)) => Ok(dir),
        Ok(None) => crate::protocol::root::current_dir(),
        Err(e) => Err(e),
    };
    let agent = match (role, cwd) {
        (Ok(role), Ok(cwd)) => Agent { role, cwd },
        (Err(e), _) | (_, Err(e)) => return crate::cli::report(&e, false),
    };
    match mcp::serve(agent) {
        Ok(()) => exit::OK,
        Err(e) => crate::cli::report(&e, false),
    }
}
