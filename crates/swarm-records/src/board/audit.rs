//! The audit gate's count of challenges on a card (`audit_count`, the one
//! column of tasks.tsv not derived from the handoffs). The invariant: a
//! count asked again after a crash (a confined agent's request carried out
//! twice) is raised once, against the count recorded before it.

use crate::error::{IoContext, Result};
use crate::fsx;
use crate::protocol::layout::Project;

use super::routes::Routes;
use super::sync::sync_locked;
use super::{dir, lock_file, tasks_file, tmp_dir};

/// Where the audit gate counts a challenge: the card's `audit_count` (as
/// upstream's `pack_board.sh increment-audit`). A task that is no card is
/// not counted.
pub fn count_audit(project: &Project, task: &str) -> Result<()> {
    count_audit_once(project, task, None)
}

/// [`count_audit`] exactly once for one request of a confined agent
/// (forum/requests.rs), whatever is killed when: under the board lock,
/// `mark` (the request's own file, which only handoffd writes) records the
/// count before the raise; found again after a kill, a count above it says
/// the raise was written (counts only grow under this lock), an equal one
/// that it was not.
pub fn count_audit_once(
    project: &Project,
    task: &str,
    mark: Option<&std::path::Path>,
) -> Result<()> {
    let routes = Routes::load(project)?;
    if routes.is_empty() {
        return Ok(());
    }
    fsx::ensure_dirs(&[dir(project), tmp_dir(project)]).at(dir(project))?;
    let _lock = fsx::lock(&lock_file(project)).at(lock_file(project))?;
    let mut board = sync_locked(project, &routes)?;
    let Some(c) = board.cards.iter_mut().find(|c| c.name == task) else {
        return Ok(());
    };
    if let Some(mark) = mark {
        let before = fsx::read_bounded(mark, 64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| t.trim().parse::<u64>().ok());
        match before {
            Some(n) if c.audit_count > n => return Ok(()),
            Some(_) => {}
            None => {
                let d = mark.parent().unwrap_or(std::path::Path::new("."));
                let _ = fsx::remove_file(mark);
                fsx::publish(d, mark, format!("{}\n", c.audit_count).as_bytes()).at(mark)?;
            }
        }
    }
    c.audit_count += 1;
    let path = tasks_file(project);
    fsx::replace(&tmp_dir(project), &path, board.render().as_bytes()).at(&path)
}
