//! What a person does about the gate (docs/cockpit.md): list, approve and deny
//! held handoffs; pause and resume delivery. The same files are written by
//! `swarm approve|deny|pause|resume`, by the cockpit (`swarm serve`) and by
//! its SwarmForge API.
//!
//! A held original lives in its sender's (or relay folder's)
//! `pending_approval/`, SwarmForge's own approval folder
//! (protocol::pending_approval): one file, moved in by the daemon's hold
//! and out by approve or deny, each a rename that cannot clobber. Its
//! review comments (`<name>.reviews.json`) are dropped before it leaves.
//!
//! Approve is crash-safe in this order: (1) publish the record
//! `.swarmforge/approvals/<id>` (temp + fsync + no-clobber rename), (2)
//! journal `approved`, (3) move the original from `pending_approval/` back
//! to its outbox (no-clobber rename). Killed before (3), the file is still
//! held and `swarm approve` again finishes the job; after (3), the daemon
//! finds the record and delivers the file the usual way, exactly once.
//!
//! An approval is for what the person saw (docs/security.md, "Approve what
//! was seen"): every listing carries the held message as it will be
//! delivered and its fingerprint; `approve` takes the fingerprint the person
//! reviewed and refuses when the file holds anything else now. The record
//! binds that fingerprint, so content swapped after the approval is held
//! again by the daemon.

use crate::protocol::header::names;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::daemon::gate::{self, Pause};
use crate::daemon::journal::{Event, Kind};
use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::grammar;
use crate::protocol::header::{Header, Message};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::pending_approval::{self, Problem};
use crate::protocol::rejected_tasks;
use crate::protocol::store;
use crate::protocol::swarm::Swarm;

/// One held original.
#[derive(Clone, Debug, Serialize)]
pub struct Held {
    pub id: String,
    pub from: String,
    pub to: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: Option<String>,
    pub path: PathBuf,
    /// Seconds since it was held (the file's mtime).
    pub age_s: Option<u64>,
    /// The fingerprint an approval of this content names (gate::fingerprint).
    pub sha256: String,
    /// The message as it would be delivered (headers and body), at most
    /// [`MAX_SHOWN_BYTES`]; `truncated` when there is more.
    pub text: String,
    pub truncated: bool,
    /// A person's review comments on it, `{"<path>": "<comments>"}`
    /// (SwarmForge's `<name>.reviews.json`).
    pub reviews: serde_json::Map<String, serde_json::Value>,
}

/// The most of a held message a listing carries (the CLI shows it all).
pub const MAX_SHOWN_BYTES: usize = 64 * 1024;

/// The largest held original read: the project's `limits.max_file_bytes`
/// (the daemon read it under that limit before it held it).
fn max_bytes(swarm: &Swarm) -> u64 {
    swarm.config().map_or(
        crate::protocol::config::Limits::default().max_file_bytes,
        |c| c.limits.max_file_bytes,
    )
}

/// Every held original of the project, oldest id first.
pub fn list(project: &Project) -> Result<Vec<Held>> {
    list_in(&Swarm::new(project.clone()))
}

