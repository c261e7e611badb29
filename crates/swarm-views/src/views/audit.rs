//! The audit: counts and stage latencies per role and overall, the oldest
//! waiting item and failures by reason, all from the files (`check` verifies
//! the trail itself).
//!
//! Stages are measured on delivered copies: created → enqueued (`created_at`
//! to `enqueued_at`), enqueued → dequeued, dequeued → completed. Percentiles
//! use the nearest-rank method. Originals are counted by their `from` role,
//! copies by their `recipient`.

pub mod bound;
pub mod check;
pub mod journaled;
pub mod lag;

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use crate::protocol::clock::{self, Instant};
use crate::protocol::trail::{Copy, Place, Trail};
use crate::text::escape;

/// Stage names, in order (also the JSON keys).
pub const STAGES: [&str; 3] = [
    "created_to_enqueued",
    "enqueued_to_dequeued",
    "dequeued_to_completed",
];
const STAGE_LABELS: [&str; 3] = [
    "created -> enqueued",
    "enqueued -> dequeued",
    "dequeued -> completed",
];

/// Reason shown for a failed original without a `.error` note.
pub const NO_REASON: &str = "unknown (no .error note)";

/// Percentiles of one stage, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Latency {
    pub count: usize,
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub max: i64,
}

/// Nearest-rank percentiles; `None` for no samples.
pub fn latency(mut v: Vec<i64>) -> Option<Latency> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    let rank = |q: usize| v[(q * n).div_ceil(100).clamp(1, n) - 1];
    Some(Latency {
        count: n,
        p50: rank(50),
        p90: rank(90),
        p99: rank(99),
        max: v[n - 1],
    })
}

/// The item waiting longest in an `inbox/new`.
#[derive(Clone, Debug)]
pub struct Waiting {
    pub id: String,
    pub recipient: String,
    pub path: String,
    pub enqueued: Instant,
}

/// Figures for one role, or for the whole project.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub sent: usize,
    pub failed: usize,
    pub outbox: usize,
    /// Waiting for a person's approval (`pending_approval/`).
    pub held: usize,
    pub new: usize,
    pub in_process: usize,
    pub completed: usize,
    pub samples: [Vec<i64>; 3],
    pub oldest: Option<Waiting>,
    pub failures: BTreeMap<String, usize>,
}

impl Tally {
    fn original(&mut self, place: Place, reason: Option<&str>) {
        match place {
            Place::Sent => self.sent += 1,
            Place::Held => self.held += 1,
            Place::Failed => {
                self.failed += 1;
                *self
                    .failures
                    .entry(reason.unwrap_or(NO_REASON).to_string())
                    .or_default() += 1;
            }
            _ => self.outbox += 1,
        }
    }

    fn copy(&mut self, c: &Copy) {
        match c.place {
            Place::New => self.new += 1,
            Place::InProcess => self.in_process += 1,
            _ => self.completed += 1,
        }
        let stamps = [
            c.created.at(),
            c.enqueued.at(),
            c.dequeued.at(),
            c.completed.at(),
        ];
        for (i, pair) in stamps.windows(2).enumerate() {
            if let (Some(a), Some(b)) = (pair[0], pair[1]) {
                if let Some(us) = (b - a).num_microseconds() {
                    self.samples[i].push(us);
                }
            }
        }
        if c.place == Place::New {
            if let Some(t) = c.enqueued.at() {
                if self.oldest.as_ref().is_none_or(|o| t < o.enqueued) {
                    self.oldest = Some(Waiting {
                        id: c.id.clone().unwrap_or_default(),
                        recipient: c.recipient.clone().unwrap_or_default(),
                        path: c.path.display().to_string(),
                        enqueued: t,
                    });
                }
            }
        }
    }

    pub fn latencies(&self) -> [Option<Latency>; 3] {
        [0, 1, 2].map(|i| latency(self.samples[i].clone()))
    }

    fn is_empty(&self) -> bool {
        self.sent
            + self.failed
            + self.outbox
            + self.held
            + self.new
            + self.in_process
            + self.completed
            == 0
    }
}

