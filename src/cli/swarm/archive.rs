//! `swarm archive --before <YYYY-MM-DD>`: move finished items created before
//! that day into each worktree's dated archive folders.

use crate::error::exit;
use crate::person::archive;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Moves delivered and refused originals (sent/, failed/) and completed copies \
and batches (inbox/completed/) created before the day into \
<worktree>/.swarmforge/handoffs/archive/<YYYY-MM-DD>/, one rename each. \
swarm transcript, receipts and audit read the archive folders too. Safe to \
run while the swarm works, and to run again after it was interrupted.")]
pub struct Args {
    /// Archive what was created before this day (UTC), YYYY-MM-DD
    #[arg(long, value_name = "YYYY-MM-DD")]
    pub before: String,
    /// One JSON object (per worktree: originals and completed items moved)
    #[arg(long)]
    pub json: bool,
    #[arg(long, short, help = super::QUIET)]
    pub quiet: bool,
}

pub fn run(args: Args) -> i32 {
    let quiet = args.quiet || args.json;
    let result = archive::parse_day(&args.before).and_then(|day| {
        let project = super::project(None)?;
        archive::archive(&project, day, &mut |line| {
            if !quiet {
                eprintln!("swarm: {line}");
            }
        })
    });
    match result {
        Ok(moved) if args.json => {
            crate::cli::emit_json(serde_json::json!({ "worktrees": moved }));
            exit::OK
        }
        Ok(_) if args.quiet => exit::OK,
        Ok(moved) => {
            let (o, c) = moved
                .iter()
                .fold((0, 0), |(o, c), a| (o + a.originals, c + a.completed));
            crate::cli::out(&format!(
                "archived {o} originals and {c} completed items before {}\n",
                args.before
            ));
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
