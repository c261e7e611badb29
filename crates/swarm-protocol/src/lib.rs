//! The on-disk protocol: the grammar of ids, file names and headers, the paths, roles.tsv, the config, the ledger, finding the project.
//!
//! A floor of swarm-handoff (docs/design.md, "The crates"): it imports only
//! the floors below it, so a module here cannot reach one above it.

pub mod protocol;

// The floors below, at the paths the modules name them by (`crate::fsx`).
use swarm_base::{error, fsx, sys, text};
