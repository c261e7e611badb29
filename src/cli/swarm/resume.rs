//! `swarm resume`: end a `swarm pause` (issue 15).

use crate::daemon::holds;
use crate::error::exit;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Removes .swarmforge/paused; the daemon delivers what waited within its retry \
backoff (at most 5 s). Exit 0 resumed (or nothing was paused); 1 an environment error.")]
pub struct Args {
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(None) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    match holds::resume(&project) {
        Ok(was) => {
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "resumed", "was_paused": was,
                }));
            } else if was {
                crate::cli::out("RESUMED\n");
            } else {
                crate::cli::out("NOT PAUSED\n");
            }
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
