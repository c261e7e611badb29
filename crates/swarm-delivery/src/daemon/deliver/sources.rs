//! Which outboxes a pass lists, and the files it takes from them in
//! priority order.
//!
//! Two parts of the deliverer's state live here. [`Outboxes`] is the table
//! of served worktrees (every role's, and the relay folders') with what is
//! known of each between passes: its canonical path, whether it was
//! validated (locked, a plain outbox folder). [`Schedule`] says which of
//! them the next pass lists: those file events named, or all of them on a
//! rescan, skipping the quiet ones whose folder stamp did not change. The
//! backlog of the listed outboxes is then streamed in chunks.

use super::locks::Locks;
use super::*;

/// Every this many rounds (see [`QUIET_CHECKS`]), every outbox is listed
/// again whatever its stamp says (bounds what a filesystem with odd
/// timestamps could hide).
pub(super) const FULL_SCAN_EVERY: u32 = 30;

/// At most this many quiet outboxes are stat'ed per pass while file events
/// work: a file arriving is announced by its event (which un-quiets its
/// outbox at once), so the stamp check is only the safety net for a lost
/// event. Up to this many worktrees it covers every outbox on every rescan;
/// beyond, it rotates (10 000 worktrees: each one every 10 rescans), so an
/// idle daemon's cost does not grow with the table.
pub(super) const QUIET_CHECKS: usize = 1000;

/// An outbox folder's identity and last change (mtime to the nanosecond).
pub(super) type DirStamp = (u64, u64, i64, i64);

pub(super) fn dir_stamp(dir: &Path) -> Option<DirStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(dir).ok()?;
    Some((m.dev(), m.ino(), m.mtime(), m.mtime_nsec()))
}

/// Whether a folder last changed long enough ago that any later change must
/// give it a different mtime, even on a filesystem with whole-second stamps.
pub(super) fn settled(st: &DirStamp) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    st.2 + 2 < now
}

/// An outbox found empty (or missing), with its folder's stamp then
/// (`None`: missing): while the stamp is the same nothing arrived, so a
/// rescan skips it (one stat instead of the path checks and a listing; an
/// idle daemon with 10 000 roles stays idle).
pub(super) struct Quiet {
    stamp: Option<DirStamp>,
}

/// An outbox a pass lists.
pub(super) struct Source {
    index: usize,
    wt: PathBuf,
    outbox: PathBuf,
    stamp: Option<DirStamp>,
}

enum Validated {
    /// Canonical worktree path, locked (or served unlocked), plain outbox.
    Serve(PathBuf),
    /// No such folder (yet).
    Missing,
    /// Another daemon's, or a symlinked outbox.
    Skip(PathBuf),
}

/// The served worktrees and what is known of each between passes.
///
/// Invariants: `position` indexes `table`; `valid` and `canon` only hold
/// what was checked against the current table (both are cleared when the
/// table changes and on every full scan, so a folder swapped for a symlink
/// is seen); `generation` changes whenever the table does.
pub(super) struct Outboxes {
    /// `roles.worktrees()` (and the relay folders) with each one's outbox
    /// path, computed once per table, not once per pass.
    table: Vec<(PathBuf, PathBuf)>,
    /// Worktree path → position in `table`, for file events.
    position: HashMap<PathBuf, usize>,
    /// Bumped whenever the table changes (the daemon then re-syncs its
    /// watches).
    generation: u64,
    /// Each worktree path as written in roles.tsv → its canonical path.
    canon: HashMap<PathBuf, PathBuf>,
    /// By position in `table`: the canonical path of a worktree whose lock
    /// is claimed and whose outbox is a plain folder.
    valid: Vec<Option<PathBuf>>,
    /// Symlinked outboxes already reported (each is said once).
    aliased: HashSet<PathBuf>,
}

impl Outboxes {
    pub(super) fn new(worktrees: Vec<PathBuf>) -> Outboxes {
        let table = with_outboxes(worktrees);
        Outboxes {
            position: positions(&table),
            table,
            generation: 0,
            canon: HashMap::new(),
            valid: Vec::new(),
            aliased: HashSet::new(),
        }
    }

