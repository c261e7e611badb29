//! `swarm audit --check`: verifies the trail and lists every violation.
//!
//! Rules: every file parses; originals carry `id`, `from`, `to`, `created_at`;
//! an id has one original; every message in `sent/` has exactly one copy in
//! each recipient's inbox (`to: all` = every role but the sender; roles that
//! share a worktree share one inbox and one copy); no copy without an original; a copy names its `recipient`, that recipient is in `to` and owns
//! the inbox the copy is in; stamps parse, match the folder the copy is in and
//! run in order (created ≤ enqueued ≤ dequeued ≤ completed); nothing is
//! completed twice; nothing was moved aside to `inbox/rejected/`.

use std::collections::HashMap;
use std::path::Path;

use super::lag::{Judged, Lag};
use crate::protocol::trail::{Copy, Place, Stamp, Trail};
use crate::text::escape;

// The audit's finding, typed beside the trail it judges, so the bridge's
// own audit (`bridge::control_view`) can return it too.
pub use crate::protocol::trail::Violation;

fn shown(p: &Path) -> String {
    p.display().to_string()
}

struct Out(Vec<Violation>);

impl Out {
    fn add(&mut self, kind: &'static str, subject: impl Into<String>, detail: impl Into<String>) {
        self.0.push(Violation {
            kind,
            subject: subject.into(),
            detail: detail.into(),
        });
    }
}

const STAMPS: [&str; 4] = ["created_at", "enqueued_at", "dequeued_at", "completed_at"];

fn stamps(c: &Copy) -> [&Stamp; 4] {
    [&c.created, &c.enqueued, &c.dequeued, &c.completed]
}

/// Where a copy counts: a known role's inbox (by worktree), or, for a name
/// outside roles.tsv, the name itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Slot<'a> {
    Inbox(usize),
    Role(&'a str),
    /// A `to` entry that is no role (only while grouping what is wanted).
    Unknown,
}

/// Index of each role's worktree in `t.worktrees`.
fn role_worktrees(t: &Trail) -> HashMap<&str, usize> {
    t.roles
        .roles
        .iter()
        .filter_map(|r| t.home(&r.name).map(|h| (r.name.as_str(), h)))
        .collect()
}

fn check_copy(t: &Trail, c: &Copy, homes: &HashMap<&str, usize>, out: &mut Out) {
    let subject = shown(&c.path);
    for (name, v) in [("id", &c.id), ("recipient", &c.recipient)] {
        if v.is_none() {
            out.add("missing_header", &subject, format!("no '{name}' header"));
        }
    }
    let s = stamps(c);
    for (i, st) in s.iter().enumerate() {
        if let Stamp::Bad(v) = st {
            out.add(
                "bad_time",
                &subject,
                format!("'{}' is not an RFC 3339 time: {v}", STAMPS[i]),
            );
        }
    }
    // A copy in in_process/ may lack `dequeued_at`: a take is a move, then
    // the stamp, and a crash (or power cut) between them leaves exactly
    // that; the next ready-next or done-current finishes the stamp
    // (docs/transcript-and-audit.md, "An interrupted take").
    let must: &[usize] = match c.place {
        Place::New | Place::InProcess => &[0, 1],
        _ => &[0, 1, 2, 3],
    };
    for &i in must {
        if s[i].is_missing() {
            out.add(
                "missing_header",
                &subject,
                format!("no '{}' header in {}/", STAMPS[i], c.place.as_str()),
            );
        }
    }
    // And `completed_at` in in_process/: a done step stamps, then moves; the
    // next ready-next finishes the move.
    let must_not: &[usize] = match c.place {
        Place::New => &[2, 3],
        _ => &[],
    };
    for &i in must_not {
        if !s[i].is_missing() {
            out.add(
                "state_mismatch",
                &subject,
                format!(
                    "'{}' set but the copy is in {}/",
                    STAMPS[i],
                    c.place.as_str()
                ),
            );
        }
    }
    // Each present stamp must not precede the latest earlier present one.
    let mut prev: Option<(usize, crate::protocol::clock::Instant)> = None;
    for (i, st) in s.iter().enumerate() {
        if let Some(t) = st.at() {
            if let Some((j, p)) = prev {
                if t < p {
                    out.add(
                        "time_order",
                        &subject,
                        format!(
                            "{} {} is before {} {}",
                            STAMPS[i],
                            crate::protocol::clock::iso(t),
                            STAMPS[j],
                            crate::protocol::clock::iso(p)
                        ),
                    );
                }
            }
            prev = Some((i, t));
        }
    }
    if let Some(r) = &c.recipient {
        match homes.get(r.as_str()) {
            None => out.add(
                "unknown_recipient",
                &subject,
                format!("recipient '{r}' is not in roles.tsv"),
            ),
            Some(&home) if home != c.worktree => out.add(
                "wrong_inbox",
                &subject,
                format!("recipient '{r}' works in {}", shown(&t.worktrees[home])),
            ),
            _ => {}
        }
    }
}

