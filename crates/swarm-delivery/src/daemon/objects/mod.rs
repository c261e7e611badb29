//! Git objects a confined agent wrote join the project's store only once
//! their content is checked (docs/security.md, "Git objects").
//!
//! git never hashes a loose object again when it reads it, so an agent
//! that could write the project's `.git/objects` could rewrite a reviewed
//! commit's blob under its old id, and the person's merge would bring in
//! what nobody reviewed. So a sandbox's `.git/objects` is the role's own
//! quarantine (`.swarmforge/objects/quarantine/<role>/`), with the
//! project's store given read-only beside it as an alternate
//! (launch/confine/mounts.rs). At every turn of its loop, before a pass,
//! handoffd takes in what the quarantines hold, as git's receive path does:
//! a loose object is copied out once, hashed as it is copied
//! (sys::git_object) and published under its id in the store only when the
//! hash is its name; a pack goes through `git index-pack`, which names each
//! object by hashing it. The copy in the quarantine is then removed (the
//! agent's git finds the object in the store from then on).
//!
//! A refused object is kept in `.swarmforge/objects/refused/` (its bytes,
//! never run or read as git's) and said in the log; `swarm doctor` reports
//! it, and reports objects left waiting when no handoffd takes them in.
//!
//! The invariant: nothing enters the store but bytes hashed here (or by
//! index-pack) to the id they are published under; an id already in the
//! store is never replaced; nothing in a quarantine is followed through a
//! link (each folder is held, fsx::HeldDir). Each turn takes at most
//! [`TURN_OBJECTS`] objects and [`TURN_BYTES`] bytes, so an agent cannot
//! stall delivery; the rest waits for the next turn. Its order in the loop
//! keeps a `git_handoff`'s commit in the store before the message that
//! names it is delivered: the agent commits, then sends, and a pass follows
//! the take-in of the turn it is seen in.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::fsx::{self, HeldDir};
use crate::protocol::clock;
use crate::protocol::layout::Project;
use crate::sys::git::Pinned;
use crate::sys::git_object::{Format, Judged, LooseCheck, MAX_OBJECT};

/// Most objects taken in per turn of the loop.
pub const TURN_OBJECTS: usize = 4096;
/// Most bytes (as stored) taken in per turn of the loop.
pub const TURN_BYTES: u64 = 256 << 20;
/// Most quarantines looked at.
const MAX_ROLES: usize = 1024;
/// How long `git index-pack` may take for one pack.
const PACK_TIME: Duration = Duration::from_secs(120);
/// A folder git made for objects is removed once empty for this long (git
/// makes it again when it needs it; a younger one may be about to be used).
const EMPTY_FOR: Duration = Duration::from_secs(2);

/// What one take-in did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Taken {
    /// Objects (and packs) published into the store.
    pub objects: usize,
    /// Objects and packs refused, each kept in the refused folder.
    pub refused: usize,
    /// True when a bound stopped it before it was done.
    pub more: bool,
}

/// Takes the quarantines' objects into the project's store.
pub struct Quarantines {
    root: PathBuf,
    store: PathBuf,
    quarantine: PathBuf,
    refused: PathBuf,
    format: Option<Format>,
    failing: bool,
    /// The quarantines found empty, with their stamps then ([`Stamp`]).
    quiet: std::collections::HashMap<String, Stamp>,
    /// The quarantines' names, with the stamp of their folder then.
    roles: Option<(SystemTime, Vec<String>)>,
}

/// When a quarantine's folder and its `pack` folder last changed. git
/// makes a fan-out folder (or a pack) for each new object there, so a
/// quarantine found empty whose stamp is the same is still empty: it is
/// not listed again. A stamp is kept only when it was older than
/// [`SETTLED`] when read, so a change made later cannot bear the same time
/// on a file system whose clock is coarse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dir: SystemTime,
    pack: Option<SystemTime>,
}

/// Longer than any file system's time-stamp granularity.
const SETTLED: Duration = Duration::from_millis(50);

fn changed_at(p: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok()
}

fn settled(t: SystemTime, now: SystemTime) -> bool {
    now.duration_since(t).is_ok_and(|age| age > SETTLED)
}

