//! Hosts joined over NATS JetStream, with the daemon unchanged.
//!
//! A floor of swarm-handoff (docs/design.md, "The crates"): it imports only
//! the floors below it, so a module here cannot reach one above it.

pub mod bridge;

// The floors below, at the paths the modules name them by (`crate::fsx`).
use swarm_actors::{agent, person};
use swarm_base::{error, fsx, sys, text};
use swarm_delivery::daemon;
use swarm_protocol::protocol;
