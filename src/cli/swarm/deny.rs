//! `swarm deny <id> --reason R`: refuse a held handoff (issue 15).

use crate::daemon::holds;
use crate::error::exit;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Moves a held handoff to its sender's failed/ with `<name>.error` reading \
`denied: <reason>`, as the daemon does with a refusal. Journaled as `denied`.
Exit 0 denied; 1 no such held handoff, a bad id, no reason, or an environment error.")]
pub struct Args {
    /// The held message's id (`<IDTS>_<SEQ>_from_<sender>`)
    pub id: String,
    /// Why: written to the .error note the sender sees
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(None) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    match holds::deny(&project, &args.id, &args.reason, "cli") {
        Ok(path) => {
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "denied", "id": args.id, "path": path, "reason": args.reason,
                }));
            } else {
                crate::cli::out(&format!("DENIED: {}\n", path.display()));
            }
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
