//! Ranking: the documents of each segment that hold every word of a query
//! (narrowed first by `--role`, `--type` and `--since`), scored by BM25
//! (k1 1.2, b 0.75), the best `limit` kept, newer first on a tie.
//!
//! Why a module: query.rs answers a query from the files; this finds and
//! orders what to look up. Invariant: the bounded top-k (block score
//! bounds let whole blocks be skipped) ranks exactly as scoring every match
//! and sorting would; a test compares the two on random corpora.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::io;

use super::ask::Query;
use super::segment::{Bound, Posting, Segment, BLOCK};
use super::tokens;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// BM25 over the whole index: each word's idf and the average length.
pub(super) struct Bm25 {
    idf: Vec<f64>,
    avgdl: f64,
}

impl Bm25 {
    /// For `words` over `segs`, which hold `n` docs of `total_words` words.
    pub(super) fn new(
        segs: &[Segment],
        n: u64,
        total_words: u64,
        words: &[u64],
    ) -> io::Result<Bm25> {
        let avgdl = if n == 0 {
            1.0
        } else {
            (total_words as f64 / n as f64).max(1.0)
        };
        // Document frequency over the whole index, per word.
        let mut idf = Vec::with_capacity(words.len());
        for h in words {
            let mut df = 0u64;
            for s in segs {
                df += u64::from(s.count(*h)?);
            }
            idf.push((1.0 + (n as f64 - df as f64 + 0.5) / (df as f64 + 0.5)).ln());
        }
        Ok(Bm25 { idf, avgdl })
    }

    /// Word `w`'s part of the score of a doc of `len` words holding it `tf`
    /// times: grows with `tf`, shrinks with `len`, so a block's highest
    /// count and shortest doc bound every posting in it.
    fn term(&self, w: usize, tf: u16, len: u16) -> f64 {
        let tf = f64::from(tf);
        let norm = 1.0 - B + B * f64::from(len) / self.avgdl;
        self.idf[w] * tf * (K1 + 1.0) / (tf + K1 * norm)
    }

    /// The most word `w` can add to the score of a doc of block `b`.
    fn bound(&self, w: usize, b: &Bound) -> f64 {
        b.corners
            .iter()
            .map(|(tf, len)| self.term(w, *tf, *len))
            .fold(0.0, f64::max)
    }

    /// The sum of the words' parts, in word order (a bound summed the same
    /// way is never below the score it bounds: rounding is monotone).
    fn sum(&self, parts: impl Iterator<Item = (u16, u16)>) -> f64 {
        parts
            .enumerate()
            .fold(0.0, |acc, (w, (tf, len))| acc + self.term(w, tf, len))
    }
}

/// A hit being ranked. Greater is better: the higher score, then the newer
/// (a later segment, a later doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Ranked {
    pub(super) score: f64,
    pub(super) seg: usize,
    pub(super) doc: u32,
}

impl Eq for Ranked {}
impl Ord for Ranked {
    fn cmp(&self, o: &Ranked) -> Ordering {
        self.score
            .total_cmp(&o.score)
            .then(self.seg.cmp(&o.seg))
            .then(self.doc.cmp(&o.doc))
    }
}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, o: &Ranked) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// The best `want` hits offered so far (the worst of them on top).
struct Top {
    want: usize,
    heap: BinaryHeap<Reverse<Ranked>>,
}

impl Top {
    fn new(want: usize) -> Top {
        Top {
            want,
            heap: BinaryHeap::with_capacity(want + 1),
        }
    }

    fn offer(&mut self, r: Ranked) {
        if self.heap.len() < self.want {
            self.heap.push(Reverse(r));
        } else if self.heap.peek().is_some_and(|w| r > w.0) {
            self.heap.pop();
            self.heap.push(Reverse(r));
        }
    }

    /// Whether a hit scoring at most `bound` could still get in. One that
    /// ties the worst score can: it may be newer.
    fn reachable(&self, bound: f64) -> bool {
        self.heap.len() < self.want
            || self
                .heap
                .peek()
                .is_some_and(|w| bound.total_cmp(&w.0.score).is_ge())
    }

