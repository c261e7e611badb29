//! One trail across hosts: every host publishes the message files of its own
//! worktrees (originals in outbox/pending_approval/sent/failed, copies in the inbox folders,
//! batch folders too) each time one appears or moves, and mirrors every other
//! host's into `.swarmforge/bridge/hosts/<host>/<worktree>/`, worktree-shaped,
//! so `swarm transcript`, `swarm receipts` and `swarm audit --check` read the
//! whole swarm's files through the one trail reader on any host.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::Refused;
use crate::fsx;
use crate::protocol::config::Config;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree, PENDING_APPROVAL};
use crate::protocol::roles::Roles;
use crate::protocol::store::batch_dirs;

/// One file to publish: `rel` is its path under `.swarmforge/handoffs/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub worktree: String,
    pub rel: String,
    pub path: PathBuf,
    pub len: u64,
    pub mtime_ns: u128,
}

impl Record {
    /// De-duplication id: a file changes place or content, it is new.
    pub fn msg_id(&self, host: &str) -> String {
        format!(
            "tr:{host}:{}:{}:{}:{}",
            self.worktree, self.rel, self.len, self.mtime_ns
        )
    }
}

/// The worktree names (`none` as `master`) and roots of this host's roles.
fn local_worktrees(roles: &Roles) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for r in roles.roles.iter().filter(|r| !r.is_remote()) {
        let name = match r.worktree_name.as_str() {
            "none" | "" => "master".to_string(),
            n => n.to_string(),
        };
        if !out.iter().any(|(_, p)| *p == r.worktree_path) {
            out.push((name, r.worktree_path.clone()));
        }
    }
    out
}

/// Where an original sits; `pending_approval/` (the held) ranks with `sent/` and `failed/`, so an
/// approved original's brief stay back in its outbox never moves the
/// mirror's copy backwards (docs/bridge.md, "One control").
const ORIGINALS: [&str; 4] = ["outbox", PENDING_APPROVAL, "sent", "failed"];
const COPIES: [&str; 3] = ["inbox/new", "inbox/in_process", "inbox/completed"];

fn handoff_files(dir: &Path) -> Vec<(String, std::fs::Metadata)> {
    crate::protocol::store::each(dir)
        .filter(|e| e.is_handoff_named() && e.is_file())
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((e.name, m))
        })
        .collect()
}

