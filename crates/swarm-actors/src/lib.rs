//! What the swarm's members do: an agent's own commands (agent), a person's (person), and the sessions and discussions they hold (forum).
//!
//! A floor of swarm-handoff (docs/design.md, "The crates"): it imports only
//! the floors below it, so a module here cannot reach one above it.

pub mod agent;
pub mod forum;
pub mod person;

// The floors below, at the paths the modules name them by (`crate::fsx`).
use swarm_base::{error, fsx, sys, text};
use swarm_delivery::daemon;
use swarm_protocol::protocol;
use swarm_records::{board, reservations, telemetry};
