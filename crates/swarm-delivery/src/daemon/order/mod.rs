//! The order index behind protocol::order: for each deep `inbox/new` folder
//! this daemon serves, its items in hand-out order and in age order, kept
//! from one listing and then from the folder's inotify events, answered on
//! `.swarmforge/daemon/order.sock` and read by the re-wake sweep.
//!
//! Why an answer is never behind the question: the kernel queues a folder's
//! event before the rename (or create, or unlink) returns, and every question
//! first drains the queue; so whatever was placed before the caller asked
//! is in the answer, whoever placed it. Lost events (a queue overflow) or a
//! folder removed or replaced make the index list the folder again. Anything
//! else that goes wrong here only costs speed: a caller without an answer
//! lists the folder itself.
//!
//! Why no caller waits for a listing (docs/benchmarks.md, "Deep queues at
//! any call spacing"): listings run on their own thread. Deep folders are
//! indexed when the daemon starts (before it logs `started`) and when they
//! grow deep later; the periodic re-listing, the safety net for a change
//! that raised no event, lists next to the live index and then replays onto
//! the new listing every event seen since it began, so the swap loses
//! nothing and the answers in between come from the live index.
//!
//! Which items may be `answer`s (the `answers` question, asked by a
//! `ready-next` that resumes an item in process): every item enters the
//! index unread; a reader thread of the lowest CPU priority (so the reads
//! of a 100 000-item inbox after a start do not compete with the callers)
//! reads each one's head once ([`order::may_be_answer`]) and rules out
//! those that cannot be. A read belongs to the item as it was added (a number
//! given at each add): an item replaced under the same name meanwhile is
//! added again, unread, and the stale read is dropped. A new listing keeps
//! what was read of the items it still holds.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{self, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{AtFlags, FileType};

use crate::fsx;
use crate::protocol::grammar::{self, QueueEntry, SortKey};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::order::{self, Answer, Ask};

/// How long one connection may take to ask (a stuck caller must not hold
/// up the others for long; callers give up after their own timeout).
const CONVERSATION: Duration = Duration::from_millis(500);
/// How often the thread looks at its stop flag while nothing happens.
const TICK: Duration = Duration::from_millis(200);

/// How long a folder's listing is trusted before it is listed again, in
/// the background: the safety net for a change that raised no event, as the
/// daemon's own periodic rescan is. `HANDOFFD_ORDER_RELIST` (seconds)
/// shortens it, for benchmarks that simulate calls far apart.
const RELIST: Duration = Duration::from_secs(30);
/// How often served folders that are not indexed are looked at (one `stat`
/// each) to index those that grew deep.
const DEEP_SCAN: Duration = Duration::from_secs(10);
/// How long the daemon's start waits for its first listings (100 000
/// items, a stat each, took over 5 s on two cores under a load of 25).
const SETTLE: Duration = Duration::from_secs(60);
/// Files the re-wake sweep reads per folder and round to find the oldest
/// item that wakes (copies that do not wake are remembered as such).
const SWEEP_READS: usize = 16;
/// Items whose head the reader reads per round (the index is locked only
/// to take them and to record them), and how long it waits when none is
/// unread.
const READS_PER_ROUND: usize = 256;
const READ_TICK: Duration = Duration::from_millis(100);

/// Numbers each add of an item, so a read can tell whether it is still the
/// item's (see the module doc).
static ADDED: AtomicU64 = AtomicU64::new(0);

fn relist_period() -> Duration {
    std::env::var("HANDOFFD_ORDER_RELIST")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.05 && *s <= 86_400.0)
        .map_or(RELIST, Duration::from_secs_f64)
}

type Name = Arc<str>;

/// What one listing (and the events after it) says a folder holds.
#[derive(Default)]
struct Entries {
    items: BTreeSet<(SortKey, Name)>,
    /// Item → its modification time (ns since the epoch): when it was
    /// placed, as the re-wake sweep reads it.
    ages: HashMap<Name, i64>,
    by_age: BTreeSet<(i64, Name)>,
    /// Entries named `*.handoff` that are not items (raw names).
    odd: HashSet<Box<[u8]>>,
    /// Items whose head is not read yet → the number of their add.
    unread: HashMap<Name, u64>,
    /// Read items that may be answers.
    answers: BTreeSet<(SortKey, Name)>,
}

impl Entries {
    fn add(&mut self, name: &[u8], kind: FileType, mtime: i64) {
        let text = String::from_utf8_lossy(name);
        let is_dir = kind == FileType::Directory;
        match grammar::queue_entry(&text, is_dir, kind == FileType::RegularFile) {
            QueueEntry::Item => {
                let n: Name = text.into();
                self.items.insert((grammar::sort_key(&n), n.clone()));
                self.by_age.insert((mtime, n.clone()));
                self.unread
                    .insert(n.clone(), ADDED.fetch_add(1, Ordering::Relaxed));
                self.ages.insert(n, mtime);
            }
            QueueEntry::Odd => {
                self.odd.insert(name.into());
            }
            QueueEntry::Batch | QueueEntry::Other => {}
        }
    }

