//! handoffd end to end (issue 3): real daemon processes in temp projects,
//! deadlines instead of sleeps, and assertions on exact file trees, log lines,
//! `events.jsonl` objects and exit codes.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{
    bin, clean_command, drop_in_outbox, file_name, inbox_copies, is_iso_micros, log_count as count,
    log_lines as lines, note, signal, tomorrow, wait_delivered, wait_until, walk, Project, Rng,
    RoleRow, Run, Tmux, CREATED, DEADLINE, PREAMBLE,
};

const WAKE_TEXT: &str = "You have new handoff mail. If idle, run ready_for_next.sh.";

// ---------------------------------------------------------------- fixtures

/// Headers (in order) and body of a handoff file, parsed independently of the
/// crate; `None` when the file is not complete and well-formed.
fn parse(text: &str) -> Option<(Vec<(String, String)>, String)> {
    let (head, body) = text.split_once("\n\n")?;
    let mut h = Vec::new();
    for l in head.lines() {
        let (k, v) = l.split_once(": ")?;
        h.push((k.to_string(), v.to_string()));
    }
    Some((h, body.to_string()))
}

fn header<'a>(h: &'a [(String, String)], k: &str) -> Option<&'a str> {
    h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

/// Lines in a file (0 when missing).
fn line_count(p: &Path) -> usize {
    fs::read_to_string(p)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Whether a process has an inotify descriptor open.
fn uses_inotify(pid: u32) -> bool {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .any(|e| fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().contains("inotify")))
}

// ------------------------------------------------------------------ tests

/// `coder` in the main worktree and `reviewer` in `rev`, both codex, task mode.
fn two_roles() -> Project {
    Project::with_roles(&[
        ("coder", "master", "codex", "task"),
        ("reviewer", "rev", "codex", "task"),
    ])
}

/// Several recipients in separate worktrees each get one complete copy with
/// the headers in D5 order (other headers sorted by name after them); the
/// original moves to `sent/` unchanged and the journal says `delivered`.
#[test]
fn delivers_to_several_recipients_with_headers_in_d5_order() {
    let p = Project::with_roles(&[
        ("coder", "master", "codex", "task"),
        ("reviewer", "reviewer", "claude", "task"),
        ("QA", "qa", "codex", "batch"),
    ]);
    let full = p.commit("work");
    let short = &full[..10];
    let queued = p.send_as("coder", &format!("type: git_handoff\nto: reviewer,QA\npriority: 20\ntask: review-login\ncommit: {short}\n"),
    ).queued();
    let original = fs::read_to_string(&queued).unwrap();
    let name = file_name(&queued);
    let (oh, _) = parse(&original).unwrap();
    let id = header(&oh, "id").unwrap().to_string();
    let created = header(&oh, "created_at").unwrap().to_string();

    // A hand-written file with headers outside D5's list (and the repeatable
    // `artifact`) in scrambled order.
    let extra = note("coder", 900, "reviewer", "see notes");
    let scrambled = extra.text.replace(
        "type: note\n",
        "zeta: last\ntype: note\nartifact: z.txt\nalpha: first\nartifact: a.txt\n",
    );
    drop_in_outbox(&p.wt_path("master"), &extra.name, scrambled.as_bytes());

    let _d = p.spawn_daemon(&[]);
    wait_until(DEADLINE, "both delivered", || {
        count(&p.log(), "delivered") == 2
    });

    for (role, wt) in [("reviewer", "reviewer"), ("QA", "qa")] {
        let copy = fs::read_to_string(p.hq(wt, "inbox/new").join(&name)).unwrap();
        let (h, _) = parse(&copy).unwrap();
        let enq = header(&h, "enqueued_at").unwrap();
        assert!(is_iso_micros(enq), "enqueued_at {enq:?}");
        assert_eq!(
            copy,
            format!(
                "id: {id}\nfrom: coder\nto: reviewer,QA\nrecipient: {role}\npriority: 20\n\
                 type: git_handoff\nrole: coder\ntask: review-login\ncommit: {short}\n\
                 created_at: {created}\nenqueued_at: {enq}\n\n{PREAMBLE}\n\n\
                 merge_and_process coder {short}\n"
            )
        );
        assert!(walk(&p.hq(wt, "inbox/tmp")).is_empty());
    }
    let copy = fs::read_to_string(p.hq("reviewer", "inbox/new").join(&extra.name)).unwrap();
    let enq = header(&parse(&copy).unwrap().0, "enqueued_at")
        .unwrap()
        .to_string();
    assert_eq!(
        copy,
        format!(
            "id: {}\nfrom: coder\nto: reviewer\nrecipient: reviewer\npriority: 50\ntype: note\n\
             message: see notes\ncreated_at: {CREATED}\nenqueued_at: {enq}\nalpha: first\n\
             artifact: z.txt\nartifact: a.txt\nzeta: last\n\n{PREAMBLE}\n\nsee notes\n",
            extra.id
        )
    );
    // Exactly the expected copies, nowhere else.
    assert_eq!(p.files(&p.hq("reviewer", "inbox/new")), {
        let mut v = vec![name.clone(), extra.name.clone()];
        v.sort();
        v
    });
    assert_eq!(p.files(&p.hq("qa", "inbox/new")), vec![name.clone()]);
    assert!(
        inbox_copies(&p.wt_path("master")).is_empty(),
        "the sender got a copy"
    );
    assert!(p.files(&p.hq("master", "outbox")).is_empty());
    assert!(p.files(&p.hq("master", "failed")).is_empty());
    // The original is untouched in sent/.
    assert_eq!(
        fs::read_to_string(p.hq("master", "sent").join(&name)).unwrap(),
        original
    );

    let log = p.log();
    let delivered = lines(&log, "delivered");
    assert_eq!(
        delivered,
        vec![
            format!("delivered {}", queued.display()),
            format!(
                "delivered {}",
                p.hq("master", "outbox").join(&extra.name).display()
            ),
        ]
    );
    assert_eq!(count(&log, "failed"), 0);
    let ev: Vec<_> = p
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "delivered")
        .collect();
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0]["id"], id.as_str());
    assert_eq!(ev[0]["from"], "coder");
    assert_eq!(ev[0]["to"], "reviewer,QA");
    assert_eq!(ev[0]["path"], queued.to_str().unwrap());
    // Every log line carries a D4 time stamp.
    for l in log.lines() {
        assert!(is_iso_micros(l.split(' ').next().unwrap()), "{l}");
    }
}

