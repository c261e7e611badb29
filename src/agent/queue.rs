//! `ready-next` / `done-current` state transitions (§7), each under the one
//! per-inbox lock, each a no-clobber rename, so concurrent callers never create
//! two in-process items, lose or duplicate a file, or see a half-written one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result, Token};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::Worktree;
use crate::protocol::roles::ReceiveMode;

/// One inbox item: where it is and what it says.
#[derive(Clone, Debug)]
pub struct Item {
    pub path: PathBuf,
    pub msg: Message,
}

impl Item {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.msg.get(name)
    }
    /// `priority` header, `50` when missing (SwarmForge's default).
    pub fn priority(&self) -> &str {
        self.header("priority").unwrap_or("50")
    }
}

/// What `ready-next` hands out.
#[derive(Clone, Debug)]
pub enum Ready {
    NoTask,
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
    Err(Error::env(format!(
        "--failed reason {why}: '{}'.",
        crate::text::escape(reason)
    )))
}

/// An inbox and the limits it is read with.
pub struct Inbox<'a> {
    pub wt: &'a Worktree,
    pub max_bytes: u64,
}

/// Entries directly in a folder: (sorted handoff file names, sorted batch dirs,
/// other `*.handoff` entries that are not regular files).
struct Listing {
    files: Vec<String>,
    batches: Vec<String>,
    /// Kept as the raw name: a name that is not UTF-8 must still be movable.
    odd: Vec<std::ffi::OsString>,
}

fn list(dir: &Path) -> Result<Listing> {
    let mut l = Listing {
        files: Vec::new(),
        batches: Vec::new(),
        odd: Vec::new(),
    };
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(l),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for e in rd {
        let e = e.at(dir)?;
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e.file_type().at(dir.join(&name))?;
        if ft.is_dir() {
            if grammar::is_batch_dir_name(&name) {
                l.batches.push(name);
            }
        } else if name.ends_with(".handoff") {
            if ft.is_file() && grammar::valid_handoff_name(&name) {
                l.files.push(name);
            } else {
                l.odd.push(e.file_name());
            }
        }
    }
    grammar::sort_names(&mut l.files);
    l.batches.sort_unstable();
    l.odd.sort_unstable();
    Ok(l)
}

/// A queue stamp never earlier than this host's earlier stamps of the item
/// (`enqueued_at` by the daemon, `dequeued_at` by ready): after the clock
/// steps back, `now` is bumped to the latest of them, so every item's stamps
/// stay in order and no stage latency comes out negative. The sender's
/// `created_at` (another clock, maybe another host) is not a bound.
fn in_order(msg: &Message, now: &str) -> String {
    let Some(t) = clock::parse(now) else {
        return now.to_string();
    };
    let latest = ["enqueued_at", "dequeued_at"]
        .iter()
        .filter_map(|h| msg.get(h).and_then(clock::parse))
        .max();
    match latest {
        Some(l) if l > t => clock::iso(l),
        _ => now.to_string(),
    }
}

/// Removes a batch folder that holds nothing at all: one a crash left
/// between creating the batch and moving its first item in, so removing it
/// loses nothing. True when it was removed. (Called under the inbox lock.)
fn remove_if_unfilled(dir: &Path) -> Result<bool> {
    if fs::read_dir(dir).at(dir)?.next().is_some() {
        return Ok(false);
    }
    fsx::remove_empty_dir(dir).at(dir)?;
    Ok(true)
}

fn paths(dir: &Path, names: &[String]) -> Vec<PathBuf> {
    names.iter().map(|n| dir.join(n)).collect()
}

/// Room for what delivery and the helpers add to an accepted original
/// (`recipient`, `enqueued_at`, `dequeued_at`, `completed_at`, `failed`), so a
/// file the daemon took is never refused here for its size.
pub const STAMP_HEADROOM: u64 = 4096;

