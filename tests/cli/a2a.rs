//! `swarm a2a` driven by the official A2A Python SDK (tests/a2a/driver.py,
//! a2a-sdk pinned in .ci/run) against a real daemon, with the role played
//! by the real agent helpers: the card, a task that is a handoff queued
//! exactly once per message id, its life (submitted, working,
//! input-required answered through A2A, completed with the reply as its
//! artifact), streaming, cancel, webhook pushes to a receiver that is down
//! and a server that restarts, and bad input answered with the spec's
//! errors. Deadlines, never sleeps.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::support::*;

/// The venv `.ci/run` makes, with a2a-sdk installed, or `SWARM_A2A_PYTHON`.
fn python() -> Option<PathBuf> {
    venv_python(
        "SWARM_A2A_PYTHON",
        "a2a.client, a2a.types",
        "the A2A Python SDK",
        "target/venv/bin/pip install a2a-sdk==1.3.0 (as .ci/run does, or set SWARM_A2A_PYTHON)",
    )
}

/// `dev` (offered over A2A), `qa` (not offered) and `client`, the person
/// outside work comes from.
pub(crate) fn project() -> Project {
    Project::builder()
        .role(Role::new("dev").worktree("dev"))
        .role(Role::new("qa").worktree("qa"))
        .role(Role::new("client").worktree("client").agent("human"))
        .config(
            "wake: {method: none}\na2a: {sender: client}\nroles:\n  - {name: dev, a2a: true, description: Writes and fixes the code.}\n",
        )
        .build()
}

/// A running `swarm a2a`, killed on drop.
pub(crate) struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub(crate) fn start(p: &Project) -> Server {
        let mut child = p
            .cmd("swarm")
            .args(["a2a", "--port", "0"])
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("swarm a2a starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("A2A: ")
            .unwrap_or_else(|| panic!("no address printed: {line:?}"))
            .to_string();
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        Server { child, base }
    }

    fn addr(&self) -> &str {
        self.base.strip_prefix("http://").unwrap()
    }

    /// One raw POST, `Connection: close`: (status, body).
    pub(crate) fn raw(&self, target: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        self.request("POST", target, headers, body)
    }

    fn request(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let mut s = TcpStream::connect(self.addr()).unwrap();
        let mut req = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.addr(),
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        // A server may answer (413) before reading a large body.
        let _ = s.write_all(req.as_bytes());
        let _ = s.write_all(body.as_bytes());
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let out = String::from_utf8_lossy(&out).into_owned();
        let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
        let code = head.split(' ').nth(1).unwrap().parse().unwrap();
        (code, body.to_string())
    }
}

pub(crate) fn token_file(p: &Project) -> PathBuf {
    p.path(".swarmforge/a2a/token")
}

/// The Python SDK client, one JSON request and answer per line.
struct Driver {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    fn start(python: &Path, p: &Project, s: &Server) -> Driver {
        let mut child = clean_command(python, &p.root)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/driver.py"))
            .arg(&s.base)
            .arg(token_file(p))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the python driver starts");
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Driver {
            child,
            stdin,
            lines,
        }
    }

