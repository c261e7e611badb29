//! Finishing work (docs/protocol.md §7.4): the item or batch in process moves
//! to `completed/`, stamped, optionally `failed` with a reason.

use crate::protocol::header::{names, Stamp};
use std::io;
use std::path::{Path, PathBuf};

use super::find::find_in;
use super::{in_order, list, paths, remove_if_unfilled, Done, Inbox, Item, Ready};
use crate::error::{Error, IoContext, Result, Token};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::roles::ReceiveMode;
use crate::protocol::store;

/// What a completion does next.
#[derive(Clone, Copy)]
enum FollowUp {
    /// Take the next item, as SwarmForge's done helpers did (`exec` of the
    /// ready helper) and `done-current` does.
    TakeNext,
    /// Take nothing; say `MAIL_WAITING` or `NO_TASK`.
    Announce,
}

/// Longest `--failed` reason accepted.
pub const MAX_FAILED_REASON: usize = 200;

/// A `--failed` reason: one non-empty line, no control characters, at most
/// `MAX_FAILED_REASON` characters (exit 1 otherwise; nothing changes).
pub fn check_failed_reason(reason: &str) -> Result<()> {
    let why = if reason.trim().is_empty() {
        "must not be empty".to_string()
    } else if reason.chars().any(crate::text::is_control) {
        "must be one line without control characters".to_string()
    } else if reason.chars().count() > MAX_FAILED_REASON {
        format!(
            "must be no longer than {MAX_FAILED_REASON} characters; got {}",
            reason.chars().count()
        )
    } else {
        return Ok(());
    };
    Err(Error::bad_input(format!(
        "--failed reason {why}: '{}'.",
        crate::text::escape(reason)
    )))
}

