//! What handoffd vouches for: every file in the queue folders judged
//! against the content digest (protocol/digest.rs) its journal recorded
//! when it moved the file (`events.jsonl`, which agents cannot write).
//!
//! An agent can write anything into its own queue folders: rewrite its
//! original in `sent/` after delivery, its copy in `inbox/completed/`, or
//! plant an "original" `from:` a person with matching copies. The files
//! alone cannot tell; the journal can. The invariant: a file the views
//! show as said is one whose digest is the one handoffd journaled for its
//! id when it moved it to that kind of folder (`delivered`: `sent/` and
//! every copy; `failed`/`denied`: `failed/`; `held`: `pending_approval/`),
//! or one older than the digests (an upgrade, or lines rotated away).
//!
//! A file without a line is judged by when it arrived where it is (its
//! inode change time, which a rename or a write sets to now and nobody but
//! root sets back): before the first digest line the journal keeps, it
//! predates digests (not judged); before handoffd's last `started`, its
//! line may have been lost with a power cut (a line is appended without an
//! fsync, daemon/journal.rs) or it arrived while no handoffd ran:
//! unverified, shown as such, no violation; after it, with handoffd running
//! and journaling every move as it makes it, handoffd never moved it: a
//! violation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Deserializer};

use crate::daemon::control;
use crate::daemon::progress;
use crate::protocol::clock;
use crate::protocol::digest;
use crate::protocol::grammar;
use crate::protocol::layout::Project;
use crate::protocol::trail::{Copy, Original, Place, Trail};
use crate::sys::log_reader::EventReader;
use crate::text::escape;

/// How a file stands against the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its content is what handoffd journaled when it moved it.
    Vouched,
    /// Not judged here (why): not moved yet (outbox), or another host's
    /// (a mirror).
    Unjudged(String),
    /// Not judged (why): older than the digests the journal keeps (an
    /// upgrade, or its line rotated away). Shown as said, as before.
    Predates(String),
    /// No line for it, but one may have been lost (why): not shown as
    /// said, and no violation.
    Unverified(String),
    /// A violation: its bytes changed since handoffd journaled them.
    Changed(String),
    /// A violation: handoffd never moved it.
    Unrecorded(String),
}

impl Verdict {
    /// Shown to a person as said.
    pub fn said(&self) -> bool {
        matches!(
            self,
            Verdict::Vouched | Verdict::Unjudged(_) | Verdict::Predates(_)
        )
    }

    /// Why it is not shown as said (`None` when it is).
    pub fn doubt(&self) -> Option<&str> {
        match self {
            Verdict::Unverified(w) | Verdict::Changed(w) | Verdict::Unrecorded(w) => Some(w),
            _ => None,
        }
    }

    /// The audit's violation kind, for a violation.
    pub fn violation(&self) -> Option<&'static str> {
        match self {
            Verdict::Changed(_) => Some("changed_since_journaled"),
            Verdict::Unrecorded(_) => Some("not_moved_by_handoffd"),
            _ => None,
        }
    }
}

/// One journal line that moved an original (and made its copies).
#[derive(Clone, Debug)]
struct Record {
    place: Place,
    sha256: Option<String>,
    from: Option<String>,
    to: Option<String>,
}

/// The journal's lines as this reader needs them.
#[derive(Deserialize)]
struct Line {
    kind: String,
    time: String,
    id: Option<String>,
    from: Option<String>,
    to: Option<String>,
    /// `None`: the key is absent (the line predates digests);
    /// `Some(None)`: a line of a daemon that records them, none for it.
    #[serde(default, deserialize_with = "present")]
    sha256: Option<Option<String>>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// The journal's moves, read once per command.
#[derive(Debug, Default)]
pub struct Vouched {
    records: HashMap<String, Vec<Record>>,
    /// The time of the first line kept that knows digests (`None`: no
    /// line does; nothing is judged).
    from: Option<SystemTime>,
    /// The time of handoffd's last `started` line.
    started: Option<SystemTime>,
    /// The time of its last `stopped` line.
    stopped: Option<SystemTime>,
    /// A handoffd holds the project now.
    running: bool,
}

impl Vouched {
    /// Reads `events.jsonl` (every part kept). A journal that cannot be
    /// read judges nothing.
    pub fn load(project: &Project) -> Vouched {
        let mut v = Vouched {
            running: control::running_pid(project).is_some(),
            ..Vouched::default()
        };
        let path = project.events_file();
        let Ok(mut r) = EventReader::new(&path, progress::oldest_offset(&path)) else {
            return v;
        };
        let _ = r.poll(&mut |line, _| {
            if let Ok(l) = serde_json::from_slice::<Line>(line) {
                v.add(l);
            }
            Ok(())
        });
        v
    }

