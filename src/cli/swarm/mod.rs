//! `swarm`: the people's command (init, up, status, transcript, audit, stop, …).
//! Each subcommand lives in its own file with its `Args` and `run`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use clap::{Parser, Subcommand};

use crate::error::{Error, Result};
use crate::protocol::layout::Project;
use crate::protocol::root::{self, Located};

pub mod a2a;
pub mod acp;
pub mod activity;
pub mod answer;
pub mod approve;
pub mod archive;
pub mod artifacts;
pub mod attach;
pub mod audit;
pub mod bridge;
pub mod budget;
pub mod can_send;
pub mod cancel;
pub mod card;
pub mod completions;
pub mod cost;
pub mod demo;
pub mod deny;
pub mod digest;
pub mod discussion;
pub mod doctor;
pub mod down;
pub mod events;
pub mod help;
pub mod hook;
pub mod hooks;
pub mod inbox;
pub mod ingest;
pub mod init;
pub mod man;
pub mod mcp;
pub mod otel;
pub mod pause;
pub mod permissions;
pub mod prompt;
pub mod receipts;
pub mod release;
pub mod reservations;
pub mod reserve;
pub mod resume;
pub mod role;
pub mod run_api;
pub mod sandbox;
pub mod search;
pub mod serve;
pub mod session;
pub mod shims;
pub mod status;
pub mod stop;
pub mod transcript;
pub mod trust;
pub mod turn;
pub mod up;

