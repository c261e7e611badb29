//! `swarm acp --role R`: the client of a `runtime: acp` role's agent (what
//! its pane or the headless supervisor runs; src/launch/acp/). It runs
//! until SIGTERM, SIGINT or SIGHUP (the swarm going down), or until its
//! agent exits.

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::error::exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The role (default: SWARMFORGE_ROLE)
    #[arg(long)]
    pub role: Option<String>,
}

pub fn run(args: Args) -> i32 {
    let role = match crate::protocol::root::named_or_acting_role(args.role) {
        Ok(r) => r,
        Err(e) => return crate::cli::report(&e, false),
    };
    let root = match super::up_root(None) {
        Ok(r) => r,
        Err(e) => return crate::cli::report(&e, false),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let _ = signal_hook::flag::register(s, stop.clone());
    }
    let mut say = |line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "[swarm] {}", crate::text::escape(line));
        let _ = out.flush();
    };
    match crate::launch::acp::run(&root, &role, &stop, &mut say) {
        Ok(crate::launch::acp::Ended::Stopped)
        | Ok(crate::launch::acp::Ended::AgentExited(Some(0))) => exit::OK,
        // The agent's failure shows in the role's log and counts for the
        // supervisor, as a failed headless turn does.
        Ok(crate::launch::acp::Ended::AgentExited(_)) => exit::ENV,
        Err(e) => crate::cli::report(&e, false),
    }
}
