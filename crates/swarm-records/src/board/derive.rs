//! The board is a function of the handoff files: one original at a time,
//! in time order, a card born by its birth note and moved by the delivered
//! `git_handoff`s naming it. The invariant: the same files give the same
//! board, whoever derives it and however often (only `audit_count`, not
//! derived, is carried over from the board before).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::protocol::grammar::MessageType;
use crate::protocol::header::{names, Message};
use crate::protocol::trail::{Original, Place, Trail};
use crate::protocol::{clock, grammar};

use super::routes::Routes;
use super::{cards_named, Board, Card, CARD_TYPE, DONE, NEW, NON_FORWARDING};

/// The board the handoffs say, carrying `audit_count` over from `prev`.
pub fn derive(trail: &Trail, routes: &Routes, prev: &Board) -> Board {
    derive_marked(trail, routes, prev).0
}

/// [`derive`], and the latest delivered original it folded in (the
/// cache's mark, see [`sync_after`]).
pub(super) fn derive_marked(trail: &Trail, routes: &Routes, prev: &Board) -> (Board, Option<Mark>) {
    let mut originals: Vec<&Original> = trail
        .originals
        .iter()
        .filter(|o| o.place != Place::Failed)
        .collect();
    originals.sort_by(|a, b| (a.when(), a.id()).cmp(&(b.when(), b.id())));
    let mut d = Deriving::new(routes, Vec::new());
    let mut mark = None;
    for o in originals {
        if o.place == Place::Sent && o.msg.get(names::TASK).is_some() {
            if let Some(w) = o.when() {
                mark = Some(Mark(clock::iso(w), o.id().to_string()));
            }
        }
        d.apply(o.place, o.when(), &o.msg);
    }
    (d.board(prev), mark)
}

/// When `m` was sent, as [`Original::when`] says it for a file holding it
/// (for a message not read back from a trail).
pub fn when_of(m: &Message) -> Option<clock::Instant> {
    crate::protocol::trail::Stamp::of(m.get(names::CREATED_AT))
        .at()
        .or_else(|| grammar::id_time(m.id().unwrap_or_default()))
}

/// The time and id of an original, in the order [`derive`] folds them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(super) struct Mark(pub(super) String, pub(super) String);

/// The fold [`derive`] is: one original at a time, in time order.
pub(super) struct Deriving<'a> {
    pub(super) routes: &'a Routes,
    pub(super) cards: Vec<Card>,
    pub(super) index: BTreeMap<String, usize>,
}

impl<'a> Deriving<'a> {
    pub(super) fn new(routes: &'a Routes, cards: Vec<Card>) -> Self {
        let index = cards
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        Deriving {
            routes,
            cards,
            index,
        }
    }

    /// The board, with `audit_count` (the one column not derived) from `prev`.
    pub(super) fn board(mut self, prev: &Board) -> Board {
        for c in &mut self.cards {
            c.audit_count = prev.find(&c.name).map_or(0, |p| p.audit_count);
        }
        Board { cards: self.cards }
    }

    pub(super) fn apply(&mut self, place: Place, at: Option<clock::Instant>, m: &Message) {
        let Some(task) = m.get(names::TASK) else {
            return;
        };
        let when = at.map(clock::iso).unwrap_or_default();
        if let Some(kind) = birth(m) {
            if let Some(&i) = self.index.get(task) {
                // Folding (sync_after): the birth of a card still `new` in
                // the cache is delivered now, as a full derivation would
                // see it (the same note: the same time).
                let card = &mut self.cards[i];
                if place == Place::Sent && card.lane == NEW && card.created == when {
                    card.lane = m.to().unwrap_or(NEW).to_string();
                }
                return;
            }
            let lane = match place {
                Place::Sent => m.to().unwrap_or(NEW).to_string(),
                _ => NEW.to_string(),
            };
            self.index.insert(task.to_string(), self.cards.len());
            self.cards.push(Card {
                name: task.to_string(),
                kind: kind.to_string(),
                lane,
                created: when.clone(),
                updated: when,
                task_id: task.to_string(),
                audit_count: 0,
            });
            return;
        }
        if place != Place::Sent
            || m.kind() != Some(MessageType::GitHandoff)
            || m.get(NON_FORWARDING) == Some("true")
        {
            return;
        }
        // One result may carry several cards (`batch_task_ids`): each
        // moves by the same rule.
        for name in cards_named(m) {
            self.move_card(&name, m, when.clone());
        }
    }

    /// Moves card `name` as the delivered `git_handoff` `m` says.
    pub(super) fn move_card(&mut self, name: &str, m: &Message, when: String) {
        let routes = self.routes;
        let Some(card) = self.index.get(name).map(|i| &mut self.cards[*i]) else {
            return;
        };
        let Some(route) = routes.route(&card.kind) else {
            return;
        };
        let from = m.sender().unwrap_or_default();
        // Only the role whose lane holds the card moves it: any other role
        // naming it (the route's last role sending its terminal handoff
        // early) would move a card someone else is working to Done, and
        // that role's own handoff would then be refused.
        if card.lane == DONE || card.lane == NEW || card.lane != from {
            return;
        }
        let to = grammar::role_list(m.to());
        let lane = if routes.is_terminal(route, from, &to) {
            Some(DONE.to_string())
        } else {
            let next = route
                .iter()
                .position(|r| r == from)
                .and_then(|i| route.get(i + 1));
            match next.filter(|n| to.contains(&n.as_str())) {
                Some(n) => Some(n.clone()),
                None => {
                    let on: Vec<&&str> = to
                        .iter()
                        .filter(|r| route.iter().any(|x| x == **r))
                        .collect();
                    (on.len() == 1).then(|| on[0].to_string())
                }
            }
        };
        if let Some(lane) = lane {
            card.lane = lane;
            card.updated = when;
        }
    }
}

/// The card type of a card's birth note, if `m` is one.
pub(super) fn birth(m: &Message) -> Option<&str> {
    (m.sender() == Some(grammar::DAEMON) && m.kind() == Some(MessageType::Note))
        .then(|| m.get(CARD_TYPE))
        .flatten()
}
