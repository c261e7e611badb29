//! Turn ends of tmux-mode agents, recorded outside the sandbox
//! (docs/headless.md, "In tmux mode"; docs/security.md, "Confinement").
//!
//! A confined agent must not write the telemetry (it could write usage for
//! any role, or cut the journal and slip its budget), so its CLI's turn-end
//! hook only leaves a small request in the role's own launcher folder
//! (`.swarmforge/agents/<role>/turn-end`, which the sandbox leaves
//! writable): the transcript's path and the text the turn ended with. The
//! daemon, unconfined, relays the requests on its agent-check timer: it
//! reads what the transcript gained (agents/transcript/: only a file
//! inside that CLI's own transcript folder, opened without following a
//! link, bounded) into the activity and usage of the role whose folder
//! held the request, and journals a read that fails (`activity_lost`).
//!
//! The request is the agent's: bounded ([`MAX_REQUEST`], at most [`KEEP`]
//! turn ends, one per transcript), read without following a link, and it
//! can only ever make the daemon read a transcript of the role's own CLI
//! for that role. Each turn end carries a number one above the last; the
//! daemon keeps the last number it handled per role in the telemetry
//! (`.swarmforge/telemetry/turn-ends/<role>`), so a request is read once
//! and never removed by the daemon from the agent's folder.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::hook_input::parse_input;
use super::Cli;
use crate::daemon::feature::{Feature, OffLoop};
use crate::daemon::journal::{self, Journal};
use crate::fsx;
use crate::protocol::layout::Project;
use crate::protocol::roles::{Role, Roles};

/// The largest request read.
pub const MAX_REQUEST: u64 = 64 * 1024;
/// Turn ends a request keeps (one per transcript, the newest).
pub const KEEP: usize = 8;
/// The longest transcript path kept.
const MAX_PATH: usize = 4096;
/// How much of the turn's last text is kept to see it reach the transcript.
const MAX_LAST: usize = 200;
/// How long the daemon waits for the turn's last message to reach the
/// transcript before it reads the turn as it is (the rest is read at the
/// next turn end).
pub const FLUSH_WAIT: Duration = Duration::from_secs(3);

/// One turn end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct End {
    n: u64,
    transcript: String,
    #[serde(default)]
    last: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Request {
    ends: Vec<End>,
}

fn request_file(project: &Project, role: &str) -> PathBuf {
    crate::protocol::launch_files::agent_own_dir(project, role).join("turn-end")
}

fn handled_file(project: &Project, role: &str) -> PathBuf {
    project.telemetry_dir().join("turn-ends").join(role)
}

fn read_request(f: &Path) -> Result<Option<Request>, String> {
    match fsx::read_bounded(f, MAX_REQUEST) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format!("{}: not a turn-end request: {e}", f.display())),
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", f.display())),
    }
}

/// At a turn end in tmux mode (the hook, perhaps confined): leaves the
/// request for the daemon. Returns a note for the hook's stderr when it
/// could not.
pub fn leave(project: Option<&Project>, role: Option<&str>, stdin: &[u8]) -> Option<String> {
    let (Some(p), Some(r)) = (project, role.filter(|r| !r.is_empty())) else {
        return None;
    };
    if !crate::protocol::grammar::valid_role(r) {
        return Some(format!("not a role name: {}", crate::text::escape(r)));
    }
    let input = parse_input(stdin);
    let transcript = input.transcript_path.filter(|t| t.len() <= MAX_PATH)?;
    let f = request_file(p, r);
    // A request that does not read is replaced (the daemon said so).
    let mut req = read_request(&f).ok().flatten().unwrap_or_default();
    let n = req
        .ends
        .iter()
        .map(|e| e.n)
        .max()
        .unwrap_or(0)
        .saturating_add(1);
    req.ends.retain(|e| e.transcript != transcript);
    req.ends.push(End {
        n,
        transcript,
        last: input
            .last_message
            .map(|t| t.chars().take(MAX_LAST).collect()),
    });
    if req.ends.len() > KEEP {
        req.ends.drain(..req.ends.len() - KEEP);
    }
    let dir = f.parent().unwrap_or(Path::new("."));
    let written = serde_json::to_vec(&req)
        .map_err(std::io::Error::other)
        .and_then(|b| {
            fsx::ensure_dirs(&[dir])?;
            fsx::replace(dir, &f, &b)
        });
    written
        .err()
        .map(|e| format!("turn end not recorded: {}: {e}", f.display()))
}

/// The preset CLI a role in roles.tsv runs, as its agent column names it.
fn cli_of(role: &Role) -> Option<Cli> {
    Cli::parse(role.agent.rsplit('/').next()?)
}

/// The relay as a feature of handoffd (`daemon::feature`), registered by
/// `cli::handoffd`: it runs off the daemon's loop, with the agents' check.
pub struct TurnEnds;

