//! Bringing the model up to date from one wake of the folder watcher: a
//! changed original file costs a read of that file, the journal is read
//! from its offset, and each change a page shows becomes one [`Delta`].
//! The invariant (the module doc of `model`): a snapshot at `seq` plus
//! every delta after `seq` is what a fresh snapshot would show.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::daemon::journal::Kind;
use crate::daemon::progress::Line;
use crate::protocol::layout::Worktree;
use crate::protocol::trail::{Loaded, Original, Place};
use crate::protocol::{clock, trail, types};
use crate::sys::log_reader::EventReader;
use crate::sys::watch::Wake;

use super::{
    entry, is_journal, rank, Clock, Delta, Model, CARDS_EVERY, FULL_LIST, JOURNAL, KEEP, RING,
};

impl Model {
    pub(super) fn keep_question(&mut self, o: &Original) {
        let t = o.msg.type_name();
        if [types::CLARIFY.name, types::ANSWER.name, types::CLOSE.name]
            .iter()
            .any(|k| t == Some(*k))
        {
            self.questions.push(o.clone());
        }
    }

    /// Adds or replaces a message; true when the page must hear of it.
    pub(super) fn put(&mut self, o: &Original) -> bool {
        let id = o.id().to_string();
        let key = (
            o.when().map(clock::iso).unwrap_or_default(),
            if id.is_empty() {
                o.path.display().to_string()
            } else {
                id.clone()
            },
        );
        if let Some(old) = self.at.get(&key.1).cloned() {
            let keep = self.messages.get(&old).is_some_and(|v| {
                let place = v["state"].as_str().unwrap_or("");
                let old_rank = match place {
                    "sent" => 0,
                    "failed" => 1,
                    _ => 2,
                };
                old_rank < rank(o.place)
                    && v["path"].as_str().is_some_and(|p| Path::new(p).exists())
            });
            if keep {
                return false;
            }
            self.messages.remove(&old);
        } else {
            self.total += 1;
        }
        self.at.insert(key.1.clone(), key.clone());
        self.messages.insert(key, entry(o, &self.roles));
        while self.messages.len() > KEEP {
            if let Some((k, _)) = self.messages.pop_first() {
                self.at.remove(&k.1);
            }
        }
        true
    }

    pub(super) fn emit(&mut self, out: &mut Vec<Delta>, event: &'static str, data: &Value) {
        self.seq += 1;
        let d = Delta {
            seq: self.seq,
            event,
            data: data.to_string(),
        };
        if self.ring.len() == RING {
            self.ring.pop_front();
        }
        self.ring.push_back(d.clone());
        out.push(d);
    }

    /// Folders that hold originals, with what their files are.
    pub(super) fn original_dirs(&self) -> Vec<(PathBuf, Place)> {
        let mut v = Vec::new();
        for root in self.worktrees() {
            let w = Worktree::new(root);
            v.extend([
                (w.outbox(), Place::Outbox),
                (w.sent(), Place::Sent),
                (w.failed(), Place::Failed),
                (w.held(), Place::Held),
            ]);
        }
        v
    }

    pub(super) fn worktrees(&self) -> Vec<PathBuf> {
        self.roles
            .worktrees()
            .into_iter()
            .map(|w| {
                if w.is_absolute() {
                    w
                } else {
                    self.project.root.join(w)
                }
            })
            .collect()
    }

