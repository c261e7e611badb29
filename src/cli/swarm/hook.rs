//! `swarm hook <cli> <event>`: answers a coding CLI's turn-end hook
//! (installed by `swarm up`) in that CLI's format; see crates/swarm-doors/src/doors/hook.rs.

use std::io::Read;
use std::path::PathBuf;

use crate::doors::hook;
use crate::error::{exit, Error};
use crate::launch::agents::{transcript, turn_end, Cli};
use crate::protocol::layout::Project;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// claude, codex or gemini
    pub cli: String,
    /// The hook event: Stop (claude, codex) or AfterAgent (gemini)
    pub event: String,
    /// Run from a CLI plugin: lets the turn end at once where the swarm's
    /// own hook runs in the same session (`swarm up` wrote it), so one turn
    /// end is answered once
    #[arg(long)]
    pub plugin: bool,
}

/// The project: `SWARMFORGE_PROJECT` (set in every agent's environment),
/// else found from the current directory.
fn project() -> Option<Project> {
    if let Some(p) = std::env::var_os("SWARMFORGE_PROJECT").map(PathBuf::from) {
        let p = Project::new(p);
        if p.swarmforge().is_dir() {
            return Some(p);
        }
    }
    super::project(None).ok()
}

pub fn run(args: Args) -> i32 {
    let Some(cli) = Cli::parse(&args.cli) else {
        return crate::cli::report(
            &Error::bad_input(format!(
                "swarm hook: unknown CLI '{}'\n  hint: one of claude, codex, gemini",
                crate::text::escape(&args.cli)
            )),
            false,
        );
    };
    let want = cli.preset().turn_end_event();
    if !args.event.eq_ignore_ascii_case(want) {
        return crate::cli::report(
            &Error::not_found(format!(
                "swarm hook: {} has no hook event '{}' here\n  hint: install it for {want}",
                cli.name(),
                crate::text::escape(&args.event)
            )),
            false,
        );
    }
    let mut input = Vec::new();
    // One byte past the limit tells an oversized input from a full one.
    let _ = std::io::stdin()
        .lock()
        .take(hook::MAX_INPUT as u64 + 1)
        .read_to_end(&mut input);
    // Read first: the CLI writes the whole input before it reads an answer.
    if args.plugin && hook::plugin_stands_aside(cli) {
        crate::cli::out(&format!("{}\n", cli.preset().reply(None)));
        return exit::OK;
    }
    let role = std::env::var("SWARMFORGE_ROLE").ok();
    let project = project();
    // A headless turn's stream is read by `swarm turn` itself; in tmux the
    // daemon reads the transcript (the hook may run confined).
    if std::env::var_os(transcript::HEADLESS_ENV).is_none() {
        if let Some(n) = turn_end::leave(project.as_ref(), role.as_deref(), &input) {
            eprintln!("swarm hook: {}", crate::text::escape(&n));
        }
    }
    let (reply, note) = hook::answer(cli, project.as_ref(), role.as_deref(), &input);
    if let Some(n) = note {
        eprintln!("swarm hook: {}", crate::text::escape(&n));
    }
    crate::cli::out(&format!("{reply}\n"));
    exit::OK
}
