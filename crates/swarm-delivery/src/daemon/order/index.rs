//! The folders indexed so far and the one inotify instance that keeps
//! them. The invariant (the module doc of `order`): every question first
//! drains the event queue, so an answer is never behind the question; lost
//! events, a folder removed or replaced (its identity changed), or a
//! folder whose times moved past what its events account for, make the
//! folder listed again, on the lister's thread.
//!
//! What "account for" means ([`Folder::accounted`]): after each drain that
//! applied events to a folder, and after a listing is swapped in, the
//! folder's own modification and change times are read (one `fstat`); a
//! check ([`Index::relist_unaccounted`], every few seconds, one `fstat` a
//! folder whatever it holds) that finds them moved with no event drained
//! lists the folder again. So the index is never listed again while nothing
//! changes, and a change that raised no event is caught at the next check
//! unless an event of the same folder came first (its times then account
//! for both): that one waits for the next listing. An item's time set in
//! place (no rename) raises none of the events watched: the sweep's age
//! order keeps the time it was placed with until the next listing.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use super::entries::Entries;
use super::heads::Unread;
use super::name::Name;
use crate::protocol::order::{self, Answer, Ask};

/// One indexed folder.
pub(super) struct Folder {
    /// The folder itself, held open: entries are looked at through it, and
    /// its identity tells whether the path still names it.
    pub(super) fd: Arc<OwnedFd>,
    pub(super) identity: (u64, u64),
    pub(super) wd: i32,
    pub(super) entries: Entries,
    /// Items the sweep found do not wake their role (`cc`, `wake: no`).
    pub(super) quiet: BTreeSet<Name>,
    /// The folder's times as the events applied so far account for them
    /// (see the module doc); `None` until the first listing is in.
    pub(super) accounted: Option<Stamp>,
    /// False until the first listing is in.
    pub(super) ready: bool,
    pub(super) listed: Instant,
    /// While a listing runs: the events seen since it began (replayed onto
    /// it), and the listing's number (a folder forgotten and watched again
    /// starts another, and the old one's result is dropped).
    pub(super) pending: Option<Vec<(ReadFlags, Box<[u8]>)>>,
    pub(super) job: u64,
}

