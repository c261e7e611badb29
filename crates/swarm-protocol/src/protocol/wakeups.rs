//! The durable queue of failed wake-ups, `.swarmforge/daemon/wakeups/`
//! (docs/protocol.md §7.2, "Wake-ups"; docs/swarmforge-compat.md §6).
//! Today's SwarmForge: "The project-root `daemon/wakeups` directory is the
//! independent retry queue for tmux notifications", so that "notification
//! trouble cannot turn a stored handoff into a failed delivery".
//!
//! One file per role, `<role>.edn`: present while a wake-up of that role
//! failed and is to be tried again; its keys are those of a delivery's
//! retry sidecar (`protocol::delivery_retry`) plus `:role` and `:item` (the
//! inbox copy that prompted it). A wake-up is only a hint, so one record per
//! role is enough: the next wake-up covers every item waiting. The record
//! never refers to the delivery's state: removing it, or losing it, never
//! undoes or repeats a delivery. So it is a schedule, a record per key
//! replaced whole, not a `protocol::ledger` request (its module doc says why).

use std::io;
use std::path::{Path, PathBuf};

use crate::fsx;
use crate::protocol::delivery_retry::Retry;
use crate::protocol::edn::{self, Value};
use crate::protocol::layout::Project;

const MAX_FILE: u64 = 64 * 1024;
const SUFFIX: &str = ".edn";
const K_ROLE: &str = "role";
const K_ITEM: &str = "item";

/// One role's failed wake-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub role: String,
    /// The inbox copy whose delivery asked for the wake-up.
    pub item: PathBuf,
    pub retry: Retry,
}

/// The record of `role`.
pub fn file(project: &Project, role: &str) -> PathBuf {
    project.wakeups_dir().join(format!("{role}{SUFFIX}"))
}

/// The record of `role`, when there is a readable one.
pub fn read(project: &Project, role: &str) -> Option<Pending> {
    parse(role, &file(project, role))
}

fn parse(role: &str, path: &Path) -> Option<Pending> {
    let bytes = fsx::read_bounded(path, MAX_FILE).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let retry = crate::protocol::delivery_retry::parse_retry(text)?;
    let m = edn::parse(text)?;
    Some(Pending {
        role: role.to_string(),
        item: PathBuf::from(edn::str_of(&m, K_ITEM).unwrap_or("")),
        retry,
    })
}

/// Writes (or rewrites) the record of `p.role`. One mkdir, never
/// `create_dir_all`: a wake-up finishing after `.swarmforge/` was deleted
/// must not bring the project back.
pub fn write(project: &Project, p: &Pending) -> io::Result<()> {
    let dir = project.wakeups_dir();
    match std::fs::create_dir(&dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let mut pairs = vec![
        (K_ROLE, Value::Str(p.role.clone())),
        (K_ITEM, Value::Str(p.item.display().to_string())),
    ];
    pairs.extend(crate::protocol::delivery_retry::retry_pairs(&p.retry));
    // Temp files start with a dot, which the listing skips.
    fsx::replace(
        &dir,
        &file(project, &p.role),
        edn::render(&pairs).as_bytes(),
    )
}

/// Removes the record of `role`, if any.
pub fn remove(project: &Project, role: &str) -> io::Result<()> {
    match fsx::remove_file(&file(project, role)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Every record, by role name. A record that does not read is listed with
/// `None` (its role from its name), so the daemon can remove it.
pub fn list(project: &Project) -> Vec<(String, Option<Pending>)> {
    let dir = project.wakeups_dir();
    let mut names: Vec<String> = crate::protocol::layout::names_in(&dir)
        .into_iter()
        .filter(|n| !n.starts_with('.'))
        .filter_map(|n| n.strip_suffix(SUFFIX).map(str::to_string))
        .filter(|r| crate::protocol::grammar::valid_role(r))
        .collect();
    names.sort_unstable();
    names
        .into_iter()
        .map(|r| {
            let p = parse(&r, &dir.join(format!("{r}{SUFFIX}")));
            (r, p)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::clock;

    #[test]
    fn a_record_reads_back_and_is_listed() {
        let d = tempfile::tempdir().unwrap();
        let project = Project::new(d.path());
        std::fs::create_dir_all(project.daemon_dir()).unwrap();
        let p = Pending {
            role: "coder".into(),
            item: PathBuf::from("/x/inbox/new/a.handoff"),
            retry: Retry::after_failure(None, "no tmux session", clock::now()),
        };
        write(&project, &p).unwrap();
        assert_eq!(read(&project, "coder"), Some(p.clone()));
        std::fs::write(project.wakeups_dir().join("QA.edn"), "garbage").unwrap();
        let l = list(&project);
        assert_eq!(l, vec![("QA".into(), None), ("coder".into(), Some(p))]);
        remove(&project, "coder").unwrap();
        remove(&project, "coder").unwrap();
        assert_eq!(list(&project).len(), 1);
    }
}
