//! A delivery that keeps failing, on disk (docs/protocol.md §7.2, "Transient
//! trouble"; docs/swarmforge-compat.md §6). Today's SwarmForge: "A retry
//! sidecar beside an outbox handoff records a transient delivery failure.
//! After three attempts, the daemon also writes a project-root
//! `delivery_attention` record for the dashboard while continuing retries."
//!
//! - The **sidecar** `<outbox>/<name>.handoff.retry.edn` says how often the
//!   daemon tried, why it failed last and when it tries next. It is the
//!   daemon's memory of the retry, so a restarted daemon goes on counting
//!   (and waiting) where the killed one stopped. It is never a queue item
//!   (its name does not end in `.handoff`), and one whose handoff is gone
//!   (delivered, refused, held, removed by hand) is removed. A schedule,
//!   replaced whole at each failure, not a `protocol::ledger` request (its
//!   module doc says why).
//! - The **attention record** `.swarmforge/handoffs/delivery_attention/<stem>.edn`
//!   exists from the third failed attempt until the delivery succeeds or the
//!   file leaves the outbox: it is what `swarm status`, `swarm audit --check`
//!   and the cockpit show.
//!
//! Upstream's EDN keys were not seen: ours are the constants below, in one
//! place, and both files use the same ones. Everything here is written by
//! temp + fsync + rename (fsx) and read bounded; a file that does not parse
//! counts as absent (a sidecar) or is shown as unreadable (a record).

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::fsx;
use crate::protocol::clock::{self, Instant};
use crate::protocol::edn::{self, Value};
use crate::protocol::layout::{Project, Worktree};

/// The sidecar's suffix, after the handoff's whole name.
pub const SIDECAR_SUFFIX: &str = ".retry.edn";
/// Failed attempts after which a delivery needs a person's attention.
pub const ATTENTION_AFTER: u32 = 3;
/// The longest wait between two attempts (upstream: "exponential backoff
/// capped at 60 seconds").
pub const BACKOFF_CAP: Duration = Duration::from_secs(60);
/// The first wait; doubled per failed attempt up to [`BACKOFF_CAP`].
pub const BACKOFF_FIRST: Duration = Duration::from_millis(200);
/// Bytes of a sidecar or record read at most, and of an error kept.
const MAX_FILE: u64 = 64 * 1024;
const MAX_ERROR: usize = 2000;

// The EDN keys (ours; upstream's were not seen).
const K_HANDOFF: &str = "handoff";
const K_SENDER: &str = "sender";
const K_ATTEMPT: &str = "attempt";
const K_LAST_ERROR: &str = "last-error";
const K_FIRST_FAILED: &str = "first-failed-at";
const K_LAST_FAILED: &str = "last-failed-at";
const K_NEXT: &str = "next-at";

/// The wait after `attempt` failed attempts.
pub fn backoff(attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    (BACKOFF_FIRST * 2u32.pow(doublings)).min(BACKOFF_CAP)
}

/// What the daemon knows of a delivery that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Failed attempts so far (1 after the first).
    pub attempt: u32,
    pub last_error: String,
    pub first_failed_at: Instant,
    pub last_failed_at: Instant,
    pub next_at: Instant,
}

impl Retry {
    /// The record after one more failed attempt at `now` (the first, when
    /// `before` is none).
    pub fn after_failure(before: Option<&Retry>, error: &str, now: Instant) -> Retry {
        // To the microsecond, as the file holds it (what is read back
        // equals what was written).
        let now = clock::parse(&clock::iso(now)).unwrap_or(now);
        let attempt = before.map_or(1, |r| r.attempt.saturating_add(1));
        let wait = chrono::Duration::from_std(backoff(attempt)).unwrap_or_default();
        Retry {
            attempt,
            last_error: bounded(error),
            first_failed_at: before.map_or(now, |r| r.first_failed_at),
            last_failed_at: now,
            next_at: now + wait,
        }
    }