/// Every refusal reason: the original goes to the sender's `failed/` with
/// `<name>.error` holding the reason, the log says `failed <path> <reason>`,
/// `events.jsonl` has the same facts, no copy is written anywhere, and the
/// daemon goes on delivering the good file after each bad one.
#[test]
fn refusals_go_to_failed_with_the_reason_and_delivery_goes_on() {
    let p = Project::with_roles(&[
        ("coder", "master", "codex", "task"),
        ("reviewer", "reviewer", "claude", "task"),
    ]);
    p.config("limits: {max_file_bytes: 200}\n");
    let _d = p.spawn_daemon(&[]);
    let outbox = p.hq("master", "outbox");

    // (file name, how to make it, expected reason)
    let mut cases: Vec<(String, String)> = Vec::new();
    let mut good: Vec<String> = Vec::new();
    let mut seq = 0;
    fn next(seq: &mut u32) -> u32 {
        *seq += 1;
        *seq
    }
    // One good file after every bad one proves the daemon keeps going.
    fn good_one(p: &Project, seq: &mut u32, good: &mut Vec<String>) {
        let n = note("coder", next(seq), "reviewer", "ok");
        assert!(n.text.len() <= 200, "good file must fit the limit");
        let path = p.post("master", &n);
        good.push(n.name.clone());
        wait_delivered(p, &path);
    }

    // Malformed: no blank line after the headers.
    let n = note("coder", next(&mut seq), "reviewer", "a");
    let text = n.text.split("\n\n").next().unwrap().to_string() + "\n";
    drop_in_outbox(&p.wt_path("master"), &n.name, text.as_bytes());
    cases.push((n.name, "malformed: no blank line after the headers".into()));
    good_one(&p, &mut seq, &mut good);

    // Malformed: duplicate header.
    let n = note("coder", next(&mut seq), "reviewer", "a");
    let text = n
        .text
        .replace("from: coder\n", "from: coder\nfrom: coder\n");
    drop_in_outbox(&p.wt_path("master"), &n.name, text.as_bytes());
    cases.push((n.name, "malformed: line 3: duplicate header 'from'".into()));
    good_one(&p, &mut seq, &mut good);

    // Malformed: control character in a value (terminal injection).
    let n = note("coder", next(&mut seq), "reviewer", "a");
    let text = n.text.replace("message: a\n", "message: a\x1b[2J\n");
    drop_in_outbox(&p.wt_path("master"), &n.name, text.as_bytes());
    cases.push((
        n.name,
        "malformed: line 6: header 'message' contains a control character".into(),
    ));
    good_one(&p, &mut seq, &mut good);

    // A symlink to a file outside the swarm.
    let n = note("coder", next(&mut seq), "reviewer", "a");
    let tmp = p.hq("master", "outbox/tmp").join("link.tmp");
    std::os::unix::fs::symlink("/etc/passwd", &tmp).unwrap();
    fs::rename(&tmp, outbox.join(&n.name)).unwrap();
    cases.push((n.name, "symlink".into()));
    good_one(&p, &mut seq, &mut good);

    // Over the size limit.
    let n = note("coder", next(&mut seq), "reviewer", &"x".repeat(60));
    let size = n.text.len();
    assert!(size > 200);
    p.post("master", &n);
    cases.push((n.name, format!("file too large ({size} bytes; limit 200)")));
    good_one(&p, &mut seq, &mut good);

    // `from` names a role that does not own this outbox (D8).
    let n = note("reviewer", next(&mut seq), "reviewer", "a");
    p.post("master", &n);
    cases.push((n.name, "sender mismatch".into()));
    good_one(&p, &mut seq, &mut good);

    // Unknown recipient.
    let n = note("coder", next(&mut seq), "ghost", "a");
    p.post("master", &n);
    cases.push((n.name, "unknown recipient ghost".into()));
    good_one(&p, &mut seq, &mut good);

    // Forged delivery headers.
    for (h, v) in [("recipient", "reviewer"), ("enqueued_at", "now")] {
        let n = note("coder", next(&mut seq), "reviewer", "a");
        let text = n
            .text
            .replace("type: note\n", &format!("type: note\n{h}: {v}\n"));
        assert!(text.len() <= 200, "must not trip the size limit");
        drop_in_outbox(&p.wt_path("master"), &n.name, text.as_bytes());
        cases.push((n.name, format!("forged {h} header")));
        good_one(&p, &mut seq, &mut good);
    }

    // An invalid file name (the content itself is fine).
    let n = note("coder", next(&mut seq), "reviewer", "a");
    let bad_name = "50 not a queue name.handoff".to_string();
    drop_in_outbox(&p.wt_path("master"), &bad_name, n.text.as_bytes());
    cases.push((bad_name, "invalid file name".into()));
    good_one(&p, &mut seq, &mut good);

    // A FIFO (reading it must not block the daemon).
    let n = note("coder", next(&mut seq), "reviewer", "a");
    let tmp = p.hq("master", "outbox/tmp").join("fifo.tmp");
    let c = std::ffi::CString::new(tmp.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    fs::rename(&tmp, outbox.join(&n.name)).unwrap();
    cases.push((n.name, "not a regular file".into()));
    good_one(&p, &mut seq, &mut good);

    let failed = p.hq("master", "failed");
    wait_until(DEADLINE, "every bad file refused", || {
        cases
            .iter()
            .all(|(n, _)| failed.join(format!("{n}.error")).exists())
    });
    let log = p.log();
    let ev = p.events();
    for (name, reason) in &cases {
        let orig = failed.join(name);
        let meta =
            fs::symlink_metadata(&orig).unwrap_or_else(|e| panic!("{name} not in failed/: {e}"));
        assert_eq!(
            fs::read_to_string(failed.join(format!("{name}.error"))).unwrap(),
            format!("{reason}\n"),
            "{name}"
        );
        let outbox_path = outbox.join(name);
        assert!(!outbox_path.exists() && fs::symlink_metadata(&outbox_path).is_err());
        let want = format!("failed {} {reason}", outbox_path.display());
        assert_eq!(
            lines(&log, "failed").iter().filter(|l| **l == want).count(),
            1,
            "log line {want:?} in\n{log}"
        );
        let e: Vec<_> = ev
            .iter()
            .filter(|e| e["kind"] == "failed" && e["path"] == outbox_path.to_str().unwrap())
            .collect();
        assert_eq!(e.len(), 1, "{name}");
        assert_eq!(e[0]["reason"], reason.as_str());
        if reason == "symlink" {
            assert!(meta.file_type().is_symlink(), "the symlink itself is kept");
        }
        if reason == "not a regular file" {
            assert!(meta.file_type().is_fifo());
        }
    }
    assert_eq!(count(&log, "failed"), cases.len());
    assert_eq!(count(&log, "delivered"), good.len());
    // No copies: the recipient holds exactly the good files, the sender nothing,
    // and the content of /etc/passwd appears in no file of the project.
    let mut want = good.clone();
    want.sort();
    assert_eq!(p.files(&p.hq("reviewer", "inbox/new")), want);
    assert!(inbox_copies(&p.wt_path("master")).is_empty());
    assert!(walk(&p.hq("reviewer", "inbox/tmp")).is_empty());
    let passwd_line = fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    for f in walk(&p.root)
        .iter()
        .filter(|f| !f.starts_with(p.root.join(".git")))
    {
        let m = fs::symlink_metadata(f).unwrap();
        if m.file_type().is_file() {
            let text = String::from_utf8_lossy(&fs::read(f).unwrap()).into_owned();
            assert!(
                !text.contains(&passwd_line),
                "{} holds /etc/passwd",
                f.display()
            );
        }
    }
    assert!(p.files(&outbox).is_empty());
}

/// Sets the flag when dropped, so helper threads stop even if the test panics.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Outbox originals that some, but maybe not all, recipients already hold:
/// the state a kill between publishing copies and moving the original leaves.
fn half_delivered(p: &Project, rows: &[RoleRow]) -> usize {
    let held: BTreeSet<String> = rows
        .iter()
        .flat_map(|r| inbox_copies(&p.wt_path(r.1)))
        .map(|f| file_name(&f))
        .collect();
    rows.iter()
        .flat_map(|r| p.files(&p.hq(r.1, "outbox")))
        .filter(|n| held.contains(n))
        .count()
}

/// kill -9 at random points while hundreds of messages flow from three
/// senders (two writing temp+rename, one through `swarm-handoff`) and two
/// recipients accept and finish work (one in batch mode): after restarts,
/// every id reached every recipient exactly once, every inbox file is
/// complete, and every original is in `sent/` exactly once.
#[test]
fn kill_9_at_random_points_loses_and_duplicates_nothing() {
    let rows = [
        ("a", "master", "codex", "task"),
        ("b", "wb", "codex", "task"),
        ("c", "wc", "codex", "batch"),
    ];
    let p = Arc::new(Project::with_roles(&rows));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash test seed {seed}");
    let mut rng = Rng(seed);
    const HAND: u32 = 100; // per hand-writing sender
    const VIA_CLI: u32 = 40;

    let senders_done = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for (sender, wt, to) in [("b", "wb", "a,c"), ("c", "wc", "a,b")] {
        let p = p.clone();
        writers.push(std::thread::spawn(move || {
            let mut ids = Vec::new();
            for i in 0..HAND {
                let n = note(sender, i + 1, to, &format!("m{i}"));
                p.post(wt, &n);
                ids.push((n.id, n.name, to.to_string()));
                // Spread the traffic over the whole crash period.
                std::thread::sleep(Duration::from_millis(8));
            }
            ids
        }));
    }
    {
        let p = p.clone();
        writers.push(std::thread::spawn(move || {
            let mut ids = Vec::new();
            for i in 0..VIA_CLI {
                let r = p.send_as(
                    "a",
                    &format!("type: note\nto: b,c\npriority: 50\nmessage: cli {i}\n"),
                );
                let path = r.queued();
                let name = file_name(&path);
                let id = name
                    .strip_prefix("50_")
                    .and_then(|s| s.strip_suffix("_to_b_c.handoff"))
                    .unwrap()
                    .to_string();
                ids.push((id, name, "b,c".to_string()));
            }
            ids
        }));
    }
    // Recipients accept and finish work meanwhile, so copies move on to
    // in_process/, completed/ and batch folders while the daemon restarts.
    let mut consumers = Vec::new();
    for role in ["b", "c"] {
        let p = p.clone();
        let stop = senders_done.clone();
        consumers.push(std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) {
                let r = p.cmd("ready-next").role(role).run();
                assert!(r.code == 0, "ready-next {role}: {r:?}");
                if r.stdout.starts_with("NO_TASK") {
                    std::thread::sleep(Duration::from_millis(5));
                } else {
                    let r = p.cmd("done-current").role(role).run();
                    assert!(r.code == 0 || r.code == 1, "done-current {role}: {r:?}");
                }
                rounds += 1;
            }
            rounds
        }));
    }

    let _stop_consumers = SetOnDrop(senders_done.clone());

    let (mut kills, mut mid_delivery) = (0, 0);
    let started = Instant::now();
    while !(writers.iter().all(|w| w.is_finished()) && kills >= 20) {
        let mut d = p.spawn_daemon(&[]);
        std::thread::sleep(Duration::from_millis(5 + rng.below(75)));
        d.child.as_mut().unwrap().kill().unwrap();
        d.child.take().unwrap().wait().unwrap();
        kills += 1;
        mid_delivery += half_delivered(&p, &rows);
        // Recipients go on working while no daemon runs.
        std::thread::sleep(Duration::from_millis(rng.below(40)));
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "senders too slow"
        );
    }
    let mut expected = Vec::new();
    for w in writers {
        expected.extend(w.join().unwrap());
    }
    // A last daemon drains what is left.
    let mut d = p.spawn_daemon(&[]);
    wait_until(DEADLINE, "every outbox drained", || {
        ["master", "wb", "wc"]
            .iter()
            .all(|wt| p.files(&p.hq(wt, "outbox")).is_empty())
    });
    senders_done.store(true, Ordering::Relaxed);
    let rounds: Vec<usize> = consumers.into_iter().map(|c| c.join().unwrap()).collect();
    signal(d.pid(), libc::SIGTERM);
    assert_eq!(d.wait_exit(DEADLINE), Some(0));
    eprintln!(
        "crash test: {} messages, {kills} kills ({mid_delivery} originals left mid-delivery), \
         consumer rounds {rounds:?}, {:?}",
        expected.len(),
        started.elapsed()
    );
    assert_eq!(expected.len(), (2 * HAND + VIA_CLI) as usize);

    // Per recipient: id -> copies found.
    let mut held: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (role, wt) in rows.iter().map(|r| (r.0, r.1)) {
        for f in inbox_copies(&p.wt_path(wt)) {
            let text = fs::read_to_string(&f).unwrap();
            let (h, body) =
                parse(&text).unwrap_or_else(|| panic!("half-written {}: {text:?}", f.display()));
            assert_eq!(header(&h, "recipient"), Some(role), "{}", f.display());
            let enq = header(&h, "enqueued_at").unwrap_or_else(|| panic!("{}", f.display()));
            assert!(is_iso_micros(enq));
            let msg = header(&h, "message").unwrap();
            assert_eq!(body, format!("{PREAMBLE}\n\n{msg}\n"), "{}", f.display());
            assert_eq!(
                Some(file_name(&f).as_str()),
                f.file_name().and_then(|n| n.to_str())
            );
            *held
                .entry((role.to_string(), header(&h, "id").unwrap().to_string()))
                .or_default() += 1;
        }
    }
    let mut want: BTreeSet<(String, String)> = BTreeSet::new();
    for (id, _, to) in &expected {
        for r in to.split(',') {
            want.insert((r.to_string(), id.clone()));
        }
    }
    let dups: Vec<_> = held.iter().filter(|(_, n)| **n != 1).collect();
    assert!(dups.is_empty(), "duplicates: {dups:?}");
    let got: BTreeSet<_> = held.keys().cloned().collect();
    let missing: Vec<_> = want.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want).collect();
    assert!(missing.is_empty(), "missing: {missing:?}");
    assert!(extra.is_empty(), "unexpected: {extra:?}");
    // Every original was moved to sent/ exactly once, under its own name.
    let mut sent: Vec<String> = ["master", "wb", "wc"]
        .iter()
        .flat_map(|wt| p.files(&p.hq(wt, "sent")))
        .collect();
    sent.sort();
    let mut names: Vec<String> = expected.iter().map(|e| e.1.clone()).collect();
    names.sort();
    assert_eq!(sent, names);
    for wt in ["master", "wb", "wc"] {
        assert!(p.files(&p.hq(wt, "failed")).is_empty(), "{wt} failed/");
    }
    // The journal says each copy finished exactly once, also those the
    // recipients finished while no daemon ran or a daemon was killed
    // between their move and its line (the next start catches up:
    // crates/swarm-delivery/src/daemon/progress.rs).
    let mut d = p.spawn_daemon(&[]);
    signal(d.pid(), libc::SIGTERM);
    assert_eq!(d.wait_exit(DEADLINE), Some(0));
    let mut finished: BTreeSet<(String, String)> = BTreeSet::new();
    for (role, wt) in rows.iter().map(|r| (r.0, r.1)) {
        for f in inbox_copies(&p.wt_path(wt)) {
            if f.components().any(|c| c.as_os_str() == "completed") {
                let text = fs::read_to_string(&f).unwrap();
                let (h, _) = parse(&text).unwrap();
                finished.insert((role.to_string(), header(&h, "id").unwrap().to_string()));
            }
        }
    }
    let mut lines: BTreeMap<(String, String), usize> = BTreeMap::new();
    for e in p.events().iter().filter(|e| e["kind"] == "completed") {
        let key = (
            e["recipient"].as_str().unwrap().to_string(),
            e["id"].as_str().unwrap().to_string(),
        );
        *lines.entry(key).or_default() += 1;
    }
    let twice: Vec<_> = lines.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "journaled twice: {twice:?}");
    let journaled: BTreeSet<_> = lines.keys().cloned().collect();
    assert_eq!(
        journaled, finished,
        "the journal's completed lines and the files"
    );
    assert!(!finished.is_empty());
}

