//! `swarm archive --before <date>`: finished items (delivered and refused
//! originals, completed copies and batches) created before a day move out of
//! the live folders into `archive/<YYYY-MM-DD>/` of their worktree, so the
//! folders every command lists stay small while the trail stays whole: the
//! trail reader, and with it transcript, receipts and the audit, reads the
//! archive folders too.
//!
//! Each entry moves by one no-clobber rename of its own, its day taken from
//! its name, so an archive killed at any point is finished by running it
//! again, and nothing is ever in two places or in none.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::Serialize;

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::grammar;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::store::{self, Kind};

/// What one archive run moved, per worktree.
#[derive(Debug, Default, Serialize)]
pub struct Archived {
    pub worktree: PathBuf,
    /// Originals from `sent/` and `failed/` (with their `.error` notes).
    pub originals: usize,
    /// Copies and batches from `inbox/completed/`.
    pub completed: usize,
}

/// Parses `--before`: a day, `YYYY-MM-DD` (UTC).
pub fn parse_day(s: &str) -> Result<NaiveDate> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|_| {
        Error::bad_input(format!(
            "--before must be a day, YYYY-MM-DD (UTC); got '{}'.\n  hint: swarm archive --before 2026-11-01",
            crate::text::escape(s)
        ))
    })
}

/// The day an entry of a finished folder was created, from its name alone:
/// a queue file (collision prefixes allowed), its `.error` note, or a
/// `batch_<IDTS>_<N>` folder. `None` for anything else (left in place).
fn day_of(name: &str) -> Option<NaiveDate> {
    let file = name.strip_suffix(".error").unwrap_or(name);
    let t = match grammar::FileName::parse(file) {
        Some(f) => f.message_id().time()?,
        None if grammar::is_batch_dir_name(name) => grammar::id_time(name.strip_prefix("batch_")?)?,
        None => return None,
    };
    Some(t.date_naive())
}

/// Moves every finished entry of the project created before `before`.
/// `say` hears one line per worktree.
pub fn archive(
    project: &Project,
    before: NaiveDate,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<Archived>> {
    let roles = Roles::load(&project.roles_tsv())?;
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut out = Vec::new();
    for p in roles.worktrees() {
        let p = project.root.join(p);
        let Ok(real) = p.canonicalize() else { continue };
        if seen.contains(&real) {
            continue;
        }
        seen.push(real.clone());
        let wt = Worktree::new(&real);
        let mut a = Archived {
            worktree: real,
            ..Archived::default()
        };
        a.originals += move_old(&wt.sent(), &wt, "sent", before)?;
        a.originals += move_old(&wt.failed(), &wt, "failed", before)?;
        a.completed += move_old(&wt.completed(), &wt, "completed", before)?;
        say(&format!(
            "{}: archived {} originals and {} completed items",
            a.worktree.display(),
            a.originals,
            a.completed
        ));
        out.push(a);
    }
    Ok(out)
}

/// Moves the entries of `dir` created before `before` into
/// `archive/<day>/<kind>/`. Handoff files, their `.error` notes and batch
/// folders move; anything else (a planted name, a symlink) stays. Counts the
/// handoff files and batches moved.
fn move_old(dir: &Path, wt: &Worktree, kind: &str, before: NaiveDate) -> Result<usize> {
    let mut moved = 0;
    for e in store::entries(dir).at(dir)? {
        let e = e.at(dir)?;
        let name = e.name.clone();
        let is_batch = e.kind == Kind::Batch;
        let entry_ok = match e.kind {
            Kind::Batch | Kind::Handoff => true,
            Kind::Sidecar => {
                e.is_file()
                    && name
                        .strip_suffix(store::NOTE_SUFFIX)
                        .is_some_and(grammar::valid_handoff_name)
            }
            Kind::Odd | Kind::Temp | Kind::Stray => false,
        };
        let Some(day) = day_of(&name).filter(|d| entry_ok && *d < before) else {
            continue;
        };
        let dest = wt
            .archive()
            .join(day.format("%Y-%m-%d").to_string())
            .join(kind);
        fsx::ensure_dirs(&[&dest]).at(&dest)?;
        let path = e.path;
        // A batch keeps a batch name when its name is taken: the trail
        // reads `batch_*` folders only (`batch_<name>_<n>`, never a stamp
        // in front).
        let names: Box<dyn Iterator<Item = String>> = if is_batch {
            let n = name.clone();
            Box::new(std::iter::once(n.clone()).chain((2..1000).map(move |i| format!("{n}_{i}"))))
        } else {
            Box::new(grammar::collision_names(&path))
        };
        match fsx::move_into_unique(&path, &dest, names) {
            Ok(_) => {}
            // Moved, only a folder fsync failed: it is archived all the same.
            Err(err) if fsx::moved_to(&err).is_some() => {}
            // Gone meanwhile (another archive run): nothing to do.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(Error::io(&path, err)),
        }
        if !name.ends_with(".error") {
            moved += 1;
        }
    }
    Ok(moved)
}
