//! `swarm audit --check` across hosts tells lag from loss
//! (docs/transcript-and-audit.md, "Lag is not loss"): a copy another host
//! holds but this host has not mirrored yet is `PENDING`, never a violation;
//! `--wait` waits for the mirrors; a copy lost on its host is still a
//! violation once the mirror has caught up past it.

use std::fs;
use std::path::PathBuf;

use crate::bridge::{note, start_all, swarm, Host, Nats, LONG};
use crate::support::*;

const THREE: &str = "roles:\n  - {name: ping, agent: human, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong}\n  - {name: pang, agent: human, host: b, worktree: pang}\n";

fn audit(h: &Host, extra: &[&str]) -> Run {
    let mut args = vec!["audit", "--check"];
    args.extend_from_slice(extra);
    h.p.swarm(&args)
}

fn proxy_sent(h: &Host, role: &str) -> PathBuf {
    h.p.path(&format!(
        ".swarmforge/bridge/out/{role}/.swarmforge/handoffs/sent"
    ))
}

#[test]
fn a_copy_not_mirrored_yet_is_pending_and_wait_sees_the_mirror_catch_up() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], THREE);
    start_all(&mut hosts);
    // A burst both ways: whenever the audit runs, it never cries wolf.
    for i in 0..8 {
        hosts[0].send("ping", &note("pong", &format!("a{i}")));
        hosts[1].send("pong", &note("ping", &format!("b{i}")));
    }
    for h in &hosts {
        let r = audit(h, &[]);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(!r.stdout.contains("VIOLATION"), "{}", r.stdout);
    }
    hosts[1].wait_copies("pong", 8, "pong holds the burst");
    hosts[0].wait_copies("ping", 8, "ping holds the burst");
    let r = audit(&hosts[0], &["--wait", "60s"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("CHECK OK"), "{}", r.stdout);
    assert!(!r.stdout.contains("PENDING"), "{}", r.stdout);

    // Host a's bridge stops mirroring (SIGSTOP) once its copy for pong is
    // published; host b delivers it. a's mirror lags b for sure now.
    let queued = hosts[0].send("ping", &note("pong", "while a's mirror sleeps"));
    let name = file_name(&queued);
    wait_until(LONG, "a published the copy for pong", || {
        handoff_names(&proxy_sent(&hosts[0], "pong")).contains(&name)
    });
    hosts[0].signal_bridge(libc::SIGSTOP);
    hosts[1].wait_copies("pong", 9, "pong holds the new note");
    let r = audit(&hosts[0], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("VIOLATION"), "{}", r.stdout);
    assert!(r.stdout.contains("PENDING missing_copy"), "{}", r.stdout);
    assert!(r.stdout.contains("host b"), "{}", r.stdout);
    assert!(r.stdout.contains("1 pending"), "{}", r.stdout);
    let j = audit(&hosts[0], &["--json"]).json();
    assert_eq!(j["ok"], true, "{j}");
    assert_eq!(j["violations"].as_array().unwrap().len(), 0, "{j}");
    assert_eq!(j["pending"][0]["kind"], "missing_copy", "{j}");
    // Still behind when the wait is over: said, exit 1, not a violation.
    let r = audit(&hosts[0], &["--wait", "300ms"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("CHECK PENDING: 1 copies"), "{}", r.stdout);
    let r = audit(&hosts[0], &["--wait", "soon"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("--wait"), "{}", r.stderr);

    hosts[0].signal_bridge(libc::SIGCONT);
    let r = audit(&hosts[0], &["--wait", "60s"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("CHECK OK"), "{}", r.stdout);
    assert!(!r.stdout.contains("PENDING"), "{}", r.stdout);

    // A restarted bridge publishes its whole trail again: no false alarm
    // on the other host meanwhile, and the check settles clean.
    hosts[1].kill_bridge();
    hosts[0].send("ping", &note("pong", "across a restart"));
    let r = audit(&hosts[0], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    hosts[1].start_bridge();
    hosts[1].wait_copies("pong", 10, "pong holds the note sent across the restart");
    for h in &hosts {
        let r = audit(h, &["--wait", "60s"]);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(!r.stdout.contains("PENDING"), "{}", r.stdout);
    }
}

#[test]
fn a_copy_lost_on_its_host_is_a_violation_once_the_mirror_caught_up() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], THREE);
    start_all(&mut hosts);
    // Host b delivers pong's note to pang with its bridge down, then loses
    // the copy (as a power cut would an unsynced file).
    hosts[1].kill_bridge();
    let queued = hosts[1].send("pong", &note("pang", "lost on b"));
    hosts[1].wait_copies("pang", 1, "pang holds pong's note");
    fs::remove_file(&hosts[1].copies("pang")[0]).unwrap();
    let r = audit(&hosts[1], &[]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stdout.contains("VIOLATION missing_copy"), "{}", r.stdout);
    // Host a learns of it only through the mirror: pending while the mirror
    // is behind, a violation once it has caught up past the delivery.
    hosts[1].start_bridge();
    let mirrored = hosts[0]
        .p
        .path(".swarmforge/bridge/hosts/b/pong/.swarmforge/handoffs/sent")
        .join(file_name(&queued));
    wait_until(LONG, "a mirrored pong's original", || mirrored.exists());
    let r = audit(&hosts[0], &["--wait", "60s"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("VIOLATION missing_copy"), "{}", r.stdout);
    assert!(r.stdout.contains("-> pang"), "{}", r.stdout);
    assert!(r.stdout.contains("host b delivered it"), "{}", r.stdout);
    assert!(!r.stdout.contains("PENDING"), "{}", r.stdout);

    // A copy relayed to this host and delivered, then lost here: the relay
    // folder's sent/ says it was delivered, so it is no lag either.
    let queued = hosts[1].send("pong", &note("ping", "lost on a"));
    let mirrored = mirrored.with_file_name(file_name(&queued));
    hosts[0].wait_copies("ping", 1, "ping holds pong's note");
    wait_until(LONG, "a mirrored pong's second original", || {
        mirrored.exists()
    });
    fs::remove_file(&hosts[0].copies("ping")[0]).unwrap();
    let r = audit(&hosts[0], &["--wait", "60s"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("-> ping"), "{}", r.stdout);
    assert!(
        r.stdout.contains("delivered here from host b"),
        "{}",
        r.stdout
    );
}
