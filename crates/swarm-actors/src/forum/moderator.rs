//! The forum moderator (BettaFish's host): after every `forum.digest_every`
//! delivered contributions of a session the daemon asks the moderator role for
//! a synthesis with one `digest_request`, never two open at once, backing off
//! when the moderator fails one. The request is an ordinary handoff file from
//! `handoffd`, published in the moderator's outbox and delivered by the normal
//! pass, so it is durable and crash-safe like any other message.

use crate::protocol::header::names;
use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::daemon::journal::{Event, Journal, Kind};
use crate::error::Result;
use crate::forum::history::Said;
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::config::Config;
use crate::protocol::grammar::{self, DAEMON};
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::store;

/// Priority of digest requests: ahead of ordinary work.
pub const REQUEST_PRIORITY: &str = "10";

/// Longest pause after failed requests (the first is `forum.retry_after`,
/// doubling per failure in a row).
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// What counts toward the next digest: the team's speech, not the forum's own
/// bookkeeping.
pub fn is_contribution(kind: &str) -> bool {
    grammar::MessageType::parse(kind).is_some_and(grammar::MessageType::is_contribution)
}

/// Ids listed in a digest request's body (one per line after the preamble).
pub fn requested_ids(body: &str) -> impl Iterator<Item = &str> {
    body.lines()
        .map(str::trim)
        .filter(|l| l.contains("_from_") && !l.contains(' '))
}

#[derive(Debug, Default)]
pub struct Moderator {
    /// Per session: contributions delivered since the last request, in order.
    pending: HashMap<String, Vec<String>>,
    /// File name of the request we are waiting on.
    outstanding: Option<String>,
    backoff: Duration,
    not_before: Option<Instant>,
    late_logged: bool,
}

impl Moderator {
    /// Rebuilds the pending contributions from the delivered originals.
    pub fn from_history(history: &[Said], moderator: &str) -> Moderator {
        let mut requested = std::collections::HashSet::new();
        for s in history
            .iter()
            .filter(|s| s.kind == grammar::MessageType::DigestRequest.name())
        {
            requested.extend(requested_ids(&s.body).map(str::to_string));
        }
        let mut m = Moderator::default();
        for s in history {
            if let Some(sess) = &s.session {
                if is_contribution(&s.kind) && s.from != moderator && !requested.contains(&s.id) {
                    m.pending
                        .entry(sess.clone())
                        .or_default()
                        .push(s.id.clone());
                }
            }
        }
        m
    }

    /// Adopts a request that was open when the daemon started (queued in the
    /// moderator's outbox, waiting or in process at the moderator): it stays
    /// the one open request, and the contributions it lists are not pending.
    pub fn adopt_open(&mut self, roles: &Roles, config: &Config, max_bytes: u64) {
        let Some(role) = config
            .forum
            .moderator
            .as_deref()
            .and_then(|m| roles.find(m))
        else {
            return;
        };
        let wt = Worktree::new(&role.worktree_path);
        let Some(name) = any_open_request(&wt) else {
            return;
        };
        let listed: std::collections::HashSet<String> = open_places(&wt, &name)
            .iter()
            .find_map(|p| {
                let bytes = fsx::read_bounded(p, max_bytes).ok()?;
                let m = Message::parse_bytes(&bytes).ok()?;
                Some(requested_ids(&m.body).map(str::to_string).collect())
            })
            .unwrap_or_default();
        for ids in self.pending.values_mut() {
            ids.retain(|i| !listed.contains(i));
        }
        self.outstanding = Some(name);
    }

    /// Counts one delivered message.
    pub fn delivered(&mut self, msg: &Message, moderator: &str) {
        let (Some(sess), Some(kind), Some(id)) = (msg.session(), msg.type_name(), msg.id()) else {
            return;
        };
        if is_contribution(kind) && msg.sender() != Some(moderator) {
            self.pending
                .entry(sess.to_string())
                .or_default()
                .push(id.to_string());
        }
    }

    /// A request is open or a backoff runs: worth checking between passes.
    pub fn waiting(&self) -> bool {
        self.outstanding.is_some() || self.not_before.is_some()
    }

    pub fn pending(&self, session: &str) -> usize {
        self.pending.get(session).map_or(0, Vec::len)
    }

    /// Sends a request when the open session has enough contributions and no
    /// request is open. Returns true when a request was queued (run a pass).
    pub fn tick(
        &mut self,
        project: &Project,
        roles: &Roles,
        config: &Config,
        journal: &Journal,
        session: Option<&str>,
    ) -> bool {
        let Some(moderator) = config.forum.moderator.as_deref() else {
            return false;
        };
        let Some(role) = roles.find(moderator) else {
            return false;
        };
        let wt = Worktree::new(&role.worktree_path);
        if let Some(name) = self.outstanding.clone() {
            if let Some((at, age)) = open_request(&wt, &name) {
                let late = config.forum.digest_within.0;
                if !self.late_logged && age > late {
                    self.late_logged = true;
                    journal.record(
                        &Event::new(Kind::ExpectationViolated)
                            .recipient(moderator)
                            .path(&at)
                            .reason(format!("digest_within {}", config.forum.digest_within)),
                    );
                }
                return false;
            }
            // Finished: failed (`done-current --failed`) means back off.
            if finished_failed(&wt, &name, config.limits.max_file_bytes) {
                let first = config.forum.retry_after.0;
                self.backoff = (self.backoff * 2).clamp(first, MAX_BACKOFF.max(first));
                self.not_before = Some(Instant::now() + self.backoff);
            } else {
                self.backoff = Duration::ZERO;
                self.not_before = None;
            }
            self.outstanding = None;
            self.late_logged = false;
        }
        if self.not_before.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        let Some(session) = session else {
            return false;
        };
        let every = config.forum.digest_every.max(1) as usize;
        if self.pending(session) < every {
            return false;
        }
        // A request from before a restart may still be open: adopt it.
        if let Some(name) = any_open_request(&wt) {
            self.outstanding = Some(name);
            return false;
        }
        // Exactly N per request, oldest first; the rest wait for the next one.
        let queue = self.pending.entry(session.to_string()).or_default();
        let ids: Vec<String> = queue.drain(..every).collect();
        match publish_request(project, &wt, moderator, session, &ids) {
            Ok(name) => {
                self.outstanding = Some(name);
                true
            }
            Err(e) => {
                eprintln!("handoffd: cannot queue a digest request: {e}");
                let queue = self.pending.entry(session.to_string()).or_default();
                queue.splice(0..0, ids);
                false
            }
        }
    }
}

