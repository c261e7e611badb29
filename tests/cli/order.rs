//! The order hint (issue 19, "accept in constant time"): with the daemon
//! running, `ready-next` and `done-current` take the next item of a deep
//! `inbox/new` without listing it, and still hand out, in order, files
//! placed there by anyone else. Proven under strace (the folder is never
//! opened; the daemon's socket is asked) and by what is handed out; the
//! speed itself is a benchmark (`cargo bench --bench scaling`).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::support::{publish, require_tool, Project, Role, CREATED, DEADLINE};

/// Items placed for a deep folder: its directory then reports well over
/// protocol::order::DEEP_DIR_BYTES (64 KiB) on ext4 and tmpfs alike.
const DEEP: u32 = 4000;

fn name(priority: &str, seq: u32) -> String {
    format!("{priority}_20260615T140531Z_{seq:06}_from_qa_to_coder.handoff")
}

/// A delivered note in the coder's `inbox/new`, placed as any writer would
/// (temp file + rename), not through our daemon.
fn place(p: &Project, priority: &str, seq: u32, kind: &str) -> String {
    let n = name(priority, seq);
    let id = format!("20260615T140531Z_{seq:06}_from_qa");
    let extra = if kind == "react" {
        "reaction: thumbs_up\nin_reply_to: 20260615T140531Z_999999_from_qa\n"
    } else {
        ""
    };
    let text = format!(
        "id: {id}\nfrom: qa\nto: coder\nrecipient: coder\npriority: {priority}\ntype: {kind}\n\
         message: m{seq}\n{extra}created_at: {CREATED}\nenqueued_at: 2026-06-15T14:05:32.123456Z\n\n\
         Re-read your role and constitution.\n\nm{seq}\n"
    );
    publish(&p.handoffs("inbox/new").join(&n), text.as_bytes());
    n
}

/// A project whose coder has `DEEP` notes waiting (sequence 1..=DEEP, all
/// priority 50) and a running daemon.
fn deep() -> (Project, crate::support::Daemon) {
    deep_with("")
}

/// [`deep`] with more of swarm.yaml.
fn deep_with(config: &str) -> (Project, crate::support::Daemon) {
    let p = deep_project(&format!("wake: {{method: none}}\n{config}"));
    let d = p.spawn_daemon(&[]);
    (p, d)
}

/// The project of [`deep`] with this swarm.yaml, no daemon yet.
fn deep_project(config: &str) -> Project {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .config(config)
        .build();
    for seq in 1..=DEEP {
        place(&p, "50", seq, "note");
    }
    let size = fs::metadata(p.handoffs("inbox/new")).unwrap().size();
    assert!(
        size >= 64 * 1024,
        "inbox/new is only {size} bytes: not deep"
    );
    p
}

/// `prog args` as the coder under `strace -f -y -e trace=getdents64,connect`:
/// (its stdout, the trace).
fn traced(p: &Project, prog: &str, args: &[&str]) -> (String, String) {
    let log = p.root.join("strace.log");
    let log_arg = log.display().to_string();
    let r = p
        .cmd(prog)
        .role("coder")
        .args(args)
        .under(&[
            "strace",
            "-f",
            "-qq",
            "-y",
            "-o",
            &log_arg,
            "-e",
            "trace=getdents64,connect",
        ])
        .run();
    r.ok();
    (r.stdout.clone(), fs::read_to_string(&log).unwrap())
}

/// The call asked the daemon and never read `inbox/new`'s entries (the hint
/// path only looks at single names in it).
fn asked_without_listing(trace: &str) {
    let asked = trace
        .lines()
        .any(|l| l.contains("connect(") && l.contains("order.sock") && l.ends_with("= 0"));
    assert!(asked, "the daemon was not asked:\n{trace}");
    let listed: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("getdents64(") && l.contains("/inbox/new>"))
        .collect();
    assert!(listed.is_empty(), "inbox/new was listed: {listed:?}");
}

fn taken_id(json: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
    v["id"]
        .as_str()
        .or_else(|| v["next"]["id"].as_str())
        .unwrap_or_else(|| panic!("no id in {v}"))
        .to_string()
}

