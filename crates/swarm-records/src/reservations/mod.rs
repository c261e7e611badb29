//! File reservations (docs/reservations.md): a role announces the files it
//! is about to change (globs, a time to live, a reason); others see them in
//! `swarm reservations`, `swarm status` and the cockpit, and the optional
//! pre-commit guard refuses a commit touching a file another role holds.
//!
//! Stored like everything else: one JSON file per reservation in
//! `.swarmforge/reservations/`, published whole by `fsx`; an expired one is
//! simply ignored (and removed by the next reserve or release). Taking a
//! reservation holds `reservations.flock`, so two roles cannot both take
//! overlapping files at once.
//!
//! A confined agent cannot write `.swarmforge/reservations/` (it could
//! forge or erase another role's): its `swarm reserve` / `swarm release`
//! ask handoffd (forum/requests.rs), which takes and releases in the name
//! of the launcher folder the request came from, exactly once across a
//! daemon kill ([`reserve_once`], [`release_once`]).

pub mod glob;
pub mod guard;

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result, Token};
use crate::fsx;
use crate::protocol::clock::{self, Instant};
use crate::protocol::layout::Project;

/// Longest reason kept, in characters.
pub const MAX_REASON: usize = 200;
/// Most globs in one reservation.
pub const MAX_GLOBS: usize = 64;
/// Default and longest time to live.
pub const DEFAULT_TTL: std::time::Duration = std::time::Duration::from_secs(3600);
pub const MAX_TTL: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);
/// Largest reservation file read back.
const MAX_FILE: u64 = 128 * 1024;

/// One reservation, as its file holds it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Reservation {
    pub id: String,
    pub role: String,
    pub globs: Vec<String>,
    #[serde(default)]
    pub reason: String,
    pub created_at: String,
    pub expires_at: String,
    /// The confined agent's request handoffd took it for (its id), so a
    /// request carried out again after a daemon kill finds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

impl Reservation {
    pub fn expires(&self) -> Option<Instant> {
        clock::parse(&self.expires_at)
    }
    pub fn live(&self, now: Instant) -> bool {
        self.expires().is_some_and(|t| t > now)
    }
    /// The first of its globs that may name one of `globs`' files.
    pub fn overlapping(&self, globs: &[String], files: &[String]) -> Option<(String, String)> {
        for mine in &self.globs {
            for g in globs {
                if glob::overlap(mine, g, files) {
                    return Some((mine.clone(), g.clone()));
                }
            }
        }
        None
    }
    /// `reviewer holds src/** until 2026-12-02T01:30:00Z (reason)`.
    pub fn describe(&self) -> String {
        let reason = if self.reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", crate::text::escape(&self.reason))
        };
        format!(
            "{} holds {} until {}{reason}",
            self.role,
            crate::text::escape(&self.globs.join(" ")),
            self.expires_at
                .get(..19)
                .map_or(self.expires_at.as_str(), |s| s)
        )
    }
}

/// The reservations of a project, and what could not be read.
#[derive(Debug, Default, Serialize)]
pub struct Listing {
    pub reservations: Vec<Reservation>,
    /// Files that are not readable reservations, with the reason.
    pub problems: Vec<String>,
}

pub fn dir(project: &Project) -> PathBuf {
    project.swarmforge().join("reservations")
}

fn tmp(project: &Project) -> PathBuf {
    dir(project).join("tmp")
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Every reservation on disk (expired ones too), oldest first.
pub fn all(project: &Project) -> Result<Listing> {
    let d = dir(project);
    let mut out = Listing::default();
    match std::fs::symlink_metadata(&d) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::bad_file_hint(
                &d,
                "not a folder (a symlink or a file); reservations must live inside the project.",
                "remove it",
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).at(&d),
    }
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .at(&d)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    for n in names {
        let p = d.join(&n);
        let r = fsx::read_bounded(&p, MAX_FILE)
            .map_err(BadReservation::from)
            .and_then(|b| Ok(serde_json::from_slice::<Reservation>(&b)?))
            .and_then(|r| check(&r, &n).map(|()| r));
        match r {
            Ok(r) => out.reservations.push(r),
            Err(e) => out.problems.push(format!("{}: {e}", p.display())),
        }
    }
    out.reservations
        .sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    Ok(out)
}