impl Inbox<'_> {
    fn read_limit(&self) -> u64 {
        self.max_bytes.saturating_add(STAMP_HEADROOM)
    }

    fn ensure(&self) -> Result<()> {
        fsx::ensure_dirs(&self.wt.inbox_dirs()).at(self.wt.inbox())
    }

    fn lock(&self) -> Result<fsx::Lock> {
        self.ensure()?;
        let p = self.wt.inbox_lock();
        fsx::lock(&p).at(&p)
    }

    /// Reads and parses one item; a bad one is moved to `inbox/rejected/` with
    /// a `.error` note beside it and refused with `MALFORMED_HANDOFF` (exit 2),
    /// so the next call moves on instead of sticking on it.
    fn load(&self, path: &Path) -> Result<Item> {
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

    fn reject(&self, path: &Path, reason: &str) -> Error {
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
    fn load_in_process(&self, path: &Path) -> Result<Item> {
        let mut item = self.load(path)?;
        if item.header("dequeued_at").is_none() {
            self.stamp(&mut item, "dequeued_at", &clock::iso_now())?;
        }
        Ok(item)
    }

    /// Sets one header with an atomic replace that keeps the file's mode.
    fn stamp(&self, item: &mut Item, field: &str, value: &str) -> Result<()> {
        let value = match field {
            "dequeued_at" | "completed_at" => in_order(&item.msg, value),
            _ => value.to_string(),
        };
        item.msg.set(field, &value);
        fsx::replace(
            &self.wt.inbox_tmp(),
            &item.path,
            item.msg.render().as_bytes(),
        )
        .at(&item.path)
    }

    /// Files in `new/` that are symlinks, FIFOs or oddly named are rejected
    /// before anything is handed out.
    fn reject_odd(&self, listing: &Listing, dir: &Path) -> Result<()> {
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

    pub fn ready(&self, mode: ReceiveMode) -> Result<Ready> {
        let _lock = self.lock()?;
        self.ready_locked(mode)
    }

    fn ready_locked(&self, mode: ReceiveMode) -> Result<Ready> {
        match mode {
            ReceiveMode::Task => self.ready_task(),
            ReceiveMode::Batch => self.ready_batch(),
        }
    }

    fn ready_task(&self) -> Result<Ready> {
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
            let answers = self.take_answers()?;
            return Ok(Ready::Task {
                item,
                resumed: true,
                answers,
            });
        }
        let new = self.wt.inbox_new();
        let waiting = list(&new)?;
        self.reject_odd(&waiting, &new)?;
        let Some(name) = waiting.files.first() else {
            return Ok(Ready::NoTask);
        };
        let src = new.join(name);
        // Validate before moving so a malformed file never becomes "in process".
        let mut item = self.load(&src)?;
        let dst = ip.join(name);
        match fsx::move_noreplace(&src, &dst) {
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
        self.stamp(&mut item, "dequeued_at", &clock::iso_now())?;
        Ok(Ready::Task {
            item,
            resumed: false,
            answers: Vec::new(),
        })
    }

    fn load_batch(&self, dir: &Path) -> Result<Vec<Item>> {
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

    fn ready_batch(&self) -> Result<Ready> {
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
        if let Some(b) = cur.batches.first() {
            let dir = ip.join(b);
            if !remove_if_unfilled(&dir)? {
                let items = self.load_batch(&dir)?;
                let priority = items[0].priority().to_string();
                let answers = self.take_answers()?;
                return Ok(Ready::Batch {
                    dir,
                    priority,
                    items,
                    resumed: true,
                    answers,
                });
            }
        }
        let new = self.wt.inbox_new();
        let waiting = list(&new)?;
        self.reject_odd(&waiting, &new)?;
        let Some(first) = waiting.files.first() else {
            return Ok(Ready::NoTask);
        };
        let first_item = self.load(&new.join(first))?;
        let priority = first_item.priority().to_string();
        // Selection is by the priority header (§7.5). Our daemon only delivers
        // files whose name prefix matches that header, so only files with that
        // prefix (or no prefix) need reading; this keeps a deep backlog cheap.
        let mut selected = vec![first_item];
        for name in waiting.files.iter().skip(1) {
            let prefix = name.get(..3).unwrap_or("");
            let has_prefix = prefix.len() == 3
                && prefix.as_bytes()[2] == b'_'
                && prefix[..2].bytes().all(|b| b.is_ascii_digit());
            if has_prefix && prefix[..2] != priority {
                continue;
            }
            let item = self.load(&new.join(name))?;
            if item.priority() == priority {
                selected.push(item);
            }
        }
        let dir = self.new_batch_dir()?;
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
            self.stamp(&mut item, "dequeued_at", &clock::iso_now())?;
            items.push(item);
        }
        Ok(Ready::Batch {
            dir,
            priority,
            items,
            resumed: false,
            answers: Vec::new(),
        })
    }

    /// `batch_<IDTS>_<NNNNNN>`, the smallest number free in both `in_process/`
    /// and `completed/` (SwarmForge only checked the former, so two batches in
    /// one second collided at completion).
    fn new_batch_dir(&self) -> Result<PathBuf> {
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
        Err(Error::env(format!(
            "no free batch directory name in {}",
            ip.display()
        )))
    }

    /// The refusal for a completion whose target already exists.
    fn completed_exists(target: &Path) -> Error {
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
    fn complete_file(&self, item: &mut Item, at: &str, failed: Option<&str>) -> Result<PathBuf> {
        let name = item
            .path
            .file_name()
            .map(|n| n.to_owned())
            .ok_or_else(|| Error::env(format!("{}: no file name", item.path.display())))?;
        let target = self.wt.completed().join(name);
        if target.exists() {
            return Err(Self::completed_exists(&target));
        }
        if item.header("dequeued_at").is_none() {
            let at = in_order(&item.msg, at);
            item.msg.set("dequeued_at", &at);
        }
        if let Some(r) = failed {
            item.msg.set("failed", r);
        }
        self.stamp(item, "completed_at", at)?;
        match fsx::move_noreplace(&item.path, &target) {
            Ok(()) => {
                item.path = target.clone();
                Ok(target)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Err(Self::completed_exists(&target))
            }
            Err(e) => Err(Error::io(&item.path, e)),
        }
    }

    /// While an item is parked in process, `answer` items waiting in `new/`
    /// are handed out with it: each is stamped `dequeued_at` and
    /// `completed_at` (one time), then moved to `completed/`, under the lock
    /// the caller holds. Stamping before the move means a crash in between
    /// leaves the answer in `new/`, where the next call finishes it.
    /// Unreadable files are left for the ordinary ready step to reject.
    fn take_answers(&self) -> Result<Vec<Item>> {
        let new = self.wt.inbox_new();
        let mut out = Vec::new();
        for name in list(&new)?.files {
            let src = new.join(&name);
            let Ok(bytes) = fsx::read_bounded(&src, self.read_limit()) else {
                continue;
            };
            let Ok(msg) = Message::parse_bytes(&bytes) else {
                continue;
            };
            if msg.get("type") != Some(crate::protocol::types::ANSWER.name) {
                continue;
            }
            let mut item = Item { path: src, msg };
            self.complete_file(&mut item, &clock::iso_now(), None)?;
            out.push(item);
        }
        Ok(out)
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
            if fs::read_dir(&dir)
                .map(|mut rd| rd.next().is_none())
                .unwrap_or(false)
            {
                fsx::remove_empty_dir(&dir).at(&dir)?;
            }
        }
        Ok(Some(target))
    }

    /// The waiting or in-process copy of message `id`, and its batch dir.
    fn open_copy(&self, id: &str) -> Result<Option<(Item, Option<PathBuf>)>> {
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
        let next = self.ready_locked(mode);
        Ok(Done {
            completed,
            completed_batch,
            failed: failed.map(str::to_string),
            next,
        })
    }

    fn done_task(&self, failed: Option<&str>) -> Result<Vec<PathBuf>> {
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
        // stamp), so a refusal changes nothing (§15.8).
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

    fn done_batch(&self, failed: Option<&str>) -> Result<(Vec<PathBuf>, PathBuf)> {
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
        // stamp), so a refusal changes nothing (§15.8).
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
                item.msg.set("failed", r);
            }
            self.stamp(item, "completed_at", &t)?;
        }
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
        let files = items
            .iter()
            .filter_map(|i| i.path.file_name().map(|n| target.join(n)))
            .collect();
        Ok((files, target))
    }
}

/// The item for message `id` directly in `dir` (names embed the id, so only
/// matching names are read); unreadable files are skipped.
fn find_in(dir: &Path, id: &str, max_bytes: u64) -> Option<Item> {
    let needle = format!("_{id}_to_");
    let rd = fs::read_dir(dir).ok()?;
    let mut names: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".handoff") && n.contains(&needle))
        .collect();
    names.sort_unstable();
    names.into_iter().find_map(|n| {
        let path = dir.join(n);
        let bytes = fsx::read_bounded(&path, max_bytes).ok()?;
        let msg = Message::parse_bytes(&bytes).ok()?;
        (msg.get("id") == Some(id)).then_some(Item { path, msg })
    })
}

