//! swarm-handoff: a file-based handoff queue for agent swarms that speaks
//! SwarmForge's on-disk protocol (see `docs/` and the README).
//!
//! Agents queue drafts with `swarm-handoff`, accept work with `ready-next` and
//! finish it with `done-current`; `handoffd` routes each outbox file into every
//! recipient's inbox. Every state change is an atomic rename (`fsx`), and the
//! files themselves are the transcript and the audit trail.
//!
//! The folders are the layers, each importing only those below it:
//! `fsx` and `error` (the foundation), `protocol` (the on-disk format),
//! `daemon` (delivery), `forum` (sessions, discussions, the moderator; reached
//! by the daemon through one hook), `agent` (the agent's commands), `views`
//! (read-only readers), `launch` (init, up, down), `bridge` (hosts joined over
//! NATS JetStream; the one async part) and `cli` (the front ends).

// Every layer is public for the binaries, the integration tests, the benches
// and the fuzz targets; nothing else is promised. (Building with these as
// `pub(crate)` shows what no binary uses: only `Inbox::done` and
// `rules::validate`, kept for the benches and fuzzers.)
pub mod agent;
pub mod bridge;
pub mod cli;
pub mod daemon;
pub mod doctor;
pub mod error;
pub mod forum;
pub mod fsx;
pub mod launch;
pub mod mcp;
pub mod protocol;
pub mod serve;
pub mod text;
pub mod views;

pub use error::{Error, Result};
