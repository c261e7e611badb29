//! Deep queues at any call spacing, and the re-wake sweep (docs/benchmarks.md,
//! "Deep queues at any call spacing"), each as a ratio against its small
//! baseline measured side by side in the same run, every figure a median.
//!
//!   cargo bench --bench deep -- [--waiting 100000] [--small 20] [--calls 5]
//!       [--sweep-small 100] [--window 20] [--history 25000] [--sends 15]
//!       [--idle-small 100] [--idle-window 60]
//!       [--dir D] [--skip spacing,restart,resumed,sweep,reply,idle]
//!
//! `SWARM_BENCH_BIN` = a folder holding other builds of `handoffd`,
//! `ready-next` and `done-current` (a "before" build) runs the same
//! measurements with those.
//!
//! - spacing: one agent step, `done-current` (complete and take the
//!   next; the first item taken by `ready-next`), with W items waiting and with `--small` waiting, the
//!   two projects' steps alternating, for calls 1 s apart and for calls
//!   35 s and 120 s apart, simulated: the daemon's index age is shortened
//!   (`HANDOFFD_ORDER_RELIST`, 1 s and 0.25 s) and calls come 1.2 s and
//!   1 s apart, i.e. past 1.2 and 4 index ages, as 35 s and 120 s are past
//!   the default 30 s; 120 s also as index age 1 s, calls 4 s apart.
//! - restart: the same step right after a restart: the daemon stopped,
//!   started, and the step taken as soon as it logged `started`.
//! - resumed: `ready-next` with an item already in process and one answer
//!   for it waiting (placed 1 s before the call, as any writer would), W
//!   waiting against `--small` waiting, with the daemon, alternating; and
//!   the same call on the W project with no daemon, which reads every
//!   waiting file looking for answers, as every such call did before the
//!   daemon's answers index (issue 29).
//! - sweep: `handoffd`'s CPU (its main thread, where the re-wake sweep runs,
//!   and the whole process) over a window with `daemon.sweep: 100ms`, a
//!   waking role with W and with `--sweep-small` items waiting (none old
//!   enough to re-wake: the sweep still finds the oldest every round).
//! - reply: `swarm-handoff` of a reply naming the oldest of H completed
//!   items (in batch folders of 100) against a plain send from the same
//!   worktree, alternating, median of `--sends` each. The fixture's id
//!   index is written with the library's own `ids::record`, as
//!   `done-current` writes it.
//! - idle: `handoffd`'s memory (VmRSS) and CPU over `--idle-window` seconds
//!   with nothing happening, W waiting against `--idle-small` waiting, the
//!   two daemons running side by side through the same window, each first
//!   settled (its index listed and every head read: the `answers` question
//!   says no item may be an answer) and its CPU still for 2 s.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{median, ms};

use swarm_handoff::agent::queue::ids;
use swarm_handoff::protocol::layout::{Project, Worktree};

struct Opts {
    history: usize,
    sends: usize,
    waiting: usize,
    small: usize,
    calls: usize,
    sweep_small: usize,
    window: f64,
    idle_small: usize,
    idle_window: f64,
    dir: PathBuf,
    skip: Vec<String>,
}

fn opts() -> Opts {
    let f = common::flags();
    Opts {
        history: common::flag(&f, "history", 25_000),
        sends: common::flag(&f, "sends", 15),
        waiting: common::flag(&f, "waiting", 100_000),
        small: common::flag(&f, "small", 20),
        calls: common::flag(&f, "calls", 5),
        sweep_small: common::flag(&f, "sweep-small", 100),
        window: common::flag(&f, "window", 20.0),
        idle_small: common::flag(&f, "idle-small", 100),
        idle_window: common::flag(&f, "idle-window", 60.0),
        dir: common::flag(&f, "dir", std::env::temp_dir()),
        skip: common::skip(&f),
    }
}

fn bin(name: &str) -> PathBuf {
    match std::env::var_os("SWARM_BENCH_BIN").filter(|d| !d.is_empty()) {
        Some(dir) => Path::new(&dir).join(name),
        None => common::bin(name),
    }
}

