//! `swarm deny <id> --reason R`: refuse a held handoff (docs/cockpit.md).

use crate::bridge::{control, control_view};
use crate::daemon::holds;

/// Where the held handoff was denied.
enum Denied {
    Here(std::path::PathBuf),
    /// Held on that host: the denial was sent there.
    Elsewhere(String, control::Record),
}

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
            if holds::find(p, &id).is_err() {
                if let Some(r) = control_view::held_by_id(p, &id) {
                    let c = control::deny_elsewhere(p, &r, &args.reason)?;
                    return Ok(Denied::Elsewhere(r.host, c));
                }
            }
            holds::deny(p, &id, &args.reason, "cli").map(Denied::Here)
        },
        |d| match d {
            Denied::Here(path) => serde_json::json!({
                "status": "denied", "id": args.id, "path": path, "reason": args.reason,
            }),
            Denied::Elsewhere(host, c) => serde_json::json!({
                "status": "sent", "id": args.id, "host": host, "reason": args.reason,
                "control": c.id,
            }),
        },
        |d| match d {
            Denied::Here(path) => format!("DENIED: {}\n", path.display()),
            Denied::Elsewhere(host, c) => format!(
                "DENIAL SENT: {} is held on host {host}\n{}",
                args.id,
                control::sent_line(Some(c))
            ),
        },
    )
}
