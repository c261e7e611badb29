//! handoffd's pid file (`.swarmforge/daemon/handoffd.pid`): locked by the
//! running daemon (an OS lock that dies with it), and put back when someone
//! removes or replaces it, so `swarm stop` and `swarm status` still find the
//! daemon. The outbox locks, not this file, keep a second daemon out.

use std::path::Path;

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::layout::Project;

/// Takes the lock on the pid file, making sure the file we locked is still
/// the one at that path (a `swarm stop` may have removed it between our open
/// and our lock; a lock on an unlinked file would let a second daemon start).
pub(super) fn lock(pid_path: &Path) -> Result<Option<fsx::Lock>> {
    use std::os::unix::fs::MetadataExt;
    for _ in 0..5 {
        let Some(lock) = fsx::try_lock(pid_path).at(pid_path)? else {
            return Ok(None);
        };
        let held = lock.file().metadata().at(pid_path)?;
        let now = std::fs::metadata(pid_path).ok();
        if now.is_some_and(|m| m.ino() == held.ino() && m.dev() == held.dev()) {
            return Ok(Some(lock));
        }
    }
    Err(Error::bad_file(
        pid_path,
        "the pid file keeps being replaced; is another `swarm stop` or handoffd racing?",
    ))
}

/// Puts the pid file back when someone deleted or replaced it, so
/// `swarm stop` and `swarm status` still find this daemon (the outbox
/// locks, not this file, keep a second daemon out).
pub(super) fn keep(project: &Project, held: &mut Option<fsx::Lock>) {
    use std::os::unix::fs::MetadataExt;
    let path = project.pid_file();
    let ours = held.as_ref().and_then(|l| l.file().metadata().ok());
    let now = std::fs::metadata(&path).ok();
    let same =
        matches!((&ours, &now), (Some(a), Some(b)) if a.ino() == b.ino() && a.dev() == b.dev());
    if same || !project.daemon_dir().is_dir() {
        return;
    }
    if let Ok(Some(lock)) = lock(&path) {
        if fsx::rewrite_locked(&lock, format!("{}\n", std::process::id()).as_bytes()).is_ok() {
            *held = Some(lock);
        }
    }
}
