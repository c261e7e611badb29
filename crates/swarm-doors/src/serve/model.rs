//! What the cockpit shows, kept in memory and brought up to date by the
//! changes themselves (docs/cockpit.md, "Live updates"): the trail is read
//! once when the server starts; after that a changed file costs a read of
//! that file, only the cards of the roles a change touched are rebuilt
//! (every card every [`CARDS_EVERY`], for what changes without a file),
//! their counts come from the events (`folders`), and the journal is read
//! from its offset.
//! Each change that alters what a page shows becomes one small [`Delta`]
//! with a sequence number; a page loads [`Model::snapshot`] once and then
//! applies the deltas after its `seq`.
//!
//! The invariant: a snapshot at `seq` plus every delta after `seq` is what
//! a fresh snapshot would show (deltas replace whole keyed entries: a
//! message by id, a role's card by name, the attention list as a whole).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant as Clock, SystemTime};

use serde_json::{json, Value};

use crate::error::Result;
use crate::protocol::clock::{self, Instant};
use crate::protocol::fields;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::{Role, Roles};
use crate::protocol::trail::{self, Loaded, Original, Place, Scope, Stamp, Trail};
use crate::protocol::types;
use crate::sys::log_reader::EventReader;
use crate::sys::watch::Wake;
use crate::telemetry::activity::Activity;
use crate::views::attention;
use crate::views::liveness::{self, Runner};

use crate::daemon::journal::{Kind, Stamps};
use crate::daemon::progress::Line;

use super::folders::{self, Folders};
use super::spend;

/// Messages kept in memory for the page (older ones: `load earlier`, which
/// reads the trail on demand).
pub const KEEP: usize = 1000;
/// Messages a snapshot carries.
pub const FIRST: usize = 200;
/// Deltas kept for a page that reconnects.
const RING: usize = 512;
/// Journal lines a snapshot carries.
const JOURNAL: usize = 50;
/// Points of queue-depth history per role.
const DEPTH_POINTS: usize = 400;
/// Latency samples per role and stage.
const SAMPLES: usize = 500;
/// How much of the journal's end the history charts are rebuilt from when
/// the server starts (what is older is not charted).
const HISTORY_BYTES: u64 = 32 * 1024 * 1024;
/// The longest body sent to the page (the CLI shows all of it).
const MAX_BODY: usize = 16 * 1024;
/// How often at most a rescan lists every `sent/` folder.
const FULL_LIST: Duration = Duration::from_secs(30);
/// The tail of an activity file read for its last record.
const ACTIVITY_TAIL: u64 = 16 * 1024;
/// How often at most every card is rebuilt when changes touch only some:
/// an agent's state (a pane, a dialog) changes without a file event.
const CARDS_EVERY: Duration = Duration::from_secs(2);

/// One change as the page receives it.
#[derive(Clone, Debug)]
pub struct Delta {
    pub seq: u64,
    /// `message`, `role`, `attention`, `header`, `usage`, `journal`.
    pub event: &'static str,
    pub data: String,
}

/// The stages whose latency the cockpit charts (as `swarm audit`).
pub const STAGES: [&str; 3] = [
    "created_to_enqueued",
    "enqueued_to_dequeued",
    "dequeued_to_completed",
];

/// A role's latency samples per stage, and their summary (computed when a
/// sample arrives, not on every refresh).
#[derive(Default)]
struct Samples {
    stages: [VecDeque<i64>; 3],
    summary: Value,
}

impl Samples {
    fn push(&mut self, stage: usize, ms: i64) {
        let v = &mut self.stages[stage];
        if v.len() == SAMPLES {
            v.pop_front();
        }
        v.push_back(ms.max(0));
        self.summary = Value::Null;
    }

    /// Per stage: p50 in ms and the count, or null when nothing was measured.
    fn json(&mut self) -> Value {
        if self.summary.is_null() {
            self.summary = self.summarize();
        }
        self.summary.clone()
    }

