//! The files that wait in their outbox: when each is looked at again, the
//! reason last logged for it, and its retry sidecar on disk.
//!
//! A file that only waits (a pause, a discussion turn) is looked at again
//! after [`RETRY_FIRST`], doubled per look up to [`WAIT_CAP`]; a file whose
//! delivery *failed* waits as its retry record says
//! (`protocol::delivery_retry`: doubling up to 60 s, as today's SwarmForge
//! retries). Either way a fault that lasts costs one attempt every so often,
//! not a busy loop; a roles.tsv or config change or a resume makes every
//! file due at once ([`Retries::all_now`]), since it may be the repair.
//!
//! Invariants kept here: **the record is a report, never a condition of
//! delivery** (a sidecar that cannot be written is logged and the retry goes
//! on from memory); **a file that leaves its outbox takes its sidecar and
//! attention record with it** ([`Retries::forget`], and after each pass
//! [`Retries::prune`] for files that left by other ways); a stuck file logs
//! its reason once per cause.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::daemon::journal::{Event, Journal, Kind};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::delivery_retry;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;

/// First wait before a file that only waits is looked at again.
const RETRY_FIRST: Duration = Duration::from_millis(200);
/// Longest wait between two looks at a file that only waits.
const WAIT_CAP: Duration = Duration::from_secs(5);

struct Retry {
    next: Instant,
    backoff: Duration,
    /// The failed attempts, as the sidecar beside the file says (none while
    /// the file only waits).
    record: Option<delivery_retry::Retry>,
}

#[derive(Default)]
pub(super) struct Retries {
    /// When each waiting file may be tried again, by its outbox path.
    due: HashMap<PathBuf, Retry>,
    /// Last reason logged per file, so a stuck file logs once per cause.
    logged: HashMap<PathBuf, String>,
    /// Retry sidecars the first listing of an outbox saw in this pass: those
    /// whose file is gone by the pass's end are removed.
    sidecars: HashSet<PathBuf>,
}

impl Retries {
    /// Whether `path` waits still at `now`.
    pub(super) fn waits(&self, path: &Path, now: Instant) -> bool {
        self.due.get(path).is_some_and(|r| now < r.next)
    }

    /// Whether a retry of `path` is kept in memory.
    pub(super) fn knows(&self, path: &Path) -> bool {
        self.due.contains_key(path)
    }

    /// A sidecar the listing saw (checked for its file after the pass).
    pub(super) fn saw_sidecar(&mut self, sidecar: PathBuf) {
        self.sidecars.insert(sidecar);
    }

    /// Whether the listing of this pass saw a sidecar for `path`.
    pub(super) fn has_sidecar(&self, path: &Path) -> bool {
        self.sidecars.contains(&delivery_retry::sidecar_of(path))
    }

    /// Every waiting file is due now; the failed attempts stay counted.
    pub(super) fn all_now(&mut self) {
        let now = Instant::now();
        for r in self.due.values_mut() {
            r.next = now;
        }
    }

    /// `path` left its outbox (delivered, refused, gone): it waits no more,
    /// and its sidecar and attention record go too.
    pub(super) fn done(&mut self, project: &Project, path: &Path) {
        self.logged.remove(path);
        if self.due.remove(path).is_some() {
            forget(project, path);
        }
    }

    /// `path` vanished: it waits no more (the reason logged stays until the
    /// pass's end, as the file may come back by the same name).
    pub(super) fn vanished(&mut self, project: &Project, path: &Path) {
        if self.due.remove(path).is_some() {
            forget(project, path);
        }
    }

    /// `path` waits (a pause, a discussion turn): looked at again after a
    /// wait that doubles per look up to [`WAIT_CAP`]; no failure counted.
    pub(super) fn wait(&mut self, journal: &Journal, path: &Path, reason: String) {
        let before = self.due.remove(path);
        let backoff = before
            .as_ref()
            .map_or(RETRY_FIRST, |r| (r.backoff * 2).min(WAIT_CAP));
        self.due.insert(
            path.to_path_buf(),
            Retry {
                next: Instant::now() + backoff,
                backoff,
                record: before.and_then(|r| r.record),
            },
        );
        self.log(journal, path, reason);
    }

    /// `path` failed for now: one more attempt counted in its sidecar (and
    /// from the third on its attention record), tried again as the record
    /// says.
    pub(super) fn defer(
        &mut self,
        journal: &Journal,
        project: &Project,
        roles: &Roles,
        path: &Path,
        worktree: &Path,
        reason: String,
    ) {
        let before = self.due.remove(path).and_then(|r| r.record);
        let record = delivery_retry::Retry::after_failure(before.as_ref(), &reason, clock::now());
        let backoff = delivery_retry::backoff(record.attempt);
        write_record(project, roles, path, worktree, &record);
        self.due.insert(
            path.to_path_buf(),
            Retry {
                next: Instant::now() + backoff,
                backoff,
                record: Some(record),
            },
        );
        self.log(journal, path, reason);
    }

