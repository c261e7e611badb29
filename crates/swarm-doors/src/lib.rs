//! The swarm's other front doors: MCP, the API runner and the turn-end hook (doors), the cockpit (serve), the A2A agent (a2a).
//!
//! A floor of swarm-handoff (docs/design.md, "The crates"): it imports only
//! the floors below it, so a module here cannot reach one above it.

pub mod a2a;
pub mod doors;
pub mod serve;

// The floors below, at the paths the modules name them by (`crate::fsx`).
use swarm_actors::{agent, forum, person};
use swarm_base::{error, fsx, sys, text, Error, Result};
use swarm_bridge::bridge;
use swarm_delivery::daemon;
use swarm_launch::launch;
use swarm_protocol::protocol;
use swarm_records::{reservations, telemetry};
use swarm_views::{search, views};
