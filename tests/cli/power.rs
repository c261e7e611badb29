//! Power loss (docs/power-loss.md). The project runs on [`crate::lazyfs`], a
//! FUSE file system that records every tree change and every sync; a
//! workload of sends, deliveries (group commit) and ready/done runs on it
//! once. Then, for each crash point (every sync, or a seeded sample of
//! them, each with a seeded number of the tree changes that followed it),
//! the disk as a power cut there could leave it is rebuilt at the same path,
//! the daemon recovers on it, and the checker demands: every send that
//! printed `HANDOFF QUEUED` before the cut is at its recipient exactly once,
//! nothing is there twice, `swarm audit --check` is clean, and a new send
//! gets an id no copy has.
//!
//! `SWARM_POWER_SEED`, `SWARM_POWER_SENDS` and `SWARM_POWER_POINTS` (a
//! number, or `all`) choose the run; scripts/power-harness.sh runs long ones.
//! `SWARM_POWER_DUMP` set: a crash point whose audit fails prints the
//! journal and the progress mark it found on the disk.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use crate::lazyfs::{Journal, Mount};
use crate::support::*;

const ROLES: [&str; 3] = ["px", "py", "pz"];
/// A role whose every send waits for `swarm approve` (`approval: required`).
const APPROVER: &str = "pa";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// Three roles, each in its own folder (py takes batches), and one whose
/// sends need approval; no wake-ups; logs rotated every few kilobytes.
fn project() -> Project {
    let role = |r: &str| {
        let role = Role::new(r).at(r).agent("script");
        if r == "py" {
            role.mode("batch")
        } else {
            role
        }
    };
    Project::builder()
        .roles(ROLES.iter().chain([&APPROVER]).map(|r| role(r)))
        .config(&format!(
            "wake: {{method: none}}\nlogs: {{max_bytes: 3000, keep: 3}}\nroles:\n  - {{name: {APPROVER}, approval: required}}\n"
        ))
        .build()
}

fn outbox(p: &Project, role: &str) -> PathBuf {
    p.role_dir(role).join(".swarmforge/handoffs/outbox")
}

fn drained(p: &Project) -> bool {
    ROLES.iter().chain([&APPROVER]).all(|r| {
        fs::read_dir(outbox(p, r)).is_ok_and(|d| {
            d.flatten()
                .all(|e| !e.file_name().to_string_lossy().ends_with(".handoff"))
        })
    })
}

fn kill(c: &mut Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// A daemon killed when dropped, so a failing check never leaves it holding
/// the mount busy.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        kill(&mut self.0);
    }
}

/// The copies `role` completed that `swarm archive` moved.
fn archived_copies(p: &Project, role: &str) -> Vec<PathBuf> {
    walk(&p.role_dir(role).join(".swarmforge/handoffs/archive"))
        .into_iter()
        .filter(|f| {
            let s = f.to_string_lossy();
            s.contains("/completed/") && s.ends_with(".handoff")
        })
        .collect()
}

/// The `pw-…` words in every copy `role` holds (archived ones too),
/// counted once per copy.
fn held(p: &Project, role: &str) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    let mut all = inbox_copies(&p.role_dir(role));
    all.extend(archived_copies(p, role));
    for c in all {
        let text = fs::read_to_string(&c).unwrap_or_default();
        let words: BTreeSet<&str> = text
            .split_whitespace()
            .filter(|w| w.starts_with("pw-"))
            .collect();
        for w in words {
            *seen.entry(w.to_string()).or_insert(0) += 1;
        }
    }
    seen
}

/// The ids in the names of every handoff file under `dir`.
fn ids_under(dir: &Path) -> BTreeSet<String> {
    walk(dir)
        .into_iter()
        .filter_map(|f| {
            let n = f.file_name()?.to_string_lossy().to_string();
            let rest = n.strip_suffix(".handoff")?.split_once('_')?.1;
            Some(rest.split("_to_").next()?.to_string())
        })
        .collect()
}

