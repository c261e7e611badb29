//! Control records that wait on this host for what they act on
//! (docs/bridge.md, "One control"): an answer can arrive before the copy of
//! its clarify (the two travel on different consumers, and the copy may wait
//! in a relay folder while this host is paused or its daemon is down). Such
//! a record waits here and is applied when the copy is in the inbox.
//!
//! Invariant: a waiting record is kept by `control::received` (a
//! `protocol::ledger`: `waiting/<id>.json`, published and journaled
//! `control_waiting` before its tombstone, and so before the stream's ack)
//! until its `control_applied` or `control_refused` line; the ledger says
//! what a crash at any point leaves.

use std::io;

use super::control::{self, Action, Record};
use crate::daemon::journal::Kind;
use crate::protocol::layout::Project;
use crate::protocol::ledger::{self, Ledger};
use crate::protocol::roles::Roles;

/// Most records waiting on one host; more are refused (a peer cannot fill
/// the disk with answers to clarifies that never come).
const MAX_WAITING: usize = 1000;

/// Why record `r` must wait on this host, if it must: an answer for a
/// clarify addressed to a role of this host whose copy is not in its inbox
/// yet.
pub(super) fn must_wait(p: &Project, r: &Record) -> Option<String> {
    let Action::Answer { message, to, .. } = &r.action else {
        return None;
    };
    if to.is_empty() || control::clarify_here(p, message) {
        return None;
    }
    let roles = Roles::load(&p.roles_tsv()).ok()?;
    let here: Vec<&str> = to
        .iter()
        .filter(|t| roles.find(t).is_some_and(|role| !role.is_remote()))
        .map(String::as_str)
        .collect();
    if here.is_empty() {
        return None;
    }
    Some(format!(
        "waits for the clarify's copy to reach {} on this host",
        here.join(", ")
    ))
}

/// Keeps `r` in `taken` until it can be applied, journaled
/// `control_waiting` (`why`).
pub(super) fn park(p: &Project, taken: &Ledger, r: &Record, why: &str) -> io::Result<()> {
    let pending = taken.pending();
    if !pending.contains(&r.id) && pending.len() >= MAX_WAITING {
        control::journal(
            p,
            Kind::ControlRefused,
            r,
            &format!("{MAX_WAITING} control records wait on this host already"),
        );
        return Ok(());
    }
    let bytes = serde_json::to_vec(r).map_err(io::Error::other)?;
    taken.publish(&r.id, &bytes)?;
    control::journal(p, Kind::ControlWaiting, r, why);
    Ok(())
}

/// Applies every waiting record that need not wait any longer, oldest id
/// first; returns how many were applied (or refused by their own checks).
pub fn retry(p: &Project) -> usize {
    let taken = control::received(p);
    let mut done = 0;
    for id in taken.pending() {
        let Ok(Some(bytes)) = taken.read_request(&id, control::MAX_RECORD) else {
            continue;
        };
        // Published whole by `park` from a record already checked.
        let Ok(r) = serde_json::from_slice::<Record>(&bytes) else {
            continue;
        };
        let _applying = control::APPLYING.lock().unwrap_or_else(|e| e.into_inner());
        if must_wait(p, &r).is_some() {
            continue;
        }
        match control::apply(p, &r) {
            Ok(Ok(outcome)) => control::journal(p, Kind::ControlApplied, &r, &outcome),
            Ok(Err(refusal)) => control::journal(p, Kind::ControlRefused, &r, &refusal),
            // A disk error: tried again on the next round.
            Err(_) => continue,
        }
        ledger::step("applied");
        if taken.retire(&id).is_ok() {
            done += 1;
        }
    }
    done
}
