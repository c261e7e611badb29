//! swarm-handoff: a file-based handoff queue for agent swarms that speaks
//! SwarmForge's on-disk protocol (see `docs/` and the README).
//!
//! Agents queue drafts with `swarm-handoff`, accept work with `ready-next` and
//! finish it with `done-current`; `handoffd` routes each outbox file into every
//! recipient's inbox. Every state change is an atomic rename (`fsx`), and the
//! files themselves are the transcript and the audit trail.

pub mod answer;
pub mod artifacts;
pub mod attention;
pub mod audit;
pub mod clock;
pub mod config;
pub mod control;
pub mod daemon;
pub mod deliver;
pub mod demo;
pub mod discover;
pub mod discussion;
pub mod draft;
pub mod duration;
pub mod error;
pub mod event_stream;
pub mod forum;
pub mod fsx;
pub mod gitcheck;
pub mod header;
pub mod history;
pub mod init;
pub mod journal;
pub mod launch;
pub mod layout;
pub mod moderator;
pub mod names;
pub mod printout;
pub mod queue;
pub mod receipts;
pub mod record;
pub mod roles;
pub mod rules;
pub mod send;
pub mod sequence;
pub mod session;
pub mod shims;
pub mod status;
pub mod swarmforge_conf;
pub mod trail;
pub mod transcript;
pub mod wake;
pub mod watchdog;

pub mod cli;

pub use error::{Error, Result};