/// [`list`] in a loaded swarm.
pub fn list_in(swarm: &Swarm) -> Result<Vec<Held>> {
    let max = max_bytes(swarm);
    let mut out: Vec<Held> = pending_approval::worktrees_in(swarm)?
        .iter()
        .filter(|(_, linked)| !linked)
        .flat_map(|(w, _)| held_in(&w.held(), max))
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// What is wrong in the project's approval folders (a stray file, review
/// comments whose handoff is gone, a held file that is no message, a file
/// left in an old `held/` folder): each a line `swarm status` shows and
/// `swarm audit --check` counts as a violation.
pub fn problems(project: &Project) -> Vec<Problem> {
    problems_in(&Swarm::new(project.clone()))
}

/// [`problems`] in a loaded swarm.
pub fn problems_in(swarm: &Swarm) -> Vec<Problem> {
    let mut out = Vec::new();
    for (w, linked) in pending_approval::worktrees_in(swarm).unwrap_or_default() {
        if linked {
            out.push(Problem {
                path: w.held(),
                why: "a symlink on the way to this approval folder: nothing held there is listed or approved; make .swarmforge, handoffs and pending_approval plain folders of the worktree".into(),
                unreadable_handoff: false,
            });
        } else {
            out.extend(pending_approval::problems(&w));
        }
    }
    out
}

/// The held originals in one `pending_approval/` folder (any order), each
/// read with the size limit `max_bytes`.
pub fn held_in(held: &Path, max_bytes: u64) -> Vec<Held> {
    let mut out = Vec::new();
    for e in store::each(held) {
        if !grammar::valid_handoff_name(grammar::strip_collision_prefix(&e.name)) || !e.is_file() {
            continue;
        }
        let Some(m) = e.message(max_bytes) else {
            continue;
        };
        let path = e.path.clone();
        let get = |h: Header| m.get(h).unwrap_or_default().to_string();
        let age_s = e
            .metadata()
            .and_then(|md| md.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .map(|d| d.as_secs());
        let rendered = m.render();
        let truncated = rendered.len() > MAX_SHOWN_BYTES;
        let mut end = rendered.len().min(MAX_SHOWN_BYTES);
        while !rendered.is_char_boundary(end) {
            end -= 1;
        }
        out.push(Held {
            sha256: gate::fingerprint(&m),
            text: rendered[..end].to_string(),
            truncated,
            id: get(Header::Id),
            from: get(Header::From),
            to: get(Header::To),
            kind: get(Header::Type),
            title: m.get(names::TITLE).map(str::to_string),
            reviews: pending_approval::reviews(&path),
            path,
            age_s,
        });
    }
    out
}

fn check_id(id: &str) -> Result<()> {
    if grammar::valid_message_id(id) {
        Ok(())
    } else {
        Err(Error::bad_input(format!(
            "'{}' is not a message id (<IDTS>_<SEQ>_from_<role>)",
            crate::text::escape(id)
        )))
    }
}

/// The held original with this id.
pub fn find(project: &Project, id: &str) -> Result<Held> {
    check_id(id)?;
    list(project)?
        .into_iter()
        .find(|h| h.id == id)
        .ok_or_else(|| {
            Error::not_found(format!(
                "no held handoff {id} in {}\n  hint: `swarm status` lists the held handoffs",
                project.root.display()
            ))
        })
}

/// Who ran a person's command: `$USER`, else the account of the process's
/// uid (a service or `env -i` has no `$USER`), when it is a plain name;
/// `unknown` only when neither is.
pub fn who() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| grammar::valid_role(u))
        .or_else(|| crate::sys::account::name().filter(|u| grammar::valid_role(u)))
        .unwrap_or_else(|| "unknown".into())
}

fn journal(project: &Project, ev: Event) {
    // The daemon's journal, without racing its rotation.
    crate::daemon::journal::record_outside(project, &ev);
}

fn message_of(project: &Project, path: &Path) -> Option<Message> {
    store::load_message(path, max_bytes(&Swarm::new(project.clone()))).ok()
}

