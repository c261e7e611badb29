//! `swarm reservations [--json] [--guard]`: who holds which files; with
//! `--guard`, the pre-commit check (docs/reservations.md).

use crate::error::Result;
use crate::reservations::{self, guard, Reservation};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Text: one line per reservation in force, `<id> <role> holds <globs> until <time> (<reason>)`.
--guard: the pre-commit hook's check: exit 2 (RESERVED) when a staged file is held by \
another role, naming it and how to override; 0 otherwise.")]
pub struct Args {
    /// Check the staged files of this worktree's commit (what the hook runs)
    #[arg(long)]
    pub guard: bool,
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

fn listing() -> Result<(Vec<Reservation>, Vec<String>)> {
    let p = super::project(None)?;
    let all = reservations::all(&p)?;
    let now = crate::protocol::clock::now();
    Ok((
        all.reservations
            .into_iter()
            .filter(|r| r.live(now))
            .collect(),
        all.problems,
    ))
}

fn guard_check() -> Result<()> {
    let at = super::located(None)?;
    let me = guard::me(&at.project, &at.worktree.root)?;
    let blocked = guard::check(&at.project, &at.worktree.root, me.as_deref())?;
    if blocked.is_empty() {
        Ok(())
    } else {
        Err(guard::refusal(&blocked))
    }
}

pub fn run(args: Args) -> i32 {
    if args.guard {
        return match guard_check() {
            Ok(()) => crate::error::exit::OK,
            Err(e) => crate::cli::report(&e, args.json),
        };
    }
    match listing() {
        Ok((rs, problems)) => {
            for p in &problems {
                eprintln!("warning: skipped {p}");
            }
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "ok",
                    "reservations": rs.iter().map(super::reserve::as_json).collect::<Vec<_>>(),
                    "problems": problems,
                }));
            } else if rs.is_empty() {
                crate::cli::out("no reservations\n");
            } else {
                let s: String = rs
                    .iter()
                    .map(|r| format!("{} {}\n", r.id, r.describe()))
                    .collect();
                crate::cli::out(&s);
            }
            crate::error::exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
