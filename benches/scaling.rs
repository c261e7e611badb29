//! Costs that should not grow with history, backlog or roles (issue 19),
//! each reported as a ratio against a baseline measured in the same run.
//!
//!   cargo bench --bench scaling -- [--backlog 2000] [--roles 32] [--rate 40]
//!       [--latency-messages 400] [--burst 40000] [--waiting 100000]
//!       [--trail 50000] [--dir D] [--skip drain,roles,burst,accept,audit]
//!
//! Sections (one table row each in docs/benchmarks.md):
//! - drain: a backlog of N notes delivered by `Deliverer::pass` to 1 and to
//!   4 recipients, fsync on, against the bare write+fsync+rename+fsync(dir)
//!   loop: ratio = bare µs per file ÷ ours µs per copy (≥ 1: faster per copy
//!   than the bare loop per file);
//! - roles: created → enqueued p50 through a real `handoffd` with R sender
//!   roles against 1 sender role, the same total rate;
//! - burst: `handoffd`'s VmRSS while a burst of N files is delivered and 2 s
//!   after, against its idle VmRSS (fsync off, so the burst is quick);
//! - accept: `done-current` (complete + take the next) with W items waiting
//!   against 10 waiting, and against a readdir + sort of the folder;
//! - audit: `swarm audit --check` on T and T/5 messages against reading
//!   every file of each fixture once (`cat`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{median, ms};

use common::Daemon;

use swarm_handoff::agent::queue::Inbox;
use swarm_handoff::fsx;
use swarm_handoff::protocol::clock;
use swarm_handoff::protocol::header::{Header, Message};
use swarm_handoff::protocol::layout::{Project, Worktree};
use swarm_handoff::protocol::roles::ReceiveMode;

struct Opts {
    backlog: usize,
    roles: usize,
    rate: f64,
    latency_messages: usize,
    burst: usize,
    waiting: usize,
    trail: usize,
    dir: PathBuf,
    skip: Vec<String>,
}

fn opts() -> Opts {
    let f = common::flags();
    Opts {
        backlog: common::flag(&f, "backlog", 2_000),
        roles: common::flag(&f, "roles", 32),
        rate: common::flag(&f, "rate", 40.0),
        latency_messages: common::flag(&f, "latency-messages", 400),
        burst: common::flag(&f, "burst", 40_000),
        waiting: common::flag(&f, "waiting", 100_000),
        trail: common::flag(&f, "trail", 50_000),
        dir: common::flag(&f, "dir", std::env::temp_dir()),
        skip: common::skip(&f),
    }
}

/// A project with `senders` sender roles (`s0`…; `s0` in the root, the
/// others in `<root>/s<i>`) and `recipients` roles in `<root>/wt<i>`.
fn project(
    base: &Path,
    senders: usize,
    recipients: usize,
    fsync: bool,
) -> (tempfile::TempDir, Project) {
    let d = tempfile::tempdir_in(base).unwrap();
    let root = d.path().canonicalize().unwrap();
    let mut tsv = String::new();
    for s in 0..senders {
        let wt = if s == 0 {
            root.clone()
        } else {
            root.join(format!("s{s}"))
        };
        common::role_worktree(&root, &wt);
        tsv.push_str(&format!(
            "s{s}\ts{s}\t{}\ts\tS\tscript\ttask\n",
            wt.display()
        ));
    }
    for r in 0..recipients {
        let wt = root.join(format!("wt{r}"));
        common::role_worktree(&root, &wt);
        tsv.push_str(&format!(
            "r{r}\tr{r}\t{}\ts\tR\tscript\ttask\n",
            wt.display()
        ));
    }
    common::project_files(&root, &tsv, fsync);
    (d, Project::new(root))
}

fn sender_wt(p: &Project, s: usize) -> Worktree {
    if s == 0 {
        Worktree::new(&p.root)
    } else {
        Worktree::new(p.root.join(format!("s{s}")))
    }
}

