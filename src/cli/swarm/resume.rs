//! `swarm resume`: end a `swarm pause` (docs/cockpit.md).

use crate::bridge::control;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Removes .swarmforge/paused; the daemon delivers what waited within its retry \
backoff (at most 5 s). In a swarm across hosts every host resumes too, \
unless --here (docs/bridge.md, \"One control\"). Exit 0 resumed (or nothing was paused); 1 an environment error; \
2 PERSON_ONLY (run by an agent, docs/security.md).")]
pub struct Args {
    /// This host only: nothing is sent to the other hosts of the swarm
    #[arg(long)]
    pub here: bool,
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
            crate::bridge::swarmwide::resume(p, args.here)
        },
        |(was, c)| {
            serde_json::json!({
                "status": "resumed", "was_paused": was,
                "control": control::json_id(c.as_ref()),
            })
        },
        |(was, c)| {
            let head = if *was { "RESUMED\n" } else { "NOT PAUSED\n" };
            format!("{head}{}", control::sent_line(c.as_ref()))
        },
    )
}
