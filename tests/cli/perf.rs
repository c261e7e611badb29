//! Costs that must not grow with a backlog or with the number of roles
//! (issue 19), proven by counting system calls under strace and by
//! invariants: never by timing.

use std::fs;
use std::time::Duration;

use crate::support::{handoff_names, log_count, note, require_tool, wait_until, Project, Role};

/// Every line strace logged for a call to `name`.
fn calls<'a>(log: &'a str, name: &str) -> Vec<(usize, &'a str)> {
    let needle = format!("{name}(");
    log.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(&needle))
        .collect()
}

/// The fsync lines (with `-y`, each names its file) whose target ends so.
fn fsyncs_of<'a>(log: &'a str, suffix: &str) -> Vec<(usize, &'a str)> {
    let tail = format!("{suffix}>)");
    calls(log, "fsync")
        .into_iter()
        .filter(|(_, l)| l.contains(&tail))
        .collect()
}

/// `handoffd --once` under `strace -f -y`, returning the log.
fn traced_once(p: &Project, trace: &str) -> String {
    let log = p.root.join("strace.log");
    let log_arg = log.display().to_string();
    p.cmd("handoffd")
        .arg("--once")
        .arg(&p.root)
        .under(&["strace", "-f", "-qq", "-y", "-o", &log_arg, "-e", trace])
        .run()
        .ok();
    fs::read_to_string(&log).unwrap()
}

fn two_recipients() -> Project {
    Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .role(Role::new("rev").worktree("rev"))
        .config("wake: {method: none}\n")
        .queue_dirs()
        .build()
}

#[test]
fn a_backlog_shares_each_folders_fsync_and_copies_are_durable_before_originals_move() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = two_recipients();
    let n = 20;
    for i in 1..=n {
        p.post("master", &note("coder", i, "qa,rev", &format!("m{i}")));
    }
    let log = traced_once(&p, "trace=fsync,fdatasync,renameat2,rename,renameat");
    assert_eq!(handoff_names(&p.hq("master", "outbox")).len(), 0, "{log}");
    assert_eq!(handoff_names(&p.hq("master", "sent")).len(), n as usize);
    for r in ["qa", "rev"] {
        assert_eq!(handoff_names(&p.hq(r, "inbox/new")).len(), n as usize);
    }
    // One fsync per copy (its file), then one per folder for the group:
    // each inbox/new once, sent/ once, the outbox once (4 per message
    // before group commit: 80 folder fsyncs for these 20).
    let new_syncs: Vec<_> = fsyncs_of(&log, "/inbox/new");
    assert_eq!(new_syncs.len(), 2, "{log}");
    assert_eq!(fsyncs_of(&log, "/handoffs/sent").len(), 1, "{log}");
    assert_eq!(fsyncs_of(&log, "/handoffs/outbox").len(), 1, "{log}");
    // (The daemon's own start-up, its pid file, is not delivery.)
    assert_eq!(
        fsyncs_of(&log, ".handoff").len(),
        0,
        "copies synced as temps"
    );
    let delivery = |l: &&(usize, &str)| l.1.contains("/handoffs/");
    assert_eq!(
        calls(&log, "fsync").iter().filter(delivery).count(),
        2 * n as usize + 4,
        "{log}"
    );
    // Order: every copy is renamed into new/ before its folder's fsync, and
    // every original moves to sent/ only after both folders were fsynced.
    let renames: Vec<(usize, &str)> = ["rename", "renameat", "renameat2"]
        .iter()
        .flat_map(|c| calls(&log, c))
        .collect();
    let last_copy = renames
        .iter()
        .filter(|(_, l)| l.contains("/inbox/new/"))
        .map(|(i, _)| *i)
        .max()
        .expect("copies renamed");
    let first_move = renames
        .iter()
        .filter(|(_, l)| l.contains("/handoffs/sent/"))
        .map(|(i, _)| *i)
        .min()
        .expect("originals moved");
    for (i, _) in &new_syncs {
        assert!(last_copy < *i && *i < first_move, "{log}");
    }
    let (sent_sync, _) = fsyncs_of(&log, "/handoffs/sent")[0];
    let last_move = renames
        .iter()
        .filter(|(_, l)| l.contains("/handoffs/sent/"))
        .map(|(i, _)| *i)
        .max()
        .unwrap();
    assert!(
        last_move < sent_sync,
        "sent/ synced after the moves:\n{log}"
    );
}

#[test]
fn one_file_waiting_costs_what_it_did() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = two_recipients();
    p.post("master", &note("coder", 1, "qa", "m"));
    let log = traced_once(&p, "trace=fsync,fdatasync");
    assert_eq!(handoff_names(&p.hq("qa", "inbox/new")).len(), 1);
    // The copy, inbox/new, sent/, the outbox (the pid file is start-up).
    let delivery = calls(&log, "fsync")
        .into_iter()
        .filter(|(_, l)| l.contains("/handoffs/"))
        .count();
    assert_eq!(delivery, 4, "{log}");
}

