//! `swarm acp --role R`: the client of a `runtime: acp` role's agent (what
//! its pane or the headless supervisor runs; src/launch/acp/). It runs
//! until SIGTERM, SIGINT or SIGHUP (the swarm going down), or until its
//! agent exits.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::error::exit;
use crate::launch::acp::Ended;

pub fn run(args: super::turn::Args) -> i32 {
    let (role, root) = match super::turn::role_and_root(args.role) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let _ = signal_hook::flag::register(s, stop.clone());
    }
    match crate::launch::acp::run(&root, &role, &stop, &mut super::turn::say) {
        Ok(Ended::Stopped) | Ok(Ended::AgentExited(Some(0))) => exit::OK,
        // The agent's failure shows in the role's log and counts for the
        // supervisor, as a failed headless turn does.
        Ok(Ended::AgentExited(_)) => exit::ENV,
        Err(e) => crate::cli::report(&e, false),
    }
}
