//! Today's SwarmForge's audit gate (`audit_gate: true` in swarm.yaml;
//! docs/swarmforge-compat.md §3): the first valid `git_handoff` of a draft
//! is not queued. It answers `AUDIT_REQUIRED` and records a challenge; only
//! a second call with exactly the same handoff (sender, task, type,
//! recipients, priority, commit, artifacts and draft text) queues it. Any
//! change starts a new challenge, so the agent is made to look at what it
//! hands on once more before it goes.
//!
//! Challenges are kept by protocol::audit_pending. Invariant, kept by
//! [`check`] under the store's lock: a sender has at most one challenge,
//! the one of its latest unqueued git handoff; a queued handoff leaves
//! none behind.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::protocol::audit_pending::{self, sha256_hex as sha256};
use crate::protocol::draft::Draft;
use crate::protocol::layout::Worktree;

/// What a challenge binds: every part of the handoff that, changed, must be
/// audited again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub version: u32,
    pub sender: String,
    pub task_sha256: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub recipients: Vec<String>,
    pub priority: String,
    pub commit: String,
    pub artifacts: Vec<String>,
    pub draft_sha256: String,
    /// The cards the handoff carries besides its task (`batch_task_ids`,
    /// from the sender's current work); empty, and then not written, for
    /// one card, so a challenge made before this field still matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batch_task_ids: Vec<String>,
}

/// The answer to a first (or changed) call: nothing was queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    pub task: String,
    pub commit: String,
}

impl Challenge {
    /// SwarmForge's tokens, then what to do.
    pub fn report(&self) -> String {
        format!(
            "AUDIT_REQUIRED\nHANDOFF_NOT_QUEUED\nTASK_ID: {}\nCOMMIT: {}\n\n{}\n",
            crate::text::escape(&self.task),
            self.commit,
            INSTRUCTIONS
        )
    }
}

/// Our words for upstream's instructions (only their first sentence is
/// known verbatim; docs/swarmforge-compat.md §3).
const INSTRUCTIONS: &str = "Re-read the complete inbound task payload and every source it references. \
Check that the commit named above does everything the task asks and nothing it does not, and that the \
recipients and priority are right. Then run the same swarm_handoff.sh command again, unchanged, to queue \
the handoff. Any change to the draft, the task, the recipients, the priority or the commit starts a new audit.";

/// The candidate for a validated `git_handoff` draft.
pub fn candidate(
    sender: &str,
    d: &Draft,
    kind: &str,
    recipients: &[String],
    priority: &str,
    commit: &str,
    artifacts: &[String],
) -> Candidate {
    let mut text = Vec::new();
    for (k, v) in &d.fields {
        text.extend_from_slice(k.as_bytes());
        text.push(0);
        text.extend_from_slice(v.as_bytes());
        text.push(0);
    }
    text.extend_from_slice(d.body.as_deref().unwrap_or_default().as_bytes());
    Candidate {
        version: 1,
        sender: sender.to_string(),
        task_sha256: sha256(
            d.get(crate::protocol::header::names::TASK)
                .unwrap_or_default()
                .as_bytes(),
        ),
        kind: kind.to_string(),
        recipients: recipients.to_vec(),
        priority: priority.to_string(),
        commit: commit.to_string(),
        artifacts: artifacts.to_vec(),
        draft_sha256: sha256(&text),
        batch_task_ids: Vec::new(),
    }
}

/// Holds the gate's lock while a call decides and, when it passes, queues.
pub struct Gate {
    store: audit_pending::Locked,
    sender: String,
    passed: bool,
}

impl Gate {
    /// Whether the handoff may be queued now (the unchanged second call).
    pub fn passed(&self) -> bool {
        self.passed
    }

    /// After the handoff was queued: the sender's challenges are gone.
    pub fn queued(self) -> Result<()> {
        self.store.clear(&self.sender)
    }
}

/// Decides for `c` from `wt`: the second unchanged call passes (the caller
/// queues, then calls [`Gate::queued`]); any other call replaces the
/// sender's challenges with `c`'s and does not pass.
pub fn check(wt: &Worktree, c: &Candidate) -> Result<Gate> {
    let store = audit_pending::Locked::open(wt)?;
    let stored =
        serde_json::to_value(c).map_err(|e| Error::internal(format!("audit challenge: {e}")))?;
    let same = store.read(&c.sender, &c.task_sha256) == Some(stored.clone());
    if !same {
        store.clear(&c.sender)?;
        store.write(&c.sender, &c.task_sha256, stored)?;
    }
    Ok(Gate {
        store,
        sender: c.sender.clone(),
        passed: same,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(commit: &str) -> Candidate {
        Candidate {
            version: 1,
            sender: "coder".into(),
            task_sha256: sha256(b"t"),
            kind: "git_handoff".into(),
            recipients: vec!["qa".into()],
            priority: "50".into(),
            commit: commit.into(),
            artifacts: vec![],
            draft_sha256: sha256(b"d"),
            batch_task_ids: vec![],
        }
    }

    #[test]
    fn second_unchanged_call_passes_and_a_change_restarts() {
        let d = tempfile::tempdir().unwrap();
        let wt = Worktree::new(d.path());
        assert!(!check(&wt, &cand("a")).unwrap().passed());
        assert_eq!(audit_pending::open(&wt).len(), 1);
        // Changed: challenged again, still one challenge.
        assert!(!check(&wt, &cand("b")).unwrap().passed());
        assert_eq!(audit_pending::open(&wt).len(), 1);
        let g = check(&wt, &cand("b")).unwrap();
        assert!(g.passed());
        g.queued().unwrap();
        assert!(audit_pending::open(&wt).is_empty());
        // After queueing, the same handoff is challenged anew.
        assert!(!check(&wt, &cand("b")).unwrap().passed());
    }
}