    /// Best first.
    fn sorted(self) -> Vec<Ranked> {
        let mut v: Vec<Ranked> = self.heap.into_iter().map(|r| r.0).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v
    }
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

/// Whether `q` narrows the set beyond its words.
fn filtered(q: &Query) -> bool {
    q.role.is_some() || q.kind.is_some() || q.since.is_some()
}

/// How many docs match `words` and `q`'s filters, and the best `want` of
/// them, in the order an exhaustive ranking gives (`tests` compares the
/// two). Blocks or docs whose bound cannot reach the `want`-th best so far
/// are not scored: a word in most messages costs its best blocks, not all
/// its postings.
pub(super) fn top(
    segs: &[Segment],
    bm: &Bm25,
    q: &Query,
    words: &[u64],
    want: usize,
) -> io::Result<(usize, Vec<Ranked>)> {
    let mut top = Top::new(want);
    if let ([h], false) = (words, filtered(q)) {
        let total = top_of_one_word(segs, bm, *h, &mut top)?;
        return Ok((total, top.sorted()));
    }
    let mut total = 0;
    for (si, s) in segs.iter().enumerate() {
        total += top_in_segment(si, s, bm, q, words, &mut top)?;
    }
    Ok((total, top.sorted()))
}

/// One word without filters: every posting matches; its blocks are scored
/// best bound first, until no block can reach the top. Returns how many
/// docs match.
fn top_of_one_word(segs: &[Segment], bm: &Bm25, h: u64, top: &mut Top) -> io::Result<usize> {
    let mut total = 0;
    let mut blocks: Vec<(f64, usize, u32)> = Vec::new();
    let mut terms = Vec::with_capacity(segs.len());
    for (si, s) in segs.iter().enumerate() {
        let t = s.find(h)?;
        if let Some(t) = &t {
            total += t.count as usize;
            for (bi, b) in s.bounds(t)?.into_iter().enumerate() {
                blocks.push((0.0 + bm.bound(0, &b), si, bi as u32));
            }
        }
        terms.push(t);
    }
    blocks.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
    for (bound, si, bi) in blocks {
        if !top.reachable(bound) {
            break;
        }
        let Some(t) = &terms[si] else { continue };
        for p in segs[si].block(t, bi)? {
            top.offer(Ranked {
                score: bm.sum(std::iter::once((p.tf, p.len))),
                seg: si,
                doc: p.doc,
            });
        }
    }
    Ok(total)
}

/// The docs of segment `si` that hold every word and pass the filters,
/// each scored unless its bound cannot reach the top. Returns how many
/// docs match.
fn top_in_segment(
    si: usize,
    s: &Segment,
    bm: &Bm25,
    q: &Query,
    words: &[u64],
    top: &mut Top,
) -> io::Result<usize> {
    let mut lists: Vec<Vec<Posting>> = Vec::with_capacity(words.len());
    let mut bounds: Vec<Vec<f64>> = Vec::with_capacity(words.len());
    for (w, h) in words.iter().enumerate() {
        let Some(t) = s.find(*h)? else {
            return Ok(0);
        };
        lists.push(s.postings_of(&t)?);
        bounds.push(s.bounds(&t)?.into_iter().map(|b| bm.bound(w, &b)).collect());
    }
    let keep = narrowed(s, &lists, q)?;
    let total = keep.len();
    // Each doc's posting in each list, walking the lists along.
    let mut at = vec![0usize; lists.len()];
    for d in keep {
        for (w, l) in lists.iter().enumerate() {
            while l.get(at[w]).is_some_and(|p| p.doc < d) {
                at[w] += 1;
            }
            if l.get(at[w]).is_none_or(|p| p.doc != d) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "search index damaged (postings out of order); run `swarm search --reindex`",
                ));
            }
        }
        let bound = bounds
            .iter()
            .zip(&at)
            .fold(0.0, |acc, (b, i)| acc + b[i / BLOCK]);
        if !top.reachable(bound) {
            continue;
        }
        let score = bm.sum(at.iter().zip(&lists).map(|(i, l)| (l[*i].tf, l[*i].len)));
        top.offer(Ranked {
            score,
            seg: si,
            doc: d,
        });
    }
    Ok(total)
}

