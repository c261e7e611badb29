//! Answering a query: every word must match (AND), hits ranked by BM25
//! (k1 1.2, b 0.75), newer first on a tie; `--role`, `--type` and
//! `--since` narrow the set first. Each hit is then looked up in the files
//! (which folder holds it now, its summary and a snippet): the index finds,
//! the files answer.

use std::collections::HashSet;
use std::io;
use std::path::PathBuf;

use serde::Serialize;

pub use super::ask::Query;
use super::bounds::Incomplete;
use super::index::{Index, Manifest};
use super::rank::{top, Bm25, Ranked};
use super::segment::{DocRef, Segment};
use super::tokens;
use crate::error::{Error, Result};
use crate::protocol::config::Config;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::trail::{self, Loaded, Original, Place, Trail};
use crate::protocol::{clock, grammar, line};
use crate::text::escape;
use crate::views::vouched::Vouched;

/// Most hits one query returns.
pub const MAX_LIMIT: usize = 1000;
/// Longest query accepted, in bytes, and most words in it.
pub const MAX_QUERY_BYTES: usize = 4096;
pub const MAX_QUERY_WORDS: usize = 32;
/// Characters of context on each side of the first match in a snippet.
const SNIPPET_BEFORE: usize = 60;
const SNIPPET_AFTER: usize = 100;

/// One message found.
#[derive(Clone, Debug, Serialize)]
pub struct Hit {
    pub id: String,
    pub score: f64,
    pub time: Option<String>,
    pub from: String,
    pub to: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The folder it is in now: outbox, sent, held, failed (archived ones
    /// too: `archived` says so).
    pub state: &'static str,
    pub archived: bool,
    /// The host of a role on another host whose message this host's
    /// mirror holds (docs/bridge.md); `None` for this host's own.
    pub host: Option<String>,
    pub path: PathBuf,
    pub summary: String,
    pub snippet: String,
    /// Why the journal does not vouch for this file (views/vouched.rs):
    /// then `from`, `to`, `summary` and `snippet` are left empty, so a
    /// forged message is never shown as said. `null` otherwise.
    pub unverified: Option<String>,
}

/// The answer to a query.
#[derive(Clone, Debug, Serialize)]
pub struct Answer {
    pub query: String,
    /// Messages that match (all of them, not only those shown).
    pub total: usize,
    pub hits: Vec<Hit>,
    /// Messages in the index.
    pub indexed: u64,
    /// What the index's bounds left out (search/bounds.rs): when set, a
    /// message may match and not be among the hits. Always present in
    /// the JSON form (null when nothing was left out).
    pub incomplete: Option<Incomplete>,
}

/// Runs `q` against `project`'s index, first bringing it up to date with
/// the files when a folder changed since it was last read.
pub fn search(project: &Project, q: &Query) -> Result<Answer> {
    if q.text.len() > MAX_QUERY_BYTES {
        return Err(Error::bad_input(format!(
            "query too long: {} bytes (at most {MAX_QUERY_BYTES})",
            q.text.len()
        )));
    }
    let mut words: Vec<String> = Vec::new();
    for w in tokens::words(&q.text) {
        if !words.contains(&w) {
            words.push(w);
        }
    }
    if q.text.trim().is_empty() {
        return Err(Error::bad_input(
            "no query: name the words to look for (swarm search <words>), or --reindex",
        ));
    }
    if words.is_empty() {
        return Err(Error::bad_input(format!(
            "nothing to search for in '{}': a query needs at least one word (letters or digits)",
            escape(&q.text)
        )));
    }
    if words.len() > MAX_QUERY_WORDS {
        return Err(Error::bad_input(format!(
            "query has {} words; at most {MAX_QUERY_WORDS}",
            words.len()
        )));
    }
    let idx = Index::new(project);
    let mut m = idx.manifest()?;
    if idx.stale(&m)? {
        idx.refresh_all()?;
        m = idx.manifest()?;
    }
    let bounds = Config::load(&project.config_file())
        .map(|c| c.search)
        .unwrap_or_default();
    // A merge may remove a segment between our manifest read and its open:
    // read the manifest again and retry.
    for _ in 0..3 {
        match run(&idx, &m, q, &words) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => m = idx.manifest()?,
            Err(e) => return Err(Error::bad_file(&idx.dir, e)),
            Ok(mut a) => {
                a.incomplete = m.incomplete(&bounds);
                return Ok(a);
            }
        }
    }
    let mut a = run(&idx, &m, q, &words).map_err(|e| Error::bad_file(&idx.dir, e))?;
    a.incomplete = m.incomplete(&bounds);
    Ok(a)
}

fn run(idx: &Index, m: &Manifest, q: &Query, words: &[String]) -> io::Result<Answer> {
    let segs: Vec<Segment> = m
        .segments
        .iter()
        .map(|s| Segment::open(&idx.dir, &s.name))
        .collect::<io::Result<_>>()?;
    let hashes: Vec<u64> = words.iter().map(|w| tokens::hash(w.as_bytes())).collect();
    let n: u64 = m.segments.iter().map(|s| u64::from(s.docs)).sum();
    let total_words: u64 = m.segments.iter().map(|s| s.words).sum();
    let bm = Bm25::new(&segs, n, total_words, &hashes)?;
    // A few more than asked, for hits whose file is gone.
    let (total, ranked) = top(&segs, &bm, q, &hashes, q.limit + 16)?;
    let files = Files::of(idx)?;
    let mut hits = Vec::new();
    for Ranked {
        score,
        seg: si,
        doc,
    } in ranked
    {
        if hits.len() >= q.limit {
            break;
        }
        if let Some(h) = files.hit(segs[si].doc(doc)?, score, words) {
            hits.push(h);
        }
    }
    Ok(Answer {
        query: q.text.clone(),
        total,
        hits,
        indexed: n,
        incomplete: None,
    })
}

