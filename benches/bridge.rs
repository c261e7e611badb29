//! The price of a hop across hosts (issue 16), measured side by side in one
//! run on loopback: a bare JetStream publish + PubAck (async-nats, the
//! floor of any bridge over JetStream), a local hop and a cross-host hop
//! through the real binaries. A hop runs from the start of `swarm-handoff`
//! to the copy being visible in the recipient's `inbox/new` (so both hops
//! include the sender's start-up and handoffd's delivery; the cross-host hop
//! adds the sending bridge, JetStream and the receiving bridge). Local and
//! cross-host messages alternate, so both see the same machine load.
//!
//!   cargo bench --bench bridge -- [--messages N]
//!
//! Needs nats-server on PATH (`apt-get install -y nats-server`).

mod common;

use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{bin, flag, flags};

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=b", "-c", "user.email=b@invalid"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn wait(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < end, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn start(program: &Path, args: &[&str], root: &Path) -> Kill {
    Kill(
        Command::new(program)
            .args(args)
            .arg(root)
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts"),
    )
}

/// Sends one note as `role` and waits until `dest_inbox` holds its copy.
fn hop(root: &Path, role: &str, to: &str, dest_inbox: &Path, i: usize) -> Duration {
    let draft = root.join("draft.txt");
    fs::write(
        &draft,
        format!("type: note\nto: {to}\npriority: 50\nmessage: m{i}\n"),
    )
    .unwrap();
    let t = Instant::now();
    let out = Command::new(bin("swarm-handoff"))
        .arg(&draft)
        .current_dir(root)
        .env("SWARMFORGE_ROLE", role)
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout);
    let queued = line
        .trim()
        .strip_prefix("HANDOFF QUEUED: ")
        .unwrap_or_else(|| panic!("not queued: {line}"));
    let name = Path::new(queued).file_name().unwrap().to_owned();
    let dest = dest_inbox.join(name);
    loop {
        if dest.exists() {
            return t.elapsed();
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn main() {
    let f = flags();
    let n: usize = flag(&f, "messages", 300);
    if Command::new("nats-server")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("nats-server is not installed (apt-get install -y nats-server); skipping");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = base.join("nats.log");
    let _nats = Kill(
        Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(base.join("js"))
            .arg("-l")
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts"),
    );
    wait("nats-server", || {
        fs::read_to_string(&log).is_ok_and(|t| t.contains("Server is ready"))
    });
    let url = format!("nats://127.0.0.1:{port}");

    // The floor: one publish with a de-duplication id, awaited, at a time.
    let body = vec![b'x'; 420];
    let mut bare = Vec::with_capacity(n);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = async_nats::connect(url.as_str()).await.expect("connects");
        let js = async_nats::jetstream::new(client);
        js.get_or_create_stream(async_nats::jetstream::stream::Config {
            name: "BENCH".into(),
            subjects: vec!["bench.>".into()],
            ..Default::default()
        })
        .await
        .expect("stream");
        for i in 0..n {
            let t = Instant::now();
            let msg = async_nats::jetstream::message::PublishMessage::build()
                .payload(bytes::Bytes::from(body.clone()))
                .message_id(format!("bench:{i}"));
            js.send_publish("bench.x", msg)
                .await
                .unwrap()
                .await
                .unwrap();
            bare.push(t.elapsed());
        }
    });

    // Two hosts, each a checkout with its daemon and bridge.
    let hub = base.join("hub.git");
    git(&base, &["init", "-q", "--bare", "-b", "master", "hub.git"]);
    let a = base.join("a");
    fs::create_dir(&a).unwrap();
    git(&a, &["init", "-q", "-b", "master"]);
    fs::write(
        a.join("swarm.yaml"),
        format!(
            "hosts: [a, b]\nbridge: {url}\nwake: {{method: none}}\nroles:\n  - {{name: ping, agent: human, host: a}}\n  - {{name: near, agent: human, host: a, worktree: near}}\n  - {{name: pong, agent: human, host: b, worktree: pong}}\n"
        ),
    )
    .unwrap();
    git(&a, &["add", "swarm.yaml"]);
    git(&a, &["commit", "-q", "-m", "swarm"]);
    git(&a, &["remote", "add", "hub", &hub.to_string_lossy()]);
    git(&a, &["push", "-q", "hub", "master"]);
    let b = base.join("b");
    git(&base, &["clone", "-q", &hub.to_string_lossy(), "b"]);
    let mut procs = Vec::new();
    for (root, host) in [(&a, "a"), (&b, "b")] {
        let out = Command::new(bin("swarm"))
            .args(["init", "--quiet", "--host", host])
            .current_dir(root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        procs.push(start(&bin("handoffd"), &[], root));
        procs.push(start(&bin("swarm"), &["bridge"], root));
        let blog = root.join(".swarmforge/bridge/bridge.log");
        wait("bridge", || {
            fs::read_to_string(&blog).is_ok_and(|t| t.contains(" started "))
        });
    }
    let near = a.join(".worktrees/near/.swarmforge/handoffs/inbox/new");
    let pong = b.join(".worktrees/pong/.swarmforge/handoffs/inbox/new");
    // Warm-up: the first cross-host message creates the consumer's state.
    hop(&a, "ping", "pong", &pong, 0);
    hop(&a, "ping", "near", &near, 0);
    let (mut local, mut cross) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        local.push(hop(&a, "ping", "near", &near, i + 1));
        cross.push(hop(&a, "ping", "pong", &pong, i + 1));
    }
    drop(procs);

    let rows: [(&str, &mut Vec<Duration>); 3] = [
        ("bare JetStream publish + ack", &mut bare),
        ("local hop (send -> handoffd -> inbox)", &mut local),
        (
            "cross-host hop (+ bridge -> JetStream -> bridge)",
            &mut cross,
        ),
    ];
    let mut p = Vec::new();
    println!("{n} messages each, one at a time, loopback\n");
    println!("{:<50} {:>9} {:>9}", "", "p50 ms", "p99 ms");
    for (name, v) in rows {
        let (p50, p99) = (pct(v, 50.0), pct(v, 99.0));
        println!("{name:<50} {:>9.2} {:>9.2}", ms(p50), ms(p99));
        p.push((p50, p99));
    }
    let r = |x: Duration, y: Duration| x.as_secs_f64() / y.as_secs_f64().max(1e-9);
    println!(
        "\ncross-host / local hop: p50 {:.2}x, p99 {:.2}x",
        r(p[2].0, p[1].0),
        r(p[2].1, p[1].1)
    );
    println!(
        "cross-host - local hop (the bridge's share): p50 {:.2} ms = {:.1}x a bare publish + ack",
        ms(p[2].0.saturating_sub(p[1].0)),
        r(p[2].0.saturating_sub(p[1].0), p[0].0)
    );
}
