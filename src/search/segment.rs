//! One immutable piece of the index: the messages one refresh added (or a
//! merge of older pieces), in four files published whole by `fsx`:
//!
//! - `<name>.post`: postings, 8 bytes each (doc u32, count u16, doc length
//!   u16), grouped by term, docs ascending;
//! - `<name>.meta`: per doc, 20 bytes (created i64 seconds, offset u64 and
//!   length u32 of its line in `.docs`);
//! - `<name>.docs`: per doc one JSON line ([`DocRef`]);
//! - `<name>.terms`: per term, 20 bytes (hash u64, first posting u64, count
//!   u32), sorted by hash; written last, so a segment whose `.terms` exists
//!   is complete.
//!
//! A query reads a term by binary search with positioned reads, so its cost
//! grows with the postings it touches, not with the index. Every number read
//! back is checked against the file sizes: a damaged segment is an error
//! that names `swarm search --reindex`, never a panic or a wild read.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::fsx;

const TERM: u64 = 20;
const POST: u64 = 8;
const META: u64 = 20;
/// Longest `.docs` line read back (ids, role lists and a path are short).
const MAX_DOC_LINE: u32 = 64 * 1024;

/// One posting: a doc of the segment holding the term `tf` times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Posting {
    pub doc: u32,
    pub tf: u16,
    /// The doc's length in words (capped), for ranking.
    pub len: u16,
}

/// Where a message lives and what the filters and the answer need of it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct DocRef {
    pub id: String,
    /// Its file name (the folder it sits in changes; the name does not).
    pub file: String,
    /// Its sender's worktree, relative to the project root when inside it.
    pub wt: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    #[serde(default, rename = "type")]
    pub kind: String,
    /// Seconds since the epoch (`created_at`, else the id's time).
    #[serde(default)]
    pub created: i64,
}

/// A segment being built in memory.
#[derive(Default)]
pub struct Built {
    pub terms: BTreeMap<u64, Vec<Posting>>,
    pub docs: Vec<DocRef>,
    /// The docs' lengths summed (the average length ranks by).
    pub words: u64,
}

impl Built {
    /// Adds one message with its term counts and length.
    pub fn add(&mut self, doc: DocRef, terms: &super::tokens::Terms) {
        let n = self.docs.len() as u32;
        let len = terms.len.min(u32::from(u16::MAX)) as u16;
        self.words += u64::from(len);
        for (h, c) in &terms.counts {
            self.terms.entry(*h).or_default().push(Posting {
                doc: n,
                tf: (*c).min(u32::from(u16::MAX)) as u16,
                len,
            });
        }
        self.docs.push(doc);
    }

    /// Appends `other`, its docs renumbered after ours.
    pub fn append(&mut self, other: Built) {
        let base = self.docs.len() as u32;
        for (h, ps) in other.terms {
            self.terms
                .entry(h)
                .or_default()
                .extend(ps.into_iter().map(|p| Posting {
                    doc: p.doc + base,
                    ..p
                }));
        }
        self.docs.extend(other.docs);
        self.words += other.words;
    }

    /// Publishes the segment `name` in `dir` (temp files in `tmp`).
    pub fn write(&self, dir: &Path, tmp: &Path, name: &str) -> io::Result<()> {
        let mut post = Vec::new();
        let mut terms = Vec::with_capacity(self.terms.len() * TERM as usize);
        let mut at: u64 = 0;
        for (h, ps) in &self.terms {
            terms.extend_from_slice(&h.to_le_bytes());
            terms.extend_from_slice(&at.to_le_bytes());
            terms.extend_from_slice(&(ps.len() as u32).to_le_bytes());
            for p in ps {
                post.extend_from_slice(&p.doc.to_le_bytes());
                post.extend_from_slice(&p.tf.to_le_bytes());
                post.extend_from_slice(&p.len.to_le_bytes());
            }
            at += ps.len() as u64;
        }
        let mut docs = Vec::new();
        let mut meta = Vec::with_capacity(self.docs.len() * META as usize);
        for d in &self.docs {
            let line = serde_json::to_vec(d).map_err(io::Error::other)?;
            meta.extend_from_slice(&d.created.to_le_bytes());
            meta.extend_from_slice(&(docs.len() as u64).to_le_bytes());
            meta.extend_from_slice(&(line.len() as u32).to_le_bytes());
            docs.extend_from_slice(&line);
            docs.push(b'\n');
        }
        for (ext, bytes) in [("post", &post), ("meta", &meta), ("docs", &docs)] {
            publish_fresh(tmp, &dir.join(format!("{name}.{ext}")), bytes)?;
        }
        publish_fresh(tmp, &dir.join(format!("{name}.terms")), &terms)
    }
}

/// Publishes, replacing a leftover of a killed writer (a segment is listed
/// in the manifest only after all its files are in place, so a file of an
/// unlisted segment is garbage).
fn publish_fresh(tmp: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    fsx::remove_file(dest)?;
    fsx::publish(tmp, dest, bytes)
}

/// The files of segment `name`, for removal.
pub fn files(dir: &Path, name: &str) -> Vec<std::path::PathBuf> {
    ["terms", "post", "meta", "docs"]
        .iter()
        .map(|e| dir.join(format!("{name}.{e}")))
        .collect()
}

fn damaged(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("search index damaged ({what}); run `swarm search --reindex`"),
    )
}

/// An open segment.
pub struct Segment {
    terms: File,
    post: File,
    meta: File,
    docs: File,
    n_terms: u64,
    n_post: u64,
    pub n_docs: u32,
    docs_len: u64,
}

fn read_exact_at(f: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    f.read_exact_at(buf, at)
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]))
}
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]))
}
fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes(b[i..i + 2].try_into().unwrap_or([0; 2]))
}

