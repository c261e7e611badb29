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
//! - **`WAITING_FOR_APPROVAL`** (exit 2): a `git_handoff` of this role has
//!   not left yet, still in its outbox or held for approval in
//!   `pending_approval/`: taking new work now would let the role run ahead
//!   of the result it handed on (upstream's `ready_for_next_guard.bb`,
//!   `active-outbound-git-files`). Only in a project with cards, and only
//!   before a new item is taken: the item in process is always resumed.
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
use crate::protocol::header::Message;
use crate::protocol::layout::Worktree;
use crate::protocol::store;
use crate::protocol::swarm::Swarm;

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

/// Before `ready-next` of `role` takes a new item. Nothing is refused while
/// an item is in process (it is resumed, as upstream resumes it). Else:
/// `AUDIT_PENDING` while the audit gate holds a git handoff of the role
/// (the item it finished was finished without it); and, in a project with
/// cards, `WAITING_FOR_APPROVAL` while a `git_handoff` of the role waits in
/// its outbox or in `pending_approval/` (upstream's wording and exit code;
/// its files are named).
pub fn before_ready(place: &Resolved, role: &str) -> Result<()> {
    let challenged = challenge(place, role);
    let cards = with_cards(place).is_some();
    if challenged.is_none() && !cards {
        return Ok(());
    }
    let max = store::copy_limit(place.config().limits.max_file_bytes);
    if !queue::current_items(&place.wt, max).is_empty() {
        return Ok(());
    }
    if let Some(file) = challenged {
        return Err(audit_pending_refusal(file, true));
    }
    let active: Vec<PathBuf> = outbound(&place.wt, role, max)
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    if active.is_empty() {
        return Ok(());
    }
    Err(Error::refused(
        Token::WaitingForApproval,
        "current git handoff is still active\n(no new item is taken until it has left: \
         handoffd delivers what waits in the outbox at its next pass; a held one \
         waits for a person's swarm approve or swarm deny. Run ready_for_next.sh again then.)",
        active,
    ))
}

/// Whose work a ready step takes, for the guards: `SWARMFORGE_ROLE` when
/// set (`env`), else the one role whose roles.tsv worktree this is, as
/// upstream's `current-role` infers it (a forced `--task` / `--batch` needs
/// no role). None: no role is known, and nothing is checked.
pub fn acting_role(place: &Resolved, env: Option<String>) -> Option<String> {
    env.or_else(|| {
        let project = place.project()?;
        crate::agent::byline::role_in(project, place.roles()?, &place.wt.root)
            .ok()
            .flatten()
    })
}

/// The `git_handoff`s `role` sent that have not left yet, each with its
/// path: waiting in its outbox, or held for approval in its
/// `pending_approval/` (upstream's `active-outbound-git-files`).
fn outbound(wt: &Worktree, role: &str, max: u64) -> Vec<(PathBuf, Message)> {
    let mut found = Vec::new();
    for dir in [wt.outbox(), wt.held()] {
        for e in store::scan(&dir).handoffs() {
            let Some(m) = e.message(max) else { continue };
            if m.kind() == Some(MessageType::GitHandoff) && m.sender() == Some(role) {
                found.push((e.path.clone(), m));
            }
        }
    }
    found
}

/// The git handoffs of `role` (working in `wt`) held for approval that keep
/// it from taking new work while nothing is in process: what `swarm status`
/// shows of `WAITING_FOR_APPROVAL`, because a hold lasts until a person
/// acts (an outbox file leaves at handoffd's next pass). The caller asks
/// only in a project with cards.
pub fn held_blocking(wt: &Worktree, role: &str, max_file_bytes: u64) -> Vec<PathBuf> {
    let max = store::copy_limit(max_file_bytes);
    if !queue::current_items(wt, max).is_empty() {
        return Vec::new();
    }
    let held = wt.held();
    outbound(wt, role, max)
        .into_iter()
        .filter(|(p, _)| p.starts_with(&held))
        .map(|(p, _)| p)
        .collect()
}

/// The loaded swarm, when it declares cards (the guards that follow
/// upstream's board act only there).
fn with_cards(place: &Resolved) -> Option<&Swarm> {
    place.routes().and(place.swarm())
}

/// The cards of `role`'s current work with no outgoing handoff yet, still
/// in its lane (upstream's `open-card-ids`); none in a project without cards.
pub fn open_cards(place: &Resolved, role: &str) -> Result<Vec<String>> {
    let Some(swarm) = with_cards(place) else {
        return Ok(Vec::new());
    };
    let max = store::copy_limit(place.config().limits.max_file_bytes);
    let mut ids: Vec<String> = Vec::new();
    for item in queue::current_items(&place.wt, max) {
        if board::carries_card(&item.msg) {
            push_new(&mut ids, board::cards_named(&item.msg));
        }
    }
    if ids.is_empty() {
        return Ok(ids);
    }
    let mut handed = Vec::new();
    for (_, m) in outbound(&place.wt, role, max) {
        push_new(&mut handed, board::cards_named(&m));
    }
    ids.retain(|c| !handed.contains(c));
    if ids.is_empty() {
        return Ok(ids);
    }
    let Some(view) = board::view_in(swarm)? else {
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
