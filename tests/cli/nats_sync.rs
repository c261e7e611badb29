//! `swarm doctor` reads from the NATS server's monitoring endpoint
//! (`bridge_monitor:`) whether JetStream syncs every write before its PubAck
//! (docs/bridge.md, "What a PubAck means"): a current server with
//! `sync_interval: always` passes, Debian's 2.9.10 (which syncs every two
//! minutes and has no such option) is a finding, an unreadable endpoint too.

use std::fs;
use std::net::TcpListener;

use crate::bridge::{swarm, Nats};
use crate::support::*;

const TWO: &str = "roles:\n  - {name: ping, agent: human, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong}\n";

/// The `bridge_sync` check's findings on host a with `bridge_monitor: url`.
fn bridge_sync(nats: &Nats, url: &str) -> Vec<serde_json::Value> {
    let (_hub, hosts) = swarm(nats, &["a", "b"], TWO);
    let p = &hosts[0].p;
    let yaml = fs::read_to_string(p.path("swarm.yaml")).unwrap();
    fs::write(
        p.path("swarm.yaml"),
        format!("{yaml}bridge_monitor: {url}\n"),
    )
    .unwrap();
    let r = p.swarm(&["doctor", "--json"]);
    let v = r.json();
    let check = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "bridge_sync")
        .unwrap_or_else(|| panic!("no bridge_sync check: {v}"))
        .clone();
    check["findings"].as_array().unwrap().clone()
}

#[test]
fn doctor_passes_a_server_that_syncs_every_write() {
    let Some(nats) = Nats::current() else { return };
    let f = bridge_sync(&nats, &format!("http://127.0.0.1:{}", nats.monitor));
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn doctor_finds_a_server_that_does_not_sync_every_write_or_cannot_be_read() {
    let Some(nats) = Nats::start() else { return };
    let f = bridge_sync(&nats, &format!("http://127.0.0.1:{}/", nats.monitor));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["code"], "BRIDGE_SYNC_INTERVAL", "{f:?}");
    let msg = f[0]["message"].as_str().unwrap();
    assert!(msg.contains("nats-server 2."), "{msg}");
    assert!(msg.contains("every two minutes"), "{msg}");
    assert!(
        f[0]["fix"]
            .as_str()
            .unwrap()
            .contains("sync_interval: always"),
        "{f:?}"
    );
    // Nothing listens there: said, not passed.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let f = bridge_sync(&nats, &format!("http://127.0.0.1:{port}"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["code"], "BRIDGE_MONITOR_UNREADABLE", "{f:?}");
}

#[test]
fn a_bad_bridge_monitor_is_refused_naming_the_key() {
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        "hosts: [a]\nbridge: nats://127.0.0.1:4222\nbridge_monitor: http://u:p@h:8222\nroles:\n  - {name: x, agent: human}\n",
    );
    let r = p.swarm(&["init", "--quiet"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(all.contains("bridge_monitor"), "{all}");
}
