//! Today's SwarmForge's cards and board (docs/swarmforge-compat.md §4): a
//! card is a task of a declared type (`card <type> <role>...`) that moves
//! lane by lane along its route as handoffs carry it, and ends in Done with
//! the last role's terminal handoff.
//!
//! **One truth.** The handoff files are the truth; the board is a function
//! of them. A card is born by the note `swarm card new` queues to the first
//! role of its route (`from: handoffd`, headers `task` and `card_type`; the
//! task text in `.swarmforge/board/<name>.txt`), and moved only by delivered
//! `git_handoff`s naming it in `task` ([`derive`]). `.swarmforge/board/tasks.tsv`
//! is that function written down, in upstream's columns, for the tools that
//! read it: handoffd rewrites it after every pass that delivered something
//! and on its first pass, under the board lock, temp + fsync + rename.
//!
//! **Crash between a delivery and the board write.** The delivery is done
//! (the original is in `sent/`) and tasks.tsv is one step behind. Nothing
//! is lost, because nothing is kept only in tasks.tsv but the audit count:
//! the next pass, or the next daemon's first pass, derives the same board
//! and writes it; writing it twice writes the same bytes. Until then
//! `swarm status` shows the derived board and says the file lags, and
//! `swarm audit --check` says "not OK" for a tasks.tsv that disagrees with
//! the handoffs (a lag, or a hand edit).
//!
//! Lanes: `new` (queued, not delivered yet), a role's name, `done`.
//! Columns: `name lane created updated task_id audit_count` (upstream's
//! `pack_web.bb`); a card's id is its name; `audit_count` is the one column
//! not derived (upstream counts audit challenges there) and is carried over.

//!
//! The parts: deriving the board (`derive`), what a person sees of it
//! (`view`), writing tasks.tsv (`sync`), a card's birth (`new_card`) and
//! the audit count (`audit`); here, the card and board types and the
//! files' names.

mod audit;
pub mod copies;
mod derive;
pub mod lookup;
mod new_card;
pub mod routes;
mod sync;
#[cfg(test)]
mod tests;
mod view;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::grammar::MessageType;
use crate::protocol::header::{names, Message};
use crate::protocol::layout::Project;

pub use audit::{count_audit, count_audit_once};
pub use derive::{derive, when_of};
pub use new_card::{check_name, is_birth_in_own_outbox, new_card, refused_to_confined, NewCard};
pub use routes::Routes;
pub use sync::{sync, sync_after};
pub use view::{text, view, view_in, view_of, view_of_in, View};

use derive::birth;
use sync::{fingerprint, read_cache};

/// The board's headers: a card's type, how a card's `git_handoff` moves
/// it, the header marking a merge-only copy, the cards one `git_handoff`
/// carries besides its `task` (the protocol's `Header` set).
pub use crate::protocol::header::names::{
    BATCH_TASK_IDS, CARD_TYPE, DELIVERY_KIND, NON_FORWARDING,
};
/// The one card-moving delivery to the next role.
pub const FORWARD: &str = "forward";
/// A merge-only copy to an earlier role.
pub const REVERSE: &str = "reverse";
/// The last role's result to every role before it: the card is done.
pub const TERMINAL: &str = "terminal";
/// A card queued but not yet with its first role.
pub const NEW: &str = "new";
/// A card whose last role sent the terminal handoff.
pub const DONE: &str = "done";
/// Longest card name (a file name, and within a note's 80-character message).
pub const MAX_NAME: usize = 64;
/// Largest task text.
pub const MAX_TEXT: usize = 16 * 1024;

/// One card.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Card {
    pub name: String,
    /// The card type (not a tasks.tsv column; empty when read from the file).
    #[serde(rename = "type")]
    pub kind: String,
    pub lane: String,
    pub created: String,
    pub updated: String,
    pub task_id: String,
    pub audit_count: u64,
}

/// Every card, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Board {
    pub cards: Vec<Card>,
}

