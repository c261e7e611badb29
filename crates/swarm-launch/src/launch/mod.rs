//! `swarm up` and `swarm down`: start and stop a whole swarm.
//!
//! `up` = `init`, the SwarmForge-named wrappers in `.swarmforge/bin/`,
//! `handoffd <root>` (detached, its output in `.swarmforge/daemon/handoffd.out`),
//! then one agent per role, `launch.stagger` apart:
//!
//! * with tmux: one session `swarmforge-<role>` per role on the private socket
//!   `/tmp/swarmforge-<user>/<crc32 of root>.sock` (recorded in
//!   `.swarmforge/tmux-socket`, which makes the daemon wake roles through tmux).
//!   The pane runs the agent in a loop that waits for a line between runs, so
//!   the daemon's wake text (text, C-m, C-j) re-runs an agent that has exited:
//!   a model agent gets restarted, a script gets another pass over its queue.
//! * headless (`--no-tmux`): this process is the supervisor. It runs every
//!   agent once, then polls the role inboxes and runs an agent again whenever
//!   work waits for it and it is not running. A run that leaves the queue
//!   exactly as it found it counts as a stall; stalls back off and, after
//!   five, the role is parked until its inbox changes. Scripted agents drain
//!   their queue with `ready-next`/`done-current` until `NO_TASK` and exit.
//!
//! A foreground `up` tears everything down on Ctrl-C, SIGTERM or SIGHUP;
//! `down` does the same from anywhere. Neither touches a handoff file.

pub mod acp;
pub mod agent_session;
pub mod agents;
pub mod attach;
pub mod bridge;
pub mod cli_state;
pub mod command;
pub mod confine;
pub mod demo;
pub mod down;
pub mod init;
pub mod plan;
pub mod primer;
pub mod process;
pub mod repo;
pub mod role_branch;
pub mod role_mcp;
pub mod secrets;
pub mod sessions;
pub mod shims;
pub mod supervisor;
pub mod templates;
pub mod trust;
pub mod turn;
pub mod turn_item;
pub mod up;

pub use crate::protocol::launch_files::agents_dir;
pub use down::down;
pub use up::{up, Outcome, UpOptions};

use std::time::Duration;

/// Time an agent or a tmux pane gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);
/// How often the supervisor looks at the inboxes.
pub(crate) const TICK: Duration = Duration::from_millis(100);
/// No-progress runs in a row before a role is parked.
pub const MAX_STALLS: u32 = 5;