impl Folder {
    pub(super) fn answer(&self, ask: Ask) -> Answer {
        let e = &self.entries;
        match ask {
            Ask::Head => Answer {
                items: e.items.len(),
                odd: e.odd.len(),
                head: e
                    .items
                    .iter()
                    .take(order::HEAD)
                    .map(|(n, _)| n.to_string())
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

/// A folder's modification and change times (s, ns each).
pub(super) type Stamp = [i64; 4];

/// The times of the folder held open as `fd`.
pub(super) fn stamp(fd: &OwnedFd) -> Option<Stamp> {
    let st = rustix::fs::fstat(fd).ok()?;
    Some([
        st.st_mtime,
        st.st_mtime_nsec as i64,
        st.st_ctime,
        st.st_ctime_nsec as i64,
    ])
}

pub(super) fn identity(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

pub(super) fn identity_at(dir: &Path) -> Option<(u64, u64)> {
    rustix::fs::lstat(dir).ok().map(|st| identity(&st))
}

/// Filesystems whose file events may miss changes made elsewhere (another
/// host, a FUSE daemon): never indexed, their callers list.
pub(super) const REMOTE_MAGIC: [u64; 11] = [
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
pub(super) struct Job {
    pub(super) dir: PathBuf,
    pub(super) fd: Arc<OwnedFd>,
    pub(super) job: u64,
}

/// The folders indexed so far and the inotify instance that keeps them.
pub(super) struct Index {
    pub(super) inotify: OwnedFd,
    /// Watch descriptor → folder path.
    pub(super) watches: HashMap<i32, PathBuf>,
    pub(super) folders: HashMap<PathBuf, Folder>,
    pub(super) jobs: mpsc::Sender<Option<Job>>,
    pub(super) next_job: u64,
}

/// What a question finds.
pub(super) enum Found {
    Answer(Answer),
    /// Being listed: ask again once it is in.
    Listing,
}

impl Index {
    pub(super) fn new(jobs: mpsc::Sender<Option<Job>>) -> io::Result<Index> {
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
    pub(super) fn clear(&mut self) {
        let dirs: Vec<PathBuf> = self.folders.keys().cloned().collect();
        for dir in &dirs {
            self.forget(dir);
        }
        for dir in dirs {
            let _ = self.watch(&dir);
        }
    }

    /// Applies every queued event.
    pub(super) fn drain(&mut self) {
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
        let mut touched = HashSet::new();
        for (wd, mask, name) in events {
            lost |= !self.apply(wd, mask, name.as_deref());
            touched.insert(wd);
        }
        for wd in touched {
            let f = self.watches.get(&wd).and_then(|d| self.folders.get_mut(d));
            if let Some(f) = f.filter(|f| f.ready) {
                f.accounted = stamp(&f.fd);
            }
        }
        // Events we could not read may have been anything.
        if lost {
            self.clear();
        }
    }

    /// Applies one event; false when events were lost.
    pub(super) fn apply(&mut self, wd: i32, mask: ReadFlags, name: Option<&[u8]>) -> bool {
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
            if let Some(key) = folder.entries.key(name) {
                folder.quiet.remove(&key);
            }
        }
        folder.entries.apply(&folder.fd, mask, name);
        if let Some(log) = &mut folder.pending {
            log.push((mask, name.into()));
        }
        true
    }

    /// Drops `dir`'s index and its watch.
    pub(super) fn forget(&mut self, dir: &Path) {
        if let Some(f) = self.folders.remove(dir) {
            let _ = inotify::remove_watch(&self.inotify, f.wd);
            self.watches.remove(&f.wd);
        }
    }

    /// Opens and watches `dir`, then has it listed in the background (in
    /// that order, so nothing placed in between is missed: it is in the
    /// listing or in an event replayed onto it); refuses a folder on a
    /// filesystem whose events may miss changes.
    pub(super) fn watch(&mut self, dir: &Path) -> io::Result<()> {
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
                quiet: BTreeSet::new(),
                accounted: None,
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
    pub(super) fn relist(&mut self, dir: &Path) {
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
    pub(super) fn swap_in(&mut self, job: &Job, listed: io::Result<Entries>) -> Option<Entries> {
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
        f.quiet.retain(|n| fresh.items.contains_key(n));
        f.ready = true;
        f.listed = Instant::now();
        f.accounted = stamp(&f.fd);
        Some(std::mem::replace(&mut f.entries, fresh))
    }

    /// Lists again, in the background, the folders whose times moved past
    /// what their events account for (see the module doc). One `fstat` a
    /// folder, whatever it holds.
    pub(super) fn relist_unaccounted(&mut self) {
        self.drain();
        let due: Vec<PathBuf> = self
            .folders
            .iter()
            .filter(|(_, f)| f.ready && f.pending.is_none() && stamp(&f.fd) != f.accounted)
            .map(|(d, _)| d.clone())
            .collect();
        for dir in due {
            self.relist(&dir);
        }
    }

    /// Lists again, in the background, folders listed longer ago than `age`
    /// (a benchmark's knob: `HANDOFFD_ORDER_RELIST`).
    pub(super) fn relist_older(&mut self, age: Duration) {
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
    pub(super) fn index_deep(&mut self, served: &HashSet<PathBuf>) {
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
    pub(super) fn current(&mut self, dir: &Path) -> io::Result<Option<&mut Folder>> {
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

    pub(super) fn answer(&mut self, ask: Ask, dir: &Path) -> io::Result<Found> {
        Ok(match self.current(dir)? {
            Some(f) => Found::Answer(f.answer(ask)),
            None => Found::Listing,
        })
    }

    /// Records what reading the heads of `todo` said.
    pub(super) fn record(&mut self, todo: &[Unread], said: &[Option<bool>]) {
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
    pub(super) fn unread(&self, n: usize) -> Vec<Unread> {
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

    pub(super) fn listing(&self) -> bool {
        self.folders.values().any(|f| !f.ready)
    }
}