/// Where a worktree may hold message `id` for its roles: the inbox (new,
/// in process, completed, batches included).
fn inbox_dirs(wt: &Worktree) -> Vec<PathBuf> {
    let mut dirs = vec![wt.in_process(), wt.inbox_new(), wt.completed()];
    for base in [wt.in_process(), wt.completed()] {
        if let Ok(l) = list(&base) {
            dirs.extend(l.batches.iter().map(|b| base.join(b)));
        }
    }
    dirs
}

/// The copy of message `id` in this worktree's inbox, if any (read-only, no
/// lock: for look-ups, never for transitions).
pub fn find_copy(wt: &Worktree, id: &str, max_bytes: u64) -> Option<Item> {
    inbox_dirs(wt)
        .iter()
        .find_map(|d| find_in(d, id, max_bytes))
}

/// Message `id` as this worktree knows it: a copy in its inbox, else its own
/// original in `sent/` or the outbox (a follow-up to one's own message).
pub fn find_item(wt: &Worktree, id: &str, max_bytes: u64) -> Option<Item> {
    find_copy(wt, id, max_bytes).or_else(|| {
        [wt.sent(), wt.outbox()]
            .iter()
            .find_map(|d| find_in(d, id, max_bytes))
    })
}

/// Message `id`'s original in this (its sender's) worktree: `sent/`, then
/// the outbox, then `failed/` (read-only, no lock).
pub fn find_original(wt: &Worktree, id: &str, max_bytes: u64) -> Option<Item> {
    [wt.sent(), wt.outbox(), wt.failed()]
        .iter()
        .find_map(|d| find_in(d, id, max_bytes))
}

/// The item in process: the file in `in_process/`, or the first item of the
/// in-process batch (read-only, no lock).
pub fn current_item(wt: &Worktree, max_bytes: u64) -> Option<Item> {
    let ip = wt.in_process();
    let l = list(&ip).ok()?;
    let path = match (l.files.first(), l.batches.first()) {
        (Some(f), _) => ip.join(f),
        (None, Some(b)) => {
            let dir = ip.join(b);
            dir.join(list(&dir).ok()?.files.first()?)
        }
        _ => return None,
    };
    let bytes = fsx::read_bounded(&path, max_bytes).ok()?;
    let msg = Message::parse_bytes(&bytes).ok()?;
    Some(Item { path, msg })
}
