//! The trail: every message of a project as the files hold it, read once.
//!
//! Originals are the sender's files (`outbox/`, `sent/`, `failed/`); copies are
//! what the daemon delivered (`inbox/new`, `inbox/in_process`, `inbox/completed`,
//! including `batch_*` folders). `swarm transcript`, `swarm receipts` and
//! `swarm audit` all read through here, so each file is opened at most once per
//! command and nothing is ever written.

mod violation;
pub mod watch;

pub use violation::Violation;

use crate::protocol::header::names;
use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::Result;
use crate::fsx;
use crate::protocol::clock::{self, Instant};
use crate::protocol::config::Config;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::lineup;
use crate::protocol::roles::Roles;
use crate::protocol::store;
pub use crate::protocol::store::{load_message, Loaded};
use crate::protocol::swarm::Swarm;

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

/// What a path is, for [`Trail::refresh`].
enum Found {
    Original(Place),
    Copy(Place, Option<String>),
    Batch(Place),
    Rejected,
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

/// One folder's listing: queue files and batch folders, sorted by name.
struct Listing {
    files: Vec<String>,
    batches: Vec<String>,
    notes: HashSet<String>,
}

impl Trail {
    /// Reads the project's roles, config and the files `scope` asks for.
    pub fn load(project: &Project, scope: &Scope) -> Result<Trail> {
        Trail::load_in(&Swarm::new(project.clone()), scope)
    }

    /// [`Trail::load`] in a loaded swarm (its config, then its roles).
    pub fn load_in(swarm: &Swarm, scope: &Scope) -> Result<Trail> {
        let config = swarm.config()?;
        let roles = swarm.roles()?;
        Trail::load_with(&swarm.project, roles, config, scope)
    }

    /// [`Trail::load`] with roles.tsv and swarm.yaml already read (the
    /// loaded swarm of one process, `protocol::swarm`).
    pub fn load_with(
        project: &Project,
        roles: &Roles,
        config: &Config,
        scope: &Scope,
    ) -> Result<Trail> {
        // Removed roles' worktrees still hold their history (docs/lineups.md).
        let roles = lineup::state::with_retired(roles.clone(), &config.seats);
        // A role on another host is read from the mirror of its worktree
        // there (its host's bridge publishes every file), plus the copies
        // that wait in its local proxy for the bridge.
        let mut mirrors = std::collections::HashMap::new();
        let mut proxies_of: Vec<(PathBuf, PathBuf)> = Vec::new();
        for r in &roles.roles {
            let Some((_, m)) = mirror_of(project, config, r) else {
                continue;
            };
            mirrors.insert(r.name.clone(), m.clone());
            proxies_of.push((m, absolute(project, &r.worktree_path)));
        }
        let mut worktrees: Vec<PathBuf> = Vec::new();
        for r in &roles.roles {
            let p = match mirrors.get(&r.name) {
                Some(m) => m.clone(),
                None => absolute(project, &r.worktree_path),
            };
            if !worktrees.contains(&p) {
                worktrees.push(p);
            }
        }
        let proxies = proxies_of
            .into_iter()
            .filter_map(|(m, proxy)| worktrees.iter().position(|w| *w == m).map(|i| (i, proxy)))
            .collect();
        let mut trail = Trail {
            project: project.clone(),
            roles,
            max_bytes: config.limits.max_file_bytes,
            worktrees,
            originals: Vec::new(),
            copies: Vec::new(),
            bad: Vec::new(),
            rejected: Vec::new(),
            unreadable: Vec::new(),
            proxies,
            mirrors,
        };
        for i in 0..trail.worktrees.len() {
            trail.scan_worktree(i, scope);
        }
        if scope.copies {
            for (i, proxy) in trail.proxies.clone() {
                trail.scan_proxy(i, &proxy, scope);
            }
        }
        Ok(trail)
    }