    /// The served worktrees, each with its outbox.
    pub(super) fn table(&self) -> &[(PathBuf, PathBuf)] {
        &self.table
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// The position of a worktree (as written in roles.tsv) in the table.
    pub(super) fn position(&self, wt: &Path) -> Option<usize> {
        self.position.get(wt).copied()
    }

    /// The canonical path of a worktree as written in roles.tsv, when this
    /// process resolved it already.
    pub(super) fn canonical(&self, raw: &Path) -> Option<&PathBuf> {
        self.canon.get(raw)
    }

    /// A new table (roles.tsv or the config changed): whether it differs
    /// from the old. Either way every path is checked again.
    pub(super) fn replace(&mut self, worktrees: Vec<PathBuf>) -> bool {
        let table = with_outboxes(worktrees);
        let changed = table != self.table;
        if changed {
            self.table = table;
            self.position = positions(&self.table);
            self.generation += 1;
        }
        self.forget_checks();
        changed
    }

    /// Every path is canonicalized and validated again at its next listing.
    fn forget_checks(&mut self) {
        self.valid.clear();
        self.canon.clear();
    }

    /// Canonicalizes a worktree path, claims its lock and checks that its
    /// outbox is a plain folder (the per-worktree work a pass used to redo).
    fn validate(&mut self, raw: &Path, locks: &mut Locks) -> Validated {
        let Ok(wt_path) = raw.canonicalize() else {
            return Validated::Missing;
        };
        self.canon.insert(raw.to_path_buf(), wt_path.clone());
        if !locks.admit(&wt_path) {
            return Validated::Skip(wt_path);
        }
        let outbox = Worktree::new(&wt_path).outbox();
        match outbox.canonicalize() {
            Ok(real) if real == outbox => Validated::Serve(wt_path),
            Ok(real) => {
                if self.aliased.insert(outbox.clone()) {
                    eprintln!(
                        "handoffd: skipping {}: it resolves to {} (a symlink); an outbox must be a plain folder of its worktree",
                        outbox.display(),
                        real.display()
                    );
                }
                Validated::Skip(wt_path)
            }
            Err(_) => Validated::Skip(wt_path),
        }
    }
}

/// Which outboxes the next pass lists.
///
/// Invariant: **an outbox that may hold a file is listed by a later pass**:
/// a file event names it (`dirty`) or un-quiets it; a deferred file keeps
/// its outbox dirty; a lost event, a reload or the timer makes the next pass
/// a rescan (`full_due`); and a quiet outbox is skipped only while its
/// folder stamp is the one it had when found empty.
pub(super) struct Schedule {
    /// Outboxes (by position in the table) named by file events (or
    /// holding a deferred file) since the last pass: all an event-driven
    /// pass lists.
    dirty: HashSet<usize>,
    /// The next pass checks every outbox (timer, lost events, reload).
    full_due: bool,
    /// A pass chose its outboxes already (the first one is a rescan).
    started: bool,
    /// The last pass checked every outbox.
    rescanned: bool,
    /// Rescans since every outbox was last listed.
    scans: u32,
    /// No file events: every quiet outbox is checked every pass.
    polling: bool,
    /// Empty outboxes, by position in the table (no hashing of 10 000 paths
    /// per pass).
    quiet: Vec<Option<Quiet>>,
}

impl Schedule {
    pub(super) fn new() -> Schedule {
        Schedule {
            dirty: HashSet::new(),
            full_due: true,
            started: false,
            rescanned: false,
            scans: 0,
            polling: true,
            quiet: Vec::new(),
        }
    }

    pub(super) fn set_polling(&mut self, polling: bool) {
        self.polling = polling;
    }

    /// A file event in the outbox at `position` (`None`: an outbox that
    /// cannot be placed, so all are checked).
    pub(super) fn changed(&mut self, position: Option<usize>) {
        match position {
            Some(i) => {
                if let Some(q) = self.quiet.get_mut(i) {
                    *q = None;
                }
                self.dirty.insert(i);
            }
            None => self.full_due = true,
        }
    }

    /// The outbox at `position` holds a file that waits: listed again at
    /// the next pass, event or not.
    pub(super) fn again(&mut self, position: usize) {
        self.dirty.insert(position);
    }

    /// Events were lost: every outbox is listed at the next pass.
    pub(super) fn rescan_all(&mut self) {
        self.quiet.clear();
        self.full_due = true;
    }

    /// The next pass checks every outbox (its stamp at least).
    pub(super) fn rescan_due(&mut self) {
        self.full_due = true;
    }

    /// Whether the last pass was a rescan of every outbox.
    pub(super) fn rescanned(&self) -> bool {
        self.rescanned
    }

