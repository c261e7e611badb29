//! A person's inbox (`swarm inbox`): what waits for a role, one item read
//! whole, and an item marked done. Marking done is the completion
//! `done-current` and `swarm answer` make ([`Inbox::complete_copy_locked`],
//! under the inbox's one lock), so receipts and `audit --check` show the
//! person handled it. A clarify is answered with `swarm answer`, never just
//! marked done: its asker waits for the answer (docs/message-model.md).

use crate::protocol::header::names;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::agent::queue::Inbox;
use crate::error::{Error, Result, Token};
use crate::protocol::clock;
use crate::protocol::header::Message;
use crate::protocol::idprefix::{self, Match};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::{Role, Roles};
use crate::protocol::store::batch_dirs;
use crate::protocol::trail::{self, Loaded};
use crate::protocol::{line, people, types};

/// One item waiting for a role.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub id: String,
    /// The role it waits for.
    pub role: String,
    pub from: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// `new` (not taken yet) or `in_process` (taken, not finished).
    pub state: &'static str,
    /// When it reached the inbox (`enqueued_at`), else when it was sent.
    pub since: Option<String>,
    pub age_s: Option<u64>,
    /// One line (escaped): the question, the subject, the note, …
    pub summary: String,
    /// What handles it: `swarm answer …` for a clarify, else `swarm inbox done …`.
    pub handle: String,
    pub path: PathBuf,
}

/// A file in a person's inbox that cannot be read; shown, never blocking.
#[derive(Clone, Debug, Serialize)]
pub struct Unreadable {
    pub role: String,
    pub path: PathBuf,
    pub reason: String,
}

/// Everything waiting for the chosen roles.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Listing {
    pub roles: Vec<String>,
    /// Oldest first (newest last).
    pub items: Vec<Entry>,
    pub unreadable: Vec<Unreadable>,
}

/// The roles `swarm inbox` looks at: `role`, or every human role on this host.
pub fn chosen<'a>(roles: &'a Roles, role: Option<&str>, tsv: &Path) -> Result<Vec<&'a Role>> {
    match role {
        Some(name) => roles.find(name).map(|r| vec![r]).ok_or_else(|| {
            Error::not_found(format!(
                "Unknown role: {}{}",
                crate::text::escape(name),
                roles.unknown_hint(tsv)
            ))
        }),
        None => Ok(roles
            .roles
            .iter()
            .filter(|r| r.is_human() && !r.is_remote())
            .collect()),
    }
}

fn worktree(project: &Project, r: &Role) -> Worktree {
    Worktree::new(r.worktree_in(&project.root))
}

/// The command that handles an item.
pub fn handle_command(kind: &str, id: &str, role: &str) -> String {
    let id = crate::text::escape(id);
    if kind == types::CLARIFY.name {
        format!("swarm answer {id} --choice N | --text T")
    } else {
        format!("swarm inbox done {id} --role {role}")
    }
}

/// Lists what waits for `roles` (items meant for each, in `new/` and in
/// process), oldest first; unreadable files are listed apart.
pub fn list(project: &Project, roles: &[&Role], max_bytes: u64) -> Listing {
    let now = clock::now();
    let mut out = Listing {
        roles: roles.iter().map(|r| r.name.clone()).collect(),
        ..Listing::default()
    };
    let limit = max_bytes.saturating_add(crate::agent::queue::STAMP_HEADROOM);
    for r in roles {
        let wt = worktree(project, r);
        let mut dirs = vec![(wt.inbox_new(), "new"), (wt.in_process(), "in_process")];
        dirs.extend(
            batch_dirs(&wt.in_process())
                .into_iter()
                .map(|d| (d, "in_process")),
        );
        for (dir, state) in dirs {
            let names = match trail::handoff_names(&dir) {
                Ok(n) => n,
                Err(e) => {
                    out.unreadable.push(Unreadable {
                        role: r.name.clone(),
                        path: dir.clone(),
                        reason: e.to_string(),
                    });
                    continue;
                }
            };
            for name in names {
                let path = dir.join(&name);
                let m = match trail::load_message(&path, limit) {
                    Loaded::Ok(m) => m,
                    Loaded::Gone => continue,
                    Loaded::Bad(reason) => {
                        out.unreadable.push(Unreadable {
                            role: r.name.clone(),
                            path,
                            reason: crate::text::escape(&reason),
                        });
                        continue;
                    }
                };
                if !people::meant_for(&m, &r.name) {
                    continue;
                }
                out.items.push(entry(&m, &r.name, state, path, now));
            }
        }
    }
    out.items
        .sort_by(|a, b| (&a.since, &a.id).cmp(&(&b.since, &b.id)));
    out
}