    /// Brings the trail up to date with what is at `path` now: a queue
    /// file (or its `.error` note) in one of the folders a load with
    /// [`Scope::all`] reads, or a `batch_*` folder of copies (read whole).
    /// Returns `Some(false)` when it cannot say (a sent, failed or completed
    /// file gone, which `swarm archive` may have moved where no event names
    /// it): the caller loads the trail again; `None` for a path outside
    /// those folders (nothing the trail holds).
    /// For a reader kept up to date by file events (`swarm serve`'s audit).
    pub fn refresh(&mut self, path: &Path) -> Option<bool> {
        let parent = path.parent()?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A note changed: its original's reason.
        if let Some(base) = name.strip_suffix(".error") {
            let failed = parent.parent().map(|h| h.join("failed").join(base));
            return match failed {
                Some(f) if self.originals.iter().any(|o| o.path == f) || f.exists() => {
                    self.refresh(&f)
                }
                _ => Some(true),
            };
        }
        let (i, what) = self.place_of(parent, &name)?;
        let exists = fs::symlink_metadata(path).is_ok();
        self.originals.retain(|o| o.path != path);
        self.bad.retain(|b| b.path != path);
        match what {
            Found::Batch(place) => {
                self.copies.retain(|c| !c.path.starts_with(path));
                self.bad.retain(|b| !b.path.starts_with(path));
                if exists {
                    for n in handoff_names(path).unwrap_or_default() {
                        self.read_copy(&path.join(n), place, Some(name.clone()), i);
                    }
                }
                Some(true)
            }
            Found::Original(place) => {
                if exists {
                    if let Some(msg) = self.read(path) {
                        let reason = (place == Place::Failed)
                            .then(|| failure_reason(path))
                            .flatten();
                        self.originals.push(Original::new(path, place, msg, reason));
                    }
                }
                Some(exists || !matches!(place, Place::Sent | Place::Failed))
            }
            Found::Copy(place, batch) => {
                self.copies.retain(|c| c.path != path);
                if exists {
                    self.read_copy(path, place, batch, i);
                }
                Some(exists || place != Place::Completed)
            }
            Found::Rejected => {
                self.rejected.retain(|r| r.path != path);
                if exists {
                    let mut note = path.as_os_str().to_owned();
                    note.push(".error");
                    self.rejected.push(Rejected {
                        path: path.to_path_buf(),
                        reason: read_note(Path::new(&note)),
                    });
                }
                Some(true)
            }
        }
    }

    /// Which worktree's which folder `dir` is, for an entry named `name`.
    fn place_of(&self, dir: &Path, name: &str) -> Option<(usize, Found)> {
        let batch_of = |d: &Path| {
            d.file_name()
                .is_some_and(|n| grammar::is_batch_dir_name(&n.to_string_lossy()))
        };
        for (i, root) in self.worktrees.iter().enumerate() {
            let wt = Worktree::new(root);
            let originals = [
                (wt.outbox(), Place::Outbox),
                (wt.sent(), Place::Sent),
                (wt.failed(), Place::Failed),
                (wt.held(), Place::Held),
            ];
            if let Some((_, p)) = originals.iter().find(|(d, _)| d == dir) {
                return grammar::valid_handoff_name(name).then_some((i, Found::Original(*p)));
            }
            if dir == wt.rejected() {
                return name.ends_with(".handoff").then_some((i, Found::Rejected));
            }
            let copies = [
                (wt.inbox_new(), Place::New),
                (wt.in_process(), Place::InProcess),
                (wt.completed(), Place::Completed),
            ];
            if let Some((_, p)) = copies.iter().find(|(d, _)| d == dir) {
                if *p != Place::New && grammar::is_batch_dir_name(name) {
                    return Some((i, Found::Batch(*p)));
                }
                return name
                    .ends_with(".handoff")
                    .then_some((i, Found::Copy(*p, None)));
            }
            if batch_of(dir) {
                let up = dir.parent()?;
                let batch = dir.file_name()?.to_string_lossy().into_owned();
                for (d, p) in &copies[1..] {
                    if d == up {
                        return name
                            .ends_with(".handoff")
                            .then_some((i, Found::Copy(*p, Some(batch.clone()))));
                    }
                }
            }
        }
        None
    }