/// Every violation, sorted by kind then subject. Copies crossing hosts are
/// left out (judged without a [`Lag::before_load`], they are all pending):
/// see [`verify`].
pub fn check(t: &Trail) -> Vec<Violation> {
    verify(t, Lag::default()).violations
}

/// What the check found: broken rules, and copies not here yet that the
/// files cannot call lost (docs/transcript-and-audit.md, "Lag is not loss").
#[derive(Clone, Debug, Default)]
pub struct Findings {
    pub violations: Vec<Violation>,
    /// Same shape as a violation, `kind` `missing_copy` or `orphan_copy`.
    pub pending: Vec<Violation>,
}

impl Findings {
    /// `PENDING <kind> <subject>: <detail>` lines.
    pub fn pending_lines(&self) -> String {
        self.pending
            .iter()
            .map(|p| {
                format!(
                    "PENDING {} {}: {}\n",
                    p.kind,
                    escape(&p.subject),
                    escape(&p.detail)
                )
            })
            .collect()
    }
}

/// Every violation and every pending copy, each sorted by kind then
/// subject; `lag` read before `t` was loaded.
pub fn verify<'a>(t: &'a Trail, mut lag: Lag) -> Findings {
    let mut out = Out(Vec::new());
    let mut pending = Out(Vec::new());
    for (dir, e) in &t.unreadable {
        out.add("unreadable_dir", shown(dir), e.clone());
    }
    for b in &t.bad {
        out.add("malformed", shown(&b.path), b.reason.clone());
    }
    for r in &t.rejected {
        out.add(
            "rejected",
            shown(&r.path),
            r.reason
                .clone()
                .unwrap_or_else(|| "moved aside by a queue helper".into()),
        );
    }

    // Originals by id.
    let mut originals: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, o) in t.originals.iter().enumerate() {
        let subject = shown(&o.path);
        for name in ["id", "from", "to", "created_at"] {
            if o.msg.get(name).is_none() {
                out.add("missing_header", &subject, format!("no '{name}' header"));
            }
        }
        if let Stamp::Bad(v) = &o.created {
            out.add(
                "bad_time",
                &subject,
                format!("'created_at' is not an RFC 3339 time: {v}"),
            );
        }
        if !o.id().is_empty() {
            originals.entry(o.id()).or_default().push(i);
        }
    }
    for (id, idx) in &originals {
        if idx.len() > 1 {
            let paths: Vec<String> = idx.iter().map(|&i| shown(&t.originals[i].path)).collect();
            out.add(
                "duplicate_original",
                *id,
                format!("{} originals: {}", idx.len(), paths.join(", ")),
            );
        }
    }

    // Copies, one by one and by (id, inbox). Roles sharing a worktree share
    // one inbox, and the daemon delivers a message once per inbox (the copy
    // names the first of them), so presence is counted per inbox.
    let homes = role_worktrees(t);
    let slot = |r: &'a str| match homes.get(r) {
        Some(&h) => Slot::Inbox(h),
        None => Slot::Role(r),
    };
    let mut held: HashMap<(&str, Slot), Vec<&Copy>> = HashMap::new();
    for c in &t.copies {
        check_copy(t, c, &homes, &mut out);
        let Some(id) = c.id.as_deref() else {
            continue;
        };
        let orig = originals.get(id).map(|v| &t.originals[v[0]]);
        if orig.is_none() {
            let detail = format!("no original of {id} in any outbox, sent/ or failed/");
            match lag.judge_orphan(t, id, c.from.as_deref()) {
                Judged::Lost(why) if why.is_empty() => {
                    out.add("orphan_copy", shown(&c.path), detail)
                }
                Judged::Lost(why) => {
                    out.add("orphan_copy", shown(&c.path), format!("{detail}: {why}"))
                }
                Judged::Pending(why) => pending.add(
                    "orphan_copy",
                    shown(&c.path),
                    format!("{detail} yet: {why}"),
                ),
            }
        }
        let Some(r) = c.recipient.as_deref() else {
            continue;
        };
        let from = c
            .from
            .as_deref()
            .or_else(|| orig.and_then(|o| o.msg.sender()))
            .unwrap_or("");
        let to = c.to.as_deref().or_else(|| orig.and_then(|o| o.msg.to()));
        if let Some(to) = to {
            if !crate::protocol::grammar::addressed(to, from, r)
                && !crate::protocol::grammar::in_cc(c.cc.as_deref(), r)
            {
                out.add(
                    "recipient_not_in_to",
                    shown(&c.path),
                    format!("recipient '{r}' is not in to '{to}' (from '{from}')"),
                );
            }
        }
        // A copy in another role's inbox is never seen by its recipient.
        let s = slot(r);
        if s == Slot::Inbox(c.worktree) || matches!(s, Slot::Role(_)) {
            held.entry((id, s)).or_default().push(c);
        }
    }
    for ((id, _), copies) in &held {
        // One copy is the rule: skipped without touching it (the map is
        // visited in hash order, so each touch would be a cache miss).
        if copies.len() < 2 {
            continue;
        }
        let mut names: Vec<&str> = copies
            .iter()
            .filter_map(|c| c.recipient.as_deref())
            .collect();
        names.sort_unstable();
        names.dedup();
        let subject = format!("{id} -> {}", names.join(","));
        let paths = || {
            let mut v: Vec<String> = copies.iter().map(|c| shown(&c.path)).collect();
            v.sort();
            v.join(", ")
        };
        let done = copies
            .iter()
            .filter(|c| c.place == Place::Completed)
            .count();
        if done > 1 {
            out.add(
                "completed_twice",
                subject,
                format!("{done} completed copies: {}", paths()),
            );
        } else if copies.len() > 1 {
            out.add(
                "duplicate_copy",
                subject,
                format!("{} copies: {}", copies.len(), paths()),
            );
        }
    }

    // Every delivered message reached every recipient's inbox.
    // In file order, not the map's: the messages are read in the order they
    // lie in memory (this loop was bound by cache misses on 50 000 messages).
    for (i, o) in t.originals.iter().enumerate() {
        if o.place != Place::Sent || o.id().is_empty() {
            continue;
        }
        let id = o.id();
        // The first original in sent/ of its id speaks for it.
        let first = originals.get(id).and_then(|idx| {
            idx.iter()
                .copied()
                .find(|&j| t.originals[j].place == Place::Sent)
        });
        if first != Some(i) {
            continue;
        }
        let id = &id;
        let from = o.msg.sender().unwrap_or("");
        let mut wanted: Vec<(Slot, Vec<String>)> = Vec::new();
        for r in t.roles.recipients(o.msg.to().unwrap_or(""), from) {
            let s = match homes.get(r.as_str()) {
                Some(&h) => Slot::Inbox(h),
                None => Slot::Unknown,
            };
            match wanted
                .iter_mut()
                .find(|(x, _)| *x == s && s != Slot::Unknown)
            {
                Some((_, names)) => names.push(r),
                None => wanted.push((s, vec![r])),
            }
        }
        for (s, names) in wanted {
            let present = match s {
                Slot::Unknown => held.contains_key(&(*id, Slot::Role(names[0].as_str()))),
                _ => held.contains_key(&(*id, s)),
            };
            if !present {
                let who = names.join(",");
                let subject = format!("{id} -> {who}");
                let detail = format!("no copy at {who} of {}", shown(&o.path));
                match lag.judge(t, o, &names) {
                    Judged::Lost(why) if why.is_empty() => out.add("missing_copy", subject, detail),
                    Judged::Lost(why) => {
                        out.add("missing_copy", subject, format!("{detail}: {why}"))
                    }
                    Judged::Pending(why) => {
                        pending.add("missing_copy", subject, format!("{detail} yet: {why}"))
                    }
                }
            }
        }
    }
    let mut violations = out.0;
    violations.sort();
    let mut pending = pending.0;
    pending.sort();
    Findings {
        violations,
        pending,
    }
}

