//! What `swarm a2a` keeps on disk, under `.swarmforge/a2a/` (mode 0700):
//!
//! - `token`: the bearer token (mode 0600), made once and kept, so clients
//!   and webhook receivers keep working across restarts;
//! - `tasks/<task>.json`: one record per A2A task, naming the handoff it is.
//!   The task id is derived from the role and the A2A message id, and the
//!   record is written *before* the handoff is queued (an intent) and again
//!   after (with the handoff's id), all under `lock`: a retried request finds
//!   the record and is answered with the same task; a crash between the two
//!   writes is repaired by finding the handoff by its subject, which carries
//!   the task id. That is the exactly-once rule (docs/a2a.md);
//! - `events/<task>.jsonl`: the task's A2A events in order, appended by the
//!   tracker only (one writer: the server lock), read by streams and pushes;
//! - `push/<task>/<config>.json` (0600, it may hold the receiver's token)
//!   and `<config>.acked` (the last event sequence the receiver answered
//!   2xx for): webhook deliveries survive a restart.
//!
//! Every write is temp + fsync + rename + fsync(dir) through `fsx`. Records
//! per key replaced whole, never retired: not a `protocol::ledger` (its
//! module doc says why); tests/cli/a2a_crash.rs makes the states a kill
//! between the two writes of a task leaves.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::Project;

/// Largest task record, event log line, or push config read back.
const MAX_RECORD_BYTES: u64 = 256 * 1024;
/// Largest event log read at once (a task's events are few and small).
const MAX_LOG_BYTES: u64 = 8 * 1024 * 1024;

/// The folder and its files.
#[derive(Clone, Debug)]
pub struct Store {
    pub dir: PathBuf,
}

/// One answer an A2A client gave through the task (its message id, the
/// clarify it answers, and the queued answer once it is).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Input {
    pub message_id: String,
    pub clarify: String,
    #[serde(default)]
    pub answer: Option<String>,
}

/// A cancel asked for through A2A.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Canceled {
    pub at: String,
    /// The `close` sent to the role, when it could be queued.
    #[serde(default)]
    pub close: Option<String>,
}

/// One A2A task: the handoff it is and what the client said.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub id: String,
    pub role: String,
    pub sender: String,
    pub context_id: String,
    pub message_id: String,
    pub created_at: String,
    /// None while only the intent is written.
    #[serde(default)]
    pub handoff: Option<String>,
    /// The client's first message, as received (bounded by the request size).
    pub message: Value,
    #[serde(default)]
    pub inputs: Vec<Input>,
    #[serde(default)]
    pub canceled: Option<Canceled>,
}

/// A webhook the client asked for.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PushConfig {
    pub id: String,
    pub task_id: String,
    pub url: String,
    #[serde(default)]
    pub token: Option<String>,
    /// `Authorization: <scheme> <credentials>` on each delivery.
    #[serde(default)]
    pub scheme: Option<String>,
    #[serde(default)]
    pub credentials: Option<String>,
}

/// One line of a task's event log.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Logged {
    pub seq: u64,
    /// What the tracker had seen when it wrote this (see `task::Key`).
    pub key: Value,
    /// The A2A `StreamResponse`.
    pub event: Value,
}

/// Task ids, config ids and message ids: what may become a file name.
pub fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
        && !s.starts_with('.')
}

/// The task an A2A message to `role` starts: the same for a retry.
pub fn task_id(role: &str, message_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(role.as_bytes());
    h.update(b"\n");
    h.update(message_id.as_bytes());
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path, max: u64) -> Result<Option<T>> {
    match fsx::read_bounded(path, max) {
        Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| {
            Error::bad_file_hint(
                path,
                format!("not a valid record: {e}"),
                "move it aside; swarm a2a recreates what it needs",
            )
        }),
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::bad_file(path, e)),
    }
}

impl Store {
    pub fn new(project: &Project) -> Store {
        Store {
            dir: project.a2a_dir(),
        }
    }

    fn tmp(&self) -> PathBuf {
        self.dir.join("tmp")
    }
    pub fn token_file(&self) -> PathBuf {
        self.dir.join("token")
    }
    fn tasks(&self) -> PathBuf {
        self.dir.join("tasks")
    }
    fn events(&self) -> PathBuf {
        self.dir.join("events")
    }
    fn push(&self) -> PathBuf {
        self.dir.join("push")
    }
    pub fn server_lock(&self) -> PathBuf {
        self.dir.join("server.lock")
    }
    fn lock_file(&self) -> PathBuf {
        self.dir.join("lock")
    }
    pub fn log_file(&self, task: &str) -> PathBuf {
        self.events().join(format!("{task}.jsonl"))
    }

    /// Makes the folders, private to the owner.
    pub fn ensure(&self) -> Result<()> {
        fsx::ensure_dirs(&[
            &self.dir,
            &self.tmp(),
            &self.tasks(),
            &self.events(),
            &self.push(),
        ])
        .map_err(io(&self.dir))?;
        fsx::set_mode(&self.dir, 0o700).map_err(io(&self.dir))
    }

