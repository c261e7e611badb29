//! The board as one `git_handoff` send sees it: the routes, handoffd's
//! cache and (only when a card is missing from the cache) the board
//! derived from the files, each read at most once however many cards the
//! send names (its `task` and every card of `batch_task_ids`).
//!
//! Invariant: each card is answered exactly as a lookup of that card alone
//! would answer it: from handoffd's cache when the cache (made for these
//! routes) holds it, else from the derived board. The roles and config are
//! the sender's, already read; nothing here reads roles.tsv or swarm.yaml.

use std::cell::OnceCell;

use super::routes::Routes;
use super::{derive, fingerprint, read_cache, Board, DONE, FORWARD, TERMINAL};
use crate::protocol::config::Config;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::protocol::trail::{Scope, Trail};

/// The routes and the board of one send, when the project declares cards
/// (without cards a send goes on as in a project without a board).
pub struct SendBoard<'a> {
    project: &'a Project,
    roles: &'a Roles,
    config: &'a Config,
    routes: Routes,
    /// handoffd's cache, when it was made for these routes.
    cached: Option<Board>,
    /// The board derived from the files: derived once, when first needed;
    /// `None` when the history does not read.
    derived: OnceCell<Option<Board>>,
}

impl<'a> SendBoard<'a> {
    /// `None` when the project declares no card, or its routes do not read
    /// (a send then goes on as in a project without cards).
    pub fn load(project: &'a Project, roles: &'a Roles, config: &'a Config) -> Option<Self> {
        let routes = Routes::from_parts(project, roles, config)
            .ok()
            .filter(|r| !r.is_empty())?;
        let cached = read_cache(project)
            .filter(|c| c.routes == fingerprint(&routes))
            .map(|c| Board { cards: c.cards });
        Some(SendBoard {
            project,
            roles,
            config,
            routes,
            cached,
            derived: OnceCell::new(),
        })
    }

    /// The board `task` is looked up in: handoffd's cache when it holds the
    /// card (a card's type never changes once born and `done` is final, so
    /// a card found there is answered without reading the history), else
    /// the board derived from the files (no card, or one born since the last
    /// pass). `None` when the history does not read.
    fn board_for(&self, task: &str) -> Option<&Board> {
        if let Some(b) = self.cached.as_ref().filter(|b| b.find(task).is_some()) {
            return Some(b);
        }
        self.derived
            .get_or_init(|| {
                let trail =
                    Trail::load_with(self.project, self.roles, self.config, &Scope::originals())
                        .ok()?;
                Some(derive(&trail, &self.routes, &Board::default()))
            })
            .as_ref()
    }

    /// What a `git_handoff` of `sender` naming `task` is stamped with when
    /// the task is a card: its `card_type`, and its `delivery_kind`
    /// (upstream's `forward`, or `terminal` for the last role's result to
    /// every role before it), so receivers and batches know the card
    /// without reading the board.
    pub fn stamp(&self, task: &str, sender: &str, to: &[&str]) -> Option<(String, &'static str)> {
        let kind = self.board_for(task)?.find(task)?.kind.clone();
        let terminal = self
            .routes
            .route(&kind)
            .is_some_and(|r| self.routes.is_terminal(r, sender, to));
        Some((kind, if terminal { TERMINAL } else { FORWARD }))
    }

    /// Why a `git_handoff` naming `task` is refused in a project with cards
    /// (upstream's `swarm_handoff.bb`, `task-state-errors`): the task is no
    /// card ("Handoff task_id '%s' is not a current board task."), or the
    /// card is done ("Task '%s' is done and cannot accept new handoffs.").
    pub fn refusal(&self, task: &str) -> Option<String> {
        match self.board_for(task)?.find(task) {
            None => Some(not_on_board(task)),
            Some(c) if c.lane == DONE => Some(format!(
                "Task '{task}' is done and cannot accept new handoffs."
            )),
            Some(_) => None,
        }
    }

    /// Why a card a `git_handoff` carries in `batch_task_ids` is refused:
    /// it is no card (upstream's handoffd fails such a handoff, `unknown
    /// board task`; here it is refused before it is queued, in the words of
    /// [`SendBoard::refusal`]).
    pub fn carried_refusal(&self, task: &str) -> Option<String> {
        self.board_for(task)?
            .find(task)
            .is_none()
            .then(|| not_on_board(task))
    }
}

fn not_on_board(task: &str) -> String {
    format!("Handoff task_id '{task}' is not a current board task.")
}
