//! Soak (issue 8): S senders x R recipients x M messages per sender through
//! the real binaries, receivers draining concurrently, while `handoffd`'s
//! VmRSS is sampled from /proc. Afterwards: every message at its recipient
//! exactly once and completed, latency percentiles per tenth of the run, and
//! the memory curve. Exits 1 when anything was lost or duplicated, or when
//! the daemon's memory grew over the run.
//!
//!   scripts/soak.sh [messages-per-sender]        (wraps the line below)
//!   cargo bench --bench soak -- [--messages M] [--senders S] [--recipients R]
//!                               [--rate MSGS_PER_S_PER_SENDER] [--fsync on|off] [--dir D]
//!
//! Senders call `swarm-handoff` once per message (as agents do), each to the
//! next recipient in turn; half the recipients take tasks (`done-current` per
//! item), half take batches. `--rate` paces each sender (0: as fast as it
//! can, which measures saturation rather than latency under a steady load).

mod common;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use swarm_handoff::protocol::clock;
use swarm_handoff::protocol::header::{Header, Message};

struct Opts {
    messages: usize,
    senders: usize,
    recipients: usize,
    rate: f64,
    fsync: bool,
    dir: PathBuf,
}

fn opts() -> Opts {
    let mut o = Opts {
        messages: 10_000,
        senders: 8,
        recipients: 4,
        rate: 0.0,
        fsync: true,
        dir: std::env::temp_dir(),
    };
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--messages" => o.messages = v.parse().expect("--messages M"),
            "--senders" => o.senders = v.parse().expect("--senders S"),
            "--recipients" => o.recipients = v.parse().expect("--recipients R"),
            "--rate" => o.rate = v.parse().expect("--rate N"),
            "--fsync" => o.fsync = v == "on",
            "--dir" => o.dir = PathBuf::from(v),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    o
}

fn cli(program: &str, cwd: &Path, role: &str) -> Command {
    let mut c = Command::new(common::bin(program));
    c.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SWARMFORGE_ROLE", role)
        .stdin(Stdio::null());
    c
}

/// `handoffd`, killed on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn handoffs(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            handoffs(&p, out);
        } else if p.extension().is_some_and(|x| x == "handoff") {
            out.push(p);
        }
    }
}

