//! What the role cards count (docs/cockpit.md, "Live updates"): the items
//! in each worktree's `inbox/new`, `inbox/in_process`, `failed/` and outbox,
//! kept from the watcher's events instead of listing the folders on every
//! change. A folder is listed when it is first tracked, when the watcher
//! reports it fresh (content no event covered) and on a rescan; otherwise
//! each path an event names is looked at alone: there now, it is in; gone,
//! it is out. Listing on every change would cost what the folder once held,
//! not what it holds: an ext4 folder never gives back the blocks of the
//! entries it had, so an empty inbox that once held 25 000 copies lists as
//! slowly as a full one (docs/benchmarks.md, "The cockpit's live update").
//!
//! The invariant: once every path the events named since a folder was
//! listed has been noted, its entry is what listing it now would give (the
//! same names, each with the same `since` as `views::status` takes).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::protocol::store;
use crate::views::status;

/// Which queue folder, and so which entries count and since when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `inbox/new`: items, since their `enqueued_at`.
    New,
    /// `inbox/in_process`: items and batch folders, since their mtime.
    InProcess,
    /// `failed/` and the outbox: items, since their mtime.
    Items,
}

struct Folder {
    kind: Kind,
    items: BTreeMap<String, Option<SystemTime>>,
}

/// The tracked folders and what each holds.
pub struct Folders {
    dirs: HashMap<PathBuf, Folder>,
    /// `limits.max_file_bytes`: a copy in `new/` is read for its
    /// `enqueued_at` up to its copy limit.
    max_file_bytes: u64,
}

impl Default for Folders {
    fn default() -> Self {
        Folders::new(crate::protocol::config::Limits::default().max_file_bytes)
    }
}

/// Whether an entry counts in a folder of `kind`: its handoff files, and
/// in `in_process/` its batch folders.
fn counts(kind: Kind, entry: store::Kind) -> bool {
    matches!(entry, store::Kind::Handoff | store::Kind::Odd)
        || (kind == Kind::InProcess && entry == store::Kind::Batch)
}

/// The entry's `since` as `views::status` takes it (a copy read up to the
/// copy limit of `max_file_bytes`).
fn since(
    kind: Kind,
    path: &Path,
    md: &std::fs::Metadata,
    max_file_bytes: u64,
) -> Option<SystemTime> {
    let mtime = md.modified().ok();
    match kind {
        Kind::New => status::waiting_since(path, mtime, max_file_bytes),
        Kind::InProcess | Kind::Items => mtime,
    }
}

fn list(dir: &Path, kind: Kind, max_file_bytes: u64) -> BTreeMap<String, Option<SystemTime>> {
    let mut out = BTreeMap::new();
    status::each_entry(dir, |e| {
        if counts(kind, e.kind) {
            let at = e
                .metadata()
                .ok()
                .and_then(|md| since(kind, &e.path, &md, max_file_bytes));
            out.insert(e.name, at);
        }
    });
    out
}

impl Folders {
    /// No folder tracked yet; copies are read up to the copy limit of
    /// `max_file_bytes` (the project's `limits.max_file_bytes`).
    pub fn new(max_file_bytes: u64) -> Folders {
        Folders {
            dirs: HashMap::new(),
            max_file_bytes,
        }
    }

    /// Tracks `dir` (listing it once); a folder tracked already is kept.
    pub fn track(&mut self, dir: &Path, kind: Kind) {
        if !self.dirs.contains_key(dir) {
            let items = list(dir, kind, self.max_file_bytes);
            self.dirs.insert(dir.to_path_buf(), Folder { kind, items });
        }
    }

    /// Lists `dir` again, when tracked.
    pub fn relist(&mut self, dir: &Path) {
        if let Some(f) = self.dirs.get_mut(dir) {
            f.items = list(dir, f.kind, self.max_file_bytes);
        }
    }

    /// Lists every tracked folder again.
    pub fn relist_all(&mut self) {
        for (dir, f) in self.dirs.iter_mut() {
            f.items = list(dir, f.kind, self.max_file_bytes);
        }
    }

    /// Looks at one path an event named; the folder it is in, when tracked.
    pub fn note(&mut self, path: &Path) -> Option<PathBuf> {
        let dir = path.parent()?;
        let f = self.dirs.get_mut(dir)?;
        let name = path.file_name()?.to_string_lossy().into_owned();
        // Classified as a listing would (the entry's own type, never a
        // symlink's target), so the invariant above holds.
        match std::fs::symlink_metadata(path) {
            Ok(md) if counts(f.kind, store::classify(&name, md.is_dir(), md.is_file())) => {
                let at = since(f.kind, path, &md, self.max_file_bytes);
                f.items.insert(name, at);
            }
            _ => {
                f.items.remove(&name);
            }
        }
        Some(dir.to_path_buf())
    }

    /// (count, the oldest `since`) of a tracked folder, as
    /// `status::waiting`/`status::items` give them.
    pub fn count(&self, dir: &Path) -> (usize, Option<SystemTime>) {
        self.dirs.get(dir).map_or((0, None), |f| {
            (f.items.len(), f.items.values().flatten().min().copied())
        })
    }

    /// The `since` of every entry of a tracked folder that has one.
    pub fn sinces(&self, dir: &Path) -> Vec<SystemTime> {
        self.dirs
            .get(dir)
            .map(|f| f.items.values().flatten().copied().collect())
            .unwrap_or_default()
    }

    /// The first entry by name and its `since`, as `status::in_process`.
    pub fn first(&self, dir: &Path) -> Option<(PathBuf, Option<SystemTime>)> {
        let f = self.dirs.get(dir)?;
        f.items.iter().next().map(|(n, t)| (dir.join(n), *t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noted_paths_keep_a_folder_as_listing_it_would() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("in_process");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("50_b.handoff"), "x").unwrap();
        let mut f = Folders::default();
        f.track(&dir, Kind::InProcess);
        assert_eq!(f.count(&dir).0, 1);
        std::fs::write(dir.join("10_a.handoff"), "x").unwrap();
        std::fs::create_dir(dir.join("batch_20261201T000000Z_x")).unwrap();
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        for n in ["10_a.handoff", "batch_20261201T000000Z_x", "notes.txt"] {
            assert_eq!(f.note(&dir.join(n)), Some(dir.clone()));
        }
        assert_eq!(f.count(&dir).0, 3);
        assert_eq!(f.first(&dir).unwrap().0, dir.join("10_a.handoff"));
        std::fs::remove_file(dir.join("10_a.handoff")).unwrap();
        f.note(&dir.join("10_a.handoff"));
        assert_eq!(f.count(&dir).0, 2);
        assert_eq!(
            f.count(&dir),
            (
                list(&dir, Kind::InProcess, f.max_file_bytes).len(),
                f.count(&dir).1
            )
        );
        assert_eq!(f.note(&d.path().join("elsewhere.handoff")), None);
        // A change no event named shows after a relisting.
        std::fs::remove_file(dir.join("50_b.handoff")).unwrap();
        f.relist(&dir);
        assert_eq!(f.count(&dir).0, 1);
    }
}