/// The whole audit.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub overall: Tally,
    /// Roles in roles.tsv order, then any other name met in the files.
    pub roles: Vec<(String, Tally)>,
    pub malformed: usize,
    pub rejected: usize,
}

/// Tallies a trail read with originals and copies.
pub fn report(t: &Trail) -> Report {
    let mut r = Report {
        malformed: t.bad.len(),
        rejected: t.rejected.len(),
        ..Report::default()
    };
    let mut index: HashMap<String, usize> = HashMap::new();
    for role in &t.roles.roles {
        index.insert(role.name.clone(), r.roles.len());
        r.roles.push((role.name.clone(), Tally::default()));
    }
    let mut extra: BTreeMap<String, Tally> = BTreeMap::new();
    let mut slot = |name: &str, f: &mut dyn FnMut(&mut Tally)| match index.get(name) {
        Some(&i) => f(&mut r.roles[i].1),
        None => f(extra.entry(name.to_string()).or_default()),
    };
    for o in &t.originals {
        let from = o.msg.sender().unwrap_or("?");
        slot(from, &mut |x| x.original(o.place, o.reason.as_deref()));
    }
    for c in &t.copies {
        slot(c.recipient.as_deref().unwrap_or("?"), &mut |x| x.copy(c));
    }
    r.roles.extend(extra);
    for (_, x) in &r.roles {
        let o = &mut r.overall;
        o.sent += x.sent;
        o.failed += x.failed;
        o.outbox += x.outbox;
        o.held += x.held;
        o.new += x.new;
        o.in_process += x.in_process;
        o.completed += x.completed;
        for i in 0..3 {
            o.samples[i].extend_from_slice(&x.samples[i]);
        }
        if let Some(w) = &x.oldest {
            if o.oldest.as_ref().is_none_or(|b| w.enqueued < b.enqueued) {
                o.oldest = Some(w.clone());
            }
        }
        for (reason, n) in &x.failures {
            *o.failures.entry(reason.clone()).or_default() += n;
        }
    }
    r
}

/// A duration for people: `850us`, `12.3ms`, `4.20s`, `3m05s`, `2h03m`, `3d04h`.
pub fn human(us: i64) -> String {
    let sign = if us < 0 { "-" } else { "" };
    let a = us.unsigned_abs();
    let s = a / 1_000_000;
    let body = if a < 1_000 {
        format!("{a}us")
    } else if a < 1_000_000 {
        format!("{:.1}ms", a as f64 / 1e3)
    } else if s < 60 {
        format!("{:.2}s", a as f64 / 1e6)
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else {
        format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600)
    };
    format!("{sign}{body}")
}

fn ms(us: i64) -> f64 {
    us as f64 / 1000.0
}

fn tally_text(x: &Tally, now: Instant, indent: &str) -> String {
    let held = if x.held > 0 {
        format!(", held {} (swarm approve / swarm deny)", x.held)
    } else {
        String::new()
    };
    let mut s = format!(
        "{indent}originals: sent {}, failed {}, outbox {}{held}\n{indent}copies:    new {}, in_process {}, completed {}\n",
        x.sent, x.failed, x.outbox, x.new, x.in_process, x.completed
    );
    s.push_str(&format!(
        "{indent}{:<22} {:>7} {:>9} {:>9} {:>9} {:>9}\n",
        "stage", "count", "p50", "p90", "p99", "max"
    ));
    for (label, l) in STAGE_LABELS.iter().zip(x.latencies()) {
        match l {
            Some(l) => s.push_str(&format!(
                "{indent}{label:<22} {:>7} {:>9} {:>9} {:>9} {:>9}\n",
                l.count,
                human(l.p50),
                human(l.p90),
                human(l.p99),
                human(l.max)
            )),
            None => s.push_str(&format!(
                "{indent}{label:<22} {:>7} {:>9} {:>9} {:>9} {:>9}\n",
                0, "-", "-", "-", "-"
            )),
        }
    }
    match &x.oldest {
        Some(w) => s.push_str(&format!(
            "{indent}oldest waiting: {} at {}, enqueued {} ({} ago)\n",
            escape(&w.id),
            escape(&w.recipient),
            clock::iso(w.enqueued),
            human(micros(now - w.enqueued))
        )),
        None => s.push_str(&format!("{indent}oldest waiting: none\n")),
    }
    if x.failures.is_empty() {
        s.push_str(&format!("{indent}failures: none\n"));
    } else {
        s.push_str(&format!("{indent}failures:\n"));
        for (reason, n) in by_count(&x.failures) {
            s.push_str(&format!("{indent}  {n:>5}  {}\n", escape(reason)));
        }
    }
    s
}

