//! The lineup's files as every reader of swarm.yaml sees them
//! (docs/lineups.md): the roles added or being removed
//! (`.swarmforge/lineup.json`, `state`) and the library of agent
//! definitions (`definitions`), both merged into the config by
//! `Config::load` (`protocol::config_read`); their types are the config's.
//! Changing the lineup is the `lineup` layer's work.

pub mod definitions;
pub mod state;

pub use crate::protocol::config::{LineupConfig, Seats};

use crate::protocol::draft::Draft;
use crate::protocol::grammar::role_list;
use crate::protocol::header::names;

/// Why a draft's recipients are refused by the lineup: one line per role
/// being removed or removed (the sender's own check, on the seats every
/// reader of swarm.yaml has; the daemon refuses the same at delivery).
pub fn send_refusals(seats: &Seats, d: &Draft) -> Vec<String> {
    role_list(d.get(names::TO))
        .into_iter()
        .chain(role_list(d.get(names::CC)))
        .filter_map(|r| seats.refusal(r))
        .map(|why| format!("{why}; `swarm role list` shows the lineup."))
        .collect()
}