#[test]
fn a_backlog_larger_than_a_chunk_is_delivered_whole_and_in_order() {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .config("wake: {method: none}\ndaemon: {fsync: false}\n")
        .queue_dirs()
        .build();
    // More than one chunk (1024) and more than one group (64).
    let n = 2600;
    for i in 1..=n {
        p.post("master", &note("coder", i, "qa", &format!("m{i}")));
    }
    p.deliver_once().ok();
    assert_eq!(handoff_names(&p.hq("master", "outbox")).len(), 0);
    assert_eq!(handoff_names(&p.hq("master", "sent")).len(), n as usize);
    let got = handoff_names(&p.hq("qa", "inbox/new"));
    assert_eq!(got.len(), n as usize, "each copy once");
    // Delivered in priority (name) order, chunk after chunk.
    let seqs: Vec<String> = p
        .log()
        .lines()
        .filter(|l| l.contains("delivered"))
        .filter_map(|l| {
            l.split("_from_coder")
                .next()?
                .rsplit('_')
                .next()
                .map(String::from)
        })
        .collect();
    assert_eq!(seqs.len(), n as usize);
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "delivered in name order"
    );
}

#[test]
fn an_event_pass_lists_only_the_outbox_it_names_and_resolves_no_path() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let roles: Vec<Role> = (0..8)
        .map(|i| Role::new(&format!("r{i}")).worktree(&format!("r{i}")))
        .collect();
    let p = Project::builder()
        .role("coder")
        .roles(roles)
        // No timer rescan inside the window: only the event's pass runs.
        .config("wake: {method: none}\ndaemon: {rescan: 60s}\n")
        .queue_dirs()
        .build();
    // Every role's outbox exists and had traffic (none quiet or settled).
    for i in 0..8 {
        fs::create_dir_all(p.hq(&format!("r{i}"), "outbox/tmp")).unwrap();
    }
    let log = p.root.join("strace.log");
    let log_arg = log.display().to_string();
    let mut child = p
        .cmd("handoffd")
        .arg(&p.root)
        .under(&[
            "strace",
            "-f",
            "-qq",
            "-o",
            &log_arg,
            "-e",
            "trace=openat,readlink,readlinkat",
        ])
        .spawn();
    wait_until(Duration::from_secs(30), "daemon started", || {
        log_count(&p.log(), "started") == 1
    });
    // The pass runs on the daemon's main thread, the first process strace
    // followed; other threads (the search indexer's refresh, the order
    // index) list folders off the delivery path, by design. The daemon's
    // start lists every outbox and then the features' request folders, the
    // last role's last: once the main thread opened that one, the start-up
    // pass is over, and the log is cut there (under load it ends well after
    // `started`).
    let main_lines = || -> Vec<String> {
        let text = fs::read_to_string(&log).unwrap_or_default();
        let Some(tid) = text.split_whitespace().next().map(|t| format!("{t} ")) else {
            return Vec::new();
        };
        text.lines()
            .filter(|l| l.starts_with(&tid))
            .map(str::to_string)
            .collect()
    };
    wait_until(Duration::from_secs(30), "the start-up pass ended", || {
        let lines = main_lines();
        let listed = |i: usize| {
            let outbox = format!("/r{i}/.swarmforge/handoffs/outbox\"");
            lines
                .iter()
                .position(|l| l.contains(&outbox) && l.contains("O_DIRECTORY"))
        };
        let Some(last) = (0..8).map(listed).collect::<Option<Vec<_>>>() else {
            return false;
        };
        let last = last.into_iter().max().unwrap_or(0);
        lines[last..]
            .iter()
            .any(|l| l.contains("/agents/r7/requests\""))
    });
    let before = main_lines();
    p.post("r3", &note("r3", 1, "coder", "m"));
    wait_until(Duration::from_secs(30), "delivered", || {
        log_count(&p.log(), "delivered") == 1
    });
    let _ = child.kill();
    let _ = child.wait();
    let lines = main_lines();
    let after: Vec<&str> = lines[before.len()..].iter().map(String::as_str).collect();
    let listed: Vec<&&str> = after
        .iter()
        .filter(|l| {
            l.contains("openat(") && l.contains("/handoffs/outbox\"") && l.contains("O_DIRECTORY")
        })
        .collect();
    // r3's, at the event of the file and at the event of its move to sent/;
    // never the seven other outboxes.
    assert!(!listed.is_empty(), "{}", after.join("\n"));
    for l in &listed {
        assert!(
            l.contains("/r3/"),
            "only the outbox the event named:\n{}",
            after.join("\n")
        );
    }
    let readlinks = after.iter().filter(|l| l.contains("readlink")).count();
    assert_eq!(readlinks, 0, "no path canonicalized:\n{}", after.join("\n"));
}
