//! Listing what arrived in a folder: its `*.handoff` entries, or those
//! that arrived since a time (by inode change time, which the rename that
//! put a file there sets and nobody but root can set back).

use std::path::{Path, PathBuf};
use std::{fs, io};

use crate::protocol::{grammar, store};

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
