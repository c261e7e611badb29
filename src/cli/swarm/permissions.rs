//! `swarm permissions` (what ACP roles may run without asking, a person's
//! "always") and `swarm permissions revoke` (docs/agents.md, "The ACP
//! runtime"); the logic is in launch/acp/grants.rs.

use crate::launch::acp::grants;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
A person's \"always\" on an ACP role's permission request (`swarm answer` with \
the agent's allow_always option) lets that role run the same tool (its kind \
and title: a command line, an edit of a file) without asking again. This lists \
them, numbered per role; `swarm permissions revoke <role> <n>` takes one back \
from the next call on. Each grant, each call it allows and each revoke is in \
the journal (`swarm events`).
Exit 0; 1 on a usage or environment error; 2 PERSON_ONLY (revoke run by an \
agent, docs/security.md).")]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    #[command(flatten)]
    pub out: super::JsonArg,
}

#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Take back a role's "always" (its number in the list)
    Revoke {
        /// The role
        role: String,
        /// The grant's number among the role's, as listed
        n: usize,
        /// The person revoking (a human role; default: the first one)
        #[arg(long = "as")]
        as_person: Option<String>,
    },
}

pub fn run(args: Args) -> i32 {
    match args.action {
        None => super::answer(
            None,
            args.out.json,
            grants::load,
            |g| crate::cli::stamped(serde_json::json!({ "grants": g })),
            |g| grants::text(g),
        ),
        Some(Action::Revoke { role, n, as_person }) => super::answer(
            None,
            args.out.json,
            |p| grants::revoke_as_caller(p, &role, n, as_person.as_deref()),
            |g| crate::cli::stamped(serde_json::json!({"status": "revoked", "grant": g})),
            |g| {
                format!(
                    "revoked: {} may no longer run {}: {} without asking\n",
                    g.role, g.kind, g.title
                )
            },
        ),
    }
}