    fn request(&mut self, req: Value) {
        writeln!(self.stdin, "{req}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn answer(&mut self) -> Value {
        let l = self
            .lines
            .recv_timeout(DEADLINE * 2)
            .unwrap_or_else(|e| panic!("no answer from the A2A driver: {e}"));
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"))
    }

    /// A call that must succeed.
    fn ok(&mut self, req: Value) -> Value {
        self.request(req.clone());
        let a = self.answer();
        assert!(a.get("exception").is_none(), "{req}: {a}");
        a
    }

    fn task(&mut self, id: &str) -> Value {
        self.ok(json!({"op": "get", "role": "dev", "id": id}))["task"].clone()
    }

    fn wait_state(&mut self, id: &str, state: &str) -> Value {
        let mut last = Value::Null;
        wait_until(DEADLINE, &format!("task {id} is {state}"), || {
            last = self.task(id);
            last["status"]["state"] == state
        });
        last
    }
}

/// The handoffs `client` has queued or sent.
pub(crate) fn sent_by_client(p: &Project) -> Vec<String> {
    let mut v = handoff_names(&p.hq("client", "outbox"));
    v.extend(handoff_names(&p.hq("client", "sent")));
    v
}

fn dev(p: &Project, bin: &str) -> Run {
    p.cmd(bin).role("dev").run()
}

#[test]
fn a_task_is_one_handoff_through_its_whole_life_with_the_python_sdk() {
    let Some(py) = python() else { return };
    let p = project();
    let _d = p.spawn_daemon(&[]);
    let s = Server::start(&p);
    let token = std::fs::read_to_string(token_file(&p)).unwrap();
    let mode = std::fs::metadata(token_file(&p))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the token is private");
    assert!(!s.base.contains(token.trim()), "the token is never printed");
    let mut c = Driver::start(&py, &p, &s);

    // The card: the role, its skill from swarm.yaml, its interface.
    let card = c.ok(json!({"op": "card", "role": "dev"}))["card"].clone();
    assert_eq!(card["name"], "dev", "{card}");
    assert_eq!(
        card["skills"][0]["description"],
        "Writes and fixes the code."
    );
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{}/a2a/dev", s.base)
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], true);

    // A task: one handoff, however often the request is retried.
    let send = json!({"op": "send", "role": "dev", "text": "Add a --verbose flag.\nKeep it short.",
                      "message_id": "m-1", "blocking": false});
    let first = c.ok(send.clone())["events"][0]["task"].clone();
    let id = first["id"].as_str().unwrap().to_string();
    assert_eq!(first["status"]["state"], "TASK_STATE_SUBMITTED", "{first}");
    let again = c.ok(send)["events"][0]["task"].clone();
    assert_eq!(again["id"], id.as_str());
    assert_eq!(
        sent_by_client(&p).len(),
        1,
        "a retried message is the same handoff"
    );

    // Delivered and taken: working.
    wait_until(DEADLINE, "the handoff reached dev", || {
        !handoff_names(&p.hq("dev", "inbox/new")).is_empty()
    });
    assert_eq!(c.task(&id)["status"]["state"], "TASK_STATE_SUBMITTED");
    let taken = dev(&p, "ready-next");
    taken.ok().stdout_has("Add a --verbose flag.");
    taken.stdout_has(&format!("a2a {id}"));
    c.wait_state(&id, "TASK_STATE_WORKING");

    // The role asks the sender: input-required, with the question.
    p.send_as(
        "dev",
        "type: clarify\nto: client\npriority: 50\nquestion: Which output format?\n\njson\ntext\n",
    )
    .queued();
    let asked = c.wait_state(&id, "TASK_STATE_INPUT_REQUIRED");
    let q = asked["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        q.starts_with("Which output format?\n1. json\n2. text"),
        "{q}"
    );

    // Answered through A2A, exactly once per message id.
    let answer = json!({"op": "send", "role": "dev", "text": "json, please", "message_id": "m-2",
                        "task_id": id, "blocking": false});
    let after = c.ok(answer.clone())["events"][0]["task"].clone();
    assert_eq!(after["status"]["state"], "TASK_STATE_WORKING", "{after}");
    c.ok(answer);
    let answers: Vec<String> = sent_by_client(&p)
        .into_iter()
        .filter(|n| file_header(&find_sent(&p, n), "type").as_deref() == Some("answer"))
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    wait_until(DEADLINE, "the answer reached dev", || {
        !handoff_names(&p.hq("dev", "inbox/new")).is_empty()
    });
    dev(&p, "ready-next").ok().stdout_has("json, please");

    // The reply is the artifact; done-current completes the task.
    p.send_as(
        "dev",
        "type: post\nto: client\npriority: 50\nsubject: done\n\nAdded --verbose (json output).\n",
    )
    .queued();
    dev(&p, "done-current").ok();
    let done = c.wait_state(&id, "TASK_STATE_COMPLETED");
    let art = &done["artifacts"][0];
    let text = art["parts"][0]["text"].as_str().unwrap();
    assert!(text.contains("Added --verbose (json output)."), "{done}");
    assert_eq!(done["metadata"]["role"], "dev");

    // An answer to a finished task is refused, and nothing is queued.
    let before = sent_by_client(&p).len();
    c.request(
        json!({"op": "send", "role": "dev", "text": "more", "message_id": "m-3",
                     "task_id": id, "blocking": false}),
    );
    let refused = c.answer();
    assert!(refused["exception"].is_string(), "{refused}");
    assert_eq!(sent_by_client(&p).len(), before);

    // ListTasks: this role's tasks, as GetTask shows them.
    let token = std::fs::read_to_string(token_file(&p)).unwrap();
    let bearer = format!("Bearer {}", token.trim());
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).to_string();
    let (status, body) = s.raw("/a2a/dev", &[("Authorization", &bearer)], &list);
    let listed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(listed["result"]["tasks"][0]["id"], id.as_str(), "{body}");
    assert_eq!(
        listed["result"]["tasks"][0]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    // The audit sees one handoff per task, each delivered once.
    wait_until(DEADLINE, "everything delivered", || {
        handoff_names(&p.hq("client", "outbox")).is_empty()
            && handoff_names(&p.hq("dev", "outbox")).is_empty()
    });
    p.cmd("swarm").args(["audit", "--check"]).run().ok();
}

