//! The long poll: `ready-next --wait SECS`, `done-current --wait SECS` and
//! the MCP `next` tool block until an item arrives in `inbox/new` or the
//! time is up, then answer `NO_TASK`. File events wake the wait (events are
//! hints, so the queue is re-checked after every wake and on a short timer
//! as a safety net); there is no polling loop.

use std::time::{Duration, Instant};

use crate::agent::queue::{Inbox, Item, Ready};
use crate::error::{Error, Result};
use crate::protocol::roles::ReceiveMode;
use crate::sys::watch::DirWatch;

/// Longest `--wait` a shell agent may ask for (a tool call that blocks
/// longer than this is almost surely a mistake).
pub const MAX_WAIT_SECS: u64 = 3600;

/// Re-check interval while waiting: a lost event costs at most this long.
const RECHECK: Duration = Duration::from_secs(2);

/// A `--wait` value: whole seconds from 0 to [`MAX_WAIT_SECS`].
pub fn parse_wait(v: &str) -> Result<Duration> {
    match v.parse::<u64>() {
        Ok(n) if n <= MAX_WAIT_SECS && !v.starts_with('+') => Ok(Duration::from_secs(n)),
        _ => Err(Error::bad_input(format!(
            "expected whole seconds from 0 to {MAX_WAIT_SECS}; got '{}'",
            crate::text::escape(v)
        ))),
    }
}

/// The next item, waiting up to `wait` for one to be delivered. Reactions
/// taken meanwhile are returned with it (they never end the wait: a
/// reaction is delivered without a wake-up).
pub fn ready_wait(inbox: &Inbox, mode: ReceiveMode, wait: Duration) -> Result<(Ready, Vec<Item>)> {
    let (first, mut reactions) = inbox.ready_noted(mode)?;
    if !matches!(first, Ready::NoTask) || wait.is_zero() {
        return Ok((first, reactions));
    }
    let deadline = Instant::now() + wait;
    // Watched before the next look, so a delivery between that look and the
    // first wait still sends an event.
    let mut watch = DirWatch::new(vec![inbox.wt.inbox_new()]);
    loop {
        let (r, more) = inbox.ready_noted(mode)?;
        reactions.extend(more);
        if !matches!(r, Ready::NoTask) {
            return Ok((r, reactions));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok((Ready::NoTask, reactions));
        }
        watch.wait_for(left.min(RECHECK));
    }
}

/// `done-current --wait`: after a completion whose follow-up found nothing,
/// wait like `ready-next --wait` (a refusal of the follow-up is kept).
pub fn done_then_wait(
    inbox: &Inbox,
    mode: ReceiveMode,
    failed: Option<&str>,
    wait: Duration,
) -> Result<crate::agent::queue::Done> {
    let mut d = inbox.done_failed(mode, failed)?;
    if matches!(d.next, Ok(Ready::NoTask)) && !wait.is_zero() {
        match ready_wait(inbox, mode, wait) {
            Ok((r, more)) => {
                d.next = Ok(r);
                d.reactions.extend(more);
            }
            Err(e) => d.next = Err(e),
        }
    }
    Ok(d)
}