fn send(p: &Project, from: usize, to: usize, body: &str) -> PathBuf {
    send_as(p, ROLES[from], to, body)
}

fn send_as(p: &Project, from: &str, to: usize, body: &str) -> PathBuf {
    let dir = p.role_dir(from);
    fs::write(
        dir.join("draft.txt"),
        format!(
            "type: note\nto: {}\npriority: 50\nmessage: {body}\n",
            ROLES[to]
        ),
    )
    .unwrap();
    p.cmd("swarm-handoff")
        .role(from)
        .at(&dir)
        .arg("draft.txt")
        .code(0)
        .run()
        .queued()
}

/// A send that printed HANDOFF QUEUED once `at_sync` syncs had completed.
struct Acked {
    body: String,
    to: usize,
    at_sync: usize,
}

/// The project moved onto a [`Mount`] at its own path.
fn mount(p: &Project) -> Option<(tempfile::TempDir, Mount)> {
    let backing = tempfile::tempdir().unwrap();
    for e in fs::read_dir(&p.root).unwrap().flatten() {
        fs::rename(e.path(), backing.path().join(e.file_name())).unwrap();
    }
    let m = require_capability(
        "mount a FUSE file system (root and /dev/fuse, as CI runs)",
        "run the tests as root on a machine with /dev/fuse",
        Mount::new(backing.path(), &p.root),
    )?;
    Some((backing, m))
}

/// A send of the approver's, held, then approved as a person does (the
/// sha256 `swarm status` shows): acknowledged once `APPROVED` is printed.
fn approved_send(p: &Project, m: &Mount, body: &str) -> Acked {
    let queued = send_as(p, APPROVER, 0, body);
    let name = queued.file_name().unwrap().to_string_lossy().to_string();
    let id = name
        .split_once('_')
        .unwrap()
        .1
        .split("_to_")
        .next()
        .unwrap()
        .to_string();
    let mut sha = String::new();
    wait_until(DEADLINE, "the approver's note is held", || {
        let st = p.swarm(&["status", "--json"]).json();
        let found = st["held"].as_array().and_then(|h| {
            h.iter()
                .find(|h| h["id"] == id.as_str())
                .and_then(|h| h["sha256"].as_str().map(str::to_string))
        });
        sha = found.unwrap_or_default();
        !sha.is_empty()
    });
    p.swarm(&["approve", &id, "--sha256", &sha])
        .ok()
        .stdout_has("APPROVED: ");
    Acked {
        body: body.to_string(),
        to: 0,
        at_sync: m.journal.lock().unwrap().syncs(),
    }
}