/// The sender's worktree of a held original
/// (`<worktree>/.swarmforge/handoffs/pending_approval/<name>`).
pub(crate) fn sender_worktree(held: &Path) -> PathBuf {
    held.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The held message with this id, whole, and its fingerprint: what a
/// person reviews before approving.
pub fn review(project: &Project, id: &str) -> Result<(Held, Message)> {
    let h = find(project, id)?;
    let Some(msg) = message_of(project, &h.path) else {
        return Err(Error::conflict(format!(
            "{} is no longer a readable handoff",
            h.path.display()
        )));
    };
    Ok((h, msg))
}

/// Keeps a person's review comments on document `doc` of held handoff
/// `id` beside it (SwarmForge's `POST /api/approvals/<id>/comments`):
/// `<name>.reviews.json` gets `"<doc>": "<comments>"`, replacing what it
/// said of that document. Blank comments remove the document's entry.
pub fn save_comments(project: &Project, id: &str, doc: &str, comments: &str) -> Result<()> {
    if doc.trim().is_empty() || doc.len() > 4096 || doc.chars().any(char::is_control) {
        return Err(Error::bad_input(
            "Missing path: name the document the comments are about",
        ));
    }
    if comments.len() > pending_approval::MAX_REVIEWS_BYTES as usize / 4 {
        return Err(Error::bad_input(
            "the comments are too long (at most 256 KiB)",
        ));
    }
    let h = find(project, id)?;
    let w = Worktree::new(sender_worktree(&h.path));
    let mut r = pending_approval::reviews(&h.path);
    let text = comments.trim();
    if text.is_empty() {
        r.remove(doc);
    } else {
        r.insert(doc.to_string(), serde_json::Value::String(text.to_string()));
    }
    pending_approval::write_reviews(&w, &h.path, &r).map_err(|e| Error::io(&h.path, e))?;
    // Approved or denied meanwhile: the comments must not outlive it.
    if !h.path.is_file() {
        let _ = pending_approval::drop_reviews(&h.path);
        return Ok(());
    }
    // And the task's history (upstream's `append-task-review!`).
    match message_of(project, &h.path) {
        Some(m) => rejected_tasks::record(project, &m, &[doc.to_string()], text),
        None => Ok(()),
    }
}

/// Approves a held handoff whose content has fingerprint `seen` (what the
/// person reviewed): it goes back to its outbox, to be delivered. Returns
/// the outbox path. Other content now: refused (`CHANGED_SINCE_REVIEW`),
/// nothing recorded.
pub fn approve(project: &Project, id: &str, seen: &str, via: &str) -> Result<PathBuf> {
    let (h, msg) = review(project, id)?;
    let now = gate::fingerprint(&msg);
    // A copy relayed from another host may be approved as its original.
    if !gate::is_fingerprint(&msg, seen) {
        return Err(Error::refused(
            crate::error::Token::ChangedSinceReview,
            format!(
                "{id} is not what was reviewed (sha256 {}), it is now sha256 {now}; nothing approved. Review it again: `swarm approve {id}` shows it.",
                crate::text::escape(seen)
            ),
            vec![h.path.clone()],
        ));
    }
    record_approval(project, id, seen, &who(), via)?;
    // Approved: its task's review history is done with (upstream drops it).
    rejected_tasks::forget(project, &msg)?;
    let ev = Event::new(Kind::Approved)
        .path(&h.path)
        .reason(format!("by {} via {via}", who()))
        .message(&msg);
    journal(project, ev);
    let name = h
        .path
        .file_name()
        .map(|n| grammar::strip_collision_prefix(&n.to_string_lossy()).to_string())
        .unwrap_or_default();
    let wt = sender_worktree(&h.path);
    let outbox = Worktree::new(&wt).outbox();
    let dest = outbox.join(&name);
    // Before the move: a crash between leaves a hold without comments,
    // never comments without a hold.
    pending_approval::drop_reviews(&h.path).map_err(|e| Error::io(&h.path, e))?;
    match fsx::move_noreplace(&h.path, &dest) {
        Ok(()) => Ok(dest),
        Err(e) if fsx::moved_to(&e).is_some() => Ok(dest),
        Err(e) => Err(Error::io(&dest, e)),
    }
}

/// Publishes the approval record `.swarmforge/approvals/<id>` binding
/// fingerprint `seen` (see gate::approved).
fn record_approval(project: &Project, id: &str, seen: &str, by: &str, via: &str) -> Result<()> {
    let dir = project.approvals_dir();
    fsx::ensure_dirs(&[&dir, &project.approvals_tmp()]).map_err(|e| Error::io(&dir, e))?;
    let record = format!(
        "id: {id}\nsha256: {seen}\napproved_at: {}\nby: {by}\nvia: {via}\n",
        clock::iso_now(),
    );
    let file = dir.join(id);
    match fsx::publish(&project.approvals_tmp(), &file, record.as_bytes()) {
        Ok(()) => Ok(()),
        // Approved before: a run killed before the move (same content), or
        // the id reused for other content; either way this approval stands.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fsx::replace(&project.approvals_tmp(), &file, record.as_bytes())
                .map_err(|e| Error::io(&file, e))
        }
        Err(e) => Err(Error::io(&file, e)),
    }
}

/// Approves, ahead of its arrival, a copy of message `id` that is held on
/// no folder of this host yet: a person on another host approved it as
/// fingerprint `seen` (docs/bridge.md, "Approvals travel"). The daemon
/// delivers a copy that arrives with that content (as its original) and
/// holds one with any other.
pub fn approve_ahead(project: &Project, id: &str, seen: &str, by: &str, via: &str) -> Result<()> {
    check_id(id)?;
    if approval_record(project, id).is_some_and(|(s, _)| s.iter().any(|s| s == seen)) {
        return Ok(());
    }
    record_approval(project, id, seen, by, via)
}

/// The fingerprints approval record `id` binds, and who approved.
fn approval_record(project: &Project, id: &str) -> Option<(Vec<String>, String)> {
    let bytes = fsx::read_bounded(&project.approvals_dir().join(id), 64 * 1024).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let field = |k: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix(k))
            .map(str::to_string)
            .collect()
    };
    let by = field("by: ").pop().unwrap_or_else(|| "unknown".into());
    Some((field("sha256: "), by))
}