    /// Whether `path` lies in the mirror of another host's worktree (that
    /// host's handoffd moved it and journaled it, not this one).
    pub fn mirrored(&self, path: &Path) -> bool {
        self.mirrors.values().any(|m| path.starts_with(m))
    }

    /// Index in `worktrees` of a role's worktree (its inbox).
    pub fn home(&self, role: &str) -> Option<usize> {
        let p = match self.mirrors.get(role) {
            Some(m) => m.clone(),
            None => absolute(&self.project, &self.roles.find(role)?.worktree_path),
        };
        self.worktrees.iter().position(|w| *w == p)
    }

    /// The copies in a proxy's `inbox/new` (not yet bridged), unless the
    /// mirror of the remote inbox holds the same file already.
    fn scan_proxy(&mut self, i: usize, proxy: &Path, scope: &Scope) {
        let dir = Worktree::new(proxy).inbox_new();
        let l = self.list(&dir, scope.name_contains.as_deref());
        for name in &l.files {
            let held = self.copies.iter().any(|c| {
                c.worktree == i
                    && c.path
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy() == *name)
            });
            if !held {
                self.read_copy(&dir.join(name), Place::New, None, i);
            }
        }
    }

    fn scan_worktree(&mut self, i: usize, scope: &Scope) {
        let wt = Worktree::new(&self.worktrees[i]);
        let filter = scope.name_contains.as_deref();
        if scope.originals {
            let outbox = self.list(&wt.outbox(), filter);
            let outbox_notes = outbox.notes.clone();
            self.read_originals(&wt.outbox(), Place::Outbox, &outbox, &outbox_notes);
            // The live folders, then what `swarm archive` moved out of them.
            let days = wt.archive_days();
            let sent = std::iter::once(wt.sent()).chain(days.iter().map(|d| d.join("sent")));
            for dir in sent.collect::<Vec<_>>() {
                let l = self.list(&dir, filter);
                self.read_originals(&dir, Place::Sent, &l, &outbox_notes);
            }
            let l = self.list(&wt.held(), filter);
            self.read_originals(&wt.held(), Place::Held, &l, &outbox_notes);
            let failed = std::iter::once(wt.failed()).chain(days.iter().map(|d| d.join("failed")));
            for dir in failed.collect::<Vec<_>>() {
                let l = self.list(&dir, filter);
                self.read_originals(&dir, Place::Failed, &l, &outbox_notes);
            }
        }
        if scope.copies {
            let archived = wt
                .archive_days()
                .into_iter()
                .map(|d| (d.join("completed"), Place::Completed));
            let places = [
                (wt.inbox_new(), Place::New),
                (wt.in_process(), Place::InProcess),
                (wt.completed(), Place::Completed),
            ];
            for (dir, place) in places.into_iter().chain(archived) {
                let l = self.list(&dir, filter);
                for name in &l.files {
                    self.read_copy(&dir.join(name), place, None, i);
                }
                if place != Place::New {
                    for b in &l.batches {
                        let bdir = dir.join(b);
                        let bl = self.list(&bdir, filter);
                        for name in &bl.files {
                            self.read_copy(&bdir.join(name), place, Some(b.clone()), i);
                        }
                    }
                }
            }
            let rdir = wt.rejected();
            let l = self.list(&rdir, filter);
            for name in &l.files {
                let reason = l
                    .notes
                    .contains(&format!("{name}.error"))
                    .then(|| read_note(&rdir.join(format!("{name}.error"))))
                    .flatten();
                self.rejected.push(Rejected {
                    path: rdir.join(name),
                    reason,
                });
            }
        }
    }

