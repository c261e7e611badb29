//! One immutable piece of the index: the messages one refresh added (or a
//! merge of older pieces), in five files published whole by `fsx`:
//!
//! - `<name>.post`: postings, 8 bytes each (doc u32, count u16, doc length
//!   u16), grouped by term, docs ascending;
//! - `<name>.blk`: per term, per [`BLOCK`] of its postings, 16 bytes: the
//!   [`Bound`] of the block, four (count u16, doc length u16) pairs no
//!   posting of the block can score above, so a query skips blocks that
//!   cannot reach its top hits (`query.rs`);
//! - `<name>.meta`: per doc, 20 bytes (created i64 seconds, offset u64 and
//!   length u32 of its line in `.docs`);
//! - `<name>.docs`: per doc one JSON line ([`DocRef`]);
//! - `<name>.terms`: per term, 24 bytes (hash u64, first posting u64, count
//!   u32, first block u32), sorted by hash; written last, so a segment whose
//!   `.terms` exists is complete.
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

const TERM: u64 = 24;
const POST: u64 = 8;
const META: u64 = 20;
const BLK: u64 = 4 * CORNERS as u64;
/// Postings per block of `.blk`.
pub const BLOCK: usize = 128;
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

/// What bounds a block's scores: up to [`CORNERS`] (count, length) pairs
/// that together dominate every posting of the block (a score grows with
/// the count and shrinks with the length, so a posting scores at most as
/// much as a pair with a count at least its own and a length at most its
/// own). They are the block's best postings whatever the idf and average
/// length a query ranks with: its highest count with the shortest doc
/// holding it, then each lower count that comes with a shorter doc. Past
/// the last slot, one pair of the highest remaining count and the shortest
/// remaining length stands for the rest. Unused slots are (0, 0): a zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bound {
    pub corners: [(u16, u16); CORNERS],
}

/// Pairs kept per block.
pub const CORNERS: usize = 4;

impl Bound {
    /// The bound of `ps` (one block).
    pub fn of(ps: &[Posting]) -> Bound {
        let mut by: Vec<(u16, u16)> = ps.iter().map(|p| (p.tf, p.len)).collect();
        // Highest count first; the shortest doc first within a count.
        by.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut front: Vec<(u16, u16)> = Vec::new();
        for (tf, len) in by {
            if front.last().is_none_or(|l| len < l.1) {
                front.push((tf, len));
            }
        }
        let mut corners = [(0, 0); CORNERS];
        for (i, c) in front.iter().enumerate() {
            if i < CORNERS - 1 || front.len() == CORNERS {
                corners[i] = *c;
            } else {
                // The rest: the first of them has the highest count, the
                // last the shortest length.
                corners[CORNERS - 1] = (c.0, front[front.len() - 1].1);
                break;
            }
        }
        Bound { corners }
    }
}

/// One term of a segment: where its postings and blocks are.
#[derive(Clone, Copy, Debug)]
pub struct TermAt {
    pub post: u64,
    pub count: u32,
    pub block: u32,
}