    /// Whether the delivery needs a person's attention.
    pub fn needs_attention(&self) -> bool {
        self.attempt >= ATTENTION_AFTER
    }

    fn pairs(&self) -> Vec<(&'static str, Value)> {
        vec![
            (K_ATTEMPT, Value::Int(u64::from(self.attempt))),
            (K_LAST_ERROR, Value::Str(self.last_error.clone())),
            (K_FIRST_FAILED, Value::Str(clock::iso(self.first_failed_at))),
            (K_LAST_FAILED, Value::Str(clock::iso(self.last_failed_at))),
            (K_NEXT, Value::Str(clock::iso(self.next_at))),
        ]
    }

    fn from_map(m: &std::collections::BTreeMap<String, Value>) -> Option<Retry> {
        let time = |k| edn::str_of(m, k).and_then(clock::parse);
        Some(Retry {
            attempt: u32::try_from(edn::int_of(m, K_ATTEMPT)?).unwrap_or(u32::MAX),
            last_error: bounded(edn::str_of(m, K_LAST_ERROR).unwrap_or("")),
            first_failed_at: time(K_FIRST_FAILED)?,
            last_failed_at: time(K_LAST_FAILED)?,
            next_at: time(K_NEXT)?,
        })
    }
}

/// A retry's keys, for another record that carries one (protocol::wakeups).
pub fn retry_pairs(r: &Retry) -> Vec<(&'static str, Value)> {
    r.pairs()
}

/// The retry in a record written with [`retry_pairs`].
pub fn parse_retry(text: &str) -> Option<Retry> {
    Retry::from_map(&edn::parse(text)?)
}

fn bounded(s: &str) -> String {
    let mut s: String = s.chars().take(MAX_ERROR).collect();
    s.retain(|c| !c.is_control() || c == ' ');
    s
}

/// The sidecar of the outbox file `handoff`.
pub fn sidecar_of(handoff: &Path) -> PathBuf {
    let mut name = handoff.file_name().unwrap_or_default().to_os_string();
    name.push(SIDECAR_SUFFIX);
    handoff.with_file_name(name)
}

/// The handoff a sidecar name belongs to (`None`: not a sidecar name).
pub fn handoff_of(sidecar_name: &str) -> Option<&str> {
    sidecar_name
        .strip_suffix(SIDECAR_SUFFIX)
        .filter(|h| crate::protocol::grammar::valid_handoff_name(h))
}

/// The sidecar of `handoff`, when there is a readable one.
pub fn read(handoff: &Path) -> Option<Retry> {
    let bytes = fsx::read_bounded(&sidecar_of(handoff), MAX_FILE).ok()?;
    Retry::from_map(&edn::parse(std::str::from_utf8(&bytes).ok()?)?)
}

/// Writes the sidecar of `handoff` (in the worktree `wt`'s outbox).
pub fn write(wt: &Worktree, handoff: &Path, r: &Retry) -> io::Result<()> {
    let mut pairs = vec![(K_HANDOFF, Value::Str(file_name(handoff)))];
    pairs.extend(r.pairs());
    fsx::ensure_dirs(&[wt.outbox_tmp()])?;
    fsx::replace(
        &wt.outbox_tmp(),
        &sidecar_of(handoff),
        edn::render(&pairs).as_bytes(),
    )
}

/// Removes the sidecar of `handoff`, if any.
pub fn remove(handoff: &Path) -> io::Result<()> {
    fsx::remove_file(&sidecar_of(handoff))
}

/// Sidecars in `outbox` whose handoff is no longer there.
pub fn orphans(outbox: &Path) -> Vec<PathBuf> {
    crate::protocol::layout::names_in(outbox)
        .into_iter()
        .filter(|n| handoff_of(n).is_some_and(|h| !outbox.join(h).exists()))
        .map(|n| outbox.join(n))
        .collect()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// One delivery needing attention, as its record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attention {
    /// The record itself.
    pub record: PathBuf,
    /// The outbox file being retried.
    pub handoff: PathBuf,
    pub sender: String,
    pub retry: Retry,
}