/// The state a kill leaves between publishing copies and moving the
/// original: the original is still in the outbox, and recipients already hold
/// their copy in `new/`, `in_process/`, `completed/` or a batch folder. The
/// restarted daemon writes only the missing copy.
#[test]
fn a_restart_writes_only_the_copies_still_missing() {
    let holders = [
        ("r1", "inbox/new"),
        ("r2", "inbox/in_process"),
        ("r3", "inbox/completed"),
        ("r4", "inbox/in_process/batch_20260615T140600Z_000001"),
        ("r5", "inbox/completed/batch_20260615T140600Z_000001"),
    ];
    let mut rows = vec![("a", "master", "codex", "task")];
    for (r, _) in holders.iter().chain([("r6", "")].iter()) {
        rows.push((r, r, "codex", "batch"));
    }
    let p = Project::with_roles(&rows);
    let n = note("a", 1, "r1,r2,r3,r4,r5,r6", "once only");
    for (r, dir) in holders {
        let copy = n
            .text
            .replace("priority: 50\n", &format!("recipient: {r}\npriority: 50\n"));
        let copy = copy.replace("\n\n", &format!("\nenqueued_at: {CREATED}\n\n"));
        let d = p.hq(r, dir);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join(&n.name), copy).unwrap();
    }
    let path = p.post("master", &n);
    let _d = p.spawn_daemon(&[]);
    wait_delivered(&p, &path);
    for (r, dir) in holders {
        assert_eq!(
            inbox_copies(&p.wt_path(r)),
            vec![p.hq(r, dir).join(&n.name)],
            "{r} got a second copy"
        );
    }
    assert_eq!(
        inbox_copies(&p.wt_path("r6")),
        vec![p.hq("r6", "inbox/new").join(&n.name)]
    );
    assert_eq!(p.files(&p.hq("master", "sent")), vec![n.name.clone()]);
}