impl Inbox<'_> {
    /// The refusal for a completion whose target already exists.
    pub(super) fn completed_exists(target: &Path) -> Error {
        Error::refused(
            Token::AmbiguousTaskState,
            format!("completed file already exists: {}", target.display()),
            vec![],
        )
    }

    /// Completes one file: stamps `completed_at` (and a missing
    /// `dequeued_at`, and `failed` when given) by atomic replace, then moves it
    /// to `completed/` without clobbering. The target is checked first, so a
    /// refusal changes nothing.
    pub(super) fn complete_file(
        &self,
        item: &mut Item,
        at: &str,
        failed: Option<&str>,
    ) -> Result<PathBuf> {
        let name = item
            .path
            .file_name()
            .map(|n| n.to_owned())
            .ok_or_else(|| Error::bad_file(&item.path, "no file name"))?;
        let target = self.wt.completed().join(name);
        if target.exists() {
            return Err(Self::completed_exists(&target));
        }
        if item.msg.get(names::DEQUEUED_AT).is_none() {
            let at = in_order(&item.msg, at);
            item.msg.set(names::DEQUEUED_AT, &at);
        }
        if let Some(r) = failed {
            item.msg.set(names::FAILED, r);
        }
        // The move fsyncs `completed/` and then this folder: that makes the
        // stamped file's name durable, so the stamp needs no fsync of its own.
        self.stamp_before_move(item, Stamp::Completed, at)?;
        match fsx::move_noreplace(&item.path, &target) {
            Ok(()) => {
                item.path = target.clone();
                super::ids::record_item(self.wt, item);
                Ok(target)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Err(Self::completed_exists(&target))
            }
            Err(e) => Err(Error::io(&item.path, e)),
        }
    }

    /// Completes the copy of message `id` wherever it waits or is in process
    /// (`new/`, `in_process/`, a batch): stamps `dequeued_at` (when missing)
    /// and `completed_at`, moves it to `completed/`. A batch left empty is
    /// removed. Returns the completed path; `None` when no open copy exists
    /// (it may be completed already). Call it under [`Inbox::with_lock`].
    pub fn complete_copy_locked(&self, id: &str) -> Result<Option<PathBuf>> {
        let Some((mut item, batch)) = self.open_copy(id)? else {
            return Ok(None);
        };
        let target = self.complete_file(&mut item, &clock::iso_now(), None)?;
        if let Some(dir) = batch {
            if store::is_empty(&dir).unwrap_or(false) {
                fsx::remove_empty_dir(&dir).at(&dir)?;
            }
        }
        Ok(Some(target))
    }

    /// The waiting or in-process copy of message `id`, and its batch dir.
    pub(super) fn open_copy(&self, id: &str) -> Result<Option<(Item, Option<PathBuf>)>> {
        let ip = self.wt.in_process();
        let mut dirs: Vec<(PathBuf, Option<PathBuf>)> =
            vec![(self.wt.inbox_new(), None), (ip.clone(), None)];
        for b in list(&ip)?.batches {
            let d = ip.join(b);
            dirs.push((d.clone(), Some(d)));
        }
        for (dir, batch) in dirs {
            if let Some(item) = find_in(&dir, id, self.read_limit()) {
                return Ok(Some((item, batch)));
            }
        }
        Ok(None)
    }

    pub fn done(&self, mode: ReceiveMode) -> Result<Done> {
        self.done_failed(mode, None)
    }

    /// Completes the item in process; with `failed`, stamps `failed:
    /// <reason>` on it (every item of a batch) along with `completed_at`,
    /// so whoever asked (the daemon, for a digest request) can tell.
    pub fn done_failed(&self, mode: ReceiveMode, failed: Option<&str>) -> Result<Done> {
        self.finish(mode, failed, FollowUp::TakeNext)
    }

    /// Completes the item in process like [`Inbox::done_failed`], then only
    /// says whether mail waits (`MAIL_WAITING` / `NO_TASK`) and takes nothing:
    /// SwarmForge's `done_with_current.sh` today (docs/swarmforge-compat.md §1).
    pub fn done_announcing(&self, mode: ReceiveMode, failed: Option<&str>) -> Result<Done> {
        self.finish(mode, failed, FollowUp::Announce)
    }

    fn finish(&self, mode: ReceiveMode, failed: Option<&str>, follow: FollowUp) -> Result<Done> {
        if let Some(r) = failed {
            check_failed_reason(r)?;
        }
        let _lock = self.lock()?;
        let (completed, completed_batch) = match mode {
            ReceiveMode::Task => (self.done_task(failed)?, None),
            ReceiveMode::Batch => {
                let (files, dir) = self.done_batch(failed)?;
                (files, Some(dir))
            }
        };
        let mut reactions = Vec::new();
        let next = match follow {
            FollowUp::TakeNext => self.ready_locked(mode, &mut reactions),
            // Any item in `new/` is mail, as upstream counts it.
            FollowUp::Announce => list(&self.wt.inbox_new()).map(|l| {
                if l.files.is_empty() {
                    Ready::NoTask
                } else {
                    Ready::MailWaiting
                }
            }),
        };
        Ok(Done {
            completed,
            completed_batch,
            failed: failed.map(str::to_string),
            next,
            reactions,
        })
    }

    pub(super) fn done_task(&self, failed: Option<&str>) -> Result<Vec<PathBuf>> {
        let ip = self.wt.in_process();
        let cur = list(&ip)?;
        if !cur.batches.is_empty() {
            return Err(Error::refused(
                Token::CurrentWorkIsBatch,
                "use done_with_current.sh.",
                paths(&ip, &cur.batches),
            ));
        }
        self.reject_odd(&cur, &ip)?;
        let Some(name) = cur.files.first() else {
            return Err(Error::token(Token::NoCurrentTask));
        };
        if cur.files.len() > 1 {
            return Err(Error::refused(
                Token::AmbiguousTaskState,
                "multiple tasks are in process.",
                paths(&ip, &cur.files),
            ));
        }
        let target = self.wt.completed().join(name);
        // Check before loading (which may finish an interrupted dequeued_at
        // stamp), so a refusal changes nothing.
        if target.exists() {
            return Err(Self::completed_exists(&target));
        }
        let mut item = self.load_in_process(&ip.join(name))?;
        Ok(vec![self.complete_file(
            &mut item,
            &clock::iso_now(),
            failed,
        )?])
    }

    pub(super) fn done_batch(&self, failed: Option<&str>) -> Result<(Vec<PathBuf>, PathBuf)> {
        let ip = self.wt.in_process();
        let cur = list(&ip)?;
        if !cur.files.is_empty() {
            return Err(Error::refused(
                Token::CurrentWorkIsSingleTask,
                "use done_with_current.sh.",
                paths(&ip, &cur.files),
            ));
        }
        let Some(b) = cur.batches.first() else {
            return Err(Error::token(Token::NoCurrentBatch));
        };
        if cur.batches.len() > 1 {
            return Err(Error::refused(
                Token::AmbiguousTaskState,
                "multiple batches are in process.",
                paths(&ip, &cur.batches),
            ));
        }
        let dir = ip.join(b);
        let target = self.wt.completed().join(b);
        if remove_if_unfilled(&dir)? {
            return Err(Error::token(Token::NoCurrentBatch));
        }
        if list(&dir)?.files.is_empty() {
            return Err(Error::refused(
                Token::AmbiguousTaskState,
                format!("batch contains no tasks: {}", dir.display()),
                vec![],
            ));
        }
        // Check before loading (which may finish an interrupted dequeued_at
        // stamp), so a refusal changes nothing.
        if target.exists() {
            return Err(Error::refused(
                Token::AmbiguousTaskState,
                format!("completed batch already exists: {}", target.display()),
                vec![],
            ));
        }
        let mut items = self.load_batch(&dir)?;
        let t = clock::iso_now();
        for item in &mut items {
            if let Some(r) = failed {
                item.msg.set(names::FAILED, r);
            }
            self.stamp_before_move(item, Stamp::Completed, &t)?;
        }
        // One fsync of the batch folder for all its stamps (the move below
        // fsyncs the folders around it, not this one).
        fsx::sync_dir(&dir).at(&dir)?;
        // One directory rename completes the whole batch.
        match fsx::move_noreplace(&dir, &target) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(Error::refused(
                    Token::AmbiguousTaskState,
                    format!("completed batch already exists: {}", target.display()),
                    vec![],
                ))
            }
            Err(e) => return Err(Error::io(&dir, e)),
        }
        let files: Vec<PathBuf> = items
            .iter()
            .filter_map(|i| i.path.file_name().map(|n| target.join(n)))
            .collect();
        for (item, path) in items.iter().zip(&files) {
            if let (Some(id), Ok(place)) = (item.msg.id(), path.strip_prefix(self.wt.completed())) {
                super::ids::record(self.wt, id, place);
            }
        }
        Ok((files, target))
    }
}