    fn list(&mut self, dir: &Path, filter: Option<&str>) -> Listing {
        let mut l = Listing {
            files: Vec::new(),
            batches: Vec::new(),
            notes: HashSet::new(),
        };
        let entries = match store::entries(dir) {
            Ok(entries) => entries,
            Err(e) => {
                self.unreadable.push((dir.to_path_buf(), e.to_string()));
                return l;
            }
        };
        for e in entries.flatten() {
            match e.kind {
                store::Kind::Batch => l.batches.push(e.name),
                store::Kind::Handoff | store::Kind::Odd => {
                    if filter.is_none_or(|f| e.name.contains(f)) {
                        l.files.push(e.name);
                    }
                }
                store::Kind::Sidecar => {
                    l.notes.insert(e.name);
                }
                store::Kind::Temp | store::Kind::Stray => {}
            }
        }
        l.files.sort_unstable();
        l.batches.sort_unstable();
        l
    }

    fn read(&mut self, path: &Path) -> Option<Message> {
        match load_message(path, self.max_bytes) {
            Loaded::Ok(m) => Some(m),
            Loaded::Gone => None,
            Loaded::Bad(reason) => {
                self.bad.push(Bad {
                    path: path.to_path_buf(),
                    reason,
                });
                None
            }
        }
    }

    fn read_originals(
        &mut self,
        dir: &Path,
        place: Place,
        l: &Listing,
        outbox_notes: &HashSet<String>,
    ) {
        for name in &l.files {
            let path = dir.join(name);
            let Some(msg) = self.read(&path) else {
                continue;
            };
            let reason = match place {
                Place::Failed => failure_note(dir, name, &l.notes, outbox_notes),
                _ => None,
            };
            self.originals
                .push(Original::new(&path, place, msg, reason));
        }
    }

    fn read_copy(&mut self, path: &Path, place: Place, batch: Option<String>, wt: usize) {
        let Some(msg) = self.read(path) else {
            return;
        };
        self.copies.push(copy_of(path, place, batch, wt, &msg));
    }
}

