//! `git_handoff` commit validation through git (docs/protocol.md §7.1), with
//! the zero-match case reported as `matched 0.` (docs/protocol.md §9).

use std::path::Path;

use crate::protocol::commit_id::{CommitId, HANDOFF_LEN};
use crate::sys::git;

/// Why a draft's `commit` is not one a `git_handoff` may carry, in
/// SwarmForge's words (docs/protocol.md §7.1); the repair is in the text:
/// name exactly one commit of this repository.
#[derive(Debug, thiserror::Error)]
pub enum CommitRefused {
    /// git itself could not be asked (its own error says why).
    #[error("{0}")]
    Git(#[from] git::GitError),
    #[error(
        "Header 'commit' must resolve to exactly one Git object; '{commit}' matched {matched}."
    )]
    NotOne { commit: CommitId, matched: usize },
    #[error("Header 'commit' must resolve to a commit; '{commit}' resolves to '{what}'.")]
    NotACommit { commit: CommitId, what: String },
}

/// git's stdout whatever its exit status (`rev-parse --disambiguate` lists
/// what matched, and nothing when nothing did).
fn git(dir: &Path, args: &[&str]) -> Result<String, CommitRefused> {
    Ok(git::call(dir, args)?.stdout)
}

/// Resolves a 10-hex abbreviation to the canonical lower-case 10-hex form, or
/// returns the SwarmForge error text. What git prints is a [`CommitId`]
/// again: anything else is reported as the object `commit` resolves to.
pub fn canonical_commit(dir: &Path, commit: &CommitId) -> Result<CommitId, CommitRefused> {
    let listed = git(dir, &["rev-parse", &format!("--disambiguate={commit}")])?;
    let objects: Vec<&str> = listed.lines().filter(|l| !l.is_empty()).collect();
    if objects.len() != 1 {
        return Err(CommitRefused::NotOne {
            commit: commit.clone(),
            matched: objects.len(),
        });
    }
    let object = objects[0];
    let kind = git(dir, &["cat-file", "-t", object])?.trim().to_string();
    if kind != "commit" {
        return Err(CommitRefused::NotACommit {
            commit: commit.clone(),
            what: kind,
        });
    }
    let short = git(dir, &["rev-parse", "--short=10", object])?
        .trim()
        .to_lowercase();
    match CommitId::parse(&short) {
        Ok(id) if id.len() >= HANDOFF_LEN => Ok(id),
        _ => Err(CommitRefused::NotACommit {
            commit: commit.clone(),
            what: short,
        }),
    }
}

/// The 10-character abbreviation of HEAD in `dir`, as SwarmForge's
/// `swarm_handoff.sh` reads it today to fill a draft's `commit`
/// (docs/swarmforge-compat.md §2); None when there is no readable HEAD.
pub fn head_commit(dir: &Path) -> Option<String> {
    let r = git::call(dir, &["rev-parse", "--short=10", "HEAD"]).ok()?;
    let head = r.stdout.trim().to_string();
    (r.ok && !head.is_empty()).then_some(head)
}