/// Every delivery the daemon has failed three times and still retries
/// (protocol::delivery_retry): not lost, but not moving either, so the
/// check is not OK until it goes out or the file is removed.
pub fn delivery_attention(project: &crate::protocol::layout::Project) -> Vec<Violation> {
    crate::protocol::delivery_retry::attention(project)
        .into_iter()
        .map(|a| match a {
            Ok(a) => Violation {
                kind: "delivery_attention",
                subject: shown(&a.handoff),
                detail: format!(
                    "{} failed delivery attempts since {}, last: {} (record {})",
                    a.retry.attempt,
                    crate::protocol::clock::iso(a.retry.first_failed_at),
                    a.retry.last_error,
                    shown(&a.record)
                ),
            },
            Err((record, why)) => Violation {
                kind: "delivery_attention",
                subject: shown(&record),
                detail: format!("unreadable record: {why}"),
            },
        })
        .collect()
}

/// Every role the audit guard keeps from new work for good (agent::guard):
/// the audit gate holds its git handoff back while nothing is in process,
/// so `ready-next` refuses until the handoff is queued or dropped.
pub fn blocked_by_audit(project: &crate::protocol::layout::Project) -> Vec<Violation> {
    let Ok(roles) = crate::protocol::roles::Roles::load(&project.roles_tsv()) else {
        return Vec::new();
    };
    let max = crate::protocol::store::copy_limit(
        crate::protocol::config::Config::load(&project.config_file())
            .map(|c| c.limits.max_file_bytes)
            .unwrap_or_else(|_| crate::protocol::config::Limits::default().max_file_bytes),
    );
    let mut out = Vec::new();
    for r in &roles.roles {
        let wt = crate::protocol::layout::Worktree::new(&r.worktree_path);
        let Some(file) = crate::protocol::audit_pending::open_for_file(&wt, &r.name) else {
            continue;
        };
        if crate::agent::queue::current_items(&wt, max).is_empty() {
            out.push(Violation {
                kind: "audit_pending",
                subject: shown(&file),
                detail: format!(
                    "the audit gate holds {}'s git handoff back and nothing is in process, so it takes no new work (AUDIT_PENDING): run swarm-handoff again on the unchanged draft, or done-current --drop as {}",
                    r.name, r.name
                ),
            });
        }
    }
    out
}

/// `CHECK OK: ...` or `CHECK FAILED: ...` with the counts read (and the
/// copies still pending, if any).
pub fn summary(t: &Trail, violations: &[Violation], pending: usize) -> String {
    let mut counts = format!(
        "{} originals, {} copies, {} unreadable",
        t.originals.len(),
        t.copies.len(),
        t.bad.len()
    );
    if pending > 0 {
        counts.push_str(&format!(", {pending} pending"));
    }
    if violations.is_empty() {
        format!("CHECK OK: {counts}\n")
    } else {
        let n = violations.len();
        let s = if n == 1 { "" } else { "s" };
        format!("CHECK FAILED: {n} violation{s} ({counts})\n")
    }
}
