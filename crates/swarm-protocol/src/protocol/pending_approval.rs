//! SwarmForge's approval folder, `<worktree>/.swarmforge/handoffs/pending_approval/`
//! (docs/swarmforge-compat.md §5): the one place a held original lives.
//!
//! Upstream's dashboard (pack_web.bb `pending-files`, `reviews-file`) lists
//! `<id>.handoff` there (its approval id is the file name without
//! `.handoff`) and keeps a person's review comments beside it as
//! `<id>.reviews.json`, a JSON object `{"<path>": "<comments>"}`. Nothing
//! else belongs there; what does (a stray file, comments whose handoff is
//! gone, a handoff that does not parse, a file left in the old `held/`
//! folder) is a [`Problem`] that `swarm status` and `swarm audit --check`
//! report, so a listing that shows no hold can be told from a folder that
//! holds something nobody can act on.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::fsx;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::swarm::Swarm;

/// The suffix of a held original's review comments.
pub const REVIEWS: &str = ".reviews.json";
/// The suffix of a held original.
const HANDOFF: &str = ".handoff";
/// The largest review file read.
pub const MAX_REVIEWS_BYTES: u64 = 1024 * 1024;
/// The largest held original read to check it.
const MAX_HELD_BYTES: u64 = 16 * 1024 * 1024;

/// Something in (or left for) the approval folder that is no hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub path: PathBuf,
    pub why: String,
    /// A `.handoff` that does not parse: the trail reports those itself.
    pub unreadable_handoff: bool,
}

/// SwarmForge's approval id of a held original: its file name without
/// `.handoff`.
pub fn approval_id(hold: &Path) -> String {
    let name = hold
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_suffix(HANDOFF).unwrap_or(&name).to_string()
}

/// The review comments file of the held original at `hold`.
pub fn reviews_file(hold: &Path) -> PathBuf {
    let dir = hold.parent().unwrap_or(Path::new("."));
    dir.join(format!("{}{REVIEWS}", approval_id(hold)))
}

/// The review comments kept beside `hold` (`{"<path>": "<text>"}`); none
/// when there is no file or it is not such an object (as upstream reads it).
pub fn reviews(hold: &Path) -> serde_json::Map<String, serde_json::Value> {
    fsx::read_bounded(&reviews_file(hold), MAX_REVIEWS_BYTES)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| match v {
            serde_json::Value::Object(m) if m.values().all(|v| v.is_string()) => Some(m),
            _ => None,
        })
        .unwrap_or_default()
}

/// Whether the file at `path` is review comments as upstream writes them.
fn is_reviews(path: &Path) -> bool {
    fsx::read_bounded(path, MAX_REVIEWS_BYTES)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| {
            v.as_object()
                .is_some_and(|m| m.values().all(|v| v.is_string()))
        })
}

/// Publishes `reviews` beside `hold` (temp + fsync + rename; the temp file
/// is made in the worktree's outbox temp folder, on the same file system).
pub fn write_reviews(
    w: &Worktree,
    hold: &Path,
    reviews: &serde_json::Map<String, serde_json::Value>,
) -> std::io::Result<()> {
    let tmp = w.outbox_tmp();
    fsx::ensure_dirs(&[&tmp])?;
    let bytes = serde_json::to_vec(reviews).unwrap_or_default();
    fsx::replace(&tmp, &reviews_file(hold), &bytes)
}

/// Removes the review comments of `hold` (none: nothing to do).
pub fn drop_reviews(hold: &Path) -> std::io::Result<()> {
    fsx::remove_file(&reviews_file(hold))
}

