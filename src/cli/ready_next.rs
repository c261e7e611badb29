//! `ready-next` (SwarmForge's `ready_for_next.sh` and its `_task`/`_batch` forms).

use clap::Parser;

use crate::agent::printout::{self, Contribution, ForumView, ItemForum, Resume, Turn};
use crate::agent::queue::{self, Inbox, Item, Ready};
use crate::error::{exit, Error, Result};
use crate::forum::discussion;
use crate::forum::moderator;
use crate::forum::session;
use crate::protocol::config::Config;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::{ReceiveMode, Roles};
use crate::protocol::root;

#[derive(Parser, Debug)]
#[command(
    name = "ready-next",
    version,
    about = "Accept the next handoff (or resume the one in process)"
)]
pub struct Args {
    /// Force task mode (SwarmForge's ready_for_next_task.sh)
    #[arg(long, conflicts_with = "batch")]
    pub task: bool,
    /// Force batch mode (SwarmForge's ready_for_next_batch.sh)
    #[arg(long)]
    pub batch: bool,
    /// Print one JSON object instead of the text tokens
    #[arg(long)]
    pub json: bool,
    /// After the ready output, print the last N transcript lines that involve
    /// this role (RESUME_CONTEXT:) and the current session's latest digest
    /// (what the watchdog gives a restarted agent)
    #[arg(long, value_name = "N")]
    pub resume_context: Option<usize>,
}

/// Where this call works: the inbox, its receive mode, the config and (when
/// it can be found) the project.
pub struct Resolved {
    pub wt: Worktree,
    pub mode: ReceiveMode,
    pub config: Config,
    pub project: Option<Project>,
}

/// The inbox and receive mode for this call: a forced mode needs only the
/// worktree; otherwise the role's row in roles.tsv decides (§7.1).
pub fn resolve(task: bool, batch: bool) -> Result<Resolved> {
    let cwd = root::current_dir()?;
    let forced = match (task, batch) {
        (true, _) => Some(ReceiveMode::Task),
        (_, true) => Some(ReceiveMode::Batch),
        _ => None,
    };
    if let Some(mode) = forced {
        let wt = root::locate_worktree(&cwd)?;
        let project = root::project_of(&wt);
        let config = match &project {
            Some(p) => Config::load(&p.config_file())?,
            None => Config::default(),
        };
        return Ok(Resolved {
            wt,
            mode,
            config,
            project,
        });
    }
    let role = root::acting_role()?;
    let at = root::locate(&cwd)?;
    let roles = Roles::load(&at.project.roles_tsv())?;
    let row = roles.find(&role).ok_or_else(|| {
        Error::env(format!(
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
    crate::agent::send::check_role_worktree(row, &at)?;
    let config = Config::load(&at.project.config_file())?;
    Ok(Resolved {
        wt: at.worktree,
        mode,
        config,
        project: Some(at.project),
    })
}

pub fn run() -> i32 {
    let args: Args = match super::parse_args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let mut place = None;
    let result = resolve(args.task, args.batch).and_then(|r| {
        crate::fsx::set_fsync(r.config.daemon.fsync);
        let ready = Inbox {
            wt: &r.wt,
            max_bytes: r.config.limits.max_file_bytes,
        }
        .ready(r.mode);
        place = Some(r);
        ready
    });
    let me = viewer_role();
    match result {
        Ok(r) => {
            let view = place
                .as_ref()
                .map(|p| forum_view(p, &r, me.as_deref()))
                .unwrap_or_default();
            let viewer = printout::Viewer {
                role: me.as_deref(),
                forum: Some(&view),
            };
            let resume = args
                .resume_context
                .map(|n| resume(place.as_ref(), me.as_deref(), n));
            if args.json {
                let mut v = printout::ready_json(&r, viewer);
                if let Some(res) = &resume {
                    v["resume_context"] = printout::resume_json(res);
                }
                super::emit_json(v);
            } else {
                let mut text = printout::ready_text(&r, viewer);
                if let Some(res) = &resume {
                    text.push_str(&printout::resume_text(res));
                }
                super::out(&text);
            }
            exit::OK
        }
        Err(e) => super::report(&e, args.json),
    }
}

/// The reader for `MENTIONED:` / `CC:`: `SWARMFORGE_ROLE` when set (the
/// copy's `recipient` counts too).
pub fn viewer_role() -> Option<String> {
    std::env::var("SWARMFORGE_ROLE")
        .ok()
        .filter(|r| !r.is_empty())
}

/// `--resume-context N`: the role's last N transcript lines and the current
/// session's latest digest. Never fails: the item is already handed out, so
/// a problem only shortens what is shown (and is said on stderr).
fn resume(place: Option<&Resolved>, me: Option<&str>, n: usize) -> Resume {
    let Some(project) = place.and_then(|p| p.project.as_ref()) else {
        return Resume::default();
    };
    let lines = match crate::views::transcript::recent_lines(project, me, n) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ready-next: no resume context: {e}");
            Vec::new()
        }
    };
    let latest_digest = session::current(project)
        .ok()
        .flatten()
        .and_then(|s| session::latest_digest(project, &s.id));
    Resume {
        lines,
        latest_digest,
    }
}

/// The items a ready step hands out.
pub fn items(r: &Ready) -> Vec<&Item> {
    match r {
        Ready::NoTask => Vec::new(),
        Ready::Task { item, .. } => vec![item],
        Ready::Batch { items, .. } => items.iter().collect(),
    }
}

/// Looks up what the forum adds to each item: the latest digest of its
/// session, its discussion's recent turns, a digest request's contributions.
/// Read-only and infallible: whatever cannot be read is left out.
pub fn forum_view(place: &Resolved, r: &Ready, me: Option<&str>) -> ForumView {
    let mut view = ForumView::default();
    let Some(project) = &place.project else {
        return view;
    };
    let items = items(r);
    if items.is_empty() {
        return view;
    }
    let roles = Roles::load(&project.roles_tsv()).unwrap_or_default();
    let max = place.config.limits.max_file_bytes;
    for item in items {
        let f = ItemForum {
            latest_digest: latest_digest(project, item, me, max),
            context: item
                .header("discussion")
                .and_then(|d| context(project, &roles, d, max)),
            contributions: (item.msg.kind()
                == Some(crate::protocol::grammar::MessageType::DigestRequest))
            .then(|| contributions(&roles, &item.msg.body, max)),
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
    let s = item.header("session")?;
    let p = session::latest_digest(project, s)?;
    let digest = crate::fsx::read_bounded(&p, max)
        .ok()
        .and_then(|b| Message::parse_bytes(&b).ok());
    if let Some(d) = &digest {
        let author = d.get("from");
        if author.is_some() && (author == me || author == item.header("recipient")) {
            return None;
        }
        if d.get("id").is_some() && d.get("id") == item.header("id") {
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
    let text = match (m.get("message"), m.get("subject")) {
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
