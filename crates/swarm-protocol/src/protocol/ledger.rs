//! The one durable request/answer primitive (issue 44, "One ledger"): a
//! request is published, marked started, answered and retired, and a
//! process killed at any point of that leaves files from which the next
//! start carries it on, never doing its effect twice and never telling two
//! different answers.
//!
//! A ledger is one folder its carrier owns (handoffd, the bridge). An entry is the set of files
//! named after its id there; each feature names them its own way
//! ([`Spec`]), so a store moved onto the ledger keeps its files byte for
//! byte. The states, in order, each reached by one durable step through
//! `fsx` (temp + fsync + rename that cannot clobber + fsync of the folder;
//! a removal is followed by the folder's fsync):
//!
//! 1. **requested**: `<id><request>` ([`Ledger::publish`], or
//!    [`Ledger::admit`] from a folder another party writes). Never
//!    half-written; published again it is left as it is, and a retired id
//!    (its tombstone there) is not taken again.
//! 2. **started** (optional): `<id><started>`, empty, published just before
//!    the effect ([`Ledger::start`]). Found there after a crash,
//!    [`Start::Again`] tells the caller the effect may have happened, and
//!    the caller asks its own state whether it did before doing it again.
//! 3. **answered** (optional): `<id><answer>`, the whole answer, kept
//!    before it is told to anyone ([`Ledger::answer_once`]): told again
//!    after a crash, it is the same bytes.
//! 4. **retired** ([`Ledger::retire`]): the tombstone `<done>/<id>` first
//!    (when the spec keeps one), then the request (removed, or moved whole
//!    where the store keeps them), then the files beside it (started,
//!    answer, the caller's companions) in that order.
//!
//! The invariant: an entry whose request is in the folder is not finished,
//! and [`Ledger::pending`] lists it for the next start to carry on; an
//! entry whose request is gone is finished, and what is left beside it (a
//! kill in the middle of a retire) is removed by [`Ledger::sweep`]. One
//! worker per entry at a time is the caller's to keep, with
//! [`Ledger::lock`] (an OS lock: a killed holder leaves none behind) or
//! with a single thread.
//!
//! Where a store keeps its files its own way, the ledger follows it: temp
//! files in a folder of their own ([`Ledger::temps_in`]), tombstones in a
//! folder beside the requests ([`Ledger::tombstones_in`]), a retired
//! request kept whole instead of removed ([`Ledger::keeps_in`]). A request
//! taken from a source that gives it again until told it was taken (a
//! stream's redelivery) is tombstoned as soon as it is published
//! ([`Ledger::tombstone`]), before the source is told, and carried on from
//! the folder. A store without a started marker carries a request found
//! pending after a crash out again: its effect must repeat harmlessly, and
//! its spec says why it does.
//!
//! On the ledger: seat requests (`lineup::seat`), a confined agent's forum
//! requests (`forum::requests`), the bridge's control records, both sides
//! (`bridge::control`). Not on it, decided (issue 44): *schedules* (the
//! wake-up queue, `protocol::wakeups`; a delivery's retry sidecars,
//! `protocol::delivery_retry`) and *keyed records* a feature rewrites as
//! long as what they describe lives (an A2A task and its push cursors,
//! `a2a::store`). They are a second primitive, named as such: one record
//! per key, replaced whole by `fsx::replace` (after a crash it is the old
//! record or the new one, never a mix), never retired by an answer. They
//! have no request to carry on and no answer to tell once: a schedule's
//! record is a hint whose loss or repetition never undoes or repeats a
//! delivery, and an A2A task's exactly-once rests on its id, derived from
//! the request (role and A2A message id), by which its handoff is found in
//! the trail after a crash. A "schedule kind" here would be that second
//! primitive under the ledger's name, with none of its states; so there
//! is none.

use std::io;
use std::path::{Path, PathBuf};

use crate::fsx::{self, ReadRefusal};

/// How a feature names the files of its entries.
#[derive(Debug)]
pub struct Spec {
    /// Suffix of a request: `<id><request>`.
    pub request: &'static str,
    /// Suffix of the started marker, for a store that marks it.
    pub started: Option<&'static str>,
    /// Suffix of the kept answer, for a store that keeps one.
    pub answer: Option<&'static str>,
    /// Suffixes of files the caller's effect keeps beside a request (a
    /// mark of what it did), removed after the request, in this order.
    pub companions: &'static [&'static str],
    /// Folder of tombstones `<done>/<id>`, for a store whose requests may
    /// be published again after they were retired.
    pub done: Option<&'static str>,
    /// Suffix of the lock file of one entry, for a store with one worker
    /// per entry.
    pub lock: Option<&'static str>,
    /// Which ids the store's grammar takes (anything else in the folder,
    /// temp files included, is not an entry).
    pub valid_id: fn(&str) -> bool,
}