/// Every message file of this host's worktrees.
pub fn scan(project: &Project) -> Vec<Record> {
    let Ok(roles) = Roles::load(&project.roles_tsv()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (wt_name, root) in local_worktrees(&roles) {
        let hq = Worktree::new(&root).handoffs();
        let mut dirs: Vec<String> = ORIGINALS
            .iter()
            .chain(COPIES.iter())
            .map(|s| s.to_string())
            .collect();
        for place in ["inbox/in_process", "inbox/completed"] {
            for b in batch_dirs(&hq.join(place)) {
                if let Some(n) = b.file_name() {
                    dirs.push(format!("{place}/{}", n.to_string_lossy()));
                }
            }
        }
        for d in dirs {
            for (name, m) in handoff_files(&hq.join(&d)) {
                let mtime_ns = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                out.push(Record {
                    worktree: wt_name.clone(),
                    rel: format!("{d}/{name}"),
                    path: hq.join(&d).join(&name),
                    len: m.len(),
                    mtime_ns,
                });
            }
        }
    }
    out
}

/// What a received record's path may be: a known folder, an optional batch
/// folder, a handoff file name (a collision-prefixed one too). Returns the
/// group (0 originals, 1 copies), the rank of its place and the file name.
pub fn check_rel(rel: &str) -> Option<(usize, usize, &str)> {
    let (dir, name) = rel.rsplit_once('/')?;
    if !grammar::valid_handoff_name(grammar::strip_collision_prefix(name)) {
        return None;
    }
    if let Some(rank) = ORIGINALS.iter().position(|d| *d == dir) {
        return Some((0, rank.min(1), name));
    }
    if let Some(rank) = COPIES.iter().position(|d| *d == dir) {
        return Some((1, rank, name));
    }
    let (place, batch) = dir.rsplit_once('/')?;
    let rank = COPIES.iter().position(|d| *d == place).filter(|&r| r > 0)?;
    grammar::is_batch_dir_name(batch).then_some((1, rank, name))
}

/// A worktree name from another host: one `swarm init` allows, or a
/// person's state-only folder (`people/<role>`, protocol::people).
fn valid_worktree(w: &str) -> bool {
    match w.strip_prefix(crate::protocol::people::WORKTREE_PREFIX) {
        Some(role) => grammar::valid_role(role),
        None => grammar::valid_worktree_name(w),
    }
}

/// Every place a file of this group may sit in the mirror worktree `hq`.
fn places(hq: &Path, group: usize) -> Vec<(usize, PathBuf)> {
    if group == 0 {
        return ORIGINALS
            .iter()
            .enumerate()
            .map(|(i, d)| (i.min(1), hq.join(d)))
            .collect();
    }
    let mut v: Vec<(usize, PathBuf)> = COPIES
        .iter()
        .enumerate()
        .map(|(i, d)| (i, hq.join(d)))
        .collect();
    for (i, d) in COPIES.iter().enumerate().skip(1) {
        v.extend(batch_dirs(&hq.join(d)).into_iter().map(|b| (i, b)));
    }
    v
}

/// The roles that swarm.yaml puts on `host` in its worktree `worktree`
/// (`none` and `master` are one worktree, as in the mirror's names).
fn roles_in<'a>(config: &'a Config, host: &str, worktree: &str) -> Vec<&'a str> {
    let norm = |w: &str| match w {
        "none" | "" => "master".to_string(),
        w => w.to_string(),
    };
    config
        .roles
        .iter()
        .filter(|r| {
            let wt =
                crate::protocol::people::planned_worktree_name(&r.name, r.is_human(), &r.worktree);
            config.role_host(&r.name) == Some(host) && norm(&wt) == norm(worktree)
        })
        .map(|r| r.name.as_str())
        .collect()
}

/// A record a host may publish: a file of one of its own worktrees, an
/// original sent by a role working there, or a copy for one. Anything else
/// would let a host (or anyone publishing on its subject) put messages that
/// were never sent into every other host's transcript.
fn check_owner(
    config: &Config,
    host: &str,
    worktree: &str,
    group: usize,
    msg: &Message,
) -> Result<(), Refused> {
    let there = roles_in(config, host, worktree);
    if there.is_empty() {
        return Err(Refused(format!(
            "host {host} has no worktree {worktree} in swarm.yaml"
        )));
    }
    let (who, what) = if group == 0 {
        (msg.sender().unwrap_or(""), "sender")
    } else {
        (msg.recipient().unwrap_or(""), "recipient")
    };
    if there.contains(&who) || (group == 0 && who == grammar::DAEMON) {
        return Ok(());
    }
    Err(Refused(format!(
        "its {what} '{}' does not work in host {host}'s worktree {worktree}",
        crate::text::escape(who)
    )))
}

