//! The mail store's listings (docs/design.md, "The mail store"): the one
//! place that lists a state folder of a worktree (the outbox, `held/`,
//! `sent/`, `failed/`, the inbox's folders, a batch, an archive day) and says
//! what each entry is. Every other module asks here instead of matching
//! names itself, so what counts as a message, a batch, a note or a temp file
//! is decided once (docs/protocol.md §1.3), and every listing of a queue is
//! in the order the protocol hands items out (§4).
//!
//! It is also the one way a new message enters an outbox ([`enqueue`]):
//! number, id, file name and publish, so the name always agrees with the
//! headers the daemon checks it against.
//!
//! Invariants kept here: an entry is classified from its name and the type
//! the folder entry has (a symlink is never followed); a folder that does not
//! exist lists as empty; an entry gone between the listing and its type
//! (a concurrent move) is not listed; a message is enqueued under the name
//! its `priority`, `id` and `to` headers give (docs/protocol.md §4), by a
//! publish that never clobbers (temp + fsync + rename + fsync of the folder).

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use chrono::{DateTime, Utc};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::sequence;

/// The suffix every queue file carries (docs/protocol.md §1.3).
pub const SUFFIX: &str = ".handoff";

/// The suffix of the note beside a refused original (`<name>.error`).
pub const NOTE_SUFFIX: &str = ".error";

/// Room for what delivery and the helpers add to an accepted original
/// (`recipient`, `enqueued_at`, `dequeued_at`, `completed_at`, `failed`), so
/// a file the daemon took is never refused later for its size.
pub const STAMP_HEADROOM: u64 = 4096;

/// The largest copy a reader accepts: the configured `limits.max_file_bytes`
/// of an original plus the stamps delivery and the helpers add.
pub fn copy_limit(max_file_bytes: u64) -> u64 {
    max_file_bytes.saturating_add(STAMP_HEADROOM)
}

/// Whether `name` is named as a queue file (`*.handoff`), whatever it is on
/// disk: for a path a watcher reported, before it is looked at.
pub fn is_handoff_name(name: &str) -> bool {
    name.ends_with(SUFFIX)
}

/// Whether the last component of `path` is named as a queue file.
pub fn is_handoff_path(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| is_handoff_name(&n.to_string_lossy()))
}

/// What an entry of a state folder is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file with a valid handoff name: a message.
    Handoff,
    /// Named `*.handoff` but not a message to open: a bad name, a symlink,
    /// a FIFO, a device. Refused (to `failed/` or `inbox/rejected/`), never
    /// followed.
    Odd,
    /// A `batch_*` folder (`inbox/in_process/`, `inbox/completed/`).
    Batch,
    /// `<name>.handoff.error`: why an original was refused or an item rejected.
    Sidecar,
    /// A dot file: a publish's temp file (`fsx`), a lock, an editor's swap.
    Temp,
    /// Anything else: other folders, planted names.
    Stray,
}

/// Classifies an entry by its name and its type as the folder entry gives it.
pub fn classify(name: &str, is_dir: bool, is_file: bool) -> Kind {
    if is_dir {
        return if grammar::is_batch_dir_name(name) {
            Kind::Batch
        } else {
            Kind::Stray
        };
    }
    if is_handoff_name(name) {
        if is_file && grammar::valid_handoff_name(name) {
            Kind::Handoff
        } else {
            Kind::Odd
        }
    } else if name.strip_suffix(NOTE_SUFFIX).is_some_and(is_handoff_name) {
        Kind::Sidecar
    } else if name.starts_with('.') {
        Kind::Temp
    } else {
        Kind::Stray
    }
}

/// One entry of a state folder.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The name as text (lossy for a name that is not UTF-8; open it by
    /// [`Entry::path`], which keeps its bytes).
    pub name: String,
    pub path: PathBuf,
    pub kind: Kind,
    is_file: bool,
}

impl Entry {
    /// The name as on disk.
    pub fn raw_name(&self) -> &OsStr {
        self.path.file_name().unwrap_or_default()
    }
    /// A regular file (never through a symlink).
    pub fn is_file(&self) -> bool {
        self.is_file
    }
    /// `*.handoff`, a message or not ([`Kind::Handoff`] or [`Kind::Odd`]).
    pub fn is_handoff_named(&self) -> bool {
        matches!(self.kind, Kind::Handoff | Kind::Odd)
    }
    /// The entry's own metadata (a symlink's, not its target's).
    pub fn metadata(&self) -> io::Result<fs::Metadata> {
        fs::symlink_metadata(&self.path)
    }
    /// Its last modification, when it can be read.
    pub fn modified(&self) -> Option<SystemTime> {
        self.metadata().and_then(|m| m.modified()).ok()
    }
    /// Its message, read with the size limit `max_bytes` (the one parser,
    /// no symlinks, no FIFOs).
    pub fn load(&self, max_bytes: u64) -> Loaded {
        load_message(&self.path, max_bytes)
    }
    /// Its message, or `None` when it is gone or cannot be one.
    pub fn message(&self, max_bytes: u64) -> Option<Message> {
        self.load(max_bytes).ok()
    }
}

