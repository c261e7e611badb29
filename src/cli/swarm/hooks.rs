//! `swarm hooks install | remove | commit-msg <file>`: the role byline's
//! commit-msg hook (docs/swarmforge-compat.md §8). `swarm init` and `swarm
//! up` install it; `remove` is SwarmForge's `swarmforge.bb --remove-hooks`.

use std::path::PathBuf;

use clap::Subcommand;

use crate::agent::byline;
use crate::error::{exit, Result};

pub type Args = super::Actions<Action>;

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Install the commit-msg hook that adds `By <role>.` to a role's commits
    /// (what `swarm init` and `swarm up` do; a project's own hook is kept as
    /// commit-msg.before-swarmforge and run after it)
    Install,
    /// Remove the hook and restore the project's own (SwarmForge's
    /// `--remove-hooks`); refused when commit-msg was changed since
    Remove,
    /// What the hook runs: add the role byline to git's message file
    #[command(hide = true)]
    CommitMsg {
        /// The message file git passes to its commit-msg hook
        file: PathBuf,
    },
}

fn changes(act: fn(&std::path::Path) -> Result<Vec<String>>, json: bool) -> i32 {
    match super::project(None).and_then(|p| act(&p.root)) {
        Ok(done) => {
            if json {
                crate::cli::emit_json(serde_json::json!({"status": "ok", "changes": done}));
            } else if done.is_empty() {
                crate::cli::out("nothing to change\n");
            } else {
                crate::cli::out(&(done.join("\n") + "\n"));
            }
            exit::OK
        }
        Err(e) => crate::cli::report(&e, json),
    }
}

fn install(root: &std::path::Path) -> Result<Vec<String>> {
    byline::install(root, &crate::launch::shims::own_bin_dir()?.join("swarm"))
}

/// The hook's own run (in the worktree of the commit): outside a swarm, or
/// when the role cannot be told,
/// the commit goes on without a byline (said on stderr for the latter); a
/// message file that cannot be rewritten stops the commit.
fn commit_msg(file: &std::path::Path) -> i32 {
    // git runs the hook at the top of the worktree the commit is made in.
    let (Ok(at), Ok(here)) = (super::located(None), std::env::current_dir()) else {
        return exit::OK;
    };
    if let Err(e) = byline::role_of(&at.project, &here) {
        eprintln!("commit-msg: no role byline added: {e}");
        return exit::OK;
    }
    match byline::apply(&at.project, &here, file) {
        Ok(_) => exit::OK,
        Err(e) => crate::cli::report(&e, false),
    }
}

pub fn run(args: Args) -> i32 {
    match &args.action {
        Action::Install => changes(install, args.json),
        Action::Remove => changes(byline::remove, args.json),
        Action::CommitMsg { file } => commit_msg(file),
    }
}