    /// The table changed: nothing known of the old positions holds, and
    /// the next rescan lists every outbox (letting go of the locks of
    /// worktrees no longer served).
    pub(super) fn table_changed(&mut self) {
        self.quiet.clear();
        self.dirty.clear();
        self.scans = 0;
    }
}

fn positions(worktrees: &[(PathBuf, PathBuf)]) -> HashMap<PathBuf, usize> {
    worktrees
        .iter()
        .enumerate()
        .map(|(i, (w, _))| (w.clone(), i))
        .collect()
}

fn with_outboxes(worktrees: Vec<PathBuf>) -> Vec<(PathBuf, PathBuf)> {
    worktrees
        .into_iter()
        .map(|w| {
            let outbox = Worktree::new(&w).outbox();
            (w, outbox)
        })
        .collect()
}

/// Most outbox files held in memory at once: a pass streams a backlog in
/// chunks of this many (in priority order), so its memory does not grow with
/// the backlog.
pub(super) const CHUNK: usize = 1024;

/// Which outboxes a pass looks at, and how (see `Deliverer::sources`).
struct Chosen {
    indices: Vec<usize>,
    /// A rescan: every outbox's stamp is checked, the quiet ones a
    /// `stride`-th at a time (this pass: those at `turn`).
    rescan: bool,
    /// A full rescan: quiet stamps and checked paths are forgotten.
    full: bool,
    stride: usize,
    turn: usize,
}

impl Schedule {
    /// The outboxes of `n` this pass lists: on a rescan (polling, one due,
    /// or the first pass) all of them, else those file events named.
    fn choose(&mut self, n: usize) -> Chosen {
        let rescan = self.polling || self.full_due || !self.started;
        self.started = true;
        self.quiet.resize_with(n, || None);
        if !rescan {
            self.rescanned = false;
            let mut v: Vec<usize> = self.dirty.drain().filter(|&i| i < n).collect();
            v.sort_unstable();
            return Chosen {
                indices: v,
                rescan,
                full: false,
                stride: 1,
                turn: 0,
            };
        }
        self.full_due = false;
        self.rescanned = true;
        let stride = if self.polling {
            1
        } else {
            n.div_ceil(QUIET_CHECKS).max(1)
        };
        let full = self.scans.is_multiple_of(FULL_SCAN_EVERY * stride as u32);
        if full {
            self.quiet.clear();
            self.quiet.resize_with(n, || None);
        }
        let turn = self.scans as usize % stride;
        self.scans = self.scans.wrapping_add(1);
        self.dirty.clear();
        Chosen {
            indices: (0..n).collect(),
            rescan,
            full,
            stride,
            turn,
        }
    }
}

impl Outboxes {
    /// The worktree outbox `i` (at `raw`) is served from: checked once and
    /// kept until the next full rescan.
    fn checked(&mut self, i: usize, raw: &Path, locks: &mut Locks) -> Validated {
        if let Some(v) = &self.valid[i] {
            return Validated::Serve(v.clone());
        }
        let v = self.validate(raw, locks);
        if let Validated::Serve(p) = &v {
            self.valid[i] = Some(p.clone());
        }
        v
    }
}

impl Deliverer {
    /// The outboxes this pass lists, each by its canonical worktree path, once
    /// each, sorted by that path (ties between equal file names break by it).
    /// An outbox reached through a symlinked `.swarmforge`, `handoffs` or
    /// `outbox` is skipped, since it could alias another role's outbox and get
    /// that role's mail refused (docs/protocol.md §7.2, the sender check).
    ///
    /// With file events, a pass lists only the outboxes events named (and
    /// those still holding a deferred file); a rescan (`full_due`: the timer,
    /// lost events, a reload, the first pass) checks every outbox's stamp as
    /// before. Canonical paths and the symlink check are kept between passes
    /// and re-validated when roles.tsv changes and every [`FULL_SCAN_EVERY`]
    /// rescans: with 32 roles a pass no longer costs 32 canonicalizations.
    pub(super) fn sources(&mut self) -> Vec<Source> {
        let Deliverer {
            outboxes: o,
            schedule: sch,
            locks,
            ..
        } = self;
        let n = o.table.len();
        o.valid.resize_with(n, || None);
        let Chosen {
            indices,
            rescan,
            full,
            stride,
            turn,
        } = sch.choose(n);
        if full {
            // Re-validated now and then: a folder swapped for a symlink.
            o.valid.iter_mut().for_each(|v| *v = None);
            o.canon.clear();
        }
        let mut out = Vec::new();
        let mut seen: HashSet<PathBuf> = HashSet::new();
        // Taken for the loop, not cloned: 10 000 paths per pass add up.
        let table = std::mem::take(&mut o.table);
        for i in indices {
            let (raw, outbox_path) = &table[i];
            if rescan && i % stride != turn && sch.quiet[i].is_some() {
                continue;
            }
            // Stamped before listing: a file arriving after the listing
            // changes the stamp, so it is never skipped.
            let stamp = dir_stamp(outbox_path);
            if rescan && sch.quiet[i].as_ref().is_some_and(|q| q.stamp == stamp) {
                continue;
            }
            sch.quiet[i] = None;
            if stamp.is_none() {
                // No outbox (yet); it appears with a new stamp.
                sch.quiet[i] = Some(Quiet { stamp });
                if let Some(v) = &o.valid[i] {
                    seen.insert(v.clone());
                } else if let Ok(real) = raw.canonicalize() {
                    seen.insert(real);
                }
                continue;
            }
            let wt_path = match o.checked(i, raw, locks) {
                Validated::Serve(p) => p,
                Validated::Missing => {
                    // No worktree folder (yet): nothing to deliver from it.
                    sch.quiet[i] = Some(Quiet { stamp });
                    continue;
                }
                Validated::Skip(p) => {
                    seen.insert(p);
                    continue;
                }
            };
            if !seen.insert(wt_path.clone()) {
                continue;
            }
            out.push(Source {
                index: i,
                outbox: Worktree::new(&wt_path).outbox(),
                wt: wt_path,
                stamp,
            });
        }
        o.table = table;
        // A worktree no longer served releases its lock (on a full scan,
        // where `seen` holds every worktree).
        if full {
            locks.retain(|wt| seen.contains(wt));
        }
        out.sort_by(|a, b| a.wt.cmp(&b.wt));
        out
    }

