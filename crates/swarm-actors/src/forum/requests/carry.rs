//! handoffd's side of a confined agent's requests: take each out of the
//! agent's reach into `.swarmforge/daemon/requests/<role>/` (a
//! `protocol::ledger`), carry it out in the folder's role's name, publish
//! the answer, then retire it. The invariant: exactly once, whatever is
//! killed when; a request taken up again finds the record or the mark its
//! first carrying out left.

use std::io;
use std::path::Path;
use std::time::Duration;

use super::wire::{Answer, Ask, ANSWERED_TOKENS};
use super::{valid_id, MAX_ANSWER, MAX_ERROR, MAX_REFUSAL, MAX_REQUEST, PER_POLL};
use crate::error::{Error, Result};
use crate::forum::{discussion, session};
use crate::fsx;
use crate::protocol::header::Message;
use crate::protocol::launch_files::{agent_requests_dir, taken_requests_dir};
use crate::protocol::layout::Project;
use crate::protocol::ledger::{Ledger, Spec};
use crate::protocol::roles::Roles;
use crate::reservations;
use crate::text::escape;
/// Takes and carries out the waiting requests of every role (at most
/// [`PER_POLL`] each). Returns how many were carried out.
pub fn serve(project: &Project, roles: &Roles) -> usize {
    let mut n = 0;
    for r in roles.roles.iter().filter(|r| !r.is_human()) {
        // Held open once: the agent may swap the folder for a symlink at
        // any time, and nothing after the open goes through the path.
        let Ok(held) = fsx::HeldDir::open(&agent_requests_dir(project, &r.name)) else {
            continue;
        };
        let mut ids = taken(project, &r.name).ids_among(held.names().unwrap_or_default());
        ids.truncate(PER_POLL);
        for id in ids {
            match take(project, &held, &r.name, &id) {
                Ok(true) => {
                    n += 1;
                    if let Err(e) = carry_out(project, roles, &r.name, &id) {
                        eprintln!(
                            "handoffd: request {id} of {}: {e} (taken up again at the next start)",
                            r.name
                        );
                    }
                }
                Ok(false) => {}
                Err(e) => eprintln!("handoffd: cannot take request {id} of {}: {e}", r.name),
            }
        }
    }
    n
}

/// Carries out every request a killed daemon took but did not answer
/// (called at the daemon's start, before new ones are taken).
pub fn resume(project: &Project, roles: &Roles) {
    for r in &roles.roles {
        let taken = taken(project, &r.name);
        for id in taken.pending() {
            if let Err(e) = carry_out(project, roles, &r.name, &id) {
                eprintln!("handoffd: request {id} of {}: {e}", r.name);
            }
        }
        // Marks whose request was answered and removed, the daemon killed
        // before it removed them (the mark goes last).
        let _ = taken.sweep();
    }
}

/// A role's requests not answered yet, for `swarm status`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Waiting {
    pub role: String,
    /// Asked, not taken by handoffd yet.
    pub asked: usize,
    /// Taken, not answered yet (a daemon killed in it takes them up at
    /// its start).
    pub taken: usize,
}

/// Every agent role with requests not answered yet.
pub fn waiting(project: &Project, roles: &Roles) -> Vec<Waiting> {
    roles
        .roles
        .iter()
        .filter(|r| !r.is_human())
        .filter_map(|r| {
            let ledger = taken(project, &r.name);
            let asked = fsx::HeldDir::open(&agent_requests_dir(project, &r.name))
                .and_then(|d| d.names())
                .map(|n| ledger.ids_among(n).len())
                .unwrap_or(0);
            let taken = ledger.pending().len();
            (asked + taken > 0).then(|| Waiting {
                role: r.name.clone(),
                asked,
                taken,
            })
        })
        .collect()
}

/// The files of one request taken out of the agent's reach, as named
/// since confined requests began: the request, then the mark of what its
/// carrying out did (the request goes first, so a request taken up again
/// always finds the mark its first carrying out left:
/// reservations::release_once, board::count_audit_once).
static TAKEN: Spec = Spec {
    request: ".request",
    started: None,
    answer: None,
    companions: &[".before"],
    done: None,
    lock: None,
    valid_id,
};

/// The requests of `role` handoffd took and has not answered yet.
pub(super) fn taken(project: &Project, role: &str) -> Ledger {
    Ledger::new(taken_requests_dir(project, role), &TAKEN)
}

/// Moves the agent's request out of its reach, through the held folder
/// (fsx::HeldDir). False when it is gone or not a regular file (removed).
pub(super) fn take(
    project: &Project,
    held: &fsx::HeldDir,
    role: &str,
    id: &str,
) -> io::Result<bool> {
    let name = format!("{id}.request");
    match held.look(&name)? {
        None => return Ok(false),
        Some(fsx::Entry::File(len)) if len <= MAX_REQUEST => {}
        Some(_) => {
            held.remove(&name)?;
            return Ok(false);
        }
    }
    if taken(project, role).admit(held, &name, id)? {
        return Ok(true);
    }
    // The same id again while the first is being carried out.
    held.remove(&name)?;
    Ok(false)
}