/// The docs of `s` that hold every list's word and pass `q`'s filters,
/// narrowed from the rarest list.
fn narrowed(s: &Segment, lists: &[Vec<Posting>], q: &Query) -> io::Result<Vec<u32>> {
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
        let mut who = s.postings(tokens::from_key(r))?;
        who.extend(s.postings(tokens::to_key(r))?);
        who.sort_unstable_by_key(|p| p.doc);
        who.dedup_by_key(|p| p.doc);
        narrow(&mut keep, &who);
    }
    if let Some(k) = &q.kind {
        narrow(&mut keep, &s.postings(tokens::type_key(k))?);
    }
    if let Some(since) = q.since {
        if !keep.is_empty() {
            let created = s.created_all()?;
            keep.retain(|d| created.get(*d as usize).is_some_and(|c| *c >= since));
        }
    }
    Ok(keep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::segment::{Built, DocRef};
    use crate::search::tokens::Terms;
    use std::collections::HashMap;

    /// The ranking before bounds (every match scored, then sorted): what
    /// [`top`] must give exactly.
    fn exhaustive(
        segs: &[Segment],
        bm: &Bm25,
        q: &Query,
        words: &[u64],
        want: usize,
    ) -> (usize, Vec<Ranked>) {
        let mut all = Vec::new();
        for (si, s) in segs.iter().enumerate() {
            let lists: Vec<Vec<Posting>> = words.iter().map(|h| s.postings(*h).unwrap()).collect();
            if lists.iter().any(Vec::is_empty) {
                continue;
            }
            for d in narrowed(s, &lists, q).unwrap() {
                let parts = lists.iter().map(|l| {
                    let p = l.iter().find(|p| p.doc == d).unwrap();
                    (p.tf, p.len)
                });
                all.push(Ranked {
                    score: bm.sum(parts),
                    seg: si,
                    doc: d,
                });
            }
        }
        let total = all.len();
        all.sort_by(|a, b| b.cmp(a));
        all.truncate(want);
        (total, all)
    }

    /// A seeded generator, so a failure names its corpus by seed.
    struct Rng(proptest::test_runner::TestRng);
    impl Rng {
        fn seeded(seed: u64) -> Rng {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&seed.to_le_bytes());
            Rng(proptest::test_runner::TestRng::from_seed(
                proptest::test_runner::RngAlgorithm::ChaCha,
                &bytes,
            ))
        }
        fn below(&mut self, n: u64) -> u64 {
            proptest::prelude::Rng::next_u64(&mut self.0) % n
        }
    }

    const ROLES: [&str; 3] = ["a", "b", "c"];
    const KINDS: [&str; 2] = ["note", "post"];

    /// Segments of random messages over a small vocabulary (so words are
    /// common and scores tie often), and the corpus's doc and word counts.
    fn corpus(dir: &std::path::Path, rng: &mut Rng) -> (Vec<Segment>, u64, u64) {
        let tmp = dir.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let vocab = 2 + rng.below(40);
        // Short messages make equal scores (and equal bounds) common.
        let longest = [3, 8, 30][rng.below(3) as usize];
        let (mut n, mut words) = (0, 0);
        let mut segs = Vec::new();
        for si in 0..1 + rng.below(4) {
            let mut b = Built::default();
            for d in 0..rng.below(1200) {
                let mut counts: HashMap<u64, u32> = HashMap::new();
                let len = 1 + rng.below(longest) as u32;
                for _ in 0..len {
                    // Low words far more often.
                    let spread = 1 + rng.below(vocab);
                    let w = rng.below(spread);
                    *counts
                        .entry(tokens::hash(format!("w{w}").as_bytes()))
                        .or_default() += 1;
                }
                let (from, to) = (ROLES[rng.below(3) as usize], ROLES[rng.below(3) as usize]);
                let kind = KINDS[rng.below(2) as usize];
                counts.insert(tokens::from_key(from), 1);
                counts.insert(tokens::to_key(to), 1);
                counts.insert(tokens::type_key(kind), 1);
                b.add(
                    DocRef {
                        id: format!("{si}-{d}"),
                        file: String::new(),
                        wt: String::new(),
                        from: from.into(),
                        to: to.into(),
                        kind: kind.into(),
                        created: rng.below(100) as i64,
                    },
                    &Terms {
                        counts,
                        len,
                        bytes: 0,
                        cut: false,
                    },
                );
            }
            n += b.docs.len() as u64;
            words += b.words;
            let name = format!("seg-{si}");
            b.write(dir, &tmp, &name).unwrap();
            segs.push(Segment::open(dir, &name).unwrap());
        }
        (segs, n, words)
    }

    #[test]
    fn bounded_top_k_ranks_exactly_as_scoring_every_match() {
        for seed in 1..=60u64 {
            let d = tempfile::tempdir().unwrap();
            let mut rng = Rng::seeded(seed);
            let (segs, n, total_words) = corpus(d.path(), &mut rng);
            for _ in 0..25 {
                let mut words: Vec<u64> = (0..1 + rng.below(3))
                    .map(|_| tokens::hash(format!("w{}", rng.below(12)).as_bytes()))
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let mut q = Query {
                    role: (rng.below(3) == 0).then(|| ROLES[rng.below(3) as usize].into()),
                    kind: (rng.below(4) == 0).then(|| KINDS[rng.below(2) as usize].into()),
                    since: (rng.below(4) == 0).then(|| rng.below(100) as i64),
                    ..Query::default()
                };
                let want = 1 + rng.below(300) as usize;
                if rng.below(3) == 0 {
                    // A lone word without filters: the block-ordered path.
                    words.truncate(1);
                    q = Query::default();
                }
                let bm = Bm25::new(&segs, n, total_words, &words).unwrap();
                let got = top(&segs, &bm, &q, &words, want).unwrap();
                let expect = exhaustive(&segs, &bm, &q, &words, want);
                assert_eq!(got, expect, "seed {seed}, {q:?}, want {want}");
            }
        }
    }
}
