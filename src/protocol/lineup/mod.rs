//! The lineup's files as every reader of swarm.yaml sees them
//! (docs/lineups.md): the roles added or being removed
//! (`.swarmforge/lineup.json`, `state`) and the library of agent
//! definitions (`definitions`), both merged into the config by
//! `Config::load`. Changing the lineup is the `lineup` layer's work.

pub mod definitions;
pub mod state;

use serde::{Deserialize, Serialize};

pub use state::Seats;

/// `lineup:` in swarm.yaml.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LineupConfig {
    /// Roles whose `seat_request` messages the daemon acts on; any other
    /// role's is refused with a reason.
    pub may_change: Vec<String>,
}