/// Runs the workload on the mount (sends, delivery, ready/done, batches,
/// an approval, an archive, the logs rotating); the journal and what was
/// acknowledged.
fn workload(p: &Project, m: &mut Mount, sends: usize, seed: u64) -> (Journal, Vec<Acked>) {
    let mut rng = Rng(seed.max(1));
    let daemon = Daemon(p.cmd("handoffd").arg(&p.root).spawn());
    let mut acked = Vec::new();
    for i in 0..sends {
        if i == sends / 3 {
            acked.push(approved_send(p, m, &format!("pw-{seed}-approved")));
        }
        if i == 2 * sends / 3 {
            p.swarm(&["archive", "--before", &tomorrow()]).ok();
        }
        if i == sends / 2 {
            // py takes a batch at least once, whatever the dice and however
            // slowly the daemon delivers on a loaded machine.
            let body = format!("pw-{seed}-batch");
            send(p, 0, 1, &body);
            let at_sync = m.journal.lock().unwrap().syncs();
            acked.push(Acked {
                body,
                to: 1,
                at_sync,
            });
            let dir = p.role_dir("py");
            wait_until(DEADLINE, "a copy reached py", || {
                !handoff_names(&dir.join(".swarmforge/handoffs/inbox/new")).is_empty()
            });
            let got = p.cmd("ready-next").role("py").at(&dir).code(0).run();
            assert!(got.stdout.starts_with("BATCH:"), "{}", got.stdout);
            p.cmd("done-current").role("py").at(&dir).code(0).run();
        }
        let from = rng.below(3) as usize;
        let to = (from + 1 + rng.below(2) as usize) % 3;
        let body = format!("pw-{seed}-{i}");
        send(p, from, to, &body);
        let at_sync = m.journal.lock().unwrap().syncs();
        acked.push(Acked { body, to, at_sync });
        // The flusher's timer: every few steps what was written so far
        // (the journal's head among it) reaches the disk unsynced.
        if i % 3 == 2 {
            m.writeback();
        }
        // Now and then a recipient takes and finishes its next task.
        if rng.below(3) == 0 {
            let r = ROLES[rng.below(3) as usize];
            let dir = p.role_dir(r);
            let got = p.cmd("ready-next").role(r).at(&dir).run();
            if got.code == 0 && got.stdout.starts_with("TASK:") {
                p.cmd("done-current").role(r).at(&dir).code(0).run();
            }
        }
    }
    wait_until(DEADLINE, "the daemon delivered the workload", || drained(p));
    // The workload did what it claims: the logs rotated, py took a batch,
    // archive moved finished items.
    let daemon_dir = p.path(".swarmforge/daemon");
    assert!(
        files(&daemon_dir)
            .iter()
            .any(|f| f.starts_with("events.jsonl.")),
        "the journal never rotated: {:?}",
        files(&daemon_dir)
    );
    assert!(
        walk(&p.role_dir("py").join(".swarmforge/handoffs"))
            .iter()
            .any(|f| f.to_string_lossy().contains("/batch")),
        "py never took a batch"
    );
    assert!(
        p.role_dir("px")
            .join(".swarmforge/handoffs/archive")
            .is_dir()
            || p.role_dir("py")
                .join(".swarmforge/handoffs/archive")
                .is_dir()
            || p.role_dir("pz")
                .join(".swarmforge/handoffs/archive")
                .is_dir(),
        "nothing was archived"
    );
    // Last, the state of issue 43.13: the flusher writes the journal back,
    // one more item is finished, and the daemon runs on until its progress
    // mark covers that item. A cut after the mark must keep its line (the
    // test checks the last sync always).
    m.writeback();
    let body = format!("pw-{seed}-last");
    send(p, 0, 2, &body);
    let at_sync = m.journal.lock().unwrap().syncs();
    acked.push(Acked {
        body,
        to: 2,
        at_sync,
    });
    let pz = p.role_dir("pz");
    wait_until(DEADLINE, "the last copy reached pz", || {
        !handoff_names(&pz.join(".swarmforge/handoffs/inbox/new")).is_empty()
    });
    let got = p.cmd("ready-next").role("pz").at(&pz).code(0).run();
    assert!(got.stdout.starts_with("TASK:"), "{}", got.stdout);
    p.cmd("done-current").role("pz").at(&pz).code(0).run();
    let finished = now_ns();
    wait_until(
        Duration::from_secs(60),
        "the progress mark covers the last completion",
        || mark_since_ns(&p.root) > finished + 3_000_000_000,
    );
    drop(daemon);
    m.unmount();
    let j = std::mem::take(&mut *m.journal.lock().unwrap());
    (j, acked)
}