/// A project whose role `r0` (in `<root>/wt0`) has `n` items waiting.
fn project(base: &Path, n: usize) -> (tempfile::TempDir, Project, PathBuf) {
    let d = tempfile::tempdir_in(base).unwrap();
    let root = d.path().canonicalize().unwrap();
    let rcv = root.join("wt0");
    common::role_worktree(&root, &root);
    common::role_worktree(&root, &rcv);
    let tsv = format!(
        "s0\ts0\t{}\ts\tS\tscript\ttask\nr0\tr0\t{}\ts\tR\tscript\ttask\n",
        root.display(),
        rcv.display()
    );
    common::project_files(&root, &tsv, true);
    let new = Worktree::new(&rcv).inbox_new();
    for i in 0..n {
        let (name, text) = common::copy_text("s0", "20260615T140531Z", i + 1);
        fs::write(new.join(name), text).unwrap();
    }
    (d, Project::new(root), rcv)
}

/// A `handoffd` started with `env` and stopped on drop; started means it
/// logged one more `started` line than before.
struct Daemon(Child);

impl Daemon {
    fn start(p: &Project, env: &[(&str, &str)]) -> Daemon {
        let started = || {
            fs::read_to_string(p.log_file())
                .unwrap_or_default()
                .matches(" started")
                .count()
        };
        let before = started();
        let child = Command::new(bin("handoffd"))
            .arg(&p.root)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while started() == before {
            assert!(Instant::now() < deadline, "handoffd did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        Daemon(child)
    }

    /// (main thread, whole process) CPU so far.
    fn cpu(&self) -> (Duration, Duration) {
        let pid = self.0.id();
        let read = |path: String| -> Duration {
            let s = fs::read_to_string(path).unwrap_or_default();
            // Fields after the `(comm)`: utime and stime are the 12th and 13th.
            let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
            let f: Vec<u64> = rest
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|x| x.parse().ok())
                .collect();
            Duration::from_millis(f.iter().sum::<u64>() * 10)
        };
        (
            read(format!("/proc/{pid}/task/{pid}/stat")),
            read(format!("/proc/{pid}/stat")),
        )
    }
}

impl Daemon {
    /// `field` of /proc/<pid>/status in KiB.
    fn status_kib(&self, field: &str) -> u64 {
        fs::read_to_string(format!("/proc/{}/status", self.0.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    /// Waits until the daemon is idle: `new_dir`'s index (when it keeps
    /// one) has read every head, and its CPU did not move for 2 s (or 30 s
    /// have passed).
    fn settle(&self, p: &Project, new_dir: &Path) {
        use swarm_handoff::protocol::order::{self, Ask};
        let deadline = Instant::now() + Duration::from_secs(600);
        let dir = new_dir.canonicalize().unwrap();
        let q = order::question(Ask::Answers, &dir).unwrap();
        // A folder too small to be indexed is not asked about (asking
        // would index it); an `ok` with items left means head reads run.
        let deep = fs::metadata(&dir).unwrap().len() >= order::DEEP_DIR_BYTES;
        while deep && heads_left(p, &q) {
            assert!(Instant::now() < deadline, "handoffd did not read its heads");
            std::thread::sleep(Duration::from_millis(200));
        }
        // A daemon that is never still for 2 s is measured anyway, 30 s on.
        let still = Instant::now() + Duration::from_secs(30);
        while Instant::now() < still {
            let (_, a) = self.cpu();
            std::thread::sleep(Duration::from_secs(2));
            if self.cpu().1 == a {
                break;
            }
        }
    }
}

/// Whether the daemon's `answers` question `q` says heads are left to read.
fn heads_left(p: &Project, q: &str) -> bool {
    use std::io::{Read, Write};
    std::os::unix::net::UnixStream::connect(p.order_socket())
        .ok()
        .and_then(|mut s| {
            s.write_all(q.as_bytes()).ok()?;
            let mut a = String::new();
            s.read_to_string(&mut a).ok()?;
            swarm_handoff::protocol::order::parse_answer(&a)
        })
        .is_some_and(|a| a.items > 0)
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

/// Places an answer in `rcv`'s `new/` as any writer would (temp file +
/// rename), named to come after every item waiting.
fn place_answer(rcv: &Path, seq: usize) {
    let (name, text) = common::copy_text("s0", "20260615T140532Z", seq);
    let text = text.replace("type: note\n", "type: answer\n");
    let new = Worktree::new(rcv).inbox_new();
    let tmp = new.parent().unwrap().join(format!(".answer-{seq}.tmp"));
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, new.join(name)).unwrap();
}

fn resumed(o: &Opts) {
    let (_ds, small, small_rcv) = project(&o.dir, o.small);
    let (_db, big, big_rcv) = project(&o.dir, o.waiting);
    println!(
        "### `ready-next` resuming an item in process, one answer waiting: {} vs {} waiting (median of {}, calls 1 s apart)\n",
        o.waiting, o.small, o.calls
    );
    println!(
        "| {} waiting ms | {} waiting ms | ratio | {} waiting, no daemon (every file read) ms | ratio to it |",
        o.small, o.waiting, o.waiting
    );
    println!("|---|---|---|---|---|");
    let (mut s, mut b, mut none) = (Vec::new(), Vec::new(), Vec::new());
    {
        let _a = Daemon::start(&small, &[]);
        let _b = Daemon::start(&big, &[]);
        run("ready-next", &small_rcv);
        run("ready-next", &big_rcv);
        for i in 0..o.calls {
            place_answer(&small_rcv, i + 1);
            place_answer(&big_rcv, i + 1);
            std::thread::sleep(Duration::from_secs(1));
            s.push(run("ready-next", &small_rcv));
            b.push(run("ready-next", &big_rcv));
        }
    }
    for i in 0..o.calls {
        place_answer(&big_rcv, o.calls + i + 1);
        none.push(run("ready-next", &big_rcv));
    }
    let (s, b, none) = (median(s), median(b), median(none));
    println!(
        "| {:.2} | {:.2} | {:.2} | {:.2} | {:.3} |",
        ms(s),
        ms(b),
        ms(b) / ms(s),
        ms(none),
        ms(b) / ms(none)
    );
    println!();
}

fn run(prog: &str, rcv: &Path) -> Duration {
    let t = Instant::now();
    let out = Command::new(bin(prog))
        .current_dir(rcv)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SWARMFORGE_ROLE", "r0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let took = t.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("TASK: "),
        "{prog}: {text}"
    );
    took
}

/// One agent step: `done-current` (completes the item in process, takes
/// the next). (`ready-next` with an item already in process is measured
/// apart: [`resumed`].)
fn step(rcv: &Path) -> Duration {
    run("done-current", rcv)
}

fn spacing(o: &Opts) {
    let (_ds, small, small_rcv) = project(&o.dir, o.small + 4 * o.calls + 8);
    let (_db, big, big_rcv) = project(&o.dir, o.waiting);
    println!(
        "### One agent step (`done-current`: complete + take the next), {} waiting vs {} waiting (median of {})\n",
        o.waiting, o.small, o.calls
    );
    println!(
        "| calls | simulated by | {} waiting ms | {} waiting ms | ratio |",
        o.small, o.waiting
    );
    println!("|---|---|---|---|---|");
    // 120 s is simulated twice: past 4 index ages of 0.25 s (a listing of
    // W items outlasts that age, so one runs at every call: harsher than
    // real spacing, where the lister idles 29 s of 30) and of 1 s.
    let settings: [(&str, &str, f64, &str); 4] = [
        ("1 s apart", "30", 1.0, "the default index age (30 s)"),
        ("35 s apart", "1", 1.2, "index age 1 s, calls 1.2 s apart"),
        (
            "120 s apart",
            "0.25",
            1.0,
            "index age 0.25 s, calls 1 s apart",
        ),
        ("120 s apart", "1", 4.0, "index age 1 s, calls 4 s apart"),
    ];
    for (label, relist, gap, how) in settings {
        let env = [("HANDOFFD_ORDER_RELIST", relist)];
        let _a = Daemon::start(&small, &env);
        let _b = Daemon::start(&big, &env);
        // Each project's first call takes an item into process.
        run("ready-next", &small_rcv);
        run("ready-next", &big_rcv);
        let (mut s, mut b) = (Vec::new(), Vec::new());
        for _ in 0..o.calls {
            std::thread::sleep(Duration::from_secs_f64(gap));
            s.push(step(&small_rcv));
            b.push(step(&big_rcv));
        }
        let (s, b) = (median(s), median(b));
        println!(
            "| {label} | {how} | {:.2} | {:.2} | {:.2} |",
            ms(s),
            ms(b),
            ms(b) / ms(s)
        );
    }
    println!();
}

/// The same step as soon as a restarted daemon logs `started`: its
/// start-up work (the deep folder's first listing, the head reads, the
/// search index's first refresh) competes with the call.
fn restart(o: &Opts) {
    let (_ds, small, small_rcv) = project(&o.dir, o.small + 4 * o.calls + 8);
    let (_db, big, big_rcv) = project(&o.dir, o.waiting);
    println!(
        "### One agent step right after a daemon restart, {} waiting vs {} waiting (median of {})\n",
        o.waiting, o.small, o.calls
    );
    println!(
        "| calls | simulated by | {} waiting ms | {} waiting ms | ratio |",
        o.small, o.waiting
    );
    println!("|---|---|---|---|---|");
    {
        let _a = Daemon::start(&small, &[]);
        let _b = Daemon::start(&big, &[]);
        run("ready-next", &small_rcv);
        run("ready-next", &big_rcv);
    }
    let (mut s, mut b) = (Vec::new(), Vec::new());
    for _ in 0..o.calls {
        {
            let _a = Daemon::start(&small, &[]);
            s.push(step(&small_rcv));
        }
        let _b = Daemon::start(&big, &[]);
        b.push(step(&big_rcv));
    }
    let (s, b) = (median(s), median(b));
    println!(
        "| right after a daemon restart | the step as soon as `started` is logged | {:.2} | {:.2} | {:.2} |",
        ms(s),
        ms(b),
        ms(b) / ms(s)
    );
    println!();
}

fn sweep(o: &Opts) {
    // A role that wakes (by a command), none of whose items is old enough
    // to be woken again: every round finds the oldest and stops there.
    let config = "daemon:\n  fsync: true\n  sweep: 100ms\n  ack_within: 24h\n\
                  wake:\n  method: command\n  command: \"true\"\n";
    let window = Duration::from_secs_f64(o.window);
    println!(
        "### The re-wake sweep: handoffd CPU over {:.0} s, `daemon.sweep: 100ms`, {} vs {} waiting\n",
        o.window, o.waiting, o.sweep_small
    );
    println!("| waiting | main thread (the sweep) ms | whole daemon ms | ratio (whole) | ratio (main thread) |");
    println!("|---|---|---|---|---|");
    let mut rows = Vec::new();
    for n in [o.sweep_small, o.waiting] {
        let (_d, p, _rcv) = project(&o.dir, n);
        fs::write(p.root.join("swarm.yaml"), config).unwrap();
        let d = Daemon::start(&p, &[]);
        let (m0, w0) = d.cpu();
        std::thread::sleep(window);
        let (m1, w1) = d.cpu();
        rows.push((n, m1 - m0, w1 - w0));
    }
    let (_, m, w) = rows[0];
    for (n, mn, wn) in &rows {
        println!(
            "| {n} | {:.0} | {:.0} | {:.2} | {:.2} |",
            ms(*mn),
            ms(*wn),
            ms(*wn) / ms(w).max(10.0),
            ms(*mn) / ms(m).max(10.0)
        );
    }
    println!();
}

/// Memory and idle CPU flat in the backlog (issue 47): both daemons run
/// through the same window, so the machine's load falls on both.
fn idle(o: &Opts) {
    let (_ds, small, small_rcv) = project(&o.dir, o.idle_small);
    let (_db, big, big_rcv) = project(&o.dir, o.waiting);
    let a = Daemon::start(&small, &[]);
    let b = Daemon::start(&big, &[]);
    a.settle(&small, &Worktree::new(&small_rcv).inbox_new());
    b.settle(&big, &Worktree::new(&big_rcv).inbox_new());
    let rss = |d: &Daemon| d.status_kib("VmRSS") as f64 / 1024.0;
    let (rss_a0, rss_b0) = (rss(&a), rss(&b));
    let (_, ca) = a.cpu();
    let (_, cb) = b.cpu();
    std::thread::sleep(Duration::from_secs_f64(o.idle_window));
    let (_, ca1) = a.cpu();
    let (_, cb1) = b.cpu();
    let (rss_a1, rss_b1) = (rss(&a), rss(&b));
    let hwm = |d: &Daemon| d.status_kib("VmHWM") as f64 / 1024.0;
    println!(
        "### handoffd idle: {} vs {} waiting, settled, then {:.0} s with nothing happening\n",
        o.waiting, o.idle_small, o.idle_window
    );
    println!(
        "| measure | {} waiting | {} waiting | ratio |",
        o.idle_small, o.waiting
    );
    println!("|---|---|---|---|");
    println!(
        "| VmRSS MB at the window's start | {rss_a0:.1} | {rss_b0:.1} | {:.2} |",
        rss_b0 / rss_a0
    );
    println!(
        "| VmRSS MB at the window's end | {rss_a1:.1} | {rss_b1:.1} | {:.2} |",
        rss_b1 / rss_a1
    );
    println!(
        "| VmHWM MB (peak since start) | {:.1} | {:.1} | {:.2} |",
        hwm(&a),
        hwm(&b),
        hwm(&b) / hwm(&a)
    );
    // CPU time has a 10 ms resolution: a baseline under it counts as 10 ms.
    let (sa, sb) = (ms(ca1 - ca), ms(cb1 - cb));
    println!(
        "| CPU ms over the window | {sa:.0} | {sb:.0} | {:.2} |",
        sb / sa.max(10.0)
    );
    println!();
}

fn reply(o: &Opts) {
    let (_d, _p, rcv) = project(&o.dir, 0);
    let wt = Worktree::new(&rcv);
    let completed = wt.completed();
    let mut oldest = None;
    for b in 0..o.history.div_ceil(100) {
        let batch = format!("batch_20260615T140531Z_{b:06}");
        fs::create_dir_all(completed.join(&batch)).unwrap();
        for i in 0..100.min(o.history - b * 100) {
            let seq = b * 100 + i + 1;
            let (name, text) = common::copy_text("s0", "20260615T140531Z", seq);
            fs::write(completed.join(&batch).join(&name), text).unwrap();
            let id = format!("20260615T140531Z_{seq:06}_from_s0");
            ids::record(&wt, &id, &Path::new(&batch).join(&name));
            oldest.get_or_insert(id);
        }
    }
    let oldest = oldest.expect("some history");
    let send = |draft: &str| -> Duration {
        let path = rcv.join("draft.txt");
        fs::write(&path, draft).unwrap();
        let t = Instant::now();
        let out = Command::new(bin("swarm-handoff"))
            .arg("draft.txt")
            .current_dir(&rcv)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("SWARMFORGE_ROLE", "r0")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let took = t.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        took
    };
    let (mut plain, mut replies) = (Vec::new(), Vec::new());
    for i in 0..o.sends {
        plain.push(send(&format!(
            "type: note\nto: s0\npriority: 50\nmessage: plain {i}\n"
        )));
        replies.push(send(&format!(
            "type: note\nto: s0\npriority: 50\nmessage: reply {i}\nin_reply_to: {oldest}\n"
        )));
    }
    let (plain, replies) = (median(plain), median(replies));
    println!(
        "### A reply naming the oldest of {} completed items (batch folders of 100) vs a plain send (median of {})\n",
        o.history, o.sends
    );
    println!("| completed items | plain send ms | reply ms | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| {} | {:.2} | {:.2} | {:.2} |\n",
        o.history,
        ms(plain),
        ms(replies),
        ms(replies) / ms(plain)
    );
}

fn main() {
    let o = opts();
    println!(
        "Deep queues, one run on {} ({} cores){}.\n",
        o.dir.display(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        std::env::var("SWARM_BENCH_BIN")
            .ok()
            .filter(|b| !b.is_empty())
            .map(|b| format!(", binaries from {b}"))
            .unwrap_or_default()
    );
    let on = |s: &str| !o.skip.iter().any(|x| x == s);
    if on("spacing") {
        spacing(&o);
    }
    if on("restart") {
        restart(&o);
    }
    if on("resumed") {
        resumed(&o);
    }
    if on("sweep") {
        sweep(&o);
    }
    if on("reply") {
        reply(&o);
    }
    if on("idle") {
        idle(&o);
    }
}