/// The approval a copy made here carries to another host (docs/bridge.md,
/// "Approvals travel"): `<fingerprint of its original> <by>`, when a
/// person approved it here.
pub fn carried_approval(project: &Project, copy: &Message) -> Option<String> {
    let id = copy.id()?;
    if !grammar::valid_message_id(id) || !gate::approved(project, copy) {
        return None;
    }
    let (_, by) = approval_record(project, id)?;
    Some(format!("{} {by}", gate::original_fingerprint(copy)))
}

/// Denies a held handoff: refused to its sender's `failed/` with
/// `<name>.error` saying why, like a refusal by the daemon. The reason is
/// kept in its task's review history (protocol::rejected_tasks).
pub fn deny(project: &Project, id: &str, reason: &str, via: &str) -> Result<PathBuf> {
    deny_as(project, id, reason, via, Some(reason))
}

/// [`deny`], keeping `history` (not the reason) in the task's review
/// history; none: nothing kept.
pub fn deny_as(
    project: &Project,
    id: &str,
    reason: &str,
    via: &str,
    history: Option<&str>,
) -> Result<PathBuf> {
    if reason.trim().is_empty() {
        return Err(Error::bad_input("a denial needs a reason (--reason TEXT)"));
    }
    let h = find(project, id)?;
    let m = message_of(project, &h.path);
    // Before it moves: a history that cannot be written stops the denial.
    if let (Some(m), Some(text)) = (&m, history) {
        let reviewed: Vec<String> = h.reviews.keys().cloned().collect();
        rejected_tasks::record(project, m, &reviewed, text)?;
    }
    let wt = sender_worktree(&h.path);
    let wt = Worktree::new(wt);
    let failed = wt.failed();
    fsx::ensure_dirs(&[&failed, &wt.outbox_tmp()]).map_err(|e| Error::io(&failed, e))?;
    pending_approval::drop_reviews(&h.path).map_err(|e| Error::io(&h.path, e))?;
    let target = match fsx::move_into_unique(&h.path, &failed, grammar::collision_names(&h.path)) {
        Ok(p) => p,
        Err(e) => match fsx::moved_to(&e) {
            Some(p) => p.to_path_buf(),
            None => return Err(Error::io(&h.path, e)),
        },
    };
    let full = format!("denied: {reason}");
    let mut note = target.clone().into_os_string();
    note.push(".error");
    let text = format!("{}\n", crate::text::escape(&full));
    fsx::publish(&wt.outbox_tmp(), Path::new(&note), text.as_bytes())
        .map_err(|e| Error::io(PathBuf::from(&note), e))?;
    let mut ev = Event::new(Kind::Denied)
        .path(&target)
        .reason(format!("{full} (by {} via {via})", who()));
    if let Some(m) = &m {
        ev = ev.moved(m);
    }
    journal(project, ev);
    Ok(target)
}

/// Pauses delivery of `types` (none: everything), adding to a pause in
/// force. Every type is checked like `allowed_types`.
pub fn pause(project: &Project, types: &[String]) -> Result<Pause> {
    for t in types {
        if !crate::protocol::types::type_rule(t).is_some_and(|r| r.sendable) {
            return Err(Error::bad_input(format!(
                "'{}' is not a message type (one of {})",
                crate::text::escape(t),
                crate::protocol::types::type_list()
            )));
        }
    }
    let mut p = match gate::pause_state(project) {
        Some(p) if p.types.is_empty() => p,
        Some(mut p) if !types.is_empty() => {
            for t in types {
                if !p.types.contains(t) {
                    p.types.push(t.clone());
                }
            }
            p
        }
        _ => Pause {
            types: types.to_vec(),
            since: clock::iso_now(),
        },
    };
    p.types.sort();
    let tmp = project.approvals_tmp();
    fsx::ensure_dirs(&[&tmp]).map_err(|e| Error::io(&tmp, e))?;
    let bytes = serde_json::to_vec(&p).unwrap_or_default();
    let file = project.pause_file();
    match fsx::publish(&tmp, &file, &bytes) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => fsx::replace(&tmp, &file, &bytes),
        other => other,
    }
    .map_err(|e| Error::io(&file, e))?;
    Ok(p)
}

/// Resumes all delivery; returns whether anything was paused.
pub fn resume(project: &Project) -> Result<bool> {
    let file = project.pause_file();
    match std::fs::remove_file(&file) {
        Ok(()) => {
            fsx::sync_dir(&project.swarmforge()).map_err(|e| Error::io(&file, e))?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(&file, e)),
    }
}
