//! Starting and stopping a swarm: init, up, down, the headless turn, the sandbox (launch); roles added and removed while it runs (lineup); what `swarm doctor` checks (doctor).
//!
//! A floor of swarm-handoff (docs/design.md, "The crates"): it imports only
//! the floors below it, so a module here cannot reach one above it.

pub mod doctor;
pub mod launch;
pub mod lineup;

// The floors below, at the paths the modules name them by (`crate::fsx`).
use swarm_actors::{agent, forum};
use swarm_base::{error, fsx, sys, text, Error, Result};
use swarm_delivery::daemon;
use swarm_protocol::protocol;
use swarm_records::{board, reservations, telemetry};
use swarm_views::views;