impl Feature for TurnEnds {
    fn off_loop(&self) -> Option<OffLoop> {
        Some(Box::new(relay))
    }
}

/// Relays every role's new turn ends (the daemon, outside the sandbox).
fn relay(project: &Project, roles: &Roles, journal: &Journal) {
    for role in roles
        .roles
        .iter()
        .filter(|r| !r.is_human() && !r.is_remote())
    {
        let f = request_file(project, &role.name);
        if std::fs::symlink_metadata(&f).is_err() {
            continue;
        }
        if let Some(cli) = cli_of(role) {
            relay_role(project, &role.name, cli, &f, journal);
        }
    }
}

fn relay_role(project: &Project, role: &str, cli: Cli, f: &Path, journal: &Journal) {
    let handled_at = handled_file(project, role);
    let handled: u64 = fsx::read_bounded(&handled_at, 64)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    let mut req = match read_request(f) {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(why) => {
            // Said once: the number handled moves past anything the hook
            // writes next (it starts again at 1 over a bad request).
            if handled != u64::MAX {
                lost(project, role, cli, &why, journal);
                keep_handled(&handled_at, u64::MAX);
            }
            return;
        }
    };
    req.ends.sort_by_key(|e| e.n);
    let newest = req.ends.last().map(|e| e.n).unwrap_or(0);
    // Numbers below the last handled: the request was written afresh.
    let from = if newest < handled { 0 } else { handled };
    let fresh: Vec<End> = req
        .ends
        .into_iter()
        .filter(|e| e.n > from)
        .take(KEEP)
        .collect();
    let Some(last) = fresh.last() else {
        return;
    };
    // Wait (a few checks at most) for the turn's last message.
    let age = std::fs::symlink_metadata(f)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or(FLUSH_WAIT);
    if let Some(text) = &last.last {
        let path = Path::new(&last.transcript);
        if age < FLUSH_WAIT && !super::transcript::flushed(project, role, cli, path, text) {
            return;
        }
    }
    let upto = last.n;
    for e in &fresh {
        let read = super::transcript::turn_end(project, role, cli, Path::new(&e.transcript));
        if let Err(why) = read {
            lost(project, role, cli, &why.to_string(), journal);
        }
    }
    keep_handled(&handled_at, upto);
}

fn keep_handled(f: &Path, n: u64) {
    let dir = f.parent().unwrap_or(Path::new("."));
    let written =
        fsx::ensure_dirs(&[dir]).and_then(|_| fsx::replace(dir, f, format!("{n}\n").as_bytes()));
    if let Err(e) = written {
        eprintln!("handoffd: {}: {e}", f.display());
    }
}

/// A turn end whose figures could not be read: a `lost` usage record (so
/// `swarm cost` counts a turn not read) and an `activity_lost` event.
fn lost(project: &Project, role: &str, cli: Cli, why: &str, journal: &Journal) {
    let why = crate::text::escape(why);
    let rec = crate::telemetry::usage::Usage {
        lost: Some(why.clone()),
        ..crate::telemetry::usage::Usage::now(role, cli.name())
    };
    let kept = crate::telemetry::usage::record(project, &rec).err();
    let reason = match kept {
        None => why,
        Some(k) => format!("{why}; nor its loss in the usage journal: {k}"),
    };
    journal.record(
        &journal::Event::new(journal::Kind::ActivityLost)
            .recipient(role)
            .reason(reason),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(p: &Project, transcript: &str) -> Option<String> {
        let input = serde_json::json!({"transcript_path": transcript, "last_assistant_message": "x".repeat(500)});
        leave(Some(p), Some("coder"), input.to_string().as_bytes())
    }

    #[test]
    fn a_request_is_bounded_numbered_and_one_per_transcript() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path());
        std::fs::create_dir_all(p.swarmforge()).unwrap();
        for i in 0..(KEEP + 3) {
            assert_eq!(end(&p, &format!("/t/{i}.jsonl")), None);
        }
        assert_eq!(end(&p, "/t/10.jsonl"), None);
        let req = read_request(&request_file(&p, "coder")).unwrap().unwrap();
        assert_eq!(req.ends.len(), KEEP);
        let ns: Vec<u64> = req.ends.iter().map(|e| e.n).collect();
        assert_eq!(ns, vec![4, 5, 6, 7, 8, 9, 10, 12]);
        assert_eq!(req.ends[7].transcript, "/t/10.jsonl");
        assert_eq!(req.ends[7].last.as_ref().unwrap().chars().count(), MAX_LAST);
        // No transcript, no role, a role name that is a path: nothing left.
        assert_eq!(leave(Some(&p), Some("coder"), b"{}"), None);
        assert_eq!(leave(Some(&p), None, b"{}"), None);
        assert!(leave(Some(&p), Some("../x"), b"{}").is_some());
        // A link where the request was is not followed.
        let f = request_file(&p, "coder");
        std::fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &f).unwrap();
        assert!(read_request(&f).is_err());
    }
}
