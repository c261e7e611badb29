//! The journal agrees with the files: every finished copy the daemon says
//! it journaled has its `completed` line in `events.jsonl`, and every such
//! line names a finished copy that is there (in `completed/` or archived).
//!
//! The daemon's mark (daemon/progress.rs) says up to when it claims that:
//! copies finished after the mark, or while no daemon journaled this
//! project (no mark), are not judged, nor those older than the oldest line
//! the journal keeps (rotated away). The mark is read before the trail, so
//! a copy finishing while the audit reads is never called missing.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use super::check::Violation;
use crate::daemon::journal::Kind;
use crate::daemon::progress::{self, Mark};
use crate::protocol::clock;
use crate::protocol::layout::Project;
use crate::protocol::trail::{Place, Trail};
use crate::sys::log_reader::EventReader;

/// A stamp this close to the mark may belong to a copy still on its way
/// (its stamp is written a moment before its move).
const MARGIN: Duration = Duration::from_secs(2);

/// The `completed` lines of the journal kept: (id, recipient) and the
/// copy's `completed_at`; and the time of the oldest line kept.
fn completed_lines(project: &Project) -> (Vec<(String, String, SystemTime)>, Option<SystemTime>) {
    let path = project.events_file();
    let mut out = Vec::new();
    let mut oldest = None;
    if let Ok(mut r) = EventReader::new(&path, progress::oldest_offset(&path)) {
        let _ = r.poll(&mut |line, _| {
            let Some(l) = progress::Line::parse(line) else {
                return Ok(());
            };
            let Some(t) = clock::parse(&l.time).map(SystemTime::from) else {
                return Ok(());
            };
            oldest.get_or_insert(t);
            let done = l.completed_at().map(SystemTime::from);
            if let (Some(Kind::Completed), Some(id), Some(rc), Some(done)) =
                (l.progress(), l.id, l.recipient, done)
            {
                out.push((id, rc, done));
            }
            Ok(())
        });
    }
    (out, oldest)
}

/// The disagreements between the journal and the files (`mark`: read
/// before `t` was loaded).
pub fn check(project: &Project, t: &Trail, mark: Option<Mark>) -> Vec<Violation> {
    let Some(mark) = mark else {
        return Vec::new();
    };
    let until = mark.since()
        - MARGIN.min(
            mark.since()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default(),
        );
    let (lines, oldest) = completed_lines(project);
    let journaled: HashSet<(&str, &str)> = lines
        .iter()
        .map(|(i, r, _)| (i.as_str(), r.as_str()))
        .collect();
    let local = |role: &str| t.roles.find(role).is_some_and(|r| !r.is_remote());
    let mut out = Vec::new();
    let mut finished: HashSet<(&str, &str)> = HashSet::new();
    for c in t.copies.iter().filter(|c| c.place == Place::Completed) {
        let (Some(id), Some(rc)) = (c.id.as_deref(), c.recipient.as_deref()) else {
            continue;
        };
        finished.insert((id, rc));
        let Some(done) = c.completed.at().map(SystemTime::from) else {
            continue;
        };
        let judged = local(rc) && done < until && oldest.is_some_and(|o| done >= o);
        if judged && !journaled.contains(&(id, rc)) {
            out.push(Violation {
                kind: "not_journaled",
                subject: c.path.display().to_string(),
                detail: format!(
                    "finished at {} before handoffd's mark ({}), but events.jsonl has no `completed` line for it; \
                     a daemon killed before journaling it catches up at its next start (swarm up)",
                    clock::iso(clock::Instant::from(done)),
                    progress::mark_file(project).display()
                ),
            });
        }
    }
    for (id, rc, at) in &lines {
        if *at < until && !finished.contains(&(id.as_str(), rc.as_str())) {
            out.push(Violation {
                kind: "journaled_without_file",
                subject: id.clone(),
                detail: format!(
                    "events.jsonl says {rc}'s copy was completed at {}, but no completed copy of it is in \
                     {rc}'s inbox/completed/ or its archive (removed by hand?)",
                    clock::iso(clock::Instant::from(*at))
                ),
            });
        }
    }
    out.sort();
    out.dedup();
    out
}