/// The states a task's events go through never go back.
fn assert_forward(shape: &[String]) {
    let rank = |e: &String| {
        ["SUBMITTED", "WORKING", "INPUT_REQUIRED", "COMPLETED"]
            .iter()
            .position(|s| e.ends_with(&format!("TASK_STATE_{s}")))
    };
    let ranks: Vec<usize> = shape.iter().filter_map(rank).collect();
    assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{shape:?}");
}

/// `client`'s file by name, wherever it is now.
fn find_sent(p: &Project, name: &str) -> PathBuf {
    let a = p.hq("client", "outbox").join(name);
    if a.exists() {
        a
    } else {
        p.hq("client", "sent").join(name)
    }
}

#[test]
fn a_stream_and_a_blocking_send_follow_the_task_and_cancel_ends_one() {
    let Some(py) = python() else { return };
    let p = project();
    let _d = p.spawn_daemon(&[]);
    let s = Server::start(&p);
    let mut c = Driver::start(&py, &p, &s);

    // Streaming: the task, then each change, until it completes.
    c.request(
        json!({"op": "stream", "role": "dev", "text": "Write the changelog.", "message_id": "s-1"}),
    );
    wait_until(DEADLINE, "the handoff reached dev", || {
        !handoff_names(&p.hq("dev", "inbox/new")).is_empty()
    });
    dev(&p, "ready-next").ok();
    p.send_as(
        "dev",
        "type: post\nto: client\npriority: 50\nsubject: changelog\n\nWritten.\n",
    )
    .queued();
    dev(&p, "done-current").ok();
    let a = c.answer();
    let events = a["events"].as_array().unwrap_or_else(|| panic!("{a}"));
    let shape: Vec<String> = events
        .iter()
        .map(|e| {
            if let Some(t) = e.get("task") {
                format!("task {}", t["status"]["state"].as_str().unwrap())
            } else if let Some(u) = e.get("statusUpdate") {
                format!("status {}", u["status"]["state"].as_str().unwrap())
            } else if let Some(u) = e.get("artifactUpdate") {
                format!(
                    "artifact {}",
                    u["artifact"]["parts"][0]["text"].as_str().unwrap()
                )
            } else {
                panic!("unexpected event {e}")
            }
        })
        .collect();
    assert_eq!(
        shape.first().map(String::as_str),
        Some("task TASK_STATE_SUBMITTED"),
        "{shape:?}"
    );
    assert_eq!(
        shape.last().map(String::as_str),
        Some("status TASK_STATE_COMPLETED"),
        "{shape:?}"
    );
    assert_forward(&shape);
    let art = shape
        .iter()
        .position(|e| e.starts_with("artifact changelog\nWritten."))
        .expect("the reply");
    let working = shape.iter().position(|e| e == "status TASK_STATE_WORKING");
    // The role may take and finish between two looks; when working is seen,
    // it comes before the reply.
    if let Some(w) = working {
        assert!(w < art, "{shape:?}");
    }
    let streamed = events[0]["task"]["id"].as_str().unwrap().to_string();

    // A finished task cannot be subscribed to, nor canceled.
    c.request(json!({"op": "subscribe", "role": "dev", "id": streamed}));
    assert!(c.answer()["exception"].is_string());
    c.request(json!({"op": "cancel", "role": "dev", "id": streamed}));
    let e = c.answer();
    assert_eq!(e["exception"], "TaskNotCancelableError", "{e}");

    // Blocking: the answer comes when the role asks.
    c.request(json!({"op": "send", "role": "dev", "text": "Pick a name.", "message_id": "b-1", "blocking": true}));
    wait_until(DEADLINE, "the handoff reached dev", || {
        !handoff_names(&p.hq("dev", "inbox/new")).is_empty()
    });
    dev(&p, "ready-next").ok();
    p.send_as(
        "dev",
        "type: clarify\nto: client\npriority: 50\nquestion: Short or long?\n",
    )
    .queued();
    let a = c.answer();
    let t = &a["events"][0]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{a}");

    // Canceled: a close goes to the role, the task is canceled.
    let id = t["id"].as_str().unwrap().to_string();
    let canceled = c.ok(json!({"op": "cancel", "role": "dev", "id": id}))["task"].clone();
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let closes = sent_by_client(&p)
        .into_iter()
        .filter(|n| file_header(&find_sent(&p, n), "type").as_deref() == Some("close"))
        .count();
    assert_eq!(closes, 1);
    assert_eq!(c.task(&id)["status"]["state"], "TASK_STATE_CANCELED");
}

