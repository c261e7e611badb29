//! `ready-next` / `done-current` state transitions (docs/protocol.md §7.3,
//! §7.4), each under the one per-inbox lock, each a no-clobber rename, so
//! concurrent callers never create two in-process items, lose or duplicate a
//! file, or see a half-written one. Taking work is in `ready`, finishing it in
//! `done`, lookups by id in `find` (completed copies through `ids`).

mod done;
mod find;
mod hint;
pub mod ids;
mod ready;

pub use done::{check_failed_reason, MAX_FAILED_REASON};
pub use find::{current_item, current_items, find_copy, find_item, find_original};

use crate::protocol::header::names;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result, Token};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::grammar;
use crate::protocol::header::{Message, Stamp};
use crate::protocol::layout::Worktree;
use crate::protocol::store::{self, Kind};

/// One inbox item: where it is and what it says.
#[derive(Clone, Debug)]
pub struct Item {
    pub path: PathBuf,
    pub msg: Message,
}

impl Item {
    /// `priority` header, `50` when missing (SwarmForge's default).
    pub fn priority(&self) -> &str {
        self.msg.priority().unwrap_or("50")
    }
}

/// What `ready-next` hands out.
#[derive(Clone, Debug)]
pub enum Ready {
    NoTask,
    /// Work waits in `new/` and was not taken (`done-current --mail-waiting`).
    MailWaiting,
    Task {
        item: Item,
        resumed: bool,
        /// `answer` items that were waiting when the parked item resumed;
        /// already moved to `completed/` (see docs/message-model.md).
        answers: Vec<Item>,
    },
    Batch {
        dir: PathBuf,
        priority: String,
        items: Vec<Item>,
        resumed: bool,
        answers: Vec<Item>,
    },
}

/// What `done-current` finished, and what it handed out next. The completion
/// stands even when the follow-up ready step refuses (e.g. the next item is
/// malformed), so `next` carries that refusal instead of hiding `COMPLETED:`.
#[derive(Debug)]
pub struct Done {
    pub completed: Vec<PathBuf>,
    pub completed_batch: Option<PathBuf>,
    /// `done-current --failed <reason>`: the reason stamped as `failed`.
    pub failed: Option<String>,
    pub next: Result<Ready>,
    /// Reactions the follow-up ready step took (see [`Inbox::ready_noted`]).
    pub reactions: Vec<Item>,
}

/// An inbox and the limits it is read with.
pub struct Inbox<'a> {
    pub wt: &'a Worktree,
    pub max_bytes: u64,
    /// The daemon's order hint socket (protocol::order), asked instead of
    /// listing a deep `new/`; `None` always lists.
    pub order: Option<PathBuf>,
    /// Where the operator's task documents are, recorded in this worktree
    /// before work on a taken item begins (`agent::task_doc`); `None`
    /// leaves them alone.
    pub task_docs: Option<crate::agent::task_doc::TaskDocs>,
}

impl<'a> Inbox<'a> {
    pub fn new(wt: &'a Worktree, max_bytes: u64) -> Inbox<'a> {
        Inbox {
            wt,
            max_bytes,
            order: None,
            task_docs: None,
        }
    }

    /// Asks `socket`'s daemon for the order of a deep `new/`.
    pub fn with_order(mut self, socket: PathBuf) -> Inbox<'a> {
        self.order = Some(socket);
        self
    }

    /// Records the task documents of what it hands out (`agent::task_doc`).
    pub fn with_task_docs(mut self, docs: crate::agent::task_doc::TaskDocs) -> Inbox<'a> {
        self.task_docs = Some(docs);
        self
    }
}

/// Entries directly in a folder: (sorted handoff file names, sorted batch dirs,
/// other `*.handoff` entries that are not regular files).
pub(super) struct Listing {
    files: Vec<String>,
    batches: Vec<String>,
    /// Kept as the raw name: a name that is not UTF-8 must still be movable.
    odd: Vec<std::ffi::OsString>,
}

pub(super) fn list(dir: &Path) -> Result<Listing> {
    let listed = store::list(dir).at(dir)?;
    let mut l = Listing {
        files: Vec::new(),
        batches: Vec::new(),
        odd: Vec::new(),
    };
    for e in listed.into_entries() {
        match e.kind {
            Kind::Handoff => l.files.push(e.name),
            Kind::Batch => l.batches.push(e.name),
            Kind::Odd => l.odd.push(e.raw_name().to_owned()),
            Kind::Sidecar | Kind::Temp | Kind::Stray => {}
        }
    }
    Ok(l)
}

/// A queue stamp never earlier than this host's earlier stamps of the item
/// (`enqueued_at` by the daemon, `dequeued_at` by ready): after the clock
/// steps back, `now` is bumped to the latest of them, so every item's stamps
/// stay in order and no stage latency comes out negative. The sender's
/// `created_at` (another clock, maybe another host) is not a bound.
pub(super) fn in_order(msg: &Message, now: &str) -> String {
    let Some(t) = clock::parse(now) else {
        return now.to_string();
    };
    let latest = [names::ENQUEUED_AT, names::DEQUEUED_AT]
        .iter()
        .filter_map(|h| msg.get(*h).and_then(clock::parse))
        .max();
    match latest {
        Some(l) if l > t => clock::iso(l),
        _ => now.to_string(),
    }
}

