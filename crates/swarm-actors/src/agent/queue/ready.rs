//! Taking work (docs/protocol.md §7.3): the next task, or every waiting item of
//! the first one's group (priority, card type, direction) as a batch, or the
//! item already in process again.

use std::io;
use std::path::{Path, PathBuf};

use super::{list, paths, remove_if_unfilled, Inbox, Item, Ready};
use crate::error::{Error, IoContext, Result, Token};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::grammar::{self, MessageType};
use crate::protocol::header::{Message, Stamp};
use crate::protocol::roles::ReceiveMode;

/// Whether an item is a reaction: an annotation for the next ready step,
/// never a work item.
pub(super) fn is_reaction(item: &Item) -> bool {
    item.msg.kind() == Some(MessageType::React)
}

impl Inbox<'_> {
    /// The next work item; reactions waiting ahead of it are completed and
    /// dropped (see [`Inbox::ready_noted`] to show them).
    pub fn ready(&self, mode: ReceiveMode) -> Result<Ready> {
        self.ready_noted(mode).map(|(r, _)| r)
    }

    /// [`Inbox::ready`], with the reactions that were waiting ahead of the
    /// next work item (in queue order): each is completed as it is read, so
    /// it is shown once, as an annotation beside what is handed out.
    pub fn ready_noted(&self, mode: ReceiveMode) -> Result<(Ready, Vec<Item>)> {
        let _lock = self.lock()?;
        let mut reactions = Vec::new();
        let r = self.ready_locked(mode, &mut reactions)?;
        Ok((r, reactions))
    }

    pub(super) fn ready_locked(
        &self,
        mode: ReceiveMode,
        reactions: &mut Vec<Item>,
    ) -> Result<Ready> {
        let r = match mode {
            ReceiveMode::Task => self.ready_task(reactions),
            ReceiveMode::Batch => self.ready_batch(reactions),
        }?;
        self.record_task_docs(&r)?;
        Ok(r)
    }

    /// Before work begins: the task documents of what is handed out (new or
    /// resumed) are in this worktree and committed. A failure leaves the
    /// item in process; the next ready step (which resumes it) tries again.
    fn record_task_docs(&self, r: &Ready) -> Result<()> {
        let Some(docs) = &self.task_docs else {
            return Ok(());
        };
        let items: Vec<&Item> = match r {
            Ready::Task { item, .. } => vec![item],
            Ready::Batch { items, .. } => items.iter().collect(),
            Ready::NoTask | Ready::MailWaiting => return Ok(()),
        };
        let tasks = items
            .iter()
            .filter_map(|i| i.msg.get(crate::protocol::header::names::TASK));
        docs.record(&self.wt.root, tasks).map(|_| ())
    }

    /// The first waiting work item in `new/`, completing the reactions in
    /// front of it (only those: reading every waiting file on each call
    /// would make a deep backlog slow; later ones show on a later call).
    fn first_work(
        &self,
        names: &[String],
        reactions: &mut Vec<Item>,
    ) -> Result<Option<(usize, Item)>> {
        let new = self.wt.inbox_new();
        for (i, name) in names.iter().enumerate() {
            let mut item = self.load(&new.join(name))?;
            if !is_reaction(&item) {
                return Ok(Some((i, item)));
            }
            self.complete_file(&mut item, &clock::iso_now(), None)?;
            reactions.push(item);
        }
        Ok(None)
    }

    pub(super) fn ready_task(&self, reactions: &mut Vec<Item>) -> Result<Ready> {
        let ip = self.wt.in_process();
        let cur = list(&ip)?;
        if !cur.batches.is_empty() {
            return Err(Error::refused(
                Token::TaskInProcessIsBatch,
                "use ready_for_next.sh or done_with_current.sh.",
                paths(&ip, &cur.batches),
            ));
        }
        self.reject_odd(&cur, &ip)?;
        if cur.files.len() > 1 {
            return Err(Error::refused(
                Token::AmbiguousTaskState,
                "multiple tasks are already in process.",
                paths(&ip, &cur.files),
            ));
        }
        if let Some(name) = cur.files.first() {
            let item = self.load_in_process(&ip.join(name))?;
            if item
                .msg
                .get(crate::protocol::header::names::COMPLETED_AT)
                .is_none()
            {
                let answers = self.take_answers()?;
                return Ok(Ready::Task {
                    item,
                    resumed: true,
                    answers,
                });
            }
            // A done step cut off between its stamp and its move (a crash,
            // a power cut): the task is done; finish the move, never hand it
            // out again (docs/transcript-and-audit.md, "An interrupted take").
            fsx::move_noreplace(&item.path, &self.wt.completed().join(name))
                .map_err(|e| Error::io(&item.path, e))?;
        }
        let new = self.wt.inbox_new();
        // Validated before moving so a malformed file never becomes "in process".
        let (name, mut item) = match self.hinted_first_work(reactions)? {
            Some(found) => found,
            None => {
                let waiting = list(&new)?;
                self.reject_odd(&waiting, &new)?;
                let Some((i, item)) = self.first_work(&waiting.files, reactions)? else {
                    return Ok(Ready::NoTask);
                };
                (waiting.files[i].clone(), item)
            }
        };
        let src = new.join(&name);
        let dst = ip.join(&name);
        // Moved without fsyncs: the stamp that follows fsyncs `in_process/`
        // (the item's new name with it), then `new/` is fsynced; nothing is
        // handed out before both (docs/protocol.md §8).
        match fsx::rename_noreplace_raw(&src, &dst) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(Error::refused(
                    Token::AmbiguousTaskState,
                    format!("target in-process file already exists: {}", dst.display()),
                    vec![],
                ))
            }
            Err(e) => return Err(Error::io(&src, e)),
        }
        item.path = dst;
        self.stamp(&mut item, Stamp::Dequeued, &clock::iso_now())?;
        fsx::sync_dir(&new).at(&new)?;
        Ok(Ready::Task {
            item,
            resumed: false,
            answers: Vec::new(),
        })
    }

    pub(super) fn load_batch(&self, dir: &Path) -> Result<Vec<Item>> {
        let l = list(dir)?;
        if l.files.is_empty() {
            return Err(Error::refused(
                Token::AmbiguousTaskState,
                format!("batch contains no tasks: {}", dir.display()),
                vec![],
            ));
        }
        l.files
            .iter()
            .map(|n| self.load_in_process(&dir.join(n)))
            .collect()
    }

    pub(super) fn ready_batch(&self, reactions: &mut Vec<Item>) -> Result<Ready> {
        if let Some(resumed) = self.batch_in_process()? {
            return Ok(resumed);
        }
        let new = self.wt.inbox_new();
        let waiting = list(&new)?;
        self.reject_odd(&waiting, &new)?;
        let Some((first, first_item)) = self.first_work(&waiting.files, reactions)? else {
            return Ok(Ready::NoTask);
        };
        let priority = first_item.priority().to_string();
        let rest = &waiting.files[first + 1..];
        let selected = self.batch_mates(first_item, rest, &new, reactions)?;
        let dir = self.new_batch_dir()?;
        let items = self.move_into_batch(&dir, selected)?;
        Ok(Ready::Batch {
            dir,
            priority,
            items,
            resumed: false,
            answers: Vec::new(),
        })
    }

    /// The batch already in process, resumed (an empty one left by a kill
    /// is removed); refused beside a single item in process, or beside
    /// another batch.
    fn batch_in_process(&self) -> Result<Option<Ready>> {
        let ip = self.wt.in_process();
        let cur = list(&ip)?;
        if !cur.files.is_empty() {
            return Err(Error::refused(
                Token::TaskInProcessIsSingle,
                "use ready_for_next.sh or done_with_current.sh.",
                paths(&ip, &cur.files),
            ));
        }
        if cur.batches.len() > 1 {
            return Err(Error::refused(
                Token::AmbiguousTaskState,
                "multiple batches are already in process.",
                paths(&ip, &cur.batches),
            ));
        }
        let Some(b) = cur.batches.first() else {
            return Ok(None);
        };
        let dir = ip.join(b);
        if remove_if_unfilled(&dir)? {
            return Ok(None);
        }
        let items = self.load_batch(&dir)?;
        let priority = items[0].priority().to_string();
        let answers = self.take_answers()?;
        Ok(Some(Ready::Batch {
            dir,
            priority,
            items,
            resumed: true,
            answers,
        }))
    }

    /// The first item and the waiting files (`rest`, in hand-out order)
    /// that go in its batch. Selection is by the priority header, the card
    /// type and the direction, as today's SwarmForge's is
    /// (docs/swarmforge-compat.md §4; `board::batch_key`): the rest stays
    /// queued. Our daemon only delivers files whose name prefix matches
    /// that header, so only files with that prefix (or no prefix) need
    /// reading; this keeps a deep backlog cheap. A reaction met on the way
    /// is finished and told in `reactions`.
    fn batch_mates(
        &self,
        first_item: Item,
        rest: &[String],
        new: &Path,
        reactions: &mut Vec<Item>,
    ) -> Result<Vec<Item>> {
        let priority = first_item.priority().to_string();
        let group = crate::board::batch_key(&first_item.msg);
        let mut selected = vec![first_item];
        for name in rest {
            let prefix = name.get(..3).unwrap_or("");
            let has_prefix = prefix.len() == 3
                && prefix.as_bytes()[2] == b'_'
                && prefix[..2].bytes().all(|b| b.is_ascii_digit());
            if has_prefix && prefix[..2] != priority {
                continue;
            }
            let mut item = self.load(&new.join(name))?;
            if is_reaction(&item) {
                self.complete_file(&mut item, &clock::iso_now(), None)?;
                reactions.push(item);
            } else if item.priority() == priority && crate::board::batch_key(&item.msg) == group {
                selected.push(item);
            }
        }
        Ok(selected)
    }

    /// Moves each selected item into the new batch folder `dir` (never over
    /// a file there) and stamps its `dequeued_at`.
    fn move_into_batch(&self, dir: &Path, selected: Vec<Item>) -> Result<Vec<Item>> {
        let mut items = Vec::with_capacity(selected.len());
        for mut item in selected {
            let src = item.path.clone();
            let Some(name) = src.file_name() else {
                continue;
            };
            let dst = dir.join(name);
            match fsx::move_noreplace(&src, &dst) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(Error::refused(
                        Token::AmbiguousTaskState,
                        format!("target batch file already exists: {}", dst.display()),
                        vec![],
                    ))
                }
                Err(e) => return Err(Error::io(&src, e)),
            }
            item.path = dst;
            self.stamp(&mut item, Stamp::Dequeued, &clock::iso_now())?;
            items.push(item);
        }
        Ok(items)
    }

    /// `batch_<IDTS>_<NNNNNN>`, the smallest number free in both `in_process/`
    /// and `completed/` (SwarmForge only checked the former, so two batches in
    /// one second collided at completion).
    pub(super) fn new_batch_dir(&self) -> Result<PathBuf> {
        let now = clock::now();
        let ip = self.wt.in_process();
        let done = self.wt.completed();
        for n in 1..1_000_000u32 {
            let name = grammar::batch_dir_name(now, n);
            if done.join(&name).exists() {
                continue;
            }
            let dir = ip.join(&name);
            match fsx::create_dir_new(&dir) {
                Ok(()) => return Ok(dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&dir, e)),
            }
        }
        Err(Error::conflict(format!(
            "no free batch directory name in {}",
            ip.display()
        )))
    }

    /// While an item is parked in process, `answer` items waiting in `new/`
    /// are handed out with it: each is stamped `dequeued_at` and
    /// `completed_at` (one time), then moved to `completed/`, under the lock
    /// the caller holds. Stamping before the move means a crash in between
    /// leaves the answer in `new/`, where the next call finishes it.
    /// Unreadable files are left for the ordinary ready step to reject.
    /// In a deep `new/`, only the files the daemon has not ruled out are
    /// read (hint.rs); otherwise every waiting file is.
    pub(super) fn take_answers(&self) -> Result<Vec<Item>> {
        let new = self.wt.inbox_new();
        let names = match self.hinted_answers() {
            Some(names) => names,
            None => list(&new)?.files,
        };
        let mut out = Vec::new();
        for name in names {
            let src = new.join(&name);
            let Ok(bytes) = fsx::read_bounded(&src, self.read_limit()) else {
                continue;
            };
            let Ok(msg) = Message::parse_bytes(&bytes) else {
                continue;
            };
            if msg.type_name() != Some(crate::protocol::types::ANSWER.name) {
                continue;
            }
            let mut item = Item { path: src, msg };
            self.complete_file(&mut item, &clock::iso_now(), None)?;
            out.push(item);
        }
        Ok(out)
    }
}