/// What a webhook receiver got: each POST's token header and body.
type Pushes = Arc<Mutex<Vec<(Option<String>, Value)>>>;

/// A webhook receiver on a fixed port.
struct Hook {
    got: Pushes,
}

fn receive(listener: TcpListener) -> Hook {
    let got: Pushes = Arc::default();
    let into = got.clone();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut len = 0usize;
            let mut token = None;
            loop {
                let mut l = String::new();
                if r.read_line(&mut l).unwrap_or(0) == 0 {
                    break;
                }
                let l = l.trim_end();
                if l.is_empty() {
                    break;
                }
                if let Some((k, v)) = l.split_once(':') {
                    match k.to_ascii_lowercase().as_str() {
                        "content-length" => len = v.trim().parse().unwrap_or(0),
                        "x-a2a-notification-token" => token = Some(v.trim().to_string()),
                        _ => {}
                    }
                }
            }
            let mut body = vec![0; len];
            if r.read_exact(&mut body).is_err() {
                continue;
            }
            if let Ok(v) = serde_json::from_slice(&body) {
                into.lock().unwrap().push((token, v));
            }
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    Hook { got }
}

fn state_of(e: &Value) -> String {
    if let Some(t) = e.get("task") {
        format!("task {}", t["status"]["state"].as_str().unwrap_or(""))
    } else if let Some(u) = e.get("statusUpdate") {
        format!("status {}", u["status"]["state"].as_str().unwrap_or(""))
    } else if e.get("artifactUpdate").is_some() {
        "artifact".into()
    } else {
        format!("? {e}")
    }
}

