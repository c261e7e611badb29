//! Loading the trail: every worktree's folders listed once and each file
//! read once, originals and copies, with what could not be read named
//! (`bad`, `rejected`, `unreadable`) rather than skipped in silence. The
//! invariant: nothing is ever written, and a file is opened at most once
//! per load.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::protocol::config::Config;
use crate::protocol::header::{names, Header, Message};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::store::{load_message, Loaded};
use crate::protocol::swarm::Swarm;
use crate::protocol::{lineup, store};

use super::failures::{failure_note, read_note};
use super::{
    absolute, changed_at, mirror_of, Bad, Copy, Original, Place, Rejected, Scope, Stamp, Trail,
};

/// One folder's listing: queue files and batch folders, sorted by name.
pub(super) struct Listing {
    pub(super) files: Vec<String>,
    pub(super) batches: Vec<String>,
    pub(super) notes: HashSet<String>,
}

impl Trail {
    /// Reads the project's roles, config and the files `scope` asks for.
    pub fn load(project: &Project, scope: &Scope) -> Result<Trail> {
        Trail::load_in(&Swarm::new(project.clone()), scope)
    }

    /// [`Trail::load`] in a loaded swarm (its config, then its roles).
    pub fn load_in(swarm: &Swarm, scope: &Scope) -> Result<Trail> {
        let config = swarm.config()?;
        let roles = swarm.roles()?;
        Trail::load_with(&swarm.project, roles, config, scope)
    }

    /// [`Trail::load`] with roles.tsv and swarm.yaml already read (the
    /// loaded swarm of one process, `protocol::swarm`).
    pub fn load_with(
        project: &Project,
        roles: &Roles,
        config: &Config,
        scope: &Scope,
    ) -> Result<Trail> {
        // Removed roles' worktrees still hold their history (docs/lineups.md).
        let roles = lineup::state::with_retired(roles.clone(), &config.seats);
        // A role on another host is read from the mirror of its worktree
        // there (its host's bridge publishes every file), plus the copies
        // that wait in its local proxy for the bridge.
        let mut mirrors = std::collections::HashMap::new();
        let mut proxies_of: Vec<(PathBuf, PathBuf)> = Vec::new();
        for r in &roles.roles {
            let Some((_, m)) = mirror_of(project, config, r) else {
                continue;
            };
            mirrors.insert(r.name.clone(), m.clone());
            proxies_of.push((m, absolute(project, &r.worktree_path)));
        }
        let mut worktrees: Vec<PathBuf> = Vec::new();
        for r in &roles.roles {
            let p = match mirrors.get(&r.name) {
                Some(m) => m.clone(),
                None => absolute(project, &r.worktree_path),
            };
            if !worktrees.contains(&p) {
                worktrees.push(p);
            }
        }
        let proxies = proxies_of
            .into_iter()
            .filter_map(|(m, proxy)| worktrees.iter().position(|w| *w == m).map(|i| (i, proxy)))
            .collect();
        let mut trail = Trail {
            project: project.clone(),
            roles,
            max_bytes: config.limits.max_file_bytes,
            worktrees,
            originals: Vec::new(),
            copies: Vec::new(),
            bad: Vec::new(),
            rejected: Vec::new(),
            unreadable: Vec::new(),
            proxies,
            mirrors,
        };
        for i in 0..trail.worktrees.len() {
            trail.scan_worktree(i, scope);
        }
        if scope.copies {
            for (i, proxy) in trail.proxies.clone() {
                trail.scan_proxy(i, &proxy, scope);
            }
        }
        Ok(trail)
    }

