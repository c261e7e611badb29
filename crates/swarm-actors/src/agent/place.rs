//! Where an agent's queue call works (the inbox, its receive mode, the
//! loaded swarm) and what the forum adds to the items it hands out:
//! shared by `ready-next`, `done-current` and `swarm mcp`.
//!
//! Invariant: one call loads the swarm once (issue 44.3): roles.tsv and
//! swarm.yaml are read by [`resolve`] / [`resolve_as`] into the
//! [`Swarm`] the call carries, and everything the call does after (the
//! guards, the board, the card routes, the printout, the forum's context)
//! asks that swarm. `swarm mcp` resolves again per tool call, so a
//! long-running server sees a changed lineup.

use crate::protocol::header::names;
use std::path::Path;

use crate::agent::printout::{Contribution, ForumView, ItemForum, Turn};
use crate::agent::queue::{self, Inbox, Item, Ready};
use crate::board::Routes;
use crate::error::{Error, Result};
use crate::forum::discussion;
use crate::forum::moderator;
use crate::forum::session;
use crate::protocol::config::Config;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::{ReceiveMode, Roles};
use crate::protocol::root;
use crate::protocol::swarm::Swarm;

/// The config of a call outside any project (a forced mode in a worktree
/// with no project found): the defaults.
static NO_PROJECT: std::sync::LazyLock<Config> = std::sync::LazyLock::new(Config::default);

/// Where this call works: the inbox, its receive mode and (when the
/// project can be found) the loaded swarm, its swarm.yaml already read.
pub struct Resolved {
    pub wt: Worktree,
    pub mode: ReceiveMode,
    swarm: Option<Swarm>,
    /// The project's card routes, derived once per call ([`Resolved::routes`]).
    routes: std::sync::OnceLock<Option<Routes>>,
}

impl Resolved {
    fn new(wt: Worktree, mode: ReceiveMode, swarm: Option<Swarm>) -> Resolved {
        Resolved {
            wt,
            mode,
            swarm,
            routes: Default::default(),
        }
    }

    /// The loaded swarm; None outside a project.
    pub fn swarm(&self) -> Option<&Swarm> {
        self.swarm.as_ref()
    }

    /// The project, when it can be found.
    pub fn project(&self) -> Option<&Project> {
        self.swarm().map(|s| &s.project)
    }

    /// swarm.yaml as [`resolve`] read it (its defaults outside a project).
    pub fn config(&self) -> &Config {
        // `resolve` read it before making the swarm, so this is never a read.
        self.swarm()
            .and_then(|s| s.config().ok())
            .unwrap_or(&NO_PROJECT)
    }

    /// The card routes of the project, when it declares cards: derived once
    /// per call from the loaded swarm (the guards and the printout both
    /// ask); a conf that cannot be read shows no cards (`swarm status` and
    /// `swarm doctor` say why).
    pub fn routes(&self) -> Option<&Routes> {
        self.routes
            .get_or_init(|| {
                Routes::load_in(self.swarm()?)
                    .ok()
                    .filter(|r| !r.is_empty())
            })
            .as_ref()
    }

    /// The project's roles.tsv, from the loaded swarm (the role's row, the
    /// card routes, the forum's context and the task documents all ask);
    /// None without a project or a readable roles.tsv.
    pub fn roles(&self) -> Option<&Roles> {
        self.swarm()?.roles().ok()
    }

    /// Whether printouts keep SwarmForge's "Re-read your role and
    /// constitution." line: yes in a SwarmForge project (it has the
    /// constitution, or its roles come from roles.tsv / swarmforge.conf);
    /// no for roles declared in `swarm.yaml` without a constitution, which
    /// have nothing of the kind to re-read.
    pub fn keeps_preamble(&self) -> bool {
        self.config().roles.is_empty() || self.project().is_none_or(|p| p.constitution().is_file())
    }

    /// This worktree's inbox, read with the project's limits, asking the
    /// project's daemon for the order of a deep `new/`, recording the
    /// operator's task documents of what it hands out.
    pub fn inbox(&self) -> Inbox<'_> {
        let inbox = Inbox::new(&self.wt, self.config().limits.max_file_bytes);
        match self.project() {
            Some(p) => inbox.with_order(p.order_socket()).with_task_docs(
                crate::agent::task_doc::TaskDocs {
                    project_root: p.root.clone(),
                    role: self
                        .roles()
                        .and_then(|roles| {
                            crate::agent::byline::role_in(p, roles, &self.wt.root).ok()
                        })
                        .flatten(),
                },
            ),
            None => inbox,
        }
    }
}

/// The inbox and receive mode for this call: a forced mode needs only the
/// worktree; otherwise the role's row in roles.tsv decides (docs/protocol.md
/// §7.3).
pub fn resolve(task: bool, batch: bool) -> Result<Resolved> {
    let cwd = root::current_dir()?;
    let forced = match (task, batch) {
        (true, _) => Some(ReceiveMode::Task),
        (_, true) => Some(ReceiveMode::Batch),
        _ => None,
    };
    if let Some(mode) = forced {
        let (wt, project) = root::locate_worktree(&cwd)?;
        let swarm = project.map(Swarm::new);
        if let Some(s) = &swarm {
            s.config()?;
        }
        return Ok(Resolved::new(wt, mode, swarm));
    }
    resolve_as(&cwd, &root::acting_role()?)
}

