//! Delivery benchmark (issue 3): side by side in one run, on the same disk.
//!
//!   cargo bench --bench delivery -- [--messages N] [--latency-messages M] [--dir D]
//!
//! Reports, for fsync on and off:
//! - the physical limit: a bare write + fsync + rename + fsync(dir) loop;
//! - throughput of the library delivery pass for N messages to 1 and to 4
//!   recipients, as messages/s and as time per durable step (one step = one
//!   published copy or the move of the original to sent/), with the ratio to
//!   the bare loop;
//! - created → enqueued latency (p50/p99) through a real `handoffd` process
//!   while a sender publishes messages one by one.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use swarm_handoff::daemon::deliver::Deliverer;
use swarm_handoff::daemon::journal::Journal;
use swarm_handoff::daemon::wake::Waker;
use swarm_handoff::fsx;
use swarm_handoff::protocol::clock;
use swarm_handoff::protocol::config::Config;
use swarm_handoff::protocol::header::{Header, Message};
use swarm_handoff::protocol::layout::{Project, Worktree};
use swarm_handoff::protocol::roles::Roles;

struct Opts {
    messages: usize,
    latency_messages: usize,
    dir: PathBuf,
}

fn opts() -> Opts {
    let f = common::flags();
    Opts {
        messages: common::flag(&f, "messages", 10_000),
        latency_messages: common::flag(&f, "latency-messages", 1_000),
        dir: common::flag(&f, "dir", std::env::temp_dir()),
    }
}

/// A project with `sender` and `recipients` roles, each in its own worktree.
fn project(base: &Path, recipients: usize, fsync: bool) -> (tempfile::TempDir, Project, Roles) {
    let d = tempfile::tempdir_in(base).unwrap();
    let root = d.path().canonicalize().unwrap();
    let mut tsv = format!(
        "sender\tmaster\t{}\ts\tSender\tscript\ttask\n",
        root.display()
    );
    for r in 0..recipients {
        let wt = root.join(format!("wt{r}"));
        fs::create_dir_all(&wt).unwrap();
        tsv.push_str(&format!(
            "r{r}\tr{r}\t{}\ts\tR\tscript\ttask\n",
            wt.display()
        ));
    }
    common::project_files(&root, &tsv, fsync);
    let roles = Roles::load(&root.join(".swarmforge/roles.tsv")).unwrap();
    let wt = Worktree::new(&root);
    fsx::ensure_dirs(&wt.all_dirs()).unwrap();
    (d, Project::new(root), roles)
}

/// Publishes one outbox message the way `swarm-handoff` does.
fn publish(wt: &Worktree, seq: usize, to: &str) {
    common::publish_note(wt, "sender", seq, to);
}

/// Library delivery of a backlog of `n` messages; returns time per message.
fn throughput(base: &Path, n: usize, recipients: usize, fsync: bool) -> Duration {
    let (_d, project, roles) = project(base, recipients, fsync);
    let wt = Worktree::new(&project.root);
    fsx::set_fsync(false);
    let to = common::recipients_list(recipients);
    for i in 0..n {
        publish(&wt, i + 1, &to);
    }
    fsx::set_fsync(fsync);
    let config = Config::load(&project.config_file()).unwrap();
    let journal = Journal::new(&project);
    let waker = Waker::new(project.clone(), journal.clone());
    let mut d = Deliverer::new(project.clone(), roles, config, journal, waker);
    let t = Instant::now();
    let r = d.pass();
    let el = t.elapsed();
    assert_eq!(r.delivered, n, "every message delivered");
    el / n as u32
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// created → enqueued through a real daemon, messages sent one at a time.
fn latency(base: &Path, n: usize, recipients: usize, fsync: bool) -> (f64, f64) {
    let (_d, project, _roles) = project(base, recipients, fsync);
    let wt = Worktree::new(&project.root);
    let mut child = Command::new(common::bin("handoffd"))
        .arg(&project.root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let log = project.log_file();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("started")
    {
        assert!(Instant::now() < deadline, "daemon started");
        std::thread::sleep(Duration::from_millis(5));
    }
    fsx::set_fsync(fsync);
    let to = common::recipients_list(recipients);
    let first_inbox = Worktree::new(project.root.join("wt0")).inbox_new();
    let sent = wt.sent();
    for i in 0..n {
        publish(&wt, i + 1, &to);
        // One message in flight at a time (its original reached sent/):
        // latency, not queueing behind the previous message.
        let want = i + 1;
        let deadline = Instant::now() + Duration::from_secs(10);
        while fs::read_dir(&sent).map(|r| r.count()).unwrap_or(0) < want {
            assert!(Instant::now() < deadline, "message {want} delivered");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    let mut ms: Vec<f64> = fs::read_dir(&first_inbox)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let m = Message::parse_bytes(&fs::read(e.path()).ok()?).ok()?;
            let c = clock::parse(m.get(Header::CreatedAt)?)?;
            let q = clock::parse(m.get(Header::EnqueuedAt)?)?;
            Some((q - c).num_microseconds()? as f64 / 1000.0)
        })
        .collect();
    ms.sort_by(|a, b| a.total_cmp(b));
    (percentile(&ms, 0.5), percentile(&ms, 0.99))
}

fn main() {
    let mut o = opts();
    // bare_loop leaves its files to the end of the run (common::row_dir).
    let run = common::run_dir(&o.dir);
    o.dir = run.path().to_path_buf();
    if std::env::args().any(|a| a == "--bench") && std::env::args().count() <= 2 {
        // `cargo bench` passes --bench; the defaults apply.
    }
    println!(
        "delivery benchmark: {} messages per throughput run, {} for latency, dir {}",
        o.messages,
        o.latency_messages,
        o.dir.display()
    );
    println!();
    println!("| fsync | recipients | bare loop µs/step | ours µs/msg | msgs/s | ours µs/durable step | ratio to bare | latency p50 ms | latency p99 ms |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for fsync in [true, false] {
        let bare = common::bare_loop(&o.dir, o.messages.min(5_000), fsync, 400);
        for recipients in [1usize, 4] {
            let per_msg = throughput(&o.dir, o.messages, recipients, fsync);
            // Durable steps per message: one publish per recipient + the move to sent/.
            let steps = recipients as u32 + 1;
            let per_step = per_msg / steps;
            let (p50, p99) = latency(&o.dir, o.latency_messages, recipients, fsync);
            println!(
                "| {} | {recipients} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {p50:.2} | {p99:.2} |",
                if fsync { "on" } else { "off" },
                common::us(bare),
                common::us(per_msg),
                1e6 / common::us(per_msg),
                common::us(per_step),
                common::us(per_step) / common::us(bare),
            );
        }
    }
}