pub(super) fn carry_out(project: &Project, roles: &Roles, role: &str, id: &str) -> io::Result<()> {
    let taken = taken(project, role);
    let mark = taken.dir().join(format!("{id}.before"));
    let answer = match taken.read_request(id, MAX_REQUEST) {
        Ok(Some(b)) => match Message::parse_bytes(&b)
            .map_err(|e| e.to_string())
            .and_then(|m| Ask::of(&m).map_err(|e| e.to_string()))
        {
            Ok(ask) => apply(project, roles, role, id, &ask, &mark),
            Err(why) => Answer::Refused {
                why: format!("malformed request: {why}"),
                token: None,
            },
        },
        Ok(None) => return Ok(()),
        Err(e) => Answer::Refused {
            why: format!("malformed request: {e}"),
            token: None,
        },
    };
    let dir = agent_requests_dir(project, role);
    fsx::ensure_dirs(&[&dir])?;
    let held = fsx::HeldDir::open(&dir).map_err(|e| {
        io::Error::other(format!(
            "{}: not a folder (a symlink is never followed): {e}",
            dir.display()
        ))
    })?;
    let out = format!("{id}.answer");
    held.remove(&out)?;
    held.publish(&out, answer.to_message().render().as_bytes())?;
    taken.retire(id)
}

/// Carries out `ask` for `role` (the folder's role) exactly once.
fn apply(project: &Project, roles: &Roles, role: &str, id: &str, ask: &Ask, mark: &Path) -> Answer {
    let done = |r: Result<Option<String>>| match r {
        Ok(record) => Answer::done(record),
        Err(e) => {
            let why = escape(&e.to_string());
            Answer::Refused {
                why: why.chars().take(MAX_ERROR).collect(),
                token: None,
            }
        }
    };
    let mine = |r: &Option<String>| r.as_deref() == Some(id);
    done(match ask {
        Ask::SessionStart { title } => match session::list(project) {
            Ok(all) => match all.into_iter().find(|s| mine(&s.request)) {
                Some(s) => Ok(Some(s.id)),
                None => session::start_for(project, title.as_deref(), role, Some(id))
                    .map(|s| Some(s.id)),
            },
            Err(e) => Err(e),
        },
        Ask::SessionClose { id: which, reason } => match session::list(project) {
            Ok(all) => match all.into_iter().find(|s| mine(&s.close_request)) {
                Some(s) => Ok(Some(s.id)),
                None => session::close_for(project, which.as_deref(), reason, Some(id))
                    .map(|s| Some(s.id)),
            },
            Err(e) => Err(e),
        },
        Ask::DiscussionOpen {
            id: which,
            order,
            max_turns,
        } => match discussion::load(project, which) {
            Ok(d) if mine(&d.request) => Ok(Some(d.id)),
            _ => discussion::open_for(project, roles, which, order, *max_turns, role, Some(id))
                .map(|d| Some(d.id)),
        },
        Ask::DiscussionClose { id: which, reason } => match discussion::load(project, which) {
            Ok(d) if mine(&d.close_request) => Ok(Some(d.id)),
            _ => discussion::close_for(project, which, reason, Some(id)).map(|d| Some(d.id)),
        },
        Ask::AuditCount { task } => {
            crate::board::count_audit_once(project, task, Some(mark)).map(|()| None)
        }
        Ask::Reserve { .. } | Ask::Release { .. } => {
            return apply_reservation(project, roles, role, id, ask, mark)
        }
    })
}

/// Carries out a reservation request for `role` (the folder's role) once:
/// answered with what the command prints from, or its refusal as the
/// command prints it.
fn apply_reservation(
    project: &Project,
    roles: &Roles,
    role: &str,
    id: &str,
    ask: &Ask,
    mark: &Path,
) -> Answer {
    let data = match ask {
        Ask::Reserve {
            globs,
            ttl_ms,
            reason,
            force,
        } => {
            // The role's own checkout tells which files two globs share.
            let worktree = roles
                .find(role)
                .map(|r| r.worktree_in(&project.root))
                .unwrap_or_else(|| project.root.clone());
            let req = reservations::Request {
                role,
                globs: globs.clone(),
                ttl: Duration::from_millis(*ttl_ms),
                reason,
                worktree: &worktree,
                force: *force,
            };
            reservations::reserve_once(project, &req, id).map(|(r, mut overlaps)| {
                // Bounded: overlaps beyond what an answer holds are left out.
                let mut v = serde_json::json!({"reservation": r, "overlaps": []});
                while !overlaps.is_empty() {
                    v["overlaps"] = serde_json::json!(overlaps);
                    if (v.to_string().len() as u64) < MAX_ANSWER - 1024 {
                        break;
                    }
                    overlaps.pop();
                    v["overlaps"] = serde_json::json!([]);
                }
                v.to_string()
            })
        }
        Ask::Release { globs } => reservations::release_once(project, role, globs, mark)
            .map(|gone| serde_json::json!({ "released": gone }).to_string()),
        _ => Err(Error::internal("not a reservation request")),
    };
    match data {
        Ok(data) => Answer::Done { record: None, data },
        Err(e) => {
            let (why, token) = match &e {
                Error::Refused { token, detail, .. } if ANSWERED_TOKENS.contains(token) => {
                    (detail.clone(), Some(*token))
                }
                _ => (e.to_string(), None),
            };
            Answer::Refused {
                why: lines_safe(&why).chars().take(MAX_REFUSAL).collect(),
                token,
            }
        }
    }
}

/// `s` with every control character but new lines and tabs escaped, and
/// the bidi controls (the refusal of a reservation is several lines,
/// already escaped where it shows what an agent wrote).
fn lines_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if (crate::text::is_control(c) && c != '\n' && c != '\t')
                || crate::text::is_bidi_or_separator(c)
            {
                escape(&c.to_string())
            } else {
                c.to_string()
            }
        })
        .collect()
}
