//! Tokens and cost per role for the cockpit, summed from the usage journal
//! (telemetry/usage.rs). The one place that turns records into money: when
//! cost is computed from `prices:` instead of taken from `cost_usd`, only
//! [`cost_of`] changes.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::telemetry::jsonl;
use crate::telemetry::usage::{self, Usage};

/// What a role (or the swarm) spent.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Spend {
    pub tokens: u64,
    pub cost_usd: f64,
    pub turns: u64,
}

impl Spend {
    fn add(&mut self, u: &Usage) {
        self.tokens = self.tokens.saturating_add(u.total_tokens());
        self.cost_usd += cost_of(u);
        self.turns += 1;
    }
}

/// One record's cost in US dollars.
pub fn cost_of(u: &Usage) -> f64 {
    u.cost_usd
        .filter(|c| c.is_finite() && *c >= 0.0)
        .unwrap_or(0.0)
}

/// What the cockpit shows: per role today (`day` is `YYYY-MM-DD`, UTC), the
/// swarm's total today, and the cost of each of the last days.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub day: String,
    pub roles: BTreeMap<String, Spend>,
    pub total: Spend,
    /// `(day, cost_usd)`, oldest first, at most [`DAYS`].
    pub by_day: Vec<(String, f64)>,
}

/// Days of history in the cost chart.
pub const DAYS: usize = 14;

/// The usage journal as the cockpit keeps it: read from an offset (each
/// change reads only the lines appended since), summed into one bucket per
/// day and role for the newest [`DAYS`] days. Memory is bounded by days
/// times roles, not by the journal's length; the cost chart shows the past
/// whether or not a page was open. A journal replaced or cut short is read
/// afresh.
#[derive(Default)]
pub struct Ledger {
    inode: u64,
    offset: u64,
    days: BTreeMap<String, BTreeMap<String, Spend>>,
}

impl Ledger {
    /// Reads what was appended to `path` since the last call; true when
    /// the sums changed.
    pub fn read(&mut self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        let (inode, len) = std::fs::metadata(path)
            .map(|m| (m.ino(), m.len()))
            .unwrap_or((0, 0));
        let mut changed = false;
        if inode != self.inode || len < self.offset {
            changed = !self.days.is_empty();
            *self = Ledger {
                inode,
                ..Ledger::default()
            };
        }
        if len <= self.offset {
            return changed;
        }
        let Ok((records, _, at)) =
            jsonl::read_from(path, self.offset, usage::MAX_LINE, |_: &Usage| true)
        else {
            return changed;
        };
        self.offset = at;
        for u in &records {
            let day = u.time.get(..10).unwrap_or("").to_string();
            self.days
                .entry(day)
                .or_default()
                .entry(u.role.clone())
                .or_default()
                .add(u);
        }
        while self.days.len() > DAYS {
            self.days.pop_first();
        }
        changed || !records.is_empty()
    }

    /// Per role on `day` (`YYYY-MM-DD`, UTC), the swarm's total that day,
    /// and each kept day's cost.
    pub fn summary(&self, day: &str) -> Summary {
        let roles = self.days.get(day).cloned().unwrap_or_default();
        let mut total = Spend::default();
        for r in roles.values() {
            total.tokens = total.tokens.saturating_add(r.tokens);
            total.cost_usd += r.cost_usd;
            total.turns += r.turns;
        }
        Summary {
            day: day.to_string(),
            roles,
            total,
            by_day: self
                .days
                .iter()
                .map(|(d, rs)| (d.clone(), rs.values().map(|r| r.cost_usd).sum()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn today_per_role_and_the_days_before_read_as_appended() {
        let rec = |time: &str, role: &str, tokens: u64, cost: Option<f64>| Usage {
            time: time.into(),
            role: role.into(),
            input_tokens: tokens,
            cost_usd: cost,
            ..Usage::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.jsonl");
        let append = |recs: &[Usage]| {
            let mut text = String::new();
            for r in recs {
                text.push_str(&serde_json::to_string(r).unwrap());
                text.push('\n');
            }
            crate::fsx::append(&path, text.as_bytes()).unwrap();
        };
        let mut l = Ledger::default();
        assert!(!l.read(&path), "no journal yet: nothing spent");
        append(&[
            rec("2026-12-01T10:00:00Z", "coder", 10, Some(1.0)),
            rec("2026-12-02T10:00:00Z", "coder", 20, Some(0.25)),
        ]);
        assert!(l.read(&path));
        assert!(!l.read(&path), "nothing appended: nothing changed");
        append(&[
            rec("2026-12-02T11:00:00Z", "coder", 5, None),
            rec("2026-12-02T11:00:00Z", "qa", 1, Some(f64::NAN)),
        ]);
        assert!(l.read(&path));
        let s = l.summary("2026-12-02");
        assert_eq!(s.roles["coder"].tokens, 25);
        assert_eq!(s.roles["coder"].cost_usd, 0.25);
        assert_eq!(s.roles["coder"].turns, 2);
        assert_eq!(s.roles["qa"].cost_usd, 0.0);
        assert_eq!(s.total.tokens, 26);
        assert_eq!(s.by_day.len(), 2);
        assert_eq!(s.by_day[0], ("2026-12-01".to_string(), 1.0));

        // Only the newest days are kept, however long the journal.
        let old: Vec<Usage> = (1..=30)
            .map(|d| rec(&format!("2026-10-{d:02}T00:00:00Z"), "qa", 1, Some(1.0)))
            .collect();
        append(&old);
        l.read(&path);
        assert_eq!(l.days.len(), DAYS);
        assert_eq!(
            l.summary("2026-12-02").by_day.last().unwrap().0,
            "2026-12-02"
        );

        // A journal replaced (rotated away by hand) is read afresh.
        std::fs::remove_file(&path).unwrap();
        append(&[rec("2026-12-02T12:00:00Z", "qa", 7, Some(2.0))]);
        assert!(l.read(&path));
        let s = l.summary("2026-12-02");
        assert_eq!(s.total.tokens, 7);
        assert!(!s.roles.contains_key("coder"));
    }
}