/// Why a role's objects could not be taken (the caller says which
/// quarantine, into which store, and what to check).
#[derive(Debug, thiserror::Error)]
enum NotTaken {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Git(#[from] crate::sys::git::GitError),
    #[error("git names an object format this build does not know: {0}")]
    Format(String),
    #[error("{}: {source}", path.display())]
    Publish {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

impl Quarantines {
    /// For `project`; None when it has no git folder of its own.
    pub fn new(project: &Project) -> Option<Quarantines> {
        let store = project.root.join(".git/objects");
        if !std::fs::symlink_metadata(&store).is_ok_and(|m| m.is_dir()) {
            return None;
        }
        // A copy a killed handoffd left half-staged (git ignores it).
        let _ = fsx::clean_stale_temps(&store, Duration::from_secs(3600));
        Some(Quarantines {
            root: project.root.clone(),
            store,
            quarantine: project.quarantine_dir(),
            refused: project.refused_objects_dir(),
            format: None,
            failing: false,
            quiet: Default::default(),
            roles: None,
        })
    }

    /// One turn's take-in from every quarantine, bounded.
    pub fn take_in(&mut self) -> Taken {
        let mut taken = Taken::default();
        let Some(roles) = self.role_names() else {
            return taken;
        };
        let mut budget = Budget {
            objects: TURN_OBJECTS,
            bytes: TURN_BYTES,
        };
        for role in roles.iter().take(MAX_ROLES) {
            let base = self.quarantine.join(role);
            let now = SystemTime::now();
            let Some(dir) = changed_at(&base) else {
                continue;
            };
            let stamp = Stamp {
                dir,
                pack: changed_at(&base.join("pack")),
            };
            if self.quiet.get(role) == Some(&stamp) {
                continue;
            }
            let Ok(q) = HeldDir::open(&base) else {
                continue;
            };
            let before = taken.objects + taken.refused;
            let result = self.take_role(role, &q, &mut budget, &mut taken);
            match result {
                Ok(true)
                    if taken.objects + taken.refused == before
                        && settled(stamp.dir, now)
                        && stamp.pack.is_none_or(|p| settled(p, now)) =>
                {
                    self.quiet.insert(role.clone(), stamp);
                }
                _ => {
                    self.quiet.remove(role);
                }
            }
            if let Err(e) = result {
                if !std::mem::replace(&mut self.failing, true) {
                    eprintln!(
                        "handoffd: {}: cannot take the role's git objects into {}: {e}; its commits are not in your repository until they are (check the folder's owner and free space)",
                        q.path().display(),
                        self.store.display()
                    );
                }
                return taken;
            }
            if budget.spent() {
                taken.more = true;
                break;
            }
        }
        self.failing = false;
        taken
    }

    /// The quarantines' names, listed again only when their folder changed.
    fn role_names(&mut self) -> Option<Vec<String>> {
        let now = SystemTime::now();
        let stamp = changed_at(&self.quarantine)?;
        if let Some((seen, names)) = &self.roles {
            if *seen == stamp {
                return Some(names.clone());
            }
        }
        let names = HeldDir::open(&self.quarantine).ok()?.names().ok()?;
        self.roles = settled(stamp, now).then(|| (stamp, names.clone()));
        Some(names)
    }

    fn format(&mut self) -> Result<Format, NotTaken> {
        if let Some(f) = self.format {
            return Ok(f);
        }
        let said = Pinned::new(&self.root, &self.root)
            .and_then(|g| g.stdout(&["rev-parse", "--show-object-format"]))?;
        let f = Format::parse(&said).ok_or(NotTaken::Format(said))?;
        self.format = Some(f);
        Ok(f)
    }

    fn take_role(
        &mut self,
        role: &str,
        q: &HeldDir,
        budget: &mut Budget,
        taken: &mut Taken,
    ) -> Result<bool, NotTaken> {
        let names = q.names()?;
        let fan: Vec<&String> = names.iter().filter(|n| is_fan(n)).collect();
        let mut empty = fan.is_empty();
        if fan.is_empty() && !names.iter().any(|n| n == "pack") {
            return Ok(true);
        }
        let format = self.format()?;
        for xx in fan {
            let Ok(d) = q.open_dir(xx) else { continue };
            let objects = d.names()?;
            for rest in objects {
                if budget.spent() {
                    return Ok(false);
                }
                let id = format!("{xx}{rest}");
                if format.is_id(&id) {
                    self.take_loose(role, &d, xx, &rest, format, budget, taken)?;
                }
            }
            let old = q
                .modified(xx)
                .ok()
                .and_then(|m| SystemTime::now().duration_since(m).ok())
                .is_some_and(|age| age >= EMPTY_FOR);
            if old {
                let _ = q.remove_empty_dir(xx);
            }
        }
        if let Ok(packs) = q.open_dir("pack") {
            empty &= self.take_packs(role, &packs, budget, taken)?;
        }
        Ok(empty)
    }

    /// One loose object: published under its id when its content hashes to
    /// it, else kept in the refused folder; removed from the quarantine
    /// either way. One the store holds already is only removed.
    #[allow(clippy::too_many_arguments)]
    fn take_loose(
        &self,
        role: &str,
        d: &HeldDir,
        xx: &str,
        rest: &str,
        format: Format,
        budget: &mut Budget,
        taken: &mut Taken,
    ) -> Result<(), NotTaken> {
        let dest = self.store.join(xx).join(rest);
        if std::fs::symlink_metadata(&dest).is_ok() {
            let _ = d.remove(rest);
            return Ok(());
        }
        let Ok(file) = d.open_file(rest) else {
            // A temp file git is still writing has another name; anything
            // else under an object's name is not an object.
            let _ = d.remove(rest);
            return Ok(());
        };
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        budget.objects = budget.objects.saturating_sub(1);
        budget.bytes = budget.bytes.saturating_sub(size);
        let id = format!("{xx}{rest}");
        let mut check = LooseCheck::new(format);
        let mut from = Judged {
            from: std::io::Read::take(file, MAX_OBJECT + 1),
            check: &mut check,
        };
        let staged = fsx::stage(&self.store, "swarm-object", &mut from, 0o444)?;
        match check.verdict(&id) {
            Ok(()) => {
                fsx::ensure_dirs(&[self.store.join(xx)])?;
                match staged.publish(&dest) {
                    Ok(()) => taken.objects += 1,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(source) => return Err(NotTaken::Publish { path: dest, source }),
                }
            }
            Err(why) => {
                taken.refused += 1;
                let kept = self.keep(role, &id, staged);
                eprintln!(
                    "handoffd: role {role} wrote a git object {id} that is not what its name says: {why}; it was not taken into your repository{kept}"
                );
            }
        }
        let _ = d.remove(rest);
        Ok(())
    }

    /// Each complete pack (its `.idx` written: git writes it last) through
    /// `git index-pack`, then removed with the files beside it. True when
    /// the folder held nothing.
    fn take_packs(
        &self,
        role: &str,
        packs: &HeldDir,
        budget: &mut Budget,
        taken: &mut Taken,
    ) -> Result<bool, NotTaken> {
        let names = packs.names()?;
        let empty = names.is_empty();
        for idx in names.iter().filter(|n| n.ends_with(".idx")) {
            if budget.spent() {
                return Ok(false);
            }
            let stem = &idx[..idx.len() - 4];
            let pack = format!("{stem}.pack");
            let Ok(file) = packs.open_file(&pack) else {
                continue;
            };
            let size = file.metadata().map(|m| m.len()).unwrap_or(0);
            budget.objects = budget.objects.saturating_sub(1);
            budget.bytes = budget.bytes.saturating_sub(size);
            let said = if size > MAX_OBJECT {
                Err(format!(
                    "it is {size} bytes, more than the {MAX_OBJECT} a pack may have here"
                ))
            } else {
                Pinned::new(&self.root, &self.root)
                    .and_then(|g| g.index_pack(file, PACK_TIME))
                    .map_err(|e| e.to_string())
            };
            match said {
                Ok(_) => taken.objects += 1,
                Err(why) => {
                    taken.refused += 1;
                    let note = self.note(role, stem, &why);
                    eprintln!(
                        "handoffd: role {role} wrote a git pack {stem} that git would not index: {}; it was not taken into your repository{note}",
                        crate::text::escape(&why)
                    );
                }
            }
            for n in names.iter().filter(|n| n.starts_with(stem)) {
                let _ = packs.remove(n);
            }
        }
        Ok(empty)
    }

    /// Keeps a refused object's bytes for the person; says where.
    fn keep(&self, role: &str, id: &str, staged: fsx::Staged) -> String {
        let to = self.refused.join(refused_name(role, id));
        match fsx::ensure_dirs(&[&self.refused]).and_then(|_| staged.publish(&to)) {
            Ok(()) => format!(
                " (its bytes are kept in {}; `swarm doctor` reports it)",
                to.display()
            ),
            Err(_) => String::new(),
        }
    }

    /// Keeps why a pack was refused (not its bytes: a pack can be large).
    fn note(&self, role: &str, stem: &str, why: &str) -> String {
        let to = self.refused.join(refused_name(role, stem));
        let text = crate::text::escape(why);
        match fsx::ensure_dirs(&[&self.refused])
            .and_then(|_| fsx::publish(&self.refused, &to, text.as_bytes()))
        {
            Ok(()) => format!(" (kept as {}; `swarm doctor` reports it)", to.display()),
            Err(_) => String::new(),
        }
    }
}

/// A refused object's file name: when, whose, which, `_` between them
/// (in none of a time stamp, a role name or an object or pack name).
fn refused_name(role: &str, id: &str) -> String {
    format!("{}_{role}_{id}", clock::idts(clock::now()))
}

/// The role and object a refused file's name tells.
pub fn refused_parts(name: &str) -> Option<(&str, &str)> {
    let mut parts = name.splitn(3, '_').skip(1);
    Some((parts.next()?, parts.next()?))
}

/// One object (or pack) handoffd refused, as the file it kept names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub role: String,
    pub id: String,
    /// When it was refused.
    pub at: Option<clock::Instant>,
    /// The kept file (the person removes it once they have looked).
    pub path: PathBuf,
}

/// The refused objects still kept, oldest first, at most `max` (for
/// `swarm doctor` and `swarm status`).
pub fn refused(project: &Project, max: usize) -> Vec<Refused> {
    let dir = project.refused_objects_dir();
    let mut names = HeldDir::open(&dir)
        .and_then(|d| d.names())
        .unwrap_or_default();
    names.retain(|n| !n.starts_with('.'));
    names.sort();
    names
        .iter()
        .take(max)
        .map(|n| {
            let (role, id) = refused_parts(n).unwrap_or(("?", n));
            Refused {
                role: role.to_string(),
                id: id.to_string(),
                at: n.split('_').next().and_then(clock::parse_idts),
                path: dir.join(n),
            }
        })
        .collect()
}

/// A fan-out folder of loose objects: two lower-case hex digits.
fn is_fan(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

struct Budget {
    objects: usize,
    bytes: u64,
}

impl Budget {
    fn spent(&self) -> bool {
        self.objects == 0 || self.bytes == 0
    }
}

/// Loose objects and packs waiting in any quarantine, with the oldest's
/// age (for `swarm doctor`: none wait longer than a turn while handoffd
/// runs).
pub fn waiting(quarantine: &Path) -> Vec<(String, usize, Duration)> {
    let mut out = Vec::new();
    let Ok(all) = HeldDir::open(quarantine) else {
        return out;
    };
    let now = SystemTime::now();
    for role in all.names().unwrap_or_default().iter().take(MAX_ROLES) {
        let Ok(q) = all.open_dir(role) else { continue };
        let (mut n, mut oldest) = (0, Duration::ZERO);
        let mut count = |d: &HeldDir, name: &str| {
            n += 1;
            let age = d
                .modified(name)
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default();
            oldest = oldest.max(age);
        };
        for xx in q.names().unwrap_or_default().iter().filter(|n| is_fan(n)) {
            if let Ok(d) = q.open_dir(xx) {
                for name in d
                    .names()
                    .unwrap_or_default()
                    .iter()
                    .filter(|n| !n.starts_with("tmp_"))
                {
                    count(&d, name);
                }
            }
        }
        if let Ok(p) = q.open_dir("pack") {
            for name in p
                .names()
                .unwrap_or_default()
                .iter()
                .filter(|n| n.ends_with(".pack"))
            {
                count(&p, name);
            }
        }
        if n > 0 {
            out.push((role.clone(), n, oldest));
        }
    }
    out
}

#[cfg(test)]
mod tests;

/// What the take-in costs a turn of handoffd's loop when nothing waits:
/// ten roles' empty quarantines, against one `fsx::publish` (what each
/// message file costs) in the same run. Rerun with
/// `cargo test --release --lib take_in_cost -- --ignored --nocapture`
/// (docs/benchmarks.md).
#[cfg(test)]
mod cost;