/// What [`Ledger::start`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Marked now: the effect has not begun.
    First,
    /// Marked by an earlier run, killed before its answer: the effect may
    /// have happened.
    Again,
}

/// One store's folder, named by its spec.
#[derive(Clone, Debug)]
pub struct Ledger {
    dir: PathBuf,
    spec: &'static Spec,
    /// Where files are written before they are renamed into place (None:
    /// the folder each is published in).
    tmp: Option<PathBuf>,
    /// The folder of tombstones, for a spec that keeps them.
    done: Option<PathBuf>,
    /// Where a retired request is kept whole, for a store that keeps them.
    kept: Option<PathBuf>,
}

impl Ledger {
    pub fn new(dir: PathBuf, spec: &'static Spec) -> Ledger {
        Ledger {
            tmp: None,
            done: spec.done.map(|d| dir.join(d)),
            kept: None,
            dir,
            spec,
        }
    }

    /// Temp files go to `tmp` (on the same file system), not the folder:
    /// for a store whose temp files always went to a folder of their own.
    pub fn temps_in(mut self, tmp: PathBuf) -> Ledger {
        self.tmp = Some(tmp);
        self
    }

    /// Tombstones go to `done`, not `<folder>/<spec.done>`: for a store
    /// whose tombstones are a folder beside its requests.
    pub fn tombstones_in(mut self, done: PathBuf) -> Ledger {
        self.done = Some(done);
        self
    }

    /// A retire moves the request, whole, into `kept` instead of removing
    /// it: for a store that keeps what it carried out.
    pub fn keeps_in(mut self, kept: PathBuf) -> Ledger {
        self.kept = Some(kept);
        self
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, id: &str, suffix: &str) -> PathBuf {
        self.dir.join(format!("{id}{suffix}"))
    }

    /// The request of `id`.
    pub fn request_file(&self, id: &str) -> PathBuf {
        self.file(id, self.spec.request)
    }

    /// The tombstone of `id`, for a spec that keeps them.
    fn done_file(&self, id: &str) -> Option<PathBuf> {
        self.done.as_ref().map(|d| d.join(id))
    }

    /// Where the retired request `id` is kept, for a store that keeps them.
    fn kept_file(&self, id: &str) -> Option<PathBuf> {
        let name = format!("{id}{}", self.spec.request);
        self.kept.as_ref().map(|d| d.join(name))
    }

    /// Whether `id` was retired (a store with neither tombstones nor kept
    /// requests: never known).
    pub fn is_done(&self, id: &str) -> bool {
        self.done_file(id).is_some_and(|f| f.exists())
            || self.kept_file(id).is_some_and(|f| f.exists())
    }

