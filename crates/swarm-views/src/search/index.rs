//! The index's folder, `.swarmforge/search/`: a manifest naming the segments
//! and, per watched folder, the modification time it had when last read; and
//! the segments (`segment.rs`). Derived from the message files, never the
//! truth: deleting the folder loses nothing, `swarm search --reindex`
//! rebuilds it, and a damaged index is rebuilt by the next refresh.
//!
//! Invariant kept here: a message (by id) is in at most one segment. A
//! refresh reads only folders whose modification time moved (or was too
//! recent to trust: a file renamed in within the same clock tick would not
//! move it), and indexes only ids no segment holds. Writers hold
//! `index.flock`; readers take no lock (segments are immutable, the manifest
//! is replaced whole).
//!
//! What one refresh reads and what the index keeps are bounded
//! (search/bounds.rs): a folder a refresh left messages in for lack of
//! budget is stamped unread, so the next refresh reads it again; what the
//! bounds keep out is counted per folder in the manifest.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::manifest::{mtime_ns, ns, SETTLE};
pub use super::manifest::{Manifest, SegInfo};
use super::pass::Pass;
use super::segment::{self, Segment};
use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::config::Config;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::trail;
use crate::text::escape;

/// 2: blocks of postings with their score bounds (`.blk`).
const VERSION: u32 = 2;
/// Largest manifest read (one line per watched folder).
const MAX_MANIFEST: u64 = 32 * 1024 * 1024;

/// What a refresh did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Refreshed {
    pub added: usize,
    pub docs: u64,
    pub segments: usize,
    pub folders_read: usize,
    /// Bytes of text this refresh indexed.
    pub bytes: u64,
    /// Messages this refresh indexed only in part.
    pub cut: usize,
    /// Messages left for the next refresh (its budget was spent).
    pub deferred: usize,
    /// Messages kept out: their worktree's or the index's bound is reached.
    pub unindexed: usize,
    /// The index's files on disk after it, in bytes.
    pub disk_bytes: u64,
}

/// The index of one project.
pub struct Index {
    pub project: Project,
    pub dir: PathBuf,
}

fn valid_segment_name(n: &str) -> bool {
    n.strip_prefix("seg-")
        .is_some_and(|d| !d.is_empty() && d.len() <= 12 && d.bytes().all(|b| b.is_ascii_digit()))
}

impl Index {
    pub fn new(project: &Project) -> Index {
        Index {
            project: project.clone(),
            dir: project.swarmforge().join("search"),
        }
    }