    fn remove(&mut self, name: &[u8]) {
        if let Ok(text) = std::str::from_utf8(name) {
            if let Some((n, t)) = self.ages.remove_entry(text) {
                self.by_age.remove(&(t, n.clone()));
                self.unread.remove(&n);
                let key = (grammar::sort_key(text), n);
                self.answers.remove(&key);
                self.items.remove(&key);
            }
        }
        self.odd.remove(name);
    }

    /// Brings `name` up to date with what the folder holds now (looked at
    /// through the folder itself: its path may name another by now).
    fn refresh(&mut self, dir: &OwnedFd, name: &[u8]) {
        self.remove(name);
        if let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            self.add(name, FileType::from_raw_mode(st.st_mode), mtime_ns(&st));
        }
    }

    fn apply(&mut self, dir: &OwnedFd, mask: ReadFlags, name: &[u8]) {
        if mask.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
            self.remove(name);
        }
        if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
            // Gone already means a later event says so.
            self.refresh(dir, name);
        }
    }

    /// Records what reading `name`'s head (as of its add number `added`)
    /// said; a read of an item added again since is dropped.
    fn read(&mut self, name: &Name, added: u64, may_be_answer: bool) {
        if self.unread.get(name) != Some(&added) {
            return;
        }
        self.unread.remove(name);
        if may_be_answer {
            self.answers.insert((grammar::sort_key(name), name.clone()));
        }
    }

    /// Keeps what `old` read of the items both hold (called on a fresh
    /// listing, after the events since it began are replayed onto it: an
    /// item `old` had read and this one saw added again is unread here and
    /// there alike, since both saw the same event).
    fn inherit(&mut self, old: &Entries) {
        let read_in_old = |n: &Name| old.ages.contains_key(n) && !old.unread.contains_key(n);
        let mut answers = Vec::new();
        self.unread.retain(|n, _| {
            if !read_in_old(n) {
                return true;
            }
            let key = (grammar::sort_key(n), n.clone());
            if old.answers.contains(&key) {
                answers.push(key);
            }
            false
        });
        self.answers.extend(answers);
    }

    /// The items that may be answers, in hand-out order: named only when
    /// there are at most [`order::HEAD`] of them.
    fn may_be_answers(&self) -> Vec<Name> {
        if self.answers.len() + self.unread.len() > order::HEAD {
            return Vec::new();
        }
        let mut all: Vec<(SortKey, Name)> = self.answers.iter().cloned().collect();
        all.extend(
            self.unread
                .keys()
                .map(|n| (grammar::sort_key(n), n.clone())),
        );
        all.sort();
        all.into_iter().map(|(_, n)| n).collect()
    }

    /// Lists the folder through `dir` (a fresh descriptor, so the held one
    /// keeps no offset).
    fn list(dir: &OwnedFd) -> io::Result<Entries> {
        let mut e = Entries::default();
        for entry in rustix::fs::Dir::read_from(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            match entry.file_type() {
                // Only items need a stat (their age); d_type says the rest.
                FileType::RegularFile | FileType::Unknown => e.refresh(dir, name),
                kind => e.add(name, kind, 0),
            }
        }
        Ok(e)
    }
}

fn mtime_ns(st: &rustix::fs::Stat) -> i64 {
    st.st_mtime
        .saturating_mul(1_000_000_000)
        .saturating_add(st.st_mtime_nsec as i64)
}

fn system_time(ns: i64) -> SystemTime {
    match u64::try_from(ns) {
        Ok(ns) => SystemTime::UNIX_EPOCH + Duration::from_nanos(ns),
        Err(_) => SystemTime::UNIX_EPOCH,
    }
}

/// One indexed folder.
struct Folder {
    /// The folder itself, held open: entries are looked at through it, and
    /// its identity tells whether the path still names it.
    fd: Arc<OwnedFd>,
    identity: (u64, u64),
    wd: i32,
    entries: Entries,
    /// Items the sweep found do not wake their role (`cc`, `wake: no`).
    quiet: HashSet<Name>,
    /// False until the first listing is in.
    ready: bool,
    listed: Instant,
    /// While a listing runs: the events seen since it began (replayed onto
    /// it), and the listing's number (a folder forgotten and watched again
    /// starts another, and the old one's result is dropped).
    pending: Option<Vec<(ReadFlags, Box<[u8]>)>>,
    job: u64,
}

impl Folder {
    fn answer(&self, ask: Ask) -> Answer {
        let e = &self.entries;
        match ask {
            Ask::Head => Answer {
                items: e.items.len(),
                odd: e.odd.len(),
                head: e
                    .items
                    .iter()
                    .take(order::HEAD)
                    .map(|(_, n)| n.to_string())
                    .collect(),
            },
            Ask::Answers => Answer {
                items: e.answers.len() + e.unread.len(),
                odd: e.odd.len(),
                head: e.may_be_answers().iter().map(|n| n.to_string()).collect(),
            },
        }
    }
}

