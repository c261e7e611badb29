//! The daemon's journal: `handoffd.log` (one text line per event, SwarmForge's
//! words, control characters escaped) and `events.jsonl` (the same events as
//! JSON objects), both append-only through single O_APPEND writes, and
//! `forum.log`. Each is rotated by size (swarm.yaml `logs:`, see
//! protocol::logfile); appends and rotations take one lock, so no line is
//! ever appended to a file being renamed away.
//!
//! Durability: a line is appended without an fsync (one per line would
//! double a hop's cost). What vouches for the journal is made as durable
//! as what it vouches for instead: `events.jsonl` is fsynced before the
//! progress mark that covers its lines is published
//! ([`Journal::sync_events`], daemon/progress.rs: one fsync per mark, not
//! per line), and a full file is fsynced before it is rotated, because the
//! offsets of every later line count its length (sys/logfile.rs). After a
//! power cut the live file may end in half a line; the daemon ends it
//! ([`Journal::end_torn_line`]) before it appends, so the torn fragment
//! never swallows the next line.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::Project;
use crate::sys::logfile::{self, Policy};
use crate::text::escape;

/// What happened. The first six are SwarmForge's log words (docs/protocol.md
/// §7.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Started,
    Delivered,
    Failed,
    NotifyFailed,
    Renotified,
    Stopped,
    /// A transient problem (disk full, permission denied): the file stays in
    /// the outbox and is retried; logged once per file and cause.
    Deferred,
    /// A role kept an item in process longer than `complete_within`, a
    /// discussion turn was late, or a digest request stayed open too long.
    ExpectationViolated,
    /// A session or discussion was closed by the daemon (`idle_timeout`).
    Closed,
    /// A discussion turn was skipped after `skip_after`.
    Skipped,
    /// The watchdog restarted a role's agent.
    Restarted,
    /// A wake-up typed into the role's pane (or its wake command succeeded).
    Woken,
    /// `wake: idle` found the pane busy and is waiting for it to go quiet.
    DeferredBusy,
    /// A role's agent session is gone and nothing restarts it.
    AgentDead,
    /// An outbox file needing approval moved to `pending_approval/` (`approval: required`).
    Held,
    /// `swarm approve`: a held file went back to its outbox to be delivered.
    Approved,
    /// `swarm deny`: a held file was refused to `failed/` with the reason.
    Denied,
    /// A role's pane shows a dialog, menu or permission request waiting for
    /// a person (daemon/pane.rs); no wake-up is typed into it.
    NeedsInput,
    /// A role's pane shows a rate limit or an authentication error.
    Blocked,
    /// A wake-up was not typed: the role's pane waits for a person.
    WakeHeld,
    /// A headless agent's CLI refused to resume the role's session; the
    /// turn started a new conversation (launch/turn/).
    ResumeRefused,
    /// A role's budget (or the swarm's) is used up: the role is parked
    /// (docs/cost.md, "Budgets").
    BudgetReached,
    /// `swarm budget raise` added to a budget.
    BudgetRaised,
    /// A parked role may go on (a raise, or a new period).
    BudgetReleased,
    /// Spans were dropped: the trace collector is down or slow (docs/cost.md).
    TracesDropped,
    /// A person's pause, resume, approve, deny or answer was sent to the
    /// whole swarm (docs/bridge.md, "One control").
    ControlSent,
    /// A control record from another host was applied here.
    ControlApplied,
    /// A control record was refused here (its host is not in `hosts:`, it is
    /// malformed, or what it asks is refused, e.g. changed since review).
    ControlRefused,
    /// A control record waits here for what it acts on (an answer for a
    /// clarify whose copy has not arrived yet).
    ControlWaiting,
    /// `swarm role add`: a role joined the running lineup.
    SeatAdded,
    /// `swarm role remove`: a role left it, its waiting mail returned.
    SeatRemoved,
    /// A delivered `seat_request` was carried out (or refused by `swarm role`).
    SeatRequested,
    /// An agent's turn ended but what it did and used could not be read
    /// (its transcript was unreadable): a `lost` usage record says so.
    ActivityLost,
    /// A copy was taken: it is in its recipient's `inbox/in_process/`
    /// with its `dequeued_at` stamp (journaled by the daemon from the file,
    /// daemon/progress.rs; the agent that took it cannot write here).
    Dequeued,
    /// A copy was finished: it is in `inbox/completed/`, with its stamps.
    Completed,
    /// A person allowed an ACP role's tool always (launch/acp/grants.rs).
    PermissionAlways,
    /// An ACP role's tool call was allowed by a person's earlier "always".
    PermissionAllowed,
    /// A person took an "always" back (`swarm permissions revoke`).
    PermissionRevoked,
    /// An ACP role's tool call was rejected as swarm.yaml pre-decides
    /// (`permissions:`, launch/acp/predecided.rs).
    PermissionDenied,
    /// An allow (swarm.yaml's or a person's "always") was put to a person
    /// instead: the role is over its budget, or its last tool calls failed.
    PermissionHeld,
}

