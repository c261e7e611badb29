//! Turning the handoffs' life into A2A events, and delivering them.
//!
//! The tracker is the one writer of each task's event log: whenever the
//! files may have changed (a file event in the daemon's journal folder or a
//! queue folder, a request, or every few seconds in case an event was lost)
//! it reads the trail once, derives each open task's state (`task::view`)
//! and appends the events that take the last logged key to it. Because the
//! last key is read back from the log, a restart (or a lost line) only
//! re-derives what the log lacks: nothing is sent twice from the log and
//! nothing is skipped.
//!
//! The pusher delivers each task's logged events, in order, to every webhook
//! configured for it, and records the last sequence the receiver answered
//! 2xx for (`<config>.acked`). A receiver that is down is retried with
//! backoff (0.5 s doubling to 10 s) for as long as the server runs; a
//! restart resends from the recorded sequence, so delivery is at least once
//! and in order (receivers dedupe by the event's content, see docs/a2a.md).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::error::Result;
use crate::protocol::layout::Project;
use crate::protocol::trail::{Scope, Trail};
use crate::sys::watch::DirWatch;

use super::store::{Logged, PushConfig, Record, Store};
use super::task::{self, View};

/// The last logged sequence and key per task (read from the log once), and
/// whom to tell when something was logged.
pub struct Tracker {
    last: Mutex<HashMap<String, (u64, Value)>>,
    /// A tick per observation that logged events (streams and blocking
    /// sends wait on it; only a logged event ticks, so waiters that observe
    /// do not wake each other in a loop).
    ticks: tokio::sync::broadcast::Sender<()>,
    pusher: Mutex<mpsc::Sender<()>>,
}

/// How often the tracker looks even without a file event.
const RESCAN: Duration = Duration::from_secs(5);
/// Webhook backoff.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// One delivery may take this long.
const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

pub fn load_trail(project: &Project) -> Result<Trail> {
    Trail::load(project, &Scope::all())
}

impl Tracker {
    pub fn new(pusher: mpsc::Sender<()>) -> Tracker {
        Tracker {
            last: Mutex::default(),
            ticks: tokio::sync::broadcast::channel(64).0,
            pusher: Mutex::new(pusher),
        }
    }

    /// Ticks after each observation that logged events.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<()> {
        self.ticks.subscribe()
    }

    /// Wakes the pusher (a new push config may have events due).
    pub fn wake_pusher(&self) {
        if let Ok(p) = self.pusher.lock() {
            let _ = p.send(());
        }
    }

    /// The views of `recs` now; logs the events that lead to them. The
    /// trail is read and each record read again under the tracker's lock,
    /// so snapshots are logged in the order they were taken: a request
    /// holding an older one can never log the task going back.
    pub fn observe(
        &self,
        project: &Project,
        store: &Store,
        recs: &[Record],
    ) -> Result<(Vec<View>, bool)> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let trail = load_trail(project)?;
        let mut views = Vec::with_capacity(recs.len());
        let mut any = false;
        for rec in recs {
            let fresh = store.record(&rec.id)?;
            let rec = fresh.as_ref().unwrap_or(rec);
            let v = task::view(&trail, rec);
            any |= Self::log(&mut last, store, rec, &v)?;
            views.push(v);
        }
        drop(last);
        if any {
            // Nobody listening is fine.
            let _ = self.ticks.send(());
            self.wake_pusher();
        }
        Ok((views, any))
    }

    /// One task's view as [`Tracker::observe`] gives it.
    pub fn observe_one(&self, project: &Project, store: &Store, rec: &Record) -> Result<View> {
        let (mut v, _) = self.observe(project, store, std::slice::from_ref(rec))?;
        Ok(v.remove(0))
    }

    /// Appends the events from the last logged key to `v`'s; whether any.
    fn log(
        last: &mut HashMap<String, (u64, Value)>,
        store: &Store,
        rec: &Record,
        v: &View,
    ) -> Result<bool> {
        let entry = match last.get(&rec.id) {
            Some(e) => Some(e.clone()),
            None => store
                .events_after(&rec.id, 0)?
                .pop()
                .map(|l| (l.seq, l.key)),
        };
        let now = task::key(v);
        if entry.as_ref().is_some_and(|(_, k)| *k == now) {
            if let Some(e) = entry {
                last.insert(rec.id.clone(), e);
            }
            return Ok(false);
        }
        let (mut seq, before) = match entry {
            Some((s, k)) => (s, Some(k)),
            None => (0, None),
        };
        for event in task::events(rec, before.as_ref(), v) {
            seq += 1;
            store.append(
                &rec.id,
                &Logged {
                    seq,
                    key: now.clone(),
                    event,
                },
            )?;
        }
        last.insert(rec.id.clone(), (seq, now));
        Ok(true)
    }

    /// Whether the last logged state of `task` is terminal (nothing more
    /// will happen to it).
    fn settled(&self, task: &str) -> bool {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.get(task).is_some_and(|(_, k)| {
            matches!(
                k["state"].as_str(),
                Some("TASK_STATE_COMPLETED" | "TASK_STATE_FAILED" | "TASK_STATE_CANCELED")
            )
        })
    }

    /// Observes every open task once; true when anything was logged.
    pub fn observe_all(&self, project: &Project, store: &Store) -> Result<bool> {
        let open: Vec<Record> = store
            .records()?
            .into_iter()
            .filter(|r| !self.settled(&r.id))
            .collect();
        if open.is_empty() {
            return Ok(false);
        }
        Ok(self.observe(project, store, &open)?.1)
    }
}