/// What a ranked document is looked up in: the worktrees the index reads,
/// the message size limit and handoffd's journal.
struct Files<'a> {
    idx: &'a Index,
    max_file_bytes: u64,
    worktrees: HashSet<String>,
    /// Each hit held to handoffd's journal (views/vouched.rs).
    judge: Option<(Vouched, Trail)>,
}

impl<'a> Files<'a> {
    fn of(idx: &'a Index) -> io::Result<Files<'a>> {
        let roles = Roles::load(&idx.project.roles_tsv()).map_err(io::Error::other)?;
        let config = Config::load(&idx.project.config_file()).map_err(io::Error::other)?;
        let worktrees: HashSet<String> = idx
            .folders(&roles, &config)
            .into_iter()
            .map(|(wt, _)| idx.key(&wt))
            .collect();
        // The trail with the roles and config just read (issue 44.3).
        let judge = Trail::load_with(&idx.project, &roles, &config, &trail::Scope::default())
            .ok()
            .map(|t| (Vouched::load(&idx.project), t));
        Ok(Files {
            idx,
            max_file_bytes: config.limits.max_file_bytes,
            worktrees,
            judge,
        })
    }

    /// The hit for a ranked document, from its file as it is now; none when
    /// the file is gone or does not load. A file the journal does not vouch
    /// for is a hit with its words left out.
    fn hit(&self, d: DocRef, score: f64, words: &[String]) -> Option<Hit> {
        if !self.worktrees.contains(&d.wt) || !grammar::valid_handoff_name(&d.file) {
            return None;
        }
        let (path, state, archived) = locate(&self.idx.project, &d.wt, &d.file)?;
        let Loaded::Ok(msg) = trail::load_message(&path, self.max_file_bytes) else {
            return None;
        };
        let unverified = self.judge.as_ref().and_then(|(v, t)| {
            let place = match state {
                "sent" => Place::Sent,
                "failed" => Place::Failed,
                "held" => Place::Held,
                _ => Place::Outbox,
            };
            let o = Original::new(&path, place, msg.clone(), None);
            v.original(t, &o).doubt().map(str::to_string)
        });
        if let Some(why) = unverified {
            return Some(Hit {
                time: None,
                summary: String::new(),
                snippet: String::new(),
                host: self.idx.host_of(&d.wt),
                id: d.id,
                score: (score * 1000.0).round() / 1000.0,
                from: String::new(),
                to: String::new(),
                kind: d.kind,
                state,
                archived,
                path,
                unverified: Some(why),
            });
        }
        Some(Hit {
            unverified: None,
            time: chrono::DateTime::from_timestamp(d.created, 0).map(clock::iso),
            summary: escape(&line::summary(&msg)),
            snippet: snippet(
                &tokens::said(&msg.body).collect::<Vec<_>>().join("\n"),
                words,
            ),
            host: self.idx.host_of(&d.wt),
            id: d.id,
            score: (score * 1000.0).round() / 1000.0,
            from: d.from,
            to: d.to,
            kind: d.kind,
            state,
            archived,
            path,
        })
    }
}

/// Where a message's file is now: its worktree's live folders, then the
/// archived days.
fn locate(project: &Project, wt: &str, file: &str) -> Option<(PathBuf, &'static str, bool)> {
    let wt = Worktree::new(project.root.join(wt));
    let live = [
        (wt.sent(), "sent"),
        (wt.failed(), "failed"),
        (wt.outbox(), "outbox"),
        (wt.held(), "held"),
    ];
    let is_file = |p: &PathBuf| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    for (dir, state) in live {
        let p = dir.join(file);
        if is_file(&p) {
            return Some((p, state, false));
        }
    }
    for day in wt.archive_days().into_iter().rev() {
        for state in ["sent", "failed"] {
            let p = day.join(state).join(file);
            if is_file(&p) {
                return Some((p, if state == "sent" { "sent" } else { "failed" }, true));
            }
        }
    }
    None
}

/// A line of the body around the first word of the query, control
/// characters escaped and white space folded.
pub fn snippet(body: &str, words: &[String]) -> String {
    let mut at = None;
    let mut start = None;
    for (i, c) in body
        .char_indices()
        .chain(std::iter::once((body.len(), ' ')))
    {
        if c.is_alphanumeric() {
            start.get_or_insert(i);
        } else if let Some(s) = start.take() {
            if words.contains(&body[s..i].to_lowercase()) {
                at = Some(s);
                break;
            }
        }
    }
    let Some(at) = at else {
        return String::new();
    };
    let before: Vec<(usize, char)> = body[..at].char_indices().collect();
    let from = before
        .len()
        .checked_sub(SNIPPET_BEFORE)
        .map_or(0, |k| before[k].0);
    let to = body[at..]
        .char_indices()
        .nth(SNIPPET_AFTER)
        .map_or(body.len(), |(i, _)| at + i);
    let mut s: String = body[from..to]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    s = escape(&s);
    if from > 0 {
        s.insert(0, '…');
    }
    if to < body.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet_is_cut_around_the_first_match_on_char_boundaries() {
        let body = format!("{}the PARSER is slow\n{}", "é".repeat(200), "ü".repeat(200));
        let s = snippet(&body, &["parser".to_string()]);
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("the PARSER is slow"), "{s}");
        assert_eq!(snippet("nothing here", &["parser".to_string()]), "");
    }
}