/// Why a reservation file is not one `reserve` could have written (a
/// file's content is untrusted); the listing names the file, and the
/// repair is `swarm release` or removing it.
#[derive(Debug, thiserror::Error)]
enum BadReservation {
    #[error("{0}")]
    Read(#[from] fsx::ReadRefusal),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("its id does not match its file name")]
    Id,
    #[error("invalid role '{}'", crate::text::escape(.0))]
    Role(String),
    #[error("no globs, or too many")]
    Globs,
    #[error("{0}")]
    Glob(#[from] glob::BadGlob),
    #[error("expires_at is not a time")]
    Expiry,
    #[error("its request is not a request id")]
    Request,
}

/// A file's content is untrusted: its name, role and globs must be ones
/// `reserve` could have written.
fn check(r: &Reservation, file: &str) -> std::result::Result<(), BadReservation> {
    if !valid_id(&r.id) || file != format!("{}.json", r.id) {
        return Err(BadReservation::Id);
    }
    if !crate::protocol::grammar::valid_role(&r.role) {
        return Err(BadReservation::Role(r.role.clone()));
    }
    if r.globs.is_empty() || r.globs.len() > MAX_GLOBS {
        return Err(BadReservation::Globs);
    }
    for g in &r.globs {
        normalised_glob(g)?;
    }
    if r.expires().is_none() {
        return Err(BadReservation::Expiry);
    }
    if r.request.as_deref().is_some_and(|q| !valid_request(q)) {
        return Err(BadReservation::Request);
    }
    Ok(())
}

/// `g` as `reserve` stores it: a glob [`glob::normalise`] leaves as it is
/// (what a file or a confined agent's request names is checked so).
pub fn normalised_glob(g: &str) -> std::result::Result<(), glob::BadGlob> {
    let root = Path::new("/");
    match glob::normalise(g, root, root) {
        Ok(n) if n == g => Ok(()),
        Ok(_) => Err(glob::BadGlob(format!(
            "glob '{}' is not a normalised project path",
            crate::text::escape(g)
        ))),
        Err(e) => Err(e),
    }
}

/// A confined agent's request id, as forum/requests.rs makes them.
fn valid_request(id: &str) -> bool {
    (8..=48).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The reservations in force now.
pub fn active(project: &Project) -> Result<Vec<Reservation>> {
    let now = clock::now();
    Ok(all(project)?
        .reservations
        .into_iter()
        .filter(|r| r.live(now))
        .collect())
}

/// What `reserve` is asked for.
pub struct Request<'a> {
    pub role: &'a str,
    /// Already normalised (see [`glob::normalise`]).
    pub globs: Vec<String>,
    pub ttl: std::time::Duration,
    pub reason: &'a str,
    /// The checkout whose files tell whether two globs overlap (the
    /// caller's worktree; handoffd's: the role's).
    pub worktree: &'a Path,
    /// Take it even when another role holds an overlapping glob.
    pub force: bool,
}

impl Request<'_> {
    /// What `reserve` refuses before it looks at the reservations (exit 1):
    /// also asked by a confined agent before it asks handoffd. The globs
    /// are checked where they are normalised ([`glob::normalise`]).
    pub fn check(&self) -> Result<()> {
        if self.globs.is_empty() || self.globs.len() > MAX_GLOBS {
            return Err(Error::bad_input(format!("name 1 to {MAX_GLOBS} globs")));
        }
        if self.ttl.is_zero() || self.ttl > MAX_TTL {
            return Err(Error::bad_input(
                "--ttl must be more than 0 and at most 30d",
            ));
        }
        if self.reason.chars().count() > MAX_REASON || self.reason.chars().any(char::is_control) {
            return Err(Error::bad_input(format!(
                "--reason must be one line of at most {MAX_REASON} characters"
            )));
        }
        Ok(())
    }
}

/// Takes a reservation; refused (exit 2) when another role holds a glob
/// that overlaps, naming the holder. Returns it and the overlapping ones
/// (only non-empty with `force`).
pub fn reserve(project: &Project, req: &Request) -> Result<(Reservation, Vec<Reservation>)> {
    reserve_with(project, req, None)
}

/// [`reserve`] for handoffd carrying out a confined agent's request
/// `request`: taken once, however often it is carried out. The
/// reservation names the request; found (live or not), it is the answer
/// again and nothing is written.
pub fn reserve_once(
    project: &Project,
    req: &Request,
    request: &str,
) -> Result<(Reservation, Vec<Reservation>)> {
    reserve_with(project, req, Some(request))
}

fn reserve_with(
    project: &Project,
    req: &Request,
    request: Option<&str>,
) -> Result<(Reservation, Vec<Reservation>)> {
    req.check()?;
    let files = repo_files(&project.root, req.worktree)?;
    let d = dir(project);
    fsx::ensure_dirs(&[&d, &tmp(project)]).at(&d)?;
    let lock_path = project.swarmforge().join("reservations.flock");
    let _lock = fsx::lock(&lock_path).at(&lock_path)?;
    let listing = all(project)?;
    let now = clock::now();
    let others = |rs: &[Reservation]| -> Vec<Reservation> {
        rs.iter()
            .filter(|r| r.live(now) && r.role != req.role)
            .filter(|r| r.overlapping(&req.globs, &files).is_some())
            .cloned()
            .collect()
    };
    // Carried out before (a daemon killed before it answered): the same
    // answer, found before an expired one is pruned.
    if let Some(q) = request {
        if let Some(r) = listing
            .reservations
            .iter()
            .find(|r| r.role == req.role && r.request.as_deref() == Some(q))
        {
            let overlaps = if req.force {
                others(&listing.reservations)
            } else {
                Vec::new()
            };
            return Ok((r.clone(), overlaps));
        }
    }
    prune(project, &listing, now);
    let others = others(&listing.reservations);
    if !others.is_empty() && !req.force {
        return Err(overlap_refusal(req, &files, &others));
    }
    publish_new(project, req, request, now, others)
}

/// The refusal of a reservation that overlaps `others` (without
/// `--force`): each overlap, then who holds them and what to do.
fn overlap_refusal(req: &Request, files: &[String], others: &[Reservation]) -> Error {
    let lines: Vec<String> = others
        .iter()
        .map(|r| {
            let (theirs, ours) = r.overlapping(&req.globs, files).unwrap_or_default();
            format!(
                "  {} overlaps {}: {}",
                crate::text::escape(&ours),
                crate::text::escape(&theirs),
                r.describe()
            )
        })
        .collect();
    let holders: Vec<&str> = others.iter().map(|r| r.role.as_str()).collect();
    Error::refused(
        Token::Reserved,
        format!(
            "reserved by another role:\n{}\n  hint: wait for it to expire, ask {} to run `swarm release`, or take it anyway with --force (both then show)",
            lines.join("\n"),
            holders.join(", ")
        ),
        Vec::new(),
    )
}

/// Publishes the new reservation under the first id free this second
/// (never over another one's file), with the overlaps it was taken over.
fn publish_new(
    project: &Project,
    req: &Request,
    request: Option<&str>,
    now: Instant,
    others: Vec<Reservation>,
) -> Result<(Reservation, Vec<Reservation>)> {
    let d = dir(project);
    let expires = now
        + chrono::Duration::from_std(req.ttl)
            .map_err(|_| Error::bad_input("--ttl is out of range"))?;
    for n in 1..=1000u32 {
        let id = format!("{}_{}_{n}", clock::idts(now), req.role);
        let r = Reservation {
            id: id.clone(),
            role: req.role.to_string(),
            globs: req.globs.clone(),
            reason: req.reason.to_string(),
            created_at: clock::iso(now),
            expires_at: clock::iso(expires),
            request: request.map(str::to_string),
        };
        let bytes = serde_json::to_vec_pretty(&r).map_err(|e| Error::internal(e.to_string()))?;
        let p = d.join(format!("{id}.json"));
        match fsx::publish(&tmp(project), &p, &bytes) {
            Ok(()) => return Ok((r, others)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).at(&p),
        }
    }
    Err(Error::conflict("too many reservations in one second"))
}

/// Removes expired reservations (best effort: they are ignored anyway).
fn prune(project: &Project, listing: &Listing, now: Instant) {
    for r in listing.reservations.iter().filter(|r| !r.live(now)) {
        let _ = fsx::remove_file(&dir(project).join(format!("{}.json", r.id)));
    }
}

/// Releases `role`'s reservations: all of them when `globs` is empty, else
/// those globs (a reservation left without globs is removed). Returns the
/// globs released; refused when `role` holds none of the named ones.
pub fn release(project: &Project, role: &str, globs: &[String]) -> Result<Vec<String>> {
    release_with(project, role, globs, None)
}

/// [`release`] for handoffd carrying out a confined agent's request:
/// released once, however often it is carried out. What it releases is
/// written to `mark` (handoffd's own file beside the taken request) before
/// any reservation changes; with `mark` there, exactly those globs are
/// released again (those still held) and are the answer.
pub fn release_once(
    project: &Project,
    role: &str,
    globs: &[String],
    mark: &Path,
) -> Result<Vec<String>> {
    release_with(project, role, globs, Some(mark))
}

/// What [`release_once`] keeps in its mark.
#[derive(Serialize, Deserialize)]
struct Planned {
    released: Vec<String>,
}

fn release_with(
    project: &Project,
    role: &str,
    globs: &[String],
    mark: Option<&Path>,
) -> Result<Vec<String>> {
    let d = dir(project);
    if !d.exists() {
        return if globs.is_empty() {
            Ok(Vec::new())
        } else {
            Err(not_held(role, globs, &[]))
        };
    }
    fsx::ensure_dirs(&[&tmp(project)]).at(&d)?;
    let lock_path = project.swarmforge().join("reservations.flock");
    let _lock = fsx::lock(&lock_path).at(&lock_path)?;
    let planned: Option<Vec<String>> = mark.and_then(|m| {
        fsx::read_bounded(m, MAX_FILE)
            .ok()
            .and_then(|b| serde_json::from_slice::<Planned>(&b).ok())
            .map(|p| p.released)
    });
    let listing = all(project)?;
    let now = clock::now();
    prune(project, &listing, now);
    let mine: Vec<&Reservation> = listing
        .reservations
        .iter()
        .filter(|r| r.role == role && r.live(now))
        .collect();
    if planned.is_none() {
        check_held(role, globs, &mine)?;
    }
    let goes = |g: &String| match &planned {
        Some(p) => p.contains(g),
        None => globs.is_empty() || globs.contains(g),
    };
    let mut released: Vec<String> = mine
        .iter()
        .flat_map(|r| r.globs.iter())
        .filter(|g| goes(g))
        .cloned()
        .collect();
    match (&planned, mark) {
        (Some(p), _) => released = p.clone(),
        (None, Some(m)) => {
            let bytes = serde_json::to_vec(&Planned {
                released: released.clone(),
            })
            .map_err(|e| Error::internal(e.to_string()))?;
            let at = m.parent().unwrap_or(Path::new("."));
            fsx::replace(at, m, &bytes).at(m)?;
        }
        (None, None) => {}
    }
    for r in mine {
        release_globs(project, r, &goes)?;
    }
    Ok(released)
}

/// Refuses a release of named globs `role` does not hold (all of them
/// are: nothing else to check).
fn check_held(role: &str, globs: &[String], mine: &[&Reservation]) -> Result<()> {
    if globs.is_empty() {
        return Ok(());
    }
    let held: Vec<&String> = mine.iter().flat_map(|r| r.globs.iter()).collect();
    let missing: Vec<String> = globs
        .iter()
        .filter(|g| !held.contains(g))
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let held: Vec<String> = held.into_iter().cloned().collect();
    Err(not_held(role, &missing, &held))
}

/// Releases the globs of `r` that `goes`: the reservation removed when
/// none is left, else rewritten with the rest.
fn release_globs(project: &Project, r: &Reservation, goes: &dyn Fn(&String) -> bool) -> Result<()> {
    let p = dir(project).join(format!("{}.json", r.id));
    let (gone, keep): (Vec<String>, Vec<String>) = r.globs.iter().cloned().partition(|g| goes(g));
    if gone.is_empty() {
        return Ok(());
    }
    if keep.is_empty() {
        fsx::remove_file(&p).at(&p)?;
    } else {
        let kept = Reservation {
            globs: keep,
            ..r.clone()
        };
        let bytes = serde_json::to_vec_pretty(&kept).map_err(|e| Error::internal(e.to_string()))?;
        fsx::replace(&tmp(project), &p, &bytes).at(&p)?;
    }
    Ok(())
}

fn not_held(role: &str, globs: &[String], held: &[String]) -> Error {
    Error::refused(
        Token::NotReserved,
        format!(
            "{role} holds no reservation of {}; it holds: {}",
            crate::text::escape(&globs.join(" ")),
            if held.is_empty() {
                "none".to_string()
            } else {
                crate::text::escape(&held.join(" "))
            }
        ),
        Vec::new(),
    )
}

/// Longest the listing of a checkout's files may take (`git ls-files`):
/// the checkout may be an agent's, and a FIFO named `.gitignore` there
/// blocks git for ever. A repository of 100 000 files lists in well under
/// a second.
pub const LIST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Most bytes of file names the listing may print: some 200 000 paths of
/// 40 bytes; a tree of untracked files with long names could otherwise
/// fill handoffd's memory.
pub const MAX_LISTING: u64 = 8 * 1024 * 1024;

/// The repository's files as seen from `worktree` (tracked and untracked,
/// ignored ones left out), to tell whether two globs overlap. The worktree
/// may be an agent's: git is pinned to the project's own git folders with
/// nothing its config names run (sys::git::Pinned), and bounded in time
/// ([`LIST_TIMEOUT`]) and output ([`MAX_LISTING`]): past either the
/// reservation is refused, saying which. Empty when git cannot tell (then
/// only equal or literal globs overlap).
pub fn repo_files(root: &Path, worktree: &Path) -> Result<Vec<String>> {
    let Ok(git) = crate::sys::git::Pinned::new(root, worktree) else {
        return Ok(Vec::new());
    };
    let args = ["ls-files", "-z", "-co", "--exclude-standard"];
    match git.call_bounded(&args, LIST_TIMEOUT, MAX_LISTING) {
        Ok(o) if o.ok => Ok(o
            .stdout
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()),
        Ok(_) => Ok(Vec::new()),
        Err(why) => Err(Error::process(format!(
            "cannot tell which files of {} the globs name: {why} (at most {}s and {} MiB of file names)\n  hint: remove what makes the listing so slow or so long there (a FIFO or a folder named .gitignore, a huge tree of untracked files), or add it to .gitignore",
            worktree.display(),
            LIST_TIMEOUT.as_secs(),
            MAX_LISTING / (1024 * 1024)
        ))),
    }
}
