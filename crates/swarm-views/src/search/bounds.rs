//! How much of what agents write the index takes in (swarm.yaml `search:`,
//! docs/search.md, "Bounds"). An agent writes its own queue folders, so
//! without bounds ~150 files of 1 MB of distinct words made a refresh hold
//! gigabytes and write an index several times their size (issue 43.14).
//!
//! The bounds, each in bytes of message text (header values and body, what
//! the words are read from) but the last:
//!
//! - of one message, only the first `max_message_bytes` are indexed (the
//!   message is counted `cut`);
//! - one refresh indexes at most `max_pass_bytes` from each worktree's
//!   folders and `max_pass_total_bytes` in all: what a refresh holds in
//!   memory is bounded by these (a message's text is read whole, up to
//!   `limits.max_file_bytes`, before it is cut). The rest waits for the
//!   next refresh (`deferred`), which the daemon runs a second later;
//! - a worktree's folders feed at most `max_role_bytes` into the index over
//!   its life, and nothing is added once the index's files take
//!   `max_index_bytes` on disk: what is over is not indexed (`unindexed`)
//!   until the bound is raised and the index rebuilt (`swarm search
//!   --reindex`).
//!
//! A merge of segments (index.rs) loads the two it merges, so its memory
//! grows with the index, which `max_role_bytes` and `max_index_bytes` cap.
//!
//! What was left out is counted per folder in the manifest, and every
//! answer says so (`incomplete`), naming the folders: a person finds those
//! messages with `grep -rl WORD <folder>`.

use crate::text;
use serde::{Deserialize, Serialize};

// The bounds are swarm.yaml's (`search:`), so they are typed where the
// config is read.
pub use crate::protocol::search_bounds::Bounds;

/// What a segment of `postings` postings, `terms` terms and `docs` docs
/// takes on disk at most (segment.rs: 8 bytes a posting, 24 a term and 16
/// a block of one, 20 of meta and a `.docs` line a doc).
pub fn disk_estimate(postings: u64, terms: u64, docs: u64) -> u64 {
    postings * 8 + terms * 40 + docs * 400
}

/// What the bounds left out of the index, as its manifest keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incomplete {
    /// Messages in these folders (relative to the project root) that are
    /// not in the index: over a bound, or waiting for the next refresh.
    pub folders: Vec<(String, u64)>,
    /// Messages not in the index, summed.
    pub unindexed: u64,
    /// Messages indexed only in their first `max_message_bytes`.
    pub cut: u64,
    pub max_message_bytes: u64,
}

impl Incomplete {
    /// The note an answer's text ends with.
    pub fn note(&self) -> String {
        let mut s = String::from(
            "results may be incomplete (the search index's bounds, swarm.yaml `search:`):\n",
        );
        if self.unindexed > 0 {
            s.push_str(&format!(
                "  {} message(s) not indexed; find them with `grep -rl WORD <folder>` in:\n",
                self.unindexed
            ));
            for (f, n) in &self.folders {
                s.push_str(&format!("    {} ({n})\n", text::escape(f)));
            }
        }
        if self.cut > 0 {
            s.push_str(&format!(
                "  {} message(s) indexed only in their first {} bytes\n",
                self.cut, self.max_message_bytes
            ));
        }
        s
    }
}