    fn add(&mut self, l: Line) {
        let time = clock::parse(&l.time).map(SystemTime::from);
        if l.sha256.is_some() && self.from.is_none() {
            self.from = time;
        }
        let place = match l.kind.as_str() {
            "started" => {
                self.started = time.max(self.started);
                return;
            }
            "stopped" => {
                self.stopped = time.max(self.stopped);
                return;
            }
            "delivered" => Place::Sent,
            "failed" | "denied" => Place::Failed,
            "held" => Place::Held,
            _ => return,
        };
        let Some(id) = l.id else { return };
        self.records.entry(id).or_default().push(Record {
            place,
            sha256: l.sha256.flatten(),
            from: l.from,
            to: l.to,
        });
    }

    /// The verdict on an original.
    pub fn original(&self, t: &Trail, o: &Original) -> Verdict {
        if o.place == Place::Outbox {
            return Verdict::Unjudged("not delivered yet".into());
        }
        if t.mirrored(&o.path) {
            return Verdict::Unjudged("another host's file".into());
        }
        let recs: Vec<&Record> = self
            .records
            .get(o.id())
            .map(|v| v.iter().filter(|r| r.place == o.place).collect())
            .unwrap_or_default();
        let digest = digest::of(&o.msg);
        let what = match o.place {
            Place::Sent => "delivered",
            Place::Failed => "refused",
            _ => "held",
        };
        self.judge(
            &recs,
            &digest,
            (o.msg.sender(), o.msg.to()),
            o.id(),
            o.place.as_str(),
            what,
            &o.path,
            o.arrived,
        )
    }