/// A second daemon for the same project exits 1 naming the running pid;
/// `--once` refuses too; the first keeps running and keeps its pid file.
#[test]
fn a_second_daemon_exits_1_naming_the_running_pid() {
    let p = Project::with_roles(&[("coder", "master", "codex", "task")]);
    let mut d = p.spawn_daemon(&[]);
    for extra in [&[][..], &["--once"][..]] {
        let r: Run = clean_command(&bin("handoffd"), &p.root)
            .args(extra)
            .arg(&p.root)
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, 1, "{r:?}");
        assert_eq!(r.stdout, "");
        assert_eq!(
            r.stderr,
            format!(
                "handoffd: handoffd is already running for {root} (pid {pid}).\n  \
                 hint: `swarm stop {root}` stops it\n",
                root = p.root.display(),
                pid = d.pid()
            )
        );
    }
    assert!(d.child.as_mut().unwrap().try_wait().unwrap().is_none());
    assert_eq!(
        fs::read_to_string(p.path(".swarmforge/daemon/handoffd.pid")).unwrap(),
        format!("{}\n", d.pid())
    );
    assert_eq!(count(&p.log(), "started"), 1);
}

fn assert_stopped_cleanly(p: &Project) {
    let log = p.log();
    assert_eq!(count(&log, "stopped"), 1, "{log}");
    assert!(log.ends_with(" stopped\n"), "{log}");
    assert!(!p.path(".swarmforge/daemon/handoffd.pid").exists());
}

