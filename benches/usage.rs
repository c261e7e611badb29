//! Usage journaling on the delivery path (docs/cost.md): none, shown.
//!
//!   cargo bench --bench usage -- [--messages N] [--latency-messages M] [--journal L] [--dir D]
//!
//! The same delivery, side by side in one run, in two projects:
//! - plain: no budgets, no usage journal (a wake-up command per delivery
//!   and a 100 ms sweep, as in the other);
//! - spending: a budget per recipient and one for the swarm (never reached),
//!   a usage journal of L lines (default 50 000, ~12 MB) that a writer thread
//!   keeps appending to while messages flow (as runners journal turns), a
//!   wake-up per delivery (each asks the budget, reading the whole journal),
//!   and a 100 ms sweep (the daemon's budget check reads it again each time).
//!
//! Reports the library delivery pass (µs per message) and created →
//! enqueued latency through a real `handoffd` (p50/p99), fsync off so the
//! figures are the CPU's, not the disk's.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use swarm_handoff::fsx;
use swarm_handoff::protocol::clock;
use swarm_handoff::protocol::header::{Header, Message};
use swarm_handoff::protocol::layout::{Project, Worktree};
use swarm_handoff::telemetry::usage::{self, Usage};

fn project(base: &Path, spending: bool, journal: usize) -> (tempfile::TempDir, Project) {
    let d = tempfile::tempdir_in(base).unwrap();
    let root = d.path().canonicalize().unwrap();
    let wt = root.join("wt0");
    common::role_worktree(&root, &wt);
    let tsv = format!(
        "sender\tmaster\t{}\ts\tSender\tscript\ttask\nr0\tr0\t{}\ts\tR\tscript\ttask\n",
        root.display(),
        wt.display()
    );
    common::project_files(&root, &tsv, false);
    // Both projects wake each recipient and sweep alike; only budgets and
    // the journal differ.
    fs::write(
        root.join("swarm.yaml"),
        "daemon: {fsync: false, sweep: 100ms}\nwake: {method: command, command: 'true'}\n",
    )
    .unwrap();
    if spending {
        fs::write(
            root.join("swarm.yaml"),
            "daemon: {fsync: false, sweep: 100ms}\nwake: {method: command, command: 'true'}\nbudget: {tokens: 999999999999, per: swarm}\nprices:\n  m: {input: 3, output: 15}\nroles:\n  - {name: r0, budget: {cost: 1000000, per: day}}\n  - {name: sender, budget: {cost: 1000000, per: day}}\n",
        )
        .unwrap();
    }
    let p = Project::new(&root);
    fsx::ensure_dirs(&Worktree::new(&root).all_dirs()).unwrap();
    if spending {
        let mut text = String::new();
        for _ in 0..journal {
            text.push_str(&serde_json::to_string(&turn()).unwrap());
            text.push('\n');
        }
        fs::create_dir_all(p.telemetry_dir()).unwrap();
        fs::write(p.usage_file(), text).unwrap();
    }
    (d, p)
}

fn turn() -> Usage {
    let mut u = Usage::now("r0", "api");
    u.id = Some("20261202T010000Z_000001_from_sender".into());
    u.thread = u.id.clone();
    u.model = Some("m".into());
    u.input_tokens = 1200;
    u.output_tokens = 340;
    u
}

/// Appends a turn every millisecond until stopped (the runners' side).
fn writer(p: &Project, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    let p = p.clone();
    std::thread::spawn(move || {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            usage::record(&p, &turn()).unwrap();
            n += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        n
    })
}

fn throughput(p: &Project, n: usize) -> Duration {
    let wt = Worktree::new(&p.root);
    fsx::set_fsync(false);
    for i in 0..n {
        common::publish_note(&wt, "sender", i + 1, "r0");
    }
    let mut d = common::deliverer(p);
    let t = Instant::now();
    let r = d.pass();
    let el = t.elapsed();
    assert_eq!(r.delivered, n, "every message delivered");
    el / n as u32
}

fn latency(p: &Project, n: usize) -> (f64, f64) {
    let _d = common::Daemon::start(p);
    let wt = Worktree::new(&p.root);
    let sent = wt.sent();
    let before = fs::read_dir(&sent).map(|r| r.count()).unwrap_or(0);
    for i in 0..n {
        common::publish_note(&wt, "sender", 1_000_000 + i, "r0");
        let want = before + i + 1;
        let deadline = Instant::now() + Duration::from_secs(10);
        while fs::read_dir(&sent).map(|r| r.count()).unwrap_or(0) < want {
            assert!(Instant::now() < deadline, "message {want} delivered");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let inbox: PathBuf = Worktree::new(p.root.join("wt0")).inbox_new();
    let mut ms: Vec<f64> = fs::read_dir(&inbox)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let m = Message::parse_bytes(&fs::read(e.path()).ok()?).ok()?;
            // Only the latency run's copies (seq >= 1 000 000).
            let id = m.get(Header::Id)?;
            let seq: usize = id.split('_').nth(1)?.parse().ok()?;
            if seq < 1_000_000 {
                return None;
            }
            let c = clock::parse(m.get(Header::CreatedAt)?)?;
            let q = clock::parse(m.get(Header::EnqueuedAt)?)?;
            Some((q - c).num_microseconds()? as f64 / 1000.0)
        })
        .collect();
    ms.sort_by(|a, b| a.total_cmp(b));
    let pct = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    (pct(0.5), pct(0.99))
}

fn main() {
    let f = common::flags();
    let messages: usize = common::flag(&f, "messages", 2_000);
    let lat: usize = common::flag(&f, "latency-messages", 300);
    let journal: usize = common::flag(&f, "journal", 50_000);
    let dir: PathBuf = common::flag(&f, "dir", std::env::temp_dir());
    println!(
        "usage benchmark: {messages} messages per pass, {lat} for latency, a journal of {journal} lines, dir {}",
        dir.display()
    );
    println!();
    println!(
        "| project | pass µs/msg | latency p50 ms | latency p99 ms | turns journaled meanwhile |"
    );
    println!("|---|---|---|---|---|");
    for spending in [false, true] {
        let (_d, p) = project(&dir, spending, journal);
        let stop = Arc::new(AtomicBool::new(false));
        let w = spending.then(|| writer(&p, Arc::clone(&stop)));
        let per = throughput(&p, messages);
        let (p50, p99) = latency(&p, lat);
        stop.store(true, Ordering::Relaxed);
        let written = w.map(|w| w.join().unwrap()).unwrap_or(0);
        println!(
            "| {} | {:.0} | {p50:.2} | {p99:.2} | {written} |",
            if spending { "spending" } else { "plain" },
            common::us(per),
        );
    }
}