/// Rebuilds crash point (`k`, `extra`) at the project's path, recovers and
/// checks it; an error names what went wrong.
fn check_point(
    p: &Project,
    j: &Journal,
    acked: &[Acked],
    k: usize,
    extra: usize,
) -> Result<(), String> {
    for e in fs::read_dir(&p.root).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() && !path.is_symlink() {
            fs::remove_dir_all(&path).unwrap();
        } else {
            fs::remove_file(&path).unwrap();
        }
    }
    j.materialize(k, extra, &p.root);
    // A reboot takes at least into the next second: the sequence counter is
    // not fsynced because an id carries its second (crates/swarm-protocol/src/protocol/sequence.rs),
    // and a restart within the second of a lost send is no reboot.
    let cut = chrono::Utc::now().timestamp();
    let reboot = std::time::Instant::now() + Duration::from_secs(2);
    while chrono::Utc::now().timestamp() == cut && std::time::Instant::now() < reboot {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut daemon = p.cmd("handoffd").arg(&p.root).spawn();
    let end = std::time::Instant::now() + DEADLINE;
    while !drained(p) && std::time::Instant::now() < end {
        if let Ok(Some(st)) = daemon.try_wait() {
            return Err(format!("the daemon exited on recovery: {st}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ok = drained(p);
    kill(&mut daemon);
    if !ok {
        return Err("the daemon did not drain the outboxes on recovery".into());
    }
    let held: Vec<_> = ROLES.iter().map(|r| held(p, r)).collect();
    for a in acked.iter().filter(|a| a.at_sync <= k) {
        let n = held[a.to].get(&a.body).copied().unwrap_or(0);
        if n != 1 {
            return Err(format!(
                "{} (acknowledged after sync {}) is at {} {n} times",
                a.body, a.at_sync, ROLES[a.to]
            ));
        }
    }
    for (r, h) in held.iter().enumerate() {
        if let Some((m, n)) = h.iter().find(|(_, n)| **n > 1) {
            return Err(format!("{m} is at {} {n} times", ROLES[r]));
        }
    }
    let audit = p.swarm(&["audit", "--check"]);
    if audit.code != 0 {
        let dir = p.path(".swarmforge/daemon");
        let mut dump = String::new();
        if std::env::var("SWARM_POWER_DUMP").is_ok() {
            for f in files(&dir) {
                if f.starts_with("events.jsonl") || f == "progress.json" {
                    let t = fs::read_to_string(dir.join(&f)).unwrap_or_default();
                    dump.push_str(&format!("== {f} ({} bytes)\n", t.len()));
                    for l in t.lines() {
                        dump.push_str(&format!("  {}\n", l.get(..160).unwrap_or(l)));
                    }
                }
            }
        }
        return Err(format!(
            "audit --check: {}{}{dump}",
            audit.stdout, audit.stderr
        ));
    }
    let before = ids_under(&p.root);
    let id = send(p, 0, 1, "pw-after")
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    if before.iter().any(|b| id.contains(&format!("_{b}_to_"))) {
        return Err(format!("a new send reused an id: {id}"));
    }
    Ok(())
}

#[test]
fn a_power_cut_at_any_sync_loses_nothing_acknowledged_and_duplicates_nothing() {
    let seed: u64 = env_or("SWARM_POWER_SEED", "28").parse().unwrap_or(28);
    let sends: usize = env_or("SWARM_POWER_SENDS", "12").parse().unwrap_or(12);
    let points = env_or("SWARM_POWER_POINTS", "24");
    let p = project();
    let Some((_backing, mut m)) = mount(&p) else {
        return;
    };
    let (j, acked) = workload(&p, &mut m, sends, seed);
    let total = j.syncs();
    assert!(total > sends, "the workload synced only {total} times");
    let mut rng = Rng(seed.max(1) ^ 0x5eed);
    let ks: Vec<usize> = match points.parse::<usize>() {
        // The last sync always: the progress mark that covers the last
        // completion (see `workload`).
        Ok(n) if n < total + 1 => (0..n)
            .map(|_| rng.below(total as u64 + 1) as usize)
            .chain([total])
            .collect(),
        _ => (0..=total).collect(),
    };
    let mut failures = Vec::new();
    for &k in &ks {
        let extra = rng.below(j.slack(k) as u64 + 1) as usize;
        if let Err(e) = check_point(&p, &j, &acked, k, extra) {
            failures.push(format!("sync {k} + {extra} changes: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {} crash points failed:\n{}",
        failures.len(),
        ks.len(),
        failures.join("\n")
    );
    eprintln!(
        "POWER-RUN seed={seed} sends={sends} syncs={total} ops={} points={} failures=0",
        j.ops.len(),
        ks.len()
    );
}

/// The harness can tell: a file written without fsync, or renamed without
/// an fsync of its folder, is not on the disk after the cut.
#[test]
fn the_file_system_loses_what_was_not_synced() {
    let p = Project::empty();
    let Some((_backing, mut m)) = mount(&p) else {
        return;
    };
    let f = p.root.join("unsynced");
    fs::write(&f, "lost").unwrap();
    let g = p.root.join("synced.tmp");
    let file = fs::File::create(&g).unwrap();
    std::io::Write::write_all(&mut &file, b"kept").unwrap();
    file.sync_all().unwrap();
    drop(file);
    fs::rename(&g, p.root.join("synced")).unwrap();
    let synced_file = m.journal.lock().unwrap().syncs();
    fs::File::open(&p.root).unwrap().sync_all().unwrap();
    m.unmount();
    let j = std::mem::take(&mut *m.journal.lock().unwrap());
    let after = tempfile::tempdir().unwrap();
    // Cut before the folder's fsync: the rename may be lost, the data was
    // synced under the old name.
    j.materialize(synced_file, 0, after.path());
    assert_eq!(
        fs::read_to_string(after.path().join("unsynced")).unwrap(),
        ""
    );
    assert_eq!(
        fs::read_to_string(after.path().join("synced.tmp")).unwrap(),
        "kept"
    );
    assert!(!after.path().join("synced").exists());
    // After it: the rename is durable.
    let after = tempfile::tempdir().unwrap();
    j.materialize(j.syncs(), 0, after.path());
    assert_eq!(
        fs::read_to_string(after.path().join("synced")).unwrap(),
        "kept"
    );
    assert_eq!(
        fs::read_to_string(after.path().join("unsynced")).unwrap(),
        ""
    );
}

/// The flusher: data written back without an fsync survives a cut after
/// it, but what was appended after it does not; a file synced once and
/// appended since keeps what was synced (its tail is lost, not the file).
#[test]
fn the_file_system_keeps_what_was_written_back_and_loses_only_the_tail() {
    let p = Project::empty();
    let Some((_backing, mut m)) = mount(&p) else {
        return;
    };
    let dir = fs::File::open(&p.root).unwrap();
    let log = p.root.join("log");
    fs::write(&log, "head\n").unwrap();
    dir.sync_all().unwrap();
    m.writeback();
    let mut f = fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut f, b"tail\n").unwrap();
    let synced = p.root.join("synced");
    let mut g = fs::File::create(&synced).unwrap();
    std::io::Write::write_all(&mut g, b"one\n").unwrap();
    g.sync_all().unwrap();
    dir.sync_all().unwrap();
    std::io::Write::write_all(&mut g, b"two\n").unwrap();
    dir.sync_all().unwrap();
    drop((f, g, dir));
    m.unmount();
    let j = std::mem::take(&mut *m.journal.lock().unwrap());
    let after = tempfile::tempdir().unwrap();
    j.materialize(j.syncs(), 0, after.path());
    assert_eq!(
        fs::read_to_string(after.path().join("log")).unwrap(),
        "head\n"
    );
    assert_eq!(
        fs::read_to_string(after.path().join("synced")).unwrap(),
        "one\n"
    );
    // A cut before the writeback: the log was never on the disk.
    let before = tempfile::tempdir().unwrap();
    j.materialize(1, 0, before.path());
    assert_eq!(fs::read_to_string(before.path().join("log")).unwrap(), "");
}

/// The `completed` lines in `events.jsonl` under `root`.
fn completed_lines(root: &Path) -> usize {
    fs::read_to_string(root.join(".swarmforge/daemon/events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"kind\":\"completed\""))
        .count()
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// The progress mark's `since_ns` under `root` (0: none).
fn mark_since_ns(root: &Path) -> u64 {
    fs::read(root.join(".swarmforge/daemon/progress.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["since_ns"].as_u64())
        .unwrap_or(0)
}

/// Issue 43.13: handoffd's progress mark is fsynced, and it vouches that
/// every copy finished before it is journaled. A cut that keeps the mark
/// must keep those `completed` lines too (the flusher wrote the journal's
/// head back, so the file is not simply empty): no catch-up brings back a
/// line for a copy finished before the mark, and `swarm audit --check`
/// would fail for good.
#[test]
fn a_power_cut_keeps_every_journal_line_the_progress_mark_vouches_for() {
    let p = Project::builder()
        .roles(["ja", "jb"].map(|r| Role::new(r).at(r).agent("script")))
        .config("wake: {method: none}\n")
        .build();
    let Some((_backing, mut m)) = mount(&p) else {
        return;
    };
    let events = p.path(".swarmforge/daemon/events.jsonl");
    let daemon = Daemon(p.cmd("handoffd").arg(&p.root).spawn());
    wait_until(DEADLINE, "handoffd started", || {
        fs::read_to_string(&events).is_ok_and(|t| t.contains("\"kind\":\"started\""))
    });
    // The flusher writes the journal's head (`started`) back.
    m.writeback();
    let jb = p.role_dir("jb");
    for i in 0..3 {
        fs::write(
            p.role_dir("ja").join("draft.txt"),
            format!("type: note\nto: jb\npriority: 50\nmessage: jw-{i}\n"),
        )
        .unwrap();
        p.cmd("swarm-handoff")
            .role("ja")
            .at(p.role_dir("ja"))
            .arg("draft.txt")
            .code(0)
            .run();
        wait_until(DEADLINE, "a copy reached jb", || {
            !handoff_names(&jb.join(".swarmforge/handoffs/inbox/new")).is_empty()
        });
        p.cmd("ready-next").role("jb").at(&jb).code(0).run();
        p.cmd("done-current").role("jb").at(&jb).code(0).run();
    }
    wait_until(DEADLINE, "handoffd journaled the three completions", || {
        completed_lines(&p.root) == 3
    });
    let finished = now_ns();
    // The audit judges copies finished two seconds before the mark.
    wait_until(
        Duration::from_secs(60),
        "the progress mark covers the completions",
        || mark_since_ns(&p.root) > finished + 3_000_000_000,
    );
    drop(daemon);
    m.unmount();
    let j = std::mem::take(&mut *m.journal.lock().unwrap());
    for e in fs::read_dir(&p.root).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() && !path.is_symlink() {
            fs::remove_dir_all(&path).unwrap();
        } else {
            fs::remove_file(&path).unwrap();
        }
    }
    // The cut: after the last sync (the mark's among them).
    j.materialize(j.syncs(), 0, &p.root);
    assert!(
        mark_since_ns(&p.root) > finished,
        "the mark was not on the disk after the cut"
    );
    let recovered = Daemon(p.cmd("handoffd").arg(&p.root).spawn());
    wait_until(
        DEADLINE,
        "handoffd restarted on the disk after the cut",
        || {
            fs::read_to_string(&events)
                .is_ok_and(|t| t.matches("\"kind\":\"started\"").count() >= 2)
        },
    );
    drop(recovered);
    assert_eq!(
        completed_lines(&p.root),
        3,
        "the journal lost lines the mark vouched for:\n{}",
        fs::read_to_string(&events).unwrap_or_default()
    );
    p.swarm(&["audit", "--check"]).ok().stdout_has("CHECK OK");
}