/// The entries of one folder as they are listed (unsorted), classified.
pub struct Entries {
    dir: PathBuf,
    rd: Option<fs::ReadDir>,
}

impl Iterator for Entries {
    type Item = io::Result<Entry>;

    fn next(&mut self) -> Option<io::Result<Entry>> {
        loop {
            let e = match self.rd.as_mut()?.next()? {
                Ok(e) => e,
                Err(err) => return Some(Err(err)),
            };
            let ft = match e.file_type() {
                Ok(t) => t,
                // Moved away since the folder was read: not here any more.
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => return Some(Err(err)),
            };
            let name = e.file_name().to_string_lossy().into_owned();
            let kind = classify(&name, ft.is_dir(), ft.is_file());
            return Some(Ok(Entry {
                name,
                path: self.dir.join(e.file_name()),
                kind,
                is_file: ft.is_file(),
            }));
        }
    }
}

/// The entries of `dir` as the folder gives them (unsorted: for a look that
/// can stop early); a missing folder has none.
pub fn entries(dir: &Path) -> io::Result<Entries> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => Some(rd),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    Ok(Entries {
        dir: dir.to_path_buf(),
        rd,
    })
}

/// Every entry of a folder, in the protocol's order (docs/protocol.md §4:
/// priority, second, sequence, then name; entries of other shapes by name
/// after the queue files of the same first characters).
#[derive(Clone, Debug, Default)]
pub struct Listing {
    entries: Vec<Entry>,
}

impl Listing {
    fn sorted(mut entries: Vec<Entry>) -> Listing {
        entries.sort_by_cached_key(|e| (grammar::sort_key(&e.name), e.name.clone()));
        Listing { entries }
    }
    pub fn all(&self) -> &[Entry] {
        &self.entries
    }
    pub fn into_entries(self) -> Vec<Entry> {
        self.entries
    }
    /// The entries of one kind, in order.
    pub fn of(&self, kind: Kind) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(move |e| e.kind == kind)
    }
    /// The messages ([`Kind::Handoff`]), in hand-out order.
    pub fn handoffs(&self) -> impl Iterator<Item = &Entry> {
        self.of(Kind::Handoff)
    }
    /// Everything named `*.handoff` (messages and odd entries), in order.
    pub fn named(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.is_handoff_named())
    }
    /// The `batch_*` folders, by name.
    pub fn batches(&self) -> impl Iterator<Item = &Entry> {
        self.of(Kind::Batch)
    }
}

/// Every entry of `dir`, in order; a missing folder is empty, any other
/// failure to list it (or one of its entries) is an error.
pub fn list(dir: &Path) -> io::Result<Listing> {
    Ok(Listing::sorted(entries(dir)?.collect::<io::Result<_>>()?))
}

/// [`list`] for a reader that shows what it can: a folder it cannot list is
/// empty, an entry it cannot read is left out.
pub fn scan(dir: &Path) -> Listing {
    Listing::sorted(each(dir).collect())
}

/// The entries of `dir` unsorted, for a reader that shows what it can (as
/// [`scan`], without the cost of ordering a long folder).
pub fn each(dir: &Path) -> impl Iterator<Item = Entry> {
    entries(dir).into_iter().flatten().flatten()
}

/// Whether `dir` holds no entry at all (an error when it cannot be listed,
/// or is missing).
pub fn is_empty(dir: &Path) -> io::Result<bool> {
    fsx::is_empty_dir(dir)
}

/// Whether `dir` holds an entry `pred` accepts (stops at the first); a
/// folder that cannot be listed holds none.
pub fn any(dir: &Path, mut pred: impl FnMut(&Entry) -> bool) -> bool {
    each(dir).any(|e| pred(&e))
}

/// How many entries of `dir` `pred` accepts; a folder that cannot be listed
/// holds none.
pub fn count(dir: &Path, mut pred: impl FnMut(&Entry) -> bool) -> usize {
    each(dir).filter(|e| pred(e)).count()
}