    fn summarize(&self) -> Value {
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

/// The cockpit's state (see the module doc).
pub struct Model {
    project: Project,
    roles: Roles,
    max_bytes: u64,
    seq: u64,
    ring: VecDeque<Delta>,
    /// The newest messages by (time, id); `at` maps id to its key.
    messages: BTreeMap<(String, String), Value>,
    at: HashMap<String, (String, String)>,
    total: usize,
    /// Every original file already read.
    seen: HashSet<PathBuf>,
    /// Clarifies, answers and closes: what the attention list needs.
    questions: Vec<Original>,
    cards: BTreeMap<String, Value>,
    attention: Value,
    header: Value,
    usage: spend::Summary,
    ledger: spend::Ledger,
    journal: Option<EventReader>,
    journal_tail: VecDeque<Value>,
    /// Per role, (ms since the epoch, items waiting) at each change.
    depth: BTreeMap<String, VecDeque<(i64, u64)>>,
    latency: BTreeMap<String, Samples>,
    listed: Clock,
    /// What the cards count, kept from the events.
    folders: Folders,
    /// The roles whose card a change in a folder or file touches: queue
    /// folders (by worktree), activity, last wake-up and pane files.
    touches: HashMap<PathBuf, Vec<String>>,
    /// Folders whose changes no card shows (`sent/`, `completed/`).
    quiet: HashSet<PathBuf>,
    /// When every card was last rebuilt.
    carded: Clock,
}

fn rank(p: Place) -> u8 {
    match p {
        Place::Sent => 0,
        Place::Failed => 1,
        _ => 2,
    }
}

fn stamp_ms(a: &Stamp, b: &Stamp) -> Option<i64> {
    Some((b.at()? - a.at()?).num_milliseconds())
}

fn iso_of(t: SystemTime) -> String {
    clock::iso(Instant::from(t))
}

/// The message entry the page shows (as `swarm transcript --json`, with a
/// bounded body).
fn entry(o: &Original, roles: &Roles) -> Value {
    let mut v = crate::views::transcript::print::jsonl(o, roles);
    if let Some(b) = v["body"].as_str().filter(|b| b.len() > MAX_BODY) {
        let mut cut = MAX_BODY;
        while !b.is_char_boundary(cut) {
            cut -= 1;
        }
        v["body"] = json!(format!("{}\n…", &b[..cut]));
        v["body_truncated"] = json!(true);
    }
    v
}

/// The last record of a role's activity file, if any is readable.
fn last_activity(project: &Project, role: &str) -> Option<Activity> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = crate::fsx::open_regular(&project.activity_file(role)).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(ACTIVITY_TAIL)))
        .ok()?;
    let mut buf = Vec::new();
    f.take(ACTIVITY_TAIL).read_to_end(&mut buf).ok()?;
    String::from_utf8_lossy(&buf)
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Activity>(l).ok())
}

/// Whether `p` is the journal or one of its rotated parts (no card shows
/// it: the journal is read from its offset).
fn is_journal(p: &Path, journal: &Path) -> bool {
    p.parent() == journal.parent()
        && p.file_name()
            .zip(journal.file_name())
            .is_some_and(|(n, j)| n.to_string_lossy().starts_with(&*j.to_string_lossy()))
}

impl Model {
    /// Reads the originals once, the charts' history from the journal's
    /// end, and builds every card.
    pub fn open(project: &Project) -> Result<Model> {
        let t = Trail::load(project, &Scope::originals())?;
        let mut m = Model {
            project: project.clone(),
            roles: t.roles.clone(),
            max_bytes: t.max_bytes,
            seq: 0,
            ring: VecDeque::new(),
            messages: BTreeMap::new(),
            at: HashMap::new(),
            total: 0,
            seen: HashSet::new(),
            questions: Vec::new(),
            cards: BTreeMap::new(),
            attention: json!({}),
            header: json!({}),
            usage: spend::Summary::default(),
            ledger: spend::Ledger::default(),
            journal: None,
            journal_tail: VecDeque::new(),
            depth: BTreeMap::new(),
            latency: BTreeMap::new(),
            listed: Clock::now(),
            folders: Folders::new(t.max_bytes),
            touches: HashMap::new(),
            quiet: HashSet::new(),
            carded: Clock::now(),
        };
        m.track_folders();
        let all = crate::views::transcript::select::messages(&t.originals);
        for o in all.iter().skip(all.len().saturating_sub(KEEP)) {
            m.put(o);
        }
        m.total = all.len();
        for o in &t.originals {
            m.seen.insert(o.path.clone());
            m.keep_question(o);
        }
        let path = project.events_file();
        let end = crate::sys::logfile::end(&path);
        m.seed_history(end);
        m.read_usage();
        m.journal = EventReader::new(&path, end).ok();
        m.refresh(&mut Vec::new(), None);
        m.ring.clear();
        Ok(m)
    }