/// Writes one received record into the mirror of `host`'s worktree,
/// removing the file from the places it moved on from, once `vouch` says
/// its host's journal vouches for it (bridge::vouch; its error is
/// returned). A record older than what the mirror holds (a redelivery)
/// changes nothing. Ok(false): ignored.
pub fn apply(
    project: &Project,
    config: &Config,
    host: &str,
    worktree: &str,
    rel: &str,
    bytes: &[u8],
    vouch: impl FnOnce(&Message) -> io::Result<()>,
) -> io::Result<bool> {
    let max_bytes = config.limits.max_file_bytes;
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    if !grammar::valid_role(host) || !valid_worktree(worktree) {
        return Err(bad(format!(
            "bad host or worktree name '{}'",
            crate::text::escape(worktree)
        )));
    }
    let Some((group, rank, name)) = check_rel(rel) else {
        return Err(bad(format!("bad path '{}'", crate::text::escape(rel))));
    };
    if bytes.len() as u64 > max_bytes {
        return Err(bad(format!("{} bytes, over the limit", bytes.len())));
    }
    let msg = Message::parse_bytes(bytes).map_err(|e| bad(format!("malformed: {e}")))?;
    check_owner(config, host, worktree, group, &msg).map_err(|e| bad(e.0))?;
    vouch(&msg)?;
    let root = project.bridge_mirror(host, worktree);
    let hq = Worktree::new(&root).handoffs();
    let target = hq.join(rel);
    let mut stale: HashMap<PathBuf, usize> = HashMap::new();
    for (r, dir) in places(&hq, group) {
        let p = dir.join(name);
        if p != target && p.exists() {
            if r > rank {
                return Ok(false);
            }
            stale.insert(p, r);
        }
    }
    let dir = target.parent().unwrap_or(&hq).to_path_buf();
    let tmp = project.bridge_tmp();
    fsx::ensure_dirs(&[&dir, &tmp])?;
    let mut stale: Vec<(PathBuf, usize)> = stale.into_iter().collect();
    stale.sort_by_key(|(_, r)| *r);
    let placing = Placing {
        hq: &hq,
        tmp: &tmp,
        target: &target,
        group,
        rank,
        name,
        bytes,
    };
    placing.place(stale)?;
    Ok(true)
}

/// Where a received record goes in its mirror, and what it holds.
struct Placing<'a> {
    hq: &'a Path,
    tmp: &'a Path,
    target: &'a Path,
    group: usize,
    rank: usize,
    name: &'a str,
    bytes: &'a [u8],
}

impl Placing<'_> {
    /// Puts the record at its target: the newest of the places it moved on
    /// from (`stale`, oldest first) renamed there, else written there; the
    /// older places removed.
    fn place(&self, mut stale: Vec<(PathBuf, usize)>) -> io::Result<()> {
        let (hq, target, bytes) = (self.hq, self.target, self.bytes);
        match stale.pop() {
            // A move is a rename of the file in its old place, never a copy
            // and a removal: a reader between the two (`swarm audit --check`)
            // would see one original twice.
            Some((mut from, from_rank)) if !target.exists() => {
                // A copy that jumps from new/ past in_process/ goes through it,
                // as a local take and done do: its new stamps are written
                // there, so a reader in between meets only states the audit
                // accepts (in new/, no `dequeued_at` or `completed_at`; in
                // in_process/, any stamps).
                if self.group == 1 && from_rank == 0 && self.rank > 1 {
                    let mid = hq.join(COPIES[1]).join(self.name);
                    fsx::ensure_dirs(&[hq.join(COPIES[1])])?;
                    match fsx::move_noreplace(&from, &mid) {
                        Err(e) if fsx::moved_to(&e).is_none() => return Err(e),
                        _ => from = mid,
                    }
                }
                if std::fs::read(&from).map_or(true, |b| b != bytes) {
                    fsx::replace(self.tmp, &from, bytes)?;
                }
                match fsx::move_noreplace(&from, target) {
                    Err(e) if fsx::moved_to(&e).is_none() => return Err(e),
                    _ => {}
                }
            }
            other => {
                stale.extend(other);
                if !std::fs::read(target).is_ok_and(|b| b == bytes) {
                    fsx::replace(self.tmp, target, bytes)?;
                }
            }
        }
        for (p, _) in &stale {
            fsx::remove_file(p)?;
        }
        Ok(())
    }
}

/// A trail record as received: from host `host`, the file `rel` of its
/// worktree `worktree`, citing the line `cited` of its journal.
#[derive(Debug)]
pub struct Received<'a> {
    pub host: &'a str,
    pub worktree: &'a str,
    pub rel: &'a str,
    pub bytes: &'a [u8],
    pub cited: Option<u64>,
}

