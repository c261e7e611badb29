//! What agents do and what it costs: token usage per turn (and, built on
//! it, cost, budgets, activity and traces). A layer above `protocol` and
//! `daemon`: every record here is derived from agents' turns, never the
//! truth of a handoff's state, which stays in the mail files.

pub mod activity;
pub mod budget;
pub mod cost;
pub mod jsonl;
pub mod otlp;
pub mod spend;
pub mod trace;
pub mod usage;
