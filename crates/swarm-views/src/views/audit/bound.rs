//! `swarm audit --check` holds every file in the queue folders to the
//! digest handoffd journaled when it moved it (views/vouched.rs): a file
//! whose content changed since, or one handoffd never moved, is a
//! violation; one whose line a power cut may have taken is `UNVERIFIED`
//! (listed, not failed); files older than the digests are counted in a
//! note, not judged (an upgraded project passes as before).

use super::check::Violation;
use crate::protocol::trail::{Copy, Original, Trail};
use crate::sys::logfile;
use crate::views::vouched::{self, Verdict};

/// What the binding check found.
#[derive(Debug, Default)]
pub struct Bound {
    pub violations: Vec<Violation>,
    /// Files without a line that may have been lost (kind `unverified`).
    pub unverified: Vec<Violation>,
    /// Files older than the digests the journal keeps (counted when
    /// there is a journal).
    pub predating: usize,
}

impl Bound {
    /// `UNVERIFIED` lines, then the note on files predating digests.
    pub fn lines(&self) -> String {
        let mut s: String = self
            .unverified
            .iter()
            .map(|v| v.line().replacen("VIOLATION", "UNVERIFIED", 1))
            .collect();
        if self.predating > 0 {
            s.push_str(&format!(
                "NOTE {} file(s) predate handoffd's content digests (journaled before it recorded them, \
                 or older than the journal kept): not verified\n",
                self.predating
            ));
        }
        s
    }
}

/// Judges every original and copy of `t` against the journal (a file
/// that arrived a moment ago is judged again until its line had time to
/// be appended: views/vouched.rs).
pub fn check(t: &Trail) -> Bound {
    let originals: Vec<&Original> = t.originals.iter().collect();
    let copies: Vec<&Copy> = t.copies.iter().collect();
    let (originals, copies) = vouched::judge_files(t, &originals, &copies);
    // A journal at all (an offset past 0, rotated parts counted).
    let journaled = logfile::end(&t.project.events_file()) > 0;
    let paths = t
        .originals
        .iter()
        .map(|o| &o.path)
        .chain(t.copies.iter().map(|c| &c.path));
    let mut out = Bound::default();
    for (path, verdict) in paths.zip(originals.iter().chain(copies.iter())) {
        let subject = path.display().to_string();
        match verdict {
            // Said only of a journal there is: a project no handoffd
            // journaled (files written by hand) has no upgrade to note.
            Verdict::Predates(_) if journaled => out.predating += 1,
            Verdict::Unverified(why) => out.unverified.push(Violation {
                kind: "unverified",
                subject,
                detail: why.clone(),
            }),
            other => {
                if let (Some(kind), Some(why)) = (other.violation(), other.doubt()) {
                    out.violations.push(Violation {
                        kind,
                        subject,
                        detail: why.to_string(),
                    });
                }
            }
        }
    }
    out.violations.sort();
    out.unverified.sort();
    out
}
