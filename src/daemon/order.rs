//! The order index behind protocol::order: for each `inbox/new` folder a
//! caller asked about, its items in hand-out order, kept from one listing
//! and then from the folder's inotify events, and answered on
//! `.swarmforge/daemon/order.sock`.
//!
//! Why an answer is never behind the question: the kernel queues a folder's
//! event before the rename (or create, or unlink) returns, and every question
//! first drains the queue; so whatever was placed before the caller asked
//! is in the answer, whoever placed it. Lost events (a queue overflow) or a
//! folder removed or replaced make the index list the folder again. Anything
//! else that goes wrong here only costs speed: a caller without an answer
//! lists the folder itself.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{self, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use crate::fsx;
use crate::protocol::grammar::{self, QueueEntry, SortKey};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::order::{self, Answer};

/// How long one connection may take to ask (a stuck caller must not hold
/// up the others for long; callers give up after their own timeout).
const CONVERSATION: Duration = Duration::from_millis(500);
/// How often the thread looks at its stop flag while nothing happens.
const TICK: Duration = Duration::from_millis(200);

/// How long a folder's index is trusted before it is listed again: the
/// safety net for writers whose changes raise no event here (another host
/// on a network filesystem), as the daemon's own periodic rescan is.
const RELIST: Duration = Duration::from_secs(30);

/// One indexed folder.
struct Folder {
    /// The folder itself, held open: entries are looked at through it, and
    /// its identity tells whether the path still names it.
    fd: OwnedFd,
    identity: (u64, u64),
    wd: i32,
    items: BTreeSet<(SortKey, Box<str>)>,
    /// Entries named `*.handoff` that are not items (raw names).
    odd: HashSet<Box<[u8]>>,
    listed: Instant,
}

impl Folder {
    fn add(&mut self, name: &[u8], is_dir: bool, is_file: bool) {
        let text = String::from_utf8_lossy(name);
        match grammar::queue_entry(&text, is_dir, is_file) {
            QueueEntry::Item => {
                self.items.insert((grammar::sort_key(&text), text.into()));
            }
            QueueEntry::Odd => {
                self.odd.insert(name.into());
            }
            QueueEntry::Batch | QueueEntry::Other => {}
        }
    }

    fn remove(&mut self, name: &[u8]) {
        if let Ok(text) = std::str::from_utf8(name) {
            self.items.remove(&(grammar::sort_key(text), text.into()));
        }
        self.odd.remove(name);
    }

    fn answer(&self) -> Answer {
        Answer {
            items: self.items.len(),
            odd: self.odd.len(),
            head: self
                .items
                .iter()
                .take(order::HEAD)
                .map(|(_, n)| n.to_string())
                .collect(),
        }
    }
}

fn identity(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
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

/// The folders indexed so far and the inotify instance that keeps them.
struct Index {
    inotify: OwnedFd,
    /// Watch descriptor → folder path.
    watches: HashMap<i32, PathBuf>,
    folders: HashMap<PathBuf, Folder>,
}

impl Index {
    fn new() -> io::Result<Index> {
        let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        Ok(Index {
            inotify,
            watches: HashMap::new(),
            folders: HashMap::new(),
        })
    }

    /// Forgets every folder (each lists again when next asked).
    fn clear(&mut self) {
        for f in self.folders.values() {
            let _ = inotify::remove_watch(&self.inotify, f.wd);
        }
        self.folders.clear();
        self.watches.clear();
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
        for (wd, mask, name) in events {
            self.apply(wd, mask, name.as_deref());
        }
        // Events we could not read may have been anything.
        if failed {
            self.clear();
        }
    }

    fn apply(&mut self, wd: i32, mask: ReadFlags, name: Option<&[u8]>) {
        if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            self.clear();
            return;
        }
        let Some(dir) = self.watches.get(&wd).cloned() else {
            return;
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
            return;
        }
        let (Some(name), Some(folder)) = (name, self.folders.get_mut(&dir)) else {
            return;
        };
        if mask.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
            folder.remove(name);
        }
        if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
            // What the entry is now, looked at through the folder itself
            // (its path may name another folder by now); gone already
            // means a later event says so.
            let at = rustix::fs::statat(&folder.fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW);
            if let Ok(st) = at {
                let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
                folder.remove(name);
                folder.add(
                    name,
                    kind == rustix::fs::FileType::Directory,
                    kind == rustix::fs::FileType::RegularFile,
                );
            }
        }
    }

    /// Drops `dir`'s index and its watch.
    fn forget(&mut self, dir: &Path) {
        if let Some(f) = self.folders.remove(dir) {
            let _ = inotify::remove_watch(&self.inotify, f.wd);
            self.watches.remove(&f.wd);
        }
    }

    /// Opens and watches `dir`, then lists it (in that order, so nothing
    /// placed in between is missed: it is in the listing or in a queued
    /// event); refuses a folder that changed meanwhile, or one on a
    /// filesystem whose events may miss changes.
    fn build(&mut self, dir: &Path) -> io::Result<()> {
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
        let mut folder = Folder {
            fd,
            identity: id,
            wd,
            items: BTreeSet::new(),
            odd: HashSet::new(),
            listed: Instant::now(),
        };
        let listed = (|| -> io::Result<()> {
            for e in std::fs::read_dir(dir)? {
                let e = e?;
                let ft = e.file_type()?;
                folder.add(e.file_name().as_bytes(), ft.is_dir(), ft.is_file());
            }
            // The path still names the folder we opened, watched and
            // listed (a watch added on another one would say nothing).
            match self.identity_at(dir) {
                Some(now) if now == id => Ok(()),
                _ => Err(io::Error::other(
                    "the folder was replaced while it was listed",
                )),
            }
        })();
        if let Err(e) = listed {
            let _ = inotify::remove_watch(&self.inotify, wd);
            return Err(e);
        }
        self.watches.insert(wd, dir.to_path_buf());
        self.folders.insert(dir.to_path_buf(), folder);
        Ok(())
    }

    fn identity_at(&self, dir: &Path) -> Option<(u64, u64)> {
        rustix::fs::lstat(dir).ok().map(|st| identity(&st))
    }

    fn answer(&mut self, dir: &Path) -> io::Result<Answer> {
        self.drain();
        // One stat: the path may name another folder now (a parent
        // renamed, a copy restored) without any event on the one we watch.
        let now = self.identity_at(dir);
        let fresh = self
            .folders
            .get(dir)
            .is_some_and(|f| Some(f.identity) == now && f.listed.elapsed() < RELIST);
        if !fresh {
            self.forget(dir);
            self.build(dir)?;
            self.drain();
        }
        self.folders
            .get(dir)
            .map(Folder::answer)
            .ok_or_else(|| io::Error::other("the folder changed while it was listed"))
    }
}

