//! What a person does to the swarm, beside `views` (what a person reads):
//! approve, deny, pause and resume (`holds`), what a rejection keeps
//! (`rejected`: review history, commit snapshots, Delete), answer an agent's clarify
//! (`answer`), and move finished mail into the archive (`archive`). The
//! same calls serve the CLI, the cockpit and SwarmForge's dashboard API,
//! and a control record from another host (`bridge::control`).

pub mod answer;
pub mod archive;
pub mod holds;
pub mod rejected;