    fn log(&mut self, journal: &Journal, path: &Path, reason: String) {
        if self.logged.get(path) != Some(&reason) {
            journal.record(&Event::new(Kind::Deferred).path(path).reason(&reason));
            self.logged.insert(path.to_path_buf(), reason);
        }
    }

    /// Reads the sidecar of a file this process has not tried yet: the
    /// attempts so far count on, and the wait it names is kept (never
    /// longer than the cap: a sidecar is in an agent's outbox, so a far
    /// future `next-at` must not stall the file).
    pub(super) fn resume(&mut self, path: &Path) {
        let Some(record) = delivery_retry::read(path) else {
            return;
        };
        let left = (record.next_at - clock::now())
            .to_std()
            .unwrap_or_default()
            .min(delivery_retry::BACKOFF_CAP);
        self.due.insert(
            path.to_path_buf(),
            Retry {
                next: Instant::now() + left,
                backoff: delivery_retry::backoff(record.attempt),
                record: Some(record),
            },
        );
    }

    /// After a pass: forgets the files that are gone (delivered by hand,
    /// removed) and removes the sidecars whose file left the outbox by
    /// other ways (by hand, a hold, a crash between the move to `sent/` and
    /// the clean-up).
    pub(super) fn prune(&mut self, project: &Project) {
        self.logged.retain(|p, _| p.exists());
        let gone: Vec<PathBuf> = self.due.keys().filter(|p| !p.exists()).cloned().collect();
        for p in gone {
            self.due.remove(&p);
            forget(project, &p);
        }
        for sidecar in std::mem::take(&mut self.sidecars) {
            let name = sidecar
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            let handoff = name
                .as_deref()
                .and_then(delivery_retry::handoff_of)
                .map(|h| sidecar.with_file_name(h));
            if let Some(h) = handoff.filter(|h| !h.exists() && !self.due.contains_key(h)) {
                forget(project, &h);
            }
        }
    }
}

/// Writes the failed attempts of the file at `path` (in `worktree`'s outbox)
/// beside it and, from the third on, its attention record. A write that
/// fails is logged.
fn write_record(
    project: &Project,
    roles: &Roles,
    path: &Path,
    worktree: &Path,
    record: &delivery_retry::Retry,
) {
    let wt = Worktree::new(worktree);
    if let Err(e) = delivery_retry::write(&wt, path, record) {
        eprintln!(
            "handoffd: cannot write {}: {e}",
            delivery_retry::sidecar_of(path).display()
        );
    }
    if record.needs_attention() {
        let sender = roles
            .roles
            .iter()
            .filter(|r| r.worktree_path == worktree)
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(",");
        if let Err(e) = delivery_retry::write_attention(project, path, &sender, record) {
            eprintln!(
                "handoffd: cannot write {}: {e}",
                delivery_retry::attention_file(project, path).display()
            );
        }
    }
}

/// The file at `path` is delivered, refused or gone: its sidecar and
/// attention record go too.
fn forget(project: &Project, path: &Path) {
    for f in [
        delivery_retry::sidecar_of(path),
        delivery_retry::attention_file(project, path),
    ] {
        if let Err(e) = fsx::remove_file(&f) {
            if e.kind() != io::ErrorKind::NotFound {
                eprintln!("handoffd: cannot remove {}: {e}", f.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_file_backs_off_to_the_cap_and_a_repair_makes_it_due() {
        let d = tempfile::tempdir().unwrap();
        let project = Project::new(d.path());
        let journal = Journal::new(&project);
        let f = d
            .path()
            .join("50_20260615T140531Z_000001_from_a_to_b.handoff");
        let mut r = Retries::default();
        let mut last = Duration::ZERO;
        for _ in 0..10 {
            r.wait(&journal, &f, "paused".into());
            last = r.due[&f].backoff;
        }
        assert_eq!(last, WAIT_CAP);
        assert!(r.waits(&f, Instant::now()));
        r.all_now();
        assert!(!r.waits(&f, Instant::now()));
        // The reason is logged once per cause, not once per look.
        assert_eq!(r.logged[&f], "paused");
        r.done(&project, &f);
        assert!(!r.knows(&f) && !r.logged.contains_key(&f));
    }
}
