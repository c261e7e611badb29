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
//!
//! The parts: what a wake changes (`changes`), the role cards and the
//! attention list (`cards`), the charts' depth and latency history
//! (`samples`); here, the model, its start, and what a page reads.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant as Clock, SystemTime};

use serde_json::{json, Value};

use crate::error::Result;
use crate::protocol::clock::{self, Instant};
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::protocol::trail::{Original, Place, Scope, Stamp, Trail};
use crate::sys::log_reader::EventReader;

use super::folders::Folders;
use super::spend;

mod cards;
mod changes;
mod samples;

use samples::Samples;

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
