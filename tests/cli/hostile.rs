//! Hostile input (issue 8): files planted directly in outboxes and inboxes,
//! hostile drafts, roles.tsv and swarm.yaml, and a property test of the
//! config loader. Every case is refused with a clear reason and the daemon
//! and helpers keep running. What tests/cli/daemon.rs
//! (`refusals_go_to_failed_with_the_reason_and_delivery_goes_on`) and
//! tests/cli/core_queue.rs (`plants`) already cover is not repeated here.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use crate::support::{
    entries, hq, log_count as count, log_lines as lines, note, post, wait_delivered, wait_until,
    Note, Project, Role, Run, CREATED, DEADLINE,
};

const HUNDRED_MIB: u64 = 100 * 1024 * 1024;

pub(crate) fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

/// A sparse file of `len` bytes starting with `head` (no disk space used).
fn sparse(path: &Path, head: &[u8], len: u64) {
    fs::write(path, head).unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// Peak resident memory of a process, in KiB.
fn vm_hwm_kib(pid: u32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn no_control_chars(text: &str) -> bool {
    text.chars()
        .all(|c| c == '\n' || !(c.is_control() || ('\u{80}'..='\u{9f}').contains(&c)))
}

/// Asserts a helper refused an inbox entry: exit 2, the reason and the path
/// it was moved to.
#[track_caller]
fn assert_refused(r: &Run, reason: &str, moved_to: &Path) {
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(
        r.stderr,
        format!("MALFORMED_HANDOFF: {reason}\n- {}\n", moved_to.display())
    );
}

/// One `handoffd --once` pass, which must end within [`DEADLINE`].
fn handoffd_once(p: &Project) -> Run {
    p.cmd("handoffd")
        .arg("--once")
        .arg(&p.root)
        .run_within(DEADLINE)
}

/// `coder` in the main worktree, `reviewer` in `rev`; no wake-ups.
fn project() -> (Project, PathBuf) {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("reviewer").at("rev"))
        .config("daemon: {rescan: 100ms}\nwake: {method: none}\n")
        .build();
    let rev = p.root.join("rev");
    (p, rev)
}

/// Plants hostile files in coder's outbox, each followed by a good note that
/// must be delivered, and records what each refusal must say.
struct Planter<'a> {
    p: &'a Project,
    outbox: PathBuf,
    seq: u32,
    /// (name as planted, name in failed/, reason)
    cases: Vec<(PathBuf, String, String)>,
    good: Vec<String>,
}

impl Planter<'_> {
    fn next(&mut self) -> u32 {
        self.seq += 1;
        self.seq
    }

    /// The next note from coder to reviewer.
    fn note(&mut self) -> Note {
        note("coder", self.next(), "reviewer", "a")
    }

    /// Published like a sender would (temp file, rename), under any byte name.
    fn plant(&mut self, name: &[u8], bytes: &[u8], reason: &str) {
        let os = std::ffi::OsStr::from_bytes(name);
        let path = self.outbox.join(os);
        let tmp = hq(&self.p.root, "outbox/tmp/hostile.tmp");
        fs::write(&tmp, bytes).unwrap();
        fs::rename(&tmp, &path).unwrap();
        let failed_name = os.to_string_lossy().into_owned();
        self.cases.push((path, failed_name, reason.to_string()));
    }

    /// Plants the next note under its own name with its text edited, then a
    /// good one.
    fn plant_note(&mut self, edit: impl FnOnce(&str) -> Vec<u8>, reason: &str) {
        let n = self.note();
        self.plant(n.name.as_bytes(), &edit(&n.text), reason);
        self.good_one();
    }

    /// Posts a good note and waits until it is delivered.
    fn good_one(&mut self) {
        let n = note("coder", self.next(), "reviewer", "ok");
        let path = post(&self.p.root, &n);
        self.good.push(n.name);
        wait_delivered(self.p, &path);
    }
}

