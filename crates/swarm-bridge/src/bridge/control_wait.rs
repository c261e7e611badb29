//! Control records that wait on this host for what they act on
//! (docs/bridge.md, "One control"): an answer can arrive before the copy of
//! its clarify (the two travel on different consumers, and the copy may wait
//! in a relay folder while this host is paused or its daemon is down). Such
//! a record waits here and is applied when the copy is in the inbox.
//!
//! Invariant: a waiting record is published to
//! `.swarmforge/bridge/control/waiting/<id>.json` and journaled
//! `control_waiting` before its `seen/` marker (and so before the stream's
//! ack), so neither a crash nor a restart loses it; it leaves that folder
//! only after its `control_applied` or `control_refused` line. A crash
//! between the effect and the removal applies it again, which the effect's
//! own checks refuse (an answered clarify cannot be answered twice).

use std::io;
use std::path::PathBuf;

use super::control::{self, Action, Record};
use crate::daemon::journal::Kind;
use crate::fsx;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;

/// Most records waiting on one host; more are refused (a peer cannot fill
/// the disk with answers to clarifies that never come).
const MAX_WAITING: usize = 1000;

/// Where records wait.
pub fn dir(p: &Project) -> PathBuf {
    p.bridge_dir().join("control").join("waiting")
}

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

/// Keeps `r` until it can be applied, journaled `control_waiting` (`why`).
pub(super) fn park(p: &Project, r: &Record, why: &str) -> io::Result<()> {
    let d = dir(p);
    let tmp = p.bridge_tmp();
    fsx::ensure_dirs(&[&d, &tmp])?;
    let file = d.join(format!("{}.json", r.id));
    if !file.exists() && crate::protocol::layout::names_in(&d).len() >= MAX_WAITING {
        control::journal(
            p,
            Kind::ControlRefused,
            r,
            &format!("{MAX_WAITING} control records wait on this host already"),
        );
        return Ok(());
    }
    let bytes = serde_json::to_vec(r).map_err(io::Error::other)?;
    match fsx::publish(&tmp, &file, &bytes) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    control::journal(p, Kind::ControlWaiting, r, why);
    Ok(())
}

/// Applies every waiting record that need not wait any longer, oldest id
/// first; returns how many were applied (or refused by their own checks).
pub fn retry(p: &Project) -> usize {
    let d = dir(p);
    let mut names: Vec<String> = crate::protocol::layout::names_in(&d)
        .into_iter()
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    let mut done = 0;
    for n in names {
        let path = d.join(&n);
        let Ok(bytes) = fsx::read_bounded(&path, control::MAX_RECORD) else {
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
        if fsx::remove_file(&path).is_ok() {
            done += 1;
        }
    }
    done
}
