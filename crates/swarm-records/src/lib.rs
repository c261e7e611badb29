//! What the handoff files add up to, below delivery: SwarmForge's cards and lanes (board), what agents do and cost (telemetry), files a role reserves (reservations).
//!
//! A floor of swarm-handoff (docs/design.md, "The crates"): it imports only
//! the floors below it, so a module here cannot reach one above it.

pub mod board;
pub mod reservations;
pub mod telemetry;

// The floors below, at the paths the modules name them by (`crate::fsx`).
use swarm_base::{error, fsx, sys, text};
use swarm_protocol::protocol;