/// Removes a batch folder that holds nothing at all: one a crash left
/// between creating the batch and moving its first item in, so removing it
/// loses nothing. True when it was removed. (Called under the inbox lock.)
pub(super) fn remove_if_unfilled(dir: &Path) -> Result<bool> {
    if !store::is_empty(dir).at(dir)? {
        return Ok(false);
    }
    fsx::remove_empty_dir(dir).at(dir)?;
    Ok(true)
}

pub(super) fn paths(dir: &Path, names: &[String]) -> Vec<PathBuf> {
    names.iter().map(|n| dir.join(n)).collect()
}

pub use crate::protocol::store::STAMP_HEADROOM;

impl Inbox<'_> {
    pub(super) fn read_limit(&self) -> u64 {
        store::copy_limit(self.max_bytes)
    }

    pub(super) fn ensure(&self) -> Result<()> {
        fsx::ensure_dirs(&self.wt.inbox_dirs()).at(self.wt.inbox())
    }

    pub(super) fn lock(&self) -> Result<fsx::Lock> {
        self.ensure()?;
        let p = self.wt.inbox_lock();
        fsx::lock(&p).at(&p)
    }

    /// Reads and parses one item; a bad one is moved to `inbox/rejected/` with
    /// a `.error` note beside it and refused with `MALFORMED_HANDOFF` (exit 2),
    /// so the next call moves on instead of sticking on it.
    pub(super) fn load(&self, path: &Path) -> Result<Item> {
        let reason = match fsx::read_bounded(path, self.read_limit()) {
            Ok(bytes) => match Message::parse_bytes(&bytes) {
                Ok(msg) => {
                    return Ok(Item {
                        path: path.to_path_buf(),
                        msg,
                    })
                }
                // The token already says malformed; keep the reason alone.
                Err(e) => {
                    let r = e.to_string();
                    r.strip_prefix("malformed: ").unwrap_or(&r).to_string()
                }
            },
            // A file we may not read (another user's, mode 600) would block
            // the queue for good: moved aside like any planted file. Other
            // I/O errors (EIO, ENOSPC) are transient and keep the file.
            Err(fsx::ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::PermissionDenied => {
                format!("unreadable: {e}")
            }
            Err(fsx::ReadRefusal::Io(e)) => return Err(Error::io(path, e)),
            Err(e) => e.to_string(),
        };
        Err(self.reject(path, &reason))
    }

    pub(super) fn reject(&self, path: &Path, reason: &str) -> Error {
        let dir = self.wt.rejected();
        let moved = fsx::move_into_unique(path, &dir, grammar::collision_names(path));
        match moved {
            Ok(target) => {
                let mut note = target.clone().into_os_string();
                note.push(".error");
                let _ = fsx::append(Path::new(&note), format!("{reason}\n").as_bytes());
                Error::refused(
                    Token::MalformedHandoff,
                    crate::text::escape(reason),
                    vec![target],
                )
            }
            Err(e) => Error::refused(
                Token::MalformedHandoff,
                format!(
                    "{}; could not move it aside: {e}",
                    crate::text::escape(reason)
                ),
                vec![path.to_path_buf()],
            ),
        }
    }

    /// Loads an item already in process. A ready step killed between its move
    /// and its stamp left it without `dequeued_at`; finish that stamp now, so
    /// every accepted item carries exactly one.
    pub(super) fn load_in_process(&self, path: &Path) -> Result<Item> {
        let mut item = self.load(path)?;
        if item.msg.get(names::DEQUEUED_AT).is_none() {
            self.stamp(&mut item, Stamp::Dequeued, &clock::iso_now())?;
        }
        Ok(item)
    }

    /// Sets one header with an atomic replace that keeps the file's mode.
    pub(super) fn stamp(&self, item: &mut Item, field: Stamp, value: &str) -> Result<()> {
        self.stamp_with(item, field, value, fsx::replace)
    }

    /// [`Inbox::stamp`] whose folder is not fsynced: only for a file moved
    /// on next by a move that fsyncs both folders (docs/protocol.md §8).
    pub(super) fn stamp_before_move(
        &self,
        item: &mut Item,
        field: Stamp,
        value: &str,
    ) -> Result<()> {
        self.stamp_with(item, field, value, fsx::replace_without_dir_sync)
    }

    fn stamp_with(
        &self,
        item: &mut Item,
        field: Stamp,
        value: &str,
        replace: fn(&Path, &Path, &[u8]) -> std::io::Result<()>,
    ) -> Result<()> {
        let value = match field {
            Stamp::Dequeued | Stamp::Completed => in_order(&item.msg, value),
            Stamp::Created | Stamp::Enqueued => value.to_string(),
        };
        item.msg.set_stamp(field, &value);
        replace(
            &self.wt.inbox_tmp(),
            &item.path,
            item.msg.render().as_bytes(),
        )
        .at(&item.path)
    }

    /// Files in `new/` that are symlinks, FIFOs or oddly named are rejected
    /// before anything is handed out.
    pub(super) fn reject_odd(&self, listing: &Listing, dir: &Path) -> Result<()> {
        if let Some(name) = listing.odd.first() {
            let p = dir.join(name);
            let why = match fs::symlink_metadata(&p) {
                Ok(m) if m.file_type().is_symlink() => "symlink",
                Ok(m) if !m.file_type().is_file() => "not a regular file",
                _ => "invalid file name",
            };
            return Err(self.reject(&p, why));
        }
        Ok(())
    }

    /// Runs `f` holding this inbox's lock (for steps that must not race a
    /// `ready-next` or `done-current` on the same inbox).
    pub fn with_lock<T, E: From<Error>>(
        &self,
        f: impl FnOnce(&Self) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let _lock = self.lock()?;
        f(self)
    }
}