fn identity(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

fn identity_at(dir: &Path) -> Option<(u64, u64)> {
    rustix::fs::lstat(dir).ok().map(|st| identity(&st))
}

/// Filesystems whose file events may miss changes made elsewhere (another
/// host, a FUSE daemon): never indexed, their callers list.
const REMOTE_MAGIC: [u64; 11] = [
    0x6969,      // NFS
    0xFF53_4D42, // CIFS
    0xFE53_4D42, // SMB2
    0x517B,      // SMB
    0x6573_5546, // FUSE (sshfs, virtiofs, ...)
    0x0102_1997, // 9p
    0x00C3_6400, // Ceph
    0x5346_414F, // AFS
    0x0116_1970, // GFS2
    0x7461_636F, // OCFS2
    0x0BD0_0BD0, // Lustre
];

/// A listing for the lister thread.
struct Job {
    dir: PathBuf,
    fd: Arc<OwnedFd>,
    job: u64,
}

/// The folders indexed so far and the inotify instance that keeps them.
struct Index {
    inotify: OwnedFd,
    /// Watch descriptor → folder path.
    watches: HashMap<i32, PathBuf>,
    folders: HashMap<PathBuf, Folder>,
    jobs: mpsc::Sender<Option<Job>>,
    next_job: u64,
}

/// What a question finds.
enum Found {
    Answer(Answer),
    /// Being listed: ask again once it is in.
    Listing,
}

impl Index {
    fn new(jobs: mpsc::Sender<Option<Job>>) -> io::Result<Index> {
        let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        Ok(Index {
            inotify,
            watches: HashMap::new(),
            folders: HashMap::new(),
            jobs,
            next_job: 0,
        })
    }

    /// Forgets every folder; those still served are watched and listed
    /// again in the background.
    fn clear(&mut self) {
        let dirs: Vec<PathBuf> = self.folders.keys().cloned().collect();
        for dir in &dirs {
            self.forget(dir);
        }
        for dir in dirs {
            let _ = self.watch(&dir);
        }
    }

    /// Applies every queued event.
    fn drain(&mut self) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut events = Vec::new();
        let mut failed = false;
        {
            let mut reader = inotify::Reader::new(self.inotify.as_fd(), &mut buf);
            loop {
                match reader.next() {
                    Ok(ev) => events.push((
                        ev.wd(),
                        ev.events(),
                        ev.file_name().map(|n| n.to_bytes().to_vec()),
                    )),
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(rustix::io::Errno::AGAIN) => break,
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
        }
        let mut lost = failed;
        for (wd, mask, name) in events {
            lost |= !self.apply(wd, mask, name.as_deref());
        }
        // Events we could not read may have been anything.
        if lost {
            self.clear();
        }
    }

    /// Applies one event; false when events were lost.
    fn apply(&mut self, wd: i32, mask: ReadFlags, name: Option<&[u8]>) -> bool {
        if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            return false;
        }
        let Some(dir) = self.watches.get(&wd).cloned() else {
            return true;
        };
        let gone =
            ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::UNMOUNT;
        if mask.intersects(gone) {
            // The folder itself went away or moved: forget it (the next
            // question watches whatever is at the path then).
            if !mask.contains(ReadFlags::IGNORED) {
                let _ = inotify::remove_watch(&self.inotify, wd);
            }
            self.watches.remove(&wd);
            self.folders.remove(&dir);
            return true;
        }
        let (Some(name), Some(folder)) = (name, self.folders.get_mut(&dir)) else {
            return true;
        };
        if mask.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
            if let Ok(text) = std::str::from_utf8(name) {
                folder.quiet.remove(text);
            }
        }
        folder.entries.apply(&folder.fd, mask, name);
        if let Some(log) = &mut folder.pending {
            log.push((mask, name.into()));
        }
        true
    }

    /// Drops `dir`'s index and its watch.
    fn forget(&mut self, dir: &Path) {
        if let Some(f) = self.folders.remove(dir) {
            let _ = inotify::remove_watch(&self.inotify, f.wd);
            self.watches.remove(&f.wd);
        }
    }

    /// Opens and watches `dir`, then has it listed in the background (in
    /// that order, so nothing placed in between is missed: it is in the
    /// listing or in an event replayed onto it); refuses a folder on a
    /// filesystem whose events may miss changes.
    fn watch(&mut self, dir: &Path) -> io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let magic = rustix::fs::fstatfs(&fd)?.f_type as u64;
        if REMOTE_MAGIC.contains(&magic) {
            return Err(io::Error::other(format!(
                "filesystem type {magic:#x}: its file events may miss other hosts' changes"
            )));
        }
        let id = identity(&rustix::fs::fstat(&fd)?);
        let flags = WatchFlags::CREATE
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR
            | WatchFlags::DONT_FOLLOW
            | WatchFlags::EXCL_UNLINK;
        let wd = inotify::add_watch(&self.inotify, dir, flags)?;
        if let Some(old) = self.watches.insert(wd, dir.to_path_buf()) {
            // The same folder under another path (a watch is per inode).
            self.folders.remove(&old);
        }
        self.folders.insert(
            dir.to_path_buf(),
            Folder {
                fd: Arc::new(fd),
                identity: id,
                wd,
                entries: Entries::default(),
                quiet: HashSet::new(),
                ready: false,
                listed: Instant::now(),
                pending: None,
                job: 0,
            },
        );
        self.relist(dir);
        Ok(())
    }

    /// Starts a background listing of `dir` unless one runs.
    fn relist(&mut self, dir: &Path) {
        let Some(f) = self.folders.get_mut(dir) else {
            return;
        };
        if f.pending.is_some() {
            return;
        }
        self.next_job += 1;
        f.job = self.next_job;
        f.pending = Some(Vec::new());
        let job = Job {
            dir: dir.to_path_buf(),
            fd: f.fd.clone(),
            job: f.job,
        };
        if self.jobs.send(Some(job)).is_err() {
            self.forget(dir);
        }
    }

    /// Takes a finished listing: the events seen since it began are
    /// replayed onto it, then it replaces the live entries. Returns the old
    /// entries (dropped by the caller after the lock is let go).
    fn swap_in(&mut self, job: &Job, listed: io::Result<Entries>) -> Option<Entries> {
        self.drain();
        let f = self
            .folders
            .get_mut(&job.dir)
            .filter(|f| f.job == job.job)?;
        let log = f.pending.take().unwrap_or_default();
        // The path still names the folder we listed (a watch on another one
        // would say nothing).
        let same = identity_at(&job.dir) == Some(f.identity);
        let mut fresh = match listed {
            Ok(e) if same => e,
            _ => {
                self.forget(&job.dir);
                return None;
            }
        };
        for (mask, name) in &log {
            fresh.apply(&f.fd, *mask, name);
        }
        fresh.inherit(&f.entries);
        f.quiet.retain(|n| fresh.ages.contains_key(n));
        f.ready = true;
        f.listed = Instant::now();
        Some(std::mem::replace(&mut f.entries, fresh))
    }

    /// Lists again, in the background, folders listed longer ago than `age`.
    fn relist_older(&mut self, age: Duration) {
        let due: Vec<PathBuf> = self
            .folders
            .iter()
            .filter(|(_, f)| f.ready && f.pending.is_none() && f.listed.elapsed() >= age)
            .map(|(d, _)| d.clone())
            .collect();
        for dir in due {
            self.relist(&dir);
        }
    }

    /// Watches the served folders that are deep and not indexed yet.
    fn index_deep(&mut self, served: &HashSet<PathBuf>) {
        for dir in served {
            if self.folders.contains_key(dir) {
                continue;
            }
            let deep = std::fs::symlink_metadata(dir)
                .is_ok_and(|m| m.is_dir() && m.len() >= order::DEEP_DIR_BYTES);
            if deep {
                let _ = self.watch(dir);
            }
        }
    }

    /// The folder at `dir` if it is indexed, listed, and still the folder
    /// the path names (one `stat`: a parent renamed or a copy restored
    /// raises no event on the one we watch); otherwise it is watched again
    /// and `None` said while it is listed.
    fn current(&mut self, dir: &Path) -> io::Result<Option<&mut Folder>> {
        self.drain();
        let now = identity_at(dir);
        let known = self.folders.get(dir).map(|f| Some(f.identity) == now);
        match known {
            Some(true) => {}
            Some(false) => {
                self.forget(dir);
                self.watch(dir)?;
            }
            None => self.watch(dir)?,
        }
        Ok(self.folders.get_mut(dir).filter(|f| f.ready))
    }

    fn answer(&mut self, ask: Ask, dir: &Path) -> io::Result<Found> {
        Ok(match self.current(dir)? {
            Some(f) => Found::Answer(f.answer(ask)),
            None => Found::Listing,
        })
    }

    /// Records what reading the heads of `todo` said.
    fn record(&mut self, todo: &[Unread], said: &[Option<bool>]) {
        for ((dir, _, name, added), said) in todo.iter().zip(said) {
            if let Some(f) = self.folders.get_mut(dir) {
                // Gone (a later event says so) or unreadable now: kept as
                // one that may be an answer, for the caller to look at.
                f.entries.read(name, *added, said.unwrap_or(true));
            }
        }
    }

    /// Up to `n` unread items of listed folders: (folder, its descriptor,
    /// name, add number).
    fn unread(&self, n: usize) -> Vec<Unread> {
        let mut out = Vec::new();
        for (dir, f) in self.folders.iter().filter(|(_, f)| f.ready) {
            for (name, added) in f.entries.unread.iter().take(n - out.len()) {
                out.push((dir.clone(), f.fd.clone(), name.clone(), *added));
            }
            if out.len() == n {
                break;
            }
        }
        out
    }

    fn listing(&self) -> bool {
        self.folders.values().any(|f| !f.ready)
    }
}