/// The files left in the old `held/` folder of `w`, to be moved into
/// [`Worktree::held`].
pub fn old_held_files(w: &Worktree) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(w.old_held()) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Everything in `w`'s approval folder (and its old `held/` folder) that is
/// not a held original or the review comments of one, with why and how to
/// repair it.
pub fn problems(w: &Worktree) -> Vec<Problem> {
    let dir = w.held();
    let mut out = Vec::new();
    let mut p = |path: PathBuf, why: String, unreadable_handoff: bool| {
        out.push(Problem {
            path,
            why,
            unreadable_handoff,
        })
    };
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_symlink() {
                p(
                    path,
                    "a symlink in the approval folder: nothing follows it; remove it".into(),
                    false,
                );
                continue;
            }
            if !t.is_file() {
                p(path, "not a file: the approval folder holds only <id>.handoff and <id>.reviews.json; move it out".into(), false);
                continue;
            }
            if let Some(stem) = name.strip_suffix(REVIEWS) {
                if !dir.join(format!("{stem}{HANDOFF}")).is_file() {
                    p(path, format!("review comments of no held handoff ({stem}.handoff is not here: approved, denied or moved); delete this file"), false);
                } else if !is_reviews(&path) {
                    p(path, "not review comments (a JSON object of \"<path>\": \"<comments>\"); fix or delete it".into(), false);
                }
                continue;
            }
            if !grammar::valid_handoff_name(grammar::strip_collision_prefix(&name)) {
                p(path, "neither a held handoff (<id>.handoff) nor its review comments (<id>.reviews.json); move it out of the approval folder".into(), false);
                continue;
            }
            let why = match fsx::read_bounded(&path, MAX_HELD_BYTES) {
                Err(e) => Some(format!("unreadable: {e}")),
                Ok(b) => Message::parse_bytes(&b).err().map(|e| e.to_string()),
            };
            if let Some(why) = why {
                p(path, format!("a held handoff that is not a message ({why}): nobody can approve or deny it; repair it or move it to the sender's failed/"), true);
            }
        }
    }
    for f in old_held_files(w) {
        p(f, format!("left in the old held/ folder: handoffd moves it to {} when it starts (or move it there yourself)", dir.display()), false);
    }
    out
}

/// Every worktree whose approval folder may hold originals: the roles'
/// and the relay folders' (copies relayed from other hosts are held
/// there), each once, each with whether a symlink is on the way to its
/// approval folder (then nothing there is listed: it would show, and
/// approve would move into an outbox, a file from anywhere).
pub fn worktrees(project: &Project) -> Result<Vec<(Worktree, bool)>> {
    worktrees_in(&Swarm::new(project.clone()))
}

/// [`worktrees`] in a loaded swarm.
pub fn worktrees_in(swarm: &Swarm) -> Result<Vec<(Worktree, bool)>> {
    let project = &swarm.project;
    let roles = swarm.roles()?;
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let relays = project
        .relayed_roles()
        .into_iter()
        .map(|r| project.bridge_relay(&r));
    for wt in roles.worktrees().into_iter().chain(relays) {
        // roles.tsv may name a worktree relative to the project root.
        let wt = if wt.is_absolute() {
            wt
        } else {
            project.root.join(wt)
        };
        let w = Worktree::new(&wt);
        let key = w.handoffs();
        if !seen.insert(key.canonicalize().unwrap_or(key)) {
            continue;
        }
        let linked = symlink_on_the_way(&w);
        out.push((w, linked));
    }
    Ok(out)
}

/// Moves every file of the old `held/` folders into `pending_approval/`
/// (no clobber: a name taken there gets a collision prefix), so a project
/// held before the folder was renamed keeps its holds. Run by handoffd
/// when it starts, before its first pass. Returns where each went.
pub fn adopt_old_held(project: &Project) -> Vec<PathBuf> {
    let mut moved = Vec::new();
    for (w, linked) in worktrees(project).unwrap_or_default() {
        if linked
            || std::fs::symlink_metadata(w.old_held()).is_ok_and(|m| m.file_type().is_symlink())
        {
            continue;
        }
        for f in old_held_files(&w) {
            match fsx::move_into_unique(&f, &w.held(), grammar::collision_names(&f)) {
                Ok(p) => moved.push(p),
                Err(e) => {
                    if let Some(p) = fsx::moved_to(&e) {
                        moved.push(p.to_path_buf());
                    }
                }
            }
        }
        // Gone once empty, so nothing shows the old place again.
        let _ = fsx::remove_empty_dir(&w.old_held());
    }
    moved
}

/// Whether `.swarmforge`, `handoffs` or `pending_approval` of this worktree
/// is a symlink.
fn symlink_on_the_way(w: &Worktree) -> bool {
    [w.swarmforge(), w.handoffs(), w.held()]
        .iter()
        .any(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.file_type().is_symlink()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_id_and_reviews_name() {
        let h = Path::new("/p/.swarmforge/handoffs/pending_approval/50_x_from_a_to_b.handoff");
        assert_eq!(approval_id(h), "50_x_from_a_to_b");
        assert_eq!(
            reviews_file(h),
            Path::new("/p/.swarmforge/handoffs/pending_approval/50_x_from_a_to_b.reviews.json")
        );
    }
}
