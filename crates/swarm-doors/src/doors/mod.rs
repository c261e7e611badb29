//! The agents' front doors: the ways an agent without the shell helpers
//! reaches its mail. `mcp` (`swarm mcp`, the MCP server an agent's CLI
//! starts), `api` (`swarm run-api`, the built-in runner for a model behind
//! an HTTP API) and `hook` (`swarm hook`, a CLI's turn-end hook that sends
//! the agent back to its waiting mail). Each goes through the same library
//! calls as `ready-next`, `done-current` and `swarm-handoff`.

pub mod api;
pub mod hook;
pub mod mcp;