/// SIGTERM: exit 0, `stopped` logged once, pid file removed, promptly.
#[test]
fn sigterm_stops_the_daemon_promptly() {
    let p = Project::with_roles(&[("coder", "master", "codex", "task")]);
    let mut d = p.spawn_daemon(&[]);
    let t = Instant::now();
    signal(d.pid(), libc::SIGTERM);
    assert_eq!(
        d.wait_exit(Duration::from_secs(2)),
        Some(0),
        "no exit within 2 s"
    );
    eprintln!("stop latency (SIGTERM -> exit): {:?}", t.elapsed());
    assert_stopped_cleanly(&p);
}

/// SIGTERM in the middle of a long pass: the file in hand is finished, the
/// rest stays in the outbox untouched (no original is left half-delivered),
/// the exit is prompt, and the next start delivers the rest exactly once.
#[test]
fn sigterm_mid_pass_finishes_the_file_in_hand() {
    let rows = [
        ("coder", "master", "codex", "task"),
        ("reviewer", "rev", "codex", "task"),
        ("QA", "qa", "codex", "task"),
    ];
    let p = Project::with_roles(&rows);
    const N: u32 = 400;
    for i in 1..=N {
        p.post("master", &note("coder", i, "reviewer,QA", "bulk"));
    }
    let mut d = p.spawn_daemon(&[]);
    let end = Instant::now() + DEADLINE;
    while count(&p.log(), "delivered") == 0 {
        assert!(Instant::now() < end, "nothing delivered");
        std::thread::sleep(Duration::from_millis(1));
    }
    let t = Instant::now();
    signal(d.pid(), libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(2)), Some(0));
    let done = count(&p.log(), "delivered");
    eprintln!(
        "stop latency (SIGTERM mid-pass -> exit): {:?}, after {done} of {N} files",
        t.elapsed()
    );
    assert_stopped_cleanly(&p);
    assert_eq!(
        half_delivered(&p, &rows),
        0,
        "an original was left half-delivered"
    );
    let left = p.files(&p.hq("master", "outbox")).len();
    assert_eq!(left + done, N as usize);
    assert!(left > 0, "the pass was not interrupted");

    let _d = p.spawn_daemon(&[]);
    wait_until(DEADLINE, "the rest delivered", || {
        count(&p.log(), "delivered") == N as usize
    });
    for wt in ["rev", "qa"] {
        assert_eq!(inbox_copies(&p.wt_path(wt)).len(), N as usize);
    }
}

/// The stop file: exit 0, `stopped` once, pid file removed, promptly; the stale
/// stop file does not prevent the next start.
#[test]
fn the_stop_file_stops_the_daemon_promptly() {
    let p = Project::with_roles(&[("coder", "master", "codex", "task")]);
    let mut d = p.spawn_daemon(&[]);
    let t = Instant::now();
    fs::write(p.path(".swarmforge/daemon/stop"), "").unwrap();
    assert_eq!(
        d.wait_exit(Duration::from_secs(2)),
        Some(0),
        "no exit within 2 s"
    );
    eprintln!("stop latency (stop file -> exit): {:?}", t.elapsed());
    assert_stopped_cleanly(&p);

    let mut d = p.spawn_daemon(&[]);
    assert!(!p.path(".swarmforge/daemon/stop").exists());
    assert!(d.child.as_mut().unwrap().try_wait().unwrap().is_none());
}

/// `swarm stop` stops the running daemon and says so; a second call reports
/// that nothing runs; the stop file is gone afterwards.
#[test]
fn swarm_stop_stops_the_daemon_and_reports() {
    let p = Project::with_roles(&[("coder", "master", "codex", "task")]);
    let mut d = p.spawn_daemon(&[]);
    let pid = d.pid();
    let root = p.root.to_str().unwrap().to_string();
    let r = p.run(None, "swarm", &["stop", &root]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{r:?}");
    assert_eq!(r.stdout, format!("handoffd stopped (pid {pid})\n"));
    assert_eq!(d.wait_exit(DEADLINE), Some(0));
    assert_stopped_cleanly(&p);
    assert!(!p.path(".swarmforge/daemon/stop").exists());

    let r = p.run(None, "swarm", &["stop", &root]);
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "handoffd was not running\n")
    );
    let r = p.run(None, "swarm", &["stop", "--json", &root]);
    assert_eq!(r.code, 0);
    let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        j,
        serde_json::json!({"pid": null, "daemon_pid": null, "killed": false, "schema_version": 1})
    );
    assert_eq!(count(&p.log(), "stopped"), 1);
}

