//! Per-worktree sequence numbers (docs/protocol.md §4), allocated under an
//! flock(2) lock, so a killed sender never blocks later sends.
//!
//! The counter is rewritten in place (`fsx::overwrite_unsynced`), not
//! replaced: a send then creates one inode (its message), not two, which is
//! what a file system that scans freed inodes at each creation charges for
//! (docs/benchmarks.md). Every reader takes the same lock, so none sees a
//! write half done. A kill between the write and the cut of a longer old
//! value leaves the new digits followed by old bytes; [`parse`] refuses
//! that, and the counter is recovered from the names in use, as for a
//! missing or empty one. The value never shrinks, so the cut is rare: only
//! after such a recovery, or after another program wrote a longer text.
//!
//! The counter is written without fsync. Why that can never reissue an id:
//! a killed process loses nothing (the write is in the page cache, which
//! every later reader sees); only an OS crash can bring back an older value,
//! or an empty or torn file (then the highest number in use is taken from
//! the file names). A rolled-back counter may give a number out again, but
//! an id is `<IDTS>_<SEQ>_from_<sender>`: the earlier message took its second before
//! the crash and the new one takes a second after the reboot, so the ids,
//! and the file names built from them, differ, and hand-out order (second
//! first, then number) still puts the new message after the old. Only a
//! clock set back across the reboot to the very second of a lost send could
//! meet an old id, and then the no-clobber publish refuses the outbox name
//! while the original still waits there.
//!
//! Messages of `handoffd` itself (a card's first note, a digest request, a
//! seat answer) are published in the outboxes of several worktrees, so
//! their numbers come from one counter of the project
//! (`.swarmforge/daemon/sequence`, [`next_daemon`]): two of them in one
//! second, from two worktrees, never share an id.

use std::fs;
use std::io;
use std::path::Path;

use crate::error::{IoContext, Result};
use crate::fsx;
use crate::protocol::grammar;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;

/// Parses the stored counter: ASCII digits only, optional trailing newline.
pub fn parse(text: &str) -> Option<u64> {
    let t = text.strip_suffix('\n').unwrap_or(text);
    if t.is_empty() || t.len() > 18 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// The highest sequence found in file names under outbox/, sent/ and failed/
/// (of `sender` only, when given): the recovery value when the counter file
/// is missing or unreadable.
fn highest_used(wt: &Worktree, sender: Option<&str>) -> u64 {
    let mut best = 0;
    for dir in [wt.outbox(), wt.sent(), wt.failed()] {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let name = e.file_name();
            if let Some(f) = grammar::FileName::parse(&name.to_string_lossy()) {
                let id = f.message_id();
                if sender.is_none_or(|s| s == id.sender) {
                    best = best.max(id.seq);
                }
            }
        }
    }
    best
}

/// Allocates the next number for this worktree.
pub fn next(wt: &Worktree) -> Result<u64> {
    next_at(&wt.handoffs(), &wt.sequence(), &wt.sequence_lock(), || {
        highest_used(wt, None)
    })
}

/// Allocates the next number of `handoffd`'s own counter; when it is lost,
/// recovered from the names of `handoffd`'s messages in every worktree of
/// roles.tsv.
pub fn next_daemon(project: &Project) -> Result<u64> {
    let dir = project.daemon_dir();
    next_at(
        &dir,
        &project.daemon_sequence(),
        &project.daemon_sequence_lock(),
        || {
            let roles = Roles::load(&project.roles_tsv()).unwrap_or_default();
            let mut worktrees = vec![project.root.clone()];
            worktrees.extend(roles.roles.iter().map(|r| r.worktree_in(&project.root)));
            worktrees
                .iter()
                .map(|w| highest_used(&Worktree::new(w), Some(grammar::DAEMON)))
                .max()
                .unwrap_or(0)
        },
    )
}