fn entry(
    m: &Message,
    role: &str,
    state: &'static str,
    path: PathBuf,
    now: clock::Instant,
) -> Entry {
    let since = m
        .get(names::ENQUEUED_AT)
        .or(m.get(names::CREATED_AT))
        .and_then(clock::parse);
    let id = m.id().unwrap_or("?").to_string();
    let kind = m.type_name().unwrap_or("?").to_string();
    Entry {
        handle: handle_command(&kind, &id, role),
        id,
        role: role.to_string(),
        from: m.sender().unwrap_or("?").to_string(),
        summary: if kind == types::CLARIFY.name {
            crate::text::escape(m.get(names::QUESTION).unwrap_or(""))
        } else {
            line::summary(m)
        },
        kind,
        state,
        since: since.map(clock::iso),
        age_s: since.map(|t| (now - t).num_seconds().max(0) as u64),
        path,
    }
}

/// The one entry `typed` (an id or a unique prefix of one) names among
/// `listing`'s items; refused (exit 2) when it names none or several.
pub fn pick<'a>(
    project: &Project,
    listing: &'a Listing,
    typed: &str,
    all: &Roles,
    max_bytes: u64,
) -> Result<&'a Entry> {
    match idprefix::resolve(typed, listing.items.iter().map(|e| e.id.as_str())) {
        Match::One(id) => {
            let hits: Vec<&Entry> = listing.items.iter().filter(|e| e.id == id).collect();
            if let [one] = hits.as_slice() {
                return Ok(one);
            }
            Err(Error::refused(
                Token::AmbiguousId,
                format!(
                    "{id} waits for several roles ({}); name one with --role",
                    hits.iter()
                        .map(|e| e.role.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                hits.iter().map(|e| e.path.clone()).collect(),
            ))
        }
        Match::Many(ids) => Err(idprefix::ambiguous(typed, &ids)),
        Match::None => Err(not_waiting(project, listing, typed, all, max_bytes)),
    }
}

/// Why `typed` is not in the listing: waiting for another role (foreign),
/// or waiting for nobody here.
fn not_waiting(
    project: &Project,
    listing: &Listing,
    typed: &str,
    all: &Roles,
    max_bytes: u64,
) -> Error {
    let others: Vec<&Role> = all
        .roles
        .iter()
        .filter(|r| !r.is_remote() && !listing.roles.contains(&r.name))
        .collect();
    let elsewhere = list(project, &others, max_bytes);
    let whose = match idprefix::resolve(typed, elsewhere.items.iter().map(|e| e.id.as_str())) {
        Match::One(id) => elsewhere.items.iter().find(|e| e.id == id),
        _ => None,
    };
    let roles = listing.roles.join(", ");
    match whose {
        Some(e) => Error::refused(
            Token::NotWaitingForRole,
            format!(
                "{} waits for {}, not for {}; nothing changed\n  hint: only the role it waits for handles it (swarm inbox --role {})",
                e.id, e.role, roles, e.role
            ),
            vec![e.path.clone()],
        ),
        None => Error::refused(
            Token::UnknownId,
            format!(
                "no item waiting for {} has an id starting with '{}'; nothing changed\n  hint: `swarm inbox` lists what waits, with ids",
                if roles.is_empty() { "a person" } else { &roles },
                crate::text::escape(typed)
            ),
            vec![],
        ),
    }
}

/// Marks `e` done: `completed_at` (and a missing `dequeued_at`) stamped and
/// moved to `completed/` under the inbox lock, as `done-current` does. A
/// clarify is refused: `swarm answer` handles it.
pub fn done(project: &Project, e: &Entry, role: &Role, max_bytes: u64) -> Result<PathBuf> {
    if e.kind == types::CLARIFY.name {
        return Err(Error::refused(
            Token::ClarifyNeedsAnswer,
            format!(
                "{} is a clarify: its asker waits for the answer; nothing changed\n  hint: {}",
                e.id, e.handle
            ),
            vec![e.path.clone()],
        ));
    }
    let wt = worktree(project, role);
    let inbox = Inbox::new(&wt, max_bytes);
    match inbox.with_lock(|i| i.complete_copy_locked(&e.id))? {
        Some(p) => Ok(p),
        None => Err(Error::refused(
            Token::UnknownId,
            format!(
                "{} is no longer waiting (completed meanwhile); nothing changed",
                e.id
            ),
            vec![],
        )),
    }
}

/// `swarm inbox done` and the cockpit's "mark done": finds `typed` among
/// the items waiting for `role` (default: every human role) and marks it
/// done. Returns the item and its completed path; refusals change nothing.
pub fn mark_done(project: &Project, role: Option<&str>, typed: &str) -> Result<(Entry, PathBuf)> {
    let roles = Roles::load(&project.roles_tsv())?;
    let max_bytes = crate::protocol::config::Config::load(&project.config_file())?
        .limits
        .max_file_bytes;
    let chosen = chosen(&roles, role, &project.roles_tsv())?;
    let listing = list(project, &chosen, max_bytes);
    let e = pick(project, &listing, typed, &roles, max_bytes)?.clone();
    let r = roles
        .find(&e.role)
        .ok_or_else(|| Error::not_found(format!("Unknown role: {}", e.role)))?;
    let path = done(project, &e, r, max_bytes)?;
    Ok((e, path))
}