impl Kind {
    pub fn word(self) -> &'static str {
        match self {
            Kind::Started => "started",
            Kind::Delivered => "delivered",
            Kind::Failed => "failed",
            Kind::NotifyFailed => "notify_failed",
            Kind::Renotified => "renotified",
            Kind::Stopped => "stopped",
            Kind::Deferred => "deferred",
            Kind::ExpectationViolated => "expectation_violated",
            Kind::Closed => "closed",
            Kind::Skipped => "skipped",
            Kind::Restarted => "restarted",
            Kind::Woken => "woken",
            Kind::DeferredBusy => "deferred_busy",
            Kind::AgentDead => "agent_dead",
            Kind::Held => "held",
            Kind::Approved => "approved",
            Kind::Denied => "denied",
            Kind::NeedsInput => "needs_input",
            Kind::Blocked => "blocked",
            Kind::WakeHeld => "wake_held",
            Kind::ResumeRefused => "resume_refused",
            Kind::BudgetReached => "budget_reached",
            Kind::BudgetRaised => "budget_raised",
            Kind::BudgetReleased => "budget_released",
            Kind::TracesDropped => "traces_dropped",
            Kind::ControlSent => "control_sent",
            Kind::ControlApplied => "control_applied",
            Kind::ControlRefused => "control_refused",
            Kind::ControlWaiting => "control_waiting",
            Kind::SeatAdded => "seat_added",
            Kind::SeatRemoved => "seat_removed",
            Kind::SeatRequested => "seat_requested",
            Kind::ActivityLost => "activity_lost",
            Kind::Dequeued => "dequeued",
            Kind::Completed => "completed",
            Kind::PermissionAlways => "permission_always",
            Kind::PermissionAllowed => "permission_allowed",
            Kind::PermissionRevoked => "permission_revoked",
            Kind::PermissionDenied => "permission_denied",
            Kind::PermissionHeld => "permission_held",
        }
    }
}

/// One event; every key is always present in the JSON form (null when n/a).
#[derive(Clone, Debug, Serialize)]
pub struct Event {
    pub kind: Kind,
    pub time: String,
    pub id: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub recipient: Option<String>,
    pub path: Option<PathBuf>,
    pub reason: Option<String>,
    /// A copy's time stamps (`dequeued` and `completed` only).
    pub stamps: Option<Stamps>,
    /// The content digest (protocol/digest.rs) of the original moved
    /// (`delivered`: also of every copy made of it; `failed`, `held`,
    /// `denied`). Added last, so no existing field moves; a line without
    /// it predates digests (views/vouched.rs).
    pub sha256: Option<String>,
}

/// The time stamps of a copy as its file says them, each a time or null.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Stamps {
    pub created_at: Option<String>,
    pub enqueued_at: Option<String>,
    pub dequeued_at: Option<String>,
    pub completed_at: Option<String>,
}

impl Stamps {
    /// The four stamps of a copy's file; one that is not a time is null.
    pub fn of(m: &crate::protocol::header::Message) -> Stamps {
        use crate::protocol::header::{names, Header};
        let at = |n: Header| m.get(n).and_then(clock::parse).map(clock::iso);
        Stamps {
            created_at: at(names::CREATED_AT),
            enqueued_at: at(names::ENQUEUED_AT),
            dequeued_at: at(names::DEQUEUED_AT),
            completed_at: at(names::COMPLETED_AT),
        }
    }
}

impl Event {
    pub fn new(kind: Kind) -> Event {
        Event {
            kind,
            time: clock::iso_now(),
            id: None,
            from: None,
            to: None,
            recipient: None,
            path: None,
            reason: None,
            stamps: None,
            sha256: None,
        }
    }