    /// The token: read, or made once (32 random bytes, hex, mode 0600).
    pub fn token(&self) -> Result<String> {
        let file = self.token_file();
        match fsx::read_bounded(&file, 1024) {
            Ok(b) => {
                let t = String::from_utf8_lossy(&b).trim().to_string();
                if t.len() >= 32 && t.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return Ok(t);
                }
                Err(Error::bad_file_hint(&file, "not a token (64 hex digits expected)", "delete it and restart swarm a2a to make a new one (clients then need the new token)"))
            }
            Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                let t = crate::sys::random::hex_token().map_err(|e| Error::io("getrandom", e))?;
                fsx::write_private(&self.tmp(), &file, format!("{t}\n").as_bytes())
                    .map_err(io(&file))?;
                Ok(t)
            }
            Err(e) => Err(Error::bad_file(&file, e)),
        }
    }

    /// Holds the lock every check-then-write of records takes.
    pub fn lock(&self) -> Result<fsx::Lock> {
        let f = self.lock_file();
        fsx::lock(&f).map_err(io(&f))
    }

    fn record_file(&self, task: &str) -> PathBuf {
        self.tasks().join(format!("{task}.json"))
    }

    pub fn record(&self, task: &str) -> Result<Option<Record>> {
        if !valid_id(task) {
            return Ok(None);
        }
        read_json(&self.record_file(task), MAX_RECORD_BYTES)
    }

    /// Writes (or rewrites) a record; call with the lock held.
    pub fn save(&self, r: &Record) -> Result<()> {
        let f = self.record_file(&r.id);
        let bytes = serde_json::to_vec_pretty(r).map_err(|e| Error::internal(e.to_string()))?;
        fsx::write_private(&self.tmp(), &f, &bytes).map_err(io(&f))
    }

    /// Every record, oldest first (by creation time, then id).
    pub fn records(&self) -> Result<Vec<Record>> {
        let dir = self.tasks();
        let mut out = Vec::new();
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::io(&dir, e)),
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".json") {
                // A record that cannot be read is left for the person to see
                // (`swarm a2a` names it when the task is asked for).
                if let Ok(Some(r)) = self.record(id) {
                    out.push(r);
                }
            }
        }
        out.sort_by(|a, b| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
        Ok(out)
    }

    /// The task's events after `after` (a sequence number), in order.
    pub fn events_after(&self, task: &str, after: u64) -> Result<Vec<Logged>> {
        let f = self.log_file(task);
        let bytes = match fsx::read_bounded(&f, MAX_LOG_BYTES) {
            Ok(b) => b,
            Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(Error::bad_file(&f, e)),
        };
        // A torn last line (no newline yet) is not an event yet.
        let whole = match bytes.iter().rposition(|&b| b == b'\n') {
            Some(i) => &bytes[..=i],
            None => &[][..],
        };
        Ok(whole
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty() && l.len() as u64 <= MAX_RECORD_BYTES)
            .filter_map(|l| serde_json::from_slice::<Logged>(l).ok())
            .filter(|l| l.seq > after)
            .collect())
    }

    /// Appends one event (the tracker is the only writer).
    pub fn append(&self, task: &str, line: &Logged) -> Result<()> {
        let f = self.log_file(task);
        let mut text = serde_json::to_string(line).map_err(|e| Error::internal(e.to_string()))?;
        text.push('\n');
        fsx::append(&f, text.as_bytes()).map_err(io(&f))
    }

    fn push_dir(&self, task: &str) -> PathBuf {
        self.push().join(task)
    }

    pub fn save_push(&self, c: &PushConfig) -> Result<()> {
        let dir = self.push_dir(&c.task_id);
        fsx::ensure_dirs(&[&dir]).map_err(io(&dir))?;
        let f = dir.join(format!("{}.json", c.id));
        let bytes = serde_json::to_vec_pretty(c).map_err(|e| Error::internal(e.to_string()))?;
        fsx::write_private(&self.tmp(), &f, &bytes).map_err(io(&f))
    }

    pub fn push_configs(&self, task: &str) -> Result<Vec<PushConfig>> {
        let dir = self.push_dir(task);
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return Ok(out);
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".json") {
                if valid_id(id) {
                    if let Some(c) = read_json::<PushConfig>(&dir.join(&name), MAX_RECORD_BYTES)? {
                        out.push(c);
                    }
                }
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Every task that has a push config.
    pub fn pushed_tasks(&self) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(self.push())
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| valid_id(n))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    pub fn delete_push(&self, task: &str, id: &str) -> Result<bool> {
        let dir = self.push_dir(task);
        let f = dir.join(format!("{id}.json"));
        if !f.is_file() {
            return Ok(false);
        }
        fsx::remove_file(&f).map_err(io(&f))?;
        let acked = dir.join(format!("{id}.acked"));
        if acked.exists() {
            fsx::remove_file(&acked).map_err(io(&acked))?;
        }
        Ok(true)
    }

    /// The last event sequence the receiver acknowledged (0: none).
    pub fn acked(&self, task: &str, id: &str) -> u64 {
        let f = self.push_dir(task).join(format!("{id}.acked"));
        fsx::read_bounded(&f, 64)
            .ok()
            .and_then(|b| String::from_utf8_lossy(&b).trim().parse().ok())
            .unwrap_or(0)
    }

    pub fn set_acked(&self, task: &str, id: &str, seq: u64) -> Result<()> {
        let f = self.push_dir(task).join(format!("{id}.acked"));
        fsx::write_private(&self.tmp(), &f, format!("{seq}\n").as_bytes()).map_err(io(&f))
    }
}

/// Now, as the records stamp it.
pub fn now() -> String {
    clock::iso_now()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_stable_per_role_and_message() {
        let a = task_id("dev", "m-1");
        assert_eq!(a, task_id("dev", "m-1"));
        assert_ne!(a, task_id("qa", "m-1"));
        assert_ne!(a, task_id("dev", "m-2"));
        assert_eq!(a.len(), 32);
        assert!(valid_id(&a));
    }

    #[test]
    fn ids_that_could_leave_the_folder_are_not_valid() {
        for bad in ["", "../x", "a/b", ".hidden", "a b", "x\n", &"a".repeat(129)] {
            assert!(!valid_id(bad), "{bad:?}");
        }
        assert!(valid_id("3f2a0c1e-9b7d-4c2a-8e1f-0a1b2c3d4e5f"));
    }
}
