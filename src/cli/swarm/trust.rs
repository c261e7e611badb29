//! `swarm trust [ROLE...]` / `swarm untrust [ROLE...]`: record (or remove)
//! the folder trust of this swarm's worktrees in each coding CLI's own
//! store, and the person's consent to the key in `ANTHROPIC_API_KEY` where
//! Claude Code keeps it, printing every file and key changed
//! (launch/trust.rs).

use std::path::PathBuf;

use crate::error::exit;
use crate::launch::plan::Plan;
use crate::launch::trust::{self, Change, Stores};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The roles whose worktrees to trust (default: every role running
    /// Claude Code, Codex or Gemini CLI)
    pub roles: Vec<String>,
    /// Project root (default: found from the current directory)
    #[arg(long, value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// Change nothing: list the worktrees a CLI does not trust yet and the
    /// dialogs a role will wait at (exit 1 when there is one)
    #[arg(long)]
    pub check: bool,
}

/// Prints each change, one line each.
pub fn print(changes: &[Change], say: &mut dyn FnMut(&str)) {
    if changes.is_empty() {
        say("nothing to change");
    }
    for c in changes {
        say(&c.line());
    }
}

fn check(args: &Args) -> i32 {
    let result = super::up_root(args.root.as_deref())
        .and_then(|root| Plan::load(&root))
        .and_then(|plan| {
            let stores = Stores::from_env()?;
            Ok((
                trust::untrusted(&plan, &stores)?,
                trust::unconsented(&plan, &stores),
                trust::unanswered_api_key(&plan, &stores),
            ))
        });
    match result {
        Ok((v, b, None)) if v.is_empty() && b.is_empty() => {
            crate::cli::out("every agent's worktree is trusted by its CLI\n");
            exit::OK
        }
        Ok((v, b, k)) => {
            for n in &v {
                crate::cli::out(&format!(
                    "untrusted: {} ({}): {}\n",
                    n.role,
                    n.cli.name(),
                    n.folder.display()
                ));
            }
            for b in &b {
                crate::cli::out(&format!(
                    "bypass disclaimer not accepted: {} (claude, permission: full): {}\n",
                    b.role,
                    b.file.display()
                ));
            }
            if let Some(k) = &k {
                crate::cli::out(&format!(
                    "API key not answered: {} (claude): ANTHROPIC_API_KEY is set and {} holds no answer for it, so Claude Code asks whether to use it\n",
                    k.roles.join(", "),
                    k.file.display()
                ));
            }
            eprintln!("  hint: `swarm trust` records the trust (or answer the dialog: `swarm attach <role>`)");
            exit::ENV
        }
        Err(e) => crate::cli::report(&e, false),
    }
}

fn run_with(args: Args, on: bool) -> i32 {
    if args.check {
        return check(&args);
    }
    let result = super::up_root(args.root.as_deref())
        .and_then(|root| Plan::load(&root))
        .and_then(|plan| {
            let stores = Stores::from_env()?;
            if on {
                // The worktrees must exist to be trusted (idempotent).
                crate::launch::init::init(&plan)?;
                trust::trust(&plan, &args.roles, &stores)
            } else {
                trust::untrust(&plan, &args.roles, &stores)
            }
        });
    match result {
        Ok(changes) => {
            print(&changes, &mut |l| crate::cli::out(&format!("{l}\n")));
            exit::OK
        }
        Err(e) => crate::cli::report(&e, false),
    }
}

pub fn run(args: Args) -> i32 {
    run_with(args, true)
}

pub fn run_untrust(args: Args) -> i32 {
    run_with(args, false)
}
