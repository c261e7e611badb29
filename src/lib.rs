//! swarm-handoff: a file-based handoff queue for agent swarms that speaks
//! SwarmForge's on-disk protocol (docs/protocol.md).
//!
//! Agents queue drafts with `swarm-handoff`, accept work with `ready-next` and
//! finish it with `done-current`; `handoffd` routes each outbox file into every
//! recipient's inbox. Every state change is an atomic rename (`fsx`), and the
//! files themselves are the transcript and the audit trail.
//!
//! The folders are the layers, each importing only those listed before it
//! (docs/design.md says why):
//!
//! - `fsx`, `text`, `error`, `sys`: the foundation (renames, fsyncs and
//!   locks; what may reach a terminal; errors with their exit codes; the
//!   system underneath: rotating logs, folder watches, tmux, git and the
//!   hooks the swarm writes, quoting for `sh`, the priority of background
//!   threads);
//! - `protocol`: the on-disk format, the paths, roles.tsv, the config and
//!   finding the project;
//! - `search`: the full-text index of the messages, derived from the files;
//! - `reservations`: files a role announces it is changing, and the guard;
//! - `board`: today's SwarmForge's cards and their lanes, a function of
//!   the handoff files;
//! - `daemon`: `handoffd`, the delivery pass and when to run it, the gate,
//!   wake-ups, the journal;
//! - `forum`: sessions, discussions, the moderator, reached by the daemon
//!   through one hook;
//! - `agent`: the agent's own commands (send, take and finish work);
//! - `person`: what a person does (approve, deny, pause, answer, archive);
//! - `views`: read-only answers for people (status, transcript, audit);
//! - `bridge`: hosts joined over NATS JetStream;
//! - `telemetry`: what agents do and what it costs (usage, activity,
//!   budgets, traces), derived from their turns, never a handoff's truth;
//! - `launch`: init, up, down, and the headless turn;
//! - `lineup`: roles added to and removed from a running swarm;
//! - `doors`: the agents' other front doors (MCP, the API runner, the
//!   turn-end hook);
//! - `serve`: the cockpit, with SwarmForge's dashboard API;
//! - `doctor`: what `swarm doctor` checks and how to repair it;
//! - `a2a`: the swarm as an A2A agent (tasks, streams, push);
//! - `cli`: the command lines of the five binaries.

// Every layer is public for the binaries, the integration tests, the benches
// and the fuzz targets; nothing else is promised. (Building with these as
// `pub(crate)` shows what no binary uses: only `Inbox::done` and
// `rules::validate`, kept for the benches and fuzzers.)
pub mod a2a;
pub mod agent;
pub mod board;
pub mod bridge;
pub mod cli;
pub mod daemon;
pub mod doctor;
pub mod doors;
pub mod error;
pub mod forum;
pub mod fsx;
pub mod launch;
pub mod lineup;
pub mod person;
pub mod protocol;
pub mod reservations;
pub mod search;
pub mod serve;
pub mod sys;
pub mod telemetry;
pub mod text;
pub mod views;

pub use error::{Error, Result};
