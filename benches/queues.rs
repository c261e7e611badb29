//! Our queue against other file queues (issue 8), side by side in one run on
//! one disk, reported as ratios (machines are shared; absolute times drift).
//!
//!   cargo bench --bench queues -- [--messages N] [--hops H] [--backlog B]
//!                                 [--trail T] [--dir D] [--skip backlog,trail]
//!                                 [--against BIN_DIR]
//!   (or scripts/bench-queues.sh, which checks the peers are installed)
//!
//! Peers: the physical limit (write + fsync + rename + fsync(dir), in
//! process), Maildir delivery through `safecat` (Debian package; fsyncs the
//! file, not the folder), python `dirq` QueueSimple (PyPI; no fsync at all),
//! driven by scripts/bench_dirq.py. Ours: one CLI call per step
//! (`swarm-handoff`, `handoffd`, `ready-next`, `done-current`) and the library
//! path (the same functions in process). Sections: enqueue, one full hop, a
//! 100 000-file backlog, and `swarm transcript` / `swarm audit` on a
//! 50 000-message project. With `--against BIN_DIR` (the `swarm-handoff`,
//! `handoffd`, `ready-next` and `done-current` of another build), only the
//! CLI hop runs, for both builds, interleaved in chunks so that the machine's
//! drift falls on both alike.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::Daemon;

use swarm_handoff::agent::queue::{Inbox, Ready};
use swarm_handoff::daemon::deliver::Deliverer;
use swarm_handoff::fsx;
use swarm_handoff::protocol::layout::{Project, Worktree};
use swarm_handoff::protocol::roles::ReceiveMode;

const BODY: usize = 400;

struct Opts {
    messages: usize,
    hops: usize,
    backlog: usize,
    trail: usize,
    dir: PathBuf,
    skip: Vec<String>,
    against: Option<PathBuf>,
}

fn opts() -> Opts {
    let mut o = Opts {
        messages: 2_000,
        hops: 300,
        backlog: 100_000,
        trail: 50_000,
        dir: std::env::temp_dir(),
        skip: Vec::new(),
        against: None,
    };
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--messages" => o.messages = v.parse().expect("--messages N"),
            "--hops" => o.hops = v.parse().expect("--hops H"),
            "--backlog" => o.backlog = v.parse().expect("--backlog B"),
            "--trail" => o.trail = v.parse().expect("--trail T"),
            "--dir" => o.dir = PathBuf::from(v),
            "--skip" => o.skip = v.split(',').map(str::to_string).collect(),
            "--against" => o.against = Some(PathBuf::from(v)),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    o
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn run_ok(c: &mut Command) -> String {
    let out = c.stdin(Stdio::null()).output().expect("runs");
    assert!(
        out.status.success(),
        "{c:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn secs_from(out: &str) -> Duration {
    Duration::from_secs_f64(out.trim().parse().expect("seconds"))
}

// ------------------------------------------------------------ the peers

/// write + fsync + rename + fsync(dir): the floor of a durable publish.
fn bare_enqueue(base: &Path, n: usize, sync: bool) -> Duration {
    common::bare_loop(base, n, sync, BODY)
}

/// One process start per message: what any one-CLI-call-per-step tool pays.
fn spawn_floor(n: usize) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        run_ok(&mut Command::new("/bin/true"));
    }
    t.elapsed() / n as u32
}

fn maildir(base: &Path) -> (tempfile::TempDir, PathBuf) {
    let d = common::row_dir(base);
    let md = d.path().join("Maildir");
    for s in ["tmp", "new", "cur"] {
        fs::create_dir_all(md.join(s)).unwrap();
    }
    (d, md)
}