/// The inbox and receive mode of `role` working in the worktree `cwd` is
/// in (`swarm mcp` acts as a role given on its command line).
pub fn resolve_as(cwd: &Path, role: &str) -> Result<Resolved> {
    let mut at = root::locate(cwd)?;
    let swarm = Swarm::new(at.project.clone());
    let roles = swarm.roles()?;
    let row = roles.find(role).ok_or_else(|| {
        Error::not_found(format!(
            "Unknown role: {role}{}",
            roles.unknown_hint(&at.project.roles_tsv())
        ))
    })?;
    let mode = row.receive_mode().map_err(|m| {
        Error::refused(
            crate::error::Token::InvalidReceiveMode,
            format!("{} for role {role}", crate::text::escape(m)),
            vec![],
        )
    })?;
    crate::agent::send::check_role_worktree(row, &mut at)?;
    swarm.config()?;
    Ok(Resolved::new(at.worktree, mode, Some(swarm)))
}

/// The items a ready step hands out.
pub fn items(r: &Ready) -> Vec<&Item> {
    match r {
        Ready::NoTask | Ready::MailWaiting => Vec::new(),
        Ready::Task { item, .. } => vec![item],
        Ready::Batch { items, .. } => items.iter().collect(),
    }
}

/// Looks up what the forum adds to each item: the latest digest of its
/// session, its discussion's recent turns, a digest request's contributions.
/// Read-only and infallible: whatever cannot be read is left out.
pub fn forum_view(place: &Resolved, r: &Ready, me: Option<&str>) -> ForumView {
    let mut view = ForumView::default();
    let Some(project) = place.project() else {
        return view;
    };
    let items = items(r);
    if items.is_empty() {
        return view;
    }
    let none = Roles::default();
    let roles = place.roles().unwrap_or(&none);
    let max = place.config().limits.max_file_bytes;
    for item in items {
        let f = ItemForum {
            latest_digest: latest_digest(project, item, me, max),
            context: item
                .msg
                .discussion()
                .and_then(|d| context(project, roles, d, max)),
            contributions: (item.msg.kind()
                == Some(crate::protocol::grammar::MessageType::DigestRequest))
            .then(|| contributions(roles, &item.msg.body, max)),
        };
        if f != ItemForum::default() {
            view.items.insert(item.path.clone(), f);
        }
    }
    view
}

/// The newest digest of the item's session, unless the reader wrote it (or
/// it is this very item).
fn latest_digest(
    project: &Project,
    item: &Item,
    me: Option<&str>,
    max: u64,
) -> Option<std::path::PathBuf> {
    let s = item.msg.session()?;
    let p = session::latest_digest(project, s)?;
    let digest = crate::fsx::read_bounded(&p, max)
        .ok()
        .and_then(|b| Message::parse_bytes(&b).ok());
    if let Some(d) = &digest {
        let author = d.sender();
        if author.is_some() && (author == me || author == item.msg.recipient()) {
            return None;
        }
        if d.id().is_some() && d.id() == item.msg.id() {
            return None;
        }
    }
    Some(p)
}

/// A message's original, found in its sender's worktree by id.
fn original(roles: &Roles, id: &str, max: u64) -> Option<Item> {
    let sender = crate::protocol::grammar::id_sender(id)?;
    let role = roles.find(sender)?;
    queue::find_original(&Worktree::new(&role.worktree_path), id, max)
}

/// Longest turn text shown in `CONTEXT:`, in characters.
const MAX_TURN_TEXT: usize = 500;

/// What a turn said, on one line: a note's message, else the body (after a
/// subject when there is one), else the transcript summary.
fn turn_text(m: &Message) -> String {
    let body = m
        .body
        .lines()
        .filter(|l| *l != "Re-read your role and constitution.")
        .collect::<Vec<_>>()
        .join("\n");
    let body = body.trim();
    let text = match (m.get(names::MESSAGE), m.get(names::SUBJECT)) {
        (Some(msg), _) if !msg.trim().is_empty() => msg.to_string(),
        (_, Some(s)) if !s.trim().is_empty() && !body.is_empty() => format!("{s} — {body}"),
        (_, Some(s)) if !s.trim().is_empty() => s.to_string(),
        _ if !body.is_empty() => body.to_string(),
        _ => crate::protocol::line::summary(m),
    };
    let mut cut: String = text.chars().take(MAX_TURN_TEXT).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// The last `max(2N, 4)` entries of discussion `id`'s turn log (N speakers).
fn context(project: &Project, roles: &Roles, id: &str, max: u64) -> Option<Vec<Turn>> {
    let d = discussion::load(project, id).ok()?;
    let log = discussion::log(project, id).ok()?;
    let window = (2 * d.order.len()).max(4);
    let skip = log.len().saturating_sub(window);
    Some(
        log[skip..]
            .iter()
            .map(|e| Turn {
                speaker: e.role.clone(),
                id: if e.kind == "turn" {
                    e.id.clone()
                } else {
                    String::new()
                },
                text: (e.kind == "turn").then(|| match original(roles, &e.id, max) {
                    Some(o) => turn_text(&o.msg),
                    None => format!("(message {} not found)", e.id),
                }),
            })
            .collect(),
    )
}

/// The contributions a digest request lists, in its order.
fn contributions(roles: &Roles, body: &str, max: u64) -> Vec<Contribution> {
    moderator::requested_ids(body)
        .map(|id| match original(roles, id, max) {
            Some(o) => Contribution {
                id: id.to_string(),
                line: crate::protocol::line::forum_line(&o.msg)
                    .trim_end_matches('\n')
                    .to_string(),
                path: Some(o.path),
            },
            None => Contribution {
                id: id.to_string(),
                path: None,
                line: format!("{} (not found)", crate::text::escape(id)),
            },
        })
        .collect()
}
