//! The on-disk protocol (docs/protocol.md): the one grammar of ids, file names
//! and recipients, the header format, drafts and their rules, the paths of a
//! project and its worktrees, roles, the sequence, the project config and the
//! root resolver. Imports nothing above it.

pub mod audit_pending;
pub mod clock;
pub mod commit_id;
pub mod config;
pub mod config_read;
pub mod dashboard;
pub mod delivery_retry;
pub mod digest;
pub mod draft;
pub mod duration;
pub mod edn;
pub mod fields;
pub mod gitcheck;
pub mod grammar;
pub mod header;
pub mod idprefix;
pub mod launch_files;
pub mod layout;
pub mod ledger;
pub mod line;
pub mod lineup;
pub mod order;
pub mod pending_approval;
pub mod people;
pub mod rejected_tasks;
pub mod roles;
pub mod root;
pub mod rules;
pub mod search_bounds;
pub mod sequence;
pub mod start_failure;
pub mod store;
pub mod swarm;
pub mod swarmforge_conf;
pub mod tmux_socket;
pub mod trail;
pub mod types;
pub mod wakeups;