/// The outbox cases the daemon test does not plant: each goes to `failed/`
/// with `<name>.error` holding the exact reason and one `failed` log line;
/// a good message after each proves the daemon keeps delivering; the 100 MiB
/// file is refused without being read; the log holds no raw control
/// character; nothing is written outside the project.
#[test]
fn the_daemon_refuses_hostile_outbox_files_and_keeps_running() {
    let (p, rev) = project();
    let mut d = p.spawn_daemon(&[]);
    let outbox = hq(&p.root, "outbox");
    fs::create_dir_all(hq(&p.root, "outbox/tmp")).unwrap();
    let mut pl = Planter {
        p: &p,
        outbox: outbox.clone(),
        seq: 0,
        cases: Vec::new(),
        good: Vec::new(),
    };

    pl.plant_note(
        |text| {
            let (head, tail) = text.split_once("message: a").unwrap();
            [head.as_bytes(), b"message: a\xff", tail.as_bytes()].concat()
        },
        "malformed: not valid UTF-8",
    );

    let n = pl.note();
    let big = outbox.join(&n.name);
    let tmp = hq(&p.root, "outbox/tmp/big.tmp");
    sparse(&tmp, n.text.as_bytes(), HUNDRED_MIB);
    let t = Instant::now();
    fs::rename(&tmp, &big).unwrap();
    pl.cases.push((
        big.clone(),
        n.name.clone(),
        format!("file too large ({HUNDRED_MIB} bytes; limit 1048576)"),
    ));
    pl.good_one();
    assert!(t.elapsed() < Duration::from_secs(10), "slow to refuse");

    pl.plant_note(
        |text| text.replace('\n', "\r\n").into_bytes(),
        "malformed: line 1: header 'id' contains a control character",
    );
    pl.plant_note(
        |text| (text.to_string() + "\0").into_bytes(),
        "malformed: body contains control character U+0000",
    );
    pl.plant_note(
        |text| {
            text.replace("from: coder\n", "from: coder\x1b]0;pwned\x07\n")
                .into_bytes()
        },
        "malformed: line 2: header 'from' contains a control character",
    );

    // Terminal escape sequences and invalid UTF-8 in the file name; `..`: a
    // hidden name.
    for name in [
        &b"50_\x1b[2J\x1b[31mred.handoff"[..],
        b"50_\xff\xfe.handoff",
        b"..handoff",
    ] {
        let n = pl.note();
        pl.plant(name, n.text.as_bytes(), "invalid file name");
        pl.good_one();
    }
    // A recipient that is a path.
    let seq = pl.next();
    let n = note("coder", seq, "../../etc", "a");
    let name = format!("50_20260615T140531Z_{seq:06}_from_coder_to_.._.._etc.handoff");
    pl.plant(
        name.as_bytes(),
        n.text.as_bytes(),
        "unknown recipient ../../etc",
    );
    pl.good_one();

    // Forged identity and delivery headers the daemon test does not plant.
    pl.plant_note(
        |text| {
            text.replace("_from_coder\n", "_from_reviewer\n")
                .into_bytes()
        },
        "id does not name the sender",
    );
    for h in ["dequeued_at", "completed_at"] {
        pl.plant_note(
            |text| {
                text.replace("type: note\n", &format!("type: note\n{h}: {CREATED}\n"))
                    .into_bytes()
            },
            &format!("forged {h} header"),
        );
    }

    // A header far over the draft limits (but under the file limit).
    let long = "y".repeat(100_000);
    pl.plant_note(
        |text| {
            text.replace("message: a\n", &format!("message: {long}\n"))
                .into_bytes()
        },
        "invalid: Header 'message' must be no longer than 80 characters; got 100000.",
    );

    // Empty file; dangling symlink; symlink to a device.
    pl.plant_note(|_| Vec::new(), "malformed: no blank line after the headers");
    for target in ["/nonexistent/swarm-handoff-target", "/dev/zero"] {
        let n = pl.note();
        let tmp = hq(&p.root, "outbox/tmp/link.tmp");
        std::os::unix::fs::symlink(target, &tmp).unwrap();
        let path = outbox.join(&n.name);
        fs::rename(&tmp, &path).unwrap();
        pl.cases.push((path, n.name.clone(), "symlink".into()));
        pl.good_one();
    }

    // A directory named like a handoff is not a queue item: left alone.
    let dir = outbox.join("50_20260615T140531Z_999999_from_coder_to_reviewer.handoff");
    fs::create_dir(&dir).unwrap();
    pl.good_one();
    let Planter {
        cases, mut good, ..
    } = pl;

    let failed = hq(&p.root, "failed");
    wait_until(DEADLINE, "every hostile file refused", || {
        cases
            .iter()
            .all(|(_, n, _)| failed.join(format!("{n}.error")).exists())
    });
    let log = p.log();
    assert!(no_control_chars(&log), "raw control character in the log");
    let failed_lines = lines(&log, "failed");
    for (path, failed_name, reason) in &cases {
        assert!(
            fs::symlink_metadata(path).is_err(),
            "{} left in the outbox",
            path.display()
        );
        assert!(
            fs::symlink_metadata(failed.join(failed_name)).is_ok(),
            "{failed_name:?} not in failed/"
        );
        let error = fs::read_to_string(failed.join(format!("{failed_name}.error"))).unwrap();
        assert_eq!(error, format!("{reason}\n"), "{failed_name:?}");
        let n = failed_lines
            .iter()
            .filter(|l| l.ends_with(&format!(" {reason}")))
            .count();
        assert!(n >= 1, "no failed line for {failed_name:?} in\n{log}");
    }
    assert_eq!(count(&log, "failed"), cases.len(), "{log}");
    // The same events in events.jsonl (a non-UTF-8 path once dropped both).
    let events = fs::read_to_string(p.path(".swarmforge/daemon/events.jsonl")).unwrap();
    let failed_events = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["kind"] == "failed")
        .count();
    assert_eq!(failed_events, cases.len());
    assert_eq!(count(&log, "delivered"), good.len());
    good.sort();
    assert_eq!(entries(&hq(&rev, "inbox/new")), good);
    assert!(dir.is_dir(), "the directory was moved");
    assert!(!p.root.join("etc").exists() && !rev.join("etc").exists());
    let peak = vm_hwm_kib(d.pid());
    assert!(
        peak < 64 * 1024,
        "handoffd peaked at {peak} KiB: it read the 100 MiB file"
    );
    d.alive();
}