#[test]
fn pushes_reach_a_receiver_that_was_down_across_a_server_restart() {
    let Some(py) = python() else { return };
    let p = project();
    let _d = p.spawn_daemon(&[]);
    let mut s = Server::start(&p);
    let mut c = Driver::start(&py, &p, &s);
    // The receiver's port, with nobody listening yet.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let hook = format!("http://127.0.0.1:{port}/hook");

    let t = c.ok(
        json!({"op": "send", "role": "dev", "text": "Fix the typo.", "message_id": "p-1",
                        "blocking": false, "push": {"url": hook, "token": "hook-secret"}}),
    )["events"][0]["task"]
        .clone();
    let id = t["id"].as_str().unwrap().to_string();
    let config = p.path(&format!(".swarmforge/a2a/push/{id}/default.json"));
    assert!(config.is_file(), "the push config is a file");
    assert_eq!(
        std::fs::metadata(&config).unwrap().permissions().mode() & 0o777,
        0o600
    );

    wait_until(DEADLINE, "the handoff reached dev", || {
        !handoff_names(&p.hq("dev", "inbox/new")).is_empty()
    });
    dev(&p, "ready-next").ok();
    p.send_as(
        "dev",
        "type: note\nto: client\npriority: 50\nmessage: fixed\n",
    )
    .queued();
    dev(&p, "done-current").ok();
    c.wait_state(&id, "TASK_STATE_COMPLETED");
    assert!(
        !p.path(&format!(".swarmforge/a2a/push/{id}/default.acked"))
            .exists(),
        "nothing was acknowledged while the receiver was down"
    );

    // The server restarts, then the receiver comes up: everything arrives,
    // in order, once.
    drop(c);
    let _ = s.child.kill();
    let _ = s.child.wait();
    s = Server::start(&p);
    let r =
        receive(TcpListener::bind(("127.0.0.1", port)).expect("the receiver's port is free again"));
    wait_until(DEADLINE, "the pushes arrived", || {
        r.got
            .lock()
            .unwrap()
            .last()
            .is_some_and(|(_, e)| state_of(e) == "status TASK_STATE_COMPLETED")
    });
    let raw = r.got.lock().unwrap().clone();
    // Delivery is at least once (a push whose answer is lost under load is
    // sent again) and receivers dedupe by content (docs/a2a.md): count
    // distinct events; two different artifacts would still be two.
    let mut got: Vec<(Option<String>, Value)> = Vec::new();
    for g in &raw {
        if !got.iter().any(|x| x.1 == g.1) {
            got.push(g.clone());
        }
    }
    let shape: Vec<String> = got.iter().map(|(_, e)| state_of(e)).collect();
    assert_forward(&shape);
    assert_eq!(
        shape.first().map(String::as_str),
        Some("task TASK_STATE_SUBMITTED"),
        "{shape:?}"
    );
    assert_eq!(
        shape.iter().filter(|e| *e == "artifact").count(),
        1,
        "{shape:?}"
    );
    assert_eq!(
        shape
            .iter()
            .filter(|e| *e == "status TASK_STATE_COMPLETED")
            .count(),
        1,
        "{shape:?}"
    );
    assert!(got.iter().all(|(t, _)| t.as_deref() == Some("hook-secret")));
    assert!(got.iter().all(|(_, e)| {
        e.get("task").map_or_else(
            || {
                e.as_object()
                    .and_then(|o| o.values().next())
                    .is_some_and(|u| u["taskId"] == id.as_str())
            },
            |t| t["id"] == id.as_str(),
        )
    }));
    drop(s);
}

