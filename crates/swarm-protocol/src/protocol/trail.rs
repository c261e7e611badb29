//! The trail: every message of a project as the files hold it, read once.
//!
//! Originals are the sender's files (`outbox/`, `sent/`, `failed/`); copies are
//! what the daemon delivered (`inbox/new`, `inbox/in_process`, `inbox/completed`,
//! including `batch_*` folders). `swarm transcript`, `swarm receipts` and
//! `swarm audit` all read through here, so each file is opened at most once per
//! command and nothing is ever written.

//!
//! The parts: loading (`load`), keeping a loaded trail up to date from
//! file events (`refresh`), following completed copies (`completions`),
//! what arrived in a folder (`arrivals`), why an original failed
//! (`failures`), the audit's finding (`violation`); here, the types a
//! reader reads.

mod arrivals;
mod completions;
mod failures;
mod load;
mod refresh;
#[cfg(test)]
mod tests;
mod violation;
pub mod watch;

pub use arrivals::{arrived_since, handoff_names};
pub use completions::Completions;
pub use failures::failure_reason;
pub use violation::Violation;

use crate::protocol::header::names;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::protocol::clock::{self, Instant};
use crate::protocol::config::Config;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
pub use crate::protocol::store::{load_message, Loaded};

/// Largest `.error` note read (a reason is one line).
const MAX_NOTE_BYTES: u64 = 64 * 1024;

/// Where a file sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    Outbox,
    Sent,
    Failed,
    /// Waiting in `pending_approval/` for `swarm approve` / `swarm deny`.
    Held,
    New,
    InProcess,
    Completed,
}

impl Place {
    pub fn as_str(self) -> &'static str {
        match self {
            Place::Outbox => "outbox",
            Place::Sent => "sent",
            Place::Failed => "failed",
            Place::Held => "held",
            Place::New => "new",
            Place::InProcess => "in_process",
            Place::Completed => "completed",
        }
    }
}

/// A time stamp header: absent, unreadable (kept for the report), or a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stamp {
    Missing,
    Bad(String),
    At(Instant),
}

impl Stamp {
    pub fn of(value: Option<&str>) -> Stamp {
        match value {
            None => Stamp::Missing,
            Some(v) => match clock::parse(v) {
                Some(t) => Stamp::At(t),
                None => Stamp::Bad(v.to_string()),
            },
        }
    }

    pub fn at(&self) -> Option<Instant> {
        match self {
            Stamp::At(t) => Some(*t),
            _ => None,
        }
    }

    pub fn is_missing(&self) -> bool {
        matches!(self, Stamp::Missing)
    }
}

/// A sender's file: the whole message, because the transcript prints it.
#[derive(Clone, Debug)]
pub struct Original {
    pub path: PathBuf,
    pub place: Place,
    pub msg: Message,
    pub created: Stamp,
    /// Why it failed, from its `.error` note (failed only).
    pub reason: Option<String>,
    /// When it arrived where it is: the inode change time a rename sets,
    /// which no agent can set back (views/vouched.rs).
    pub arrived: Option<SystemTime>,
}

impl Original {
    /// The original at `path` whose content is `msg`.
    pub fn new(path: &Path, place: Place, msg: Message, reason: Option<String>) -> Original {
        Original {
            created: Stamp::of(msg.get(names::CREATED_AT)),
            path: path.to_path_buf(),
            place,
            msg,
            reason,
            arrived: changed_at(path),
        }
    }

    pub fn id(&self) -> &str {
        self.msg.id().unwrap_or("")
    }

    /// When it was said: `created_at`, else the second in its id.
    pub fn when(&self) -> Option<Instant> {
        self.created.at().or_else(|| grammar::id_time(self.id()))
    }
}

/// A delivered copy, reduced to what receipts and audits need (bodies are
/// dropped so a big backlog stays small in memory).
#[derive(Clone, Debug)]
pub struct Copy {
    pub path: PathBuf,
    pub place: Place,
    /// The `batch_*` folder holding it, if any.
    pub batch: Option<String>,
    /// Index into `Trail::worktrees`.
    pub worktree: usize,
    pub id: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    /// Roles that got context copies (a copy's `recipient` may be one).
    pub cc: Option<String>,
    pub recipient: Option<String>,
    pub created: Stamp,
    pub enqueued: Stamp,
    pub dequeued: Stamp,
    pub completed: Stamp,
    /// Its content digest (protocol/digest.rs), what handoffd journaled
    /// when it delivered the message.
    pub digest: String,
    /// When it arrived where it is (see [`Original::arrived`]).
    pub arrived: Option<SystemTime>,
}

/// A file that could not be read or parsed.
#[derive(Clone, Debug)]
pub struct Bad {
    pub path: PathBuf,
    pub reason: String,
}

/// A file the queue helpers moved aside to `inbox/rejected/`.
#[derive(Clone, Debug)]
pub struct Rejected {
    pub path: PathBuf,
    pub reason: Option<String>,
}

/// What to read.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub originals: bool,
    pub copies: bool,
    /// Only files whose name contains this text (names embed the id).
    pub name_contains: Option<String>,
}

impl Scope {
    pub fn originals() -> Scope {
        Scope {
            originals: true,
            ..Scope::default()
        }
    }
    pub fn all() -> Scope {
        Scope {
            originals: true,
            copies: true,
            name_contains: None,
        }
    }
}

/// Everything read from one project.
#[derive(Debug)]
pub struct Trail {
    pub project: Project,
    pub roles: Roles,
    pub max_bytes: u64,
    /// Distinct worktree roots, in roles.tsv order.
    pub worktrees: Vec<PathBuf>,
    pub originals: Vec<Original>,
    pub copies: Vec<Copy>,
    pub bad: Vec<Bad>,
    pub rejected: Vec<Rejected>,
    /// Folders that exist but could not be listed.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Per worktree index, the proxy of roles on another host (their copies
    /// still waiting for the bridge), read as copies of that worktree.
    proxies: Vec<(usize, PathBuf)>,
    /// Where each remote role's files are mirrored (docs/bridge.md).
    mirrors: std::collections::HashMap<String, PathBuf>,
}

/// A roles.tsv worktree path; a relative one is taken from the project root.
fn absolute(project: &Project, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        project.root.join(p)
    }
}

/// A role on another host: its host, and where this host mirrors its
/// worktree (docs/bridge.md, "One trail"). `None` for a local role.
pub fn mirror_of(
    project: &Project,
    config: &Config,
    r: &crate::protocol::roles::Role,
) -> Option<(String, PathBuf)> {
    let host = r.worktree_name.strip_prefix('@')?;
    let wt = config
        .role(&r.name)
        .map_or("master", |c| c.worktree.as_str());
    let wt = crate::protocol::people::planned_worktree_name(&r.name, r.is_human(), wt);
    Some((host.to_string(), project.bridge_mirror(host, &wt)))
}

/// The inode change time of the file at `path` (not followed): set by
/// the rename that put it there, and by any later write, to the moment it
/// happened; nobody but root can set it back.
pub fn changed_at(path: &Path) -> Option<SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(path).ok()?;
    Some(
        std::time::UNIX_EPOCH
            + std::time::Duration::new(m.ctime().max(0) as u64, m.ctime_nsec().max(0) as u32),
    )
}