/// Publishes one outbox note from `s<sender>` the way `swarm-handoff` does.
fn publish(p: &Project, sender: usize, seq: usize, to: &str) {
    common::publish_note(&sender_wt(p, sender), &format!("s{sender}"), seq, to);
}

fn count(dir: &Path) -> usize {
    fs::read_dir(dir).map(|r| r.count()).unwrap_or(0)
}

fn wait_count(dir: &Path, n: usize, within: Duration) {
    let deadline = Instant::now() + within;
    while count(dir) < n {
        assert!(Instant::now() < deadline, "{n} files in {}", dir.display());
        std::thread::sleep(Duration::from_millis(2));
    }
}

// ------------------------------------------------------------------ drain

/// One backlog of `n` notes to `recipients` delivered by one pass: µs per copy.
fn drain_once(o: &Opts, recipients: usize) -> Duration {
    let (_d, p) = project(&o.dir, 1, recipients, true);
    fsx::set_fsync(false);
    let to = common::recipients_list(recipients);
    for i in 0..o.backlog {
        publish(&p, 0, i + 1, &to);
    }
    fsx::set_fsync(true);
    let mut d = common::deliverer(&p);
    let t = Instant::now();
    let r = d.pass();
    let el = t.elapsed();
    assert_eq!(r.delivered, o.backlog);
    el / (o.backlog * recipients) as u32
}

fn drain(o: &Opts) {
    println!(
        "### Backlog drain ({} notes, fsync on; bare loop and ours alternated 3 times, medians)\n",
        o.backlog
    );
    println!("| recipients | bare loop µs/file | ours µs/copy | copies/s | ratio (bare µs ÷ ours µs per copy) |");
    println!("|---|---|---|---|---|");
    for recipients in [1usize, 4] {
        // Alternated on the same disk, so a neighbour's burst of writes
        // weighs on both sides alike.
        let mut bare = Vec::new();
        let mut ours = Vec::new();
        for _ in 0..3 {
            bare.push(common::bare_loop(&o.dir, o.backlog.min(2_000), true, 400));
            ours.push(drain_once(o, recipients));
        }
        let (bare, per_copy) = (median(bare), median(ours));
        println!(
            "| {recipients} | {:.0} | {:.0} | {:.0} | {:.2} |",
            common::us(bare),
            common::us(per_copy),
            1e6 / common::us(per_copy),
            common::us(bare) / common::us(per_copy)
        );
    }
    println!();
}

// ------------------------------------------------------------------ roles

/// created → enqueued p50 and p99 (ms) with `senders` roles sharing `rate`.
fn paced_latency(o: &Opts, senders: usize) -> (f64, f64) {
    let (_d, p) = project(&o.dir, senders, 1, true);
    let daemon = Daemon::start(&p);
    fsx::set_fsync(true);
    let gap = Duration::from_secs_f64(1.0 / o.rate);
    let start = Instant::now();
    for i in 0..o.latency_messages {
        let due = start + gap * i as u32;
        if let Some(w) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
        publish(&p, i % senders, i + 1, "r0");
    }
    let inbox = Worktree::new(p.root.join("wt0")).inbox_new();
    wait_count(&inbox, o.latency_messages, Duration::from_secs(60));
    drop(daemon);
    let mut v: Vec<f64> = fs::read_dir(&inbox)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let m = Message::parse_bytes(&fs::read(e.path()).ok()?).ok()?;
            let c = clock::parse(m.get(Header::CreatedAt)?)?;
            let q = clock::parse(m.get(Header::EnqueuedAt)?)?;
            Some((q - c).num_microseconds()? as f64 / 1000.0)
        })
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