    fn manifest_path(&self) -> PathBuf {
        self.dir.join("manifest.json")
    }
    fn tmp(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    /// The folder must be a real folder of the project: a symlink there
    /// would make the index read (and write) somewhere else.
    fn check_dir(&self) -> Result<bool> {
        match std::fs::symlink_metadata(&self.dir) {
            Ok(m) if m.is_dir() => Ok(true),
            Ok(_) => Err(Error::bad_file_hint(&self.dir, "not a folder (a symlink or a file); the search index must live inside the project.", "remove it and run `swarm search --reindex`")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e).at(&self.dir),
        }
    }

    /// The manifest, or an empty one when there is no index yet.
    pub fn manifest(&self) -> Result<Manifest> {
        if !self.check_dir()? {
            return Ok(Manifest::default());
        }
        let p = self.manifest_path();
        let bytes = match fsx::read_bounded(&p, MAX_MANIFEST) {
            Ok(b) => b,
            Err(fsx::ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Manifest::default())
            }
            Err(e) => return Err(self.damaged(&format!("{}: {e}", p.display()))),
        };
        let m: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| self.damaged(&format!("{}: {e}", p.display())))?;
        if m.version > VERSION {
            return Err(self.damaged(&format!("{}: version {}", p.display(), m.version)));
        }
        if m.version < VERSION {
            // An index an older build wrote: nothing in it is read, the
            // next refresh rebuilds it (keeping the segment numbering).
            return Ok(Manifest {
                version: m.version,
                next: m.next,
                ..Manifest::default()
            });
        }
        if let Some(bad) = m.segments.iter().find(|s| !valid_segment_name(&s.name)) {
            return Err(self.damaged(&format!(
                "{}: segment name '{}' is not of the form seg-<digits>",
                p.display(),
                escape(&bad.name)
            )));
        }
        Ok(m)
    }

    fn damaged(&self, what: &str) -> Error {
        Error::env(format!(
            "search index damaged: {what}\n  hint: run `swarm search --reindex` (the index is rebuilt from the message files)"
        ))
    }

    /// Opens the manifest's segments.
    pub fn open(&self, m: &Manifest) -> Result<Vec<Segment>> {
        m.segments
            .iter()
            .map(|s| {
                Segment::open(&self.dir, &s.name)
                    .map_err(|e| self.damaged(&format!("{}: {e}", s.name)))
            })
            .collect()
    }

    /// The folders messages are said in: each local worktree's outbox,
    /// sent, held and failed, its archive folder and each archived day; and
    /// the same folders of the mirror this host keeps of each role on
    /// another host (docs/bridge.md, "One trail").
    pub fn folders(&self, roles: &Roles, config: &Config) -> Vec<(PathBuf, PathBuf)> {
        let mut v = Vec::new();
        let mut seen = HashSet::new();
        for r in &roles.roles {
            let root = if let Some((_, mirror)) = trail::mirror_of(&self.project, config, r) {
                mirror
            } else {
                r.worktree_in(&self.project.root)
            };
            if !seen.insert(root.clone()) {
                continue;
            }
            let wt = Worktree::new(&root);
            for d in [wt.outbox(), wt.sent(), wt.held(), wt.failed(), wt.archive()] {
                v.push((root.clone(), d));
            }
            for day in wt.archive_days() {
                v.push((root.clone(), day.join("sent")));
                v.push((root.clone(), day.join("failed")));
            }
        }
        v
    }

    /// The host whose files a worktree (as [`Index::key`] names it) mirrors;
    /// `None` for this host's own.
    pub fn host_of(&self, wt_key: &str) -> Option<String> {
        let hosts = self.project.bridge_dir().join("hosts");
        let rest = self.project.root.join(wt_key);
        let rest = rest.strip_prefix(&hosts).ok()?;
        rest.components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
    }

    /// The name a folder has in the manifest (relative to the root).
    pub fn key(&self, p: &Path) -> String {
        super::manifest::key(&self.project.root, p)
    }

    /// Whether any watched folder moved since the manifest was written.
    pub fn stale(&self, m: &Manifest) -> Result<bool> {
        let roles = Roles::load(&self.project.roles_tsv())?;
        let config = Config::load(&self.project.config_file())?;
        let now = SystemTime::now();
        for (_, d) in self.folders(&roles, &config) {
            let seen = m.folders.get(&self.key(&d)).copied();
            match mtime_ns(&d) {
                None => {
                    if seen.is_some() {
                        return Ok(true);
                    }
                }
                Some(t) => {
                    let recent = now.duration_since(t).map_or(true, |a| a < SETTLE);
                    if recent || seen != Some(ns(t)) {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }

    fn lock(&self) -> Result<fsx::Lock> {
        fsx::ensure_dirs(&[&self.dir, &self.tmp()]).at(&self.dir)?;
        self.check_dir()?;
        let p = self.dir.join("index.flock");
        let lock = fsx::lock(&p).at(&p)?;
        // What a killed writer left half-written.
        let _ = fsx::clean_stale_temps(&self.tmp(), Duration::from_secs(60));
        Ok(lock)
    }

    /// The bytes the manifest's segments take on disk.
    pub fn disk_bytes(&self, m: &Manifest) -> u64 {
        m.segments
            .iter()
            .flat_map(|s| segment::files(&self.dir, &s.name))
            .filter_map(|f| std::fs::symlink_metadata(f).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Refreshes until no message waits for a later refresh (each one
    /// bounded in memory; what is over a bound stays out): a query's view.
    pub fn refresh_all(&self) -> Result<Refreshed> {
        let mut r = self.refresh()?;
        while r.deferred > 0 && r.added > 0 {
            r = self.refresh()?;
        }
        Ok(r)
    }

    /// Adds what the files hold and the index does not, within the bounds
    /// of one refresh. A damaged index is rebuilt from scratch.
    pub fn refresh(&self) -> Result<Refreshed> {
        let _lock = self.lock()?;
        match self.refresh_locked(false) {
            Ok(r) => Ok(r),
            Err(e) if e.to_string().contains("search index damaged") => self.refresh_locked(true),
            Err(e) => Err(e),
        }
    }

    /// Throws the index away and builds it again from the files (as many
    /// refreshes as its bounds take).
    pub fn reindex(&self) -> Result<Refreshed> {
        let r = {
            let _lock = self.lock()?;
            self.refresh_locked(true)?
        };
        if r.deferred > 0 && r.added > 0 {
            return self.refresh_all();
        }
        Ok(r)
    }

    fn refresh_locked(&self, scratch: bool) -> Result<Refreshed> {
        let (mut m, scratch) = self.base(scratch)?;
        let old_files = if scratch {
            self.segment_files_on_disk()
        } else {
            Vec::new()
        };
        let segs = self.open(&m)?;
        let known: Vec<Vec<u64>> = segs
            .iter()
            .map(|s| s.term_hashes())
            .collect::<io::Result<_>>()
            .map_err(|e| self.damaged(&e.to_string()))?;
        let roles = Roles::load(&self.project.roles_tsv())?;
        let config = Config::load(&self.project.config_file())?;
        let mut pass = Pass::new(
            &self.project.root,
            self.disk_bytes(&m),
            &roles,
            &config.search,
            config.limits.max_file_bytes,
            known,
            &m,
        );
        for (wt_root, dir) in self.folders(&roles, &config) {
            pass.folder(&m, &wt_root, &dir)?;
        }
        drop(segs);
        let gone = self.record(&mut m, &mut pass, scratch)?;
        self.remove_unnamed(&m, &gone, old_files);
        Ok(Refreshed {
            added: pass.built.docs.len(),
            docs: m.segments.iter().map(|s| u64::from(s.docs)).sum(),
            segments: m.segments.len(),
            folders_read: pass.read,
            bytes: pass.pass_total,
            cut: pass.cut,
            deferred: pass.deferred,
            unindexed: pass.unindexed,
            disk_bytes: self.disk_bytes(&m),
        })
    }

    /// The manifest a refresh builds on, and whether it starts from scratch
    /// (asked to, or the index is of an older version).
    fn base(&self, scratch: bool) -> Result<(Manifest, bool)> {
        let scratch = scratch || self.manifest().is_ok_and(|m| m.version < VERSION);
        let m = if scratch {
            // Keep the numbering going so no new segment reuses a name a
            // reader may still have open.
            let next = self.manifest().map(|m| m.next).unwrap_or(0);
            Manifest {
                version: VERSION,
                next,
                ..Manifest::default()
            }
        } else {
            let mut m = self.manifest()?;
            m.version = VERSION;
            m
        };
        Ok((m, scratch))
    }

    /// Writes what the pass read as a new segment, merges, and replaces the
    /// manifest when anything changed. Returns the segments merged away.
    fn record(&self, m: &mut Manifest, pass: &mut Pass, scratch: bool) -> Result<Vec<String>> {
        let changed_folders = pass.folders != m.folders || pass.left != m.left;
        m.folders = std::mem::take(&mut pass.folders);
        m.left = std::mem::take(&mut pass.left);
        m.role_bytes = std::mem::take(&mut pass.role_bytes);
        m.cut += pass.cut as u64;
        let built = &pass.built;
        let mut gone: Vec<String> = Vec::new();
        if !built.docs.is_empty() {
            let name = format!("seg-{:06}", m.next);
            m.next += 1;
            built
                .write(&self.dir, &self.tmp(), &name)
                .map_err(|e| self.damaged(&format!("writing {name}: {e}")))?;
            m.segments.push(SegInfo {
                name,
                docs: built.docs.len() as u32,
                words: built.words,
            });
            gone = self.merge(m)?;
        }
        if scratch || changed_folders || !built.docs.is_empty() {
            let p = self.manifest_path();
            let bytes = serde_json::to_vec(&m).map_err(|e| Error::internal(e.to_string()))?;
            fsx::replace(&self.tmp(), &p, &bytes).at(&p)?;
        }
        Ok(gone)
    }

    /// Removes the segment files the manifest no longer names: those merged
    /// away and, after a rebuild, the old ones. Only after the manifest
    /// stopped naming them.
    fn remove_unnamed(&self, m: &Manifest, gone: &[String], old_files: Vec<PathBuf>) {
        let keep: HashSet<String> = m.segments.iter().map(|s| s.name.clone()).collect();
        for n in gone.iter().filter(|n| !keep.contains(*n)) {
            for f in segment::files(&self.dir, n) {
                let _ = fsx::remove_file(&f);
            }
        }
        for f in old_files {
            let stem = f.file_stem().map(|s| s.to_string_lossy().into_owned());
            if stem.is_some_and(|s| !keep.contains(&s)) {
                let _ = fsx::remove_file(&f);
            }
        }
    }

    /// Segment files present in the folder (for a rebuild's clean-up).
    fn segment_files_on_disk(&self) -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        rd.flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_stem()
                    .is_some_and(|s| valid_segment_name(&s.to_string_lossy()))
            })
            .collect()
    }

    /// Merges the newest segments while the one before is no more than
    /// twice as big (a binary counter: O(log n) segments, each message
    /// rewritten O(log n) times). Returns the names merged away.
    fn merge(&self, m: &mut Manifest) -> Result<Vec<String>> {
        let mut gone = Vec::new();
        while m.segments.len() >= 2 {
            let n = m.segments.len();
            let (a, b) = (&m.segments[n - 2], &m.segments[n - 1]);
            if u64::from(a.docs) > 2 * u64::from(b.docs) {
                break;
            }
            let load = |s: &SegInfo| {
                Segment::open(&self.dir, &s.name)
                    .and_then(|seg| seg.load())
                    .map_err(|e| self.damaged(&format!("{}: {e}", s.name)))
            };
            let words = a.words + b.words;
            let mut merged = load(a)?;
            merged.append(load(b)?);
            merged.words = words;
            let name = format!("seg-{:06}", m.next);
            m.next += 1;
            merged
                .write(&self.dir, &self.tmp(), &name)
                .map_err(|e| self.damaged(&format!("writing {name}: {e}")))?;
            gone.push(m.segments[n - 2].name.clone());
            gone.push(m.segments[n - 1].name.clone());
            m.segments.truncate(n - 2);
            m.segments.push(SegInfo {
                name,
                docs: merged.docs.len() as u32,
                words,
            });
        }
        Ok(gone)
    }
}