    /// Publishes the request `id`. False when it was there already or was
    /// retired: a request is taken once.
    pub fn publish(&self, id: &str, bytes: &[u8]) -> io::Result<bool> {
        let f = self.request_file(id);
        if f.exists() || self.is_done(id) {
            return Ok(false);
        }
        let tmp = self.tmp.as_ref().unwrap_or(&self.dir);
        fsx::ensure_dirs(&[&self.dir, tmp])?;
        match fsx::publish(tmp, &f, bytes) {
            Ok(()) => {
                step("requested");
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Moves the request `name` out of `from` (a folder another party
    /// writes, held open) into the ledger as the request `id`, without
    /// clobbering. False when a request `id` is here already (the source is
    /// left where it was, for the caller to judge).
    pub fn admit(&self, from: &fsx::HeldDir, name: &str, id: &str) -> io::Result<bool> {
        fsx::ensure_dirs(&[&self.dir])?;
        match from.move_out(name, &self.request_file(id)) {
            Ok(()) => {
                step("admitted");
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The ids among `names` that name a request of this spec, oldest
    /// first where an id starts with its time.
    pub fn ids_among(&self, names: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut ids: Vec<String> = names
            .into_iter()
            .filter_map(|n| {
                n.strip_suffix(self.spec.request)
                    .filter(|id| (self.spec.valid_id)(id))
                    .map(str::to_string)
            })
            .collect();
        ids.sort();
        ids
    }

    fn names(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        rd.flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect()
    }

    /// Every entry not finished: what a start carries on.
    pub fn pending(&self) -> Vec<String> {
        self.ids_among(self.names())
    }

    /// The request of `id`, read bounded; None when it is gone (retired
    /// by another worker meanwhile).
    pub fn read_request(&self, id: &str, max: u64) -> Result<Option<Vec<u8>>, ReadRefusal> {
        match fsx::read_bounded(&self.request_file(id), max) {
            Ok(b) => Ok(Some(b)),
            Err(ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The lock of one entry (blocks until it is ours): `<id><lock>`, or
    /// `<id>.lock` for a spec that names none.
    pub fn lock(&self, id: &str) -> io::Result<fsx::Lock> {
        let suffix = self.spec.lock.unwrap_or(".lock");
        fsx::lock(&self.file(id, suffix))
    }

    /// Marks `id` started, before its effect, or says it was.
    pub fn start(&self, id: &str) -> io::Result<Start> {
        let Some(suffix) = self.spec.started else {
            return Ok(Start::First);
        };
        let f = self.file(id, suffix);
        if f.exists() {
            return Ok(Start::Again);
        }
        match fsx::publish(self.tmp.as_ref().unwrap_or(&self.dir), &f, b"") {
            Ok(()) => {
                step("started");
                Ok(Start::First)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(Start::Again),
            Err(e) => Err(e),
        }
    }

    /// The answer kept for `id`, if there is one that reads.
    pub fn answer(&self, id: &str, max: u64) -> Option<Vec<u8>> {
        let suffix = self.spec.answer?;
        fsx::read_bounded(&self.file(id, suffix), max).ok()
    }

    /// The answer of `id`: the kept one, or `make`'s, kept before it is
    /// returned (so whoever is told, is told these bytes, crash or not).
    pub fn answer_once(
        &self,
        id: &str,
        max: u64,
        make: impl FnOnce() -> io::Result<Vec<u8>>,
    ) -> io::Result<Vec<u8>> {
        if let Some(b) = self.answer(id, max) {
            return Ok(b);
        }
        let bytes = make()?;
        if let Some(suffix) = self.spec.answer {
            let tmp = self.tmp.as_ref().unwrap_or(&self.dir);
            fsx::publish(tmp, &self.file(id, suffix), &bytes)?;
            step("answered");
        }
        Ok(bytes)
    }

    /// The files beside a request, in the order a retire removes them.
    fn beside(&self) -> impl Iterator<Item = &'static str> {
        let s = self.spec;
        s.started
            .into_iter()
            .chain(s.answer)
            .chain(s.companions.iter().copied())
    }

    /// Publishes the tombstone of `id` (when the spec keeps them) and
    /// leaves its request: for a request taken from a source that gives it
    /// again until told it was taken (a stream's redelivery), which then
    /// finds it done while it is still carried on here.
    pub fn tombstone(&self, id: &str) -> io::Result<()> {
        let Some(f) = self.done_file(id) else {
            return Ok(());
        };
        if f.exists() {
            return Ok(());
        }
        let d = parent_of(&f);
        let tmp = self.tmp.as_ref().unwrap_or(&d);
        fsx::ensure_dirs(&[&d, tmp])?;
        match fsx::publish(tmp, &f, b"") {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => step("tombstoned"),
        }
        Ok(())
    }

    /// Retires `id`: its tombstone, then its request (removed, or moved
    /// whole to where the store keeps them), then what is beside it.
    pub fn retire(&self, id: &str) -> io::Result<()> {
        self.tombstone(id)?;
        let request = self.request_file(id);
        match self.kept_file(id) {
            Some(kept) => keep(&request, &kept)?,
            None => fsx::remove_file(&request)?,
        }
        step(self.spec.request);
        for suffix in self.beside() {
            fsx::remove_file(&self.file(id, suffix))?;
            step(suffix);
        }
        if self.dir.is_dir() {
            fsx::sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Removes what a retire killed midway left beside a request that is
    /// gone. Returns how many files went.
    pub fn sweep(&self) -> io::Result<usize> {
        let names = self.names();
        let mut gone = 0;
        for name in &names {
            for suffix in self.beside() {
                let Some(id) = name.strip_suffix(suffix) else {
                    continue;
                };
                if (self.spec.valid_id)(id) && !self.request_file(id).exists() {
                    fsx::remove_file(&self.dir.join(name))?;
                    gone += 1;
                }
                break;
            }
        }
        if gone > 0 {
            fsx::sync_dir(&self.dir)?;
        }
        Ok(gone)
    }
}

fn parent_of(f: &Path) -> PathBuf {
    f.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Moves `request` to `kept` without clobbering. Gone already is moved (a
/// retire killed after the move); kept already (a copy published again
/// after that) leaves the request to go.
fn keep(request: &Path, kept: &Path) -> io::Result<()> {
    fsx::ensure_dirs(&[parent_of(kept)])?;
    match fsx::move_noreplace(request, kept) {
        Ok(()) => Ok(()),
        Err(e) if fsx::moved_to(&e).is_some() => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => fsx::remove_file(request),
        Err(e) => Err(e),
    }
}

/// A durable step of a store's own, between the ledger's: where a crash
/// test stops its child (a no-op in every other build).
pub fn step(_name: &str) {
    #[cfg(any(test, feature = "crash-test"))]
    crash::step(_name);
}

#[cfg(any(test, feature = "crash-test"))]
pub mod crash;

#[cfg(test)]
mod tests;