fn roles(o: &Opts) {
    println!(
        "### Delivery latency with {} sender roles vs 1, {} messages/s in all (fsync on)\n",
        o.roles, o.rate
    );
    println!("| sender roles | created → enqueued p50 ms | p99 ms | ratio of p50 to 1 role | ratio of p99 to 1 role |");
    println!("|---|---|---|---|---|");
    let (one50, one99) = paced_latency(o, 1);
    let (many50, many99) = paced_latency(o, o.roles);
    println!("| 1 | {one50:.2} | {one99:.2} | 1.00 | 1.00 |");
    println!(
        "| {} | {many50:.2} | {many99:.2} | {:.2} | {:.2} |",
        o.roles,
        many50 / one50,
        many99 / one99
    );
    println!();
}

// ------------------------------------------------------------------ burst

fn rss_kib(pid: u32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn burst(o: &Opts) {
    let (_d, p) = project(&o.dir, 1, 1, false);
    let daemon = Daemon::start(&p);
    let pid = daemon.0.id();
    std::thread::sleep(Duration::from_millis(500));
    let idle = rss_kib(pid);
    fsx::set_fsync(false);
    let sampler = {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::spawn(move || {
            let mut peak = 0;
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        });
        (stop, h)
    };
    let t = Instant::now();
    for i in 0..o.burst {
        publish(&p, 0, i + 1, "r0");
    }
    let sent = Worktree::new(&p.root).sent();
    wait_count(&sent, o.burst, Duration::from_secs(600));
    let drained = t.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let after = rss_kib(pid);
    sampler.0.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.1.join().unwrap();
    drop(daemon);
    println!(
        "### handoffd VmRSS around a burst of {} files (fsync off; drained in {:.1} s)\n",
        o.burst,
        drained.as_secs_f64()
    );
    println!("| when | VmRSS KiB | ratio to idle |");
    println!("|---|---|---|");
    println!("| idle, before | {idle} | 1.00 |");
    println!(
        "| peak, during | {peak} | {:.2} |",
        peak as f64 / idle as f64
    );
    println!(
        "| 2 s after it drained | {after} | {:.2} |",
        after as f64 / idle as f64
    );
    println!();
}

// ----------------------------------------------------------------- accept

fn list_sorted(dir: &Path) -> Duration {
    let t = Instant::now();
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    v.sort_unstable();
    t.elapsed()
}

/// `done-current` with `n` waiting: (median of 5, listing floor, the
/// daemon's VmRSS KiB after). With `daemon`, a running `handoffd` answers the
/// order of a deep `new/` (protocol::order); without, the helper lists it.
fn accept_with(o: &Opts, n: usize, daemon: bool) -> (Duration, Duration, Option<u64>) {
    let (_d, p) = project(&o.dir, 1, 1, true);
    let rcv = p.root.join("wt0");
    let new = Worktree::new(&rcv).inbox_new();
    for i in 0..n + 6 {
        let (name, text) = common::copy_text("s0", "20260615T140531Z", i + 1);
        fs::write(new.join(name), text).unwrap();
    }
    let floor = list_sorted(&new).min(list_sorted(&new));
    let handoffd = daemon.then(|| Daemon::start(&p));
    let run = |prog: &str| {
        let out = Command::new(common::bin(prog))
            .current_dir(&rcv)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("SWARMFORGE_ROLE", "r0")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{prog}");
    };
    // The first call also has the daemon list the folder once.
    run("ready-next");
    let mut v = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        run("done-current");
        v.push(t.elapsed());
    }
    // Keeps the library import honest: the same call in process.
    let wt = Worktree::new(&rcv);
    let inbox = Inbox::new(&wt, 1 << 20);
    let _ = inbox.done(ReceiveMode::Task);
    let rss = handoffd.as_ref().map(|d| rss_kib(d.0.id()));
    (median(v), floor, rss)
}

