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
//! bridge's relay folders, and their archive days, where `swarm archive`
//! may have moved them) for originals that arrived there since that
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
use crate::daemon::progress;
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::config::Config;
use crate::protocol::digest;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::store;
use crate::sys::log_reader::{self, EventReader};
use crate::sys::logfile;

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

/// How far back from the journal's end [`ended_cleanly`] looks.
const TAIL: u64 = 64 * 1024;

/// Whether the journal's last bytes show the run before ended with
/// `stopped`: its last `started` or `stopped` line there is a `stopped`.
/// This is every start after a clean stop, so only a start after a kill
/// (or a tail with neither line: more written since than [`TAIL`]) reads
/// the whole journal kept.
fn ended_cleanly(path: &Path) -> bool {
    let end = logfile::end(path);
    let from = log_reader::line_at_or_after(path, end.saturating_sub(TAIL));
    let mut last = None;
    read_lines(path, from, |l| {
        if matches!(l.kind.as_str(), "started" | "stopped") {
            last = Some(l.kind == "stopped");
        }
    });
    last == Some(true)
}

/// Hands each journal line from `offset` on to `each`, parsed.
fn read_lines(path: &Path, offset: u64, mut each: impl FnMut(Line)) {
    let Ok(mut r) = EventReader::new(path, offset) else {
        return;
    };
    let _ = r.poll(&mut |bytes, _| {
        if let Ok(l) = serde_json::from_slice::<Line>(bytes) {
            each(l);
        }
        Ok(())
    });
}

fn last_run(project: &Project) -> LastRun {
    let path = project.events_file();
    let mut run = LastRun::default();
    if ended_cleanly(&path) {
        run.stopped = true;
        return run;
    }
    read_lines(&path, progress::oldest_offset(&path), |l| {
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
        let originals = sent_folders(&wt).into_iter().flat_map(|d| store::each(&d));
        for e in originals.filter(|e| matches!(e.kind, store::Kind::Handoff)) {
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

/// The folders an original that arrived in `sent/` can be in now:
/// `sent/`, and the `sent/` of every archive day (`swarm archive`, run
/// between the kill and this start, files an original under the day its
/// id was made, which says nothing of when it was delivered). Read only
/// after a run that did not stop: the cost of a long archive is a listing
/// and a `stat` per file then.
fn sent_folders(wt: &Worktree) -> Vec<PathBuf> {
    let mut dirs = vec![wt.sent()];
    dirs.extend(wt.archive_days().into_iter().map(|d| d.join("sent")));
    dirs
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

/// Whether role `role` holds a copy named `name` of `original`, anywhere
/// a copy can be ([`store::copy_places`]) with the original's digest (or,
/// for a remote role's proxy, which the bridge sends on: a copy for another
/// host, in its out folder or, published on, its `sent/`).
fn holds_copy(roles: &Roles, role: &str, name: &str, original: &Message, max: u64) -> bool {
    let Some(r) = roles.find(role) else {
        return false;
    };
    let wt = Worktree::new(&r.worktree_path);
    let mut places = store::copy_places(&wt, name);
    if r.is_remote() {
        places.push(wt.sent());
    }
    let want = digest::of(original);
    places.iter().any(|d| {
        fsx::read_bounded(&d.join(name), max)
            .ok()
            .and_then(|b| Message::parse_bytes(&b).ok())
            .is_some_and(|copy| digest::of(&copy) == want)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: &str, id: Option<&str>) -> String {
        let id = id.map_or("null".to_string(), |i| format!("\"{i}\""));
        format!("{{\"kind\":\"{kind}\",\"time\":\"2026-01-01T00:00:00Z\",\"id\":{id}}}\n")
    }

    fn journal(lines: &[String]) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("events.jsonl");
        std::fs::write(&path, lines.concat()).unwrap();
        (d, path)
    }

    #[test]
    fn a_clean_stop_is_told_from_the_tail_and_a_kill_is_not() {
        let filler: Vec<String> = (0..3000)
            .map(|i| {
                line(
                    "delivered",
                    Some(&format!("20260101T000000Z_{i:06}_from_a")),
                )
            })
            .collect();
        let run = |end: &[String]| {
            let mut all = vec![line("started", None)];
            all.extend(filler.iter().cloned());
            all.extend(end.iter().cloned());
            journal(&all)
        };
        // Stopped, then lines the CLI wrote while no daemon ran.
        let (_d, clean) = run(&[line("stopped", None), line("dequeued", Some("x"))]);
        assert!(ended_cleanly(&clean));
        // Killed: the last marker is a `started`.
        let (_d, killed) = run(&[line("stopped", None), line("started", None)]);
        assert!(!ended_cleanly(&killed));
        // No marker in the tail: unknown, so the whole journal is read.
        let (_d, far) = {
            let mut all = vec![line("started", None), line("stopped", None)];
            all.extend(filler.iter().cloned());
            journal(&all)
        };
        assert!(std::fs::metadata(&far).unwrap().len() > TAIL);
        assert!(!ended_cleanly(&far));
        let (_d, empty) = journal(&[]);
        assert!(!ended_cleanly(&empty));
    }
}