fn is_request_name(name: &str) -> bool {
    grammar::valid_handoff_name(name)
        && grammar::FileName::parse(name).is_some_and(|f| f.message_id().sender == DAEMON)
}

/// When the request `name` is still open (in the outbox or not completed at
/// the moderator), the time it was created.
fn open_request(wt: &Worktree, name: &str) -> Option<(PathBuf, Duration)> {
    let at = open_places(wt, name).into_iter().find(|p| p.exists())?;
    // Its age counts from its creation (the second in its name), not from
    // the last stamp on the copy.
    let created = grammar::FileName::parse(name)
        .and_then(|f| f.message_id().time())
        .map(|t| (clock::now() - t).to_std().unwrap_or_default());
    let age = created.unwrap_or_else(|| {
        fs::metadata(&at)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .unwrap_or_default()
    });
    Some((at, age))
}

/// Where an open request `name` can be: the outbox, waiting, in process.
fn open_places(wt: &Worktree, name: &str) -> Vec<PathBuf> {
    let mut places = vec![
        wt.outbox().join(name),
        wt.inbox_new().join(name),
        wt.in_process().join(name),
    ];
    places.extend(
        crate::protocol::store::batch_dirs(&wt.in_process())
            .into_iter()
            .map(|b| b.join(name)),
    );
    places
}

fn any_open_request(wt: &Worktree) -> Option<String> {
    let mut dirs = vec![wt.outbox(), wt.inbox_new(), wt.in_process()];
    dirs.extend(crate::protocol::store::batch_dirs(&wt.in_process()));
    dirs.iter().find_map(|d| {
        store::each(d)
            .find(|e| is_request_name(&e.name))
            .map(|e| e.name)
    })
}

/// The completed copy of request `name` carries a `failed` header.
fn finished_failed(wt: &Worktree, name: &str, max_bytes: u64) -> bool {
    let mut places = vec![wt.completed().join(name)];
    places.extend(
        crate::protocol::store::batch_dirs(&wt.completed())
            .into_iter()
            .map(|b| b.join(name)),
    );
    places.iter().any(|p| {
        fsx::read_bounded(p, max_bytes)
            .ok()
            .and_then(|b| Message::parse_bytes(&b).ok())
            .is_some_and(|m| m.get(names::FAILED).is_some())
    })
}

/// Queues a `digest_request` from `handoffd` in the moderator's outbox
/// (the store's one enqueue path); returns its file name.
fn publish_request(
    project: &Project,
    wt: &Worktree,
    moderator: &str,
    session: &str,
    ids: &[String],
) -> Result<String> {
    let queued = store::enqueue_from_daemon(project, wt, |id, now| {
        let mut m = Message::default();
        m.set(names::ID, id);
        m.set(names::FROM, DAEMON);
        m.set(names::TO, moderator);
        m.set(names::PRIORITY, REQUEST_PRIORITY);
        m.set(names::TYPE, grammar::MessageType::DigestRequest.name());
        m.set(names::SESSION, session);
        m.set(names::CREATED_AT, clock::iso(now));
        let mut body = format!(
            "Digest these {} contributions of session {session}, in order, and send a digest to all.\n\n",
            ids.len()
        );
        for i in ids {
            body.push_str(i);
            body.push('\n');
        }
        m.body = body;
        m
    })?;
    Ok(queued
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(id: &str, from: &str, kind: &str, session: &str, body: &str) -> Said {
        Said {
            created_at: id.to_string(),
            id: id.to_string(),
            from: from.to_string(),
            kind: kind.to_string(),
            session: Some(session.to_string()),
            discussion: None,
            body: body.to_string(),
        }
    }

    #[test]
    fn history_rebuilds_pending_minus_requested() {
        let h = vec![
            said("1_from_a", "a", "post", "s1", ""),
            said("2_from_b", "b", "post", "s1", ""),
            said(
                "3_from_handoffd",
                DAEMON,
                "digest_request",
                "s1",
                "Digest these 2\n\n1_from_a\n2_from_b\n",
            ),
            said("4_from_mod", "mod", "post", "s1", ""),
            said("5_from_a", "a", "note", "s1", ""),
            said("6_from_a", "a", "digest", "s1", ""),
        ];
        let m = Moderator::from_history(&h, "mod");
        assert_eq!(m.pending("s1"), 1);
    }
}