    /// The next (at most [`CHUNK`]) outbox files after `after`, in priority
    /// order (file name, then worktree). Only those are held in memory, so a
    /// backlog of 40 000 files costs a chunk, not 40 000 entries; `more` says
    /// whether files beyond the chunk were seen. On the first listing of a
    /// pass an outbox found empty and settled is marked quiet.
    pub(super) fn list_chunk(
        &mut self,
        sources: &[Source],
        after: Option<&(String, usize)>,
        first: bool,
    ) -> (Vec<Candidate>, bool) {
        // (name, source, path): the path as listed, since a name that is
        // not UTF-8 is known by its lossy spelling but opened by its bytes.
        let mut heap: BinaryHeap<(String, usize, PathBuf)> = BinaryHeap::new();
        let mut more = false;
        for (s_i, s) in sources.iter().enumerate() {
            let mut found = 0usize;
            for e in store::each(&s.outbox) {
                // Everything named *.handoff but a folder is ours to deliver
                // or refuse (an odd one is refused when read).
                if !e.is_handoff_named() {
                    // A retry sidecar: checked for its file after the pass.
                    if first && crate::protocol::delivery_retry::handoff_of(&e.name).is_some() {
                        self.retries.saw_sidecar(e.path);
                    }
                    continue;
                }
                let name = e.name;
                found += 1;
                if after.is_some_and(|(an, ai)| (&name, &s_i) <= (an, ai)) {
                    continue;
                }
                if heap.len() >= CHUNK {
                    if heap
                        .peek()
                        .is_some_and(|top| (&name, &s_i) >= (&top.0, &top.1))
                    {
                        more = true;
                        continue;
                    }
                    heap.pop();
                    more = true;
                }
                heap.push((name, s_i, e.path));
            }
            if first && found == 0 && s.stamp.is_some_and(|st| settled(&st)) {
                self.schedule.quiet[s.index] = Some(Quiet { stamp: s.stamp });
            }
        }
        let out = heap
            .into_sorted_vec()
            .into_iter()
            .map(|(name, s_i, path)| {
                let s = &sources[s_i];
                Candidate {
                    path,
                    name,
                    worktree: s.wt.clone(),
                    source: s.index,
                    key: s_i,
                }
            })
            .collect();
        (out, more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_names_its_outbox_and_an_unplaced_one_makes_a_rescan() {
        let mut s = Schedule::new();
        s.full_due = false;
        s.quiet = vec![Some(Quiet { stamp: None }), None];
        s.changed(Some(0));
        assert!(s.quiet[0].is_none() && s.dirty.contains(&0) && !s.full_due);
        s.changed(None);
        assert!(s.full_due);
        s.scans = 7;
        s.table_changed();
        assert!(s.dirty.is_empty() && s.quiet.is_empty() && s.scans == 0);
    }

    #[test]
    fn a_new_table_moves_the_generation_and_forgets_the_checks() {
        let mut o = Outboxes::new(vec![PathBuf::from("/w/a")]);
        o.canon.insert("/w/a".into(), "/real/a".into());
        assert!(!o.replace(vec![PathBuf::from("/w/a")]));
        assert_eq!(o.generation(), 0);
        assert!(o.canonical(Path::new("/w/a")).is_none());
        assert!(o.replace(vec![PathBuf::from("/w/a"), PathBuf::from("/w/b")]));
        assert_eq!(o.generation(), 1);
        assert_eq!(o.position(Path::new("/w/b")), Some(1));
    }
}