/// The folders whose changes can move a task: the daemon's journal folder,
/// the task records and every worktree's queue folders.
fn watched(project: &Project) -> Vec<PathBuf> {
    let mut dirs = vec![project.daemon_dir(), project.swarmforge().join("a2a/tasks")];
    dirs.extend(crate::protocol::trail::watch::queue_dirs(project));
    dirs
}

/// Starts the watcher thread: observes on each change (the tracker then
/// ticks the streams and wakes the pusher).
pub fn watch(app: std::sync::Arc<super::App>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("a2a-track".into())
        .spawn(move || {
            let mut w = DirWatch::new(watched(&app.project));
            loop {
                if let Err(e) = app.tracker.observe_all(&app.project, &app.store) {
                    eprintln!("swarm a2a: {e}");
                }
                let _ = w.wait_for(RESCAN);
            }
        })
        .map(|_| ())
}

/// Where a URL may be shown: without its query (which may hold a secret).
fn shown(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or(url)
}

/// Why a push notification did not reach the client's URL (retried with
/// a backoff; the log line names the task and the URL).
#[derive(Debug, thiserror::Error)]
enum NotPushed {
    #[error("answered {0}")]
    Status(u16),
    #[error("{}", crate::text::escape(.0))]
    Unreachable(String),
}

fn deliver(
    agent: &ureq::Agent,
    c: &PushConfig,
    event: &Value,
) -> std::result::Result<(), NotPushed> {
    let mut req = agent
        .post(&c.url)
        .header("Content-Type", "application/json");
    if let Some(t) = &c.token {
        req = req.header("X-A2A-Notification-Token", t);
    }
    if let (Some(s), Some(cr)) = (&c.scheme, &c.credentials) {
        req = req.header("Authorization", format!("{s} {cr}"));
    }
    match req.send(event.to_string()) {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => Err(NotPushed::Status(r.status().as_u16())),
        Err(e) => Err(NotPushed::Unreachable(e.to_string())),
    }
}

/// Starts the pusher thread; it wakes on `wake` or when a retry is due.
pub fn push(store: Store, wake: mpsc::Receiver<()>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("a2a-push".into())
        .spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(PUSH_TIMEOUT))
                .http_status_as_error(false)
                .max_redirects(0)
                .user_agent("swarm-handoff a2a")
                .build()
                .into();
            // Per (task, config): failures in a row and when to try again.
            let mut backoff: HashMap<(String, String), (u32, Instant)> = HashMap::new();
            loop {
                let mut next = Instant::now() + RESCAN;
                for t in store.pushed_tasks() {
                    let Ok(configs) = store.push_configs(&t) else {
                        continue;
                    };
                    for c in configs {
                        let k = (t.clone(), c.id.clone());
                        if let Some((_, at)) = backoff.get(&k) {
                            if *at > Instant::now() {
                                next = next.min(*at);
                                continue;
                            }
                        }
                        let acked = store.acked(&t, &c.id);
                        let Ok(events) = store.events_after(&t, acked) else {
                            continue;
                        };
                        for e in events {
                            match deliver(&agent, &c, &e.event) {
                                Ok(()) => {
                                    backoff.remove(&k);
                                    if let Err(err) = store.set_acked(&t, &c.id, e.seq) {
                                        eprintln!("swarm a2a: {err}");
                                        break;
                                    }
                                }
                                Err(why) => {
                                    let n = backoff.get(&k).map_or(0, |b| b.0) + 1;
                                    let pause = (FIRST_BACKOFF * 2u32.saturating_pow(n - 1).min(64))
                                        .min(MAX_BACKOFF);
                                    eprintln!(
                                        "swarm a2a: push {} of task {t} to {}: {why}; retrying in {} ms",
                                        e.seq,
                                        shown(&c.url),
                                        pause.as_millis()
                                    );
                                    let at = Instant::now() + pause;
                                    backoff.insert(k.clone(), (n, at));
                                    next = next.min(at);
                                    break;
                                }
                            }
                        }
                    }
                }
                let wait = next.saturating_duration_since(Instant::now());
                match wake.recv_timeout(wait) {
                    Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        })
        .map(|_| ())
}