fn in_process(p: &Project) -> Vec<String> {
    crate::support::entries(&p.handoffs("inbox/in_process"))
}

#[test]
fn a_deep_inbox_is_taken_in_order_without_listing_it_whoever_placed_its_files() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let (p, _d) = deep();
    // The daemon lists a folder the first time it is asked: done here, so
    // the traced calls' questions only drain events (a loaded machine must
    // not make them outwait the helpers' patience and list).
    let served = p.handoffs("inbox/new").canonicalize().unwrap();
    let sock = p.path(".swarmforge/daemon/order.sock");
    assert!(ask(&sock, &served).starts_with(&format!("ok {DEEP} 0\n")));
    let (out, trace) = traced(&p, "ready-next", &["--json"]);
    asked_without_listing(&trace);
    assert_eq!(taken_id(&out), "20260615T140531Z_000001_from_qa");
    assert_eq!(in_process(&p), [name("50", 1)]);

    // Placed behind the daemon's back, just before the call: first in order.
    place(&p, "10", DEEP + 1, "note");
    let (out, trace) = traced(&p, "done-current", &["--json"]);
    asked_without_listing(&trace);
    assert_eq!(
        taken_id(&out),
        format!("20260615T140531Z_{:06}_from_qa", DEEP + 1)
    );

    // The next in order removed by hand: skipped, the one after is taken.
    fs::remove_file(p.handoffs("inbox/new").join(name("50", 2))).unwrap();
    let (out, trace) = traced(&p, "done-current", &["--json"]);
    asked_without_listing(&trace);
    assert_eq!(taken_id(&out), "20260615T140531Z_000003_from_qa");
    assert_eq!(in_process(&p), [name("50", 3)]);
}

#[test]
fn reactions_ahead_of_the_next_item_are_shown_once_even_beyond_one_answer() {
    let (p, _d) = deep();
    // More reactions than one answer names (protocol::order::HEAD is 32).
    let reactions: Vec<String> = (0..40)
        .map(|i| place(&p, "00", DEEP + 1 + i, "react"))
        .collect();
    let r = p.cmd("ready-next").role("coder").args(["--json"]).run();
    r.ok();
    let v = r.json();
    assert_eq!(v["id"], "20260615T140531Z_000001_from_qa", "{v}");
    assert_eq!(v["reactions"].as_array().map(Vec::len), Some(40), "{v}");
    for n in &reactions {
        assert!(
            !p.handoffs("inbox/new").join(n).exists(),
            "{n} left in new/"
        );
        assert!(
            p.handoffs("inbox/completed").join(n).exists(),
            "{n} not completed"
        );
    }
}

#[test]
fn an_odd_entry_in_a_deep_inbox_is_refused_as_without_the_daemon() {
    let (p, _d) = deep();
    let odd = p.handoffs("inbox/new").join(name("00", DEEP + 1));
    std::os::unix::fs::symlink("/etc/passwd", &odd).unwrap();
    let rejected = p.handoffs("inbox/rejected").join(name("00", DEEP + 1));
    p.cmd("ready-next")
        .role("coder")
        .args(["--task"])
        .code(2)
        .stderr_has(&format!(
            "MALFORMED_HANDOFF: symlink\n- {}\n",
            rejected.display()
        ))
        .run();
    // Then the queue moves on, in order.
    let r = p.cmd("ready-next").role("coder").args(["--json"]).run();
    assert_eq!(taken_id(&r.stdout), "20260615T140531Z_000001_from_qa");
}