    /// The verdict on a copy; `original`: the verdict on its original in
    /// `sent/`, if there is one (a copy without a line is what its
    /// original is: a line lost with a power cut is lost for both).
    pub fn copy(&self, t: &Trail, c: &Copy, original: Option<&Verdict>) -> Verdict {
        if t.mirrored(&c.path) {
            return Verdict::Unjudged("another host's file".into());
        }
        let id = c.id.as_deref().unwrap_or("");
        let recs: Vec<&Record> = self
            .records
            .get(id)
            .map(|v| v.iter().filter(|r| r.place == Place::Sent).collect())
            .unwrap_or_default();
        if recs.is_empty() {
            match original {
                Some(Verdict::Unrecorded(_)) => {
                    return Verdict::Unrecorded(format!(
                        "a copy of {}, which handoffd never delivered (events.jsonl has no `delivered` line for it); \
                         remove it: it is not what was said",
                        escape(id)
                    ))
                }
                Some(v @ (Verdict::Predates(_) | Verdict::Unverified(_))) => return v.clone(),
                _ => {}
            }
        }
        self.judge(
            &recs,
            &c.digest,
            (c.from.as_deref(), c.to.as_deref()),
            id,
            c.place.as_str(),
            "delivered",
            &c.path,
            c.arrived,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn judge(
        &self,
        recs: &[&Record],
        digest: &str,
        (from, to): (Option<&str>, Option<&str>),
        id: &str,
        folder: &str,
        what: &str,
        path: &Path,
        arrived: Option<SystemTime>,
    ) -> Verdict {
        if recs.iter().any(|r| r.sha256.as_deref() == Some(digest)) {
            return Verdict::Vouched;
        }
        if let Some(r) = recs.iter().rev().find(|r| r.sha256.is_some()) {
            let mut changed = Vec::new();
            for (name, was, is) in [("from", &r.from, from), ("to", &r.to, to)] {
                if was.as_deref() != is {
                    changed.push(format!(
                        "'{name}' was '{}', is '{}' now",
                        escape(was.as_deref().unwrap_or("")),
                        escape(is.unwrap_or(""))
                    ));
                }
            }
            let changed = if changed.is_empty() {
                "its body or another header changed".to_string()
            } else {
                changed.join(", ")
            };
            return Verdict::Changed(format!(
                "not what handoffd {what}: {changed} (sha256 {digest}, journaled {}); \
                 restore it from another copy of {} or remove it: the views do not show it as said",
                r.sha256.as_deref().unwrap_or(""),
                escape(id)
            ));
        }
        if !recs.is_empty() {
            return Verdict::Predates("journaled before handoffd recorded digests".into());
        }
        let Some(from) = self.from else {
            return Verdict::Predates("the journal records no digests yet".into());
        };
        // `swarm archive` moved it (a rename: a new change time); its id
        // tells when it was said, and a line older than the journal kept
        // is not there to judge it.
        let archived = path.components().any(|c| c.as_os_str() == "archive");
        let said = grammar::id_time(id).map(SystemTime::from);
        let old = arrived.is_none_or(|a| a < from) || (archived && said.is_some_and(|s| s < from));
        if old {
            return Verdict::Predates("older than the digests the journal keeps".into());
        }
        let never = format!(
            "events.jsonl has no line moving {} to {folder}/",
            escape(id)
        );
        let since = |s: SystemTime| clock::iso(clock::Instant::from(s));
        match self.started {
            Some(s) if arrived.is_some_and(|a| a < s) => Verdict::Unverified(format!(
                "{never}: it arrived before handoffd's last start ({}), so the line may have been lost \
                 with a power cut, or it arrived while no handoffd ran; remove it if nobody sent it",
                since(s)
            )),
            // The run that started last is over without `stopped`: killed
            // (or the power cut) between a move and its line, perhaps.
            Some(s) if !self.running && self.stopped.is_none_or(|t| t < s) => {
                Verdict::Unverified(format!(
                    "{never}: handoffd's last run (started {}) ended without `stopped`, so it may have \
                     moved it and died before its line; remove it if nobody sent it",
                    since(s)
                ))
            }
            _ => Verdict::Unrecorded(format!(
                "handoffd never moved it ({never}): an agent wrote it; remove it, it is not what was said"
            )),
        }
    }
}

/// How long after it arrived a file may wait for its line: handoffd
/// appends it just after the move (after its group's folder fsyncs), so a
/// reader may see the file first.
const SETTLE: Duration = Duration::from_secs(3);

/// Whether `v`, on a file that arrived at `arrived`, may be a line still
/// on its way.
pub fn young(v: &Verdict, arrived: Option<SystemTime>) -> bool {
    matches!(v, Verdict::Unrecorded(_))
        && arrived
            .and_then(|a| SystemTime::now().duration_since(a).ok())
            .is_some_and(|age| age < SETTLE)
}

/// Judges with `judge` (which says whether some verdict was [`young`])
/// on a fresh read of the journal until none is, or [`SETTLE`] passed.
pub fn settled<T>(project: &Project, mut judge: impl FnMut(&Vouched) -> (T, bool)) -> T {
    let end = std::time::Instant::now() + SETTLE;
    loop {
        let (out, young) = judge(&Vouched::load(project));
        if !young || std::time::Instant::now() >= end {
            return out;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The verdicts on `originals` and on `copies` (a copy's original: the
/// first of `originals` in `sent/` with its id), each list in its order,
/// judged again on a fresh read of the journal while one is [`young`].
pub fn judge_files(
    t: &Trail,
    originals: &[&Original],
    copies: &[&Copy],
) -> (Vec<Verdict>, Vec<Verdict>) {
    settled(&t.project, |v| {
        let of_originals: Vec<Verdict> = originals.iter().map(|o| v.original(t, o)).collect();
        let mut sent: HashMap<&str, &Verdict> = HashMap::new();
        for (o, verdict) in originals.iter().zip(&of_originals) {
            if o.place == Place::Sent && !o.id().is_empty() {
                sent.entry(o.id()).or_insert(verdict);
            }
        }
        let of_copies: Vec<Verdict> = copies
            .iter()
            .map(|c| {
                let orig = c.id.as_deref().and_then(|id| sent.get(id).copied());
                v.copy(t, c, orig)
            })
            .collect();
        let arrived = originals
            .iter()
            .map(|o| o.arrived)
            .chain(copies.iter().map(|c| c.arrived));
        let waiting = of_originals
            .iter()
            .chain(&of_copies)
            .zip(arrived)
            .any(|(verdict, a)| young(verdict, a));
        ((of_originals, of_copies), waiting)
    })
}

/// Why each of `originals` is not to be shown as said (only those that are
/// not).
pub fn doubts<'a>(
    t: &Trail,
    originals: impl IntoIterator<Item = &'a Original>,
) -> HashMap<PathBuf, String> {
    let originals: Vec<&Original> = originals.into_iter().collect();
    let (verdicts, _) = judge_files(t, &originals, &[]);
    originals
        .iter()
        .zip(verdicts)
        .filter_map(|(o, v)| v.doubt().map(|why| (o.path.clone(), why.to_string())))
        .collect()
}