/// A message put in an outbox.
#[derive(Clone, Debug)]
pub struct Enqueued {
    pub path: PathBuf,
    pub id: String,
    /// Its number in the sender's worktree sequence.
    pub seq: u64,
    /// The message as written.
    pub msg: Message,
}

/// The outbox file name of `msg`, from its `priority`, `id` and `to`
/// headers (docs/protocol.md §4).
pub fn outbox_name(msg: &Message) -> String {
    let to: Vec<String> = grammar::role_list(msg.to())
        .into_iter()
        .map(str::to_string)
        .collect();
    grammar::file_name(
        msg.priority().unwrap_or_default(),
        msg.id().unwrap_or_default(),
        &to,
    )
}

/// The one way a new message is queued: takes the next number of `wt`'s
/// sequence, builds the id of `sender` at this second, lets `build` write
/// the message for that id and time, and publishes it in `wt`'s outbox
/// under [`outbox_name`]. The daemon delivers it from there like any other.
pub fn enqueue(
    wt: &Worktree,
    sender: &str,
    build: impl FnOnce(&str, DateTime<Utc>) -> Message,
) -> Result<Enqueued> {
    enqueue_with(wt, || take_id(wt, sender), build)
}

/// [`enqueue`] of a message from `handoffd` itself into `wt`'s outbox, its
/// id taken from the project's daemon counter ([`take_daemon_id`]).
pub fn enqueue_from_daemon(
    project: &Project,
    wt: &Worktree,
    build: impl FnOnce(&str, DateTime<Utc>) -> Message,
) -> Result<Enqueued> {
    enqueue_with(wt, || take_daemon_id(project), build)
}

fn enqueue_with(
    wt: &Worktree,
    take: impl FnOnce() -> Result<(String, u64, DateTime<Utc>)>,
    build: impl FnOnce(&str, DateTime<Utc>) -> Message,
) -> Result<Enqueued> {
    fsx::ensure_dirs(&wt.send_dirs()).at(wt.handoffs())?;
    let (id, seq, now) = take()?;
    let msg = build(&id, now);
    let path = publish(wt, &msg)?;
    Ok(Enqueued { path, id, seq, msg })
}

/// The next id of `handoffd` itself: `(id, number, time)`, numbered by the
/// one counter of the project, since its messages go out from several
/// worktrees (protocol::sequence).
pub fn take_daemon_id(project: &Project) -> Result<(String, u64, DateTime<Utc>)> {
    let now = clock::now();
    let seq = sequence::next_daemon(project)?;
    Ok((grammar::message_id(now, seq, grammar::DAEMON), seq, now))
}

/// Takes the next number of `wt`'s sequence and builds the id of `sender`
/// at this second: `(id, number, time)`. For a message that must be kept
/// before it is published (a daemon's answer that a crash must not send
/// twice); [`enqueue`] takes its id here too.
///
/// Invariant: never `handoffd`'s id ([`take_daemon_id`] numbers those), so
/// a per-worktree counter can never give two of its messages one id.
pub fn take_id(wt: &Worktree, sender: &str) -> Result<(String, u64, DateTime<Utc>)> {
    if sender == grammar::DAEMON {
        return Err(Error::internal(
            "handoffd's message ids come from its own counter (store::take_daemon_id)",
        ));
    }
    let now = clock::now();
    let seq = sequence::next(wt)?;
    Ok((grammar::message_id(now, seq, sender), seq, now))
}

/// Publishes a message built already (its id taken) in `wt`'s outbox under
/// [`outbox_name`]; refused when that name is taken.
pub fn publish(wt: &Worktree, msg: &Message) -> Result<PathBuf> {
    let dest = wt.outbox().join(outbox_name(msg));
    fsx::publish(&wt.outbox_tmp(), &dest, msg.render().as_bytes()).at(&dest)?;
    Ok(dest)
}

/// The outcome of reading one queue file.
pub enum Loaded {
    Ok(Message),
    /// Moved on between the listing and the read: it shows up where it went on
    /// the next listing, so it is not a defect of the trail.
    Gone,
    /// Unreadable or malformed, with the cause.
    Bad(String),
}

impl Loaded {
    /// The message, or `None` when it is gone or cannot be one.
    pub fn ok(self) -> Option<Message> {
        match self {
            Loaded::Ok(m) => Some(m),
            Loaded::Gone | Loaded::Bad(_) => None,
        }
    }
}

