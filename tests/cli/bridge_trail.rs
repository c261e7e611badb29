//! Issue 43.15: what a host mirrors of another host's trail is its host's
//! own word. A trail record is taken in only when the origin host's
//! journal, as mirrored here, vouches for it at the offset the record
//! cites (crates/swarm-bridge/src/bridge/vouch.rs); a journal line at an offset the mirror
//! holds otherwise is a rewritten range, refused and recorded
//! (crates/swarm-bridge/src/bridge/events.rs); and a bridge publishes only the lines of its
//! journal a power cut cannot take back. Every refusal fails `swarm audit
//! --check` on the host that refused it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::bridge::{id_of, note, start_all, swarm, Host, Nats, Proc, LONG, TWO};
use crate::relay::publish;
use crate::support::*;

/// Where host `b` mirrors ping's (host a, a person's folder) `sub` folder.
fn mirrored(b: &Host, sub: &str) -> PathBuf {
    b.p.path(&format!(
        ".swarmforge/bridge/hosts/a/people/ping/.swarmforge/handoffs/{sub}"
    ))
}

/// `{offset, len, event}` of each line host `of`'s journal has on `h`.
fn journal_of(h: &Host, of: &str) -> Vec<serde_json::Value> {
    h.p.read(&format!(".swarmforge/bridge/events/{of}.jsonl"))
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The offset of host `of`'s `kind` line about `id`, as mirrored on `h`.
fn line_at(h: &Host, of: &str, kind: &str, id: &str) -> Option<u64> {
    journal_of(h, of)
        .iter()
        .find(|v| v["event"]["kind"] == kind && v["event"]["id"] == id)
        .and_then(|v| v["offset"].as_u64())
}

/// What host `h`'s bridge refused and recorded.
fn refused(h: &Host) -> Vec<serde_json::Value> {
    h.p.read(".swarmforge/bridge/refused.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// An original of ping's that was never sent: its file name and text.
fn forged(seq: u32) -> (String, String) {
    let id = format!("20261201T101010Z_{seq:06}_from_ping");
    let text = format!(
        "id: {id}\nfrom: ping\nto: pong\npriority: 50\ntype: note\nmessage: forged {seq}\ncreated_at: 2026-12-01T10:10:10.000000Z\n\nnever sent {seq}\n"
    );
    (format!("50_{id}_to_pong.handoff"), text)
}

fn audit(h: &Host) -> Run {
    h.p.swarm(&["audit", "--check", "--wait", "60s"])
}

#[test]
fn a_trail_record_its_hosts_journal_never_wrote_is_refused_and_fails_the_audit() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    start_all(&mut hosts);
    let real = hosts[0].send("ping", &note("pong", "real"));
    let sent = mirrored(&hosts[1], "sent");
    wait_until(LONG, "b mirrors ping's real original", || {
        sent.join(file_name(&real)).exists()
    });
    let delivered = line_at(&hosts[1], "a", "delivered", &id_of(&real)).expect("mirrored");
    // Anyone holding the swarm's NATS credentials publishes in host a's
    // name: a record citing no line of a's journal (as before), one citing
    // the real delivery's line, one citing a line a's journal never reaches.
    let record = |name: &str, text: &str, cited: Option<String>| {
        let path = format!("sent/{name}");
        let mut h = vec![("Swarm-Worktree", "people/ping"), ("Swarm-Path", &path)];
        if let Some(c) = &cited {
            h.push(("Swarm-Journal-Offset", c));
        }
        publish(&nats, "swarm.swarm.trail.a", &h, text);
    };
    let forgeries: Vec<(String, String)> = (1..=3).map(forged).collect();
    record(&forgeries[0].0, &forgeries[0].1, None);
    record(
        &forgeries[1].0,
        &forgeries[1].1,
        Some(delivered.to_string()),
    );
    record(&forgeries[2].0, &forgeries[2].1, Some("99999999999".into()));
    // Host a's journal goes on past where the forgeries were published.
    let later = hosts[0].send("ping", &note("pong", "later"));
    wait_until(LONG, "b refuses the forgeries (or takes one in)", || {
        refused(&hosts[1]).len() >= 3 || forgeries.iter().any(|(n, _)| sent.join(n).exists())
    });
    wait_until(LONG, "b mirrors ping's later original", || {
        sent.join(file_name(&later)).exists()
    });
    for (n, _) in &forgeries {
        assert!(!sent.join(n).exists(), "{n} was taken into the mirror");
    }
    // b's views never show them.
    let t = hosts[1].p.swarm(&["transcript", "--ids"]);
    assert_eq!(t.code, 0, "{}", t.stderr);
    assert!(t.stdout.contains(&id_of(&real)), "{}", t.stdout);
    assert!(t.stdout.contains(&id_of(&later)), "{}", t.stdout);
    assert!(!t.stdout.contains("forged"), "{}", t.stdout);
    // b's audit fails, naming the host, the file and the offset cited.
    let r = audit(&hosts[1]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let line = |n: &str| {
        r.stdout
            .lines()
            .find(|l| l.contains(n))
            .unwrap_or_else(|| panic!("no line for {n}: {}", r.stdout))
            .to_string()
    };
    let first = line(&forgeries[0].0);
    assert!(
        first.starts_with("VIOLATION unvouched_trail_record host a: people/ping/sent/"),
        "{first}"
    );
    assert!(
        first.contains("cites no line of host a's journal"),
        "{first}"
    );
    let second = line(&forgeries[1].0);
    assert!(
        second.contains(&format!("at offset {delivered}")),
        "{second}"
    );
    assert!(second.contains("does not vouch for it"), "{second}");
    assert!(
        line(&forgeries[2].0).contains("went past where this record was published"),
        "{}",
        r.stdout
    );
    assert_eq!(r.stdout.matches("VIOLATION").count(), 3, "{}", r.stdout);
    // The bridge log says each once; host a saw nothing wrong.
    let log = hosts[1].log();
    assert_eq!(log.matches("rejected trail record a:").count(), 3, "{log}");
    let r = audit(&hosts[0]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

/// Takes and finishes `role`'s next task on `h`.
/// Hosts a (ping) and b (pong), running, and the id of a note ping sent
/// pong.
fn first_note(nats: &Nats) -> (crate::bridge::Hub, Vec<Host>, String) {
    let (hub, mut hosts) = swarm(nats, &["a", "b"], TWO);
    start_all(&mut hosts);
    let first = hosts[0].send("ping", &note("pong", "first"));
    let id = id_of(&first);
    (hub, hosts, id)
}

/// b refuses the range a's journal rewrote, and a's bridge said it lost
/// published lines.
fn b_refuses_a_rewritten_range(hosts: &[Host]) {
    wait_until(LONG, "b refuses the rewritten range", || {
        refused(&hosts[1])
            .iter()
            .any(|r| r["kind"] == "journal_rewritten")
    });
    // a's bridge says so in its own log, which b's refusal does not wait
    // for (a publishes the range, then logs).
    wait_until(LONG, "a's bridge says it lost published lines", || {
        hosts[0].log().contains("lost published lines")
    });
}

fn work(h: &Host, role: &str) {
    for step in ["ready-next", "done-current"] {
        h.p.cmd(step)
            .role(role)
            .at(h.p.role_dir(role))
            .code(0)
            .run();
    }
}

#[test]
fn a_healthy_swarm_mirrors_every_vouched_file_and_nothing_an_agent_planted() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    start_all(&mut hosts);
    // ping's own queue folder is its agent's to write: it puts a "sent"
    // message there that handoffd never delivered.
    let (planted, text) = forged(9);
    let ping_sent = hosts[0]
        .p
        .role_dir("ping")
        .join(".swarmforge/handoffs/sent");
    fs::create_dir_all(&ping_sent).unwrap();
    fs::write(ping_sent.join(&planted), text).unwrap();
    let there = hosts[0].send("ping", &note("pong", "there"));
    hosts[1].wait_copies("pong", 1, "pong holds ping's note");
    work(&hosts[1], "pong");
    let back = hosts[1].send("pong", &note("ping", "back"));
    hosts[0].wait_copies("ping", 1, "ping holds pong's answer");
    work(&hosts[0], "ping");
    // Every vouched file reaches the other host, finished copies with
    // their stamps; the planted one never does.
    let done = |h: &Host, wt: &str, p: &Path| {
        h.p.path(&format!(
            ".swarmforge/bridge/hosts/{wt}/.swarmforge/handoffs/inbox/completed"
        ))
        .join(file_name(p))
    };
    wait_until(LONG, "each host mirrors the other's finished copy", || {
        done(&hosts[0], "b/pong", &there).exists()
            && done(&hosts[1], "a/people/ping", &back).exists()
    });
    wait_until(LONG, "b mirrors ping's original", || {
        mirrored(&hosts[1], "sent").join(file_name(&there)).exists()
    });
    assert!(!mirrored(&hosts[1], "sent").join(&planted).exists());
    let t = hosts[1].p.swarm(&["transcript"]);
    assert!(!t.stdout.contains("forged 9"), "{}", t.stdout);
    // On a itself the planted file is a fault of a's own trail (no copy
    // anywhere): a's audit is not this test's.
    fs::remove_file(ping_sent.join(&planted)).unwrap();
    for h in &hosts {
        let r = audit(h);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("CHECK OK"), "{}", r.stdout);
        assert!(refused(h).is_empty(), "{:?}", refused(h));
    }
}

/// The end of every line of host a's journal host b holds.
fn mirrored_end(b: &Host) -> u64 {
    journal_of(b, "a")
        .iter()
        .map(|v| v["offset"].as_u64().unwrap() + v["len"].as_u64().unwrap_or(0) + 1)
        .max()
        .unwrap_or(0)
}

/// handoffd's progress mark on `h`: every line before it was fsynced.
fn mark(h: &Host) -> Option<u64> {
    let v: serde_json::Value =
        serde_json::from_str(&h.p.read(".swarmforge/daemon/progress.json")).ok()?;
    v["offset"].as_u64()
}

/// Host `h`'s bridge under strace, every fsync of its journal failing with
/// EIO; killed (the bridge by the pid it wrote, then strace) when dropped.
struct NoSync {
    strace: Proc,
    pid_file: PathBuf,
}

impl NoSync {
    fn start(h: &Host) -> NoSync {
        let events = h.p.path(".swarmforge/daemon/events.jsonl");
        wait_until(DEADLINE, "handoffd made its journal", || events.exists());
        let events = fs::canonicalize(events).unwrap();
        let err = fs::File::create(h.p.root.join("bridge.stderr")).unwrap();
        let child = clean_command(Path::new("strace"), &h.p.root)
            .args(["-f", "-qq", "-o", "/dev/null", "-P"])
            .arg(&events)
            .args(["-e", "trace=fsync,fdatasync"])
            .args(["-e", "inject=fsync,fdatasync:error=EIO"])
            .arg(bin("swarm"))
            .arg("bridge")
            .arg(&h.p.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("strace starts");
        wait_until(DEADLINE, "the bridge started", || {
            h.log().contains(" started ")
        });
        NoSync {
            strace: Proc(Some(child)),
            pid_file: h.p.path(".swarmforge/bridge/bridge.pid"),
        }
    }
}

impl Drop for NoSync {
    fn drop(&mut self) {
        let pid = fs::read_to_string(&self.pid_file).unwrap_or_default();
        if let Ok(pid) = pid.trim().parse::<i32>() {
            // SAFETY: kill(2) of the bridge this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        self.strace.kill9();
    }
}

#[test]
fn a_bridge_publishes_no_journal_line_before_it_is_durable() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    for h in hosts.iter_mut() {
        h.start_daemon();
    }
    hosts[1].start_bridge();
    let _bridge = NoSync::start(&hosts[0]);
    // handoffd's first mark, so what follows lies beyond it.
    wait_until(LONG, "handoffd's progress mark on a", || {
        mark(&hosts[0]).is_some()
    });
    let first = hosts[0].send("ping", &note("pong", "first"));
    hosts[1].wait_copies("pong", 1, "pong holds ping's note");
    let id = id_of(&first);
    wait_until(
        LONG,
        "a's bridge cannot fsync (or b mirrors the line)",
        || {
            hosts[0].log().contains("cannot fsync")
                || line_at(&hosts[1], "a", "delivered", &id).is_some()
        },
    );
    // Read before the mark, which only rises.
    let end = mirrored_end(&hosts[1]);
    let m = mark(&hosts[0]).unwrap();
    assert!(end <= m, "b holds a's journal up to {end}, a's mark is {m}");
    assert_eq!(line_at(&hosts[1], "a", "delivered", &id), None);
    // Work journaled on a moves handoffd's mark on (it fsyncs the journal
    // for it, and the mark trails the work by a few seconds): then the
    // delivery is published, and never past the mark.
    let mut n = 0;
    wait_until(
        LONG,
        "b mirrors a's delivery once the mark covers it",
        || {
            if line_at(&hosts[1], "a", "delivered", &id).is_some() {
                return true;
            }
            n += 1;
            hosts[1].send("pong", &note("ping", &format!("work {n}")));
            hosts[0].wait_copies("ping", n, "ping holds pong's note");
            work(&hosts[0], "ping");
            false
        },
    );
    let end = mirrored_end(&hosts[1]);
    let m = mark(&hosts[0]).unwrap();
    assert!(end <= m, "b holds a's journal up to {end}, a's mark is {m}");
}

#[test]
fn a_journal_range_rewritten_after_it_was_published_is_refused_and_fails_the_audit() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts, id) = first_note(&nats);
    wait_until(LONG, "b mirrors a's delivery", || {
        line_at(&hosts[1], "a", "delivered", &id).is_some()
    });
    let at = line_at(&hosts[1], "a", "delivered", &id).unwrap();
    // a's bridge knows it published that line (its saved offset is past
    // it): killed before it saved that, it could not tell the loss, only
    // b could.
    let published = hosts[0].p.path(".swarmforge/bridge/events.offset");
    wait_until(LONG, "a's bridge saved an offset past the line", || {
        fs::read_to_string(&published)
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok())
            .is_some_and(|o| o > at)
    });
    // A power cut under an older bridge: host a loses the tail of its
    // journal that its bridge had published already.
    hosts[0].kill_bridge();
    hosts[0].kill_daemon();
    let events = hosts[0].p.path(".swarmforge/daemon/events.jsonl");
    let text = fs::read(&events).unwrap();
    fs::write(&events, &text[..at as usize]).unwrap();
    hosts[0].start_bridge();
    hosts[0].start_daemon();
    // The lines written there now reach b at offsets it holds other lines
    // for: refused, recorded, the held line kept.
    b_refuses_a_rewritten_range(&hosts);
    let r = refused(&hosts[1]);
    let rewritten = r.iter().find(|r| r["kind"] == "journal_rewritten").unwrap();
    assert_eq!(rewritten["host"], "a", "{r:?}");
    assert_eq!(rewritten["offset"].as_u64(), Some(at), "{r:?}");
    assert_eq!(line_at(&hosts[1], "a", "delivered", &id), Some(at));
    let r = audit(&hosts[1]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let v = r
        .stdout
        .lines()
        .find(|l| l.starts_with("VIOLATION journal_rewritten host a: "))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(v.contains(&format!("at offset {at}")), "{v}");
    assert!(v.contains("events/a.jsonl"), "{v}");
}

/// The same loss, but handoffd wrote past the old end before the bridge
/// looked again: the journal is no shorter than what was published, only
/// different. The bridge tells it by the bytes before its saved offset
/// and publishes again from before the loss. Failed before: it went on
/// from its offset, in the middle of a new line, and b never heard of
/// the rewrite.
#[test]
fn a_journal_rewritten_past_its_published_end_before_the_bridge_starts_is_refused() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts, id) = first_note(&nats);
    let published = hosts[0].p.path(".swarmforge/bridge/events.offset");
    let events = hosts[0].p.path(".swarmforge/daemon/events.jsonl");
    wait_until(LONG, "a published its whole journal", || {
        line_at(&hosts[1], "a", "delivered", &id).is_some()
            && fs::read_to_string(&published)
                .ok()
                .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok())
                == fs::metadata(&events).ok().map(|m| m.len())
    });
    let at = line_at(&hosts[1], "a", "delivered", &id).unwrap();
    let end = fs::metadata(&events).unwrap().len();
    hosts[0].kill_bridge();
    hosts[0].kill_daemon();
    let text = fs::read(&events).unwrap();
    fs::write(&events, &text[..at as usize]).unwrap();
    // handoffd runs on, past the old end, while no bridge looks.
    while fs::metadata(&events).unwrap().len() <= end {
        let before = fs::read_to_string(&events)
            .unwrap()
            .matches("\"started\"")
            .count();
        hosts[0].kill_daemon();
        hosts[0].start_daemon();
        wait_until(DEADLINE, "handoffd started", || {
            fs::read_to_string(&events)
                .unwrap()
                .matches("\"started\"")
                .count()
                > before
        });
    }
    hosts[0].start_bridge();
    b_refuses_a_rewritten_range(&hosts);
    assert_eq!(line_at(&hosts[1], "a", "delivered", &id), Some(at));
    let r = audit(&hosts[1]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
}