fn micros(d: chrono::TimeDelta) -> i64 {
    d.num_microseconds().unwrap_or(i64::MAX)
}

/// Most frequent first, then by reason.
fn by_count(m: &BTreeMap<String, usize>) -> Vec<(&String, usize)> {
    let mut v: Vec<(&String, usize)> = m.iter().map(|(k, n)| (k, *n)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v
}

/// The text report: overall first, then one block per role.
pub fn text(r: &Report, now: Instant) -> String {
    let mut s = String::from("overall\n");
    s.push_str(&tally_text(&r.overall, now, "  "));
    if r.malformed + r.rejected > 0 {
        s.push_str(&format!(
            "  unreadable or malformed files: {}, rejected by the helpers: {} (see swarm audit --check)\n",
            r.malformed, r.rejected
        ));
    }
    for (name, x) in &r.roles {
        s.push_str(&format!("\nrole {}\n", escape(name)));
        if x.is_empty() {
            s.push_str("  no messages\n");
        } else {
            s.push_str(&tally_text(x, now, "  "));
        }
    }
    s
}

fn tally_json(x: &Tally, now: Instant) -> Value {
    let mut stages = serde_json::Map::new();
    for (key, l) in STAGES.iter().zip(x.latencies()) {
        stages.insert(
            key.to_string(),
            match l {
                Some(l) => json!({
                    "count": l.count,
                    "p50_ms": ms(l.p50),
                    "p90_ms": ms(l.p90),
                    "p99_ms": ms(l.p99),
                    "max_ms": ms(l.max),
                }),
                None => json!({"count": 0, "p50_ms": null, "p90_ms": null, "p99_ms": null, "max_ms": null}),
            },
        );
    }
    let failures: Vec<Value> = by_count(&x.failures)
        .into_iter()
        .map(|(reason, n)| json!({"reason": reason, "count": n}))
        .collect();
    json!({
        "originals": {"sent": x.sent, "failed": x.failed, "outbox": x.outbox, "held": x.held},
        "copies": {"new": x.new, "in_process": x.in_process, "completed": x.completed},
        "stages": stages,
        "oldest_waiting": x.oldest.as_ref().map(|w| json!({
            "id": w.id,
            "recipient": w.recipient,
            "path": w.path,
            "enqueued_at": clock::iso(w.enqueued),
            "age_ms": ms(micros(now - w.enqueued)),
        })),
        "failures": failures,
    })
}

/// The JSON report: `{"now", "overall", "roles": [{"role", ...}], ...}`.
pub fn json(r: &Report, now: Instant) -> Value {
    let roles: Vec<Value> = r
        .roles
        .iter()
        .map(|(name, x)| {
            let mut v = tally_json(x, now);
            if let Some(o) = v.as_object_mut() {
                o.insert("role".into(), Value::String(name.clone()));
            }
            v
        })
        .collect();
    json!({
        "now": clock::iso(now),
        "overall": tally_json(&r.overall, now),
        "roles": roles,
        "malformed": r.malformed,
        "rejected": r.rejected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let l = latency((1..=100).collect()).unwrap();
        assert_eq!((l.p50, l.p90, l.p99, l.max), (50, 90, 99, 100));
        let l = latency(vec![7]).unwrap();
        assert_eq!((l.p50, l.p99, l.count), (7, 7, 1));
        assert!(latency(vec![]).is_none());
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(850), "850us");
        assert_eq!(human(12_345), "12.3ms");
        assert_eq!(human(4_200_000), "4.20s");
        assert_eq!(human(185_000_000), "3m05s");
        assert_eq!(human(7_380_000_000), "2h03m");
        assert_eq!(human(-1_500), "-1.5ms");
        assert_eq!(human(3 * 86_400_000_000 + 4 * 3_600_000_000), "3d04h");
    }
}