/// The index, shared by the socket's thread, the lister and the re-wake
/// sweep; `listed` is signalled whenever a listing is swapped in.
struct Shared {
    index: Mutex<Index>,
    listed: Condvar,
    served: Mutex<Served>,
}

impl Shared {
    fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn served(&self) -> MutexGuard<'_, Served> {
        self.served.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The lister: one listing at a time, off every caller's path, until told
/// to stop (`None`).
fn lister(shared: &Shared, jobs: &mpsc::Receiver<Option<Job>>) {
    while let Ok(Some(job)) = jobs.recv() {
        let listed = Entries::list(&job.fd);
        let old = shared.index().swap_in(&job, listed);
        shared.listed.notify_all();
        drop(old);
    }
}

/// The reader: the heads of unread items, at the lowest CPU priority (this
/// thread's own nice value), until `stop`.
fn reader(shared: &Shared, stop: &AtomicBool) {
    crate::sys::background::lowest_priority();
    while !stop.load(Ordering::Relaxed) {
        if read_heads(shared) == 0 {
            std::thread::sleep(READ_TICK);
        }
    }
}

/// Reads the heads of up to [`READS_PER_ROUND`] unread items (the index
/// unlocked meanwhile) and records what each said; returns how many.
fn read_heads(shared: &Shared) -> usize {
    let todo = shared.index().unread(READS_PER_ROUND);
    let said = heads(&todo);
    shared.index().record(&todo, &said);
    todo.len()
}

type Unread = (PathBuf, Arc<OwnedFd>, Name, u64);

/// What reading each head said (`None`: it could not be read).
fn heads(todo: &[Unread]) -> Vec<Option<bool>> {
    todo.iter()
        .map(|(_, fd, name, _)| head_may_be_answer(fd, name))
        .collect()
}

/// Whether the item `name` in the folder `dir` may be an answer; `None`
/// when it cannot be read.
fn head_may_be_answer(dir: &OwnedFd, name: &str) -> Option<bool> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    if FileType::from_raw_mode(rustix::fs::fstat(&fd).ok()?.st_mode) != FileType::RegularFile {
        return None;
    }
    let mut buf = Vec::with_capacity(4096);
    let mut file = std::fs::File::from(fd);
    (&mut file)
        .take(order::HEAD_BYTES as u64)
        .read_to_end(&mut buf)
        .ok()?;
    let whole = buf.len() < order::HEAD_BYTES;
    Some(order::may_be_answer(&buf, whole))
}