/// The inbox cases core_queue's `plants` does not cover: a 100 MiB sparse
/// file (refused from its size, fast), a `..` name, a FIFO in `in_process/`
/// (no hang), and a symlink named like a batch folder pointing outside the
/// project (never followed, never listed).
#[test]
fn helpers_refuse_hostile_inbox_entries_and_move_on() {
    let (p, rev) = project();
    let new = hq(&rev, "inbox/new");
    let ip = hq(&rev, "inbox/in_process");
    let rejected = hq(&rev, "inbox/rejected");
    for d in [&new, &ip] {
        fs::create_dir_all(d).unwrap();
    }
    let good = note("coder", 1, "reviewer", "good");
    post(&p.root, &good);
    p.deliver_once().ok();
    let ready = |args: &[&str]| p.cmd("ready-next").role("reviewer").args(args).run();

    sparse(&new.join("00_big.handoff"), b"id: x\n\n", HUNDRED_MIB);
    let t = Instant::now();
    let r = ready(&[]);
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_refused(
        &r,
        &format!("file too large ({HUNDRED_MIB} bytes)"),
        &rejected.join("00_big.handoff"),
    );

    fs::write(new.join("..handoff"), "id: x\n\nbody\n").unwrap();
    assert_refused(
        &ready(&[]),
        "invalid file name",
        &rejected.join("..handoff"),
    );

    // A symlink named like a batch, pointing at a folder outside the project
    // that holds a well-formed item: ignored by every mode.
    let outside = tempfile::tempdir().unwrap();
    let bait = outside.path().join("00_bait.handoff");
    fs::write(&bait, "id: bait\npriority: 00\n\nbait\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), ip.join("batch_20260615T140531Z_000001")).unwrap();
    let r = p
        .cmd("done-current")
        .role("reviewer")
        .args(["--batch"])
        .run();
    assert_eq!((r.code, r.stderr.as_str()), (1, "NO_CURRENT_BATCH\n"));

    // A FIFO in in_process: refused, never opened for a blocking read.
    mkfifo(&ip.join("00_fifo.handoff"));
    assert_refused(
        &ready(&[]),
        "not a regular file",
        &rejected.join("00_fifo.handoff"),
    );

    // The queue moves on to the good item; the bait is untouched.
    let r = ready(&[]);
    r.ok();
    assert!(
        r.stdout
            .starts_with(&format!("TASK: {}\n", ip.join(&good.name).display())),
        "{r:?}"
    );
    assert_eq!(
        fs::read_to_string(&bait).unwrap(),
        "id: bait\npriority: 00\n\nbait\n"
    );
    assert_eq!(entries(outside.path()), vec!["00_bait.handoff".to_string()]);
}

/// A file name carrying a terminal escape sequence is refused, and the
/// refusal's `- <path>` line must not carry the raw sequence to the terminal.
#[test]
fn a_refused_name_is_printed_escaped() {
    let (p, rev) = project();
    let new = hq(&rev, "inbox/new");
    fs::create_dir_all(&new).unwrap();
    let name = std::ffi::OsStr::from_bytes(b"00_a\x1b[2Jb.handoff");
    fs::write(new.join(name), "id: x\n\nbody\n").unwrap();
    let r = p.cmd("ready-next").role("reviewer").run();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r
        .stderr
        .starts_with("MALFORMED_HANDOFF: invalid file name\n"));
    assert!(no_control_chars(&r.stderr), "raw escape in {:?}", r.stderr);
}