#[derive(Parser, Debug)]
#[command(
    name = "swarm",
    version = super::VERSION_WITH_COMMIT,
    about = "Run and inspect a swarm of agents that hand work to each other through files",
    help_template = help::template(),
    after_help = "`swarm help <command>` or `swarm <command> --help` for one command's arguments."
)]
pub struct Cli {
    /// The project: its root, any folder inside it, or a role worktree
    /// (default: found from the current directory). The positional [ROOT]
    /// some commands take is the older spelling of the same thing.
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// `--root`, set once from the command line before a subcommand runs (a
/// global flag reaches every subcommand without threading it through each).
static GLOBAL_ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The one root a command names: `--root`, or the positional `[ROOT]`; both
/// must agree when both are given.
fn named_root(positional: Option<&Path>) -> Result<Option<PathBuf>> {
    let global = GLOBAL_ROOT.get().cloned().flatten();
    match (global, positional) {
        (Some(g), Some(p)) if g.canonicalize().ok() != p.canonicalize().ok() => {
            Err(Error::bad_input(format!(
                "two different roots given: --root {} and {}\n  hint: name the project once",
                g.display(),
                p.display()
            )))
        }
        (Some(g), _) => Ok(Some(g)),
        (None, p) => Ok(p.map(Path::to_path_buf)),
    }
}

/// Where the command stands (worktree and project), by the one resolver.
pub fn located(positional: Option<&Path>) -> Result<Located> {
    root::locate_project(named_root(positional)?.as_deref())
}

/// The project a command acts on: a role worktree stands for its project.
pub fn project(positional: Option<&Path>) -> Result<Project> {
    located(positional).map(|l| l.project)
}

/// The folder `swarm init` makes a project of: exactly the one named, never
/// a role worktree or a folder inside another project.
pub fn init_root(positional: Option<&Path>) -> Result<PathBuf> {
    root::exact_root(named_root(positional)?.as_deref(), "swarm init")
}

/// `swarm up`: the project found from the folder named (from a role worktree
/// too), else that folder, which `up` initialises.
pub fn up_root(positional: Option<&Path>) -> Result<PathBuf> {
    let named = named_root(positional)?;
    match root::locate_project(named.as_deref()) {
        Ok(at) => Ok(at.project.root),
        Err(_) => root::exact_root(named.as_deref(), "swarm up"),
    }
}

/// What `-q`/`--quiet` means on every command that takes it.
pub const QUIET: &str = "Quiet: print nothing on success but what the command is asked to show (no progress or change lines); warnings and errors still go to stderr";

/// The positional `[ROOT]` of the commands that find the project from it.
#[derive(clap::Args, Debug)]
pub struct RootArg {
    /// Project root (default: found from the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
}

impl RootArg {
    pub fn path(&self) -> Option<&Path> {
        self.root.as_deref()
    }
}

/// `--json` for a command whose action is optional (`swarm budget`,
/// `swarm permissions`): taken by the listing and each action alike.
#[derive(clap::Args, Debug)]
pub struct JsonArg {
    /// One JSON object instead of text
    #[arg(long, global = true)]
    pub json: bool,
}

/// The arguments of a command made of actions (`swarm session start`, …):
/// the action and a `--json` every action takes.
#[derive(clap::Args, Debug)]
pub struct Actions<A: Subcommand> {
    #[command(subcommand)]
    pub action: A,
    /// One JSON object instead of text
    #[arg(long, global = true)]
    pub json: bool,
}

/// Runs `act` on the project found from `root` and prints what it returns:
/// one JSON object with `--json`, else text; a failure as `cli::report` does.
pub fn answer<T>(
    root: Option<&Path>,
    json: bool,
    act: impl FnOnce(&Project) -> Result<T>,
    as_json: impl FnOnce(&T) -> serde_json::Value,
    as_text: impl FnOnce(&T) -> String,
) -> i32 {
    match project(root).and_then(|p| act(&p)) {
        Ok(v) => {
            if json {
                crate::cli::emit_json(as_json(&v));
            } else {
                crate::cli::out(&as_text(&v));
            }
            crate::error::exit::OK
        }
        Err(e) => crate::cli::report(&e, json),
    }
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
    /// Check the project's set-up; each finding with a code and its fix
    Doctor(doctor::Args),
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
    /// Run this host's bridge to the other hosts (NATS JetStream)
    Bridge(bridge::Args),
    /// Install SwarmForge-named wrappers (swarm_handoff.sh, ...) into a directory
    Shims(shims::Args),
    /// Answer an open clarify question as a human role
    Answer(answer::Args),
    /// What waits for a person: list, show and mark items done
    Inbox(inbox::Args),
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
    /// Today's SwarmForge's cards: start one (New Task), list the board
    Card(card::Args),
    /// Print exactly what a role's agent is told (the protocol primer)
    Prompt(prompt::Args),
    /// Answer a coding CLI's turn-end hook (installed by `swarm up`)
    Hook(hook::Args),
    /// Move finished items created before a day into dated archive folders
    Archive(archive::Args),
    /// Print shell completions (bash, zsh, fish, ...) for every binary
    Completions(completions::Args),
    /// Write man pages for every binary and subcommand into a folder
    Man(man::Args),
    /// Serve this role's handoff tools to an agent over MCP (stdio)
    Mcp(mcp::Args),
    /// Run an `agent: api` role: one chat completion per item, then exit
    RunApi(run_api::Args),
    /// Follow a log file and post each matching line's capture as a role
    Ingest(ingest::Args),
    /// The cockpit: a live web page with approvals, answers and pause
    Serve(serve::Args),
    /// Serve the roles with `a2a: true` as A2A agents (tasks become handoffs)
    A2a(a2a::Args),
    /// Deliver a held handoff (`approval: required`)
    Approve(approve::Args),
    /// Refuse a held handoff to failed/ with a reason
    Deny(deny::Args),
    /// Stop delivery (of some types) until `swarm resume`
    Pause(pause::Args),
    /// Restart delivery after `swarm pause`
    Resume(resume::Args),
    /// Open a role's tmux pane (to answer what its agent waits for)
    Attach(attach::Args),
    /// Record folder trust for this swarm's worktrees in each CLI's store
    Trust(trust::Args),
    /// Ranked full-text search over every message, archived ones too
    Search(search::Args),
    /// Announce the files this role is about to change (globs, a TTL, a reason)
    Reserve(reserve::Args),
    /// Give back this role's file reservations
    Release(release::Args),
    /// Change the lineup of a running swarm: add, remove, list roles
    Role(role::Args),
    /// The library of agent definitions roles start from
    Agents(role::AgentsArgs),
    /// Who holds which files; --guard is the pre-commit check
    Reservations(reservations::Args),
    /// The commit-msg hook that adds `By <role>.` to a role's commits
    Hooks(hooks::Args),
    /// Remove the folder trust `swarm trust` recorded
    Untrust(trust::Args),
    /// Run one headless turn of a preset agent (what a headless role runs)
    #[command(hide = true)]
    Turn(turn::Args),
    /// Drive a `runtime: acp` role's agent (what that role runs)
    #[command(hide = true)]
    Acp(turn::Args),
    /// Make roles' next headless turn start a new conversation
    Fresh(turn::FreshArgs),
    /// Run a confined agent's command in its sandbox, built afresh (what
    /// a confined role's pane or supervisor runs)
    #[command(hide = true)]
    Sandbox(sandbox::Args),
    /// Show what agents did between handoffs (turns, text, tool calls)
    Activity(activity::Args),
    /// Tokens and cost of the agents' turns, by role, item, thread or day
    Cost(cost::Args),
    /// Budgets' standing; `raise` lets a parked role go on
    Budget(budget::Args),
    /// What ACP roles may run without asking; `revoke` takes it back
    Permissions(permissions::Args),
    /// Stop an ACP role's running turn (session/cancel); its item stays
    Cancel(cancel::Args),
    /// Send traces (threads, copies, turns) to an OpenTelemetry collector
    Otel(otel::Args),
}

pub fn run() -> i32 {
    let cli: Cli = match super::parse_args() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let _ = GLOBAL_ROOT.set(cli.root.clone());
    match cli.command {
        Command::Init(a) => init::run(a),
        Command::Up(a) => up::run(a),
        Command::Down(a) => down::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Status(a) => status::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Stop(a) => stop::run(a),
        Command::Transcript(a) => transcript::run(a),
        Command::Receipts(a) => receipts::run(a),
        Command::Audit(a) => audit::run(a),
        Command::Events(a) => events::run(a),
        Command::Bridge(a) => bridge::run(a),
        Command::Shims(a) => shims::run(a),
        Command::Answer(a) => answer::run(a),
        Command::Inbox(a) => inbox::run(a),
        Command::Artifacts(a) => artifacts::run(a),
        Command::Session(a) => session::run(a),
        Command::Discussion(a) => discussion::run(a),
        Command::Digest(a) => digest::run(a),
        Command::CanSend(a) => can_send::run(a),
        Command::Card(a) => card::run(a),
        Command::Prompt(a) => prompt::run(a),
        Command::Hook(a) => hook::run(a),
        Command::Archive(a) => archive::run(a),
        Command::Completions(a) => completions::run(a),
        Command::Man(a) => man::run(a),
        Command::Mcp(a) => mcp::run(a),
        Command::RunApi(a) => run_api::run(a),
        Command::Ingest(a) => ingest::run(a),
        Command::Serve(a) => serve::run(a),
        Command::A2a(a) => a2a::run(a),
        Command::Approve(a) => approve::run(a),
        Command::Deny(a) => deny::run(a),
        Command::Pause(a) => pause::run(a),
        Command::Resume(a) => resume::run(a),
        Command::Attach(a) => attach::run(a),
        Command::Trust(a) => trust::run(a),
        Command::Search(a) => search::run(a),
        Command::Reserve(a) => reserve::run(a),
        Command::Release(a) => release::run(a),
        Command::Role(a) => role::run(a),
        Command::Agents(a) => role::run_agents(a),
        Command::Reservations(a) => reservations::run(a),
        Command::Hooks(a) => hooks::run(a),
        Command::Untrust(a) => trust::run_untrust(a),
        Command::Turn(a) => turn::run(a),
        Command::Acp(a) => acp::run(a),
        Command::Fresh(a) => turn::run_fresh(a),
        Command::Sandbox(a) => sandbox::run(a),
        Command::Activity(a) => activity::run(a),
        Command::Cost(a) => cost::run(a),
        Command::Budget(a) => budget::run(a),
        Command::Permissions(a) => permissions::run(a),
        Command::Cancel(a) => cancel::run(a),
        Command::Otel(a) => otel::run(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every subcommand path, nested ones too (`card list`, `session start`).
    fn paths(cmd: &clap::Command, at: Vec<String>, out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let mut p = at.clone();
            p.push(sub.get_name().to_string());
            out.push(p.clone());
            paths(sub, p, out);
        }
    }

    /// `--root DIR` after any subcommand is the global flag (or the
    /// command's own `--root`), never an unknown argument (README).
    #[test]
    fn root_is_accepted_after_every_subcommand() {
        let mut all = Vec::new();
        paths(&Cli::command(), Vec::new(), &mut all);
        assert!(all.len() > 50, "{all:?}");
        let mut refused = Vec::new();
        for p in &all {
            let mut argv = vec!["swarm".to_string()];
            argv.extend(p.iter().cloned());
            argv.extend(["--root".to_string(), "/nowhere".to_string()]);
            if let Err(e) = Cli::try_parse_from(&argv) {
                use clap::error::ErrorKind as K;
                if matches!(e.kind(), K::UnknownArgument | K::ArgumentConflict) {
                    refused.push(format!("{}: {}", p.join(" "), e.kind()));
                }
            }
        }
        assert!(refused.is_empty(), "{refused:#?}");
    }

    /// `-q` is one flag with one meaning wherever it is taken, and every
    /// command that prints progress or change lines takes it.
    #[test]
    fn quiet_means_the_same_on_every_command() {
        let cli = Cli::command();
        let mut all = Vec::new();
        paths(&cli, Vec::new(), &mut all);
        let mut with_q = Vec::new();
        for p in &all {
            let mut c = &cli;
            for name in p {
                c = c.find_subcommand(name).unwrap();
            }
            for a in c.get_arguments().filter(|a| a.get_short() == Some('q')) {
                assert_eq!(a.get_id(), "quiet", "{p:?}");
                assert_eq!(a.get_long(), Some("quiet"), "{p:?}");
                assert_eq!(
                    a.get_help().map(|h| h.to_string()).as_deref(),
                    Some(QUIET),
                    "{p:?}"
                );
                with_q.push(p.join(" "));
            }
        }
        for needed in ["init", "up", "down", "archive", "demo"] {
            assert!(with_q.iter().any(|c| c == needed), "{needed}: {with_q:?}");
        }
    }
}