#[test]
fn without_an_answer_the_helpers_list_as_before() {
    let (p, d) = deep();
    // A daemon that stopped leaves no socket; a stale file there is refused
    // by the kernel: both list the folder.
    drop(d);
    let sock = p.path(".swarmforge/daemon/order.sock");
    let _ = fs::remove_file(&sock);
    fs::write(&sock, "").unwrap();
    let r = p.cmd("ready-next").role("coder").args(["--json"]).run();
    assert_eq!(taken_id(&r.stdout), "20260615T140531Z_000001_from_qa");
    // A daemon asked about a folder it does not serve refuses; the caller
    // lists. (The qa worktree is served; a copy of the project is not.)
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("new");
    fs::create_dir(&copy).unwrap();
    let _d = p.spawn_daemon(&[]);
    let answer = ask(&sock, &copy);
    assert!(answer.starts_with("no "), "{answer}");
    let answer = ask(&sock, Path::new("relative"));
    assert!(answer.starts_with("no "), "{answer}");
    let served = p.handoffs("inbox/new").canonicalize().unwrap();
    let answer = ask(&sock, &served);
    assert!(
        answer.starts_with(&format!("ok {} 0\n", DEEP - 1)),
        "{answer}"
    );
}

/// Issue 29: a `ready-next` that resumes an item in process hands out the
/// answers waiting for it without reading every waiting file: the daemon
/// has read each item's head once, in the background, and names only those
/// that may be answers. Answers placed by anyone (here behind the daemon's
/// back) are found; notes are left waiting.
#[test]
fn answers_for_an_item_in_process_are_found_without_reading_the_deep_inbox() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let (p, _d) = deep();
    let r = p.cmd("ready-next").role("coder").args(["--json"]).run();
    assert_eq!(taken_id(&r.stdout), "20260615T140531Z_000001_from_qa");
    let first = place(&p, "50", DEEP + 1, "answer");
    let second = place(&p, "20", DEEP + 2, "answer");
    // The daemon has read every head once it names just the two answers
    // (in hand-out order) and no unread item.
    let served = p.handoffs("inbox/new").canonicalize().unwrap();
    let sock = p.path(".swarmforge/daemon/order.sock");
    let want = format!("ok 2 0\n{second}\n{first}\nend\n");
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let a = ask_verb(&sock, "answers", &served);
        if a == want {
            break;
        }
        assert!(std::time::Instant::now() < end, "the daemon says {a:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (out, trace) = traced(&p, "ready-next", &["--json"]);
    asked_without_listing(&trace);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["id"], "20260615T140531Z_000001_from_qa", "{v}");
    let answers: Vec<&str> = v["answers"]
        .as_array()
        .unwrap_or_else(|| panic!("no answers in {v}"))
        .iter()
        .map(|a| a["id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        answers,
        [
            format!("20260615T140531Z_{:06}_from_qa", DEEP + 2),
            format!("20260615T140531Z_{:06}_from_qa", DEEP + 1)
        ],
        "{v}"
    );
    for n in [&first, &second] {
        assert!(p.handoffs("inbox/completed").join(n).exists(), "{n}");
    }
    // The notes still wait, and the item in process is still the first.
    assert_eq!(in_process(&p), [name("50", 1)]);
    assert!(p.handoffs("inbox/new").join(name("50", 2)).exists());
}

/// Polling (`daemon.poll: true`, for filesystems without file events) keeps
/// no index: there is no socket, and the helpers list.
#[test]
fn a_polling_daemon_keeps_no_order() {
    let (p, _d) = deep_with("daemon: {poll: true}\n");
    assert!(!p.path(".swarmforge/daemon/order.sock").exists());
    let r = p.cmd("ready-next").role("coder").args(["--json"]).run();
    assert_eq!(taken_id(&r.stdout), "20260615T140531Z_000001_from_qa");
}