/// `swarm status --json`: per-role counts from the files and whether the
/// daemon runs.
#[test]
fn swarm_status_json_shows_counts_and_the_daemon() {
    let p = Project::with_roles(&[
        ("coder", "master", "codex", "task"),
        ("reviewer", "rev", "claude", "task"),
        ("QA", "qa", "codex", "batch"),
        // A person never shares an agent's inbox (handoffd refuses that).
        ("boss", "boss", "human", "task"),
    ]);
    let root = p.root.to_str().unwrap().to_string();
    let status = |p: &Project| -> serde_json::Value {
        let r = p.run(None, "swarm", &["status", "--json", &root]);
        assert_eq!(r.code, 0, "{r:?}");
        serde_json::from_str(&r.stdout).unwrap()
    };
    let role = |s: &serde_json::Value, name: &str| -> serde_json::Value {
        s["roles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["role"] == name)
            .unwrap()
            .clone()
    };
    let s = status(&p);
    assert_eq!(s["daemon_running"], false);
    assert!(s["daemon_pid"].is_null());

    let d = p.spawn_daemon(&[]);
    for i in 1..=3 {
        p.post("master", &note("coder", i, "reviewer", "r"));
    }
    for i in 4..=5 {
        p.post("master", &note("coder", i, "QA", "q"));
    }
    p.post("master", &note("coder", 6, "ghost", "x"));
    wait_until(DEADLINE, "all handled", || {
        p.files(&p.hq("master", "outbox")).is_empty() && p.files(&p.hq("master", "sent")).len() == 5
    });
    p.cmd("ready-next").role("reviewer").run().ok();
    p.cmd("done-current").role("reviewer").run().ok();
    p.cmd("ready-next").role("QA").run().ok();
    p.cmd("done-current").role("QA").run().ok();

    let s = status(&p);
    assert_eq!(s["daemon_running"], true);
    assert_eq!(s["daemon_pid"], d.pid());
    assert_eq!(s["root"], root.as_str());
    let rev = role(&s, "reviewer");
    assert_eq!(
        (
            &rev["new"],
            &rev["completed"],
            &rev["failed"],
            &rev["outbox"]
        ),
        (&1.into(), &1.into(), &0.into(), &0.into())
    );
    assert!(rev["in_process"]
        .as_str()
        .unwrap()
        .ends_with("_to_reviewer.handoff"));
    assert_eq!(rev["mode"], "task");
    let qa = role(&s, "QA");
    assert_eq!((&qa["new"], &qa["completed"]), (&0.into(), &2.into()));
    assert!(qa["in_process"].is_null());
    assert_eq!(qa["mode"], "batch");
    let coder = role(&s, "coder");
    assert_eq!(
        (&coder["new"], &coder["failed"], &coder["outbox"]),
        (&0.into(), &1.into(), &0.into())
    );
    assert_eq!(role(&s, "boss")["human"], true);
    assert_eq!(coder["human"], false);

    let r = p.run(None, "swarm", &["stop", &root]);
    r.ok();
    drop(d);
    p.post("rev", &note("reviewer", 7, "coder", "late"));
    let s = status(&p);
    assert_eq!(s["daemon_running"], false);
    assert!(s["daemon_pid"].is_null());
    assert_eq!(role(&s, "reviewer")["outbox"], 1);
}

/// Deleting `.swarmforge/` makes the daemon exit by itself, without
/// recreating anything.
#[test]
fn the_daemon_exits_when_swarmforge_is_deleted() {
    let p = two_roles();
    let mut d = p.spawn_daemon(&[]);
    // A live swarm: the event loop is serving.
    let path = p.post("master", &note("coder", 1, "reviewer", "bye"));
    wait_delivered(&p, &path);
    // And its search index has taken the delivery in (docs/search.md): a
    // refresh writing a segment while `rm -rf` runs makes the removal fail
    // with "Directory not empty", as it would for a person (noted in
    // docs/search.md); this test is about the daemon's exit.
    wait_until(Duration::from_secs(30), "the delivery indexed", || {
        fs::read_to_string(p.path(".swarmforge/search/manifest.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|m| {
                m["segments"]
                    .as_array()
                    .map(|s| s.iter().filter_map(|g| g["docs"].as_u64()).sum::<u64>())
            })
            .is_some_and(|n| n >= 1)
    });
    if let Err(e) = fs::remove_dir_all(p.path(".swarmforge")) {
        let out = Command::new("find")
            .arg(p.path(".swarmforge"))
            .output()
            .unwrap();
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    }
    let code = d.wait_exit(Duration::from_secs(10));
    let left = walk(&p.path(".swarmforge"));
    assert_eq!(
        code,
        Some(0),
        "the daemon did not exit by itself; left: {left:?}"
    );
    assert!(
        !p.path(".swarmforge").exists(),
        "the daemon recreated .swarmforge/"
    );
}

/// roles.tsv is re-read while running: a role added in a new worktree can
/// receive at once, and its own outbox is served too.
#[test]
fn roles_tsv_is_reread_when_it_changes() {
    let mut rows = vec![
        ("coder", "master", "codex", "task"),
        ("reviewer", "rev", "codex", "task"),
    ];
    let p = Project::with_roles(&rows);
    let _d = p.spawn_daemon(&[]);
    rows.push(("QA", "qa", "codex", "task"));
    p.write_role_rows(&rows);
    let n = note("coder", 1, "QA", "welcome");
    p.post("master", &n);
    let copy = p.hq("qa", "inbox/new").join(&n.name);
    wait_until(DEADLINE, "delivered to the new role", || copy.exists());
    assert!(p.files(&p.hq("master", "failed")).is_empty());
    let back = note("QA", 2, "coder", "thanks");
    let path = p.post("qa", &back);
    wait_delivered(&p, &path);
    assert!(p.hq("master", "inbox/new").join(&back.name).exists());
    assert_eq!(p.files(&p.hq("qa", "sent")), vec![back.name]);
}

/// A real tmux server on a private socket: the recipient's session receives
/// SwarmForge's wake text; the sender's does not.
#[test]
fn tmux_wakes_the_recipient_session() {
    let p = two_roles();
    let Some(tmux) = Tmux::of_project(&p.root) else {
        return;
    };
    for session in ["swarmforge-reviewer", "swarmforge-coder"] {
        tmux.session(session, None, "cat");
    }
    fs::write(
        p.path(".swarmforge/tmux-socket"),
        format!("{}\n", tmux.sock.display()),
    )
    .unwrap();
    let _d = p.spawn_daemon(&[]);
    p.post("master", &note("coder", 1, "reviewer", "hello"));
    wait_until(DEADLINE, "the wake text in the reviewer's pane", || {
        tmux.pane("swarmforge-reviewer").contains(WAKE_TEXT)
    });
    assert!(!tmux.pane("swarmforge-coder").contains("handoff mail"));
    assert_eq!(count(&p.log(), "notify_failed"), 0, "{}", p.log());
    wait_until(DEADLINE, "the last wake-up recorded", || {
        p.path(".swarmforge/daemon/wake/reviewer").exists()
    });
}

/// A failing wake-up is logged `notify_failed`; the message is delivered
/// anyway and the original is in `sent/`.
#[test]
fn a_failed_wake_up_is_logged_and_the_message_still_delivered() {
    let p = two_roles();
    p.config("wake: {method: command, command: \"exit 3\"}\n");
    let _d = p.spawn_daemon(&[]);
    let n = note("coder", 1, "reviewer", "hello");
    let path = p.post("master", &n);
    let copy = p.hq("rev", "inbox/new").join(&n.name);
    wait_delivered(&p, &path);
    // The log line is written just before the events.jsonl line: wait for both.
    wait_until(DEADLINE, "notify_failed logged", || {
        count(&p.log(), "notify_failed") == 1
            && p.events().iter().any(|e| e["kind"] == "notify_failed")
    });
    assert!(copy.exists());
    assert!(p.hq("master", "sent").join(&n.name).exists());
    assert!(p.files(&p.hq("master", "failed")).is_empty());
    let log = p.log();
    assert_eq!(
        lines(&log, "notify_failed"),
        vec![format!(
            "notify_failed {} wake command failed: exit status: 3",
            copy.display()
        )]
    );
    assert_eq!(count(&log, "delivered"), 1);
    let ev: Vec<_> = p
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "notify_failed")
        .collect();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["recipient"], "reviewer");
    assert_eq!(ev[0]["path"], copy.to_str().unwrap());
}