fn accept(o: &Opts) {
    println!(
        "### Taking the next item: `done-current` with {} waiting vs 10 waiting (median of 5)\n",
        o.waiting
    );
    println!("| waiting | how the next item is found | done-current ms | readdir + sort ms | ratio to 10 waiting | ratio to its listing | handoffd VmRSS KiB |");
    println!("|---|---|---|---|---|---|---|");
    for (daemon, how) in [
        (false, "the helper lists `new/` (no daemon)"),
        (true, "the daemon's order hint (handoffd running)"),
    ] {
        let (small, small_floor, small_rss) = accept_with(o, 10, daemon);
        let (big, big_floor, big_rss) = accept_with(o, o.waiting, daemon);
        let kib = |r: Option<u64>| r.map_or("-".to_string(), |k| k.to_string());
        println!(
            "| 10 | {how} | {:.2} | {:.3} | 1.00 | {:.2} | {} |",
            ms(small),
            ms(small_floor),
            ms(small) / ms(small_floor),
            kib(small_rss)
        );
        println!(
            "| {} | {how} | {:.2} | {:.3} | {:.2} | {:.2} | {} |",
            o.waiting,
            ms(big),
            ms(big_floor),
            ms(big) / ms(small),
            ms(big) / ms(big_floor),
            kib(big_rss)
        );
    }
    println!();
}

// ------------------------------------------------------------------ audit

/// (`swarm audit --check` median of 3, reading every file once).
fn audit_on(o: &Opts, n: usize) -> (Duration, Duration) {
    let (_d, root) = common::trail_fixture(&o.dir, n);
    let read_all = (0..2)
        .map(|_| {
            let s = Instant::now();
            let mut bytes = 0;
            for f in common::walk(&root) {
                bytes += fs::read(f).map(|b| b.len()).unwrap_or(0);
            }
            assert!(bytes > 0);
            s.elapsed()
        })
        .min()
        .unwrap();
    let probe = Command::new(common::bin("swarm"))
        .args(["audit", "--check"])
        .arg(&root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&probe.stdout);
    eprintln!(
        "  audit --check on {n}: {}",
        text.lines()
            .filter(|l| l.starts_with("CHECK") || l.starts_with("VIOLATION"))
            .take(3)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let mut v = Vec::new();
    for _ in 0..3 {
        let s = Instant::now();
        let out = Command::new(common::bin("swarm"))
            .args(["audit", "--check"])
            .arg(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(
            out.code(),
            Some(0),
            "swarm audit --check finds the fixture clean"
        );
        v.push(s.elapsed());
    }
    (median(v), read_all)
}

fn audit(o: &Opts) {
    let small_n = (o.trail / 5).max(1);
    let (small, small_floor) = audit_on(o, small_n);
    let (big, big_floor) = audit_on(o, o.trail);
    println!(
        "### `swarm audit --check` on {small_n} and {} messages (median of 3)\n",
        o.trail
    );
    println!("| messages | audit --check ms | read every file ms | ratio to reading | growth vs {small_n} (data grew {:.0}×) |", o.trail as f64 / small_n as f64);
    println!("|---|---|---|---|---|");
    println!(
        "| {small_n} | {:.0} | {:.0} | {:.2} | 1.00 |",
        ms(small),
        ms(small_floor),
        ms(small) / ms(small_floor)
    );
    println!(
        "| {} | {:.0} | {:.0} | {:.2} | {:.2} |",
        o.trail,
        ms(big),
        ms(big_floor),
        ms(big) / ms(big_floor),
        ms(big) / ms(small)
    );
    println!();
}

fn main() {
    let mut o = opts();
    // bare_loop leaves its files to the end of the run (common::row_dir).
    let run = common::run_dir(&o.dir);
    o.dir = run.path().to_path_buf();
    println!(
        "Scaling benchmark, one run on {} ({} cores).\n",
        o.dir.display(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    let on = |s: &str| !o.skip.iter().any(|x| x == s);
    if on("drain") {
        drain(&o);
    }
    if on("roles") {
        roles(&o);
    }
    if on("burst") {
        burst(&o);
    }
    if on("accept") {
        accept(&o);
    }
    if on("audit") {
        audit(&o);
    }
}
