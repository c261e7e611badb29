//! Answering a query: every word must match (AND), hits ranked by BM25
//! (k1 1.2, b 0.75), newer first on a tie; `--role`, `--type` and
//! `--since` narrow the set first. Each hit is then looked up in the files
//! (which folder holds it now, its summary and a snippet): the index finds,
//! the files answer.

use std::collections::HashSet;
use std::io;
use std::path::PathBuf;

use serde::Serialize;

use super::index::{Index, Manifest};
use super::segment::{Posting, Segment};
use super::tokens;
use crate::error::{Error, Result};
use crate::protocol::config::Config;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::trail::{self, Loaded};

const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Most hits one query returns.
pub const MAX_LIMIT: usize = 1000;
/// Longest query accepted, in bytes, and most words in it.
pub const MAX_QUERY_BYTES: usize = 4096;
pub const MAX_QUERY_WORDS: usize = 32;
/// Characters of context on each side of the first match in a snippet.
const SNIPPET_BEFORE: usize = 60;
const SNIPPET_AFTER: usize = 100;

/// What to look for.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pub text: String,
    /// Sent or received by this role.
    pub role: Option<String>,
    pub kind: Option<String>,
    /// Created at or after (seconds since the epoch).
    pub since: Option<i64>,
    pub limit: usize,
}

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
    pub path: PathBuf,
    pub summary: String,
    pub snippet: String,
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
}

