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
    items: BTreeSet<(SortKey, Box<str>)>,
    /// Entries named `*.handoff` that are not items (raw names).
    odd: HashSet<Box<[u8]>>,
    listed: Instant,
}

impl Default for Folder {
    fn default() -> Folder {
        Folder {
            items: BTreeSet::new(),
            odd: HashSet::new(),
            listed: Instant::now(),
        }
    }
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

/// The folders indexed so far and the inotify instance that keeps them.
struct Index {
    inotify: OwnedFd,
    /// Watch descriptor → folder path.
    watches: HashMap<i32, PathBuf>,
    folders: HashMap<PathBuf, (i32, Folder)>,
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

    /// Applies every queued event.
    fn drain(&mut self) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut events = Vec::new();
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
                    // AGAIN: drained. Anything else: the next question
                    // relists what it needs.
                    Err(_) => break,
                }
            }
        }
        for (wd, mask, name) in events {
            self.apply(wd, mask, name.as_deref());
        }
    }

    fn apply(&mut self, wd: i32, mask: ReadFlags, name: Option<&[u8]>) {
        if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            // Events were lost: every folder lists again when next asked.
            for (wd, _) in self.folders.values() {
                let _ = inotify::remove_watch(&self.inotify, *wd);
            }
            self.folders.clear();
            self.watches.clear();
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
        let (Some(name), Some((_, folder))) = (name, self.folders.get_mut(&dir)) else {
            return;
        };
        if mask.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
            folder.remove(name);
        }
        if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
            // What the entry is now; gone already means a later event says so.
            let path = dir.join(std::ffi::OsStr::from_bytes(name));
            if let Ok(m) = std::fs::symlink_metadata(&path) {
                folder.remove(name);
                folder.add(name, m.is_dir(), m.file_type().is_file());
            }
        }
    }

    /// Drops `dir`'s index and its watch.
    fn forget(&mut self, dir: &Path) {
        if let Some((wd, _)) = self.folders.remove(dir) {
            let _ = inotify::remove_watch(&self.inotify, wd);
            self.watches.remove(&wd);
        }
    }

    /// Watches `dir`, then lists it (in that order, so nothing placed in
    /// between is missed: it is in the listing or in a queued event).
    fn build(&mut self, dir: &Path) -> io::Result<()> {
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
        let mut folder = Folder::default();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let ft = e.file_type()?;
            folder.add(e.file_name().as_bytes(), ft.is_dir(), ft.is_file());
        }
        self.watches.insert(wd, dir.to_path_buf());
        self.folders.insert(dir.to_path_buf(), (wd, folder));
        Ok(())
    }

    fn answer(&mut self, dir: &Path) -> io::Result<Answer> {
        self.drain();
        let fresh = self
            .folders
            .get(dir)
            .is_some_and(|(_, f)| f.listed.elapsed() < RELIST);
        if !fresh {
            self.forget(dir);
            self.build(dir)?;
            self.drain();
        }
        self.folders
            .get(dir)
            .map(|(_, f)| f.answer())
            .ok_or_else(|| io::Error::other("the folder changed while it was listed"))
    }
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
        if calls {
            while let Ok((conn, _)) = listener.accept() {
                converse(conn, &mut index, served);
            }
        }
    }
}

/// One question, one answer; a caller that misbehaves is dropped.
fn converse(mut conn: UnixStream, index: &mut Index, served: &Mutex<Served>) {
    if conn.set_nonblocking(false).is_err()
        || conn.set_read_timeout(Some(CONVERSATION)).is_err()
        || conn.set_write_timeout(Some(CONVERSATION)).is_err()
    {
        return;
    }
    let mut q = Vec::with_capacity(256);
    let mut byte = [0u8; 256];
    while !q.ends_with(b"\n") && q.len() < order::MAX_QUESTION {
        match conn.read(&mut byte) {
            Ok(0) | Err(_) => return,
            Ok(n) => q.extend_from_slice(&byte[..n]),
        }
    }
    let reply = match std::str::from_utf8(&q).ok().and_then(order::parse_question) {
        None => order::render_refusal("malformed question"),
        Some(dir) => {
            let ok = served
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .allows(&dir);
            if !ok {
                order::render_refusal("not an inbox this daemon serves")
            } else {
                match index.answer(&dir) {
                    Ok(a) => order::render_answer(&a),
                    Err(e) => order::render_refusal(&e.to_string()),
                }
            }
        }
    };
    let _ = conn.write_all(reply.as_bytes());
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
}
