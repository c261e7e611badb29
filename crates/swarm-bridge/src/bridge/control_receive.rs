//! Receiving one control record from the stream (docs/bridge.md, "One
//! control"): check it as untrusted input, skip it when applied before,
//! park it when what it acts on is not here yet (`control_wait`), or apply
//! it (`control::apply`). Above both `control` (the records and their
//! effects) and `control_wait` (records that wait), so neither imports the
//! other's caller.
//!
//! Invariant: a record is applied at most once per host from the stream,
//! and acknowledged only once that is durable: `control::received`, a
//! `protocol::ledger` (its tombstones are the `seen/` markers), keeps it,
//! and says why a crash between an effect and its tombstone is harmless.
//!
//! A host's own pause and resume come back to it in the stream's order and
//! are applied again there, so a pause on one host and a resume on another
//! issued at once end in the same state on every host: the later in the
//! stream wins everywhere.

use std::io;

use super::control::{apply, check, journal, received, Action, Applied, Record, APPLYING};
use super::control_wait;
use super::Settings;
use crate::daemon::journal::{record_outside, Event, Kind};
use crate::protocol::layout::Project;
use crate::protocol::ledger;
use crate::text::escape;

/// What became of a received record.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Applied now (journaled `control_applied` or, refused by its own
    /// checks, `control_refused`): ack.
    Applied,
    /// Applied before (a redelivery): ack.
    Again,
    /// Not a record this host accepts (journaled `control_refused`):
    /// terminate, never redeliver.
    Refused(String),
    /// Cannot be applied yet (a disk error): redeliver after a pause.
    Wait(String),
}

/// Applies one record received from host `from` (its subject): refused and
/// journaled when it is not acceptable, a no-op when applied before.
pub fn receive(s: &Settings, from: &str, bytes: &[u8]) -> Outcome {
    let p = &s.project;
    let r = match check(&s.config, from, bytes) {
        Ok(r) => r,
        Err(why) => {
            let ev = Event::new(Kind::ControlRefused)
                .reason(format!("control record from host {}: {why}", escape(from)));
            record_outside(p, &ev);
            return Outcome::Refused(why.0);
        }
    };
    let taken = received(p);
    // One record applied at a time (the stream's, or one that waited).
    let _applying = APPLYING.lock().unwrap_or_else(|e| e.into_inner());
    if taken.is_done(&r.id) {
        return Outcome::Again;
    }
    let own = r.host == s.host;
    let waits = if own {
        None
    } else {
        control_wait::must_wait(p, &r)
    };
    let result = match (&r.action, own) {
        _ if waits.is_some() => {
            control_wait::park(p, &taken, &r, waits.as_deref().unwrap_or("")).map(|()| None)
        }
        // Done here when it was issued; only its order is re-applied.
        (Action::Pause { .. } | Action::Resume, true) => reapply(p, &r),
        (_, true) => Ok(None),
        (_, false) => apply(p, &r).map(Some),
    };
    match result {
        Ok(Some(Ok(outcome))) => journal(p, Kind::ControlApplied, &r, &outcome),
        Ok(Some(Err(refusal))) => journal(p, Kind::ControlRefused, &r, &refusal),
        Ok(None) => {}
        Err(e) => return Outcome::Wait(e.to_string()),
    }
    ledger::step("applied");
    // A parked record stays until it is applied (`control_wait::retry`).
    let done = match waits {
        Some(_) => taken.tombstone(&r.id),
        None => taken.retire(&r.id),
    };
    match done {
        Ok(()) => Outcome::Applied,
        Err(e) => Outcome::Wait(format!("{}: {e}", taken.request_file(&r.id).display())),
    }
}

/// A pause or resume issued here comes back in the stream's order: applied
/// again when the pause state is not what it set (a record of another host
/// came in between). Journaled only then.
fn reapply(p: &Project, r: &Record) -> io::Result<Option<Applied>> {
    let now = crate::daemon::gate::pause_state(p);
    let differs = match (&r.action, &now) {
        (Action::Resume, Some(_)) => true,
        (Action::Pause { .. }, None) => true,
        (Action::Pause { types }, Some(st)) => {
            !st.types.is_empty() && (types.is_empty() || types.iter().any(|t| !st.covers(t)))
        }
        _ => false,
    };
    if !differs {
        return Ok(None);
    }
    Ok(Some(
        apply(p, r)?.map(|o| format!("{o} (again, in the stream's order)")),
    ))
}
