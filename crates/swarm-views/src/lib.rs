//! Read-only answers for people and scripts (status, transcript, audit, receipts) and the full-text search index, built from the files alone.
//!
//! A floor of swarm-handoff (docs/design.md, "The crates"): it imports only
//! the floors below it, so a module here cannot reach one above it.

pub mod search;
pub mod views;

// The floors below, at the paths the modules name them by (`crate::fsx`).
use swarm_actors::{agent, forum, person};
use swarm_base::{error, fsx, sys, text};
use swarm_bridge::bridge;
use swarm_delivery::daemon;
use swarm_protocol::protocol;
use swarm_records::{board, reservations, telemetry};
