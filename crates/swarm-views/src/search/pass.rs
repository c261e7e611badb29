//! One refresh's reading: the message folders that moved since the index
//! last read them, and in them each message the index does not hold yet,
//! within the bounds of one refresh (search/bounds.rs).
//!
//! Why a module: index.rs keeps the index's folder (manifest, segments,
//! lock); this is what one refresh reads into its new segment. Invariants:
//! a message whose id the index (or this pass) holds is not read again; a
//! folder left with messages waiting is stamped 0 (unread), so the next
//! refresh reads it again; what a bound keeps out is counted per folder.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::SystemTime;

use super::bounds::{self, Bounds};
use super::manifest::{self, mtime_ns, ns, Manifest, SETTLE};
use super::segment::{Built, DocRef};
use super::tokens;
use crate::error::{IoContext, Result};
use crate::protocol::grammar;
use crate::protocol::header::names;
use crate::protocol::roles::Roles;
use crate::protocol::trail::{self, Loaded, Stamp};

/// What one refresh has read so far, and what its bounds kept out.
pub(super) struct Pass<'a> {
    /// The project root, which the manifest's keys are relative to.
    root: &'a Path,
    roles: &'a Roles,
    bounds: &'a Bounds,
    max_file_bytes: u64,
    /// Each open segment's id hashes (sorted).
    known: Vec<Vec<u64>>,
    /// The index's files on disk before this refresh, in bytes.
    disk: u64,
    now: SystemTime,
    pub built: Built,
    added: HashSet<String>,
    /// Folder → the modification time to record (0: read it again).
    pub folders: BTreeMap<String, u64>,
    /// Folder → messages the bounds kept out.
    pub left: BTreeMap<String, u64>,
    /// Folders read.
    pub read: usize,
    /// Worktree → bytes of text indexed in all.
    pub role_bytes: BTreeMap<String, u64>,
    /// Worktree → bytes of text this refresh took in.
    pass_role: BTreeMap<String, u64>,
    /// Bytes of text this refresh took in.
    pub pass_total: u64,
    postings: u64,
    pub cut: usize,
    pub deferred: usize,
    pub unindexed: usize,
}

impl<'a> Pass<'a> {
    pub fn new(
        root: &'a Path,
        disk: u64,
        roles: &'a Roles,
        bounds: &'a Bounds,
        max_file_bytes: u64,
        known: Vec<Vec<u64>>,
        m: &Manifest,
    ) -> Pass<'a> {
        Pass {
            root,
            roles,
            bounds,
            max_file_bytes,
            known,
            disk,
            now: SystemTime::now(),
            built: Built::default(),
            added: HashSet::new(),
            folders: BTreeMap::new(),
            left: BTreeMap::new(),
            read: 0,
            role_bytes: m.role_bytes.clone(),
            pass_role: BTreeMap::new(),
            pass_total: 0,
            postings: 0,
            cut: 0,
            deferred: 0,
            unindexed: 0,
        }
    }

    fn indexed(&self, id: &str) -> bool {
        let h = tokens::id_key(id);
        self.added.contains(id) || self.known.iter().any(|k| k.binary_search(&h).is_ok())
    }

    /// Reads one message folder of the worktree at `wt_root`, unless it has
    /// not moved since `m` recorded it (or is an archive folder).
    pub fn folder(&mut self, m: &Manifest, wt_root: &Path, dir: &Path) -> Result<()> {
        let key = manifest::key(self.root, dir);
        let Some(t) = mtime_ns(dir) else {
            return Ok(());
        };
        let settled = self.now.duration_since(t).is_ok_and(|a| a >= SETTLE);
        let stamp = if settled { ns(t) } else { 0 };
        if settled && m.folders.get(&key) == Some(&stamp) {
            if let Some(n) = m.left.get(&key) {
                self.left.insert(key.clone(), *n);
            }
            self.folders.insert(key, stamp);
            return Ok(());
        }
        if dir.file_name().is_some_and(|n| n == "archive") {
            self.folders.insert(key, stamp);
            return Ok(());
        }
        self.read += 1;
        let wt = manifest::key(self.root, wt_root);
        let mut kept_out = 0u64;
        let mut waiting = false;
        let names = trail::handoff_names(dir).at(dir)?;
        for name in names {
            if grammar::FileName::parse(&name).is_some_and(|f| self.indexed(f.id)) {
                continue;
            }
            // Over a bound of the index: not read at all.
            if self.over_index_bound(&wt) {
                kept_out += 1;
                self.unindexed += 1;
                continue;
            }
            // This refresh's budget is spent: the next one reads it.
            if self.budget_spent(&wt) {
                kept_out += 1;
                self.deferred += 1;
                waiting = true;
                continue;
            }
            self.message(dir, &name, &wt);
        }
        if kept_out > 0 {
            self.left.insert(key.clone(), kept_out);
        }
        // Left with messages waiting: read again by the next refresh.
        self.folders.insert(key, if waiting { 0 } else { stamp });
        Ok(())
    }

    /// The worktree's or the whole index's bound is reached.
    fn over_index_bound(&self, wt: &str) -> bool {
        let estimate = self.disk
            + bounds::disk_estimate(
                self.postings,
                self.built.terms.len() as u64,
                self.built.docs.len() as u64,
            );
        self.role_bytes.get(wt).copied().unwrap_or(0) >= self.bounds.max_role_bytes
            || estimate >= self.bounds.max_index_bytes
    }

    /// This refresh took in all it may, from the worktree or in all.
    fn budget_spent(&self, wt: &str) -> bool {
        self.pass_role.get(wt).copied().unwrap_or(0) >= self.bounds.max_pass_bytes
            || self.pass_total >= self.bounds.max_pass_total_bytes
    }

    /// Reads and adds one message (of the worktree `wt`), unless it does not
    /// load, has no id, or its id is indexed already.
    fn message(&mut self, dir: &Path, name: &str, wt: &str) {
        let Loaded::Ok(msg) = trail::load_message(&dir.join(name), self.max_file_bytes) else {
            return;
        };
        let Some(id) = msg.id().filter(|i| !i.is_empty()).map(str::to_string) else {
            return;
        };
        if self.indexed(&id) {
            return;
        }
        let recipients = {
            let mut r = self
                .roles
                .recipients(msg.to().unwrap_or(""), msg.sender().unwrap_or(""));
            r.extend(msg.cc().into_iter().map(str::to_string));
            r
        };
        let created = Stamp::of(msg.get(names::CREATED_AT))
            .at()
            .or_else(|| grammar::id_time(&id))
            .map_or(0, |t| t.timestamp());
        let terms = tokens::of_message(&msg, &recipients, self.bounds.max_message_bytes);
        if terms.cut {
            self.cut += 1;
        }
        *self.role_bytes.entry(wt.to_string()).or_default() += terms.bytes;
        *self.pass_role.entry(wt.to_string()).or_default() += terms.bytes;
        self.pass_total += terms.bytes;
        self.postings += terms.counts.len() as u64;
        self.built.add(
            DocRef {
                id: id.clone(),
                file: grammar::strip_collision_prefix(name).to_string(),
                wt: wt.to_string(),
                from: msg.sender().unwrap_or("").to_string(),
                to: msg.to().unwrap_or("").to_string(),
                kind: msg.type_name().unwrap_or("").to_string(),
                created,
            },
            &terms,
        );
        self.added.insert(id);
    }
}