/// [`apply`]s a received record once its host's mirrored journal vouches
/// for it (bridge::vouch). `overtaken`: the events mirror has settled a
/// line published after this record, so a cited line not here yet never
/// comes. Not vouched for yet: WouldBlock (redelivered later). Refused
/// (for any reason: InvalidData) only once the refusal is kept for the
/// audit (bridge::refusals).
pub fn apply_vouched(
    project: &Project,
    config: &Config,
    mirrors: &mut super::vouch::Mirrors,
    r: &Received,
    overtaken: bool,
) -> io::Result<bool> {
    use super::vouch::Verdict;
    let res = apply(project, config, r.host, r.worktree, r.rel, r.bytes, |msg| {
        let why = match mirrors.judge(project, r.host, r.cited, r.rel, msg)? {
            Verdict::Vouched => return Ok(()),
            Verdict::Wait(why) if !overtaken => {
                return Err(io::Error::new(io::ErrorKind::WouldBlock, why))
            }
            Verdict::Wait(_) => format!(
                "host {}'s journal mirrored here went past where this record was published without reaching offset {}",
                r.host,
                r.cited.unwrap_or(0)
            ),
            Verdict::Refused(why) => why,
        };
        Err(io::Error::new(io::ErrorKind::InvalidData, why))
    });
    match res {
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            let file = format!("{}/{}", r.worktree, r.rel);
            let kept = super::refusals::Refusal::new(
                "trail_record",
                r.host,
                r.cited,
                &file,
                &e.to_string(),
            );
            match super::refusals::record(project, &kept) {
                Ok(()) => Err(e),
                // Not acknowledged then: redelivered, and kept next time.
                Err(k) => Err(io::Error::other(format!(
                    "{}: {k}",
                    project.bridge_refused().display()
                ))),
            }
        }
        other => other,
    }
}

/// Records that every file host `host` held before its events reached
/// `offset` is mirrored here (a mark is published after the records of two
/// complete passes, see `net`). Marks only rise: a redelivered older one
/// changes nothing. Ok(false): ignored.
pub fn apply_mark(project: &Project, host: &str, offset: u64) -> io::Result<bool> {
    if !grammar::valid_role(host) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad host name '{}'", crate::text::escape(host)),
        ));
    }
    let path = project.bridge_trail_mark(host);
    if read_mark(project, host).is_some_and(|m| m >= offset) {
        return Ok(false);
    }
    let dir = path.parent().unwrap_or(&path).to_path_buf();
    fsx::ensure_dirs(&[&dir, &project.bridge_tmp()])?;
    fsx::replace(
        &project.bridge_tmp(),
        &path,
        format!("{offset}\n").as_bytes(),
    )?;
    Ok(true)
}

/// The mark of host `host`'s mirror, if one arrived.
pub fn read_mark(project: &Project, host: &str) -> Option<u64> {
    let bytes = fsx::read_bounded(&project.bridge_trail_mark(host), 64).ok()?;
    String::from_utf8(bytes).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_only_rises_and_names_a_valid_host() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        assert_eq!(read_mark(&p, "b"), None);
        assert!(apply_mark(&p, "b", 100).unwrap());
        assert_eq!(read_mark(&p, "b"), Some(100));
        // A redelivered older mark, or the same one, changes nothing.
        assert!(!apply_mark(&p, "b", 40).unwrap());
        assert!(!apply_mark(&p, "b", 100).unwrap());
        assert_eq!(read_mark(&p, "b"), Some(100));
        assert!(apply_mark(&p, "b", 101).unwrap());
        assert_eq!(read_mark(&p, "b"), Some(101));
        let e = apply_mark(&p, "../x", 5).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(!d.path().join(".swarmforge/bridge/x").exists());
        // An unreadable mark is no mark: nothing is judged lost by it.
        std::fs::write(p.bridge_trail_mark("c"), "soon\n").unwrap();
        assert_eq!(read_mark(&p, "c"), None);
    }
}