impl Board {
    /// tasks.tsv: one card a line, tab-separated.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.cards {
            out.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\n",
                c.name, c.lane, c.created, c.updated, c.task_id, c.audit_count
            ));
        }
        out
    }

    /// Reads tasks.tsv leniently (upstream's reader: blank lines skipped, an
    /// empty task_id is the name).
    pub fn parse(text: &str) -> Board {
        let cards = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                let col = |i: usize| f.get(i).copied().unwrap_or("").to_string();
                let name = col(0);
                Card {
                    task_id: Some(col(4))
                        .filter(|s| !s.is_empty())
                        .unwrap_or(name.clone()),
                    name,
                    kind: String::new(),
                    lane: col(1),
                    created: col(2),
                    updated: col(3),
                    audit_count: col(5).parse().unwrap_or(0),
                }
            })
            .collect();
        Board { cards }
    }

    pub fn find(&self, name: &str) -> Option<&Card> {
        self.cards.iter().find(|c| c.name == name)
    }
}

/// The cards a message names: its `task`, then each of `batch_task_ids`
/// (a header that is no vector of strings names none, as upstream reads
/// it), each once.
pub fn cards_named(m: &Message) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let batch = m
        .get(BATCH_TASK_IDS)
        .and_then(crate::protocol::edn::parse_strings)
        .unwrap_or_default();
    for t in m
        .get(names::TASK)
        .map(str::to_string)
        .into_iter()
        .chain(batch)
    {
        if !t.is_empty() && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// The `batch_task_ids` value for the cards `ids` (an EDN vector).
pub fn batch_task_ids(ids: &[String]) -> String {
    crate::protocol::edn::render_strings(ids)
}

/// What a batch role's items are grouped by besides their priority
/// (upstream's `ready_for_next_batch.bb`, `batch-key`): the card type
/// (empty for an item of no card) and whether the item goes back
/// (`true`): a merge-only copy (`non-forwarding: true`, priority `00`) or,
/// here, a card's terminal result or any `delivery_kind: reverse`, which
/// upstream marks `non-forwarding: true` and we mark by `delivery_kind`.
pub fn batch_key(m: &Message) -> (String, bool) {
    let back = m.get(NON_FORWARDING) == Some("true")
        || m.priority() == Some("00")
        || matches!(m.get(DELIVERY_KIND), Some(REVERSE | TERMINAL));
    (m.get(CARD_TYPE).unwrap_or_default().to_string(), back)
}

/// Whether `m` carries a card its receiver must hand on (upstream's
/// `card-mail?`): a forward `git_handoff` or a card's first note, not a
/// merge-only copy or a terminal result.
pub fn carries_card(m: &Message) -> bool {
    !batch_key(m).1 && (m.kind() == Some(MessageType::GitHandoff) || birth(m).is_some())
}

/// `.swarmforge/board/` at the project root.
pub fn dir(project: &Project) -> PathBuf {
    project.swarmforge().join("board")
}

/// `.swarmforge/board/tasks.tsv`
pub fn tasks_file(project: &Project) -> PathBuf {
    dir(project).join("tasks.tsv")
}

/// `.swarmforge/board/<name>.txt`: the task text.
pub fn text_file(project: &Project, name: &str) -> PathBuf {
    dir(project).join(format!("{name}.txt"))
}

fn lock_file(project: &Project) -> PathBuf {
    dir(project).join(".lock")
}

fn tmp_dir(project: &Project) -> PathBuf {
    dir(project).join(".tmp")
}

/// The largest tasks.tsv read (one line per card; a board this big is
/// not one a person wrote by hand).
const MAX_BOARD_BYTES: u64 = 16 * 1024 * 1024;

/// tasks.tsv as written; None when there is none.
pub fn read(project: &Project) -> Result<Option<Board>> {
    let path = tasks_file(project);
    match fsx::read_bounded(&path, MAX_BOARD_BYTES) {
        Ok(b) => Ok(Some(Board::parse(&String::from_utf8_lossy(&b)))),
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::bad_file(&path, e)),
    }
}
