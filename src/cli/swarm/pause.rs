//! `swarm pause [--type T…]`: stop delivery (of those types) (docs/cockpit.md).

use crate::bridge::control;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Writes .swarmforge/paused. While it is there the daemon leaves matching \
outbox files where they are (retried with the deferred files' backoff, at \
most every 5 s); everything else keeps working: agents send, take and finish \
work. Repeating adds types; a pause without --type pauses everything. \
`swarm resume` removes it. Shown by `swarm status`. In a swarm across \
hosts (docs/bridge.md, \"One control\") every host pauses too, unless \
--here.
Exit 0 paused; 1 unknown type or an environment error; 2 PERSON_ONLY (run by an \
agent, docs/security.md).")]
pub struct Args {
    /// Pause only this message type (repeatable; default: every type)
    #[arg(long = "type", value_name = "TYPE")]
    pub types: Vec<String>,
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
            crate::agent::caller::Caller::of(p)?.require_person("swarm pause")?;
            crate::bridge::swarmwide::pause(p, &args.types, args.here)
        },
        |(p, c)| {
            serde_json::json!({
                "status": "paused", "types": p.types, "since": p.since,
                "control": control::json_id(c.as_ref()),
            })
        },
        |(p, c)| {
            format!(
                "PAUSED: {} since {}\n{}",
                p.describe(),
                p.since,
                control::sent_line(c.as_ref())
            )
        },
    )
}
