//! `swarm approve <id>`: deliver a held handoff (docs/cockpit.md).

use crate::daemon::holds;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
A handoff whose sender or type has `approval: required` in swarm.yaml waits \
in its sender's .swarmforge/handoffs/held/ until a person decides. approve \
records the approval (.swarmforge/approvals/<id>) and moves the original back \
to its outbox; the daemon then delivers it the usual way, exactly once. \
Journaled as `approved`. Safe to repeat after a crash.
Exit 0 approved; 1 no such held handoff, a bad id, or an environment error.")]
pub struct Args {
    /// The held message's id (`<IDTS>_<SEQ>_from_<sender>`); `swarm status` lists them
    pub id: String,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    super::answer(
        None,
        args.json,
        |p| holds::approve(p, &crate::protocol::idprefix::expand(p, &args.id)?, "cli"),
        |path| {
            serde_json::json!({
                "status": "approved", "id": args.id, "path": path,
            })
        },
        |path| format!("APPROVED: {}\n", path.display()),
    )
}