    /// Lists the folders the cards count once, and notes which roles each
    /// folder and file concerns.
    fn track_folders(&mut self) {
        for r in self.roles.roles.clone() {
            let w = self.worktree_of(&r);
            for (dir, kind) in [
                (w.inbox_new(), folders::Kind::New),
                (w.in_process(), folders::Kind::InProcess),
                (w.failed(), folders::Kind::Items),
                (w.outbox(), folders::Kind::Items),
            ] {
                self.folders.track(&dir, kind);
            }
            let files = [
                w.inbox_new(),
                w.in_process(),
                w.failed(),
                w.outbox(),
                w.held(),
                self.project.activity_file(&r.name),
                crate::daemon::wake::last_wake_file(&self.project, &r.name),
                crate::daemon::pane::marker_file(&self.project, &r.name),
            ];
            for f in files {
                self.touches.entry(f).or_default().push(r.name.clone());
            }
            self.quiet.extend([w.sent(), w.completed()]);
        }
    }

    fn worktree_of(&self, r: &Role) -> Worktree {
        Worktree::new(r.worktree_in(&self.project.root))
    }

    /// Depth and latency before the server started, from the journal's
    /// last [`HISTORY_BYTES`] (up to `end`): each copy's wait runs from its
    /// `enqueued_at` to its `dequeued_at`, as its `dequeued` or `completed`
    /// line says (daemon/progress.rs); what waits now is in the `inbox/new`
    /// folders, since its `enqueued_at`. So the depth at any time after the
    /// first line read is exact without reading a copy, and the latency
    /// samples are the `completed` lines' stamps.
    fn seed_history(&mut self, end: u64) {
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
    fn sample_stamps(&mut self, role: &str, s: &Stamps) {
        let st = |v: &Option<String>| Stamp::of(v.as_deref());
        self.sample(
            role,
            &st(&s.created_at),
            &st(&s.enqueued_at),
            &st(&s.dequeued_at),
            &st(&s.completed_at),
        );
    }

    fn sample(&mut self, role: &str, cr: &Stamp, en: &Stamp, de: &Stamp, co: &Stamp) {
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

    fn keep_question(&mut self, o: &Original) {
        let t = o.msg.type_name();
        if [types::CLARIFY.name, types::ANSWER.name, types::CLOSE.name]
            .iter()
            .any(|k| t == Some(*k))
        {
            self.questions.push(o.clone());
        }
    }

    /// Adds or replaces a message; true when the page must hear of it.
    fn put(&mut self, o: &Original) -> bool {
        let id = o.id().to_string();
        let key = (
            o.when().map(clock::iso).unwrap_or_default(),
            if id.is_empty() {
                o.path.display().to_string()
            } else {
                id.clone()
            },
        );
        if let Some(old) = self.at.get(&key.1).cloned() {
            let keep = self.messages.get(&old).is_some_and(|v| {
                let place = v["state"].as_str().unwrap_or("");
                let old_rank = match place {
                    "sent" => 0,
                    "failed" => 1,
                    _ => 2,
                };
                old_rank < rank(o.place)
                    && v["path"].as_str().is_some_and(|p| Path::new(p).exists())
            });
            if keep {
                return false;
            }
            self.messages.remove(&old);
        } else {
            self.total += 1;
        }
        self.at.insert(key.1.clone(), key.clone());
        self.messages.insert(key, entry(o, &self.roles));
        while self.messages.len() > KEEP {
            if let Some((k, _)) = self.messages.pop_first() {
                self.at.remove(&k.1);
            }
        }
        true
    }

    fn emit(&mut self, out: &mut Vec<Delta>, event: &'static str, data: &Value) {
        self.seq += 1;
        let d = Delta {
            seq: self.seq,
            event,
            data: data.to_string(),
        };
        if self.ring.len() == RING {
            self.ring.pop_front();
        }
        self.ring.push_back(d.clone());
        out.push(d);
    }

    /// Folders that hold originals, with what their files are.
    fn original_dirs(&self) -> Vec<(PathBuf, Place)> {
        let mut v = Vec::new();
        for root in self.worktrees() {
            let w = Worktree::new(root);
            v.extend([
                (w.outbox(), Place::Outbox),
                (w.sent(), Place::Sent),
                (w.failed(), Place::Failed),
                (w.held(), Place::Held),
            ]);
        }
        v
    }

    fn worktrees(&self) -> Vec<PathBuf> {
        self.roles
            .worktrees()
            .into_iter()
            .map(|w| {
                if w.is_absolute() {
                    w
                } else {
                    self.project.root.join(w)
                }
            })
            .collect()
    }

    /// Every folder whose changes matter to the page.
    pub fn watched(&self) -> Vec<PathBuf> {
        let p = &self.project;
        let mut dirs = vec![
            p.daemon_dir(),
            p.daemon_dir().join("waiting"),
            p.swarmforge(),
            p.approvals_dir(),
            p.telemetry_dir(),
            p.activity_file("x")
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        ];
        for root in self.worktrees() {
            let w = Worktree::new(root);
            dirs.extend(w.queue_dirs());
            // What `/api/audit` counts too (serve/kept.rs).
            dirs.push(w.rejected());
        }
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Reads one original file; the deltas it causes.
    fn original(&mut self, path: &Path, place: Place, out: &mut Vec<Delta>) {
        let msg = match trail::load_message(path, self.max_bytes) {
            Loaded::Ok(m) => m,
            Loaded::Gone | Loaded::Bad(_) => return,
        };
        let reason = (place == Place::Failed)
            .then(|| trail::failure_reason(path))
            .flatten();
        let o = Original::new(path, place, msg, reason);
        self.seen.insert(o.path.clone());
        self.keep_question(&o);
        if self.put(&o) {
            let v = self
                .at
                .get(o.id())
                .and_then(|k| self.messages.get(k))
                .cloned();
            if let Some(v) = v {
                self.emit(out, "message", &json!({"message": v, "total": self.total}));
            }
        }
    }

    /// Reads what was appended to the usage journal; a new day also
    /// changes what "today" sums.
    fn read_usage(&mut self) {
        self.ledger.read(&self.project.usage_file());
        let day = clock::iso_now().get(..10).unwrap_or("").to_string();
        self.usage = self.ledger.summary(&day);
    }

    /// Applies one wake of the folder watcher; returns the deltas, in order.
    pub fn apply(&mut self, wake: &Wake) -> Vec<Delta> {
        let mut out = Vec::new();
        let finished = self.read_journal(&mut out);
        let dirs = self.original_dirs();
        let mut candidates: Vec<(PathBuf, Place)> = Vec::new();
        let mut usage = false;
        // The cards to rebuild: those a path concerns; all of them when a
        // path concerns no card in particular, on a rescan, and now and then.
        let mut all = wake.rescan || !wake.fresh.is_empty() || self.carded.elapsed() >= CARDS_EVERY;
        let mut dirty: HashSet<String> = finished;
        if wake.rescan {
            self.folders.relist_all();
        }
        for d in &wake.fresh {
            self.folders.relist(d);
        }
        let journal = self.project.events_file();
        for p in &wake.paths {
            let Some(parent) = p.parent() else { continue };
            let folder = self.folders.note(p);
            if let Some(roles) = folder
                .as_ref()
                .and_then(|d| self.touches.get(d))
                .or_else(|| self.touches.get(p))
                .or_else(|| self.touches.get(parent))
            {
                dirty.extend(roles.iter().cloned());
            } else if !self.quiet.contains(parent) && !is_journal(p, &journal) {
                all = true;
            }
            if p == &self.project.usage_file() {
                usage = true;
            }
            if !p
                .file_name()
                .is_some_and(|n| crate::protocol::grammar::valid_handoff_name(&n.to_string_lossy()))
            {
                continue;
            }
            if let Some((_, place)) = dirs.iter().find(|(d, _)| d == parent) {
                candidates.push((p.clone(), *place));
            }
        }
        if wake.rescan || !wake.fresh.is_empty() {
            usage = true;
            let full = self.listed.elapsed() >= FULL_LIST;
            if full {
                self.listed = Clock::now();
            }
            for (d, place) in &dirs {
                // A `sent/` is long: listed now and then, and whenever its
                // content was never reported (a message renamed into a
                // folder before its watch was set up has no event of its own).
                if *place == Place::Sent && !full && !wake.fresh.contains(d) {
                    continue;
                }
                if let Ok(names) = trail::handoff_names(d) {
                    candidates.extend(
                        names
                            .into_iter()
                            .map(|n| (d.join(n), *place))
                            .filter(|(p, _)| !self.seen.contains(p)),
                    );
                }
            }
        }
        for (p, place) in candidates {
            self.original(&p, place, &mut out);
        }
        if usage {
            let before = self.usage.clone();
            self.read_usage();
            if self.usage != before {
                let v = json!(self.usage);
                self.emit(&mut out, "usage", &v);
            }
        }
        self.refresh(&mut out, (!all).then_some(&dirty));
        out
    }

    /// Reads the journal's new lines (each a delta); a `completed` line is
    /// a latency sample of its recipient, whose role is returned.
    fn read_journal(&mut self, out: &mut Vec<Delta>) -> HashSet<String> {
        let mut finished = HashSet::new();
        if self.journal.is_none() {
            let path = self.project.events_file();
            self.journal = EventReader::new(&path, crate::sys::logfile::end(&path)).ok();
        }
        let Some(reader) = self.journal.as_mut() else {
            return finished;
        };
        let mut lines = Vec::new();
        let _ = reader.poll(&mut |l, next| {
            if let Ok(v) = serde_json::from_slice::<Value>(l) {
                lines.push((v, next));
            }
            Ok(())
        });
        for (mut v, next) in lines {
            if v["kind"] == Kind::Completed.word() {
                let l: Option<Line> = serde_json::from_value(v.clone()).ok();
                if let Some((rc, s)) = l.and_then(|l| Some((l.recipient?, l.stamps?))) {
                    self.sample_stamps(&rc, &s);
                    finished.insert(rc);
                }
            }
            v["offset"] = json!(next);
            if self.journal_tail.len() == JOURNAL {
                self.journal_tail.pop_front();
            }
            self.journal_tail.push_back(v.clone());
            self.emit(out, "journal", &v);
        }
        finished
    }

    /// What needs a person now, from the clarifies, answers and closes kept
    /// (as `attention::collect`, without reading the trail).
    pub fn attention_items(&self) -> Vec<attention::Item> {
        attention::from_originals(
            &self.questions,
            &self.roles,
            &self.project,
            self.max_bytes,
            clock::now(),
        )
    }

    /// An attention item as the page gets it: a clarify carries its
    /// `allow_multiple` and `allow_custom` with the protocol's defaults
    /// applied (no, yes), so the page offers free text exactly where an
    /// answer may carry it, whether or not the clarify is among the
    /// messages it has loaded.
    fn listed(&self, a: &attention::Item) -> Value {
        let mut v = serde_json::to_value(a).unwrap_or_default();
        if a.kind == attention::Kind::Clarify {
            if let Some(o) = self.questions.iter().find(|o| o.id() == a.id) {
                v["allow_multiple"] = json!(fields::flag(&o.msg, "allow_multiple"));
                v["allow_custom"] = json!(fields::flag(&o.msg, "allow_custom"));
            }
        }
        v
    }

    /// Rebuilds the attention list, the header and the cards of `only`
    /// (None: every card; every card, too, when what needs a person
    /// changed); emits those that changed.
    fn refresh(&mut self, out: &mut Vec<Delta>, only: Option<&HashSet<String>>) {
        let now = clock::now();
        let items = self.attention_items();
        let held = crate::person::holds::list(&self.project).unwrap_or_default();
        let listed: Vec<Value> = items.iter().map(|a| self.listed(a)).collect();
        let att = json!({"attention": listed, "held": held});
        let mut only = only;
        if att != self.attention {
            self.attention = att.clone();
            self.emit(out, "attention", &att);
            only = None;
        }
        if only.is_none() {
            self.carded = Clock::now();
        }
        let runner = Runner::of(&self.project);
        let roles = self.roles.roles.clone();
        for r in roles
            .iter()
            .filter(|r| only.is_none_or(|o| o.contains(&r.name)))
        {
            let latency = self.latency.get_mut(&r.name).map(Samples::json);
            let mut card = self.card(r, &runner, &items, &held);
            card["latency"] = latency.unwrap_or(Value::Null);
            if self.cards.get(&r.name) != Some(&card) {
                let depth = card["new"].as_u64().unwrap_or(0);
                let pts = self.depth.entry(r.name.clone()).or_default();
                if pts.back().map(|p| p.1) != Some(depth) {
                    if pts.len() == DEPTH_POINTS {
                        pts.pop_front();
                    }
                    pts.push_back((now.timestamp_millis(), depth));
                }
                self.cards.insert(r.name.clone(), card.clone());
                self.emit(out, "role", &card);
            }
        }
        let pid = crate::daemon::control::running_pid(&self.project);
        let header = json!({
            "root": self.project.root,
            "daemon_running": pid.is_some(),
            "daemon_pid": pid,
            "paused": crate::daemon::gate::pause_state(&self.project),
        });
        if header != self.header {
            self.header = header.clone();
            self.emit(out, "header", &header);
        }
    }

    /// A role's card: its queue, its agent, its work, its spend.
    fn card(
        &self,
        r: &Role,
        runner: &Runner,
        items: &[attention::Item],
        held: &[crate::person::holds::Held],
    ) -> Value {
        let wt = self.worktree_of(r);
        let (new, oldest) = self.folders.count(&wt.inbox_new());
        let ip = self.folders.first(&wt.in_process()).map(|(path, t)| {
            let file = if path.is_dir() {
                None
            } else {
                match trail::load_message(&path, self.max_bytes) {
                    Loaded::Ok(m) => Some(m),
                    _ => None,
                }
            };
            json!({
                "name": path.file_name().map(|n| crate::text::escape(&n.to_string_lossy())),
                "id": file.as_ref().and_then(|m| m.id().map(str::to_string)),
                "type": file.as_ref().and_then(|m| m.type_name().map(str::to_string)),
                "summary": file.as_ref().map(crate::protocol::line::summary),
                "since": t.map(iso_of),
            })
        });
        let mut live = runner.liveness(&self.project, r);
        let waiting_for = liveness::waiting_for(&self.roles, r, ip.is_some(), items, &mut live);
        let stuck = (new > 0 && ip.is_none())
            || items
                .iter()
                .any(|a| a.kind == attention::Kind::Clarify && a.from == r.name);
        let not_moving = stuck
            .then(|| liveness::not_moving(&self.project, r, live.as_ref(), items))
            .flatten();
        let last_wake =
            std::fs::read_to_string(crate::daemon::wake::last_wake_file(&self.project, &r.name))
                .ok()
                .map(|s| crate::text::escape(s.trim()));
        json!({
            "role": r.name,
            "human": r.is_human(),
            "state": live.as_ref().map(|l| l.state.word()),
            "since": live.as_ref().and_then(|l| l.since.clone()),
            "prompt": live.as_ref().and_then(|l| l.detail.clone()),
            "options": live.as_ref().map(|l| l.options.iter().map(|c| c.label.clone()).collect::<Vec<_>>()).unwrap_or_default(),
            "waiting_for": waiting_for,
            "new": new,
            "oldest_since": oldest.map(iso_of),
            "in_process": ip,
            "failed": self.folders.count(&wt.failed()).0,
            "outbox": self.folders.count(&wt.outbox()).0,
            "held": held.iter().filter(|h| h.from == r.name).count(),
            "last_wake": last_wake,
            "not_moving": not_moving,
            "problem": wt.symlinked_inbox_folder().map(|l| crate::protocol::layout::symlinked_inbox_reason(&l)),
            "activity": last_activity(&self.project, &r.name),
        })
    }

    /// Everything the page shows, at `seq`.
    pub fn snapshot(&self) -> Value {
        let skip = self.messages.len().saturating_sub(FIRST);
        let messages: Vec<&Value> = self.messages.values().skip(skip).collect();
        let depth: BTreeMap<&String, Vec<&(i64, u64)>> = self
            .depth
            .iter()
            .map(|(k, v)| (k, v.iter().collect()))
            .collect();
        let sessions = crate::forum::session::list(&self.project).unwrap_or_default();
        json!({
            "seq": self.seq,
            "header": self.header,
            "roles": self.cards.values().collect::<Vec<_>>(),
            "attention": self.attention,
            "messages": messages,
            "total": self.total,
            "sessions": sessions,
            "journal": self.journal_tail,
            "usage": self.usage,
            "depth": depth,
            "stages": STAGES,
        })
    }

    /// The deltas after `seq`, or None when some of them are no longer kept
    /// (the page loads a new snapshot).
    pub fn since(&self, seq: u64) -> Option<Vec<Delta>> {
        if seq > self.seq {
            return None;
        }
        let first = self.ring.front().map_or(self.seq + 1, |d| d.seq);
        if seq + 1 < first {
            return None;
        }
        Some(self.ring.iter().filter(|d| d.seq > seq).cloned().collect())
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The roles as the server read them.
    pub fn roles(&self) -> &Roles {
        &self.roles
    }

    /// Each role's card, by role name.
    pub fn cards(&self) -> &BTreeMap<String, Value> {
        &self.cards
    }

    /// The clarifies, answers and closes kept.
    pub fn questions(&self) -> &[Original] {
        &self.questions
    }

    /// The newest messages kept (at most [`KEEP`]), oldest first.
    pub fn messages(&self) -> impl Iterator<Item = &Value> + Clone {
        self.messages.values()
    }

    /// The messages before `id` (or the newest), at most `limit`, oldest
    /// first, and whether there are more: from memory when it holds them,
    /// else from the trail (a page asking for old history).
    pub fn earlier(&self, before: Option<&str>, limit: usize) -> Result<(Vec<Value>, bool)> {
        let end = match before {
            Some(id) => match self.at.get(id) {
                Some(k) => self.messages.range(..k.clone()).count(),
                None => return self.earlier_from_trail(before, limit),
            },
            None => self.messages.len(),
        };
        if end < limit && self.total > self.messages.len() {
            return self.earlier_from_trail(before, limit);
        }
        let start = end.saturating_sub(limit);
        let v: Vec<Value> = self
            .messages
            .values()
            .skip(start)
            .take(end - start)
            .cloned()
            .collect();
        Ok((v, start > 0))
    }

    fn earlier_from_trail(&self, before: Option<&str>, limit: usize) -> Result<(Vec<Value>, bool)> {
        let t = Trail::load(&self.project, &Scope::originals())?;
        let all = crate::views::transcript::select::messages(&t.originals);
        let end = before
            .and_then(|id| all.iter().position(|o| o.id() == id))
            .unwrap_or(all.len());
        let start = end.saturating_sub(limit);
        let v = all[start..end].iter().map(|o| entry(o, &t.roles)).collect();
        Ok((v, start > 0))
    }
}
