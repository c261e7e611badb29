//! `swarm serve`, the cockpit (issue 15), over real HTTP against a real
//! server in a temp project: the token on every request, cross-origin POSTs
//! refused, the event stream carrying a message sent by `swarm-handoff`,
//! every action writing what the CLI writes, and hostile input refused with
//! the CLI's text. Traffic only to 127.0.0.1; deadlines, never sleeps.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Instant;

use crate::support::{copies_of, file_name, files, Project, Role, DEADLINE};

pub const NOTE: &str = "type: note\nto: qa\npriority: 50\nmessage: ship it\n";
/// A clarify from qa to the person boss, with two options.
pub const PARSER_CLARIFY: &str =
    "type: clarify\nto: boss\npriority: 10\nquestion: which parser?\n\npeg\nhand-written\n";

pub struct Cockpit {
    child: Child,
    pub addr: String,
    pub token: String,
}

impl Drop for Cockpit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `swarm serve --port 0` and reads the URL it prints.
pub fn start(p: &Project) -> Cockpit {
    start_cmd(p.cmd("swarm").args(["serve", "--port", "0"]))
}

/// Starts a command that runs `swarm serve` and reads the URL it prints.
fn start_cmd(cmd: crate::support::Cmd) -> Cockpit {
    let mut child = cmd
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("swarm serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("COCKPIT: http://")
        .unwrap_or_else(|| panic!("no URL printed: {line:?}"))
        .to_string();
    let (addr, token) = url.split_once("/?token=").unwrap();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    Cockpit {
        child,
        addr: addr.to_string(),
        token: token.to_string(),
    }
}

pub struct Reply {
    pub code: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl Cockpit {
    /// One request, `Connection: close`, read to the end.
    pub fn raw(&self, method: &str, target: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        let mut req = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
        let code = head.split(' ').nth(1).unwrap().parse().unwrap();
        Reply {
            code,
            head: head.to_string(),
            body: body.to_string(),
        }
    }

    /// The cookie the first load sets.
    pub fn cookie(&self) -> String {
        let port = self.addr.rsplit_once(':').unwrap().1;
        format!("swarm_cockpit_{port}={}", self.token)
    }

    /// A request as the page makes it: the cookie, no token in the URL.
    pub fn with_cookie(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        let cookie = self.cookie();
        let mut h = vec![("Cookie", cookie.as_str())];
        h.extend_from_slice(headers);
        self.raw(method, target, &h, body)
    }

    pub fn get(&self, path: &str) -> Reply {
        let sep = if path.contains('?') { '&' } else { '?' };
        self.raw("GET", &format!("{path}{sep}token={}", self.token), &[], "")
    }

    pub fn post(&self, path: &str, body: serde_json::Value) -> Reply {
        let t = self.token.clone();
        self.raw(
            "POST",
            path,
            &[
                ("X-Swarm-Token", &t),
                ("Content-Type", "application/json"),
                ("Origin", &format!("http://{}", self.addr)),
            ],
            &body.to_string(),
        )
    }
}

fn project() -> Project {
    Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .role(Role::new("boss").worktree("boss").agent("human"))
        .config("wake: {method: none}\nroles:\n  - {name: coder, approval: required}\n")
        .build()
}

/// `coder` in the main worktree and `qa` in its own; no wake-ups.
fn coder_and_qa() -> Project {
    Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .config("wake: {method: none}\n")
        .build()
}

/// An open event stream and everything read from it so far.
struct EventStream {
    s: TcpStream,
    seen: String,
}

impl EventStream {
    /// Connects to the cockpit and sends `request` (a whole GET).
    fn open(c: &Cockpit, request: &str) -> EventStream {
        let mut s = TcpStream::connect(&c.addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        // A read that waits too long fails the test instead of hanging it.
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        EventStream {
            s,
            seen: String::new(),
        }
    }

    /// Reads until `want` holds for all read so far (deadline, no timing
    /// bound); returns it.
    fn read_until(&mut self, want: &dyn Fn(&str) -> bool, what: &str) -> &str {
        let mut buf = [0u8; 4096];
        let end = Instant::now() + DEADLINE;
        while !want(&self.seen) {
            assert!(
                Instant::now() < end,
                "timed out waiting for {what}; got:\n{}",
                self.seen
            );
            let n = self
                .s
                .read(&mut buf)
                .unwrap_or_else(|e| panic!("{what}: {e}\n{}", self.seen));
            assert!(n > 0, "stream closed before {what}:\n{}", self.seen);
            self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        &self.seen
    }
}

pub fn id_of(queued: &Path) -> String {
    let name = file_name(queued);
    let rest = name.split_once('_').unwrap().1;
    rest.split("_to_").next().unwrap().to_string()
}

#[test]
fn the_token_once_then_a_cookie_and_posts_only_from_this_origin() {
    let p = project();
    let c = start(&p);
    let file = p.path(".swarmforge/serve/token");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), c.token);
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(c.token.len(), 64);
    for path in [
        "/",
        "/app.js",
        "/api/status",
        "/api/events",
        "/api/transcript",
    ] {
        let r = c.raw("GET", path, &[], "");
        assert_eq!(r.code, 401, "{path}: {}", r.body);
        assert!(r.body.contains("missing or wrong token"), "{}", r.body);
        // Wrong in its first digit (whatever that digit is: a fixed "0"
        // matched one token in sixteen).
        let first = if c.token.starts_with('0') { '1' } else { '0' };
        let r = c.raw(
            "GET",
            &format!("{path}?token={first}{}", &c.token[1..]),
            &[],
            "",
        );
        assert_eq!(r.code, 401, "{path} with a wrong token");
    }
    // The first load exchanges the URL's token for a cookie and leaves the
    // address bar: a redirect to `/`, the page itself without the token.
    let first = c.get("/");
    assert_eq!(first.code, 303, "{}", first.head);
    let head = first.head.to_lowercase();
    assert!(head.contains("location: /\r\n"), "{}", first.head);
    let port = c.addr.rsplit_once(':').unwrap().1;
    let set = first
        .head
        .lines()
        .find(|l| l.to_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no cookie set: {}", first.head));
    assert!(
        set.contains(&format!("swarm_cockpit_{port}={}", c.token))
            && set.contains("HttpOnly")
            && set.contains("SameSite=Strict")
            && set.contains("Path=/"),
        "{set}"
    );
    assert!(head.contains("referrer-policy: no-referrer"));
    // A wrong token in the URL sets no cookie.
    let wrong = c.raw("GET", "/?token=00", &[("Cookie", &c.cookie())], "");
    assert_eq!(wrong.code, 303);
    assert!(
        !wrong.head.to_lowercase().contains("set-cookie"),
        "{}",
        wrong.head
    );
    let page = c.with_cookie("GET", "/", &[], "");
    assert_eq!(page.code, 200, "{}", page.body);
    assert!(page
        .head
        .to_lowercase()
        .contains("content-security-policy: default-src 'none'"));
    assert!(page.body.contains("src=\"/app.js\""), "{}", page.body);
    assert!(!page.body.contains(&c.token));
    assert!(!page.body.contains("http://") && !page.body.contains("https://"));
    assert_eq!(c.with_cookie("GET", "/app.js", &[], "").code, 200);
    assert_eq!(c.with_cookie("GET", "/api/snapshot", &[], "").code, 200);
    // The cookie of another port (another cockpit) is no key here.
    let other = format!("swarm_cockpit_1={}", c.token);
    assert_eq!(
        c.raw("GET", "/api/status", &[("Cookie", &other)], "").code,
        401
    );
    // A page on another port of this host is "same-site": it may not read
    // with the cookie, nor act with it.
    let r = c.with_cookie("GET", "/api/status", &[("Sec-Fetch-Site", "same-site")], "");
    assert_eq!(r.code, 403, "{}", r.body);
    let r = c.with_cookie(
        "POST",
        "/api/pause",
        &[
            ("Origin", "http://127.0.0.1:1"),
            ("Content-Type", "application/json"),
        ],
        "{}",
    );
    assert_eq!(r.code, 403, "{}", r.body);
    // The cookie without an Origin (not the page's own fetch) acts on nothing.
    let r = c.with_cookie(
        "POST",
        "/api/pause",
        &[("Content-Type", "application/json")],
        "{}",
    );
    assert_eq!(r.code, 401, "{}", r.body);
    assert!(!p.path(".swarmforge/paused").exists());
    // The page's own POST: the cookie and its Origin.
    let own = format!("http://{}", c.addr);
    let r = c.with_cookie(
        "POST",
        "/api/resume",
        &[
            ("Origin", &own),
            ("Sec-Fetch-Site", "same-origin"),
            ("Content-Type", "application/json"),
        ],
        "{}",
    );
    assert_eq!(r.code, 200, "{}", r.body);
    let st = c.get("/api/status").json();
    assert_eq!(st["schema_version"], 1);
    assert_eq!(st["roles"].as_array().unwrap().len(), 3);
    assert!(st["paused"].is_null());

    // A POST with the token only in the query, as a cross-site form would send it.
    let r = c.raw("POST", &format!("/api/pause?token={}", c.token), &[], "");
    assert_eq!(r.code, 401, "{}", r.body);
    // The token in the header, from another origin.
    let t = c.token.clone();
    let r = c.raw(
        "POST",
        "/api/pause",
        &[("X-Swarm-Token", &t), ("Origin", "http://evil.example")],
        "",
    );
    assert_eq!(r.code, 403, "{}", r.body);
    let r = c.raw(
        "POST",
        "/api/pause",
        &[("X-Swarm-Token", &t), ("Sec-Fetch-Site", "cross-site")],
        "",
    );
    assert_eq!(r.code, 403, "{}", r.body);
    assert!(!p.path(".swarmforge/paused").exists());
}

#[test]
fn the_event_stream_carries_a_message_sent_by_swarm_handoff() {
    let p = coder_and_qa();
    let _d = p.spawn_daemon(&[]);
    let c = start(&p);
    let mut s = EventStream::open(
        &c,
        &format!(
            "GET /api/events?token={} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
            c.token, c.addr
        ),
    );
    s.read_until(&|s| s.contains("event: hello"), "the stream to open");
    let queued = p.send_as("coder", NOTE).ok().queued();
    let id = id_of(&queued);
    let seen = s.read_until(
        &|s| {
            s.lines()
                .any(|l| l.starts_with("data: ") && l.contains("\"delivered\"") && l.contains(&id))
        },
        "the delivered event of the message",
    );
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen
        .to_lowercase()
        .contains("content-type: text/event-stream"));
}

#[test]
fn every_action_writes_what_the_cli_writes() {
    let p = project();
    let c = start(&p);

    // Pause and resume.
    let r = c.post("/api/pause", serde_json::json!({"types": ["note"]}));
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["types"], serde_json::json!(["note"]));
    assert!(p.path(".swarmforge/paused").is_file());
    assert_eq!(c.get("/api/status").json()["paused"]["types"][0], "note");
    p.swarm(&["status"])
        .ok()
        .stdout_has("PAUSED: delivery of note");
    assert_eq!(c.post("/api/resume", serde_json::json!({})).code, 200);
    assert!(!p.path(".swarmforge/paused").exists());

    // Approve a held handoff.
    let queued = p.send_as("coder", NOTE).ok().queued();
    let id = id_of(&queued);
    p.deliver_once().ok();
    assert_eq!(files(&p.hq("master", "pending_approval")).len(), 1);
    let st = c.get("/api/status").json();
    assert_eq!(st["held"][0]["id"], id.as_str());
    // The page gets the whole message and the fingerprint it approves.
    assert!(st["held"][0]["text"]
        .as_str()
        .unwrap()
        .contains("message: ship it"));
    let seen = st["held"][0]["sha256"].as_str().unwrap().to_string();
    // Content swapped after the page showed it: refused, nothing recorded.
    let held = p.hq("master", "pending_approval").join(file_name(&queued));
    let original = std::fs::read_to_string(&held).unwrap();
    std::fs::write(&held, original.replace("ship it", "ship it all")).unwrap();
    let r = c.post(
        "/api/approve",
        serde_json::json!({"id": id, "sha256": seen}),
    );
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.json()["token"], "CHANGED_SINCE_REVIEW");
    assert!(!p.path(&format!(".swarmforge/approvals/{id}")).exists());
    std::fs::write(&held, original).unwrap();
    let r = c.post("/api/approve", serde_json::json!({"id": id}));
    assert_eq!(r.code, 422, "an approval without the sha256: {}", r.body);
    let r = c.post(
        "/api/approve",
        serde_json::json!({"id": id, "sha256": seen}),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    p.deliver_once().ok();
    assert_eq!(copies_of(&p.wt_path("qa"), &file_name(&queued)).len(), 1);
    let r = c.post(
        "/api/approve",
        serde_json::json!({"id": id, "sha256": seen}),
    );
    assert_eq!(r.code, 400);
    assert!(r.json()["message"]
        .as_str()
        .unwrap()
        .contains("no held handoff"));

    // Deny one.
    let queued = p.send_as("coder", NOTE).ok().queued();
    let id = id_of(&queued);
    p.deliver_once().ok();
    let r = c.post(
        "/api/deny",
        serde_json::json!({"id": id, "reason": "not today"}),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    let note = p
        .hq("master", "failed")
        .join(format!("{}.error", file_name(&queued)));
    assert_eq!(
        std::fs::read_to_string(note).unwrap(),
        "denied: not today\n"
    );

    // Answer a clarify as the human role it asks.
    let clarify = p.send_as("qa", PARSER_CLARIFY).ok().queued();
    p.deliver_once().ok();
    let cid = id_of(&clarify);
    // The page's model follows the files through its watcher: a deadline,
    // not the first answer (a loaded machine delivers the change later).
    crate::support::wait_until(
        crate::support::DEADLINE,
        "the clarify is in the cockpit's attention list",
        || {
            c.get("/api/status").json()["attention"]
                .as_array()
                .is_some_and(|a| a.iter().any(|a| a["id"] == cid.as_str()))
        },
    );
    let r = c.post(
        "/api/answer",
        serde_json::json!({"id": cid, "choices": [1, 2]}),
    );
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.json()["token"], "ANSWER INVALID");
    let r = c.post(
        "/api/answer",
        serde_json::json!({"id": cid, "choices": [2]}),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    p.deliver_once().ok();
    p.cmd("ready-next")
        .role("qa")
        .stdout_has("hand-written")
        .run();

    // Post as a human role; an agent role is refused, so is a bad draft.
    let r = c.post(
        "/api/send",
        serde_json::json!({"role": "boss", "draft": "type: note\nto: qa\npriority: 50\nmessage: from the cockpit\n"}),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    assert!(Path::new(r.json()["path"].as_str().unwrap()).is_file());
    let r = c.post(
        "/api/send",
        serde_json::json!({"role": "qa", "draft": NOTE}),
    );
    assert_eq!(r.code, 400);
    assert!(r.json()["message"]
        .as_str()
        .unwrap()
        .contains("not a human role"));
    let r = c.post(
        "/api/send",
        serde_json::json!({"role": "boss", "draft": "type: note\n"}),
    );
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.json()["token"], "HANDOFF INVALID");

    // The views the page reads.
    let t = c.get("/api/transcript").json();
    assert!(t["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == cid.as_str()));
    let r = c.get(&format!("/api/receipts?id={cid}"));
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(c.get("/api/audit").code, 200);
    // Journaled: the audit trail names the cockpit.
    let ev = p.events();
    assert!(ev
        .iter()
        .any(|e| e["kind"] == "approved" && e["reason"].as_str().unwrap().contains("via cockpit")));
    assert!(ev.iter().any(|e| e["kind"] == "denied"));
}

#[test]
fn hostile_input_gets_a_4xx_with_the_cli_text_and_touches_nothing() {
    let p = project();
    let c = start(&p);
    let before = crate::support::snapshot(&p.root);
    for bad in [
        "../../etc/passwd",
        "20260101T000000Z_000001_from_../coder",
        "/abs",
        "",
    ] {
        let r = c.post(
            "/api/approve",
            serde_json::json!({"id": bad, "sha256": "0"}),
        );
        assert_eq!(r.code, 400, "{bad}: {}", r.body);
        assert!(r.json()["message"]
            .as_str()
            .unwrap()
            .contains("is not a message id"));
        let r = c.post("/api/deny", serde_json::json!({"id": bad, "reason": "x"}));
        assert_eq!(r.code, 400, "{bad}");
        let r = c.post(
            "/api/answer",
            serde_json::json!({"id": bad, "choices": [1]}),
        );
        assert_eq!(r.code, 400, "{bad}");
    }
    let r = c.get("/api/receipts?id=..%2F..%2Fetc%2Fpasswd");
    assert_eq!(r.code, 400, "{}", r.body);
    let r = c.post("/api/pause", serde_json::json!({"types": ["../x"]}));
    assert_eq!(r.code, 400);
    assert!(r.json()["message"]
        .as_str()
        .unwrap()
        .contains("is not a message type"));
    let r = c.post(
        "/api/send",
        serde_json::json!({"role": "../boss", "draft": NOTE}),
    );
    assert_eq!(r.code, 400);
    for target in [
        "/../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/api/../../roles.tsv",
    ] {
        let r = c.raw("GET", &format!("{target}?token={}", c.token), &[], "");
        assert!(r.code == 404 || r.code == 400, "{target}: {}", r.code);
        assert!(!r.body.contains("root:"), "{target}");
    }
    let r = c.post("/api/approve", serde_json::json!("not an object"));
    assert!((400..500).contains(&r.code), "{}", r.code);
    assert_eq!(r.json()["token"], "ERROR", "{}", r.body);
    // Every refusal is the documented JSON error, even the framework's own:
    // a wrong content type, an unknown page, a wrong method.
    let t = c.token.clone();
    let own = format!("http://{}", c.addr);
    let r = c.raw(
        "POST",
        "/api/approve",
        &[
            ("X-Swarm-Token", &t),
            ("Origin", &own),
            ("Content-Type", "text/plain"),
        ],
        "{}",
    );
    assert_eq!(r.code, 415, "{}", r.body);
    assert!(r
        .head
        .to_lowercase()
        .contains("content-type: application/json"));
    assert_eq!(r.json()["exit_code"], 1);
    assert!(r.json()["message"]
        .as_str()
        .unwrap()
        .contains("must be JSON"));
    for (method, target) in [("GET", "/api/nothing"), ("GET", "/api/approve")] {
        let r = c.raw(method, &format!("{target}?token={t}"), &[], "");
        assert!(r.code == 404 || r.code == 405, "{target}: {}", r.code);
        assert_eq!(r.json()["token"], "ERROR", "{target}: {}", r.body);
    }
    // Choosing an option needs a pane that shows it.
    let r = c.post(
        "/api/choose",
        serde_json::json!({"role": "coder", "option": 1, "label": "Yes", "prompt": "x"}),
    );
    assert_eq!(r.code, 400, "{}", r.body);
    assert!(
        r.json()["message"].as_str().unwrap().contains("tmux"),
        "{}",
        r.body
    );
    let r = c.raw(
        "GET",
        &format!("/api/events?token={}&from=7", c.token),
        &[],
        "",
    );
    assert_eq!(r.code, 400, "{}", r.body);
    // Nothing was written but the server's own token (there before the snapshot).
    assert_eq!(crate::support::snapshot(&p.root), before);
}

/// Reads `/api/live` until `want` holds.
fn live_until(c: &Cockpit, since: u64, want: &dyn Fn(&str) -> bool) -> String {
    stream_until(c, &format!("/api/live?since={since}"), "", want)
}

/// The page's data: one snapshot, then small deltas: a message sent from
/// the shell arrives as one `message` event with its entry, its recipient's
/// card as one `role` event; a snapshot is bounded and `load earlier`
/// pages back through the rest.
#[test]
fn a_snapshot_then_deltas_carry_a_new_message_and_its_recipients_card() {
    let p = coder_and_qa();
    let _d = p.spawn_daemon(&[]);
    for _ in 0..3 {
        let q = p.send_as("coder", NOTE).ok().queued();
        crate::support::wait_delivered(&p, &q);
    }
    let c = start(&p);
    let snap = c.with_cookie("GET", "/api/snapshot", &[], "").json();
    assert_eq!(snap["total"], 3, "{snap}");
    assert_eq!(snap["messages"].as_array().unwrap().len(), 3);
    let roles: Vec<&str> = snap["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["coder", "qa"]);
    assert_eq!(snap["roles"][1]["new"], 3, "{snap}");
    let seq = snap["seq"].as_u64().unwrap();

    let queued = p
        .send_as(
            "coder",
            "type: note\nto: qa\npriority: 50\nmessage: live one\n",
        )
        .ok()
        .queued();
    let id = id_of(&queued);
    let seen = live_until(&c, seq, &|s| {
        s.contains("event: message")
            && s.contains("live one")
            && s.contains("\"state\":\"sent\"")
            && s.split("\n\n")
                .any(|e| e.contains("event: role") && e.contains("\"new\":4"))
    });
    let ev = seen
        .split("\n\n")
        .find(|e| e.contains("event: message") && e.contains("\"state\":\"sent\""))
        .unwrap();
    assert!(ev.contains(&id), "{ev}");
    let data: serde_json::Value =
        serde_json::from_str(ev.lines().find_map(|l| l.strip_prefix("data: ")).unwrap()).unwrap();
    assert_eq!(data["total"], 4);
    assert_eq!(data["message"]["summary"], "live one");
    // Each event's id is its sequence number, after the snapshot's.
    let ids: Vec<u64> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|v| v.trim().parse().unwrap())
        .collect();
    assert!(!ids.is_empty() && ids.iter().all(|i| *i > seq), "{ids:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    // Reconnecting after the last one sees none of them again.
    let last = *ids.last().unwrap();
    let again = c.with_cookie("GET", "/api/snapshot", &[], "").json();
    assert!(again["seq"].as_u64().unwrap() >= last);
    assert_eq!(again["total"], 4);
    // An offset the server no longer keeps: the page is told to reload.
    let reset = live_until(&c, u64::MAX / 2, &|s| s.contains("event: reset"));
    assert!(reset.contains("event: reset"), "{reset}");

    // Load earlier: pages of the newest first, oldest first within a page.
    let page = c
        .with_cookie(
            "GET",
            &format!("/api/transcript?before={id}&limit=2"),
            &[],
            "",
        )
        .json();
    let msgs = page["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{page}");
    assert_eq!(page["more"], true);
    assert!(msgs.iter().all(|m| m["id"] != id));
}

/// A queue folder that appears with a message already in it (as when the
/// daemon makes a role's first `sent/` and renames the message in before
/// the cockpit's watch on the new folder is set up: no file event ever
/// names that message). The window is made explicit by renaming a folder
/// that holds the message into place; the page still gets it, long before
/// the slow safety re-list.
#[test]
fn a_message_in_a_queue_folder_that_appeared_with_it_reaches_the_page() {
    let p = coder_and_qa();
    // qa's first message, taken out of its outbox before the cockpit starts
    // (no daemon: nobody else moves it).
    let queued = p
        .send_as(
            "qa",
            "type: note\nto: coder\npriority: 50\nmessage: first from qa\n",
        )
        .ok()
        .queued();
    let id = id_of(&queued);
    let parked = p.root.join("parked");
    std::fs::create_dir_all(&parked).unwrap();
    std::fs::rename(&queued, parked.join(file_name(&queued))).unwrap();
    // `swarm-handoff` made qa's queue folders; qa has sent nothing yet.
    let sent = p.hq("qa", "sent");
    std::fs::remove_dir(&sent).unwrap();

    let c = start(&p);
    let snap = c.with_cookie("GET", "/api/snapshot", &[], "").json();
    assert_eq!(snap["total"], 0, "{snap}");
    let seq = snap["seq"].as_u64().unwrap();
    std::fs::rename(&parked, &sent).unwrap();
    let seen = live_until(&c, seq, &|s| {
        s.split("\n\n")
            .any(|e| e.contains("event: message") && e.contains(&id))
    });
    assert!(seen.contains("first from qa"), "{seen}");
}

/// The compose form's fields become a draft checked by the same code as
/// `swarm-handoff`; each error comes back with the field it is about.
#[test]
fn the_compose_form_is_validated_as_a_draft_with_errors_by_field() {
    let p = project();
    let c = start(&p);
    let r = c.post(
        "/api/send",
        serde_json::json!({"role": "boss", "fields": {
            "type": "note", "to": "nobody", "priority": "50", "message": "hi"}}),
    );
    assert_eq!(r.code, 422, "{}", r.body);
    let by = r.json()["errors_by_field"].clone();
    assert!(
        by.as_array()
            .unwrap()
            .iter()
            .any(|e| e[0] == "to" && e[1].as_str().unwrap().contains("nobody")),
        "{by}"
    );
    let r = c.post(
        "/api/send",
        serde_json::json!({"role": "boss", "fields": {
            "type": "note", "to": "qa", "priority": "50", "message": "a\nto: coder"}}),
    );
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.json()["errors_by_field"][0][0], "message", "{}", r.body);
    let r = c.post(
        "/api/send",
        serde_json::json!({"role": "boss", "fields": {
            "type": "note", "to": "qa", "priority": 50, "message": "from the form",
            "subject": "", "in_reply_to": "", "body": ""}}),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    let queued = std::path::PathBuf::from(r.json()["path"].as_str().unwrap());
    let text = std::fs::read_to_string(&queued).unwrap();
    assert!(
        text.contains("message: from the form") && text.contains("to: qa"),
        "{text}"
    );
}

#[test]
fn a_non_loopback_address_needs_allow_remote() {
    let p = project();
    p.cmd("swarm")
        .args(["serve", "--bind", "0.0.0.0", "--port", "0"])
        .code(1)
        .stderr_has("not a loopback address")
        .run();
}

/// playwright-core's folder when Chromium, node and playwright-core are
/// here (under `CI=true` their absence fails the test).
fn browser_tools() -> Option<std::path::PathBuf> {
    let npm = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/npm/node_modules/playwright-core");
    if !crate::support::require_tool("chromium", "apt-get install -y chromium")
        || !crate::support::require_tool("node", "apt-get install -y nodejs npm")
    {
        return None;
    }
    crate::support::require_capability(
        "load playwright-core",
        "npm install --prefix target/npm playwright-core (see .ci/run)",
        if npm.is_dir() {
            Ok(())
        } else {
            Err(format!("{} is missing", npm.display()))
        },
    )?;
    Some(npm)
}

/// A swarm at work in tmux, seen in Chromium (docs/cockpit.md): `lead` a
/// person, `coder` an agent whose pane shows Claude Code's folder-trust
/// dialog (needs_input), `qa` a scripted agent taking one item per wake-up,
/// and usage records for today. The page (tests/cli/browser/glance.cjs) is
/// walked with Tab (every control, in page order, with a focus ring) and
/// answers the dialog from the keyboard, keeps a half-typed message and an open
/// body through ten live messages, charts the work done before the server
/// started (from the journal), shows the usage records' sum as cost,
/// never sends the token in a URL after the first request, and is laid out
/// without overflow or overlap at 1400, 1024 and 390 pixels.
#[test]
fn the_cockpit_at_a_glance_in_chromium() {
    let Some(npm) = browser_tools() else {
        return;
    };
    if !crate::support::require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    d.write("agents/coder.sh", crate::panes::DIALOG);
    d.write("agents/qa.sh", crate::panes::ONE_ITEM);
    d.write(
        "swarm.yaml",
        &format!(
            "launch:\n  stagger: 0ms\nwake:\n  quiet: 300ms\ndaemon:\n  sweep: 200ms\n  ack_within: 1s\n  rewake_cap: 2s\nroles:\n  - name: lead\n    agent: human\n  - name: coder\n    agent: bash {}\n    worktree: coder\n    wake: immediate\n  - name: qa\n    agent: bash {}\n    worktree: qa\n    wake: immediate\n",
            d.path("agents/coder.sh").display(),
            d.path("agents/qa.sh").display()
        ),
    );
    let mut guard = crate::support::SwarmGuard::new(&d.root);
    let r = d.cmd("swarm").args(["up", "--detach"]).run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    guard.socket = Some(std::path::PathBuf::from(
        d.read(".swarmforge/tmux-socket").trim(),
    ));
    crate::support::wait_until(DEADLINE, "coder needs_input", || {
        d.swarm(&["status", "--json"]).json()["roles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["role"] == "coder" && r["agent_state"] == "needs_input")
    });
    // Today's usage, as the headless runtime records it (one line a turn).
    let now = swarm_handoff::protocol::clock::iso_now();
    let today = &now[..10];
    let records = [
        ("coder", 1200, 300, Some(0.125)),
        ("coder", 800, 200, Some(0.5)),
        ("qa", 100, 50, Some(0.25)),
        ("qa", 10, 5, None),
    ];
    let mut lines = String::new();
    for (role, input, output, cost) in records {
        lines.push_str(
            &serde_json::json!({
                "time": format!("{today}T00:00:01.000000Z"), "role": role, "id": null,
                "thread": null, "model": "m", "source": "claude",
                "input_tokens": input, "output_tokens": output,
                "cache_read_tokens": 0, "cache_write_tokens": 0, "cost_usd": cost,
            })
            .to_string(),
        );
        lines.push('\n');
    }
    d.write(".swarmforge/telemetry/usage.jsonl", &lines);
    d.write(
        ".swarmforge/telemetry/activity/qa.jsonl",
        &format!(
            "{}\n",
            serde_json::json!({"time": format!("{today}T00:00:02.000000Z"), "role": "qa",
                "kind": "tool_call", "id": null, "name": "Bash",
                "text": "cargo test --test cli -- a_very_long_filter_name_that_must_wrap_inside_its_card_and_never_overflow", "status": null})
        ),
    );
    // Work done before the cockpit starts: its charts show it, from the
    // daemon's journal (`completed` lines with the copies' stamps).
    d.send_as(
        "lead",
        "type: note\nto: qa\npriority: 50\nmessage: msg-before\n",
    )
    .ok();
    crate::support::wait_until(DEADLINE, "qa's item done and journaled", || {
        d.events()
            .iter()
            .any(|e| e["kind"] == "completed" && e["recipient"] == "qa")
    });
    let ms = |v: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default())
            .map(|t| t.timestamp_millis())
            .ok()
    };
    let events = d.events();
    let depth_from = events
        .iter()
        .filter(|e| e["kind"] == "dequeued" || e["kind"] == "completed")
        .filter_map(|e| ms(&e["stamps"]["enqueued_at"]))
        .min()
        .unwrap();
    let journal_from = ms(&events[0]["time"]).unwrap();
    let expect = serde_json::json!({
        "cost": "$0.88", "cost_exact": "$0.875", "tokens": "2665",
        "roles": {"coder": ["2500", "$0.63"], "qa": ["165", "$0.25"]},
        "depth_from": depth_from, "journal_from": journal_from,
    });
    let c = start(&d);
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/cockpit-shots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/browser/glance.cjs");
    let out = crate::support::clean_command(Path::new("node"), &d.root)
        .arg(script)
        .env("PLAYWRIGHT_CORE", &npm)
        .env(
            "COCKPIT_URL",
            format!("http://{}/?token={}", c.addr, c.token),
        )
        .env("TOKEN", &c.token)
        .env("BIN_DIR", crate::support::bin_dir())
        .env("LEAD_DIR", d.role_dir("lead"))
        .env("EXPECT", expect.to_string())
        .env("SHOTS", &shots)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("BROWSER OK"),
        "browser test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for w in [1400, 1024, 390] {
        assert!(
            shots.join(format!("cockpit-{w}.png")).is_file(),
            "no screenshot at {w}"
        );
    }
    // Enter on the page's button chose "Yes, I trust this folder" by its own keys.
    let io = std::fs::read_to_string(d.path(".worktrees/coder/io.coder")).unwrap_or_default();
    assert!(
        io.contains("TRUSTED") && !io.contains("ANSWERED_NO"),
        "{io}"
    );
}

/// The page in real headless Chromium (Debian's `chromium`, driven by
/// `playwright-core` from `target/npm`, both installed by `.ci/run`).
#[test]
fn the_page_in_headless_chromium() {
    let Some(npm) = browser_tools() else {
        return;
    };
    let p = project();
    let _d = p.spawn_daemon(&[]);
    let c = start(&p);
    let shot = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/cockpit-board.png");
    let _ = std::fs::remove_file(&shot);
    let stdout = browser(&p, &c, &npm, "cockpit.cjs", ("SHOT", &shot));
    assert!(shot.is_file(), "no screenshot at {}", shot.display());
    // The note marked done in the page is completed in boss's inbox.
    let done = crate::support::handoff_names(&p.hq("boss", "inbox/completed"));
    assert!(
        done.iter().any(|n| {
            std::fs::read_to_string(p.hq("boss", "inbox/completed").join(n))
                .is_ok_and(|t| t.contains("message: mark me done"))
        }),
        "{done:?}"
    );
    // The approved note reached qa, once.
    let id = stdout.trim().rsplit(' ').next().unwrap().to_string();
    crate::support::wait_until(DEADLINE, "the approved note is delivered", || {
        crate::support::inbox_copies(&p.wt_path("qa"))
            .iter()
            .filter(|c| file_name(c).contains(&id))
            .count()
            == 1
    });
}

/// A role waiting on a person's answer to its clarify (docs/cockpit.md,
/// "Roles"), in Chromium (tests/cli/browser/waiting.cjs): a headless swarm
/// whose agent `lead` asked its person `boss` and waits. The API's card
/// says `waiting` for boss, as `swarm status` does; the page styles the card
/// as waiting (not as idle) and the header's "need you" counts it once,
/// with the question it waits on.
#[test]
fn a_role_waiting_on_a_persons_answer_in_chromium() {
    let Some(npm) = browser_tools() else {
        return;
    };
    let p = crate::waiting::lead_and_boss();
    let _guard = crate::support::SwarmGuard::new(&p.root);
    p.swarm(&["up", "--no-tmux", "--detach"]).ok();
    crate::waiting::waits_for_boss(&p);
    let c = start(&p);
    let snap = c.get("/api/snapshot").json();
    let lead = snap["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "lead")
        .cloned()
        .unwrap();
    assert_eq!(
        (&lead["state"], &lead["waiting_for"]),
        (&serde_json::json!("waiting"), &serde_json::json!(["boss"])),
        "{lead:#}"
    );
    let shot = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/cockpit-waiting.png");
    let _ = std::fs::remove_file(&shot);
    browser(&p, &c, &npm, "waiting.cjs", ("SHOT", &shot));
    assert!(shot.is_file(), "no screenshot at {}", shot.display());
    p.swarm(&["down"]).ok();
}

/// Runs the browser script `name` (tests/cli/browser/) against the cockpit
/// `c` of `p` with Debian's chromium through playwright-core at `npm`, and
/// `extra` in its environment; its stdout, once it said `BROWSER OK`.
fn browser(p: &Project, c: &Cockpit, npm: &Path, name: &str, extra: (&str, &Path)) -> String {
    let dirs = serde_json::json!({
        "coder": p.role_dir("coder"),
        "qa": p.role_dir("qa"),
        "boss": p.role_dir("boss"),
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cli/browser")
        .join(name);
    let out = crate::support::clean_command(Path::new("node"), &p.root)
        .arg(script)
        .env("PLAYWRIGHT_CORE", npm)
        .env(
            "COCKPIT_URL",
            format!("http://{}/?token={}", c.addr, c.token),
        )
        .env("BIN_DIR", crate::support::bin_dir())
        .env("ROLE_DIRS", dirs.to_string())
        .env(extra.0, extra.1)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("BROWSER OK"),
        "browser test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Every question the cockpit shows can be answered from it (issue 42.7),
/// in Chromium (tests/cli/browser/answer.cjs): with an open clarify without
/// options, one with options and a held handoff waiting, the header's "need
/// you" says 3; at 1400, 1024 and 390 pixels every control is at least 44
/// by 44 pixels; at 390 "Needs a person" comes before the role cards; an
/// answer typed as free text and one chosen by its label reach the asker.
#[test]
fn every_question_the_cockpit_shows_is_answered_from_it_at_three_widths() {
    let Some(npm) = browser_tools() else {
        return;
    };
    let p = project();
    let _d = p.spawn_daemon(&[]);
    let c = start(&p);
    // Not committed: target/ is ignored (look at them to check the layout).
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/cockpit-answer-shots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let stdout = browser(&p, &c, &npm, "answer.cjs", ("SHOTS", &shots));
    for w in [1400, 1024, 390] {
        assert!(
            shots.join(format!("answer-{w}.png")).is_file(),
            "no screenshot at {w}"
        );
    }
    // The free-text answer is in the asker's inbox, in reply to the clarify.
    let id = stdout.trim().rsplit(' ').next().unwrap().to_string();
    let done = p.hq("qa", "inbox/completed");
    let answers: Vec<String> = crate::support::handoff_names(&done)
        .iter()
        .filter_map(|n| std::fs::read_to_string(done.join(n)).ok())
        .filter(|t| t.contains("type: answer") && t.contains(&format!("in_reply_to: {id}")))
        .collect();
    assert!(
        answers.len() == 1 && answers[0].contains("call it Lighthouse, and tag it v1"),
        "{answers:?}"
    );
    // The question left open says what an answer may carry, defaults applied.
    let snap = c.get("/api/snapshot").json();
    let open: Vec<_> = snap["attention"]["attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "clarify")
        .map(|a| (a["allow_multiple"].clone(), a["allow_custom"].clone()))
        .collect();
    assert_eq!(
        open,
        [(serde_json::json!(false), serde_json::json!(false))],
        "{snap}"
    );
}

/// Reads one event stream until `want` holds (deadline, no timing bound).
fn stream_until(c: &Cockpit, target: &str, headers: &str, want: &dyn Fn(&str) -> bool) -> String {
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {}\r\nX-Swarm-Token: {}\r\n{headers}\r\n",
        c.addr, c.token
    );
    let mut s = EventStream::open(c, &request);
    s.read_until(want, "the stream");
    s.seen
}

#[test]
fn a_reconnecting_stream_resumes_at_its_last_event_id() {
    let p = coder_and_qa();
    let _d = p.spawn_daemon(&[]);
    let c = start(&p);
    let first = p.send_as("coder", NOTE).ok().queued();
    crate::support::wait_delivered(&p, &first);
    let second = p.send_as("coder", NOTE).ok().queued();
    crate::support::wait_delivered(&p, &second);
    let (a, b) = (id_of(&first), id_of(&second));
    // From the start of the journal: both deliveries, each with its offset.
    let all = stream_until(&c, "/api/events?from=0", "", &|s| s.contains(&b));
    // The `id:` of the event that carries the first delivery.
    let after_first: u64 = all
        .split("\n\n")
        .find(|ev| ev.contains("\"delivered\"") && ev.contains(&a))
        .and_then(|ev| ev.lines().find_map(|l| l.strip_prefix("id: ")))
        .expect("an id on the first delivery's event")
        .trim()
        .parse()
        .unwrap();
    // Reconnecting with that id: only what came after it.
    let resumed = stream_until(
        &c,
        "/api/events",
        &format!("Last-Event-ID: {after_first}\r\n"),
        &|s| s.contains(&b),
    );
    assert!(!resumed.contains(&a), "{resumed}");
}

/// `swarm serve` with at most `fds` descriptors (as on a system whose limit
/// is 1024, with room to spare for the test).
fn start_with_fd_limit(p: &Project, fds: u32) -> Cockpit {
    start_cmd(p.cmd("sh").args([
        "-c",
        &format!("ulimit -n {fds} && exec \"$0\" serve --port 0"),
        crate::support::bin("swarm").to_str().unwrap(),
    ]))
}

/// Holding connections needs no token, so it must not take the cockpit:
/// with more unfinished requests open than it has descriptors, the person's
/// request is still answered; an unfinished request is closed by the server
/// (header timeout); a `Host` that is not this server (DNS rebinding) is
/// refused even with the token.
#[test]
fn unfinished_requests_and_foreign_hosts_do_not_take_the_cockpit() {
    let p = coder_and_qa();
    let c = start_with_fd_limit(&p, 128);
    let mut junk = Vec::new();
    for _ in 0..300 {
        // The accept queue full (the server takes no more): enough.
        let Ok(mut s) = TcpStream::connect_timeout(&c.addr.parse().unwrap(), DEADLINE) else {
            break;
        };
        let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: ");
        junk.push(s);
    }
    let mut s = TcpStream::connect_timeout(&c.addr.parse().unwrap(), DEADLINE)
        .unwrap_or_else(|e| panic!("the cockpit takes no connection: {e}"));
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let req = format!(
        "GET /api/status?token={} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        c.token, c.addr
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 200"), "not answered: {out:?}");

    // The oldest unfinished request was closed (EOF, or reset).
    let first = &mut junk[0];
    first.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = [0u8; 64];
    match first.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("an unfinished request was kept open: {other:?}"),
    }
    drop(junk);

    // One unfinished request alone: closed by the header timeout.
    let mut slow = TcpStream::connect_timeout(&c.addr.parse().unwrap(), DEADLINE).unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    slow.set_read_timeout(Some(DEADLINE)).unwrap();
    match slow.read(&mut buf) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the unfinished request was kept open: {e}"),
    }

    // DNS rebinding: a page on another name that resolves to 127.0.0.1.
    let port = c.addr.rsplit_once(':').unwrap().1;
    for host in [format!("rebind.example:{port}"), "127.0.0.1:1".to_string()] {
        let mut s = TcpStream::connect(&c.addr).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let req = format!(
            "GET /api/status?token={} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n",
            c.token
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.1 421"), "{host}: {out}");
    }
}