/// Runs `q` against `project`'s index, first bringing it up to date with
/// the files when a folder changed since it was last read.
pub fn search(project: &Project, q: &Query) -> Result<Answer> {
    if q.text.len() > MAX_QUERY_BYTES {
        return Err(Error::env(format!(
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
        return Err(Error::env(
            "no query: name the words to look for (swarm search <words>), or --reindex",
        ));
    }
    if words.is_empty() {
        return Err(Error::env(format!(
            "nothing to search for in '{}': a query needs at least one word (letters or digits)",
            crate::text::escape(&q.text)
        )));
    }
    if words.len() > MAX_QUERY_WORDS {
        return Err(Error::env(format!(
            "query has {} words; at most {MAX_QUERY_WORDS}",
            words.len()
        )));
    }
    let idx = Index::new(project);
    let mut m = idx.manifest()?;
    if idx.stale(&m)? {
        idx.refresh()?;
        m = idx.manifest()?;
    }
    // A merge may remove a segment between our manifest read and its open:
    // read the manifest again and retry.
    for _ in 0..3 {
        match run(&idx, &m, q, &words) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => m = idx.manifest()?,
            Err(e) => return Err(Error::env(format!("{}: {e}", idx.dir.display()))),
            Ok(a) => return Ok(a),
        }
    }
    run(&idx, &m, q, &words).map_err(|e| Error::env(format!("{}: {e}", idx.dir.display())))
}

/// One segment's candidates: the docs that hold every word, and per doc
/// the posting of each word, `posts[i * words + w]` (one allocation, not
/// one per doc: a common word matches most of the index).
struct Candidates {
    docs: Vec<u32>,
    posts: Vec<Posting>,
}

/// Keeps the docs of `keep` (sorted) that `list` (sorted by doc) holds.
fn narrow(keep: &mut Vec<u32>, list: &[Posting]) {
    let mut i = 0;
    keep.retain(|d| {
        while i < list.len() && list[i].doc < *d {
            i += 1;
        }
        i < list.len() && list[i].doc == *d
    });
}

fn matches(seg: &Segment, words: &[u64], q: &Query) -> io::Result<Candidates> {
    let none = Candidates {
        docs: Vec::new(),
        posts: Vec::new(),
    };
    let mut lists: Vec<Vec<Posting>> = Vec::with_capacity(words.len());
    for h in words {
        let p = seg.postings(*h)?;
        if p.is_empty() {
            return Ok(none);
        }
        lists.push(p);
    }
    // Narrow with the rarest list first.
    let rarest = (0..lists.len())
        .min_by_key(|i| lists[*i].len())
        .unwrap_or(0);
    let mut keep: Vec<u32> = lists[rarest].iter().map(|p| p.doc).collect();
    for (i, l) in lists.iter().enumerate() {
        if i != rarest {
            narrow(&mut keep, l);
        }
    }
    if let Some(r) = &q.role {
        let mut who = seg.postings(tokens::from_key(r))?;
        who.extend(seg.postings(tokens::to_key(r))?);
        who.sort_unstable_by_key(|p| p.doc);
        who.dedup_by_key(|p| p.doc);
        narrow(&mut keep, &who);
    }
    if let Some(k) = &q.kind {
        narrow(&mut keep, &seg.postings(tokens::type_key(k))?);
    }
    if let Some(since) = q.since {
        if !keep.is_empty() {
            let created = seg.created_all()?;
            keep.retain(|d| created.get(*d as usize).is_some_and(|c| *c >= since));
        }
    }
    let w = lists.len();
    let mut posts = vec![Posting::default(); keep.len() * w];
    for (wi, l) in lists.iter().enumerate() {
        let mut i = 0;
        for (ki, d) in keep.iter().enumerate() {
            while l[i].doc < *d {
                i += 1;
            }
            posts[ki * w + wi] = l[i];
        }
    }
    Ok(Candidates { docs: keep, posts })
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
    let avgdl = if n == 0 {
        1.0
    } else {
        (total_words as f64 / n as f64).max(1.0)
    };
    let mut per_seg = Vec::with_capacity(segs.len());
    for s in &segs {
        per_seg.push(matches(s, &hashes, q)?);
    }
    // Document frequency over the whole index, per word.
    let mut df = vec![0u64; hashes.len()];
    for (s, h) in segs
        .iter()
        .flat_map(|s| hashes.iter().enumerate().map(move |h| (s, h)))
    {
        df[h.0] += u64::from(s.count(*h.1)?);
    }
    let idf: Vec<f64> = df
        .iter()
        .map(|d| (1.0 + (n as f64 - *d as f64 + 0.5) / (*d as f64 + 0.5)).ln())
        .collect();
    let mut scored: Vec<(f64, usize, u32)> =
        Vec::with_capacity(per_seg.iter().map(|c| c.docs.len()).sum());
    let w = hashes.len();
    for (si, cands) in per_seg.iter().enumerate() {
        for (ki, doc) in cands.docs.iter().enumerate() {
            let score: f64 = cands.posts[ki * w..(ki + 1) * w]
                .iter()
                .zip(&idf)
                .map(|(p, idf)| {
                    let tf = f64::from(p.tf);
                    let norm = 1.0 - B + B * f64::from(p.len) / avgdl;
                    idf * tf * (K1 + 1.0) / (tf + K1 * norm)
                })
                .sum();
            scored.push((score, si, *doc));
        }
    }
    let total = scored.len();
    // Later segments and docs are newer: they win a tie.
    let order = |a: &(f64, usize, u32), b: &(f64, usize, u32)| {
        b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2))
    };
    // A few more than asked, for hits whose file is gone.
    let want = (q.limit + 16).min(scored.len());
    if want > 0 && want < scored.len() {
        scored.select_nth_unstable_by(want - 1, order);
        scored.truncate(want);
    }
    scored.sort_unstable_by(order);
    let roles = Roles::load(&idx.project.roles_tsv()).map_err(io::Error::other)?;
    let max = Config::load(&idx.project.config_file())
        .map(|c| c.limits.max_file_bytes)
        .map_err(io::Error::other)?;
    let worktrees: HashSet<String> = idx
        .folders(&roles)
        .into_iter()
        .map(|(wt, _)| idx.key(&wt))
        .collect();
    let mut hits = Vec::new();
    for (score, si, doc) in scored {
        if hits.len() >= q.limit {
            break;
        }
        let d = segs[si].doc(doc)?;
        if !worktrees.contains(&d.wt) || !crate::protocol::grammar::valid_handoff_name(&d.file) {
            continue;
        }
        let Some((path, state, archived)) = locate(&idx.project, &d.wt, &d.file) else {
            continue;
        };
        let Loaded::Ok(msg) = trail::load_message(&path, max) else {
            continue;
        };
        hits.push(Hit {
            time: chrono::DateTime::from_timestamp(d.created, 0).map(crate::protocol::clock::iso),
            summary: crate::text::escape(&crate::protocol::line::summary(&msg)),
            snippet: snippet(
                &tokens::said(&msg.body).collect::<Vec<_>>().join("\n"),
                words,
            ),
            id: d.id,
            score: (score * 1000.0).round() / 1000.0,
            from: d.from,
            to: d.to,
            kind: d.kind,
            state,
            archived,
            path,
        });
    }
    Ok(Answer {
        query: q.text.clone(),
        total,
        hits,
        indexed: n,
    })
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
    s = crate::text::escape(&s);
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