    /// Every folder whose changes matter to the page.
    pub fn watched(&self) -> Vec<PathBuf> {
        let p = &self.project;
        let mut dirs = vec![
            p.daemon_dir(),
            p.daemon_dir().join("waiting"),
            p.swarmforge(),
            p.approvals_dir(),
            p.telemetry_dir(),
            p.activity_file("x")
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        ];
        for root in self.worktrees() {
            let w = Worktree::new(root);
            dirs.extend(w.queue_dirs());
            // What `/api/audit` counts too (serve/kept.rs).
            dirs.push(w.rejected());
        }
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Reads one original file; the deltas it causes.
    pub(super) fn original(&mut self, path: &Path, place: Place, out: &mut Vec<Delta>) {
        let msg = match trail::load_message(path, self.max_bytes) {
            Loaded::Ok(m) => m,
            Loaded::Gone | Loaded::Bad(_) => return,
        };
        let reason = (place == Place::Failed)
            .then(|| trail::failure_reason(path))
            .flatten();
        let o = Original::new(path, place, msg, reason);
        self.seen.insert(o.path.clone());
        self.keep_question(&o);
        if self.put(&o) {
            let v = self
                .at
                .get(o.id())
                .and_then(|k| self.messages.get(k))
                .cloned();
            if let Some(v) = v {
                self.emit(out, "message", &json!({"message": v, "total": self.total}));
            }
        }
    }

    /// Reads what was appended to the usage journal; a new day also
    /// changes what "today" sums.
    pub(super) fn read_usage(&mut self) {
        self.ledger.read(&self.project.usage_file());
        let day = clock::iso_now().get(..10).unwrap_or("").to_string();
        self.usage = self.ledger.summary(&day);
    }

    /// Applies one wake of the folder watcher; returns the deltas, in order.
    pub fn apply(&mut self, wake: &Wake) -> Vec<Delta> {
        let mut out = Vec::new();
        let finished = self.read_journal(&mut out);
        let dirs = self.original_dirs();
        let mut candidates: Vec<(PathBuf, Place)> = Vec::new();
        let mut usage = false;
        // The cards to rebuild: those a path concerns; all of them when a
        // path concerns no card in particular, on a rescan, and now and then.
        let mut all = wake.rescan || !wake.fresh.is_empty() || self.carded.elapsed() >= CARDS_EVERY;
        let mut dirty: HashSet<String> = finished;
        if wake.rescan {
            self.folders.relist_all();
        }
        for d in &wake.fresh {
            self.folders.relist(d);
        }
        let journal = self.project.events_file();
        for p in &wake.paths {
            let Some(parent) = p.parent() else { continue };
            let folder = self.folders.note(p);
            if let Some(roles) = folder
                .as_ref()
                .and_then(|d| self.touches.get(d))
                .or_else(|| self.touches.get(p))
                .or_else(|| self.touches.get(parent))
            {
                dirty.extend(roles.iter().cloned());
            } else if !self.quiet.contains(parent) && !is_journal(p, &journal) {
                all = true;
            }
            if p == &self.project.usage_file() {
                usage = true;
            }
            if !p
                .file_name()
                .is_some_and(|n| crate::protocol::grammar::valid_handoff_name(&n.to_string_lossy()))
            {
                continue;
            }
            if let Some((_, place)) = dirs.iter().find(|(d, _)| d == parent) {
                candidates.push((p.clone(), *place));
            }
        }
        if wake.rescan || !wake.fresh.is_empty() {
            usage = true;
            let full = self.listed.elapsed() >= FULL_LIST;
            if full {
                self.listed = Clock::now();
            }
            for (d, place) in &dirs {
                // A `sent/` is long: listed now and then, and whenever its
                // content was never reported (a message renamed into a
                // folder before its watch was set up has no event of its own).
                if *place == Place::Sent && !full && !wake.fresh.contains(d) {
                    continue;
                }
                if let Ok(names) = trail::handoff_names(d) {
                    candidates.extend(
                        names
                            .into_iter()
                            .map(|n| (d.join(n), *place))
                            .filter(|(p, _)| !self.seen.contains(p)),
                    );
                }
            }
        }
        for (p, place) in candidates {
            self.original(&p, place, &mut out);
        }
        if usage {
            let before = self.usage.clone();
            self.read_usage();
            if self.usage != before {
                let v = json!(self.usage);
                self.emit(&mut out, "usage", &v);
            }
        }
        self.refresh(&mut out, (!all).then_some(&dirty));
        out
    }

    /// Reads the journal's new lines (each a delta); a `completed` line is
    /// a latency sample of its recipient, whose role is returned.
    pub(super) fn read_journal(&mut self, out: &mut Vec<Delta>) -> HashSet<String> {
        let mut finished = HashSet::new();
        if self.journal.is_none() {
            let path = self.project.events_file();
            self.journal = EventReader::new(&path, crate::sys::logfile::end(&path)).ok();
        }
        let Some(reader) = self.journal.as_mut() else {
            return finished;
        };
        let mut lines = Vec::new();
        let _ = reader.poll(&mut |l, next| {
            if let Ok(v) = serde_json::from_slice::<Value>(l) {
                lines.push((v, next));
            }
            Ok(())
        });
        for (mut v, next) in lines {
            if v["kind"] == Kind::Completed.word() {
                let l: Option<Line> = serde_json::from_value(v.clone()).ok();
                if let Some((rc, s)) = l.and_then(|l| Some((l.recipient?, l.stamps?))) {
                    self.sample_stamps(&rc, &s);
                    finished.insert(rc);
                }
            }
            v["offset"] = json!(next);
            if self.journal_tail.len() == JOURNAL {
                self.journal_tail.pop_front();
            }
            self.journal_tail.push_back(v.clone());
            self.emit(out, "journal", &v);
        }
        finished
    }
}