/// A caller that trickles its question a byte at a time is dropped after
/// the conversation's bound, so the one after it is answered while the
/// first is still trickling.
#[test]
fn a_trickling_caller_does_not_hold_up_the_next() {
    let (p, _d) = deep();
    let sock = p.path(".swarmforge/daemon/order.sock");
    let served = p.handoffs("inbox/new").canonicalize().unwrap();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (connected, is_connected) = std::sync::mpsc::channel();
    let trickler = {
        let (sock, answered) = (sock.clone(), answered.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
            s.write_all(b"n").unwrap();
            // Connected first, so the daemon takes this caller first.
            connected.send(()).unwrap();
            // Paced stimulus, not a wait: a byte every 100 ms for up to 20 s,
            // until the next caller has its answer.
            for _ in 0..200 {
                if answered.load(std::sync::atomic::Ordering::Relaxed) {
                    return true;
                }
                if s.write_all(b"n").is_err() {
                    return true; // dropped by the daemon
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            false
        })
    };
    is_connected.recv_timeout(DEADLINE).unwrap();
    let answer = ask(&sock, &served);
    answered.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(answer.starts_with(&format!("ok {DEEP} 0\n")), "{answer}");
    assert!(
        trickler.join().unwrap(),
        "the next caller was answered only after the trickler gave up"
    );
}

/// `strace -f -y` attached to the running daemon, tracing `getdents64` (and
/// more when asked); its log, and the ids of the daemon's threads by name,
/// when it is stopped.
struct DaemonTrace {
    strace: std::process::Child,
    log: std::path::PathBuf,
    pid: u32,
}

impl DaemonTrace {
    fn attach(p: &Project, pid: u32) -> DaemonTrace {
        DaemonTrace::attach_tracing(p, pid, "getdents64")
    }

    /// Attached, tracing the system calls `calls` (strace's `-e trace=`).
    fn attach_tracing(p: &Project, pid: u32, calls: &str) -> DaemonTrace {
        let log = p.root.join("daemon-strace.log");
        let trace = format!("trace={calls}");
        let strace = std::process::Command::new("strace")
            .args(["-f", "-qq", "-y", "-e", &trace, "-o"])
            .arg(&log)
            .args(["-p", &pid.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("strace runs");
        DaemonTrace { strace, log, pid }
    }

    fn text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The thread ids of the daemon named `comm`.
    fn threads(&self, comm: &str) -> Vec<String> {
        fs::read_dir(format!("/proc/{}/task", self.pid))
            .unwrap()
            .flatten()
            .filter(|t| fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == comm))
            .map(|t| t.file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// The threads that read `inbox/new`'s entries (strace's first column).
    fn listers(&self) -> std::collections::BTreeSet<String> {
        self.text()
            .lines()
            .filter(|l| l.contains("getdents64(") && l.contains("/inbox/new>"))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    }

    /// How many times the daemon looked at `inbox/new`'s own times through
    /// the descriptor it holds (an `fstat` of the folder).
    fn checks(&self) -> usize {
        self.text()
            .lines()
            .filter(|l| l.contains(" fstat(") && l.contains("/inbox/new>,"))
            .count()
    }

    fn detach(mut self) {
        crate::support::signal(self.strace.id(), 2);
        let _ = self.strace.wait();
    }
}

/// A [`deep_project`] (no wake-ups), its socket and canonical `inbox/new`,
/// and its daemon started with `env`, traced for `calls`.
fn traced_deep(
    env: (&str, &str),
    calls: &str,
) -> (
    Project,
    std::path::PathBuf,
    std::path::PathBuf,
    crate::support::Daemon,
    DaemonTrace,
) {
    let p = deep_project("wake: {method: none}\n");
    let sock = p.path(".swarmforge/daemon/order.sock");
    let served = p.handoffs("inbox/new").canonicalize().unwrap();
    let d = p.spawn_daemon_env(&[], &[env]);
    let trace = DaemonTrace::attach_tracing(&p, d.pid(), calls);
    (p, sock, served, d, trace)
}

/// The index is listed again while calls come in (here every 50 ms,
/// `HANDOFFD_ORDER_RELIST`, as if calls came far apart): the listings run on
/// the daemon's lister thread, never on the thread that answers, so no
/// caller waits for one; and right after a restart the first question is
/// answered from an index built before `started`.
#[test]
fn a_deep_inbox_is_listed_off_every_callers_path_at_start_and_when_its_index_ages() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let (p, sock, served, d, trace) = traced_deep(("HANDOFFD_ORDER_RELIST", "0.05"), "getdents64");
    // The periodic listing shows up in the trace (which also says strace
    // is attached).
    crate::support::wait_until(DEADLINE, "a background listing of inbox/new", || {
        !trace.listers().is_empty()
    });
    for seq in 1..=6 {
        let prog = if seq == 1 {
            "ready-next"
        } else {
            "done-current"
        };
        let (out, t) = traced(&p, prog, &["--json"]);
        asked_without_listing(&t);
        assert_eq!(taken_id(&out), format!("20260615T140531Z_{seq:06}_from_qa"));
    }
    let (answering, lister) = (trace.threads("order"), trace.threads("order-list"));
    assert_eq!((answering.len(), lister.len()), (1, 1));
    let listers = trace.listers();
    trace.detach();
    assert_eq!(
        listers.into_iter().collect::<Vec<_>>(),
        lister,
        "inbox/new was listed by a thread other than the lister"
    );

    // Restarted: the first question finds the index built (6 items gone).
    drop(d);
    let _d = p.spawn_daemon(&[]);
    let answer = ask(&sock, &served);
    assert!(
        answer.starts_with(&format!("ok {} 0\n", DEEP - 6)),
        "{answer}"
    );
}

/// An idle deep inbox is never listed again (issue 47: it was every 30 s,
/// so an idle daemon's cost grew with its backlog). With its folder
/// checked every 50 ms (`HANDOFFD_ORDER_CHECK`), the daemon's trace shows
/// the checks (an `fstat` of the folder) and no listing of it, before and
/// after a file placed behind its back, which the next answer still names
/// first.
#[test]
fn an_idle_deep_inbox_is_checked_and_never_listed_again() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let (p, sock, served, _d, trace) =
        traced_deep(("HANDOFFD_ORDER_CHECK", "0.05"), "getdents64,fstat");
    crate::support::wait_until(DEADLINE, "20 checks of inbox/new", || trace.checks() >= 20);
    let placed = place(&p, "10", DEEP + 1, "note");
    let answer = ask(&sock, &served);
    assert!(
        answer.starts_with(&format!("ok {} 0\n{placed}\n", DEEP + 1)),
        "{answer}"
    );
    let checks = trace.checks();
    crate::support::wait_until(DEADLINE, "20 more checks of inbox/new", || {
        trace.checks() >= checks + 20
    });
    let listers = trace.listers();
    let text = trace.text();
    trace.detach();
    assert!(listers.is_empty(), "inbox/new was listed again:\n{text}");
}

/// The re-wake sweep takes a deep inbox's oldest waiting item from the
/// index (by the time it was placed, skipping items that do not wake, such
/// as reactions) and never lists the folder on the daemon's main thread.
#[test]
fn the_rewake_sweep_finds_a_deep_inboxs_oldest_item_in_the_index() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = deep_project("");
    let wakes = p.record_wakes("ack_within: 30m, sweep: 100ms");
    let new = p.handoffs("inbox/new");
    let set_age = |name: &str, secs: u64| {
        let f = fs::File::options()
            .write(true)
            .open(new.join(name))
            .unwrap();
        f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(secs))
            .unwrap();
    };
    // Overdue: a note placed two hours ago; older still, a reaction (which
    // wakes nobody); the rest were placed just now.
    let overdue = name("50", 77);
    set_age(&overdue, 2 * 3600);
    let reaction = place(&p, "50", DEEP + 1, "react");
    set_age(&reaction, 3 * 3600);
    let d = p.spawn_daemon(&[]);
    let trace = DaemonTrace::attach(&p, d.pid());
    crate::support::wait_until(DEADLINE, "a renotified line", || {
        crate::support::log_count(&p.log(), "renotified") >= 1
    });
    let main = d.pid().to_string();
    let listers = trace.listers();
    trace.detach();
    assert_eq!(
        crate::support::log_lines(&p.log(), "renotified")[0],
        format!("renotified {}", new.join(&overdue).display())
    );
    assert!(fs::read_to_string(&wakes).unwrap().contains("coder"));
    assert!(
        !listers.contains(&main),
        "the sweep listed inbox/new on the main thread"
    );
}

/// One question on the daemon's socket, as a hostile or foreign caller would.
fn ask(sock: &Path, dir: &Path) -> String {
    ask_verb(sock, "new", dir)
}

fn ask_verb(sock: &Path, verb: &str, dir: &Path) -> String {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).expect("the daemon listens");
    s.write_all(format!("{verb} {}\n", dir.display()).as_bytes())
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}
