//! `swarm turn --role R`: one headless turn of a preset agent (what a
//! headless role runs; crates/swarm-launch/src/launch/turn/), and
//! `swarm fresh <role>…`, which makes each role's next turn start a new
//! conversation.

use std::io::Write;

use crate::error::exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The role (default: SWARMFORGE_ROLE)
    #[arg(long)]
    pub role: Option<String>,
}

/// The role (`--role`, else `SWARMFORGE_ROLE`) and the swarm's root, or
/// the exit code of the error reported.
pub(super) fn role_and_root(role: Option<String>) -> Result<(String, std::path::PathBuf), i32> {
    let role = crate::protocol::root::named_or_acting_role(role)
        .map_err(|e| crate::cli::report(&e, false))?;
    let root = super::up_root(None).map_err(|e| crate::cli::report(&e, false))?;
    Ok((role, root))
}

/// One line of what a role's runner says, into its log or pane.
pub(super) fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "[swarm] {}", crate::text::escape(line));
    let _ = out.flush();
}

pub fn run(args: Args) -> i32 {
    let (role, root) = match role_and_root(args.role) {
        Ok(x) => x,
        Err(code) => return code,
    };
    match crate::launch::turn::turn(&root, &role, &mut say) {
        // The CLI's own code, so a failed turn shows in the agent's log and
        // counts for the supervisor; a signal is an environment failure.
        Ok(t) => match t.code {
            _ if !t.ran => exit::OK,
            Some(0) => exit::OK,
            _ => exit::ENV,
        },
        Err(e) => crate::cli::report(&e, false),
    }
}

#[derive(clap::Args, Debug)]
pub struct FreshArgs {
    /// The roles whose next headless turn starts a new conversation
    #[arg(required = true)]
    pub roles: Vec<String>,
}

pub fn run_fresh(args: FreshArgs) -> i32 {
    let plan = match super::up_root(None).and_then(|r| crate::launch::plan::Plan::load(&r)) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, false),
    };
    for role in &args.roles {
        if !plan.roles.iter().any(|r| &r.name == role) {
            let e = crate::error::Error::not_found(format!(
                "role '{role}' is not in {}",
                plan.source.path().display()
            ));
            return crate::cli::report(&e, false);
        }
    }
    for role in &args.roles {
        match crate::launch::agent_session::forget(&plan.project, role) {
            Ok(Some(old)) => crate::cli::out(&format!(
                "{role}: session forgotten ({}); its next turn starts a new conversation\n",
                crate::text::escape(&old)
            )),
            Ok(None) => crate::cli::out(&format!(
                "{role}: no session kept; its next turn starts a new conversation\n"
            )),
            Err(e) => return crate::cli::report(&e, false),
        }
    }
    exit::OK
}