impl Segment {
    /// Opens segment `name` in `dir` (never through a symlink).
    pub fn open(dir: &Path, name: &str) -> io::Result<Segment> {
        let open = |ext: &str| fsx::open_regular(&dir.join(format!("{name}.{ext}")));
        let (terms, post, meta, docs) =
            (open("terms")?, open("post")?, open("meta")?, open("docs")?);
        let size = |f: &File| f.metadata().map(|m| m.len());
        let (ts, ps, ms, ds) = (size(&terms)?, size(&post)?, size(&meta)?, size(&docs)?);
        if ts % TERM != 0 || ps % POST != 0 || ms % META != 0 || ms / META > u64::from(u32::MAX) {
            return Err(damaged(&format!("{name}: file sizes")));
        }
        Ok(Segment {
            terms,
            post,
            meta,
            docs,
            n_terms: ts / TERM,
            n_post: ps / POST,
            n_docs: (ms / META) as u32,
            docs_len: ds,
        })
    }

    fn term_at(&self, i: u64) -> io::Result<(u64, u64, u32)> {
        let mut b = [0u8; TERM as usize];
        read_exact_at(&self.terms, &mut b, i * TERM)?;
        Ok((u64_at(&b, 0), u64_at(&b, 8), u32_at(&b, 16)))
    }

    /// Where the postings of term hash `h` start, and how many there are.
    fn find(&self, h: u64) -> io::Result<Option<(u64, u32)>> {
        let (mut lo, mut hi) = (0u64, self.n_terms);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (mh, off, count) = self.term_at(mid)?;
            if mh == h {
                return Ok(Some((off, count)));
            }
            if mh < h {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(None)
    }

    /// The postings of term hash `h` (none when absent).
    pub fn postings(&self, h: u64) -> io::Result<Vec<Posting>> {
        match self.find(h)? {
            Some((off, count)) => self.read_postings(off, count),
            None => Ok(Vec::new()),
        }
    }

    /// How many messages of this segment hold term `h`, without reading
    /// its postings (a ranking needs only the count).
    pub fn count(&self, h: u64) -> io::Result<u32> {
        Ok(self.find(h)?.map_or(0, |(_, count)| count))
    }

    fn read_postings(&self, off: u64, count: u32) -> io::Result<Vec<Posting>> {
        let end = off.checked_add(u64::from(count));
        if end.is_none_or(|e| e > self.n_post) {
            return Err(damaged("postings out of range"));
        }
        let mut b = vec![0u8; count as usize * POST as usize];
        read_exact_at(&self.post, &mut b, off * POST)?;
        let mut v = Vec::with_capacity(count as usize);
        for c in b.chunks_exact(POST as usize) {
            let doc = u32_at(c, 0);
            if doc >= self.n_docs {
                return Err(damaged("posting names no doc"));
            }
            v.push(Posting {
                doc,
                tf: u16_at(c, 4),
                len: u16_at(c, 6),
            });
        }
        Ok(v)
    }

    /// Whether term hash `h` is in this segment (a refresh's "indexed yet?").
    pub fn has(&self, h: u64) -> io::Result<bool> {
        Ok(self.find(h)?.is_some())
    }

    fn meta_at(&self, doc: u32) -> io::Result<(i64, u64, u32)> {
        if doc >= self.n_docs {
            return Err(damaged("doc out of range"));
        }
        let mut b = [0u8; META as usize];
        read_exact_at(&self.meta, &mut b, u64::from(doc) * META)?;
        Ok((u64_at(&b, 0) as i64, u64_at(&b, 8), u32_at(&b, 16)))
    }

    /// Every doc's creation time (seconds), for a `--since` filter.
    pub fn created_all(&self) -> io::Result<Vec<i64>> {
        let mut b = vec![0u8; self.n_docs as usize * META as usize];
        read_exact_at(&self.meta, &mut b, 0)?;
        Ok(b.chunks_exact(META as usize)
            .map(|c| u64_at(c, 0) as i64)
            .collect())
    }

    /// One doc's reference.
    pub fn doc(&self, doc: u32) -> io::Result<DocRef> {
        let (_, off, len) = self.meta_at(doc)?;
        if len > MAX_DOC_LINE
            || off
                .checked_add(u64::from(len))
                .is_none_or(|e| e > self.docs_len)
        {
            return Err(damaged("doc line out of range"));
        }
        let mut b = vec![0u8; len as usize];
        read_exact_at(&self.docs, &mut b, off)?;
        serde_json::from_slice(&b).map_err(|_| damaged("doc line unreadable"))
    }

    fn term_table(&self) -> io::Result<Vec<u8>> {
        let mut b = vec![0u8; (self.n_terms * TERM) as usize];
        read_exact_at(&self.terms, &mut b, 0)?;
        Ok(b)
    }

    /// Every term hash, sorted (what a refresh asks "indexed yet?" of).
    pub fn term_hashes(&self) -> io::Result<Vec<u64>> {
        let b = self.term_table()?;
        Ok(b.chunks_exact(TERM as usize)
            .map(|c| u64_at(c, 0))
            .collect())
    }

    /// The whole segment back in memory (for a merge).
    pub fn load(&self) -> io::Result<Built> {
        let mut built = Built::default();
        for c in self.term_table()?.chunks_exact(TERM as usize) {
            let (h, off, count) = (u64_at(c, 0), u64_at(c, 8), u32_at(c, 16));
            built.terms.insert(h, self.read_postings(off, count)?);
        }
        for d in 0..self.n_docs {
            built.docs.push(self.doc(d)?);
        }
        Ok(built)
    }
}
