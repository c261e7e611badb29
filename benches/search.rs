//! `swarm search` against a scan of the files (what `swarm transcript |
//! grep` does), at 10 000 and 100 000 messages, reported as ratios
//! (docs/benchmarks.md, "Search").
//!
//!   cargo bench --bench search -- [--sizes 10000,100000] [--runs 200] [--dir D]
//!
//! Per size: the messages are written into 4 senders' `sent/` folders
//! (words drawn from a 20 000-word vocabulary, Zipf-like, 40-120 words a
//! message), then:
//! - build: `Index::reindex` (every file read once);
//! - query: `search::search` in process, p50 and p95 over `--runs`, for a
//!   rare word, a common word, two words, and a common word with `--role`;
//! - cli: `swarm search <rare word>` as a process, p50 of 20;
//! - scan: `Trail::load` of every original plus a word match on each, the
//!   floor of any answer without an index (p50 of 3).

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use swarm_handoff::fsx;
use swarm_handoff::protocol::clock;
use swarm_handoff::protocol::header::{Header, Message};
use swarm_handoff::protocol::layout::{Project, Worktree};
use swarm_handoff::protocol::trail::{Scope, Trail};
use swarm_handoff::search::{self, Index, Query};

const SENDERS: [&str; 4] = ["s0", "s1", "s2", "s3"];
const VOCAB: usize = 20_000;

/// xorshift: the same corpus every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Zipf-like: small indexes far more often.
    fn word(&mut self) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((VOCAB as f64).powf(u) as usize)
            .saturating_sub(1)
            .min(VOCAB - 1)
    }
}

fn word(i: usize) -> String {
    format!("w{i}x")
}

fn fixture(base: &Path, n: usize) -> (tempfile::TempDir, Project) {
    let d = tempfile::tempdir_in(base).unwrap();
    let root = d.path().canonicalize().unwrap();
    let mut tsv = String::new();
    for s in SENDERS {
        let wt = root.join(s);
        common::role_worktree(&root, &wt);
        tsv.push_str(&format!("{s}\t{s}\t{}\ts\tX\tscript\ttask\n", wt.display()));
    }
    common::project_files(&root, &tsv, false);
    fsx::set_fsync(false);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let t0 = clock::now() - chrono::Duration::days(3);
    for seq in 0..n {
        let from = SENDERS[seq % 4];
        let to = SENDERS[(seq + 1) % 4];
        let t = t0 + chrono::Duration::milliseconds(seq as i64 * 100);
        let id = format!("{}_{:06}_from_{from}", clock::idts(t), seq % 1_000_000);
        let words = 40 + (rng.next() % 80) as usize;
        let text: Vec<String> = (0..words).map(|_| word(rng.word())).collect();
        let mut m = Message::default();
        m.set(Header::Id, &id);
        m.set(Header::From, from);
        m.set(Header::To, to);
        m.set(Header::Priority, "50");
        m.set(Header::Type, "note");
        m.set(Header::Message, text[..6].join(" "));
        m.set(Header::CreatedAt, clock::iso(t));
        m.body = format!(
            "Re-read your role and constitution.\n\n{}\n",
            text.join(" ")
        );
        let wt = Worktree::new(root.join(from));
        let name = format!("50_{id}_to_{to}.handoff");
        fsx::publish(
            &wt.outbox_tmp(),
            &wt.sent().join(name),
            m.render().as_bytes(),
        )
        .unwrap();
    }
    (d, Project::new(&root))
}

fn pct(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let f = common::flags();
    let sizes: Vec<usize> = f
        .get("sizes")
        .map(|s| {
            s.split(',')
                .map(|n| n.parse().expect("--sizes N,M"))
                .collect()
        })
        .unwrap_or_else(|| vec![10_000, 100_000]);
    let runs: usize = common::flag(&f, "runs", 200);
    let base = f
        .get("dir")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    println!("| messages | build | query | p50 | p95 | hits | scan p50 | scan ÷ query p50 |");
    println!("|---|---|---|---|---|---|---|---|");
    for n in sizes {
        let (_d, project) = fixture(&base, n);
        // Folders changed less than a second ago are read again by the
        // next query (docs/search.md): let them settle, as a live swarm's do.
        std::thread::sleep(Duration::from_millis(1200));
        let t = Instant::now();
        let r = Index::new(&project).reindex().unwrap();
        let build = t.elapsed();
        assert_eq!(r.docs as usize, n);
        let queries: [(&str, String, Option<&str>); 4] = [
            ("rare word", word(VOCAB / 2), None),
            ("common word", word(3), None),
            ("two words", format!("{} {}", word(3), word(40)), None),
            ("common word, --role", word(3), Some("s1")),
        ];
        let mut scan_q = String::new();
        let mut first_p50 = Duration::ZERO;
        for (label, text, role) in &queries {
            let q = Query {
                text: text.clone(),
                role: role.map(str::to_string),
                limit: 20,
                ..Query::default()
            };
            let mut times = Vec::with_capacity(runs);
            let mut total = 0;
            for _ in 0..runs {
                let t = Instant::now();
                let a = search::search(&project, &q).unwrap();
                times.push(t.elapsed());
                total = a.total;
            }
            let (p50, p95) = (pct(times.clone(), 0.5), pct(times, 0.95));
            if scan_q.is_empty() {
                scan_q = text.clone();
                first_p50 = p50;
            }
            println!(
                "| {n} | {:.0} ms | {label} | {:.2} ms | {:.2} ms | {total} | | |",
                ms(build),
                ms(p50),
                ms(p95)
            );
        }
        // The scan: every original read and matched, as without an index.
        let mut scans = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let trail = Trail::load(&project, &Scope::originals()).unwrap();
            let hits = trail
                .originals
                .iter()
                .filter(|o| {
                    o.msg
                        .body
                        .split(|c: char| !c.is_alphanumeric())
                        .any(|w| w.eq_ignore_ascii_case(&scan_q))
                })
                .count();
            scans.push(t.elapsed());
            assert!(hits > 0);
        }
        let scan = pct(scans, 0.5);
        let mut cli = Vec::new();
        for _ in 0..20 {
            let t = Instant::now();
            let ok = Command::new(common::bin("swarm"))
                .args(["--root"])
                .arg(&project.root)
                .args(["search", &scan_q])
                .stdout(Stdio::null())
                .status()
                .unwrap()
                .success();
            cli.push(t.elapsed());
            assert!(ok);
        }
        println!(
            "| {n} | | `swarm search` (process) | {:.2} ms | | | {:.0} ms | {:.0}× |",
            ms(pct(cli, 0.5)),
            ms(scan),
            scan.as_secs_f64() / first_p50.as_secs_f64()
        );
        let size: u64 = common::walk(&project.swarmforge().join("search"))
            .iter()
            .filter_map(|p| fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        println!(
            "| {n} | index size {:.1} MB | | | | | | |",
            size as f64 / 1e6
        );
    }
}