/// Reads and parses one queue file with the project's size limit (the one
/// parser, no symlinks, no FIFOs).
pub fn load_message(path: &Path, max_bytes: u64) -> Loaded {
    match fsx::read_bounded(path, max_bytes) {
        Ok(bytes) => match Message::parse_bytes(&bytes) {
            Ok(m) => Loaded::Ok(m),
            Err(e) => Loaded::Bad(e.to_string()),
        },
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::NotFound => Loaded::Gone,
        Err(e) => Loaded::Bad(e.to_string()),
    }
}

/// The archive day folder an entry named `name` is filed under (`swarm
/// archive` files an entry under the day its id was created), `None` for a
/// name without a message id.
pub fn archive_day(wt: &Worktree, name: &str) -> Option<PathBuf> {
    let day = grammar::FileName::parse(name)?.message_id().time()?;
    Some(wt.archive().join(day.format("%Y-%m-%d").to_string()))
}

/// The folders a copy named `name` can be in, in `wt`'s inbox, in the
/// order items move: `new/`, `in_process/` and its batches, `completed/`
/// and its batches, then the archive day of its id. An item only moves
/// forward, so a look along this list in order sees one moving meanwhile.
/// The one list of places: delivery's "held already" check and the lost
/// line check at a start both read it, so neither misses a place.
pub fn copy_places(wt: &Worktree, name: &str) -> Vec<PathBuf> {
    let mut places = vec![wt.inbox_new(), wt.in_process()];
    places.extend(batch_dirs(&wt.in_process()));
    places.push(wt.completed());
    places.extend(batch_dirs(&wt.completed()));
    places.extend(archive_day(wt, name).map(|d| d.join("completed")));
    places
}

/// The `batch_*` folders directly in `dir` (an inbox's `in_process/` or
/// `completed/`); a missing folder has none.
pub fn batch_dirs(dir: &Path) -> Vec<PathBuf> {
    each(dir)
        .filter(|e| e.kind == Kind::Batch)
        .map(|e| e.path)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_classified_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        let item = "50_20260615T140531Z_000002_from_a_to_b.handoff";
        let first = "10_20260615T140531Z_000009_from_a_to_b.handoff";
        fs::write(p.join(item), "x").unwrap();
        fs::write(p.join(first), "x").unwrap();
        fs::write(p.join(format!("{item}.error")), "why").unwrap();
        fs::write(p.join("a b.handoff"), "x").unwrap();
        fs::write(p.join(".x.handoff.1.2.3.tmp"), "x").unwrap();
        fs::write(p.join("notes.txt"), "x").unwrap();
        fs::create_dir(p.join("batch_20260615T140531Z_000001")).unwrap();
        fs::create_dir(p.join("dir.handoff")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", p.join("l.handoff")).unwrap();
        let l = list(p).unwrap();
        let names = |k: Kind| l.of(k).map(|e| e.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(Kind::Handoff), [first, item]);
        assert_eq!(names(Kind::Odd), ["a b.handoff", "l.handoff"]);
        assert_eq!(names(Kind::Batch), ["batch_20260615T140531Z_000001"]);
        assert_eq!(names(Kind::Sidecar), [format!("{item}.error")]);
        assert_eq!(names(Kind::Temp), [".x.handoff.1.2.3.tmp"]);
        assert_eq!(names(Kind::Stray), ["dir.handoff", "notes.txt"]);
        assert_eq!(l.named().count(), 4);
        assert!(!is_empty(p).unwrap());
        assert!(any(p, |e| e.kind == Kind::Batch));
        assert_eq!(count(p, |e| e.kind == Kind::Odd), 2);
    }

    #[test]
    fn a_missing_folder_is_empty_but_not_for_is_empty() {
        let d = tempfile::tempdir().unwrap();
        let gone = d.path().join("gone");
        assert!(list(&gone).unwrap().all().is_empty());
        assert!(scan(&gone).all().is_empty());
        assert!(!any(&gone, |_| true));
        assert!(is_empty(&gone).is_err());
        assert!(is_empty(d.path()).unwrap());
    }

    #[test]
    fn messages_are_read_with_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let name = "50_20260615T140531Z_000002_from_a_to_b.handoff";
        let text = "id: x\n\nbody\n";
        fs::write(d.path().join(name), text).unwrap();
        let l = list(d.path()).unwrap();
        let e = l.handoffs().next().unwrap();
        assert!(e.message(1024).is_some());
        assert!(matches!(e.load(4), Loaded::Bad(_)));
        assert_eq!(copy_limit(10), 10 + STAMP_HEADROOM);
    }
}