/// A wake-up that got lost (the item stays unaccepted) is repeated after
/// `ack_within` and logged `renotified`; once the item is accepted with
/// ready-next, the re-wakes stop.
#[test]
fn an_unaccepted_item_is_renotified_until_accepted() {
    let p = two_roles();
    let wakes = p.record_wakes("ack_within: 1s, sweep: 200ms");
    let _d = p.spawn_daemon(&[]);
    let n = note("coder", 1, "reviewer", "hello");
    p.post("master", &n);
    wait_until(DEADLINE, "the first wake-up", || line_count(&wakes) == 1);
    wait_until(DEADLINE, "a renotified line and a second wake-up", || {
        count(&p.log(), "renotified") >= 1 && line_count(&wakes) >= 2
    });
    let copy = p.hq("rev", "inbox/new").join(&n.name);
    assert_eq!(
        lines(&p.log(), "renotified")[0],
        format!("renotified {}", copy.display())
    );
    let r = p.cmd("ready-next").role("reviewer").run();
    r.ok();
    assert!(r.stdout.starts_with("TASK: "), "{r:?}");
    let (renotified, woken) = (count(&p.log(), "renotified"), line_count(&wakes));
    // The next re-wake would be due within ack_within * 2 (backoff) plus one
    // sweep; watching for 2.5 s proves it does not come.
    let end = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < end {
        assert_eq!(
            count(&p.log(), "renotified"),
            renotified,
            "re-woken after acceptance"
        );
        assert_eq!(line_count(&wakes), woken);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        fs::read_to_string(&wakes).unwrap().lines().next(),
        Some("reviewer")
    );
}

/// A human role (agent column `human`) gets its copy but is never woken,
/// neither on delivery nor by the re-wake sweep.
#[test]
fn a_human_role_is_never_woken() {
    let p = Project::with_roles(&[
        ("coder", "master", "codex", "task"),
        ("boss", "boss", "human", "task"),
        ("reviewer", "rev", "codex", "task"),
    ]);
    let wakes = p.record_wakes("ack_within: 1s, sweep: 200ms");
    let _d = p.spawn_daemon(&[]);
    let n = note("coder", 1, "boss,reviewer", "hello");
    p.post("master", &n);
    // The agent is woken, then re-woken: the sweep has looked at the human too.
    wait_until(DEADLINE, "the agent renotified", || {
        count(&p.log(), "renotified") >= 1 && line_count(&wakes) >= 2
    });
    assert!(p.hq("boss", "inbox/new").join(&n.name).exists());
    let text = fs::read_to_string(&wakes).unwrap();
    assert!(text.lines().all(|l| l == "reviewer"), "{text}");
    assert!(p.events().iter().all(|e| e["recipient"] != "boss"));
}

/// A transient fault (the recipient's `inbox/new` is a regular file, so no
/// copy can be written) leaves the original in the outbox with one `deferred`
/// line however often it is retried; once fixed, delivery resumes.
#[test]
fn a_transient_fault_defers_once_and_delivery_resumes() {
    let p = Project::with_roles(&[
        ("coder", "master", "codex", "task"),
        ("reviewer", "rev", "codex", "task"),
        ("QA", "qa", "codex", "task"),
    ]);
    p.config("daemon: {rescan: 200ms}\n");
    let new = p.hq("rev", "inbox/new");
    fs::create_dir_all(new.parent().unwrap()).unwrap();
    fs::write(&new, "not a folder\n").unwrap();
    let _d = p.spawn_daemon(&[]);
    let stuck = note("coder", 1, "reviewer", "stuck");
    let stuck_path = p.post("master", &stuck);
    wait_until(DEADLINE, "deferred logged", || {
        count(&p.log(), "deferred") == 1
    });
    // More passes: other traffic gets through, the stuck file is retried
    // without another log line.
    for i in 2..=4 {
        let n = note("coder", i, "QA", "flows");
        let path = p.post("master", &n);
        wait_delivered(&p, &path);
    }
    let log = p.log();
    let deferred = lines(&log, "deferred");
    assert_eq!(deferred.len(), 1, "{log}");
    assert!(
        deferred[0].starts_with(&format!("deferred {} ", stuck_path.display())),
        "{deferred:?}"
    );
    assert!(stuck_path.exists(), "the original left the outbox");
    assert_eq!(count(&log, "failed"), 0);
    assert!(p.files(&p.hq("master", "failed")).is_empty());
    assert_eq!(
        p.events()
            .iter()
            .filter(|e| e["kind"] == "deferred")
            .count(),
        1
    );

    fs::remove_file(&new).unwrap();
    wait_delivered(&p, &stuck_path);
    assert!(p.hq("master", "sent").join(&stuck.name).exists());
    assert!(new.join(&stuck.name).exists());
    assert_eq!(count(&p.log(), "deferred"), 1);
}