/// The worktrees this daemon serves, kept by the daemon as roles change;
/// questions about any folder but their `inbox/new` are refused.
#[derive(Default)]
struct Served {
    roots: Vec<PathBuf>,
    /// Their `inbox/new` folders, canonical (as callers name them): worked
    /// out again when a question names a folder not in it, since a folder
    /// may appear, or be replaced, after the roots were set.
    folders: HashSet<PathBuf>,
    /// A role's `inbox/new` as the daemon names it → canonical.
    canonical: HashMap<PathBuf, PathBuf>,
}

impl Served {
    fn new(roots: Vec<PathBuf>) -> Served {
        let mut s = Served {
            roots,
            ..Served::default()
        };
        s.resolve();
        s
    }

    fn resolve(&mut self) {
        self.canonical = self
            .roots
            .iter()
            .filter_map(|r| {
                let new = Worktree::new(r).inbox_new();
                let c = new.canonicalize().ok()?;
                Some((new, c))
            })
            .collect();
        self.folders = self.canonical.values().cloned().collect();
    }

    fn allows(&mut self, dir: &Path) -> bool {
        if !self.folders.contains(dir) {
            self.resolve();
        }
        self.folders.contains(dir)
    }
}

/// The oldest item waiting in a folder, as the re-wake sweep needs it.
pub struct Oldest {
    /// Under the folder's path as the sweep named it.
    pub path: PathBuf,
    pub placed: SystemTime,
}

