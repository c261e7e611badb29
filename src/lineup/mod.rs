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

/// Why a draft's recipients are refused by the lineup: one line per role
/// being removed or removed (the sender's own check; the daemon refuses the
/// same at delivery).
pub fn send_refusals(seats: &Seats, d: &crate::protocol::draft::Draft) -> Vec<String> {
    use crate::protocol::grammar::role_list;
    use crate::protocol::header::names;
    role_list(d.get(names::TO))
        .into_iter()
        .chain(role_list(d.get(names::CC)))
        .filter_map(|r| seats.refusal(r))
        .map(|why| format!("{why}; `swarm role list` shows the lineup."))
        .collect()
}
