//! `swarm card new`: a card is born by the note it queues to the first
//! role of its route, through the one enqueue path; its text is kept under
//! `.swarmforge/board/`. The invariant: a birth note is the only message
//! handoffd delivers `from: handoffd` out of a role's outbox, and only
//! addressed to that role itself.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, IoContext, Result, Token};
use crate::fsx;
use crate::protocol::grammar::MessageType;
use crate::protocol::header::{names, Message};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::{clock, grammar, store};

use super::derive::birth;
use super::routes::Routes;
use super::sync::sync_locked;
use super::{dir, lock_file, tasks_file, text_file, tmp_dir, CARD_TYPE, MAX_NAME, MAX_TEXT};

/// What `swarm card new` made.
#[derive(Debug, Serialize)]
pub struct NewCard {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The first role of the route: the card's first lane.
    pub first: String,
    /// The queued note that starts it.
    pub queued: PathBuf,
    pub text_file: PathBuf,
}

/// A card name: `[A-Za-z0-9][A-Za-z0-9._-]*`, at most [`MAX_NAME`], not a
/// reserved lane.
pub fn check_name(name: &str) -> std::result::Result<(), BadCardName> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= MAX_NAME
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c));
    if !ok {
        return Err(BadCardName(name.to_string()));
    }
    Ok(())
}

/// A card name that is not one (the text says what a name may hold).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "card name '{}' is not a name: letters, digits, '.', '_', '-', starting with a letter or digit, at most {MAX_NAME}",
    crate::text::escape(.0)
)]
pub struct BadCardName(pub String);

/// Why `swarm card new` is refused to the confined agent of `role`
/// (docs/security.md, "Confinement"): a card's first note comes from
/// handoffd, which an agent's own notes never can, and starting work on
/// the board is a person's act (upstream's New Task button), so it is not
/// one of the requests handoffd carries out for an agent.
pub fn refused_to_confined(project: &Project, role: &str, kind: &str, name: &str) -> Error {
    Error::conflict(format!(
        "role {role} runs confined, and a confined agent cannot start a card: its first note would come from handoffd (which no agent may speak as) and the board ({}) is read-only in the sandbox (docs/security.md \"Confinement\")\n  hint: ask a person to run `swarm card new {} {}` (a clarify to them), or send the work to a role yourself as a note with swarm-handoff",
        dir(project).display(),
        crate::text::escape(kind),
        crate::text::escape(name)
    ))
}

/// Starts a card: its text in `board/<name>.txt`, a note from handoffd to
/// the route's first role (which the daemon delivers like any note), and the
/// board written. Refused (`CARD_EXISTS`) when a card of that name exists.
pub fn new_card(project: &Project, kind: &str, name: &str, text: &str) -> Result<NewCard> {
    check_name(name).map_err(Error::bad_input)?;
    if text.len() > MAX_TEXT {
        return Err(Error::bad_input(format!(
            "the task text is {} bytes; at most {MAX_TEXT}",
            text.len()
        )));
    }
    if text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(Error::bad_input(
            "the task text holds control characters; only newlines and tabs may be in it",
        ));
    }
    let routes = Routes::load(project)?;
    let Some(route) = routes.route(kind) else {
        let known: Vec<&str> = routes.cards.keys().map(String::as_str).collect();
        return Err(Error::not_found(if known.is_empty() {
            format!(
                "no card types are declared: add `card <type> <role>...` lines to {} or `cards: {{<type>: [<role>, ...]}}` to {}",
                project.swarmforge_conf().display(),
                project.config_file().display()
            )
        } else {
            format!(
                "unknown card type '{}'; {} declares: {}",
                crate::text::escape(kind),
                routes.source.display(),
                known.join(", ")
            )
        }));
    };
    let first = route[0].clone();
    let roles = Roles::load(&project.roles_tsv())?;
    let role = roles
        .find(&first)
        .ok_or_else(|| Error::not_found(format!("role '{first}' is not in roles.tsv")))?;
    let wt = Worktree::new(role.worktree_in(&project.root));
    fsx::ensure_dirs(&[dir(project), tmp_dir(project)]).at(dir(project))?;
    let _lock = fsx::lock(&lock_file(project)).at(lock_file(project))?;
    let board = sync_locked(project, &routes)?;
    if let Some(c) = board.find(name) {
        return Err(Error::refused(
            Token::CardExists,
            format!("card '{name}' is on the board already (lane {})", c.lane),
            vec![tasks_file(project)],
        ));
    }
    let text_path = text_file(project, name);
    let mut text = text.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    fsx::replace(&tmp_dir(project), &text_path, text.as_bytes()).at(&text_path)?;
    let queued = queue_birth(project, &wt, kind, name, &first, &text)?;
    sync_locked(project, &routes)?;
    Ok(NewCard {
        name: name.to_string(),
        kind: kind.to_string(),
        first,
        queued,
        text_file: text_path,
    })
}

/// The note that starts a card, published into the first role's outbox
/// (its id from handoffd's own counter: cards start in several worktrees).
pub(super) fn queue_birth(
    project: &Project,
    wt: &Worktree,
    kind: &str,
    name: &str,
    first: &str,
    text: &str,
) -> Result<PathBuf> {
    let message = format!("New card: {name}");
    let said = if text.is_empty() {
        format!("{message}\n")
    } else {
        text.to_string()
    };
    let queued = store::enqueue_from_daemon(project, wt, |id, now| {
        let mut msg = Message::default();
        msg.set(names::ID, id);
        msg.set(names::FROM, grammar::DAEMON);
        msg.set(names::TO, first);
        msg.set(names::PRIORITY, "50");
        msg.set(names::TYPE, MessageType::Note.name());
        msg.set(names::TASK, name);
        msg.set(CARD_TYPE, kind);
        msg.set(names::MESSAGE, &message);
        msg.set(names::CREATED_AT, clock::iso(now));
        msg.body = format!("{}\n\n{said}", crate::protocol::draft::BODY_PREAMBLE);
        msg
    })?;
    Ok(queued.path)
}

/// Whether `msg`, sitting in the outbox of `owner`, is a card's birth note
/// that handoffd may deliver although `from: handoffd` (only `swarm card
/// new` writes it, into the first role's own outbox, addressed to it).
pub fn is_birth_in_own_outbox(msg: &Message, owner: &dyn Fn(&str) -> bool) -> bool {
    birth(msg).is_some()
        && msg.get(names::TASK).is_some()
        && msg.to().is_some_and(|to| !to.contains(',') && owner(to))
}