    /// The path, made valid UTF-8 (lossily) so the JSON form can always be
    /// written: serde refuses a non-UTF-8 `PathBuf`, and the whole event was
    /// dropped from both files.
    pub fn path(mut self, p: &Path) -> Self {
        self.path = Some(PathBuf::from(p.to_string_lossy().into_owned()));
        self
    }

    pub fn reason(mut self, r: impl Into<String>) -> Self {
        self.reason = Some(r.into());
        self
    }

    pub fn recipient(mut self, r: &str) -> Self {
        self.recipient = Some(r.to_string());
        self
    }

    /// Copies id, from and to from a parsed message.
    pub fn message(mut self, m: &crate::protocol::header::Message) -> Self {
        self.id = m.id().map(str::to_string);
        self.from = m.sender().map(str::to_string);
        self.to = m.to().map(str::to_string);
        self
    }

    /// [`Event::message`] and the message's content digest: for a line
    /// that journals a move of the file (what `swarm audit --check` binds
    /// the file to). Computed here, in the step that journals the move:
    /// no write and no fsync of its own.
    pub fn moved(self, m: &crate::protocol::header::Message) -> Self {
        let mut ev = self.message(m);
        ev.sha256 = Some(crate::protocol::digest::of(m));
        ev
    }

    /// `<time> <word> [<path>] [<reason>]`, escaped so one event is one line.
    pub fn log_line(&self) -> String {
        let mut s = format!("{} {}", self.time, self.kind.word());
        if let Some(p) = &self.path {
            s.push(' ');
            s.push_str(&escape(&p.to_string_lossy()));
        }
        if let Some(r) = &self.reason {
            s.push(' ');
            s.push_str(&escape(r));
        }
        s.push('\n');
        s
    }
}

/// Where the daemon records events. Clones share the lock and the policy
/// (the watchdog thread writes through a clone).
/// Told of every event the journal records (the `notify.command` thread,
/// `daemon::alert`); it must never block.
#[derive(Clone)]
pub struct Listener(pub Arc<dyn Fn(&Event) + Send + Sync>);

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Listener")
    }
}

#[derive(Clone, Debug)]
pub struct Journal {
    dir: PathBuf,
    log: PathBuf,
    events: PathBuf,
    forum: PathBuf,
    policy: Arc<Mutex<Policy>>,
    /// `notify.command`'s runner, when one is configured (read at start).
    listener: Option<Listener>,
}

impl Journal {
    pub fn new(project: &Project) -> Journal {
        Journal {
            dir: project.daemon_dir(),
            log: project.log_file(),
            events: project.events_file(),
            forum: project.forum_log(),
            policy: Arc::new(Mutex::new(
                crate::protocol::config::LogsConfig::default().policy(),
            )),
            listener: None,
        }
    }

    /// The journal, also telling `listener` of every event it records.
    pub fn told(mut self, listener: Option<Listener>) -> Journal {
        self.listener = listener;
        self
    }

    /// Sets the rotation policy (at start and on every config reload).
    pub fn set_policy(&self, p: Policy) {
        *self.policy.lock().unwrap_or_else(|e| e.into_inner()) = p;
    }

    /// Appends one line and rotates the file once it is full, under the lock.
    /// A rotation also takes [`ROTATION_LOCK`], so a line appended by a
    /// tool ([`record_outside`]) never lands in a file being renamed away.
    fn append(&self, path: &Path, line: &[u8]) {
        let policy = self.policy.lock().unwrap_or_else(|e| e.into_inner());
        let result = fsx::append_len(path, line).and_then(|len| {
            if policy.max_bytes == 0 || len < policy.max_bytes {
                return Ok(());
            }
            // The part's length becomes part of every later offset (and the
            // mark's): it must not lose its unsynced tail once renamed.
            fsx::sync_file_at(path)?;
            let _rotating = fsx::lock(&self.dir.join(ROTATION_LOCK))?;
            logfile::rotate_if_full(path, len, *policy).map(|_| ())
        });
        if let Err(e) = result {
            eprintln!("handoffd: cannot append to {}: {e}", path.display());
        }
    }

