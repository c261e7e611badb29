//! `swarm cancel <role>`: stops an ACP role's running turn with
//! `session/cancel` (docs/agents.md, "The ACP runtime"); the logic is in
//! launch/acp/cancel.rs.

#[derive(clap::Args, Debug)]
#[command(after_help = "\
The role's ACP client sends its agent session/cancel: the turn ends (the agent \
says what it stopped), the item in process stays where it is, and the role is \
not prompted again until its inbox changes. Permission requests of the turn \
still waiting for a person are withdrawn.
Exit 0 sent (or no turn ran: said); 1 on a usage or environment error, or when \
no client answers; 2 PERSON_ONLY (run by an agent, docs/security.md).")]
pub struct Args {
    /// The role (`runtime: acp`)
    pub role: String,
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    let role = args.role;
    super::answer(
        None,
        args.json,
        |p| crate::launch::acp::cancel::cancel(p, &role),
        |t| crate::cli::stamped(serde_json::json!({"status": "answered", "said": t})),
        |t| format!("{t}\n"),
    )
}
