//! When each of handoffd's periodic duties is due next, and how long its
//! loop may wait for an event meanwhile. The loop never waits longer than
//! [`HOUSEKEEPING`], so the stop file, `.swarmforge/`, the core's guards and
//! the object take-in are looked at at least that often.

use std::time::{Duration, Instant};

use crate::protocol::config::DaemonConfig;

/// How often the stop file and `.swarmforge/` are checked between events.
pub(super) const HOUSEKEEPING: Duration = Duration::from_millis(50);
/// How often the features poll between passes (`Feature::poll`: an open
/// digest request checked for completion, say).
pub(super) const FEATURE_POLL: Duration = Duration::from_millis(200);
/// When each periodic duty is due next.
pub(super) struct Timers {
    /// The safety net's pass over every outbox (or the poll, without events).
    pub rescan: Instant,
    /// The re-wake sweep.
    pub sweep: Instant,
    /// The watchdog's look at the agents.
    pub agents: Instant,
    /// The features' poll, between passes.
    pub features: Instant,
}

impl Timers {
    pub fn new(cfg: &DaemonConfig) -> Timers {
        let now = Instant::now();
        Timers {
            rescan: now,
            sweep: now + cfg.sweep.0,
            agents: now + cfg.pane_check.0,
            features: now + FEATURE_POLL,
        }
    }

    /// How long the loop may wait for an event (the features' poll is not
    /// waited for: it runs at the housekeeping pace).
    pub fn wait(&self, now: Instant) -> Duration {
        self.rescan
            .min(self.sweep)
            .min(self.agents)
            .saturating_duration_since(now)
            .min(HOUSEKEEPING)
    }
}