/// A file name that is not valid UTF-8 is refused and moved aside like any
/// other bad name, so the queue moves on instead of refusing it forever.
#[test]
fn a_non_utf8_name_is_moved_aside_and_the_queue_moves_on() {
    let (p, rev) = project();
    let new = hq(&rev, "inbox/new");
    fs::create_dir_all(&new).unwrap();
    let good = note("coder", 1, "reviewer", "good");
    post(&p.root, &good);
    p.deliver_once().ok();
    fs::write(
        new.join(std::ffi::OsStr::from_bytes(b"00_\xff\xfe.handoff")),
        "id: x\n\nbody\n",
    )
    .unwrap();
    let r = p.cmd("ready-next").role("reviewer").run();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .starts_with("MALFORMED_HANDOFF: invalid file name\n- "),
        "{r:?}"
    );
    let r = p.cmd("ready-next").role("reviewer").run();
    r.ok();
    assert!(r.stdout.starts_with("TASK: "), "{r:?}");
    assert_eq!(entries(&new), Vec::<String>::new());
}

/// Hostile drafts not covered by core_send: a FIFO (not read, no hang) and a
/// 100 MiB sparse file (refused from its size, fast). The draft is kept.
#[test]
fn swarm_handoff_refuses_a_fifo_and_a_huge_draft() {
    let (p, _rev) = project();
    let fifo = p.root.join("fifo-draft.txt");
    mkfifo(&fifo);
    let r = p.run(Some("coder"), "swarm-handoff", &["fifo-draft.txt"]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (1, "Draft file not found: fifo-draft.txt\n")
    );
    let big = p.root.join("big-draft.txt");
    sparse(
        &big,
        b"type: note\nto: reviewer\npriority: 50\nmessage: x\n",
        HUNDRED_MIB,
    );
    let t = Instant::now();
    let r = p.run(Some("coder"), "swarm-handoff", &["big-draft.txt"]);
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.starts_with(&format!(
            "HANDOFF INVALID: big-draft.txt\n\nErrors:\n- Draft must be no larger than 65536 bytes; got {HUNDRED_MIB}.\n"
        )),
        "{}",
        r.stderr
    );
    assert!(fifo.exists() && big.exists());
    assert!(entries(&hq(&p.root, "outbox"))
        .iter()
        .all(|n| !n.ends_with(".handoff")));
}

/// A FIFO in place of roles.tsv or swarm.yaml: `handoffd` exits 1 at once
/// naming the file instead of blocking on the read; a running daemon whose
/// roles.tsv turns into a FIFO keeps its roles and keeps delivering.
#[test]
fn a_fifo_for_roles_tsv_or_swarm_yaml_never_blocks_the_daemon() {
    let (p, rev) = project();
    let tsv = p.path(".swarmforge/roles.tsv");
    let saved = fs::read(&tsv).unwrap();
    let yaml = p.path("swarm.yaml");
    for (file, what) in [(&tsv, "roles.tsv"), (&yaml, "swarm.yaml")] {
        let keep = fs::read(file).unwrap();
        fs::remove_file(file).unwrap();
        mkfifo(file);
        // A FIFO {what} must not block it.
        let r = handoffd_once(&p);
        assert_eq!(r.code, 1, "{what}: {r:?}");
        assert!(
            r.stderr.contains(&file.display().to_string())
                && r.stderr.contains("not a regular file"),
            "{what}: {r:?}"
        );
        fs::remove_file(file).unwrap();
        fs::write(file, keep).unwrap();
    }

    let mut d = p.spawn_daemon(&[]);
    let a = note("coder", 1, "reviewer", "before");
    wait_delivered(&p, &post(&p.root, &a));
    // Swapped in atomically: a daemon that saw no roles.tsv at all would
    // (rightly) defer everything instead.
    let fifo = p.path(".swarmforge/roles.fifo");
    mkfifo(&fifo);
    fs::rename(&fifo, &tsv).unwrap();
    let b = note("coder", 2, "reviewer", "during");
    wait_delivered(&p, &post(&p.root, &b));
    d.alive();
    fs::remove_file(&tsv).unwrap();
    fs::write(&tsv, saved).unwrap();
    assert_eq!(entries(&hq(&rev, "inbox/new")), {
        let mut v = vec![a.name, b.name];
        v.sort();
        v
    });
}

