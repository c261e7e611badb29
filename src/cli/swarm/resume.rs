//! `swarm resume`: end a `swarm pause` (docs/cockpit.md).

use crate::daemon::holds;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Removes .swarmforge/paused; the daemon delivers what waited within its retry \
backoff (at most 5 s). Exit 0 resumed (or nothing was paused); 1 an environment error; \
2 PERSON_ONLY (run by an agent, docs/security.md).")]
pub struct Args {
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    super::answer(
        None,
        args.json,
        |p| {
            crate::agent::caller::Caller::of(p)?.require_person("swarm resume")?;
            holds::resume(p)
        },
        |was| {
            serde_json::json!({
                "status": "resumed", "was_paused": was,
            })
        },
        |&was| if was { "RESUMED\n" } else { "NOT PAUSED\n" }.to_string(),
    )
}
