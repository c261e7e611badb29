//! `delivered` lines lost with a kill, journaled at the next start.
//!
//! handoffd moves a group's originals to `sent/`, fsyncs the folders, then
//! appends each one's `delivered` line (daemon/deliver/commit.rs). Killed
//! in between, an original sits in `sent/` with every copy out and no line
//! says so. The recipients lose nothing, but whatever reads the journal
//! does: the views call the files unverified, and on another host `swarm
//! audit --check` waits for ever for a delivery its mirror of this journal
//! never shows.
//!
//! So, when the run before ended without `stopped`, the next start lists
//! the `sent/` folder of every outbox it serves (the roles' and the
//! bridge's relay folders) for originals that arrived there since that
//! run's `started` (the inode change time a rename sets, with [`SKEW`] to
//! spare: that run's clock may have been another than the file system's),
//! whose id no `delivered` line in the journal kept names, and journals
//! the line for each, before its own `started`.
//!
//! Invariant kept here: **a line is journaled only for an original whose
//! every recipient holds a copy with its digest** (protocol/digest.rs), in
//! an inbox only this daemon writes to. An agent can write into its own
//! `sent/`, never into another role's inbox, so a file it planted there
//! gets no line; a recipient sharing the sender's worktree (its inbox the
//! sender's to write) proves nothing, so none either; and a copy a
//! recipient changed gets none.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Deserialize;

use crate::daemon::journal::{Event, Journal, Kind};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::config::Config;
use crate::protocol::digest;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::store;
use crate::sys::log_reader::EventReader;

/// How much earlier than the last run's `started` a file may have arrived
/// and still be looked at: the time in the journal is that run's clock, the
/// inode change time the file system's (a clock stepped, or a process run
/// under another clock, as the partition harness does). An original this
/// much older with its line is skipped by its id; one without a line is
/// one more line lost, journaled too.
const SKEW: Duration = Duration::from_secs(15 * 60);

/// What the journal kept says of the run before this one.
#[derive(Default)]
struct LastRun {
    /// Its `started` time (the journal's first line kept when that
    /// `started` was rotated away).
    since: Option<SystemTime>,
    /// It ended with `stopped`.
    stopped: bool,
    /// The ids with a `delivered` line anywhere in the journal kept.
    delivered: HashSet<String>,
}

#[derive(Deserialize)]
struct Line {
    kind: String,
    time: String,
    id: Option<String>,
}

fn last_run(project: &Project) -> LastRun {
    let path = project.events_file();
    let mut run = LastRun::default();
    let Ok(mut r) = EventReader::new(&path, crate::daemon::progress::oldest_offset(&path)) else {
        return run;
    };
    let _ = r.poll(&mut |bytes, _| {
        let Ok(l) = serde_json::from_slice::<Line>(bytes) else {
            return Ok(());
        };
        let time = clock::parse(&l.time).map(SystemTime::from);
        match l.kind.as_str() {
            "started" => {
                run.since = time;
                run.stopped = false;
            }
            "stopped" => run.stopped = true,
            "delivered" => {
                if let Some(id) = l.id {
                    run.delivered.insert(id);
                }
            }
            _ => {}
        }
        if run.since.is_none() {
            run.since = time;
        }
        Ok(())
    });
    run
}

