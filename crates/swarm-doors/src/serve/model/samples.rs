//! The charts' history: each role's queue depth over time and its
//! latency samples per stage, seeded from the journal's end when the
//! server starts and then fed by each `completed` line. The invariant: the
//! depth at any time after the first line read is exact without reading a
//! copy (daemon/progress.rs says each copy's enqueue and dequeue).

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde_json::{json, Value};

use crate::daemon::journal::{Kind, Stamps};
use crate::daemon::progress::Line;
use crate::protocol::clock;
use crate::protocol::clock::Instant;
use crate::protocol::trail::Stamp;
use crate::sys::log_reader::EventReader;

use super::{stamp_ms, Model, DEPTH_POINTS, HISTORY_BYTES, SAMPLES, STAGES};

/// A role's latency samples per stage, and their summary (computed when a
/// sample arrives, not on every refresh).
#[derive(Default)]
pub(super) struct Samples {
    pub(super) stages: [VecDeque<i64>; 3],
    pub(super) summary: Value,
}

impl Samples {
    pub(super) fn push(&mut self, stage: usize, ms: i64) {
        let v = &mut self.stages[stage];
        if v.len() == SAMPLES {
            v.pop_front();
        }
        v.push_back(ms.max(0));
        self.summary = Value::Null;
    }

    /// Per stage: p50 in ms and the count, or null when nothing was measured.
    pub(super) fn json(&mut self) -> Value {
        if self.summary.is_null() {
            self.summary = self.summarize();
        }
        self.summary.clone()
    }

    pub(super) fn summarize(&self) -> Value {
        let mut out = serde_json::Map::new();
        for (i, name) in STAGES.iter().enumerate() {
            let mut v: Vec<i64> = self.stages[i].iter().copied().collect();
            v.sort_unstable();
            out.insert(
                name.to_string(),
                if v.is_empty() {
                    Value::Null
                } else {
                    json!({"p50_ms": v[v.len() / 2], "count": v.len()})
                },
            );
        }
        Value::Object(out)
    }
}

impl Model {
    /// Depth and latency before the server started, from the journal's
    /// last [`HISTORY_BYTES`] (up to `end`): each copy's wait runs from its
    /// `enqueued_at` to its `dequeued_at`, as its `dequeued` or `completed`
    /// line says (daemon/progress.rs); what waits now is in the `inbox/new`
    /// folders, since its `enqueued_at`. So the depth at any time after the
    /// first line read is exact without reading a copy, and the latency
    /// samples are the `completed` lines' stamps.
    pub(super) fn seed_history(&mut self, end: u64) {
        let path = self.project.events_file();
        let from =
            crate::sys::log_reader::line_at_or_after(&path, end.saturating_sub(HISTORY_BYTES));
        let mut waits: HashMap<(String, String), (Option<i64>, Option<i64>)> = HashMap::new();
        let mut first: Option<i64> = None;
        let mut done: Vec<(String, Stamps)> = Vec::new();
        if let Ok(mut r) = EventReader::new(&path, from) {
            let _ = r.poll(&mut |line, next| {
                if next > end {
                    return Ok(());
                }
                let Some(l) = Line::parse(line) else {
                    return Ok(());
                };
                if let Some(t) = clock::parse(&l.time) {
                    first.get_or_insert(t.timestamp_millis());
                }
                if let Some(kind) = l.progress() {
                    if let (Some(id), Some(rc)) = (l.id, l.recipient) {
                        let s = l.stamps.clone().unwrap_or_default();
                        let secs = |v: &Option<String>| {
                            v.as_deref()
                                .and_then(clock::parse)
                                .map(|t| t.timestamp_millis())
                        };
                        let w = waits.entry((id, rc.clone())).or_default();
                        w.0 = w.0.or(secs(&s.enqueued_at));
                        w.1 = w.1.or(secs(&s.dequeued_at));
                        if kind == Kind::Completed {
                            done.push((rc, s));
                        }
                    }
                }
                Ok(())
            });
        }
        for (rc, s) in done {
            self.sample_stamps(&rc, &s);
        }
        let mut steps: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
        for ((_, rc), (enq, deq)) in waits {
            let s = steps.entry(rc).or_default();
            if let Some(e) = enq {
                s.push((e, 1));
                if let Some(d) = deq {
                    s.push((d, -1));
                }
            }
        }
        for r in self.roles.roles.clone() {
            let new = self.worktree_of(&r).inbox_new();
            let s = steps.entry(r.name.clone()).or_default();
            for t in self.folders.sinces(&new) {
                s.push((Instant::from(t).timestamp_millis(), 1));
            }
        }
        let first = first.unwrap_or(i64::MAX);
        for (role, mut s) in steps {
            s.sort_unstable();
            let mut n = 0i64;
            let mut pts: VecDeque<(i64, u64)> = VecDeque::new();
            for (t, d) in s {
                n += d;
                // Before the first line read, copies gone by then are
                // not counted: not charted.
                let t = if first == i64::MAX { t } else { t.max(first) };
                match pts.back_mut() {
                    Some(last) if last.0 == t => last.1 = n.max(0) as u64,
                    _ => pts.push_back((t, n.max(0) as u64)),
                }
            }
            while pts.len() > DEPTH_POINTS {
                pts.pop_front();
            }
            self.depth.insert(role, pts);
        }
    }

    /// One latency sample from a `completed` line's stamps.
    pub(super) fn sample_stamps(&mut self, role: &str, s: &Stamps) {
        let st = |v: &Option<String>| Stamp::of(v.as_deref());
        self.sample(
            role,
            &st(&s.created_at),
            &st(&s.enqueued_at),
            &st(&s.dequeued_at),
            &st(&s.completed_at),
        );
    }

    pub(super) fn sample(&mut self, role: &str, cr: &Stamp, en: &Stamp, de: &Stamp, co: &Stamp) {
        let s = self.latency.entry(role.to_string()).or_default();
        for (i, v) in [stamp_ms(cr, en), stamp_ms(en, de), stamp_ms(de, co)]
            .into_iter()
            .enumerate()
        {
            if let Some(ms) = v {
                s.push(i, ms);
            }
        }
    }
}
