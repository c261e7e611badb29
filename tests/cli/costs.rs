//! What one call costs, counted in system calls under strace (counts, never
//! times): a send's fsyncs, and what a reply to the item in process lists.

use std::fs;

use crate::support::{require_tool, Project, Role};

/// Each `name(...)` call strace logged (one per line with `-f -e trace=`).
fn calls<'a>(log: &'a str, name: &str) -> Vec<&'a str> {
    let needle = format!("{name}(");
    log.lines().filter(|l| l.contains(&needle)).collect()
}

fn traced(p: &Project, role: &str, trace: &str, draft: &str) -> String {
    let log = p.root.join("strace.log");
    let path = p.draft(role, draft);
    let log_arg = log.display().to_string();
    p.cmd("swarm-handoff")
        .role(role)
        .arg(path)
        .under(&["strace", "-f", "-qq", "-o", &log_arg, "-e", trace])
        .run()
        .ok();
    fs::read_to_string(&log).unwrap()
}

#[test]
fn a_send_costs_two_fsyncs() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = Project::builder().role("coder").role("qa").build();
    // The first send makes the outbox folders; count a later one.
    p.send_as(
        "coder",
        "type: note\nto: qa\npriority: 10\nmessage: first\n",
    )
    .ok();
    let log = traced(
        &p,
        "coder",
        "trace=fsync,fdatasync",
        "type: note\nto: qa\npriority: 10\nmessage: m\n",
    );
    // The message file and the outbox folder; the sequence counter needs none
    // (see protocol/sequence.rs for why a rolled-back one reissues no id).
    let syncs = calls(&log, "fsync").len() + calls(&log, "fdatasync").len();
    assert_eq!(syncs, 2, "{log}");
}

#[test]
fn a_reply_to_the_item_in_process_lists_no_history() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .build();
    p.send_as("coder", "type: note\nto: qa\npriority: 10\nmessage: m\n")
        .ok();
    p.deliver_once().ok();
    let taken = p.cmd("ready-next").role("qa").args(["--json"]).run().json();
    let id = taken["id"].as_str().expect("an id").to_string();
    let draft = format!("type: note\nto: coder\npriority: 10\nmessage: ok\nin_reply_to: {id}\n");
    let log = traced(&p, "qa", "trace=openat", &draft);
    let opened_completed = calls(&log, "openat")
        .into_iter()
        .filter(|l| l.contains("/inbox/completed"))
        .count();
    assert_eq!(opened_completed, 0, "completed/ grows with history:\n{log}");
}