    /// The copies in a proxy's `inbox/new` (not yet bridged), unless the
    /// mirror of the remote inbox holds the same file already.
    pub(super) fn scan_proxy(&mut self, i: usize, proxy: &Path, scope: &Scope) {
        let dir = Worktree::new(proxy).inbox_new();
        let l = self.list(&dir, scope.name_contains.as_deref());
        for name in &l.files {
            let held = self.copies.iter().any(|c| {
                c.worktree == i
                    && c.path
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy() == *name)
            });
            if !held {
                self.read_copy(&dir.join(name), Place::New, None, i);
            }
        }
    }

    pub(super) fn scan_worktree(&mut self, i: usize, scope: &Scope) {
        let wt = Worktree::new(&self.worktrees[i]);
        let filter = scope.name_contains.as_deref();
        if scope.originals {
            let outbox = self.list(&wt.outbox(), filter);
            let outbox_notes = outbox.notes.clone();
            self.read_originals(&wt.outbox(), Place::Outbox, &outbox, &outbox_notes);
            // The live folders, then what `swarm archive` moved out of them.
            let days = wt.archive_days();
            let sent = std::iter::once(wt.sent()).chain(days.iter().map(|d| d.join("sent")));
            for dir in sent.collect::<Vec<_>>() {
                let l = self.list(&dir, filter);
                self.read_originals(&dir, Place::Sent, &l, &outbox_notes);
            }
            let l = self.list(&wt.held(), filter);
            self.read_originals(&wt.held(), Place::Held, &l, &outbox_notes);
            let failed = std::iter::once(wt.failed()).chain(days.iter().map(|d| d.join("failed")));
            for dir in failed.collect::<Vec<_>>() {
                let l = self.list(&dir, filter);
                self.read_originals(&dir, Place::Failed, &l, &outbox_notes);
            }
        }
        if scope.copies {
            let archived = wt
                .archive_days()
                .into_iter()
                .map(|d| (d.join("completed"), Place::Completed));
            let places = [
                (wt.inbox_new(), Place::New),
                (wt.in_process(), Place::InProcess),
                (wt.completed(), Place::Completed),
            ];
            for (dir, place) in places.into_iter().chain(archived) {
                let l = self.list(&dir, filter);
                for name in &l.files {
                    self.read_copy(&dir.join(name), place, None, i);
                }
                if place != Place::New {
                    for b in &l.batches {
                        let bdir = dir.join(b);
                        let bl = self.list(&bdir, filter);
                        for name in &bl.files {
                            self.read_copy(&bdir.join(name), place, Some(b.clone()), i);
                        }
                    }
                }
            }
            let rdir = wt.rejected();
            let l = self.list(&rdir, filter);
            for name in &l.files {
                let reason = l
                    .notes
                    .contains(&format!("{name}.error"))
                    .then(|| read_note(&rdir.join(format!("{name}.error"))))
                    .flatten();
                self.rejected.push(Rejected {
                    path: rdir.join(name),
                    reason,
                });
            }
        }
    }

    pub(super) fn list(&mut self, dir: &Path, filter: Option<&str>) -> Listing {
        let mut l = Listing {
            files: Vec::new(),
            batches: Vec::new(),
            notes: HashSet::new(),
        };
        let entries = match store::entries(dir) {
            Ok(entries) => entries,
            Err(e) => {
                self.unreadable.push((dir.to_path_buf(), e.to_string()));
                return l;
            }
        };
        for e in entries.flatten() {
            match e.kind {
                store::Kind::Batch => l.batches.push(e.name),
                store::Kind::Handoff | store::Kind::Odd => {
                    if filter.is_none_or(|f| e.name.contains(f)) {
                        l.files.push(e.name);
                    }
                }
                store::Kind::Sidecar => {
                    l.notes.insert(e.name);
                }
                store::Kind::Temp | store::Kind::Stray => {}
            }
        }
        l.files.sort_unstable();
        l.batches.sort_unstable();
        l
    }

    pub(super) fn read(&mut self, path: &Path) -> Option<Message> {
        match load_message(path, self.max_bytes) {
            Loaded::Ok(m) => Some(m),
            Loaded::Gone => None,
            Loaded::Bad(reason) => {
                self.bad.push(Bad {
                    path: path.to_path_buf(),
                    reason,
                });
                None
            }
        }
    }

    pub(super) fn read_originals(
        &mut self,
        dir: &Path,
        place: Place,
        l: &Listing,
        outbox_notes: &HashSet<String>,
    ) {
        for name in &l.files {
            let path = dir.join(name);
            let Some(msg) = self.read(&path) else {
                continue;
            };
            let reason = match place {
                Place::Failed => failure_note(dir, name, &l.notes, outbox_notes),
                _ => None,
            };
            self.originals
                .push(Original::new(&path, place, msg, reason));
        }
    }

    pub(super) fn read_copy(
        &mut self,
        path: &Path,
        place: Place,
        batch: Option<String>,
        wt: usize,
    ) {
        let Some(msg) = self.read(path) else {
            return;
        };
        self.copies.push(copy_of(path, place, batch, wt, &msg));
    }
}

/// The copy at `path` whose content is `msg`.
pub(super) fn copy_of(
    path: &Path,
    place: Place,
    batch: Option<String>,
    wt: usize,
    msg: &Message,
) -> Copy {
    let get = |n: Header| msg.get(n).map(str::to_string);
    Copy {
        path: path.to_path_buf(),
        place,
        batch,
        worktree: wt,
        id: get(Header::Id),
        from: get(Header::From),
        to: get(Header::To),
        cc: get(Header::Cc),
        recipient: get(Header::Recipient),
        created: Stamp::of(msg.get(names::CREATED_AT)),
        enqueued: Stamp::of(msg.get(names::ENQUEUED_AT)),
        dequeued: Stamp::of(msg.get(names::DEQUEUED_AT)),
        completed: Stamp::of(msg.get(names::COMPLETED_AT)),
        digest: crate::protocol::digest::of(msg),
        arrived: changed_at(path),
    }
}
