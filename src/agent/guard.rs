//! What keeps a role from finishing its current item or taking new work,
//! as today's SwarmForge's helpers do (docs/swarmforge-compat.md §3, §4):
//!
//! - **`OPEN_CARDS`** (exit 3): the current work carries cards (a forward
//!   `git_handoff`, a card's first note) that are still in this role's
//!   lane and that no `git_handoff` of this role waiting in its outbox or
//!   held for approval names: finishing now would strand them there.
//!   Only in a project with cards (the board decides the lane), and only
//!   for today's contract (`done_with_current.sh`, `done-current
//!   --mail-waiting`): `done-current` alone keeps the older one, where an
//!   item is finished before its handoff is sent.
//! - **`AUDIT_PENDING`** (exit 2): the audit gate holds back a git handoff
//!   of this role (an open challenge in `audit_pending/`): the handoff is
//!   not queued, so the work it carries has not left. Upstream keeps the
//!   item in process until the unchanged second call, which queues the
//!   handoff and then completes the item itself; here finishing it by hand
//!   is refused, and so is taking a new item while nothing is in process.
//!
//! `done-current --drop` finishes anyway: the cards stay in this lane and
//! the role's challenges are removed, each said as `DROPPED: …`.
//!
//! Invariant: a check only reads; only a `--drop` removes (challenges), and
//! it does so before the completion it allows.

use std::path::PathBuf;

use crate::agent::place::Resolved;
use crate::agent::queue;
use crate::board;
use crate::error::{Error, Result, Token};
use crate::protocol::audit_pending;
use crate::protocol::grammar::MessageType;
use crate::protocol::store;

/// The open challenge of `role` in this worktree, if any (its file).
fn challenge(place: &Resolved, role: &str) -> Option<PathBuf> {
    audit_pending::open_for_file(&place.wt, role)
}

fn audit_pending_refusal(file: PathBuf, taking: bool) -> Error {
    let what = if taking {
        "a new item is not taken"
    } else {
        "the current item is not finished"
    };
    Error::refused(
        Token::AuditPending,
        format!(
            "your git handoff was held back by the audit gate and is not queued, so {what}: run the same swarm_handoff.sh command again to queue it (it then finishes the current item), or run done_with_current.sh --drop to drop it."
        ),
        vec![file],
    )
}

/// Before `done-current` of `role`: refuses while a git handoff of the role
/// is held by the audit gate or cards of its current work have no outgoing
/// handoff (`cards`: today's contract); with `drop`, removes the role's
/// challenges and returns what was dropped (`DROPPED:` lines), so the
/// completion goes ahead.
pub fn before_done(place: &Resolved, role: &str, drop: bool, cards: bool) -> Result<Vec<String>> {
    let mut dropped = Vec::new();
    if let Some(file) = challenge(place, role) {
        if !drop {
            return Err(audit_pending_refusal(file, false));
        }
        audit_pending::Locked::open(&place.wt)?.clear(role)?;
        dropped.push("git handoff held back by the audit gate (not queued)".to_string());
    }
    let open = if cards {
        open_cards(place, role)?
    } else {
        Vec::new()
    };
    if open.is_empty() {
        return Ok(dropped);
    }
    if drop {
        dropped.extend(open);
        return Ok(dropped);
    }
    let mut detail = String::from("current work still has cards without an outgoing git_handoff:");
    for c in &open {
        detail.push_str(&format!("\n- {c}"));
    }
    detail.push_str(
        "\nSend a git_handoff for each card (task: <card>), \
         or run done_with_current.sh --drop to finish and leave them in this lane.",
    );
    Err(Error::refused(Token::OpenCards, detail, vec![]))
}

/// Before `ready-next` of `role` takes a new item: refused while nothing is
/// in process and a git handoff of the role is held by the audit gate (the
/// item it finished was finished without it).
pub fn before_ready(place: &Resolved, role: &str) -> Result<()> {
    let Some(file) = challenge(place, role) else {
        return Ok(());
    };
    let max = store::copy_limit(place.config.limits.max_file_bytes);
    if queue::current_items(&place.wt, max).is_empty() {
        return Err(audit_pending_refusal(file, true));
    }
    Ok(())
}

/// The cards of `role`'s current work with no outgoing handoff yet, still
/// in its lane (upstream's `open-card-ids`); none in a project without cards.
pub fn open_cards(place: &Resolved, role: &str) -> Result<Vec<String>> {
    let Some(project) = &place.project else {
        return Ok(Vec::new());
    };
    match board::Routes::load(project) {
        Ok(r) if !r.is_empty() => {}
        _ => return Ok(Vec::new()),
    }
    let max = store::copy_limit(place.config.limits.max_file_bytes);
    let mut ids: Vec<String> = Vec::new();
    for item in queue::current_items(&place.wt, max) {
        if board::carries_card(&item.msg) {
            push_new(&mut ids, board::cards_named(&item.msg));
        }
    }
    if ids.is_empty() {
        return Ok(ids);
    }
    let mut outbound = Vec::new();
    for dir in [place.wt.outbox(), place.wt.held()] {
        for e in store::scan(&dir).handoffs() {
            let Some(m) = e.message(max) else { continue };
            if m.kind() == Some(MessageType::GitHandoff) && m.sender() == Some(role) {
                push_new(&mut outbound, board::cards_named(&m));
            }
        }
    }
    ids.retain(|c| !outbound.contains(c));
    if ids.is_empty() {
        return Ok(ids);
    }
    let Some(view) = board::view(project)? else {
        return Ok(Vec::new());
    };
    ids.retain(|c| view.cards.iter().any(|x| x.name == *c && x.lane == role));
    Ok(ids)
}

fn push_new(into: &mut Vec<String>, from: Vec<String>) {
    for c in from {
        if !into.contains(&c) {
            into.push(c);
        }
    }
}
