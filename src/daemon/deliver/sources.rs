//! Which outboxes a pass lists, and the files it takes from them in
//! priority order: the served worktrees' locks, their canonical paths and
//! symlink checks (kept between passes), quiet outboxes skipped by their
//! folder stamps, and the backlog streamed in chunks.

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

pub(super) fn positions(worktrees: &[(PathBuf, PathBuf)]) -> HashMap<PathBuf, usize> {
    worktrees
        .iter()
        .enumerate()
        .map(|(i, (w, _))| (w.clone(), i))
        .collect()
}

pub(super) fn with_outboxes(worktrees: Vec<PathBuf>) -> Vec<(PathBuf, PathBuf)> {
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

impl Deliverer {
    /// Takes the lock of a worktree's `handoffs/` folder unless held already.
    /// `Ok(false)`: another process holds it. A folder that does not exist
    /// yet (or is a symlink) cannot be locked and has no outbox to scan.
    pub(super) fn claim(&mut self, wt_path: &Path) -> Result<bool, String> {
        if self.locks.contains_key(wt_path) {
            return Ok(true);
        }
        let handoffs = Worktree::new(wt_path).handoffs();
        if self.locks.len() >= self.lock_budget {
            // Served unlocked rather than stranded; said once.
            if !self.budget_warned {
                self.budget_warned = true;
                eprintln!(
                    "handoffd: the descriptor limit ({}) leaves room to lock {} worktrees; the others (first {}) are served unlocked, so a second daemon would not be kept out of them.\n  hint: raise `ulimit -n` (hard limit) for handoffd",
                    fsx::fd_limit(),
                    self.lock_budget,
                    handoffs.display()
                );
            }
            return Ok(true);
        }
        match fsx::try_lock_dir(&handoffs) {
            Ok(Some(lock)) => {
                self.locks.insert(wt_path.to_path_buf(), lock);
                self.foreign.remove(wt_path);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(format!("{}: {e}", handoffs.display())),
        }
    }

    /// At start-up: claims every served outbox, or names the one another
    /// daemon holds (then this daemon must not run).
    pub fn claim_all(&mut self) -> Result<(), String> {
        for wt in self.roles.worktrees() {
            let Ok(real) = wt.canonicalize() else {
                continue;
            };
            if let Ok(false) = self.claim(&real) {
                return Err(held_by_other(&Worktree::new(&real).handoffs()));
            }
        }
        Ok(())
    }

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
        let rescan = self.polling || self.full_due || !self.started_sources;
        self.started_sources = true;
        self.quiet.resize_with(self.worktrees.len(), || None);
        self.valid.resize_with(self.worktrees.len(), || None);
        let mut full = false;
        let mut stride = 1;
        let mut turn = 0;
        let chosen: Vec<usize> = if rescan {
            self.full_due = false;
            self.rescanned = true;
            stride = if self.polling {
                1
            } else {
                self.worktrees.len().div_ceil(QUIET_CHECKS).max(1)
            };
            full = self.scans.is_multiple_of(FULL_SCAN_EVERY * stride as u32);
            if full {
                self.quiet.clear();
                self.quiet.resize_with(self.worktrees.len(), || None);
                // Re-validated now and then: a folder swapped for a symlink.
                self.valid.iter_mut().for_each(|v| *v = None);
                self.canon.clear();
            }
            turn = self.scans as usize % stride;
            self.scans = self.scans.wrapping_add(1);
            self.dirty.clear();
            (0..self.worktrees.len()).collect()
        } else {
            self.rescanned = false;
            let mut v: Vec<usize> = self
                .dirty
                .drain()
                .filter(|&i| i < self.worktrees.len())
                .collect();
            v.sort_unstable();
            v
        };
        let mut out = Vec::new();
        let mut seen: HashSet<PathBuf> = HashSet::new();
        // Taken for the loop, not cloned: 10 000 paths per pass add up.
        let worktrees = std::mem::take(&mut self.worktrees);
        for i in chosen {
            let (raw, outbox_path) = &worktrees[i];
            if rescan && i % stride != turn && self.quiet[i].is_some() {
                continue;
            }
            // Stamped before listing: a file arriving after the listing
            // changes the stamp, so it is never skipped.
            let stamp = dir_stamp(outbox_path);
            if rescan && self.quiet[i].as_ref().is_some_and(|q| q.stamp == stamp) {
                continue;
            }
            self.quiet[i] = None;
            if stamp.is_none() {
                // No outbox (yet); it appears with a new stamp.
                self.quiet[i] = Some(Quiet { stamp });
                if let Some(v) = &self.valid[i] {
                    seen.insert(v.clone());
                } else if let Ok(real) = raw.canonicalize() {
                    seen.insert(real);
                }
                continue;
            }
            let wt_path = match &self.valid[i] {
                Some(v) => v.clone(),
                None => match self.validate(raw) {
                    Validated::Serve(p) => {
                        self.valid[i] = Some(p.clone());
                        p
                    }
                    Validated::Missing => {
                        // No worktree folder (yet): nothing to deliver from it.
                        self.quiet[i] = Some(Quiet { stamp });
                        continue;
                    }
                    Validated::Skip(p) => {
                        seen.insert(p);
                        continue;
                    }
                },
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
        self.worktrees = worktrees;
        // A worktree no longer served releases its lock (on a full scan,
        // where `seen` holds every worktree).
        if full {
            self.locks.retain(|wt, _| seen.contains(wt));
        }
        out.sort_by(|a, b| a.wt.cmp(&b.wt));
        out
    }

    /// Canonicalizes a worktree path, claims its lock and checks that its
    /// outbox is a plain folder (the per-worktree work a pass used to redo).
    pub(super) fn validate(&mut self, raw: &Path) -> Validated {
        let Ok(wt_path) = raw.canonicalize() else {
            return Validated::Missing;
        };
        self.canon.insert(raw.to_path_buf(), wt_path.clone());
        match self.claim(&wt_path) {
            Ok(true) => {}
            Ok(false) => {
                if self.foreign.insert(wt_path.clone()) {
                    eprintln!(
                        "handoffd: skipping {}: {}",
                        Worktree::new(&wt_path).outbox().display(),
                        held_by_other(&Worktree::new(&wt_path).handoffs())
                    );
                }
                return Validated::Skip(wt_path);
            }
            // Cannot lock it (out of descriptors, permissions): served
            // anyway, since skipping would strand its mail; said once.
            Err(e) => {
                if self.foreign.insert(wt_path.clone()) {
                    eprintln!(
                        "handoffd: cannot lock {e}; serving it unlocked (a second daemon would not be kept out of it)"
                    );
                }
            }
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
            let Ok(rd) = fs::read_dir(&s.outbox) else {
                continue;
            };
            let mut found = 0usize;
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !name.ends_with(".handoff") {
                    // A retry sidecar: checked for its file after the pass.
                    if first && crate::protocol::delivery_retry::handoff_of(&name).is_some() {
                        self.sidecars.insert(e.path());
                    }
                    continue;
                }
                // Directories are never queue items; everything else named
                // *.handoff is ours to deliver or refuse.
                if e.file_type().map(|t| t.is_dir()).unwrap_or(true) {
                    continue;
                }
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
                heap.push((name, s_i, e.path()));
            }
            if first && found == 0 && s.stamp.is_some_and(|st| settled(&st)) {
                self.quiet[s.index] = Some(Quiet { stamp: s.stamp });
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