/// The counter `path` in folder `dir`, under the lock `lock_path`.
fn next_at(
    dir: &Path,
    path: &Path,
    lock_path: &Path,
    recover: impl FnOnce() -> u64,
) -> Result<u64> {
    fsx::ensure_dirs(&[dir]).at(dir)?;
    let _lock = fsx::lock(lock_path).at(lock_path)?;
    // Bounded and non-blocking: a FIFO or a huge file there is "unreadable",
    // and the counter is recovered from the names in use.
    let last = match fsx::read_bounded(path, 64) {
        Ok(b) => parse(&String::from_utf8_lossy(&b)).unwrap_or_else(recover),
        Err(fsx::ReadRefusal::Io(e)) if e.kind() != io::ErrorKind::NotFound => {
            return Err(crate::error::Error::io(path, e))
        }
        Err(_) => recover(),
    };
    let next = last + 1;
    let text = format!("{}\n", grammar::format_seq(next));
    // No fsync of its own (two of a send's four): see the module comment.
    // Written in place, under the lock every reader takes: see the module
    // comment for what a kill in the middle leaves.
    fsx::overwrite_unsynced(dir, path, text.as_bytes()).at(path)?;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_digits_only() {
        assert_eq!(parse("000041\n"), Some(41));
        assert_eq!(parse("-5"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse(" 4"), None);
    }

    #[test]
    fn allocation_recovers_from_garbage() {
        let d = tempfile::tempdir().unwrap();
        let wt = Worktree::new(d.path());
        fs::create_dir_all(wt.sent()).unwrap();
        fs::write(
            wt.sent()
                .join("50_20260101T000000Z_000007_from_a_to_b.handoff"),
            "",
        )
        .unwrap();
        fs::write(wt.sequence(), "garbage").unwrap();
        assert_eq!(next(&wt).unwrap(), 8);
        assert_eq!(fs::read_to_string(wt.sequence()).unwrap(), "000008\n");
        assert_eq!(next(&wt).unwrap(), 9);
    }

    #[test]
    fn the_counter_is_rewritten_in_place_and_a_torn_one_recovered() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let wt = Worktree::new(d.path());
        fs::create_dir_all(wt.sent()).unwrap();
        assert_eq!(next(&wt).unwrap(), 1);
        let ino = fs::metadata(wt.sequence()).unwrap().ino();
        assert_eq!(next(&wt).unwrap(), 2);
        assert_eq!(fs::metadata(wt.sequence()).unwrap().ino(), ino);
        assert_eq!(fs::read_to_string(wt.sequence()).unwrap(), "000002\n");
        // What a kill between the write and the cut leaves: new digits,
        // then the rest of a longer old text. Refused, recovered from the
        // names, and cut.
        fs::write(
            wt.sent()
                .join("50_20260101T000000Z_000007_from_a_to_b.handoff"),
            "",
        )
        .unwrap();
        fs::write(wt.sequence(), "000003\n0000002\n").unwrap();
        assert_eq!(next(&wt).unwrap(), 8);
        assert_eq!(fs::read_to_string(wt.sequence()).unwrap(), "000008\n");
        // A second name on the counter is never written through: the counter
        // is replaced and the other file keeps its text.
        let other = d.path().join("elsewhere");
        fs::hard_link(wt.sequence(), &other).unwrap();
        assert_eq!(next(&wt).unwrap(), 9);
        assert_eq!(fs::read_to_string(&other).unwrap(), "000008\n");
        assert_eq!(fs::read_to_string(wt.sequence()).unwrap(), "000009\n");
    }

    #[test]
    fn handoffd_takes_one_counter_recovered_from_its_own_names() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let wt = Worktree::new(d.path());
        fs::create_dir_all(wt.sent()).unwrap();
        for name in [
            "50_20260101T000000Z_000007_from_handoffd_to_b.handoff",
            "50_20260101T000000Z_000009_from_lead_to_b.handoff",
        ] {
            fs::write(wt.sent().join(name), "").unwrap();
        }
        // Lost counter: the highest of handoffd's own numbers, not lead's.
        assert_eq!(next_daemon(&p).unwrap(), 8);
        assert_eq!(next_daemon(&p).unwrap(), 9);
        // The worktree's own counter is another one.
        assert_eq!(next(&wt).unwrap(), 10);
        assert_eq!(next_daemon(&p).unwrap(), 10);
        let refused = crate::protocol::store::take_id(&wt, grammar::DAEMON);
        assert!(refused.is_err());
    }
}