// -------------------------------------------------- config property tests

fn config_key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "daemon",
        "fsync",
        "rescan",
        "poll",
        "poll_interval",
        "sweep",
        "ack_within",
        "rewake_cap",
        "complete_within",
        "wake",
        "method",
        "command",
        "limits",
        "max_file_bytes",
        "max_hops",
        "roles",
        "name",
        "agent",
        "worktree",
        "mode",
        "allowed_types",
        "restart",
        "restart_budget",
        "forum",
        "moderator",
        "digest_every",
        "idle_close",
        "discussion",
        "turn_within",
        "skip_after",
        "launch",
        "stagger",
        "<<",
        "? x",
        "unknown",
    ])
}

fn config_scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        "-?[0-9]{1,25}",
        "-?[0-9]{1,4}(ms|s|m|h|d|x|)",
        "[0-9]\\.[0-9]e[+-]?[0-9]{1,4}",
        prop::sample::select(vec![
            "true",
            "no",
            "~",
            "null",
            "tmux",
            "none",
            "command",
            "auto",
            "task",
            "batch",
            "[]",
            "{}",
            "[1, {a: b}]",
            "&a x",
            "*a",
            "*b",
            "!!binary aGk=",
            "!custom x",
            "|",
            ">-",
            "\"\\x1b\\u0000\"",
            "'it''s'",
            "\"",
            "[",
            "{",
            "- -",
            ": :",
            "%YAML 1.2",
            "---",
            "...",
        ])
        .prop_map(str::to_string),
        "\\PC{0,12}",
    ]
}

/// YAML-shaped text from the config's own keys, nested by indentation,
/// sequences, anchors, tags and broken syntax.
fn config_text() -> impl Strategy<Value = String> {
    let line = (
        0usize..4,
        any::<bool>(),
        config_key(),
        config_scalar(),
        any::<bool>(),
    );
    prop::collection::vec(line, 0..24).prop_map(|lines| {
        lines
            .into_iter()
            .map(|(indent, dash, key, value, bare)| {
                let pad = "  ".repeat(indent);
                let dash = if dash { "- " } else { "" };
                if bare {
                    format!("{pad}{dash}{key}:")
                } else {
                    format!("{pad}{dash}{key}: {value}")
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The swarm.yaml parser returns a config or an error, never panics.
    #[test]
    fn config_parse_never_panics(text in config_text()) {
        let _ = swarm_handoff::protocol::config::Config::parse(&text);
    }

    /// The loader, on any bytes in the file, returns a config or an error.
    #[test]
    fn config_load_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("swarm.yaml");
        fs::write(&path, &bytes).unwrap();
        let _ = swarm_handoff::protocol::config::Config::load(&path);
    }
}

/// Deep nesting and a large anchor fan-out (a "billion laughs" document)
/// end in a config or an error, never a crash or an explosion.
#[test]
fn config_parse_survives_deep_nesting_and_alias_bombs() {
    for depth in [1_000, 100_000] {
        let _ = swarm_handoff::protocol::config::Config::parse(&"[".repeat(depth));
        let _ = swarm_handoff::protocol::config::Config::parse(&format!(
            "daemon: {}",
            "{a: ".repeat(depth)
        ));
        let _ = swarm_handoff::protocol::config::Config::parse(&"- ".repeat(depth));
    }
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    bomb.push_str("max_hops: *a11\n");
    let t = Instant::now();
    assert!(swarm_handoff::protocol::config::Config::parse(&bomb).is_err());
    assert!(t.elapsed() < Duration::from_secs(10), "alias bomb expanded");
}

/// A FIFO planted where the daemon reads or appends its own state (the tmux
/// socket pointer, forum.log) must neither hang a pass nor stop delivery.
#[test]
fn fifos_at_the_daemons_own_state_files_never_block_delivery() {
    let (p, rev) = project();
    mkfifo(&p.path(".swarmforge/tmux-socket"));
    mkfifo(&p.path(".swarmforge/forum.log"));
    let a = note("coder", 1, "reviewer", "through the fifos");
    let sent = post(&p.root, &a);
    let r = handoffd_once(&p);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("delivered 1"), "{r:?}");
    assert!(!sent.exists(), "the original left the outbox");
    assert_eq!(p.files(&hq(&rev, "inbox/new")).len(), 1);
}