/// `--poll` delivers with no inotify watch at all.
#[test]
fn poll_mode_delivers_without_file_events() {
    let p = two_roles();
    let d = p.spawn_daemon(&["--poll"]);
    let n = note("coder", 1, "reviewer", "polled");
    let path = p.post("master", &n);
    wait_delivered(&p, &path);
    assert!(p.hq("rev", "inbox/new").join(&n.name).exists());
    // The loop has run, so the watcher was set up, or not.
    assert!(!uses_inotify(d.pid()), "--poll must not watch");
    drop(d);
    // Contrast: the default mode does watch.
    let d = p.spawn_daemon(&[]);
    let n = note("coder", 2, "reviewer", "watched");
    let path = p.post("master", &n);
    wait_delivered(&p, &path);
    assert!(uses_inotify(d.pid()));
}

/// `handoffd --once`: one pass, a summary line, exit 0, no pid file left.
#[test]
fn once_delivers_and_exits_0() {
    let p = two_roles();
    let a = note("coder", 1, "reviewer", "one");
    let b = note("coder", 2, "reviewer", "two");
    p.post("master", &a);
    p.post("master", &b);
    p.post("master", &note("coder", 3, "ghost", "three"));
    let r = p.deliver_once();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "handoffd: delivered 2, failed 1, deferred 0\n");
    let mut want = vec![a.name.clone(), b.name.clone()];
    want.sort();
    assert_eq!(p.files(&p.hq("rev", "inbox/new")), want);
    assert_eq!(p.files(&p.hq("master", "sent")), want);
    assert!(p.files(&p.hq("master", "outbox")).is_empty());
    assert!(!p.path(".swarmforge/daemon/handoffd.pid").exists());
    let log = p.log();
    assert_eq!((count(&log, "delivered"), count(&log, "failed")), (2, 1));
    // A second pass has nothing left to do and duplicates nothing.
    let r = p.deliver_once();
    assert_eq!(r.stdout, "handoffd: delivered 0, failed 0, deferred 0\n");
    assert_eq!(p.files(&p.hq("rev", "inbox/new")), want);
}

/// handoffd killed after it moved an original to `sent/` and before its
/// `delivered` line: the next start journals the line (the copy is where
/// only the daemon writes, with the original's digest), and nothing for an
/// "original" a hostile agent planted in its own `sent/` with no copy
/// anywhere. Failed before: the line was never written, so the views called
/// the file unverified and another host's `audit --check` waited for ever.
#[test]
fn a_delivered_line_lost_with_a_kill_is_journaled_at_the_next_start() {
    let p = two_roles();
    let n = note("coder", 1, "reviewer", "said once");
    let path = p.post("master", &n);
    let d = p.spawn_daemon(&[]);
    wait_delivered(&p, &path);
    // The agent's forgery, beside it: well formed, never delivered.
    let forged = note("coder", 2, "reviewer", "never said");
    fs::write(p.hq("master", "sent").join(&forged.name), &forged.text).unwrap();
    drop(d); // SIGKILL: no `stopped`
             // The kill landed between the move and the line.
    p.edit_events(|l| (!(l.contains("\"delivered\"") && l.contains(&n.id))).then(|| l.to_string()));

    let _d = p.spawn_daemon(&[]);
    let delivered = |id: &str| -> Vec<serde_json::Value> {
        p.events()
            .into_iter()
            .filter(|e| e["kind"] == "delivered" && e["id"] == id)
            .collect()
    };
    let lines = delivered(&n.id);
    assert_eq!(lines.len(), 1, "{:?}", p.events());
    assert!(lines[0]["reason"]
        .as_str()
        .is_some_and(|r| r.contains("killed between the move and its line")));
    assert!(lines[0]["sha256"].is_string());
    assert!(
        delivered(&forged.id).is_empty(),
        "the forgery was vouched for"
    );
    let audit = p.swarm(&["audit", "--check"]);
    assert!(!audit.stdout.contains(&n.name), "{}", audit.stdout);
    assert!(audit.stdout.contains(&forged.name), "{}", audit.stdout);
}

/// The same kill, then the recipient finished the copy and `swarm archive`
/// filed the original and the copy away before the restart: the line is
/// journaled all the same, found in the archive.
#[test]
fn a_delivered_line_lost_with_a_kill_is_journaled_after_an_archive_moved_its_files() {
    let p = two_roles();
    let n = note("coder", 1, "reviewer", "said once");
    let path = p.post("master", &n);
    let d = p.spawn_daemon(&[]);
    wait_delivered(&p, &path);
    drop(d); // SIGKILL: no `stopped`
    p.edit_events(|l| (!(l.contains("\"delivered\"") && l.contains(&n.id))).then(|| l.to_string()));
    p.cmd("ready-next").role("reviewer").run().ok();
    p.cmd("done-current").role("reviewer").run().ok();
    p.swarm(&["archive", "--before", &tomorrow()]).ok();
    assert!(!p.hq("master", "sent").join(&n.name).exists());

    let _d = p.spawn_daemon(&[]);
    let lines: Vec<serde_json::Value> = p
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "delivered" && e["id"] == n.id.as_str())
        .collect();
    assert_eq!(lines.len(), 1, "{:?}", p.events());
    let audit = p.swarm(&["audit", "--check"]);
    assert!(!audit.stdout.contains(&n.name), "{}", audit.stdout);
}
