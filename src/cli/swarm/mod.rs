//! `swarm`: the people's command (init, up, status, transcript, audit, stop, …).
//! Each subcommand lives in its own file with its `Args` and `run`.

use clap::{Parser, Subcommand};

pub mod answer;
pub mod artifacts;
pub mod audit;
pub mod can_send;
pub mod demo;
pub mod digest;
pub mod discussion;
pub mod down;
pub mod events;
pub mod init;
pub mod receipts;
pub mod session;
pub mod shims;
pub mod status;
pub mod stop;
pub mod transcript;
pub mod up;

#[derive(Parser, Debug)]
#[command(
    name = "swarm",
    version,
    about = "Run and inspect a swarm of agents that hand work to each other through files"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create the state folders, worktrees and roles.tsv (idempotent)
    Init(init::Args),
    /// Init, start handoffd and one agent session per role
    Up(up::Args),
    /// Stop the daemon and the agent sessions; keeps every handoff file
    Down(down::Args),
    /// Run an example swarm headless in a temporary directory
    Demo(demo::Args),
    /// Daemon and per-role queue state
    Status(status::Args),
    /// Stop handoffd (stop file + TERM, then KILL after 5 s)
    Stop(stop::Args),
    /// Every message of the project, once, in order
    Transcript(transcript::Args),
    /// One message's state at each recipient
    Receipts(receipts::Args),
    /// Counts, latencies and failures; --check verifies the trail
    Audit(audit::Args),
    /// Print (and follow) the daemon's events.jsonl
    Events(events::Args),
    /// Install SwarmForge-named wrappers (swarm_handoff.sh, ...) into a directory
    Shims(shims::Args),
    /// Answer an open clarify question as a human role
    Answer(answer::Args),
    /// List a message's (or a session's) artifacts and re-check their hashes
    Artifacts(artifacts::Args),
    /// Start, close and list forum sessions
    Session(session::Args),
    /// Open, close and inspect round-robin discussions
    Discussion(discussion::Args),
    /// Show the newest moderator digest
    Digest(digest::Args),
    /// Exit 0 when it is the caller's turn in a discussion, 1 otherwise
    CanSend(can_send::Args),
}

/// The project for `[root]`, or the one found from the current directory.
pub fn project(root: Option<&std::path::Path>) -> crate::Result<crate::protocol::layout::Project> {
    match root {
        Some(r) => {
            let abs = r
                .canonicalize()
                .map_err(|e| crate::Error::io_hint(r, e, "pass an existing project root"))?;
            Ok(crate::protocol::layout::Project::new(abs))
        }
        None => Ok(crate::protocol::root::locate(&crate::protocol::root::current_dir()?)?.project),
    }
}

pub fn run() -> i32 {
    let cli: Cli = match super::parse_args() {
        Ok(c) => c,
        Err(code) => return code,
    };
    match cli.command {
        Command::Init(a) => init::run(a),
        Command::Up(a) => up::run(a),
        Command::Down(a) => down::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Status(a) => status::run(a),
        Command::Stop(a) => stop::run(a),
        Command::Transcript(a) => transcript::run(a),
        Command::Receipts(a) => receipts::run(a),
        Command::Audit(a) => audit::run(a),
        Command::Events(a) => events::run(a),
        Command::Shims(a) => shims::run(a),
        Command::Answer(a) => answer::run(a),
        Command::Artifacts(a) => artifacts::run(a),
        Command::Session(a) => session::run(a),
        Command::Discussion(a) => discussion::run(a),
        Command::Digest(a) => digest::run(a),
        Command::CanSend(a) => can_send::run(a),
    }
}
