//! Re-waking a role whose mail waits unread: a role with waiting items,
//! nothing in process and its oldest waiting item older than `ack_within`
//! is woken again, with backoff doubling up to `rewake_cap`. Recovery is by
//! file state only.
//!
//! Under it, the durable queue of failed wake-ups (protocol::wakeups): a
//! wake-up that failed is tried again when its record's `next-at` comes,
//! by this process or the next one after a restart, as long as the role
//! still has mail waiting and nothing in process; once that is no longer
//! so (the agent took its mail), the record is dropped: nothing is left to
//! wake for. The queue never touches a delivery, and the retry is a
//! re-wake: the waker checks the pane again before it types (daemon/wake.rs).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::{wake, Daemon};
use crate::protocol::clock;
use crate::protocol::config::Config;
use crate::protocol::delivery_retry;
use crate::protocol::layout::Worktree;
use crate::protocol::wakeups;

/// Per-role re-wake state: when the next re-wake may happen and the backoff.
pub(super) struct Rewake {
    next: Instant,
    backoff: Duration,
}

/// A queued wake-up handed to the waker: the attempt it retries, and when.
pub(super) struct Issued {
    attempt: u32,
    at: Instant,
}

impl Daemon {
    /// The durable queue's turn (see the module doc).
    pub(super) fn wakeup_queue_sweep(&mut self, cfg: &Config) {
        let queued = wakeups::list(&self.project);
        self.wake_issued
            .retain(|role, _| queued.iter().any(|(r, _)| r == role));
        if queued.is_empty() {
            return;
        }
        let method = wake::method(&self.project, cfg);
        let now = Instant::now();
        for (name, pending) in queued {
            let role = self
                .deliverer
                .roles
                .roles
                .iter()
                .find(|r| r.name == name && r.wakes_here())
                .cloned();
            // No such role (any more), a record that does not read, or no
            // mail left to wake for: nothing to retry.
            let live = match (role, pending) {
                (Some(r), Some(p))
                    if method != wake::Method::None && wake::still_waiting(&r.worktree_path) =>
                {
                    Some((r, p))
                }
                _ => None,
            };
            let Some((role, p)) = live else {
                if let Err(e) = wakeups::remove(&self.project, &name) {
                    eprintln!(
                        "handoffd: cannot remove {}: {e}",
                        wakeups::file(&self.project, &name).display()
                    );
                }
                self.wake_issued.remove(&name);
                continue;
            };
            if p.retry.next_at > clock::now() {
                continue;
            }
            // Handed over already and not failed again since: the waker is
            // on it (or held it back: a busy pane, a dialog); asked again
            // only after another backoff.
            let wait = delivery_retry::backoff(p.retry.attempt);
            if self
                .wake_issued
                .get(&name)
                .is_some_and(|i| i.attempt == p.retry.attempt && now < i.at + wait)
            {
                continue;
            }
            self.wake_issued.insert(
                name.clone(),
                Issued {
                    attempt: p.retry.attempt,
                    at: now,
                },
            );
            self.deliverer.waker.wake(wake::Request {
                role: role.name.clone(),
                session: role.session.clone(),
                worktree: role.worktree_path.clone(),
                path: p.item.clone(),
                method: method.clone(),
                rewake: true,
            });
        }
    }

    pub(super) fn rewake_sweep(&mut self, cfg: &Config) {
        let method = wake::method(&self.project, cfg);
        if method == wake::Method::None {
            return;
        }
        let now = Instant::now();
        for role in self.deliverer.roles.roles.clone() {
            if !role.wakes_here() {
                continue;
            }
            let ack = cfg
                .role(&role.name)
                .and_then(|r| r.ack_within)
                .unwrap_or(cfg.daemon.ack_within)
                .0;
            let wt = Worktree::new(&role.worktree_path);
            let new = wt.inbox_new();
            let max = cfg.limits.max_file_bytes;
            // A deep inbox's oldest item comes from the order index; a
            // shallow one (or without the index) is listed.
            let indexed = self.order.as_ref().and_then(|o| {
                o.oldest(&new, |p| wakes(p, &role.name, max))
                    .map(|found| found.map(|f| (f.path, age(f.placed))))
            });
            let (oldest, waiting) = match indexed {
                // The index saw an item waiting: only in_process/ is left to look at.
                Some(found) => {
                    let w = found.is_some() && wake::nothing_in_process(&role.worktree_path);
                    (found, w)
                }
                None => {
                    let found = oldest_waiting(&new, &role.name, max);
                    let w = found.is_some() && wake::still_waiting(&role.worktree_path);
                    (found, w)
                }
            };
            let Some((path, age)) = oldest.filter(|_| waiting) else {
                self.rewake.remove(&role.name);
                continue;
            };
            if age < ack {
                continue;
            }
            let state = self.rewake.entry(role.name.clone()).or_insert(Rewake {
                next: now,
                backoff: ack,
            });
            if now < state.next {
                continue;
            }
            state.next = now + state.backoff;
            state.backoff = (state.backoff * 2).min(cfg.daemon.rewake_cap.0.max(ack));
            self.deliverer.waker.wake(wake::Request {
                role: role.name.clone(),
                session: role.session.clone(),
                worktree: role.worktree_path.clone(),
                path,
                method: method.clone(),
                rewake: true,
            });
        }
    }
}

/// The oldest `*.handoff` in a folder (by mtime) that should wake `role`
/// (`cc` copies and `wake: no` items are delivered without a wake-up, so they
/// never cause a re-wake either), and its age.
fn oldest_waiting(dir: &Path, role: &str, max_bytes: u64) -> Option<(PathBuf, Duration)> {
    let mut items: Vec<(SystemTime, PathBuf)> = crate::protocol::store::each(dir)
        .filter(|e| e.is_handoff_named())
        .filter_map(|e| Some((e.modified()?, e.path)))
        .collect();
    items.sort();
    let best = items
        .into_iter()
        .find(|(_, p)| wakes(p, role, max_bytes))
        .map(|(t, p)| (p, t));
    let (p, t) = best?;
    Some((p, age(t)))
}

/// Whether the item at `p` should wake `role`: `cc` copies and `wake: no`
/// items are delivered without a wake-up, so they never cause a re-wake.
fn wakes(p: &Path, role: &str, max_bytes: u64) -> bool {
    crate::fsx::read_bounded(p, max_bytes)
        .ok()
        .and_then(|b| crate::protocol::header::Message::parse_bytes(&b).ok())
        .is_none_or(|m| crate::protocol::fields::wakes(&m, role))
}

/// How long ago `t` was. An mtime in the future means the clock stepped
/// back since delivery: the real wait is unknown, so count it as overdue (a
/// re-wake is only a hint, and the backoff spaces the next ones) rather than
/// never re-waking until the wall clock catches up.
fn age(t: SystemTime) -> Duration {
    SystemTime::now().duration_since(t).unwrap_or(Duration::MAX)
}