fn safecat(md: &Path, body: &[u8]) -> String {
    let mut c = Command::new("safecat")
        .arg(md.join("tmp"))
        .arg(md.join("new"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("safecat");
    c.stdin.take().unwrap().write_all(body).unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "safecat failed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn safecat_enqueue(base: &Path, n: usize) -> Duration {
    let (_d, md) = maildir(base);
    let body = vec![b'x'; BODY];
    let t = Instant::now();
    for _ in 0..n {
        safecat(&md, &body);
    }
    t.elapsed() / n as u32
}

/// safecat into new/; the reader renames new → cur, reads, removes.
fn maildir_hop(base: &Path, n: usize) -> Duration {
    let (_d, md) = maildir(base);
    let body = vec![b'x'; BODY];
    let t = Instant::now();
    for _ in 0..n {
        let name = safecat(&md, &body);
        let cur = md.join("cur").join(format!("{name}:2,S"));
        fs::rename(md.join("new").join(&name), &cur).unwrap();
        assert_eq!(fs::read(&cur).unwrap().len(), BODY);
        fs::remove_file(&cur).unwrap();
    }
    t.elapsed() / n as u32
}

/// The floor of our hop's own contract: the same twelve fsyncs, renames and
/// file writes a hop makes (docs/protocol.md §8.1), in process with no logic,
/// plus three process starts (`/bin/true`). What is left above this row is
/// our code; what this row is above Maildir is the durability a hop promises.
fn contract_hop(base: &Path, n: usize) -> Duration {
    use std::os::unix::fs::OpenOptionsExt;
    let d = common::row_dir(base);
    let dirs = ["otmp", "outbox", "sent", "itmp", "new", "cur", "done"];
    for s in dirs {
        fs::create_dir(d.path().join(s)).unwrap();
    }
    let at = |s: &str| d.path().join(s);
    let sync_dir = |s: &str| fs::File::open(at(s)).unwrap().sync_all().unwrap();
    let body = vec![b'x'; BODY];
    // A new file, fsynced, renamed to `to` (no folder fsync).
    let publish = |tmp: &str, to: PathBuf| {
        let t = at(tmp).join("x.tmp");
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&t)
            .unwrap();
        f.write_all(&body).unwrap();
        f.sync_all().unwrap();
        fs::rename(&t, to).unwrap();
    };
    let t = Instant::now();
    for i in 0..n {
        let name = format!("{i}.handoff");
        for _ in 0..3 {
            run_ok(&mut Command::new("/bin/true"));
        }
        // send: the file, outbox/
        publish("otmp", at("outbox").join(&name));
        sync_dir("outbox");
        // deliver: the copy, new/; the original to sent/, sent/, outbox/
        publish("itmp", at("new").join(&name));
        sync_dir("new");
        fs::rename(at("outbox").join(&name), at("sent").join(&name)).unwrap();
        sync_dir("sent");
        sync_dir("outbox");
        // take: move, the stamp over it, in_process/, new/
        fs::rename(at("new").join(&name), at("cur").join(&name)).unwrap();
        publish("itmp", at("cur").join(&name));
        sync_dir("cur");
        sync_dir("new");
        // finish: the stamp over it, the move, completed/, in_process/
        publish("itmp", at("cur").join(&name));
        fs::rename(at("cur").join(&name), at("done").join(&name)).unwrap();
        sync_dir("done");
        sync_dir("cur");
    }
    t.elapsed() / n.max(1) as u32
}

fn dirq(args: &[&str]) -> Duration {
    secs_from(&run_ok(
        Command::new("python3")
            .arg(script("bench_dirq.py"))
            .args(args),
    ))
}

fn dirq_startup() -> Duration {
    let t = Instant::now();
    for _ in 0..5 {
        dirq(&["startup"]);
    }
    t.elapsed() / 5
}

// ------------------------------------------------------------------ ours

/// A project: `sender` in the root, `r0` in its own worktree.
struct Ours {
    _d: tempfile::TempDir,
    project: Project,
    rcv: PathBuf,
}

fn ours(base: &Path, fsync: bool, receive: &str) -> Ours {
    let d = common::row_dir(base);
    let root = d.path().canonicalize().unwrap();
    let rcv = root.join("wt0");
    common::role_worktree(&root, &rcv);
    let tsv = format!(
        "sender\tmaster\t{}\ts\tSender\tscript\ttask\nr0\tr0\t{}\ts\tR\tscript\t{receive}\n",
        root.display(),
        rcv.display()
    );
    common::project_files(&root, &tsv, fsync);
    for wt in [&root, &rcv] {
        fsx::ensure_dirs(&Worktree::new(wt).all_dirs()).unwrap();
    }
    Ours {
        _d: d,
        project: Project::new(root),
        rcv,
    }
}

fn draft_text(i: usize) -> String {
    // A 400-byte-ish payload would not fit the 80-character message; the
    // generated file is ~300 bytes, close to the peers' 400.
    format!(
        "type: note\nto: r0\npriority: 50\nmessage: benchmark message {i} {}\n",
        "x".repeat(40)
    )
}

/// `program` of this build, or of the build in `bins`.
fn cli(program: &str, cwd: &Path, role: &str, bins: Option<&Path>) -> Command {
    let path = bins.map_or_else(|| common::bin(program), |d| d.join(program));
    let mut c = Command::new(path);
    c.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SWARMFORGE_ROLE", role);
    c
}

fn cli_send(o: &Ours, i: usize, bins: Option<&Path>) -> PathBuf {
    let draft = o.project.root.join("draft.txt");
    fs::write(&draft, draft_text(i)).unwrap();
    let out = run_ok(cli("swarm-handoff", &o.project.root, "sender", bins).arg("draft.txt"));
    PathBuf::from(out.trim().strip_prefix("HANDOFF QUEUED: ").unwrap())
}

fn lib_send(o: &Ours, i: usize) -> PathBuf {
    let draft = o.project.root.join("draft.txt");
    fs::write(&draft, draft_text(i)).unwrap();
    let swarm_handoff::agent::send::Sent::Queued(q, _) =
        swarm_handoff::agent::send::queue("draft.txt", &o.project.root).expect("queued")
    else {
        panic!("held by the audit gate");
    };
    swarm_handoff::agent::send::discard_draft("draft.txt", &o.project.root, &q.worktree);
    q.path
}

fn ours_enqueue_cli(base: &Path, n: usize, fsync: bool) -> Duration {
    let o = ours(base, fsync, "task");
    let t = Instant::now();
    for i in 0..n {
        cli_send(&o, i, None);
    }
    t.elapsed() / n as u32
}

fn ours_enqueue_lib(base: &Path, n: usize, fsync: bool) -> Duration {
    let o = ours(base, fsync, "task");
    std::env::set_var("SWARMFORGE_ROLE", "sender");
    let t = Instant::now();
    for i in 0..n {
        lib_send(&o, i);
    }
    t.elapsed() / n as u32
}

fn wait_for(p: &Path) {
    let end = Instant::now() + Duration::from_secs(10);
    while !p.exists() {
        assert!(Instant::now() < end, "{} appeared", p.display());
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Where a CLI hop's time goes, per message: the `swarm-handoff` call, the
/// wait until the copy is in `inbox/new/` (the daemon's wake-up and pass),
/// `ready-next`, `done-current`.
struct HopSteps {
    total: Duration,
    steps: [Duration; 4],
}

/// swarm-handoff → handoffd → ready-next → done-current, one message in flight.
fn ours_hop_cli(base: &Path, n: usize, fsync: bool) -> HopSteps {
    let o = ours(base, fsync, "task");
    let _d = Daemon::start(&o.project);
    let (total, steps) = hops_cli(&o, 0..n, None);
    HopSteps {
        total: total / n as u32,
        steps: steps.map(|s| s / n as u32),
    }
}

/// Hops `range` of project `o` (its daemon running) with the CLI of this
/// build or of `bins`: the time in all, and per step.
fn hops_cli(
    o: &Ours,
    range: std::ops::Range<usize>,
    bins: Option<&Path>,
) -> (Duration, [Duration; 4]) {
    let new = Worktree::new(&o.rcv).inbox_new();
    let mut steps = [Duration::ZERO; 4];
    let t = Instant::now();
    for i in range {
        let mut lap = Instant::now();
        let mut split = |k: usize| {
            steps[k] += lap.elapsed();
            lap = Instant::now();
        };
        let queued = cli_send(o, i, bins);
        split(0);
        wait_for(&new.join(queued.file_name().unwrap()));
        split(1);
        let out = run_ok(&mut cli("ready-next", &o.rcv, "r0", bins));
        assert!(out.starts_with("TASK: "), "{out}");
        split(2);
        let out = run_ok(&mut cli("done-current", &o.rcv, "r0", bins));
        assert!(out.ends_with("NO_TASK\n"), "{out}");
        split(3);
    }
    (t.elapsed(), steps)
}

/// This build's CLI hop against the build in `bins`: one project each, each
/// with its own build's daemon, the hops run in chunks, alternating which
/// build goes first (ABBA), so the machine's drift falls on both alike.
fn against(o: &Opts, bins: &Path) {
    let n = o.hops;
    let chunks = 10;
    eprintln!("build against build: {n} hops each, in {chunks} chunks");
    let this = ours(&o.dir, true, "task");
    let that = ours(&o.dir, true, "task");
    let _d1 = Daemon::start(&this.project);
    let _d2 = Daemon::start_program(&that.project, &bins.join("handoffd"));
    let mut sums = [(Duration::ZERO, [Duration::ZERO; 4]); 2];
    let per = n.div_ceil(chunks);
    for c in 0..chunks {
        let range = c * per..((c + 1) * per).min(n);
        let order = if c % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let (p, b) = if which == 0 {
                (&this, None)
            } else {
                (&that, Some(bins))
            };
            let (t, s) = hops_cli(p, range.clone(), b);
            sums[which].0 += t;
            for (sum, step) in sums[which].1.iter_mut().zip(s) {
                *sum += step;
            }
        }
    }
    let us = |d: Duration| common::us(d / n as u32);
    println!(
        "### This build against {} ({n} hops each, {chunks} chunks, ABBA)\n",
        bins.display()
    );
    println!("| step | this build µs | that build µs | this / that |");
    println!("|---|---|---|---|");
    let row = |label: &str, a: Duration, b: Duration| {
        println!(
            "| {label} | {:.0} | {:.0} | {:.2} |",
            us(a),
            us(b),
            us(a) / us(b)
        );
        eprintln!("  {label}: {:.0} µs against {:.0} µs", us(a), us(b));
    };
    row("full hop", sums[0].0, sums[1].0);
    let labels = [
        "`swarm-handoff`",
        "until the copy is in `new/`",
        "`ready-next`",
        "`done-current`",
    ];
    for (k, label) in labels.iter().enumerate() {
        row(label, sums[0].1[k], sums[1].1[k]);
    }
    println!();
}

fn deliverer(o: &Ours) -> Deliverer {
    common::deliverer(&o.project)
}

/// The same four steps through the library, in process.
fn ours_hop_lib(base: &Path, n: usize, fsync: bool) -> Duration {
    let o = ours(base, fsync, "task");
    std::env::set_var("SWARMFORGE_ROLE", "sender");
    let mut d = deliverer(&o);
    let wt = Worktree::new(&o.rcv);
    let inbox = Inbox::new(&wt, 1 << 20);
    let t = Instant::now();
    for i in 0..n {
        lib_send(&o, i);
        assert_eq!(d.pass().delivered, 1);
        assert!(matches!(
            inbox.ready(ReceiveMode::Task).unwrap(),
            Ready::Task { .. }
        ));
        let done = inbox.done(ReceiveMode::Task).unwrap();
        assert!(matches!(done.next, Ok(Ready::NoTask)));
    }
    t.elapsed() / n as u32
}

fn fill_inbox(o: &Ours, n: usize) {
    let new = Worktree::new(&o.rcv).inbox_new();
    for i in 0..n {
        let (name, text) = common::copy_text("sender", "20260615T140531Z", i + 1);
        fs::write(new.join(name), text).unwrap();
    }
}

fn list_sorted(dir: &Path) -> (Duration, usize) {
    let t = Instant::now();
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    v.sort_unstable();
    (t.elapsed(), v.len())
}

// -------------------------------------------------------------- sections

struct Table {
    rows: Vec<(String, String, f64, String)>,
}

impl Table {
    fn new() -> Table {
        Table { rows: Vec::new() }
    }
    fn row(&mut self, who: &str, how: &str, d: Duration, note: &str) {
        self.rows
            .push((who.into(), how.into(), common::us(d), note.to_string()));
        eprintln!("  {who} / {how}: {:.1} µs", common::us(d));
    }
    fn print(&self, unit: &str, base_label: &str, base: f64) {
        println!("| system | path | {unit} | ratio to {base_label} | notes |");
        println!("|---|---|---|---|---|");
        for (who, how, v, note) in &self.rows {
            let shown = if unit.starts_with("ms") {
                format!("{:.2}", v / 1e3)
            } else {
                format!("{v:.0}")
            };
            println!("| {who} | {how} | {shown} | {:.2} | {note} |", v / base);
        }
        println!();
    }
}

fn enqueue(o: &Opts) {
    let n = o.messages;
    let fast = (n * 5).max(5_000);
    eprintln!("enqueue: {n} messages per run");
    let mut t = Table::new();
    let bare = bare_enqueue(&o.dir, n, true);
    t.row(
        "bare loop",
        "write+fsync+rename+fsync(dir)",
        bare,
        "the physical limit",
    );
    t.row(
        "bare loop",
        "write+rename, no fsync",
        bare_enqueue(&o.dir, fast, false),
        "",
    );
    t.row(
        "process start",
        "/bin/true per message",
        spawn_floor(n),
        "floor of any one-CLI-call-per-message tool",
    );
    t.row(
        "Maildir",
        "safecat per message",
        safecat_enqueue(&o.dir, n),
        "fsyncs the file, not the folder; link+unlink",
    );
    let d = common::row_dir(&o.dir);
    let dq = dirq(&[
        "enqueue",
        d.path().join("q").to_str().unwrap(),
        &fast.to_string(),
    ]);
    t.row(
        "python dirq",
        "QueueSimple.add, one process",
        dq / fast as u32,
        "no fsync at all; interpreter start excluded",
    );
    t.row(
        "ours",
        "swarm-handoff per message, fsync on",
        ours_enqueue_cli(&o.dir, n, true),
        "file + folder fsync",
    );
    t.row(
        "ours",
        "swarm-handoff per message, fsync off",
        ours_enqueue_cli(&o.dir, n, false),
        "`daemon: {fsync: false}`",
    );
    t.row(
        "ours",
        "library send::queue, fsync on",
        ours_enqueue_lib(&o.dir, n, true),
        "",
    );
    t.row(
        "ours",
        "library send::queue, fsync off",
        ours_enqueue_lib(&o.dir, fast, false),
        "",
    );
    println!("### Enqueue ({n} messages; {fast} for the no-fsync in-process rows)\n");
    t.print("µs per message", "the bare fsync loop", common::us(bare));
}

fn hop(o: &Opts) {
    let n = o.hops;
    let fast = n * 5;
    eprintln!("hop: {n} messages per run");
    let mut t = Table::new();
    let bare = bare_enqueue(&o.dir, n, true);
    t.row(
        "bare loop",
        "write+fsync+rename+fsync(dir) (one publish)",
        bare,
        "the physical limit of one durable step",
    );
    t.row(
        "Maildir",
        "safecat → new/; reader: rename new→cur, read, unlink",
        maildir_hop(&o.dir, n),
        "1 process; the file fsynced once",
    );
    let d = common::row_dir(&o.dir);
    let dq = dirq(&[
        "hop",
        d.path().join("q").to_str().unwrap(),
        &fast.to_string(),
    ]);
    t.row(
        "python dirq",
        "add → first → lock → get → remove, one process",
        dq / fast as u32,
        "no fsync",
    );
    t.row(
        "contract floor",
        "the same 12 fsyncs, renames and writes in process + 3 × /bin/true",
        contract_hop(&o.dir, n),
        "a hop's durability with no code; docs/protocol.md §8.1",
    );
    let on = ours_hop_cli(&o.dir, n, true);
    t.row(
        "ours",
        "swarm-handoff → handoffd → ready-next → done-current, fsync on",
        on.total,
        "3 processes + the daemon; 12 fsyncs",
    );
    let steps = [
        "`swarm-handoff` (process, send)",
        "until the copy is in `new/` (daemon wake-up + pass)",
        "`ready-next` (process, take)",
        "`done-current` (process, finish)",
    ];
    for (how, d) in steps.iter().zip(on.steps) {
        t.row("ours, step", how, d, "of the fsync-on hop");
    }
    t.row(
        "ours",
        "same, fsync off",
        ours_hop_cli(&o.dir, n, false).total,
        "",
    );
    t.row(
        "ours",
        "library: send::queue → Deliverer::pass → Inbox::ready → Inbox::done, fsync on",
        ours_hop_lib(&o.dir, n, true),
        "in process, no daemon",
    );
    t.row(
        "ours",
        "library, fsync off",
        ours_hop_lib(&o.dir, fast, false),
        "",
    );
    println!(
        "### One full hop ({n} messages, one in flight; {fast} for the no-fsync in-process rows)\n"
    );
    t.print(
        "µs per message",
        "one bare durable publish",
        common::us(bare),
    );
}

fn backlog(o: &Opts) {
    let n = o.backlog;
    eprintln!("backlog: {n} files");
    let mut t = Table::new();
    let ob = ours(&o.dir, true, "task");
    fill_inbox(&ob, n);
    let new = Worktree::new(&ob.rcv).inbox_new();
    // Warm the dentry cache the same way for every reader.
    let (listed, count) = list_sorted(&new);
    assert_eq!(count, n);
    let (listed2, _) = list_sorted(&new);
    let floor = listed.min(listed2);
    t.row(
        "Maildir (any reader)",
        &format!("readdir + sort of a {n}-file new/ (in process)"),
        floor,
        "the floor for finding the oldest file",
    );
    let first = Instant::now();
    let out = run_ok(&mut cli("ready-next", &ob.rcv, "r0", None));
    let first = first.elapsed();
    assert!(out.starts_with("TASK: "));
    t.row(
        "ours",
        &format!("`ready-next` (CLI) takes the first of {n}, fsync on"),
        first,
        "one process",
    );
    let mut dones = Vec::new();
    for _ in 0..5 {
        let s = Instant::now();
        let out = run_ok(&mut cli("done-current", &ob.rcv, "r0", None));
        dones.push(s.elapsed());
        assert!(out.contains("\nTASK: "));
    }
    t.row(
        "ours",
        "`done-current` (CLI): complete + take the next, median of 5",
        median(dones),
        "one process",
    );
    let wt = Worktree::new(&ob.rcv);
    let inbox = Inbox::new(&wt, 1 << 20);
    let mut lib = Vec::new();
    for _ in 0..5 {
        let s = Instant::now();
        inbox.done(ReceiveMode::Task).unwrap().next.unwrap();
        lib.push(s.elapsed());
    }
    t.row(
        "ours",
        "library Inbox::done (complete + take next), median of 5",
        median(lib),
        "in process",
    );
    let empty = ours(&o.dir, true, "task");
    let mut nt = Vec::new();
    for _ in 0..5 {
        let s = Instant::now();
        run_ok(&mut cli("ready-next", &empty.rcv, "r0", None));
        nt.push(s.elapsed());
    }
    t.row(
        "ours",
        "`ready-next` on an empty inbox (NO_TASK), median of 5",
        median(nt),
        "fixed cost of one call",
    );
    drop(ob);

    let d = common::row_dir(&o.dir);
    let q = d.path().join("q");
    let q = q.to_str().unwrap();
    dirq(&["fill", q, &n.to_string()]);
    let mut firsts = Vec::new();
    for _ in 0..3 {
        firsts.push(dirq(&["first", q]));
    }
    t.row(
        "python dirq",
        &format!("first → lock → get → remove on a {n} backlog, median of 3"),
        median(firsts),
        "measured in process",
    );
    t.row(
        "python dirq",
        "interpreter start + import (add to the row above for one call)",
        dirq_startup(),
        "",
    );
    println!("### A backlog of {n} files\n");
    t.print("ms", "the readdir + sort floor", common::us(floor));
}

/// A project with `n` messages through the real pipeline: 4 senders, 2 batch
/// recipients, every copy completed; times `swarm transcript` and `swarm audit`.
fn trail(o: &Opts) {
    let n = o.trail;
    eprintln!("trail: {n} messages");
    let senders = ["s0", "s1", "s2", "s3"];
    let receivers = ["r0", "r1"];
    let build = Instant::now();
    let (_d, root) = common::trail_fixture(&o.dir, n);
    let build = build.elapsed();
    eprintln!("  fixture built in {:.1} s", build.as_secs_f64());

    let time = |args: &[&str]| -> Duration {
        let mut v = Vec::new();
        for _ in 0..3 {
            let s = Instant::now();
            let out = Command::new(common::bin("swarm"))
                .args(args)
                .arg(&root)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(
                out.code().is_some_and(|c| c == 0 || c == 2),
                "swarm {args:?}"
            );
            v.push(s.elapsed());
        }
        median(v)
    };
    let mut t = Table::new();
    let files = 2 * n;
    // Twice, so the page cache is as warm for the floor as for the commands.
    let read_all = (0..2)
        .map(|_| {
            let s = Instant::now();
            let mut bytes = 0;
            for wt in senders.iter().chain(receivers.iter()) {
                for entry in common::walk(&root.join(wt).join(".swarmforge/handoffs")) {
                    bytes += fs::read(entry).map(|b| b.len()).unwrap_or(0);
                }
            }
            assert!(bytes > 0);
            s.elapsed()
        })
        .min()
        .unwrap();
    t.row(
        "floor",
        &format!("walk + read all {files} files (in process)"),
        read_all,
        "",
    );
    t.row(
        "ours",
        "`swarm transcript` (text), median of 3",
        time(&["transcript"]),
        "",
    );
    t.row(
        "ours",
        "`swarm transcript --format jsonl`, median of 3",
        time(&["transcript", "--format", "jsonl"]),
        "",
    );
    t.row("ours", "`swarm audit`, median of 3", time(&["audit"]), "");
    t.row(
        "ours",
        "`swarm audit --check`, median of 3",
        time(&["audit", "--check"]),
        "",
    );
    println!("### `swarm transcript` and `swarm audit` on {n} messages ({files} files: originals in sent/, copies in completed batches)\n");
    t.print("ms", "reading every file once", common::us(read_all));
}

fn main() {
    let mut o = opts();
    let peers = Command::new("sh")
        .args(["-c", "command -v safecat && python3 -c 'import dirq'"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !peers.is_ok_and(|s| s.success()) {
        eprintln!("safecat or python dirq is missing: scripts/bench-queues.sh installs them");
        std::process::exit(1);
    }
    let run = common::run_dir(&o.dir);
    o.dir = run.path().to_path_buf();
    println!(
        "Queue comparison, one run on {} ({} cores); times are per message unless noted.\n",
        o.dir.display(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    if let Some(bins) = &o.against {
        against(&o, bins);
        return;
    }
    enqueue(&o);
    hop(&o);
    if !o.skip.iter().any(|s| s == "backlog") {
        backlog(&o);
    }
    if !o.skip.iter().any(|s| s == "trail") {
        trail(&o);
    }
}
