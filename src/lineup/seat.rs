//! `seat_request`: a coordinator agent asks for a seat by message
//! (docs/lineups.md). The daemon refuses it, before any copy is written,
//! from a role `lineup.may_change` does not name; a request it delivered it
//! carries out with `swarm role add/remove` in a process of its own (so the
//! daemon keeps delivering while the change waits on it), and journals the
//! outcome (`seat_requested`, with the command's exit and last line).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::daemon::journal::{Event, Journal, Kind};
use crate::protocol::config::Config;
use crate::protocol::grammar::MessageType;
use crate::protocol::header::Message;
use crate::protocol::layout::Project;

/// Why the daemon refuses `msg` (None: not a seat request, or allowed).
pub fn refusal(config: &Config, msg: &Message) -> Option<String> {
    if msg.kind() != Some(MessageType::SeatRequest) {
        return None;
    }
    let from = msg.sender().unwrap_or_default();
    if config.lineup.may_change.iter().any(|r| r == from) {
        return None;
    }
    Some(format!(
        "seat_request: role {from} may not change the lineup (swarm.yaml `lineup: {{may_change: [...]}}` names the roles that may)"
    ))
}

/// The `swarm role` arguments a delivered request asks for.
fn arguments(msg: &Message) -> Option<Vec<String>> {
    let role = msg.get("seat_role")?.to_string();
    let reason = msg.get("reason");
    match msg.get("seat")? {
        "add" => Some(vec![
            "role".into(),
            "add".into(),
            role,
            "--from".into(),
            msg.get("definition")?.to_string(),
        ]),
        "remove" => {
            let mut v = vec!["role".into(), "remove".into(), role];
            if let Some(r) = reason {
                v.extend(["--reason".to_string(), r.to_string()]);
            }
            Some(v)
        }
        _ => None,
    }
}

/// Carries out a delivered seat request (none other is acted on).
pub fn act(project: &Project, journal: &Journal, msg: &Message) {
    if msg.kind() != Some(MessageType::SeatRequest) {
        return;
    }
    let base = Event::new(Kind::SeatRequested).message(msg);
    let Some(args) = arguments(msg) else {
        journal.record(&base.reason("malformed seat_request; nothing done"));
        return;
    };
    let swarm = match crate::launch::shims::own_bin_dir() {
        Ok(d) => d.join("swarm"),
        Err(e) => {
            journal.record(&base.reason(format!("cannot find swarm: {e}")));
            return;
        }
    };
    let out = project
        .daemon_dir()
        .join(format!("seat-{}.out", msg.id().unwrap_or("unknown")));
    let journal = journal.clone();
    let root = project.root.clone();
    std::thread::spawn(move || {
        let what = args.join(" ");
        let result = run(&swarm, &root, &args, &out);
        journal.record(&base.reason(format!("swarm {what}: {result}")));
    });
}

fn run(swarm: &Path, root: &Path, args: &[String], out: &Path) -> String {
    let file = match std::fs::File::create(out) {
        Ok(f) => f,
        Err(e) => return format!("cannot write {}: {e}", out.display()),
    };
    let err = match file.try_clone() {
        Ok(f) => f,
        Err(e) => return format!("cannot write {}: {e}", out.display()),
    };
    let status = Command::new(swarm)
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .status();
    let last = std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .to_string();
    match status {
        Ok(s) if s.success() => format!("done: {last}"),
        Ok(s) => format!("refused (exit {}): {last}", s.code().unwrap_or(-1)),
        Err(e) => format!("cannot run {}: {e}", swarm.display()),
    }
}
