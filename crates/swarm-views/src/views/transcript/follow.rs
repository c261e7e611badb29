//! `swarm transcript --follow`: after the existing messages, print each new one
//! as soon as its file appears in an outbox, `sent/` or `failed/`.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{sort, Filter, Printer};
use crate::protocol::layout::Worktree;
use crate::protocol::store;
use crate::protocol::trail::{self, Loaded, Original, Place, Trail};
use crate::sys::watch::{DirWatch, Wake};
use crate::text;
use crate::views::vouched;

/// What a follower already knows, so each file is read once and each message
/// printed once (a message moves from the outbox to `sent/` under the same id).
pub struct Seen {
    paths: HashSet<PathBuf>,
    ids: HashSet<String>,
    /// Unparsable files by (size, mtime): a file written in place may be read
    /// half-written, so it is read again once it changes.
    bad: HashMap<PathBuf, (u64, Option<SystemTime>)>,
}

fn version(p: &Path) -> (u64, Option<SystemTime>) {
    match std::fs::symlink_metadata(p) {
        Ok(m) => (m.len(), m.modified().ok()),
        Err(_) => (0, None),
    }
}

impl Seen {
    /// Everything the initial trail holds, printed or filtered out.
    pub fn from_trail(t: &Trail) -> Seen {
        let mut s = Seen {
            paths: HashSet::new(),
            ids: HashSet::new(),
            bad: HashMap::new(),
        };
        for o in &t.originals {
            s.paths.insert(o.path.clone());
            if !o.id().is_empty() {
                s.ids.insert(o.id().to_string());
            }
        }
        for b in &t.bad {
            s.bad.insert(b.path.clone(), version(&b.path));
        }
        s
    }
}

/// The folders a follower watches, with what their files are.
fn folders(t: &Trail) -> Vec<(PathBuf, Place)> {
    let mut v = Vec::new();
    for root in &t.worktrees {
        let wt = Worktree::new(root);
        v.extend([
            (wt.outbox(), Place::Outbox),
            (wt.sent(), Place::Sent),
            (wt.failed(), Place::Failed),
        ]);
    }
    v
}

/// Candidate files: every queue file of the folders on a rescan, else only
/// the changed paths the watcher reported.
fn candidates(dirs: &[(PathBuf, Place)], wake: &Wake) -> Vec<(PathBuf, Place)> {
    let mut out = Vec::new();
    if wake.rescan {
        for (dir, place) in dirs {
            if let Ok(names) = trail::handoff_names(dir) {
                out.extend(names.into_iter().map(|n| (dir.join(n), *place)));
            }
        }
        return out;
    }
    for p in &wake.paths {
        let is_item = store::is_handoff_path(p);
        let place = dirs
            .iter()
            .find(|(d, _)| p.parent() == Some(d.as_path()))
            .map(|(_, pl)| *pl);
        if let (true, Some(place)) = (is_item, place) {
            out.push((p.clone(), place));
        }
    }
    out
}

/// New originals among the candidates; a malformed file is reported on
/// stderr each time it changes and still does not parse.
fn fresh(t: &Trail, seen: &mut Seen, candidates: Vec<(PathBuf, Place)>) -> Vec<Original> {
    let mut out = Vec::new();
    for (path, place) in candidates {
        if seen.paths.contains(&path) {
            continue;
        }
        let v = version(&path);
        if seen.bad.get(&path) == Some(&v) {
            continue;
        }
        let msg = match trail::load_message(&path, t.max_bytes) {
            Loaded::Gone => continue,
            Loaded::Bad(why) => {
                seen.bad.insert(path.clone(), v);
                eprintln!(
                    "warning: skipped {}: {}",
                    text::escape(&path.display().to_string()),
                    text::escape(&why)
                );
                continue;
            }
            Loaded::Ok(m) => m,
        };
        seen.bad.remove(&path);
        seen.paths.insert(path.clone());
        let id = msg.id().unwrap_or("").to_string();
        if !id.is_empty() && !seen.ids.insert(id) {
            continue;
        }
        let reason = match place {
            Place::Failed => trail::failure_reason(&path),
            _ => None,
        };
        out.push(Original::new(&path, place, msg, reason));
    }
    out
}

/// Prints new messages until the output is closed (or the process is
/// interrupted). A closed pipe ends it quietly.
pub fn run(
    t: &Trail,
    mut seen: Seen,
    filter: &Filter,
    printer: &mut Printer,
    out: &mut dyn Write,
) -> io::Result<()> {
    let dirs = folders(t);
    let mut watch = DirWatch::new(dirs.iter().map(|(d, _)| d.clone()).collect());
    // Whatever appeared between the first read and the watch being set.
    let mut wake = Wake {
        rescan: true,
        ..Wake::default()
    };
    loop {
        let news = fresh(t, &mut seen, candidates(&dirs, &wake));
        if !news.is_empty() {
            printer.doubts.extend(vouched::doubts(t, &news));
        }
        let mut refs: Vec<&Original> = news.iter().collect();
        sort(&mut refs);
        for o in refs {
            if filter.matches(&o.msg, &t.roles) {
                out.write_all(printer.entry(o).as_bytes())?;
            }
        }
        out.flush()?;
        wake = watch.wait();
    }
}