#[test]
fn bad_requests_get_the_spec_errors_and_queue_nothing() {
    let p = project();
    let s = Server::start(&p);
    let token = std::fs::read_to_string(token_file(&p))
        .unwrap()
        .trim()
        .to_string();
    let bearer = format!("Bearer {token}");
    let auth = [("Authorization", bearer.as_str())];
    let rpc = |method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string()
    };
    let send = |text: Value| {
        rpc(
            "SendMessage",
            json!({"message": {"messageId": "x-1", "role": "ROLE_USER", "parts": [text]}}),
        )
    };
    let code = |(status, body): (u16, String)| -> (u16, i64) {
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        (
            status,
            v["error"]["code"]
                .as_i64()
                .unwrap_or_else(|| panic!("{body}")),
        )
    };

    // No token, a wrong one, a token in the URL: refused.
    let get = rpc("GetTask", json!({"id": "abc"}));
    assert_eq!(s.raw("/a2a/dev", &[], &get).0, 401);
    assert_eq!(
        s.raw("/a2a/dev", &[("Authorization", "Bearer nope")], &get)
            .0,
        401
    );
    assert_eq!(s.raw(&format!("/a2a/dev?token={token}"), &[], &get).0, 401);

    // The swarm's card offers dev only; a card needs the token too.
    let (status, body) = s.request("GET", "/.well-known/agent-card.json", &auth, "");
    assert_eq!(status, 200, "{body}");
    let card: Value = serde_json::from_str(&body).unwrap();
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(skills, ["dev"], "{card}");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{}/a2a/dev", s.base)
    );
    assert_eq!(
        s.request("GET", "/.well-known/agent-card.json", &[], "").0,
        401
    );
    assert_eq!(
        s.request("GET", "/a2a/qa/.well-known/agent-card.json", &auth, "")
            .0,
        404
    );

    // Unknown roles and roles without a2a: true.
    assert_eq!(code(s.raw("/a2a/nobody", &auth, &get)), (404, -32600));
    let (status, body) = s.raw("/a2a/qa", &auth, &get);
    assert_eq!(status, 404);
    assert!(body.contains("a2a: true"), "{body}");
    assert_eq!(code(s.raw("/a2a/client", &auth, &get)), (404, -32600));

    // The envelope and the methods.
    assert_eq!(code(s.raw("/a2a/dev", &auth, "{not json")), (200, -32700));
    assert_eq!(
        code(s.raw("/a2a/dev", &auth, r#"{"id":1,"method":"GetTask"}"#)),
        (200, -32600)
    );
    assert_eq!(code(s.raw("/a2a/dev", &auth, "[]")), (200, -32600));
    assert_eq!(
        code(s.raw("/a2a/dev", &auth, &rpc("Frobnicate", json!({})))),
        (200, -32601)
    );
    let (_, old) = s.raw("/a2a/dev", &auth, &rpc("message/send", json!({})));
    assert!(
        old.contains("-32601") && old.contains("SendMessage"),
        "{old}"
    );
    assert_eq!(code(s.raw("/a2a/dev", &auth, &get)), (200, -32001));
    let big = send(json!({"text": "x".repeat(70 * 1024)}));
    assert_eq!(code(s.raw("/a2a/dev", &auth, &big)), (413, -32600));
    let long = send(json!({"text": "x".repeat(17 * 1024)}));
    assert_eq!(code(s.raw("/a2a/dev", &auth, &long)), (200, -32602));
    let file = send(json!({"url": "file:///etc/passwd"}));
    assert_eq!(code(s.raw("/a2a/dev", &auth, &file)), (200, -32005));
    let control = send(json!({"text": "a\u{1b}[2Jb"}));
    assert_eq!(code(s.raw("/a2a/dev", &auth, &control)), (200, -32602));
    let no_id = rpc(
        "SendMessage",
        json!({"message": {"messageId": "../x", "parts": [{"text": "hi"}]}}),
    );
    assert_eq!(code(s.raw("/a2a/dev", &auth, &no_id)), (200, -32602));
    let v03 = [auth[0], ("A2A-Version", "0.3")];
    assert_eq!(code(s.raw("/a2a/dev", &v03, &get)), (200, -32009));
    let push = rpc(
        "CreateTaskPushNotificationConfig",
        json!({"taskId": "abc", "url": "ftp://example.com/"}),
    );
    assert_eq!(code(s.raw("/a2a/dev", &auth, &push)), (200, -32602));

    assert!(sent_by_client(&p).is_empty(), "nothing was queued");
    assert!(files(&p.path(".swarmforge/a2a/tasks")).is_empty());
}

#[test]
fn swarm_a2a_needs_a_sender_and_an_offered_role() {
    let p = Project::builder()
        .role(Role::new("dev").worktree("dev"))
        .config("roles:\n  - {name: dev, a2a: true}\n")
        .build();
    p.cmd("swarm")
        .args(["a2a", "--port", "0"])
        .code(1)
        .stderr_has("no a2a sender")
        .stderr_has("docs/a2a.md")
        .run();
    p.config("a2a: {sender: ghost}\nroles:\n  - {name: dev, a2a: true}\n");
    p.cmd("swarm")
        .args(["a2a", "--port", "0"])
        .code(1)
        .stderr_has("a2a sender 'ghost' is not a role")
        .run();
    p.config("a2a: {sender: dev}\n");
    p.cmd("swarm")
        .args(["a2a", "--port", "0"])
        .code(1)
        .stderr_has("no role has `a2a: true`")
        .run();
}
