//! Pieces every benchmark shares: the bare durable-publish loop (the physical
//! limit every figure is compared with), the binaries under test, the
//! `--name value` flags, and the fixtures several benches build the same
//! way (role worktrees, outbox notes, a completed trail, a library
//! `Deliverer`).

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use swarm_handoff::agent::queue::Inbox;
use swarm_handoff::daemon::deliver::Deliverer;
use swarm_handoff::daemon::journal::Journal;
use swarm_handoff::daemon::wake::Waker;
use swarm_handoff::fsx;
use swarm_handoff::protocol::clock;
use swarm_handoff::protocol::config::Config;
use swarm_handoff::protocol::header::{Header, Message};
use swarm_handoff::protocol::layout::{Project, Worktree};
use swarm_handoff::protocol::roles::{ReceiveMode, Roles};

/// The folder of one run, under `base` (`--dir`), removed when dropped at
/// the end of `main`. Rows make theirs inside with [`row_dir`].
pub fn run_dir(base: &Path) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("bench-run-")
        .tempdir_in(base)
        .unwrap()
}

/// A folder for one row's files under the run's folder, left in place when
/// the row ends; the run's folder goes once, after the last row. On ext4
/// without a journal every file creation skips the inodes freed in the last
/// minutes, so a row that removed its files made the rows after it pay for
/// them (docs/benchmarks.md, "Where a hop's time goes").
pub fn row_dir(run: &Path) -> tempfile::TempDir {
    let mut d = tempfile::tempdir_in(run).unwrap();
    d.disable_cleanup(true);
    d
}

/// The physical limit: write + (fsync) + rename + (fsync of the folder) of
/// `n` files of `body` bytes in a fresh folder under `base`; time per file.
pub fn bare_loop(base: &Path, n: usize, sync: bool, body: usize) -> Duration {
    let d = row_dir(base);
    let dir = fs::File::open(d.path()).unwrap();
    let body = vec![b'x'; body];
    let t = Instant::now();
    for i in 0..n {
        let tmp = d.path().join(format!(".{i}.tmp"));
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
            .unwrap();
        f.write_all(&body).unwrap();
        if sync {
            f.sync_all().unwrap();
        }
        fs::rename(&tmp, d.path().join(format!("{i}.msg"))).unwrap();
        if sync {
            dir.sync_all().unwrap();
        }
    }
    t.elapsed() / n.max(1) as u32
}

/// A binary of this package, as built for the benchmark.
pub fn bin(name: &str) -> PathBuf {
    match name {
        "swarm-handoff" => env!("CARGO_BIN_EXE_swarm-handoff").into(),
        "ready-next" => env!("CARGO_BIN_EXE_ready-next").into(),
        "done-current" => env!("CARGO_BIN_EXE_done-current").into(),
        "handoffd" => env!("CARGO_BIN_EXE_handoffd").into(),
        "swarm" => env!("CARGO_BIN_EXE_swarm").into(),
        other => panic!("unknown binary {other}"),
    }
}

/// `--name value` pairs from the command line (`cargo bench` adds a lone
/// `--bench`, which is skipped).
pub fn flags() -> HashMap<String, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut out = HashMap::new();
    let mut i = 0;
    while i < args.len() {
        match (args[i].strip_prefix("--"), args.get(i + 1)) {
            (Some(name), Some(v)) if !v.starts_with("--") => {
                out.insert(name.to_string(), v.clone());
                i += 2;
            }
            _ => i += 1,
        }
    }
    out
}

/// The flag's value parsed, or `default`; a bad value stops the run.
pub fn flag<T: std::str::FromStr>(f: &HashMap<String, String>, name: &str, default: T) -> T {
    match f.get(name) {
        Some(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("--{name}: cannot parse '{v}'")),
        None => default,
    }
}

