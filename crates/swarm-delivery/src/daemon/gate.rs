//! Whether the delivery pass may deliver a message now (docs/cockpit.md):
//! `swarm pause` (the state file `.swarmforge/paused`) and swarm.yaml's
//! approval rules (`approval: required` per sending role or per type). The pass
//! asks [`decide`] once per message, after its refusal checks and before the
//! forum's admission; [`hold`] moves a message that needs approval into its
//! sender's `pending_approval/`.
//!
//! An approval is a record `.swarmforge/approvals/<id>`, published by `swarm
//! approve` before the original goes back to its outbox, so a daemon killed
//! at any point after that still finds it (see `person::holds`). It lives in
//! the project's folder, not in the message: an agent can write any header
//! into its own outbox, so a header could be forged.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::daemon::journal::{Event, Journal, Kind};
use crate::fsx;
use crate::protocol::config::Config;
use crate::protocol::grammar;
use crate::protocol::header::{names, Message};
use crate::protocol::layout::{Project, Worktree};

/// What the pass does with one message.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    Deliver,
    /// Left in the outbox (and retried with the deferred files' backoff).
    Paused(String),
    /// Moved to the sender's `pending_approval/` until a person decides.
    Hold,
}

/// The pause state file's content (JSON). No types: everything is paused.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Pause {
    pub types: Vec<String>,
    pub since: String,
}

impl Pause {
    pub fn covers(&self, kind: &str) -> bool {
        self.types.is_empty() || self.types.iter().any(|t| t == kind)
    }

    pub fn describe(&self) -> String {
        if self.types.is_empty() {
            "all delivery".into()
        } else {
            format!("delivery of {}", self.types.join(", "))
        }
    }
}

/// The pause in force, if any. A pause file that cannot be read as one
/// pauses everything: the person meant to stop delivery.
pub fn pause_state(project: &Project) -> Option<Pause> {
    match fsx::read_bounded(&project.pause_file(), 64 * 1024) {
        Ok(b) => Some(serde_json::from_slice(&b).unwrap_or_default()),
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::NotFound => None,
        Err(_) => Some(Pause::default()),
    }
}

/// The fingerprint an approval is for: the SHA-256 of the message as parsed
/// and rendered again (so the same message always has the same one).
pub fn fingerprint(msg: &Message) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(msg.render().as_bytes()))
}

/// The fingerprint of the original a copy was made from: the copy without
/// the headers delivery writes on every copy (`recipient`, `enqueued_at`;
/// the daemon sets both on the copies it makes, whatever the original
/// said). An approval of the original on its sender's host thereby covers
/// the copy relayed to another host (docs/bridge.md, "Approvals travel").
pub fn original_fingerprint(msg: &Message) -> String {
    let mut m = msg.clone();
    m.remove(names::RECIPIENT);
    m.remove(names::ENQUEUED_AT);
    fingerprint(&m)
}

/// Whether fingerprint `seen` (what a person reviewed) is this message's,
/// as it is or as the original it is a copy of.
pub fn is_fingerprint(msg: &Message, seen: &str) -> bool {
    fingerprint(msg) == seen || original_fingerprint(msg) == seen
}

/// Whether a person approved this very message (`swarm approve`): a record
/// for its id whose `sha256` is the message's fingerprint (or its
/// original's). An agent reusing an approved id for other content (or other
/// recipients) is held again.
pub fn approved(project: &Project, msg: &Message) -> bool {
    let id = msg.id().unwrap_or_default();
    if !grammar::valid_message_id(id) {
        return false;
    }
    let Ok(bytes) = fsx::read_bounded(&project.approvals_dir().join(id), 64 * 1024) else {
        return false;
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| l.strip_prefix("sha256: "))
        .any(|seen| is_fingerprint(msg, seen))
}

/// Deliver, leave paused, or hold.
pub fn decide(project: &Project, config: &Config, msg: &Message) -> Decision {
    let kind = msg.type_name().unwrap_or_default();
    if let Some(p) = pause_state(project) {
        if p.covers(kind) {
            return Decision::Paused(format!(
                "{} paused since {} (swarm resume)",
                p.describe(),
                p.since
            ));
        }
    }
    let from = msg.sender().unwrap_or_default();
    if from != grammar::DAEMON && config.needs_approval(from, kind) && !approved(project, msg) {
        return Decision::Hold;
    }
    Decision::Deliver
}

