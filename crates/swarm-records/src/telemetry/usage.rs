//! The usage journal: one JSON object per line in
//! `.swarmforge/telemetry/usage.jsonl`, one line per agent turn, appended
//! with a single O_APPEND write (fsx::append) so concurrent writers (the
//! headless supervisor of each role, the API runner) never interleave.
//!
//! Every reader treats the file as untrusted: a line longer than
//! [`MAX_LINE`], not UTF-8 or not a record is skipped and counted, never
//! fatal. Token counts are what the agent's CLI or model server reported;
//! `cost_usd` is the CLI's own figure when it gave one (else cost is
//! computed at read time from `prices:` in swarm.yaml).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::Project;

/// The longest line a reader accepts; a record is a few hundred bytes.
pub const MAX_LINE: usize = 16 * 1024;

/// One turn's usage, attributed to the role and the handoff it worked on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// When the turn ended (ISO 8601, UTC).
    pub time: String,
    pub role: String,
    /// The handoff in process during the turn, if any.
    pub id: Option<String>,
    /// Its thread (the root message's id), if known.
    pub thread: Option<String>,
    pub model: Option<String>,
    /// Where the figures came from: `claude`, `codex`, `gemini`, `api`.
    pub source: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// The CLI's own cost figure, when it reports one.
    pub cost_usd: Option<f64>,
    /// When the turn started (the time of its `turn_start` activity
    /// record), so a turn's span has its true length; absent in records
    /// written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// Set when the turn ended but its figures could not be read (why):
    /// the turn is counted, its tokens and cost are unknown, and `swarm
    /// cost` says so instead of showing a total that looks whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
}

impl Usage {
    /// A record for `role` stamped now; fill in the figures.
    pub fn now(role: &str, source: &str) -> Usage {
        Usage {
            time: clock::iso_now(),
            role: role.to_string(),
            source: source.to_string(),
            ..Usage::default()
        }
    }

    pub fn total_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_write_tokens)
    }
}

/// The activity record that says `u` (`swarm activity` shows it).
pub fn activity(u: &Usage) -> crate::telemetry::activity::Activity {
    use crate::telemetry::activity::{Activity, Kind};
    let mut a = Activity::now(&u.role, Kind::Usage).text(&format!(
        "input {} output {} cache_read {} cache_write {}",
        u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
    ));
    a.name = u.model.clone();
    a
}

/// Appends one record. Creates `.swarmforge/telemetry/` when missing but
/// never `.swarmforge/` itself.
pub fn record(project: &Project, usage: &Usage) -> Result<()> {
    if !project.swarmforge().is_dir() {
        return Err(Error::bad_file(
            project.swarmforge(),
            "not a swarm (run `swarm init`)",
        ));
    }
    let dir = project.telemetry_dir();
    fsx::ensure_dirs(&[&dir]).map_err(|e| Error::io(&dir, e))?;
    let mut line =
        serde_json::to_string(usage).map_err(|e| Error::internal(format!("usage record: {e}")))?;
    line.push('\n');
    let path = project.usage_file();
    fsx::append(&path, line.as_bytes()).map_err(|e| Error::io(&path, e))
}

/// Every readable record, oldest first, and how many lines were skipped.
/// A missing file is no usage yet.
pub fn read(project: &Project) -> Result<(Vec<Usage>, usize)> {
    crate::telemetry::jsonl::read(&project.usage_file(), MAX_LINE, |_: &Usage| true)
}

/// What this process has read of a journal: its records and where the
/// next read starts.
struct Cached {
    path: std::path::PathBuf,
    inode: u64,
    offset: u64,
    records: Vec<Usage>,
    skipped: usize,
}

static CACHE: std::sync::Mutex<Option<Cached>> = std::sync::Mutex::new(None);

/// Runs `f` on every record and the skipped count, reading only what was
/// appended since this process last asked (the daemon's budget checks run
/// on every wake-up and sweep: a whole large journal each time would cost
/// the machine's cores). A journal replaced or cut short is read afresh.
pub fn with_all<R>(project: &Project, f: impl FnOnce(&[Usage], usize) -> R) -> Result<R> {
    use std::os::unix::fs::MetadataExt as _;
    let path = project.usage_file();
    let meta = match std::fs::metadata(&path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(&path, e)),
    };
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let (inode, len) = meta.map(|m| (m.ino(), m.len())).unwrap_or((0, 0));
    let stale = cache
        .as_ref()
        .is_none_or(|c| c.path != path || c.inode != inode || c.offset > len);
    if stale {
        *cache = Some(Cached {
            path: path.clone(),
            inode,
            offset: 0,
            records: Vec::new(),
            skipped: 0,
        });
    }
    let c = cache.as_mut().expect("set above");
    if c.offset < len {
        let (more, skipped, at) =
            crate::telemetry::jsonl::read_from(&path, c.offset, MAX_LINE, |_: &Usage| true)?;
        c.records.extend(more);
        c.skipped += skipped;
        c.offset = at;
    }
    Ok(f(&c.records, c.skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_lines_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::new(dir.path());
        std::fs::create_dir_all(project.swarmforge()).unwrap();
        let mut u = Usage::now("coder", "claude");
        u.input_tokens = 10;
        u.output_tokens = 5;
        u.cost_usd = Some(0.01);
        record(&project, &u).unwrap();
        fsx::append(&project.usage_file(), b"not json\n").unwrap();
        let long = vec![b'x'; MAX_LINE * 2];
        fsx::append(&project.usage_file(), &long).unwrap();
        fsx::append(&project.usage_file(), b"\n").unwrap();
        record(&project, &u).unwrap();
        let (all, skipped) = read(&project).unwrap();
        assert_eq!(all, vec![u.clone(), u]);
        assert_eq!(skipped, 2);
    }

    #[test]
    fn no_swarm_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::new(dir.path());
        assert!(record(&project, &Usage::now("a", "api")).is_err());
        assert_eq!(read(&project).unwrap().1, 0);
    }
}
