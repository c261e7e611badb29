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
//! grow deep later; a listing again (after lost events, or when a
//! folder's times moved past what its events account for: the safety net
//! for a change that raised no event, checked every [`CHECK`] at one
//! `fstat` a folder) lists next to the live index and then replays onto
//! the new listing every event seen since it began, so the swap loses
//! nothing and the answers in between come from the live index.
//!
//! Why an idle daemon's cost does not grow with its backlog (issue 47): a
//! folder is never listed again while nothing changes (it was every 30 s),
//! the reader's round finds nothing unread in O(1), and the index keeps
//! each item in 24-byte compact names (`name`) in trees built full from a
//! listing, about 80 bytes an item (docs/benchmarks.md, "Memory and idle
//! cost flat in the backlog").
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

//!
//! The parts: an item's compact name (`name`), what one folder holds
//! (`entries`), the inotify-kept index of folders (`index`), the thread
//! that reads items' heads (`heads`), which folders a caller may ask about
//! (`served`); here, the socket, its threads and the re-wake sweep's
//! question.

use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use rustix::event::{PollFd, PollFlags, Timespec};

use crate::fsx;
use crate::protocol::layout::Project;
use crate::protocol::order::{self, Ask};

mod entries;
mod heads;
mod index;
mod name;
mod served;

use entries::{system_time, Entries};
use heads::reader;
use index::{Found, Index, Job};
use served::Served;

/// How long one connection may take to ask (a stuck caller must not hold
/// up the others for long; callers give up after their own timeout).
const CONVERSATION: Duration = Duration::from_millis(500);
/// How often the thread looks at its stop flag while nothing happens.
const TICK: Duration = Duration::from_millis(200);

/// How often each indexed folder's times are compared with what its events
/// account for (one `fstat` a folder: `Index::relist_unaccounted`), the
/// safety net for a change that raised no event; only a folder whose times
/// moved unaccounted is listed again, so an idle daemon's cost does not grow
/// with the backlog (issue 47). `HANDOFFD_ORDER_CHECK` (seconds) sets it,
/// for tests.
const CHECK: Duration = Duration::from_secs(10);
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

/// A period in seconds from the environment (0.05 s to a day).
fn period(var: &str) -> Option<Duration> {
    std::env::var(var)
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.05 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
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
        // The listing's scratch and the entries it replaced are free now.
        crate::sys::memory::release_free();
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
            let path = new_dir.join(&*n.text());
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
    // Listings forced this often whatever changed: a benchmark's knob, to
    // load the lister as lost events would (none by default).
    let relist = period("HANDOFFD_ORDER_RELIST");
    let check = period("HANDOFFD_ORDER_CHECK").unwrap_or(CHECK);
    let mut next_scan = Instant::now() + DEEP_SCAN;
    let mut next_check = Instant::now() + check;
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
            if let Some(age) = relist {
                ix.relist_older(age);
            }
            if Instant::now() >= next_check {
                next_check = Instant::now() + check;
                ix.relist_unaccounted();
            }
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
mod tests;