/// Where the record of the outbox file `handoff` lives.
pub fn attention_file(project: &Project, handoff: &Path) -> PathBuf {
    let name = file_name(handoff);
    let stem = name.strip_suffix(".handoff").unwrap_or(&name);
    project.delivery_attention_dir().join(format!("{stem}.edn"))
}

/// Writes (or rewrites) the record of `handoff`.
pub fn write_attention(
    project: &Project,
    handoff: &Path,
    sender: &str,
    r: &Retry,
) -> io::Result<()> {
    let dir = project.delivery_attention_dir();
    fsx::ensure_dirs(&[&dir])?;
    let mut pairs = vec![
        (K_HANDOFF, Value::Str(handoff.display().to_string())),
        (K_SENDER, Value::Str(sender.to_string())),
    ];
    pairs.extend(r.pairs());
    // Temp files start with a dot, which the listing skips.
    fsx::replace(
        &dir,
        &attention_file(project, handoff),
        edn::render(&pairs).as_bytes(),
    )
}

/// Removes the record of `handoff`, if any.
pub fn remove_attention(project: &Project, handoff: &Path) -> io::Result<()> {
    fsx::remove_file(&attention_file(project, handoff))
}

/// Every record, sorted by name; `Err` entries are records that do not
/// read (path, why), shown as such rather than dropped.
pub fn attention(project: &Project) -> Vec<Result<Attention, (PathBuf, String)>> {
    let dir = project.delivery_attention_dir();
    let mut names: Vec<String> = crate::protocol::layout::names_in(&dir)
        .into_iter()
        .filter(|n| !n.starts_with('.') && n.ends_with(".edn"))
        .collect();
    names.sort_unstable();
    names
        .into_iter()
        .map(|n| {
            let record = dir.join(&n);
            let bytes = fsx::read_bounded(&record, MAX_FILE)
                .map_err(|e| (record.clone(), e.to_string()))?;
            let parsed = std::str::from_utf8(&bytes).ok().and_then(edn::parse);
            let m = parsed.ok_or_else(|| (record.clone(), "not a flat EDN map".to_string()))?;
            let retry = Retry::from_map(&m)
                .ok_or_else(|| (record.clone(), "missing attempt or times".to_string()))?;
            Ok(Attention {
                handoff: PathBuf::from(edn::str_of(&m, K_HANDOFF).unwrap_or("")),
                sender: edn::str_of(&m, K_SENDER).unwrap_or("").to_string(),
                record,
                retry,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_a_minute() {
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(2), Duration::from_millis(400));
        assert_eq!(backoff(9), Duration::from_millis(51_200));
        assert_eq!(backoff(10), BACKOFF_CAP);
        assert_eq!(backoff(u32::MAX), BACKOFF_CAP);
    }

    #[test]
    fn a_sidecar_reads_back_and_counts_on() {
        let d = tempfile::tempdir().unwrap();
        let wt = Worktree::new(d.path());
        fsx::ensure_dirs(&[wt.outbox_tmp()]).unwrap();
        let h = wt
            .outbox()
            .join("50_20260615T140531Z_000001_from_a_to_b.handoff");
        let now = clock::now();
        let r1 = Retry::after_failure(None, "disk\nfull", now);
        write(&wt, &h, &r1).unwrap();
        let back = read(&h).unwrap();
        assert_eq!(back.attempt, 1);
        assert_eq!(back.last_error, "diskfull");
        let r2 = Retry::after_failure(Some(&back), "again", now);
        assert_eq!((r2.attempt, r2.first_failed_at), (2, back.first_failed_at));
        assert!(!r2.needs_attention());
        // The handoff is not there: the sidecar is an orphan.
        assert_eq!(orphans(&wt.outbox()), vec![sidecar_of(&h)]);
        std::fs::write(&h, "x").unwrap();
        assert!(orphans(&wt.outbox()).is_empty());
    }
}