/// The worktrees this daemon serves, kept by the daemon as roles change;
/// questions about any folder but their `inbox/new` are refused.
#[derive(Default)]
struct Served {
    /// Bumped by every change, so the index drops what is no longer served.
    generation: u64,
    roots: Vec<PathBuf>,
    /// Their `inbox/new` folders, canonical (as callers name them): worked
    /// out again when a question names a folder not in it, since a folder
    /// may appear, or be replaced, after the roots were set.
    folders: HashSet<PathBuf>,
}

impl Served {
    fn allows(&mut self, dir: &Path) -> bool {
        if self.folders.contains(dir) {
            return true;
        }
        self.folders = self
            .roots
            .iter()
            .filter_map(|r| Worktree::new(r).inbox_new().canonicalize().ok())
            .collect();
        self.folders.contains(dir)
    }
}

/// The running index: its thread stops, and its socket is removed, on drop.
pub struct OrderServer {
    served: Arc<Mutex<Served>>,
    stop: Arc<AtomicBool>,
    socket: PathBuf,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OrderServer {
    /// Binds the socket and starts the thread. `None` (said once on stderr)
    /// when it cannot: callers then list their folders, as without a daemon.
    /// The caller holds the pid lock, so a socket file there is stale.
    pub fn start(project: &Project) -> Option<OrderServer> {
        let socket = project.order_socket();
        let started = (|| -> io::Result<(UnixListener, Index)> {
            match fsx::remove_file(&socket) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let listener = UnixListener::bind(&socket)?;
            std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
            listener.set_nonblocking(true)?;
            Ok((listener, Index::new()?))
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
        let served = Arc::new(Mutex::new(Served::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (served, stop) = (served.clone(), stop.clone());
            std::thread::Builder::new()
                .name("order".into())
                .spawn(move || run(listener, index, &served, &stop))
                .ok()?
        };
        Some(OrderServer {
            served,
            stop,
            socket,
            thread: Some(thread),
        })
    }

    /// Sets the worktrees whose `inbox/new` questions may name.
    pub fn serve(&self, roots: Vec<PathBuf>) {
        let mut s = self.served.lock().unwrap_or_else(|e| e.into_inner());
        *s = Served {
            generation: s.generation + 1,
            roots,
            folders: HashSet::new(),
        };
    }
}

impl Drop for OrderServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = fsx::remove_file(&self.socket);
    }
}

fn run(listener: UnixListener, mut index: Index, served: &Mutex<Served>, stop: &AtomicBool) {
    let tick = Timespec::try_from(TICK).unwrap_or(Timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    });
    let mut generation = 0;
    while !stop.load(Ordering::Relaxed) {
        let (calls, events) = {
            let mut fds = [
                PollFd::new(&listener, PollFlags::IN),
                PollFd::new(&index.inotify, PollFlags::IN),
            ];
            if rustix::event::poll(&mut fds, Some(&tick)).is_err() {
                continue;
            }
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
        };
        // Applied as they come, so the kernel's queue stays short.
        if events {
            index.drain();
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
                Ok((conn, _)) => {
                    let mut s = served.lock().unwrap_or_else(|e| e.into_inner());
                    if s.generation != generation {
                        generation = s.generation;
                        index.clear();
                    }
                    converse(conn, &mut index, &mut s);
                }
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
fn converse(mut conn: UnixStream, index: &mut Index, served: &mut Served) {
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
    let reply = match std::str::from_utf8(&q).ok().and_then(order::parse_question) {
        None => order::render_refusal("malformed question"),
        Some(dir) if !served.allows(&dir) => {
            order::render_refusal("not an inbox this daemon serves")
        }
        Some(dir) => match index.answer(&dir) {
            Ok(a) => order::render_answer(&a),
            Err(e) => order::render_refusal(&e.to_string()),
        },
    };
    let Some(t) = left() else { return };
    if conn.set_write_timeout(Some(t)).is_ok() {
        let _ = conn.write_all(reply.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(a: &Answer) -> Vec<&str> {
        a.head.iter().map(String::as_str).collect()
    }

    #[test]
    fn events_keep_the_order_and_a_replaced_folder_is_listed_again() {
        let d = tempfile::tempdir().unwrap();
        let new = d.path().join("new");
        std::fs::create_dir(&new).unwrap();
        let n = |p: u32, s: u32| format!("{p}_20260615T140531Z_{s:06}_from_a_to_b.handoff");
        std::fs::write(new.join(n(50, 2)), "x").unwrap();
        let mut ix = Index::new().unwrap();
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
        let mut ix = Index::new().unwrap();
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