impl TermAt {
    pub fn blocks(&self) -> u32 {
        self.count.div_ceil(BLOCK as u32)
    }
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
        let mut blk = Vec::new();
        let mut terms = Vec::with_capacity(self.terms.len() * TERM as usize);
        let mut at: u64 = 0;
        let mut block: u64 = 0;
        for (h, ps) in &self.terms {
            let first_block = u32::try_from(block)
                .map_err(|_| io::Error::other("too many posting blocks for one segment"))?;
            terms.extend_from_slice(&h.to_le_bytes());
            terms.extend_from_slice(&at.to_le_bytes());
            terms.extend_from_slice(&(ps.len() as u32).to_le_bytes());
            terms.extend_from_slice(&first_block.to_le_bytes());
            for p in ps {
                post.extend_from_slice(&p.doc.to_le_bytes());
                post.extend_from_slice(&p.tf.to_le_bytes());
                post.extend_from_slice(&p.len.to_le_bytes());
            }
            for c in ps.chunks(BLOCK) {
                for (tf, len) in Bound::of(c).corners {
                    blk.extend_from_slice(&tf.to_le_bytes());
                    blk.extend_from_slice(&len.to_le_bytes());
                }
                block += 1;
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
        for (ext, bytes) in [
            ("post", &post),
            ("blk", &blk),
            ("meta", &meta),
            ("docs", &docs),
        ] {
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
    ["terms", "post", "blk", "meta", "docs"]
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
    blk: File,
    meta: File,
    docs: File,
    n_terms: u64,
    n_post: u64,
    n_blk: u64,
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

fn term_of(b: &[u8]) -> TermAt {
    TermAt {
        post: u64_at(b, 8),
        count: u32_at(b, 16),
        block: u32_at(b, 20),
    }
}

impl Segment {
    /// Opens segment `name` in `dir` (never through a symlink).
    pub fn open(dir: &Path, name: &str) -> io::Result<Segment> {
        let open = |ext: &str| fsx::open_regular(&dir.join(format!("{name}.{ext}")));
        let (terms, post, blk, meta, docs) = (
            open("terms")?,
            open("post")?,
            open("blk")?,
            open("meta")?,
            open("docs")?,
        );
        let size = |f: &File| f.metadata().map(|m| m.len());
        let (ts, ps, bs, ms, ds) = (
            size(&terms)?,
            size(&post)?,
            size(&blk)?,
            size(&meta)?,
            size(&docs)?,
        );
        if ts % TERM != 0
            || ps % POST != 0
            || bs % BLK != 0
            || ms % META != 0
            || ms / META > u64::from(u32::MAX)
        {
            return Err(damaged(&format!("{name}: file sizes")));
        }
        Ok(Segment {
            terms,
            post,
            blk,
            meta,
            docs,
            n_terms: ts / TERM,
            n_post: ps / POST,
            n_blk: bs / BLK,
            n_docs: (ms / META) as u32,
            docs_len: ds,
        })
    }

    fn term_at(&self, i: u64) -> io::Result<(u64, TermAt)> {
        let mut b = [0u8; TERM as usize];
        read_exact_at(&self.terms, &mut b, i * TERM)?;
        Ok((u64_at(&b, 0), term_of(&b)))
    }

    /// Where the postings and blocks of term hash `h` are (none when absent).
    pub fn find(&self, h: u64) -> io::Result<Option<TermAt>> {
        let (mut lo, mut hi) = (0u64, self.n_terms);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (mh, t) = self.term_at(mid)?;
            if mh == h {
                return Ok(Some(t));
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
            Some(t) => self.read_postings(t.post, t.count),
            None => Ok(Vec::new()),
        }
    }

    /// All the postings of `t`.
    pub fn postings_of(&self, t: &TermAt) -> io::Result<Vec<Posting>> {
        self.read_postings(t.post, t.count)
    }

    /// The postings of `t`'s block `i`.
    pub fn block(&self, t: &TermAt, i: u32) -> io::Result<Vec<Posting>> {
        let start = u64::from(i) * BLOCK as u64;
        if start >= u64::from(t.count) {
            return Err(damaged("block out of range"));
        }
        let n = (u64::from(t.count) - start).min(BLOCK as u64) as u32;
        self.read_postings(t.post + start, n)
    }

    /// The bounds of `t`'s blocks, in order.
    pub fn bounds(&self, t: &TermAt) -> io::Result<Vec<Bound>> {
        let n = t.blocks();
        if u64::from(t.block) + u64::from(n) > self.n_blk {
            return Err(damaged("blocks out of range"));
        }
        let mut b = vec![0u8; n as usize * BLK as usize];
        read_exact_at(&self.blk, &mut b, u64::from(t.block) * BLK)?;
        Ok(b.chunks_exact(BLK as usize)
            .map(|c| {
                let mut b = Bound::default();
                for (i, k) in b.corners.iter_mut().enumerate() {
                    *k = (u16_at(c, 4 * i), u16_at(c, 4 * i + 2));
                }
                b
            })
            .collect())
    }

    /// How many messages of this segment hold term `h`, without reading
    /// its postings (a ranking needs only the count).
    pub fn count(&self, h: u64) -> io::Result<u32> {
        Ok(self.find(h)?.map_or(0, |t| t.count))
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
            let t = term_of(c);
            built
                .terms
                .insert(u64_at(c, 0), self.read_postings(t.post, t.count)?);
        }
        for d in 0..self.n_docs {
            built.docs.push(self.doc(d)?);
        }
        Ok(built)
    }
}
