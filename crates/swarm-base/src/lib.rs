//! The foundation: renames, fsyncs and locks (fsx); what may reach a terminal (text); errors with their exit codes; the system underneath (logs, watches, tmux, git, child processes).
//!
//! A floor of swarm-handoff (docs/design.md, "The crates"): it imports only
//! the floors below it, so a module here cannot reach one above it.

pub mod error;
pub mod fsx;
pub mod sys;
pub mod text;

pub use error::{Error, Result};
