//! `swarm deny <id> --reason R`: refuse a held handoff (docs/cockpit.md).

use crate::bridge::control;
use crate::bridge::swarmwide::{self, Decided};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Moves a held handoff to its sender's failed/ with `<name>.error` reading \
`denied: <reason>`, as the daemon does with a refusal. Journaled as `denied`. \
A handoff held on another host of the swarm is denied there (the denial \
travels over the bridge, docs/bridge.md \"One control\").
Exit 0 denied; 1 no such held handoff, a bad id, no reason, or an environment \
error; 2 PERSON_ONLY (run by an agent, docs/security.md).")]
pub struct Args {
    /// The held message's id (`<IDTS>_<SEQ>_from_<sender>`)
    pub id: String,
    /// Why: written to the .error note the sender sees
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    super::answer(
        None,
        args.json,
        |p| {
            crate::agent::caller::Caller::of(p)?.require_person("swarm deny")?;
            let id = crate::protocol::idprefix::expand(p, &args.id)?;
            swarmwide::deny(p, &id, &args.reason, "cli")
        },
        |d| {
            let mut v = d.json("denied", &args.id);
            v["reason"] = serde_json::json!(args.reason);
            v
        },
        |d| match d {
            Decided::Here(path, _) => format!("DENIED: {}\n", path.display()),
            Decided::Elsewhere(host, c) => format!(
                "DENIAL SENT: {} is held on host {host}\n{}",
                args.id,
                control::sent_line(Some(c))
            ),
        },
    )
}