/// A relayed copy whose `delivered` line the receiving daemon lost with a
/// kill (moved to the relay folder's `sent/`, the line not yet written):
/// the next start journals it, so the sending host's `audit --check` sees
/// the delivery instead of waiting for it for ever.
#[test]
fn a_relayed_delivery_whose_line_a_kill_took_is_journaled_at_the_next_start() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    start_all(&mut hosts);
    // b's daemon delivers while b's bridge is stopped, so the line it
    // then loses was never published (a published line taken away is
    // another fault: a rewritten journal, refused).
    hosts[1].kill_daemon();
    let id = id_of(&hosts[0].send("ping", &note("pong", "first")));
    let relay = hosts[1]
        .p
        .path(".swarmforge/bridge/in/pong/.swarmforge/handoffs/outbox");
    wait_until(LONG, "b's bridge relays the note", || {
        fs::read_dir(&relay).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".handoff"))
        })
    });
    hosts[1].signal_bridge(libc::SIGSTOP);
    let events = hosts[1].p.path(".swarmforge/daemon/events.jsonl");
    let delivered_on_b = |id: &str| {
        fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"delivered\"") && l.contains(id))
            .count()
    };
    hosts[1].start_daemon();
    wait_until(LONG, "b delivers the relayed copy", || {
        delivered_on_b(&id) == 1
    });
    hosts[1].kill_daemon();
    hosts[1].p.edit_events(|l| {
        (!(l.contains("\"delivered\"") && l.contains(&id))).then(|| l.to_string())
    });
    hosts[1].start_daemon();
    wait_until(LONG, "b journals the lost line again", || {
        delivered_on_b(&id) == 1
    });
    hosts[1].signal_bridge(libc::SIGCONT);
    let a = hosts[0].p.swarm(&["audit", "--check", "--wait", "60s"]);
    assert_eq!(a.code, 0, "{}{}", a.stdout, a.stderr);
}
