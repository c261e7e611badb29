//! swarm-handoff: a file-based handoff queue for agent swarms that speaks
//! SwarmForge's on-disk protocol (docs/protocol.md).
//!
//! Agents queue drafts with `swarm-handoff`, accept work with `ready-next` and
//! finish it with `done-current`; `handoffd` routes each outbox file into every
//! recipient's inbox. Every state change is an atomic rename (`fsx`), and the
//! files themselves are the transcript and the audit trail.
//!
//! This package is the top floor: the command lines of the five binaries
//! (`cli`). The layers under it are crates of the workspace, each importing
//! only the crates below it, so an upward import does not compile
//! (docs/design.md, "The crates", says why):
//!
//! - `swarm-base`: `fsx`, `text`, `error`, `sys` (renames, fsyncs and locks;
//!   what may reach a terminal; errors with their exit codes; the system
//!   underneath: rotating logs, folder watches, tmux, git and the hooks the
//!   swarm writes, quoting for `sh`, the priority of background threads);
//! - `swarm-protocol`: `protocol`, the on-disk format, the paths, roles.tsv,
//!   the config, the ledger and finding the project;
//! - `swarm-records`: `board` (SwarmForge's cards and lanes, a function of
//!   the handoff files), `telemetry` (usage, activity, budgets, traces: what
//!   agents do and cost, never a handoff's truth), `reservations` (files a
//!   role announces it is changing, and the guard);
//! - `swarm-delivery`: `daemon`, handoffd's core: the delivery pass and when
//!   to run it, the gate, wake-ups, the journal, and the one way a feature
//!   joins it (`daemon::feature`);
//! - `swarm-actors`: `forum` (sessions, discussions, the moderator), `agent`
//!   (the agent's own commands: send, take and finish work), `person` (what a
//!   person does: approve, deny, pause, answer, archive);
//! - `swarm-bridge`: `bridge`, hosts joined over NATS JetStream;
//! - `swarm-views`: `views` (read-only answers for people: status,
//!   transcript, audit) and `search` (the full-text index, derived from the
//!   files);
//! - `swarm-launch`: `launch` (init, up, down, the headless turn, the
//!   sandbox), `lineup` (roles added to and removed from a running swarm),
//!   `doctor` (what `swarm doctor` checks and how to repair it);
//! - `swarm-doors`: `doors` (MCP, the API runner, the turn-end hook),
//!   `serve` (the cockpit, with SwarmForge's dashboard API), `a2a` (the swarm
//!   as an A2A agent).

// Every layer is re-exported at the path it had before the workspace, for
// the binaries, the integration tests, the benches and the fuzz targets;
// nothing else is promised.
pub mod cli;

pub use swarm_actors::{agent, forum, person};
pub use swarm_base::{error, fsx, sys, text, Error, Result};
pub use swarm_bridge::bridge;
pub use swarm_delivery::daemon;
pub use swarm_doors::{a2a, doors, serve};
pub use swarm_launch::{doctor, launch, lineup};
pub use swarm_protocol::protocol;
pub use swarm_records::{board, reservations, telemetry};
pub use swarm_views::{search, views};
