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
use crate::agent::queue::current_items;
use crate::protocol::clock::{self, Instant};
use crate::protocol::config::Limits;
use crate::protocol::grammar::{addressed, in_cc};
use crate::protocol::header::Header;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::swarm::Swarm;
use crate::protocol::trail::{Copy, Original, Place, Stamp, Trail};
use crate::protocol::{audit_pending, delivery_retry, store};
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

const STAMPS: [Header; 4] = [
    Header::CreatedAt,
    Header::EnqueuedAt,
    Header::DequeuedAt,
    Header::CompletedAt,
];

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
    for (name, v) in [(Header::Id, &c.id), (Header::Recipient, &c.recipient)] {
        if v.is_none() {
            out.add("missing_header", &subject, format!("no '{name}' header"));
        }
    }
    check_stamps(c, &subject, out);
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

/// A copy's stamps: each parses, those its folder needs are there, those it
/// must not have yet are not, and they run in order.
fn check_stamps(c: &Copy, subject: &str, out: &mut Out) {
    let s = stamps(c);
    for (i, st) in s.iter().enumerate() {
        if let Stamp::Bad(v) = st {
            out.add(
                "bad_time",
                subject,
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
                subject,
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
                subject,
                format!(
                    "'{}' set but the copy is in {}/",
                    STAMPS[i],
                    c.place.as_str()
                ),
            );
        }
    }
    // Each present stamp must not precede the latest earlier present one.
    let mut prev: Option<(usize, Instant)> = None;
    for (i, st) in s.iter().enumerate() {
        if let Some(t) = st.at() {
            if let Some((j, p)) = prev {
                if t < p {
                    out.add(
                        "time_order",
                        subject,
                        format!(
                            "{} {} is before {} {}",
                            STAMPS[i],
                            clock::iso(t),
                            STAMPS[j],
                            clock::iso(p)
                        ),
                    );
                }
            }
            prev = Some((i, t));
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
pub fn verify(t: &Trail, lag: Lag) -> Findings {
    let mut v = Verify {
        t,
        homes: role_worktrees(t),
        originals: HashMap::new(),
        lag,
        out: Out(Vec::new()),
        pending: Out(Vec::new()),
    };
    v.unreadable_and_rejected();
    v.index_originals();
    let held = v.copies();
    v.duplicate_copies(&held);
    v.missing_copies(&held);
    let mut violations = v.out.0;
    violations.sort();
    let mut pending = v.pending.0;
    pending.sort();
    Findings {
        violations,
        pending,
    }
}

/// The copies of each id by the inbox that holds them (for a recipient
/// outside roles.tsv, by its name).
type Held<'a> = HashMap<(&'a str, Slot<'a>), Vec<&'a Copy>>;

/// One check of a trail in progress: what is known so far and what it found.
struct Verify<'a> {
    t: &'a Trail,
    /// Each role's worktree index (role_worktrees).
    homes: HashMap<&'a str, usize>,
    /// The originals of each id, by index in `t.originals`.
    originals: HashMap<&'a str, Vec<usize>>,
    lag: Lag,
    out: Out,
    pending: Out,
}

impl<'a> Verify<'a> {
    /// Folders that did not list, files that did not parse, copies a queue
    /// helper moved aside.
    fn unreadable_and_rejected(&mut self) {
        let (t, out) = (self.t, &mut self.out);
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
    }

    /// Originals by id: each with its headers, and one original per id.
    fn index_originals(&mut self) {
        let t = self.t;
        for (i, o) in t.originals.iter().enumerate() {
            let subject = shown(&o.path);
            for name in [Header::Id, Header::From, Header::To, Header::CreatedAt] {
                if o.msg.get(name).is_none() {
                    self.out
                        .add("missing_header", &subject, format!("no '{name}' header"));
                }
            }
            if let Stamp::Bad(v) = &o.created {
                self.out.add(
                    "bad_time",
                    &subject,
                    format!("'created_at' is not an RFC 3339 time: {v}"),
                );
            }
            if !o.id().is_empty() {
                self.originals.entry(o.id()).or_default().push(i);
            }
        }
        for (id, idx) in &self.originals {
            if idx.len() > 1 {
                let paths: Vec<String> = idx.iter().map(|&i| shown(&t.originals[i].path)).collect();
                self.out.add(
                    "duplicate_original",
                    *id,
                    format!("{} originals: {}", idx.len(), paths.join(", ")),
                );
            }
        }
    }

    /// Copies, one by one and by (id, inbox). Roles sharing a worktree share
    /// one inbox, and the daemon delivers a message once per inbox (the copy
    /// names the first of them), so presence is counted per inbox.
    fn copies(&mut self) -> Held<'a> {
        let t = self.t;
        let mut held: Held<'a> = HashMap::new();
        for c in &t.copies {
            check_copy(t, c, &self.homes, &mut self.out);
            let Some(id) = c.id.as_deref() else {
                continue;
            };
            let orig = self.originals.get(id).map(|v| &t.originals[v[0]]);
            if orig.is_none() {
                self.orphan(c, id);
            }
            let Some(r) = c.recipient.as_deref() else {
                continue;
            };
            self.addressed_to(c, orig, r);
            // A copy in another role's inbox is never seen by its recipient.
            let s = match self.homes.get(r) {
                Some(&h) => Slot::Inbox(h),
                None => Slot::Role(r),
            };
            if s == Slot::Inbox(c.worktree) || matches!(s, Slot::Role(_)) {
                held.entry((id, s)).or_default().push(c);
            }
        }
        held
    }

    /// A copy without an original: lost, or not here yet.
    fn orphan(&mut self, c: &Copy, id: &str) {
        let detail = format!("no original of {id} in any outbox, sent/ or failed/");
        match self.lag.judge_orphan(self.t, id, c.from.as_deref()) {
            Judged::Lost(why) if why.is_empty() => {
                self.out.add("orphan_copy", shown(&c.path), detail)
            }
            Judged::Lost(why) => {
                self.out
                    .add("orphan_copy", shown(&c.path), format!("{detail}: {why}"))
            }
            Judged::Pending(why) => self.pending.add(
                "orphan_copy",
                shown(&c.path),
                format!("{detail} yet: {why}"),
            ),
        }
    }

    /// A copy's recipient is in its `to` (or `cc`).
    fn addressed_to(&mut self, c: &Copy, orig: Option<&Original>, r: &str) {
        let from = c
            .from
            .as_deref()
            .or_else(|| orig.and_then(|o| o.msg.sender()))
            .unwrap_or("");
        let to = c.to.as_deref().or_else(|| orig.and_then(|o| o.msg.to()));
        if let Some(to) = to {
            if !addressed(to, from, r) && !in_cc(c.cc.as_deref(), r) {
                self.out.add(
                    "recipient_not_in_to",
                    shown(&c.path),
                    format!("recipient '{r}' is not in to '{to}' (from '{from}')"),
                );
            }
        }
    }

    /// One copy per id and inbox: more is a duplicate, or a completed twice.
    fn duplicate_copies(&mut self, held: &Held<'a>) {
        for ((id, _), copies) in held {
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
                self.out.add(
                    "completed_twice",
                    subject,
                    format!("{done} completed copies: {}", paths()),
                );
            } else if copies.len() > 1 {
                self.out.add(
                    "duplicate_copy",
                    subject,
                    format!("{} copies: {}", copies.len(), paths()),
                );
            }
        }
    }

    /// Every delivered message reached every recipient's inbox.
    /// In file order, not the map's: the messages are read in the order they
    /// lie in memory (this loop was bound by cache misses on 50 000 messages).
    fn missing_copies(&mut self, held: &Held<'a>) {
        let t = self.t;
        for (i, o) in t.originals.iter().enumerate() {
            if o.place != Place::Sent || o.id().is_empty() {
                continue;
            }
            let id = o.id();
            // The first original in sent/ of its id speaks for it.
            let first = self.originals.get(id).and_then(|idx| {
                idx.iter()
                    .copied()
                    .find(|&j| t.originals[j].place == Place::Sent)
            });
            if first != Some(i) {
                continue;
            }
            for (s, names) in self.wanted(o) {
                let present = match s {
                    Slot::Unknown => held.contains_key(&(id, Slot::Role(names[0].as_str()))),
                    _ => held.contains_key(&(id, s)),
                };
                if !present {
                    self.missing(o, &names);
                }
            }
        }
    }

    /// The inboxes an original is for, each with its recipients' names (a
    /// name outside roles.tsv on its own).
    fn wanted(&self, o: &Original) -> Vec<(Slot<'static>, Vec<String>)> {
        let from = o.msg.sender().unwrap_or("");
        let mut wanted: Vec<(Slot, Vec<String>)> = Vec::new();
        for r in self.t.roles.recipients(o.msg.to().unwrap_or(""), from) {
            let s = match self.homes.get(r.as_str()) {
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
        wanted
    }

    /// No copy of `o` for `names`: lost, or not here yet.
    fn missing(&mut self, o: &Original, names: &[String]) {
        let id = o.id();
        let who = names.join(",");
        let subject = format!("{id} -> {who}");
        let detail = format!("no copy at {who} of {}", shown(&o.path));
        match self.lag.judge(self.t, o, names) {
            Judged::Lost(why) if why.is_empty() => self.out.add("missing_copy", subject, detail),
            Judged::Lost(why) => self
                .out
                .add("missing_copy", subject, format!("{detail}: {why}")),
            Judged::Pending(why) => {
                self.pending
                    .add("missing_copy", subject, format!("{detail} yet: {why}"))
            }
        }
    }
}

/// Every delivery the daemon has failed three times and still retries
/// (protocol::delivery_retry): not lost, but not moving either, so the
/// check is not OK until it goes out or the file is removed.
pub fn delivery_attention(project: &Project) -> Vec<Violation> {
    delivery_retry::attention(project)
        .into_iter()
        .map(|a| match a {
            Ok(a) => Violation {
                kind: "delivery_attention",
                subject: shown(&a.handoff),
                detail: format!(
                    "{} failed delivery attempts since {}, last: {} (record {})",
                    a.retry.attempt,
                    clock::iso(a.retry.first_failed_at),
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
pub fn blocked_by_audit(swarm: &Swarm) -> Vec<Violation> {
    let Ok(roles) = swarm.roles() else {
        return Vec::new();
    };
    let max = store::copy_limit(
        swarm
            .config()
            .map(|c| c.limits.max_file_bytes)
            .unwrap_or_else(|_| Limits::default().max_file_bytes),
    );
    let mut out = Vec::new();
    for r in &roles.roles {
        let wt = Worktree::new(&r.worktree_path);
        let Some(file) = audit_pending::open_for_file(&wt, &r.name) else {
            continue;
        };
        if current_items(&wt, max).is_empty() {
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