/// The running index: its threads stop, and its socket is removed, on drop.
pub struct OrderServer {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    socket: PathBuf,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl OrderServer {
    /// Binds the socket and starts the threads. `None` (said once on stderr)
    /// when it cannot: callers then list their folders, as without a daemon.
    /// The caller holds the pid lock, so a socket file there is stale.
    pub fn start(project: &Project) -> Option<OrderServer> {
        let socket = project.order_socket();
        let (jobs, queue) = mpsc::channel();
        let started = (|| -> io::Result<(UnixListener, Index)> {
            match fsx::remove_file(&socket) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let listener = UnixListener::bind(&socket)?;
            std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
            listener.set_nonblocking(true)?;
            Ok((listener, Index::new(jobs)?))
        })();
        let (listener, index) = match started {
            Ok(v) => v,
            Err(e) => {
                eprintln!(
                    "handoffd: no order hint at {} ({e}); ready-next lists inbox/new itself",
                    socket.display()
                );
                return None;
            }
        };
        let shared = Arc::new(Shared {
            index: Mutex::new(index),
            listed: Condvar::new(),
            served: Mutex::new(Served::default()),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let mut server = OrderServer {
            shared: shared.clone(),
            stop: stop.clone(),
            socket,
            threads: Vec::new(),
        };
        let sh = shared.clone();
        let lister = std::thread::Builder::new()
            .name("order-list".into())
            .spawn(move || lister(&sh, &queue))
            .ok()?;
        server.threads.push(lister);
        let (sh, st) = (shared.clone(), stop.clone());
        let reader = std::thread::Builder::new()
            .name("order-read".into())
            .spawn(move || reader(&sh, &st))
            .ok()?;
        server.threads.push(reader);
        let answers = std::thread::Builder::new()
            .name("order".into())
            .spawn(move || run(listener, &shared, &stop))
            .ok()?;
        server.threads.push(answers);
        Some(server)
    }

    /// Sets the worktrees whose `inbox/new` questions may name: folders no
    /// longer served are dropped, deep ones not indexed yet are listed.
    pub fn serve(&self, roots: Vec<PathBuf>) {
        let served = Served::new(roots);
        {
            let mut ix = self.shared.index();
            let gone: Vec<PathBuf> = ix
                .folders
                .keys()
                .filter(|d| !served.folders.contains(*d))
                .cloned()
                .collect();
            for d in gone {
                ix.forget(&d);
            }
            ix.index_deep(&served.folders);
        }
        *self.shared.served() = served;
    }

    /// Waits (up to a bound) until the folders being listed are in, so the
    /// first question after the daemon's start finds them indexed.
    pub fn settle(&self) {
        let end = Instant::now() + SETTLE;
        let mut ix = self.shared.index();
        while ix.listing() {
            let Some(left) = end.checked_duration_since(Instant::now()) else {
                return;
            };
            ix = match self.shared.listed.wait_timeout(ix, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// The oldest item in `new_dir` (a served role's `inbox/new`, named as
    /// the daemon names it) for which `wakes` says yes; `None` when the
    /// folder is not indexed (the caller lists it), `Some(None)` when none
    /// waits. At most [`SWEEP_READS`] items are offered to `wakes` per call;
    /// those it refuses are remembered and not offered again.
    pub fn oldest(
        &self,
        new_dir: &Path,
        mut wakes: impl FnMut(&Path) -> bool,
    ) -> Option<Option<Oldest>> {
        let dir = self.shared.served().canonical.get(new_dir).cloned()?;
        let mut ix = self.shared.index();
        if !ix.folders.contains_key(&dir) {
            return None;
        }
        let f = ix.current(&dir).ok()??;
        let mut refused = Vec::new();
        let mut found = None;
        for (t, n) in f
            .entries
            .by_age
            .iter()
            .filter(|(_, n)| !f.quiet.contains(n))
        {
            if refused.len() == SWEEP_READS {
                break;
            }
            let path = new_dir.join(&**n);
            if wakes(&path) {
                found = Some(Oldest {
                    path,
                    placed: system_time(*t),
                });
                break;
            }
            refused.push(n.clone());
        }
        f.quiet.extend(refused);
        Some(found)
    }
}

impl Drop for OrderServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.shared.index().jobs.send(None);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let _ = fsx::remove_file(&self.socket);
    }
}

fn run(listener: UnixListener, shared: &Shared, stop: &AtomicBool) {
    let tick = Timespec::try_from(TICK).unwrap_or(Timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    });
    let relist = relist_period();
    let mut next_scan = Instant::now() + DEEP_SCAN;
    let inotify = match shared.index().inotify.try_clone() {
        Ok(fd) => fd,
        Err(_) => return,
    };
    while !stop.load(Ordering::Relaxed) {
        let (calls, events) = {
            let mut fds = [
                PollFd::new(&listener, PollFlags::IN),
                PollFd::new(&inotify, PollFlags::IN),
            ];
            if rustix::event::poll(&mut fds, Some(&tick)).is_err() {
                continue;
            }
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
        };
        {
            let mut ix = shared.index();
            // Applied as they come, so the kernel's queue stays short.
            if events {
                ix.drain();
            }
            ix.relist_older(relist);
            if Instant::now() >= next_scan {
                next_scan = Instant::now() + DEEP_SCAN;
                let served = shared.served().folders.clone();
                ix.index_deep(&served);
            }
        }
        if !calls {
            continue;
        }
        // A bounded round, so events are drained and the stop flag seen
        // however many callers keep arriving.
        for _ in 0..64 {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match listener.accept() {
                Ok((conn, _)) => converse(conn, shared),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // Out of descriptors, say: the socket stays readable, so
                // wait a tick instead of spinning on it.
                Err(_) => {
                    std::thread::sleep(TICK);
                    break;
                }
            }
        }
    }
}

/// One question, one answer, within [`CONVERSATION`] all told: a caller that
/// misbehaves or trickles is dropped.
fn converse(mut conn: UnixStream, shared: &Shared) {
    let end = Instant::now() + CONVERSATION;
    let left = || {
        end.checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    };
    if conn.set_nonblocking(false).is_err() {
        return;
    }
    let mut q = Vec::with_capacity(256);
    let mut chunk = [0u8; 256];
    while !q.ends_with(b"\n") && q.len() < order::MAX_QUESTION {
        let Some(t) = left() else { return };
        if conn.set_read_timeout(Some(t)).is_err() {
            return;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => q.extend_from_slice(&chunk[..n]),
        }
    }
    let asked = std::str::from_utf8(&q).ok().and_then(order::parse_question);
    let reply = match asked {
        None => order::render_refusal("malformed question"),
        Some((_, dir)) if !shared.served().allows(&dir) => {
            order::render_refusal("not an inbox this daemon serves")
        }
        Some((ask, dir)) => answer(shared, ask, &dir, end),
    };
    let Some(t) = left() else { return };
    if conn.set_write_timeout(Some(t)).is_ok() {
        let _ = conn.write_all(reply.as_bytes());
    }
}

/// The answer for a served folder; one being listed (watched just now, or
/// after lost events) is waited for until shortly before `end`, then the
/// caller is told to list it itself.
fn answer(shared: &Shared, ask: Ask, dir: &Path, end: Instant) -> String {
    let end = end - CONVERSATION / 5;
    let mut ix = shared.index();
    loop {
        match ix.answer(ask, dir) {
            Ok(Found::Answer(a)) => return order::render_answer(&a),
            Ok(Found::Listing) => {}
            Err(e) => return order::render_refusal(&e.to_string()),
        }
        let Some(left) = end.checked_duration_since(Instant::now()) else {
            return order::render_refusal("still listing the folder");
        };
        ix = match shared.listed.wait_timeout(ix, left) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(a: &Answer) -> Vec<&str> {
        a.head.iter().map(String::as_str).collect()
    }

    /// An index whose listings are run by [`Ix::answer`] itself.
    struct Ix {
        index: Index,
        jobs: mpsc::Receiver<Option<Job>>,
    }

    impl Ix {
        fn new() -> Ix {
            let (tx, jobs) = mpsc::channel();
            Ix {
                index: Index::new(tx).unwrap(),
                jobs,
            }
        }

        fn list(&mut self) {
            while let Ok(Some(job)) = self.jobs.try_recv() {
                let listed = Entries::list(&job.fd);
                self.index.swap_in(&job, listed);
            }
        }

        fn answer(&mut self, dir: &Path) -> io::Result<Answer> {
            self.ask(Ask::Head, dir)
        }

        fn ask(&mut self, ask: Ask, dir: &Path) -> io::Result<Answer> {
            for _ in 0..3 {
                if let Found::Answer(a) = self.index.answer(ask, dir)? {
                    return Ok(a);
                }
                self.list();
            }
            Err(io::Error::other("never listed"))
        }

        /// Reads every unread head, as the lister does between listings.
        fn read(&mut self) {
            let todo = self.index.unread(usize::MAX);
            let said = heads(&todo);
            self.index.record(&todo, &said);
        }
    }

    #[test]
    fn only_items_that_may_be_answers_are_named_once_their_heads_are_read() {
        let d = tempfile::tempdir().unwrap();
        let new = d.path().join("new");
        std::fs::create_dir(&new).unwrap();
        let n = |s: u32| format!("50_20260615T140531Z_{s:06}_from_a_to_b.handoff");
        let msg = |t: &str| format!("id: x\ntype: {t}\n\nbody\n");
        for s in 1..=40 {
            std::fs::write(new.join(n(s)), msg("note")).unwrap();
        }
        std::fs::write(new.join(n(41)), msg("answer")).unwrap();
        let mut ix = Ix::new();
        // Unread: more than HEAD items may be answers, none named (the
        // caller reads the folder itself).
        let a = ix.ask(Ask::Answers, &new).unwrap();
        assert_eq!((a.items, a.head.len()), (41, 0));
        ix.read();
        let a = ix.ask(Ask::Answers, &new).unwrap();
        assert_eq!((a.items, names(&a)), (1, vec![n(41).as_str()]));
        // Arrived since: unread, so named beside the answer, in order.
        std::fs::write(new.join(n(0)), msg("note")).unwrap();
        let a = ix.ask(Ask::Answers, &new).unwrap();
        assert_eq!(names(&a), [n(0), n(41)]);
        ix.read();
        // A note replaced by an answer under its name: read again.
        let tmp = d.path().join("tmp");
        std::fs::write(&tmp, msg("answer")).unwrap();
        std::fs::rename(&tmp, new.join(n(7))).unwrap();
        let a = ix.ask(Ask::Answers, &new).unwrap();
        assert_eq!(names(&a), [n(7), n(41)]);
        ix.read();
        // A new listing keeps what was read: nothing unread after it.
        let f = ix.index.folders.get_mut(&new).unwrap();
        f.listed = Instant::now() - Duration::from_secs(3600);
        ix.index.relist_older(Duration::from_secs(1));
        ix.list();
        let a = ix.ask(Ask::Answers, &new).unwrap();
        assert_eq!(
            (a.items, names(&a)),
            (2, vec![n(7).as_str(), n(41).as_str()])
        );
        // Taken: gone from the answers.
        std::fs::remove_file(new.join(n(41))).unwrap();
        assert_eq!(names(&ix.ask(Ask::Answers, &new).unwrap()), [n(7)]);
    }

    #[test]
    fn a_read_of_an_item_replaced_meanwhile_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let new = d.path().join("new");
        std::fs::create_dir(&new).unwrap();
        let n = "50_20260615T140531Z_000001_from_a_to_b.handoff";
        std::fs::write(new.join(n), "id: x\ntype: note\n\nb\n").unwrap();
        let mut ix = Ix::new();
        ix.ask(Ask::Answers, &new).unwrap();
        let todo = ix.index.unread(usize::MAX);
        let said = heads(&todo);
        assert_eq!(said, [Some(false)]);
        // Replaced by an answer between the read and its record.
        let tmp = d.path().join("tmp");
        std::fs::write(&tmp, "id: x\ntype: answer\n\nb\n").unwrap();
        std::fs::rename(&tmp, new.join(n)).unwrap();
        ix.index.drain();
        ix.index.record(&todo, &said);
        assert_eq!(names(&ix.ask(Ask::Answers, &new).unwrap()), [n]);
    }

    #[test]
    fn events_keep_the_order_and_a_replaced_folder_is_listed_again() {
        let d = tempfile::tempdir().unwrap();
        let new = d.path().join("new");
        std::fs::create_dir(&new).unwrap();
        let n = |p: u32, s: u32| format!("{p}_20260615T140531Z_{s:06}_from_a_to_b.handoff");
        std::fs::write(new.join(n(50, 2)), "x").unwrap();
        let mut ix = Ix::new();
        let a = ix.answer(&new).unwrap();
        assert_eq!(names(&a), [n(50, 2)]);
        // Placed behind the index's back, by anyone: seen at the next answer.
        std::fs::write(new.join(n(10, 9)), "x").unwrap();
        std::fs::write(new.join(n(50, 1)), "x").unwrap();
        std::fs::write(new.join("bad name.handoff"), "x").unwrap();
        std::fs::write(new.join("ignored.txt"), "x").unwrap();
        std::fs::create_dir(new.join("x.handoff")).unwrap();
        let a = ix.answer(&new).unwrap();
        assert_eq!(names(&a), [n(10, 9), n(50, 1), n(50, 2)]);
        assert_eq!((a.items, a.odd), (3, 1));
        std::fs::rename(new.join(n(10, 9)), d.path().join("out")).unwrap();
        std::fs::remove_file(new.join("bad name.handoff")).unwrap();
        let a = ix.answer(&new).unwrap();
        assert_eq!(names(&a), [n(50, 1), n(50, 2)]);
        assert_eq!(a.odd, 0);
        // The folder replaced: the index lists the new one.
        std::fs::rename(&new, d.path().join("old")).unwrap();
        std::fs::create_dir(&new).unwrap();
        std::fs::write(new.join(n(30, 3)), "x").unwrap();
        let a = ix.answer(&new).unwrap();
        assert_eq!(names(&a), [n(30, 3)]);
    }

    #[test]
    fn a_parent_moved_away_raises_no_event_and_is_still_noticed() {
        let d = tempfile::tempdir().unwrap();
        let inbox = d.path().join("inbox");
        let new = inbox.join("new");
        std::fs::create_dir_all(&new).unwrap();
        let n = |p: u32, s: u32| format!("{p}_20260615T140531Z_{s:06}_from_a_to_b.handoff");
        std::fs::write(new.join(n(50, 2)), "x").unwrap();
        let mut ix = Ix::new();
        assert_eq!(names(&ix.answer(&new).unwrap()), [n(50, 2)]);
        // The inbox moved aside and restored from a copy holding one more:
        // the watched folder itself saw nothing.
        std::fs::rename(&inbox, d.path().join("inbox.old")).unwrap();
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(new.join(n(50, 2)), "x").unwrap();
        std::fs::write(new.join(n(10, 1)), "x").unwrap();
        assert_eq!(names(&ix.answer(&new).unwrap()), [n(10, 1), n(50, 2)]);
    }
}