/// The median of `v` (not empty).
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `--skip a,b`: the sections left out.
pub fn skip(f: &HashMap<String, String>) -> Vec<String> {
    f.get("skip")
        .map(|s| s.split(',').map(String::from).collect())
        .unwrap_or_default()
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A role worktree at `wt` for the project at `root`: its folders, and the
/// `project-root` pointer unless it is the root itself.
pub fn role_worktree(root: &Path, wt: &Path) {
    fs::create_dir_all(wt.join(".swarmforge/handoffs")).unwrap();
    if wt != root {
        fs::write(
            wt.join(".swarmforge/project-root"),
            format!("{}\n", root.display()),
        )
        .unwrap();
    }
    fsx::ensure_dirs(&Worktree::new(wt).all_dirs()).unwrap();
}

/// A project's own files at `root`: the daemon's folder, `roles.tsv` holding
/// `tsv`, and a `swarm.yaml` with `daemon.fsync` set and no wake-ups.
pub fn project_files(root: &Path, tsv: &str, fsync: impl std::fmt::Display) {
    fs::create_dir_all(root.join(".swarmforge/daemon")).unwrap();
    fs::write(root.join(".swarmforge/roles.tsv"), tsv).unwrap();
    fs::write(
        root.join("swarm.yaml"),
        format!("daemon:\n  fsync: {fsync}\nwake:\n  method: none\n"),
    )
    .unwrap();
}

/// Every file below `dir` (folders walked, not listed).
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A `Deliverer` for `p`, as the daemon builds one.
pub fn deliverer(p: &Project) -> Deliverer {
    let roles = Roles::load(&p.roles_tsv()).unwrap();
    let config = Config::load(&p.config_file()).unwrap();
    let journal = Journal::new(p);
    let waker = Waker::new(p.clone(), journal.clone());
    Deliverer::new(p.clone(), roles, config, journal, waker)
}

/// A note from `from` to `to` saying `text`, created at `when`, as
/// `swarm-handoff` writes one (priority 50, the body's preamble).
fn note(id: &str, from: &str, to: &str, text: &str, when: clock::Instant) -> Message {
    let mut m = Message::default();
    m.set(Header::Id, id);
    m.set(Header::From, from);
    m.set(Header::To, to);
    m.set(Header::Priority, "50");
    m.set(Header::Type, "note");
    m.set(Header::Message, text);
    m.set(Header::CreatedAt, clock::iso(when));
    m.body = format!("Re-read your role and constitution.\n\n{text}\n");
    m
}

/// Publishes note `seq` from `from` to `to` (a comma list) in `wt`'s outbox,
/// the way `swarm-handoff` does.
pub fn publish_note(wt: &Worktree, from: &str, seq: usize, to: &str) {
    let now = clock::now();
    let id = format!("{}_{seq:06}_from_{from}", clock::idts(now));
    let m = note(&id, from, to, &format!("benchmark message {seq}"), now);
    let name = format!("50_{id}_to_{}.handoff", to.replace(',', "_"));
    fsx::publish(
        &wt.outbox_tmp(),
        &wt.outbox().join(name),
        m.render().as_bytes(),
    )
    .unwrap();
}

/// `r0,r1,…` for `n` recipients.
pub fn recipients_list(n: usize) -> String {
    (0..n)
        .map(|r| format!("r{r}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `n` messages through the real pipeline under `base`: 4 senders, 2 batch
/// recipients, every copy delivered and completed (fsync off while it is
/// built). Returns the folder (removed on drop) and the project root.
pub fn trail_fixture(base: &Path, n: usize) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir_in(base).unwrap();
    let root = d.path().canonicalize().unwrap();
    let senders = ["s0", "s1", "s2", "s3"];
    let receivers = ["r0", "r1"];
    let mut tsv = String::new();
    for r in senders.iter().chain(receivers.iter()) {
        let wt = root.join(r);
        role_worktree(&root, &wt);
        let mode = if r.starts_with('r') { "batch" } else { "task" };
        tsv.push_str(&format!(
            "{r}\t{r}\t{}\ts\tX\tscript\t{mode}\n",
            wt.display()
        ));
    }
    project_files(&root, &tsv, false);
    let project = Project::new(&root);
    fsx::set_fsync(false);
    let base_t = clock::now();
    for i in 0..n {
        let s = senders[i % senders.len()];
        let to = receivers[i % receivers.len()];
        // In the past, 10 ms apart: a created_at after the enqueued_at the
        // pass stamps would make every copy a time_order violation.
        let when = base_t - chrono::Duration::milliseconds((n - i) as i64 * 10);
        let id = format!(
            "{}_{:06}_from_{s}",
            clock::idts(when),
            i / senders.len() + 1
        );
        let m = note(&id, s, to, &format!("message {i} about the parser"), when);
        let wt = Worktree::new(root.join(s));
        fsx::publish(
            &wt.outbox_tmp(),
            &wt.outbox().join(format!("50_{id}_to_{to}.handoff")),
            m.render().as_bytes(),
        )
        .unwrap();
    }
    let mut dl = deliverer(&project);
    assert_eq!(dl.pass().delivered, n);
    for rcv in receivers {
        let wt = Worktree::new(root.join(rcv));
        let inbox = Inbox::new(&wt, 1 << 20);
        inbox.ready(ReceiveMode::Batch).unwrap();
        inbox.done(ReceiveMode::Batch).unwrap();
    }
    fsx::set_fsync(true);
    (d, root)
}

/// `handoffd` for a project, returned once it has logged `started`;
/// stopped (SIGTERM, then reaped) on drop.
pub struct Daemon(pub Child);

impl Daemon {
    pub fn start(p: &Project) -> Daemon {
        Daemon::start_program(p, &bin("handoffd"))
    }

    /// `handoffd` at `program` (another build's, for a build-against-build run).
    pub fn start_program(p: &Project, program: &Path) -> Daemon {
        let child = Command::new(program)
            .arg(&p.root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !fs::read_to_string(p.log_file())
            .unwrap_or_default()
            .contains(" started")
        {
            assert!(Instant::now() < deadline, "handoffd did not start");
            std::thread::sleep(Duration::from_millis(2));
        }
        Daemon(child)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

/// Inbox copy `seq` from `from` to `r0` as the daemon renders it (a 300-byte
/// body): its file name and text, for filling a backlog directly.
pub fn copy_text(from: &str, idts: &str, seq: usize) -> (String, String) {
    let id = format!("{idts}_{seq:06}_from_{from}");
    let mut m = Message::default();
    m.set(Header::Id, &id);
    m.set(Header::From, from);
    m.set(Header::To, "r0");
    m.set(Header::Recipient, "r0");
    m.set(Header::Priority, "50");
    m.set(Header::Type, "note");
    m.set(Header::Message, format!("backlog {seq}"));
    m.set(Header::CreatedAt, "2026-06-15T14:05:31.123456Z");
    m.set(Header::EnqueuedAt, "2026-06-15T14:05:31.223456Z");
    m.body = format!(
        "Re-read your role and constitution.\n\nbacklog {seq} {}\n",
        "x".repeat(300)
    );
    (format!("50_{id}_to_r0.handoff"), m.render())
}