fn count_handoffs(dir: &Path) -> usize {
    let mut v = Vec::new();
    handoffs(dir, &mut v);
    v.len()
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let o = opts();
    let d = tempfile::tempdir_in(&o.dir).unwrap();
    let root = d.path().canonicalize().unwrap();
    let senders: Vec<String> = (0..o.senders).map(|i| format!("s{i}")).collect();
    let recipients: Vec<String> = (0..o.recipients).map(|i| format!("r{i}")).collect();
    let mut tsv = String::new();
    for (i, r) in senders.iter().chain(recipients.iter()).enumerate() {
        let wt = root.join(r);
        common::role_worktree(&root, &wt);
        let mode = if r.starts_with('r') && i % 2 == 1 {
            "batch"
        } else {
            "task"
        };
        tsv.push_str(&format!(
            "{r}\t{r}\t{}\ts\tX\tscript\t{mode}\n",
            wt.display()
        ));
    }
    common::project_files(&root, &tsv, o.fsync);
    let total = o.messages * o.senders;
    println!(
        "soak: {} senders x {} recipients, {} messages per sender ({total} in all), rate {}, fsync {}, in {}",
        o.senders,
        o.recipients,
        o.messages,
        if o.rate > 0.0 {
            format!("{}/s per sender", o.rate)
        } else {
            "unpaced".into()
        },
        if o.fsync { "on" } else { "off" },
        root.display()
    );

    let log = root.join(".swarmforge/daemon/handoffd.log");
    let mut cmd = Command::new(common::bin("handoffd"));
    // SAFETY: prctl(2) only sets a flag of the child; no allocation.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            // The daemon dies with this process, even when it is killed.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = cmd
        .arg(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();
    let daemon = Daemon(child);
    let end = Instant::now() + Duration::from_secs(10);
    while !fs::read_to_string(&log)
        .unwrap_or_default()
        .contains(" started")
    {
        assert!(Instant::now() < end, "handoffd did not start");
        std::thread::sleep(Duration::from_millis(5));
    }

    let start = Instant::now();
    let done_sending = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let samples: Arc<Mutex<Vec<(f64, u64, usize)>>> = Arc::default();

    let sampler = {
        let (stop, samples, sent) = (stop.clone(), samples.clone(), sent.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(kib) = rss_kib(pid) {
                    samples.lock().unwrap().push((
                        start.elapsed().as_secs_f64(),
                        kib,
                        sent.load(Ordering::Relaxed),
                    ));
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };

    let mut sender_threads = Vec::new();
    for (k, s) in senders.iter().enumerate() {
        let (s, wt, recipients, sent) = (s.clone(), root.join(s), recipients.clone(), sent.clone());
        let (m, rate) = (o.messages, o.rate);
        sender_threads.push(std::thread::spawn(move || {
            let draft = wt.join("draft.txt");
            let t0 = Instant::now();
            for i in 0..m {
                if rate > 0.0 {
                    let due = t0 + Duration::from_secs_f64(i as f64 / rate);
                    if let Some(w) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(w);
                    }
                }
                let to = &recipients[(i + k) % recipients.len()];
                fs::write(
                    &draft,
                    format!("type: note\nto: {to}\npriority: 50\nmessage: soak {s} {i}\n"),
                )
                .unwrap();
                let out = cli("swarm-handoff", &wt, &s)
                    .arg("draft.txt")
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "swarm-handoff failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    let calls = Arc::new(AtomicUsize::new(0));
    let mut receiver_threads = Vec::new();
    for r in &recipients {
        let (r, wt, done_sending, calls) =
            (r.clone(), root.join(r), done_sending.clone(), calls.clone());
        let outboxes: Vec<PathBuf> = senders
            .iter()
            .map(|s| root.join(s).join(".swarmforge/handoffs/outbox"))
            .collect();
        receiver_threads.push(std::thread::spawn(move || loop {
            let finished = done_sending.load(Ordering::Relaxed)
                && outboxes.iter().all(|o| count_handoffs(o) == 0);
            let mut out = cli("done-current", &wt, &r).output().unwrap();
            calls.fetch_add(1, Ordering::Relaxed);
            if String::from_utf8_lossy(&out.stderr).starts_with("NO_CURRENT") {
                // Nothing in process: accept the next item, if any.
                out = cli("ready-next", &wt, &r).output().unwrap();
                calls.fetch_add(1, Ordering::Relaxed);
            }
            let text = String::from_utf8_lossy(&out.stdout);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !err.contains("AMBIGUOUS") && !err.contains("MALFORMED"),
                "{r}: {err}"
            );
            if text.ends_with("NO_TASK\n") {
                if finished {
                    // Nothing in process and nothing waiting after the last
                    // delivery: this recipient is drained.
                    let new = wt.join(".swarmforge/handoffs/inbox/new");
                    if count_handoffs(&new) == 0 {
                        break;
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
    }

    for t in sender_threads {
        t.join().unwrap();
    }
    let sending = start.elapsed();
    done_sending.store(true, Ordering::Relaxed);
    for t in receiver_threads {
        t.join().unwrap();
    }
    let drained = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let final_rss = rss_kib(pid).unwrap_or(0);
    drop(daemon);

    // ------------------------------------------------------------ checks
    let mut lost = 0usize;
    let mut dup = 0usize;
    let mut held: HashMap<String, Vec<PathBuf>> = HashMap::new();
    for r in &recipients {
        let mut v = Vec::new();
        handoffs(&root.join(r).join(".swarmforge/handoffs/inbox"), &mut v);
        for p in v {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            held.entry(format!("{r}/{name}")).or_default().push(p);
        }
    }
    let mut originals = 0;
    let mut failed = 0;
    let mut waiting = 0;
    for s in &senders {
        let h = root.join(s).join(".swarmforge/handoffs");
        failed += count_handoffs(&h.join("failed"));
        waiting += count_handoffs(&h.join("outbox"));
        let mut v = Vec::new();
        handoffs(&h.join("sent"), &mut v);
        for p in v {
            originals += 1;
            let m = Message::parse_bytes(&fs::read(&p).unwrap()).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            for r in m.get(Header::To).unwrap().split(',') {
                match held.get(&format!("{r}/{name}")).map(Vec::len) {
                    None | Some(0) => lost += 1,
                    Some(1) => {}
                    Some(_) => dup += 1,
                }
            }
        }
    }
    // Latencies from the completed copies, in order of creation.
    let mut rows: Vec<(f64, f64, f64, f64)> = Vec::new();
    let mut not_completed = 0;
    for paths in held.values() {
        let m = Message::parse_bytes(&fs::read(&paths[0]).unwrap()).unwrap();
        let t = |h: Header| m.get(h).and_then(clock::parse);
        let (Some(c), Some(q), Some(dq), Some(done)) = (
            t(Header::CreatedAt),
            t(Header::EnqueuedAt),
            t(Header::DequeuedAt),
            t(Header::CompletedAt),
        ) else {
            not_completed += 1;
            continue;
        };
        let ms = |a: clock::Instant, b: clock::Instant| {
            (b - a).num_microseconds().unwrap_or(0) as f64 / 1000.0
        };
        rows.push((
            c.timestamp_micros() as f64,
            ms(c, q),
            ms(q, dq),
            ms(dq, done),
        ));
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));

    println!();
    println!(
        "sent {total} in {:.1} s ({:.0} msgs/s), drained in {:.1} s ({:.0} msgs/s end to end); {} receiver calls",
        sending.as_secs_f64(),
        total as f64 / sending.as_secs_f64(),
        drained.as_secs_f64(),
        total as f64 / drained.as_secs_f64(),
        calls.load(Ordering::Relaxed)
    );
    println!(
        "originals in sent/ {originals}, failed {failed}, still in outboxes {waiting}; copies lost {lost}, duplicated {dup}, not completed {not_completed}"
    );

    let series = |f: fn(&(f64, f64, f64, f64)) -> f64, rows: &[(f64, f64, f64, f64)]| {
        let mut v: Vec<f64> = rows.iter().map(f).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v
    };
    println!();
    println!("| tenth of the run (by created_at) | created → enqueued p50 ms | p99 ms | max ms | enqueued → dequeued p50 ms | p99 ms |");
    println!("|---|---|---|---|---|---|");
    let tenth = rows.len().div_ceil(10).max(1);
    let mut p99s = Vec::new();
    for (i, chunk) in rows.chunks(tenth).enumerate() {
        let a = series(|r| r.1, chunk);
        let b = series(|r| r.2, chunk);
        p99s.push(pct(&a, 0.99));
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} |",
            i + 1,
            pct(&a, 0.5),
            pct(&a, 0.99),
            pct(&a, 1.0),
            pct(&b, 0.5),
            pct(&b, 0.99)
        );
    }
    let all = series(|r| r.1, &rows);
    println!(
        "| all | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} |",
        pct(&all, 0.5),
        pct(&all, 0.99),
        pct(&all, 1.0),
        pct(&series(|r| r.2, &rows), 0.5),
        pct(&series(|r| r.2, &rows), 0.99)
    );

    let samples = samples.lock().unwrap().clone();
    println!();
    println!(
        "handoffd VmRSS (KiB), sampled every 250 ms ({} samples):",
        samples.len()
    );
    println!("| time s | messages sent | VmRSS KiB |");
    println!("|---|---|---|");
    let step = (samples.len() / 10).max(1);
    for s in samples.iter().step_by(step) {
        println!("| {:.1} | {} | {} |", s.0, s.2, s.1);
    }
    println!("| end | {total} | {final_rss} |");
    let half = samples.len() / 2;
    let max_first = samples[..half.max(1)]
        .iter()
        .map(|s| s.1)
        .max()
        .unwrap_or(0);
    let max_second = samples[half..].iter().map(|s| s.1).max().unwrap_or(0);
    let min = samples.iter().map(|s| s.1).min().unwrap_or(0);
    println!(
        "VmRSS min {min} KiB, max in the first half {max_first} KiB, max in the second half {max_second} KiB"
    );
    // Flat: the second half never exceeds the first half's peak by more than
    // 25 % + 2 MiB (allocator noise), i.e. no growth with messages handled.
    let grew = max_second > max_first + max_first / 4 + 2048;
    let bad = lost + dup + failed + waiting + not_completed > 0 || originals != total || grew;
    println!(
        "{}",
        if bad {
            "SOAK FAILED"
        } else {
            "SOAK OK: nothing lost or duplicated, memory flat"
        }
    );
    if bad {
        // exit() skips destructors: remove the project first.
        drop(d);
        std::process::exit(1);
    }
}