/// Why an original needing approval is still in its outbox: its
/// `pending_approval/` folder could not be made or moved into (retried).
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", held.display())]
pub struct NotHeld {
    held: PathBuf,
    source: io::Error,
}

/// Moves an outbox original needing approval into its sender's `pending_approval/`
/// (no-clobber) and journals `held`. The file left the outbox, so the pass
/// forgets it (Ok, as when it vanished before the move); a move that fails
/// leaves it to retry (Err, why).
pub fn hold(journal: &Journal, worktree: &Path, path: &Path, msg: &Message) -> Result<(), NotHeld> {
    let held = Worktree::new(worktree).held();
    if let Err(source) = fsx::ensure_dirs(&[&held]) {
        return Err(NotHeld { held, source });
    }
    let target = match fsx::move_into_unique(path, &held, grammar::collision_names(path)) {
        Ok(p) => p,
        Err(e) => match fsx::moved_to(&e) {
            Some(p) => p.to_path_buf(),
            None if e.kind() == io::ErrorKind::NotFound && !path.exists() => return Ok(()),
            None => return Err(NotHeld { held, source: e }),
        },
    };
    journal.record(
        &Event::new(Kind::Held)
            .moved(msg)
            .path(&target)
            .reason("approval required (swarm approve / swarm deny)"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_of_the_original_covers_its_copies_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::new(dir.path());
        std::fs::create_dir_all(project.approvals_dir()).unwrap();
        let original = msg("coder", "note");
        let seen = fingerprint(&original);
        let id = original.id().unwrap().to_string();
        std::fs::write(
            project.approvals_dir().join(&id),
            format!("id: {id}\nsha256: {seen}\n"),
        )
        .unwrap();
        assert!(approved(&project, &original));
        // The copy another host made of it: recipient and enqueued_at added.
        let mut copy = original.clone();
        copy.set(names::RECIPIENT, "qa");
        copy.set(names::ENQUEUED_AT, "2026-01-01T00:00:01Z");
        assert_ne!(fingerprint(&copy), seen);
        assert!(approved(&project, &copy));
        // Any other change is other content.
        let mut other = copy.clone();
        other.set(names::PRIORITY, "10");
        assert!(!approved(&project, &other));
        let mut cc = copy.clone();
        cc.set(names::CC, "boss");
        assert!(!approved(&project, &cc));
    }

    fn msg(from: &str, kind: &str) -> Message {
        let text = format!(
            "id: 20260101T000000Z_000001_from_{from}\nfrom: {from}\nto: qa\npriority: 50\ntype: {kind}\ncreated_at: 2026-01-01T00:00:00Z\n\nbody\n"
        );
        Message::parse_bytes(text.as_bytes()).unwrap()
    }

    #[test]
    fn pause_then_approval_then_deliver() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::new(dir.path());
        std::fs::create_dir_all(project.swarmforge()).unwrap();
        let config = Config::parse("roles:\n  - {name: coder, approval: required}\n").unwrap();
        assert_eq!(
            decide(&project, &config, &msg("qa", "note")),
            Decision::Deliver
        );
        assert_eq!(
            decide(&project, &config, &msg("coder", "note")),
            Decision::Hold
        );
        std::fs::write(project.pause_file(), r#"{"types":["note"],"since":"T"}"#).unwrap();
        assert!(matches!(
            decide(&project, &config, &msg("qa", "note")),
            Decision::Paused(r) if r.contains("delivery of note paused since T")
        ));
        assert_eq!(
            decide(&project, &config, &msg("qa", "handoff")),
            Decision::Deliver
        );
        std::fs::write(project.pause_file(), "garbage").unwrap();
        assert!(matches!(
            decide(&project, &config, &msg("qa", "handoff")),
            Decision::Paused(_)
        ));
        std::fs::remove_file(project.pause_file()).unwrap();
        std::fs::create_dir_all(project.approvals_dir()).unwrap();
        let record = project
            .approvals_dir()
            .join("20260101T000000Z_000001_from_coder");
        // An approval of other content does not cover this message.
        std::fs::write(&record, "sha256: 00\n").unwrap();
        let m = msg("coder", "note");
        assert_eq!(decide(&project, &config, &m), Decision::Hold);
        std::fs::write(&record, format!("id: x\nsha256: {}\n", fingerprint(&m))).unwrap();
        assert_eq!(decide(&project, &config, &m), Decision::Deliver);
    }
}
