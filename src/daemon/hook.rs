//! The daemon's one door to the forum (docs/forum.md): discussion turns,
//! digest bookkeeping, idle sessions and late turns. The forum implements
//! [`ForumHook`]; the daemon calls only this trait and never reaches into the
//! forum's modules, so delivery stays a pass over files that knows no
//! collaboration style.

use std::path::Path;

use crate::daemon::journal::Journal;
use crate::daemon::wake::Waker;
use crate::protocol::config::Config;
use crate::protocol::header::Message;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;

/// What the forum may use while it does its duties.
pub struct Duties<'a> {
    pub project: &'a Project,
    pub roles: &'a Roles,
    pub config: &'a Config,
    pub journal: &'a Journal,
    pub waker: &'a Waker,
}

/// The forum's word on one message before any copy of it is written.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    Admit,
    /// Refused for good: the original goes to `failed/` with this reason.
    Refuse(String),
    /// Not now: the original waits in the outbox (logged `deferred`).
    Wait(String),
}

pub trait ForumHook: Send {
    /// Once the daemon watches its folders: rebuild state from the files.
    fn start(&mut self, duties: &Duties);
    /// Before any copy of `msg` is written (a discussion turn is logged here,
    /// so the next speaker is known before it is woken).
    fn admit(&mut self, duties: &Duties, msg: &Message) -> Admission;
    /// The original of `msg` is durable in `sent/` at `sent_path`.
    fn delivered(&mut self, duties: &Duties, msg: &Message, sent_path: &Path);
    /// After each pass. True when the forum queued a file (another pass is due).
    fn after_pass(&mut self, duties: &Duties) -> bool;
    /// Every second or so: a finished request or an expired backoff lets the
    /// next digest request go out now. True when a file was queued.
    fn poll(&mut self, duties: &Duties) -> bool;
    /// With the daemon's periodic sweep (idle sessions, late turns). True when
    /// a file was queued.
    fn sweep(&mut self, duties: &Duties) -> bool;
}

/// A daemon without collaboration duties (benchmarks, tools that only route).
#[derive(Default)]
pub struct NoForum;

impl ForumHook for NoForum {
    fn start(&mut self, _: &Duties) {}
    fn admit(&mut self, _: &Duties, _: &Message) -> Admission {
        Admission::Admit
    }
    fn delivered(&mut self, _: &Duties, _: &Message, _: &Path) {}
    fn after_pass(&mut self, _: &Duties) -> bool {
        false
    }
    fn poll(&mut self, _: &Duties) -> bool {
        false
    }
    fn sweep(&mut self, _: &Duties) -> bool {
        false
    }
}
