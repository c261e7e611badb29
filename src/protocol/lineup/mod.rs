//! The lineup's files as every reader of swarm.yaml sees them
//! (docs/lineups.md): the roles added or being removed
//! (`.swarmforge/lineup.json`, `state`) and the library of agent
//! definitions (`definitions`), both merged into the config by
//! `Config::load` (`protocol::config_read`); their types are the config's.
//! Changing the lineup is the `lineup` layer's work.

pub mod definitions;
pub mod state;

pub use crate::protocol::config::{LineupConfig, Seats};