/// The copy at `path` whose content is `msg`.
fn copy_of(path: &Path, place: Place, batch: Option<String>, wt: usize, msg: &Message) -> Copy {
    let get = |n: &str| msg.get(n).map(str::to_string);
    Copy {
        path: path.to_path_buf(),
        place,
        batch,
        worktree: wt,
        id: get("id"),
        from: get("from"),
        to: get("to"),
        cc: get("cc"),
        recipient: get("recipient"),
        created: Stamp::of(msg.get(names::CREATED_AT)),
        enqueued: Stamp::of(msg.get(names::ENQUEUED_AT)),
        dequeued: Stamp::of(msg.get(names::DEQUEUED_AT)),
        completed: Stamp::of(msg.get(names::COMPLETED_AT)),
        digest: crate::protocol::digest::of(msg),
        arrived: changed_at(path),
    }
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

/// Follows the copies that reach `inbox/completed/` (the daemon's live
/// trace export, telemetry/otlp.rs), without reading the trail again at
/// every look: a completed folder is listed only when it changed since the
/// last look (its modification time; one changed within [`RECENT`] of a
/// look is listed again at the next, as a time stamp's tick may hide a
/// second change), and only the files not seen before are read.
#[derive(Debug, Default)]
pub struct Completions {
    folders: std::collections::HashMap<PathBuf, Seen>,
    /// Copy files read so far (what a look costs).
    pub reads: usize,
}

#[derive(Debug, Default)]
struct Seen {
    mtime: Option<std::time::SystemTime>,
    names: HashSet<String>,
}

/// How close to a look a folder's change must be to be listed again.
const RECENT: std::time::Duration = std::time::Duration::from_secs(2);

impl Completions {
    /// Starts from what is completed now: history is not followed.
    pub fn start(project: &Project) -> Completions {
        let mut c = Completions::default();
        let _ = c.look_into(project, false);
        c
    }

    /// The copies completed since the last look, each with its content.
    pub fn look(&mut self, project: &Project) -> Result<Vec<(Copy, Message)>> {
        self.look_into(project, true)
    }

    fn look_into(&mut self, project: &Project, read: bool) -> Result<Vec<(Copy, Message)>> {
        // Roles and worktrees only: nothing is listed by the load.
        let mut t = Trail::load(project, &Scope::default())?;
        let mut out = Vec::new();
        for i in 0..t.worktrees.len() {
            let dir = Worktree::new(&t.worktrees[i]).completed();
            for b in self.folder(&mut t, &dir, i, None, read, &mut out) {
                let bdir = dir.join(&b);
                self.folder(&mut t, &bdir, i, Some(b), read, &mut out);
            }
        }
        Ok(out)
    }

    /// Reads the new files of `dir` when it changed; returns its batch
    /// folders when it was listed (each is looked into the same way).
    fn folder(
        &mut self,
        t: &mut Trail,
        dir: &Path,
        wt: usize,
        batch: Option<String>,
        read: bool,
        out: &mut Vec<(Copy, Message)>,
    ) -> Vec<String> {
        let now = std::time::SystemTime::now();
        let mtime = fs::metadata(dir).and_then(|m| m.modified()).ok();
        let seen = self.folders.entry(dir.to_path_buf()).or_default();
        if mtime.is_some() && seen.mtime == mtime {
            return Vec::new();
        }
        let recent = mtime.is_none_or(|m| now.duration_since(m).map_or(true, |d| d < RECENT));
        seen.mtime = if recent { None } else { mtime };
        let l = t.list(dir, None);
        let names: HashSet<String> = l.files.iter().cloned().collect();
        for name in l.files.iter().filter(|n| !seen.names.contains(*n)) {
            if !read {
                continue;
            }
            let path = dir.join(name);
            self.reads += 1;
            if let Some(msg) = t.read(&path) {
                out.push((
                    copy_of(&path, Place::Completed, batch.clone(), wt, &msg),
                    msg,
                ));
            }
        }
        let seen = self.folders.entry(dir.to_path_buf()).or_default();
        seen.names = names;
        l.batches
    }
}

/// `*.handoff` entries (not folders) directly in `dir`, sorted; a missing
/// folder is empty.
pub fn handoff_names(dir: &Path) -> io::Result<Vec<String>> {
    let mut v: Vec<String> = store::entries(dir)?
        .flatten()
        .filter(|e| e.is_handoff_named())
        .map(|e| e.name)
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// The queue files that arrived in a copies folder (`inbox/in_process/`,
/// `inbox/completed/`) at or after `since`, those in its `batch_*` folders
/// included; every one, when `since` is `None`. "Arrived" is the inode's
/// change time, which a rename sets (a stamp's replace too): a folder not
/// changed since then is not looked into, so a long `completed/` costs one
/// listing and no `stat` per file unless it changed. A missing folder is
/// empty. For the daemon's journal of taken and finished work
/// (daemon/progress.rs), which must find what moved while it was not
/// watching.
pub fn arrived_since(dir: &Path, since: Option<std::time::SystemTime>) -> io::Result<Vec<PathBuf>> {
    use std::os::unix::fs::MetadataExt;
    let after = |m: &fs::Metadata, changed: bool| {
        since.is_none_or(|s| {
            let t = if changed {
                std::time::UNIX_EPOCH
                    + std::time::Duration::new(
                        m.ctime().max(0) as u64,
                        m.ctime_nsec().max(0) as u32,
                    )
            } else {
                m.modified().unwrap_or(std::time::UNIX_EPOCH)
            };
            t >= s
        })
    };
    let top = match fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => m,
        Ok(_) => return Ok(Vec::new()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    // (folder, every file in it counts)
    let mut folders: Vec<(PathBuf, bool)> = Vec::new();
    let files_changed = after(&top, false);
    for e in fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() && grammar::is_batch_dir_name(&name) {
            let Ok(m) = fs::symlink_metadata(e.path()) else {
                continue;
            };
            // Moved in whole (a finished batch) or made since: all of it.
            if after(&m, true) {
                folders.push((e.path(), true));
            } else if after(&m, false) {
                folders.push((e.path(), false));
            }
        } else if kind.is_file()
            && files_changed
            && grammar::valid_handoff_name(&name)
            && fs::symlink_metadata(e.path()).is_ok_and(|m| after(&m, true))
        {
            out.push(e.path());
        }
    }
    for (folder, all) in folders {
        for name in handoff_names(&folder)? {
            let p = folder.join(&name);
            if all || fs::symlink_metadata(&p).is_ok_and(|m| after(&m, true)) {
                out.push(p);
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The failure reason of a failed original at `path`, looked up in both places
/// a daemon writes it (see `failure_note`).
pub fn failure_reason(path: &Path) -> Option<String> {
    let dir = path.parent()?;
    let name = path.file_name()?.to_string_lossy().into_owned();
    let outbox = dir.parent()?.join("outbox");
    let notes_in = |d: &Path| -> HashSet<String> {
        [name.as_str(), grammar::strip_collision_prefix(&name)]
            .iter()
            .map(|n| format!("{n}.error"))
            .filter(|n| d.join(n).is_file())
            .collect()
    };
    failure_note(dir, &name, &notes_in(dir), &notes_in(&outbox))
}

/// The reason a failed original carries: `<name>.error` beside it in `failed/`
/// (this daemon), else in the outbox it came from (SwarmForge's daemon),
/// where the name has no collision prefix.
fn failure_note(
    failed_dir: &Path,
    name: &str,
    failed_notes: &HashSet<String>,
    outbox_notes: &HashSet<String>,
) -> Option<String> {
    let plain = grammar::strip_collision_prefix(name);
    let outbox = failed_dir.parent()?.join("outbox");
    for (set, dir, n) in [
        (failed_notes, failed_dir.to_path_buf(), name),
        (failed_notes, failed_dir.to_path_buf(), plain),
        (outbox_notes, outbox.clone(), name),
        (outbox_notes, outbox, plain),
    ] {
        let note = format!("{n}.error");
        if set.contains(&note) {
            if let Some(r) = read_note(&dir.join(note)) {
                return Some(r);
            }
        }
    }
    None
}

fn read_note(path: &Path) -> Option<String> {
    let bytes = fsx::read_bounded(path, MAX_NOTE_BYTES).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_read_each_new_copy_once_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::new(dir.path());
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(project.swarmforge()).unwrap();
        std::fs::write(
            project.roles_tsv(),
            format!("b\tb\t{}\tswarmforge-b\tB\tcodex\ttask\n", wt.display()),
        )
        .unwrap();
        let done = Worktree::new(&wt).completed();
        std::fs::create_dir_all(&done).unwrap();
        let copy = |n: u32| {
            let id = format!("20261202T100703Z_00000{n}_from_a");
            std::fs::write(
                done.join(format!("20_{id}_to_b.handoff")),
                format!("id: {id}\nfrom: a\nto: b\npriority: 20\ntype: note\nmessage: m\nrecipient: b\ncompleted_at: 2026-12-02T10:07:03.023948Z\n\nbody\n"),
            )
            .unwrap();
        };
        copy(1);
        let mut c = Completions::start(&project);
        assert_eq!(c.reads, 0, "what was completed before is history");
        copy(2);
        let got = c.look(&project).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].0.id.as_deref(),
            Some("20261202T100703Z_000002_from_a")
        );
        assert_eq!(got[0].1.get("message"), Some("m"));
        // Looked at again (the folder changed just now: listed again),
        // nothing new is read.
        for _ in 0..3 {
            assert!(c.look(&project).unwrap().is_empty());
        }
        assert_eq!(c.reads, 1);
        copy(3);
        assert_eq!(c.look(&project).unwrap().len(), 1);
        assert_eq!(c.reads, 2);
    }
}
