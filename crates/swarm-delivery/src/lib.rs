//! handoffd's core: the delivery pass and when to run it, the gate, wake-ups, the journal, and the plug-in points features join it through.
//!
//! A floor of swarm-handoff (docs/design.md, "The crates"): it imports only
//! the floors below it, so a module here cannot reach one above it.

pub mod daemon;

// The floors below, at the paths the modules name them by (`crate::fsx`).
use swarm_base::{error, fsx, sys, text};
use swarm_protocol::protocol;
use swarm_records::{board, telemetry};