/// Journals the `delivered` lines the run before lost (see the module
/// doc); returns how many. Nothing when that run ended with `stopped`.
pub fn recover(project: &Project, roles: &Roles, config: &Config, journal: &Journal) -> usize {
    let run = last_run(project);
    let Some(since) = run.since.filter(|_| !run.stopped) else {
        return 0;
    };
    let since = since.checked_sub(SKEW).unwrap_or(SystemTime::UNIX_EPOCH);
    let mut outboxes: Vec<(PathBuf, Option<String>)> = Vec::new();
    for r in roles.roles.iter().filter(|r| !r.is_remote()) {
        if !outboxes.iter().any(|(w, _)| *w == r.worktree_path) {
            outboxes.push((r.worktree_path.clone(), None));
        }
        if config.bridge.is_some() {
            outboxes.push((project.bridge_relay(&r.name), Some(r.name.clone())));
        }
    }
    let max = config.limits.max_file_bytes;
    let mut n = 0;
    for (wt, relayed_to) in outboxes {
        let wt = Worktree::new(&wt);
        for e in store::each(&wt.sent()).filter(|e| matches!(e.kind, store::Kind::Handoff)) {
            let Some(msg) = lost(&e.path, &e.name, since, &run.delivered, max) else {
                continue;
            };
            let to: Vec<String> = match &relayed_to {
                Some(r) => vec![r.clone()],
                None => recipients(&msg, roles),
            };
            // A recipient in the sender's own worktree proves nothing: the
            // sender could have written that copy itself.
            let own = |r: &String| roles.find(r).is_some_and(|x| x.worktree_path == wt.root);
            if to.is_empty()
                || to.iter().any(own)
                || !to.iter().all(|r| holds_copy(roles, r, &e.name, &msg, max))
            {
                continue;
            }
            let plain = grammar::strip_collision_prefix(&e.name);
            journal.record(
                &Event::new(Kind::Delivered)
                    .moved(&msg)
                    .path(&wt.outbox().join(plain))
                    .reason(
                        "journaled at start: handoffd was killed between the move and its line",
                    ),
            );
            n += 1;
        }
    }
    n
}

/// The original at `path` when it arrived in `sent/` since `since` and no
/// `delivered` line names its id.
fn lost(
    path: &Path,
    name: &str,
    since: SystemTime,
    delivered: &HashSet<String>,
    max: u64,
) -> Option<Message> {
    let plain = grammar::strip_collision_prefix(name);
    // A collision name is a redelivery joining the first (relay) or a
    // re-planted name: the first's line is the one that counts.
    if plain != name {
        return None;
    }
    let id = grammar::FileName::parse(plain)?.id;
    if delivered.contains(id) {
        return None;
    }
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || changed(&meta)? < since {
        return None;
    }
    let bytes = fsx::read_bounded(path, max).ok()?;
    let msg = Message::parse_bytes(&bytes).ok()?;
    (msg.id() == Some(id)).then_some(msg)
}

/// The inode change time: when the rename into `sent/` happened.
fn changed(meta: &std::fs::Metadata) -> Option<SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let secs = u64::try_from(meta.ctime()).ok()?;
    let nanos = u32::try_from(meta.ctime_nsec()).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
}

/// The local roles `msg` went to: `to` (with `all`) and `cc`, the sender
/// left out.
fn recipients(msg: &Message, roles: &Roles) -> Vec<String> {
    let from = msg.sender().unwrap_or_default();
    let names = roles.roles.iter().map(|r| r.name.as_str());
    let mut to = grammar::recipients(msg.to().unwrap_or_default(), from, names);
    for c in msg.cc() {
        if !to.iter().any(|t| t == c) {
            to.push(c.to_string());
        }
    }
    to.retain(|r| r != from);
    to
}

/// Whether role `role` holds a copy named `name` of `original` in its
/// inbox (or has a remote role's proxy, which the bridge sends on: a copy
/// for another host is in its out folder, judged like a local one).
fn holds_copy(roles: &Roles, role: &str, name: &str, original: &Message, max: u64) -> bool {
    let Some(r) = roles.find(role) else {
        return false;
    };
    let wt = Worktree::new(&r.worktree_path);
    let mut places = vec![wt.inbox_new(), wt.in_process(), wt.completed()];
    if r.is_remote() {
        // The bridge moves what it published on from the proxy's inbox.
        places.push(wt.sent());
    }
    for base in [wt.in_process(), wt.completed()] {
        places.extend(store::batch_dirs(&base));
    }
    let want = digest::of(original);
    places.iter().any(|d| {
        fsx::read_bounded(&d.join(name), max)
            .ok()
            .and_then(|b| Message::parse_bytes(&b).ok())
            .is_some_and(|copy| digest::of(&copy) == want)
    })
}
