//! Tokens and cost per role for the cockpit, summed from the usage journal
//! (telemetry/usage.rs). The one place that turns records into money: when
//! cost is computed from `prices:` instead of taken from `cost_usd`, only
//! [`cost_of`] changes.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::telemetry::usage::Usage;

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

pub fn summarize(records: &[Usage], day: &str) -> Summary {
    let mut s = Summary {
        day: day.to_string(),
        ..Summary::default()
    };
    let mut days: BTreeMap<String, f64> = BTreeMap::new();
    for u in records {
        let d = u.time.get(..10).unwrap_or("");
        *days.entry(d.to_string()).or_default() += cost_of(u);
        if d == day {
            s.roles.entry(u.role.clone()).or_default().add(u);
            s.total.add(u);
        }
    }
    let skip = days.len().saturating_sub(DAYS);
    s.by_day = days.into_iter().skip(skip).collect();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn today_per_role_and_the_days_before() {
        let rec = |time: &str, role: &str, tokens: u64, cost: Option<f64>| Usage {
            time: time.into(),
            role: role.into(),
            input_tokens: tokens,
            cost_usd: cost,
            ..Usage::default()
        };
        let s = summarize(
            &[
                rec("2026-12-01T10:00:00Z", "coder", 10, Some(1.0)),
                rec("2026-12-02T10:00:00Z", "coder", 20, Some(0.25)),
                rec("2026-12-02T11:00:00Z", "coder", 5, None),
                rec("2026-12-02T11:00:00Z", "qa", 1, Some(f64::NAN)),
            ],
            "2026-12-02",
        );
        assert_eq!(s.roles["coder"].tokens, 25);
        assert_eq!(s.roles["coder"].cost_usd, 0.25);
        assert_eq!(s.roles["coder"].turns, 2);
        assert_eq!(s.roles["qa"].cost_usd, 0.0);
        assert_eq!(s.total.tokens, 26);
        assert_eq!(s.by_day.len(), 2);
        assert_eq!(s.by_day[0], ("2026-12-01".to_string(), 1.0));
    }
}