    /// Appends the event to both files. A journal write failure must not stop
    /// delivery, so it is reported on stderr only.
    pub fn record(&self, ev: &Event) {
        let json = match serde_json::to_string(ev) {
            Ok(j) => j + "\n",
            Err(_) => return,
        };
        // Never recreates a deleted `.swarmforge/` (SwarmForge's daemon did,
        // while dying): the folder is made once, at start-up.
        if !self.dir.is_dir() {
            return;
        }
        for (path, line) in [(&self.log, ev.log_line()), (&self.events, json)] {
            self.append(path, line.as_bytes());
        }
        if let Some(l) = &self.listener {
            (l.0)(ev);
        }
    }

    /// fsyncs `events.jsonl`: every line appended to it so far survives a
    /// power cut (a rotated part was fsynced whole before its rename). The
    /// progress mark calls this before it is published, so the mark never
    /// vouches for a line the disk may lose.
    pub fn sync_events(&self) -> std::io::Result<()> {
        // Without the append lock, so no delivery waits on this fsync. A
        // rotation racing it is harmless: it fsyncs the full file before
        // renaming it, and every line the caller vouches for was appended
        // before this call, so it is in the file opened here or in one the
        // rotation synced.
        match fsx::sync_file_at(&self.events) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }

    /// Ends a torn last line of `events.jsonl` (what a power cut during
    /// an append may leave) with a newline, so the next line appended is
    /// read whole. Called at the daemon's start, before its first line.
    pub fn end_torn_line(&self) {
        use std::io::{Read, Seek, SeekFrom};
        let _held = self.policy.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(_tools) = fsx::lock(&self.dir.join(ROTATION_LOCK)) else {
            return;
        };
        let Ok(mut f) = fsx::open_regular(&self.events) else {
            return;
        };
        let mut last = [0u8; 1];
        let torn = f.seek(SeekFrom::End(-1)).is_ok()
            && f.read_exact(&mut last).is_ok()
            && last[0] != b'\n';
        if torn {
            if let Err(e) = fsx::append(&self.events, b"\n") {
                eprintln!(
                    "handoffd: cannot end the torn last line of {}: {e}",
                    self.events.display()
                );
            }
        }
    }

    /// Appends one line to `.swarmforge/forum.log`.
    pub fn forum(&self, line: &str) {
        self.append(&self.forum, line.as_bytes());
    }
}

/// Held by the daemon while it rotates its logs and by a tool while it
/// appends an event of its own.
pub const ROTATION_LOCK: &str = "journal.flock";

/// Records an event from a tool other than the daemon (`swarm approve`,
/// `swarm deny`): appended to `handoffd.log` and `events.jsonl` under
/// [`ROTATION_LOCK`], never rotating them (the daemon rotates at its next
/// line), never running `notify.command`. Nothing is written before a
/// daemon made its folder.
pub fn record_outside(project: &Project, ev: &Event) {
    let dir = project.daemon_dir();
    if !dir.is_dir() {
        return;
    }
    let Ok(json) = serde_json::to_string(ev) else {
        return;
    };
    let _held = match fsx::lock(&dir.join(ROTATION_LOCK)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("warning: cannot lock the journal in {}: {e}", dir.display());
            return;
        }
    };
    for (path, line) in [
        (project.log_file(), ev.log_line()),
        (project.events_file(), json + "\n"),
    ] {
        if let Err(e) = fsx::append(&path, line.as_bytes()) {
            eprintln!("warning: cannot append to {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_ended_before_the_next_one() {
        let d = tempfile::tempdir().unwrap();
        let project = Project::new(d.path());
        std::fs::create_dir_all(project.daemon_dir()).unwrap();
        std::fs::write(
            project.events_file(),
            "{\"kind\":\"started\"}\n{\"kind\":\"compl",
        )
        .unwrap();
        let j = Journal::new(&project);
        j.end_torn_line();
        j.record(&Event::new(Kind::Stopped));
        j.end_torn_line();
        let text = std::fs::read_to_string(project.events_file()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[2].starts_with("{\"kind\":\"stopped\""), "{text}");
        j.sync_events().unwrap();
    }

    #[test]
    fn log_line_escapes() {
        let mut e = Event::new(Kind::Failed)
            .path(Path::new("/x/a\nb.handoff"))
            .reason("bad\x1b[2J");
        e.time = "T".into();
        assert_eq!(e.log_line(), "T failed /x/a\\nb.handoff bad\\e[2J\n");
        let j = serde_json::to_value(&e).unwrap();
        assert_eq!(j["kind"], "failed");
        assert!(j["recipient"].is_null());
    }
}
