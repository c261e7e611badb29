//! Lineups: the roles of a running swarm change (`swarm role add`,
//! `swarm role remove`, a coordinator's `seat_request`), and roles start from
//! a library of agent definitions (docs/lineups.md).
//!
//! Why a state file and not an edited `swarm.yaml`: swarm.yaml is a person's
//! file, with comments and layout a rewrite would lose, and a rewrite racing
//! a hand edit would clobber one of them. The changes live in
//! `.swarmforge/lineup.json` (`state`), written only under an OS lock, and
//! every reader of swarm.yaml gets its roles merged with them
//! (`Config::load`), so `swarm down` / `swarm up` keep the lineup.

pub mod change;
pub mod seat;

// The lineup's files, read by every reader of swarm.yaml (protocol::config).
pub use crate::protocol::lineup::{definitions, state, LineupConfig, Seats};
