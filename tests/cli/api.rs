//! `agent: api` (issue 13): `swarm run-api` against a fake OpenAI-compatible
//! server on 127.0.0.1 (a std TcpListener thread serving scripted answers):
//! the right message type and fields, no call out of turn, one digest per
//! request, failures as `done-current --failed <reason>`, and the key in no
//! log, file or command line.

use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{
    copy_tree, example_dir, file_header, handoff_names, wait_until, walk, Project, Role,
    SwarmGuard, DEADLINE,
};

pub(crate) const KEY: &str = "sk-test-7f3a9c1e5b0d2468-SECRET";

/// One scripted answer.
#[derive(Clone)]
pub(crate) enum Answer {
    Ok(String),
    Status(u16, String),
    Raw(String),
    /// Waits this long before answering (past the client's timeout).
    Slow(Duration, String),
}

pub(crate) fn chat(content: &str) -> Answer {
    Answer::Ok(
        serde_json::json!({
            "id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]
        })
        .to_string(),
    )
}

/// A request the server received: its header lines and JSON body.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    path: String,
    headers: Vec<String>,
    pub(crate) body: serde_json::Value,
}

pub(crate) struct FakeServer {
    pub(crate) base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<VecDeque<Answer>>>,
}

impl FakeServer {
    pub(crate) fn start(script: Vec<Answer>) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let (s2, q2) = (Arc::clone(&seen), Arc::clone(&script));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let (seen, script) = (Arc::clone(&s2), Arc::clone(&q2));
                std::thread::spawn(move || {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut first = String::new();
                    if r.read_line(&mut first).is_err() {
                        return;
                    }
                    let mut headers = Vec::new();
                    let mut len = 0usize;
                    loop {
                        let mut l = String::new();
                        if r.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                            break;
                        }
                        let l = l.trim_end().to_string();
                        if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length: ") {
                            len = v.parse().unwrap_or(0);
                        }
                        headers.push(l);
                    }
                    let mut body = vec![0; len];
                    let _ = r.read_exact(&mut body);
                    let n = {
                        let mut seen = seen.lock().unwrap();
                        seen.push(Seen {
                            path: first.split_whitespace().nth(1).unwrap_or("").to_string(),
                            headers,
                            body: serde_json::from_slice(&body).unwrap_or_default(),
                        });
                        seen.len()
                    };
                    // Unscripted calls get "answer <n>" (n counts from 1).
                    let answer = script
                        .lock()
                        .unwrap()
                        .pop_front()
                        .unwrap_or_else(|| chat(&format!("answer {n}")));
                    let (status, text) = match answer {
                        Answer::Ok(t) => (200, t),
                        Answer::Status(s, t) => (s, t),
                        Answer::Raw(t) => (200, t),
                        Answer::Slow(d, t) => {
                            std::thread::sleep(d);
                            (200, t)
                        }
                    };
                    let _ = write!(
                        conn,
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                        text.len()
                    );
                });
            }
        });
        FakeServer {
            base_url,
            seen,
            script,
        }
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) fn push(&self, a: Answer) {
        self.script.lock().unwrap().push_back(a);
    }
}

/// Roles each in their own worktree; `api` roles talk to `server`.
pub(crate) fn project(
    server: &FakeServer,
    roles: &[(&str, bool)],
    extra: &str,
    api_keys: &str,
) -> Project {
    let mut yaml = format!("daemon: {{rescan: 300ms, sweep: 200ms}}\n{extra}roles:\n");
    for (name, api) in roles {
        if *api {
            yaml.push_str(&format!(
                "  - name: {name}\n    worktree: {name}\n    agent: api\n    base_url: {}\n    model: fake-model\n    api_key_env: FAKE_API_KEY\n{api_keys}",
                server.base_url
            ));
        } else {
            yaml.push_str(&format!(
                "  - name: {name}\n    worktree: {name}\n    agent: sh x.sh\n"
            ));
        }
    }
    Project::builder()
        .roles(roles.iter().map(|(r, api)| {
            Role::new(r)
                .worktree(r)
                .agent(if *api { "api" } else { "sh" })
        }))
        .config(&yaml)
        .build()
}

pub(crate) fn run_api(p: &Project, role: &str) -> crate::support::Run {
    let r = p
        .cmd("swarm")
        .role(role)
        .env("FAKE_API_KEY", KEY)
        .args(["run-api", "--role", role])
        .run_within(Duration::from_secs(60));
    r.ok();
    assert!(
        !r.stdout.contains(KEY) && !r.stderr.contains(KEY),
        "the key was printed"
    );
    r
}

/// Names in a role's handoff folder.
pub(crate) fn names(p: &Project, role: &str, rel: &str) -> Vec<String> {
    handoff_names(&p.hq(role, rel))
}

fn wait_sent(p: &Project, role: &str, n: usize) {
    wait_until(
        DEADLINE,
        &format!("{n} messages of {role} delivered"),
        || names(p, role, "sent").len() >= n && names(p, role, "outbox").is_empty(),
    );
}

/// The key is in no file under the project (logs, journal, handoffs, cursors).
fn key_in_no_file(p: &Project) {
    for f in walk(&p.root) {
        if let Ok(bytes) = fs::read(&f) {
            assert!(
                !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
                "the key is in {}",
                f.display()
            );
        }
    }
}

/// Notes from ada to helper, priorities 10, 11, … in order, delivered.
fn notes_to_helper(p: &Project, messages: &[&str]) {
    for (i, m) in messages.iter().enumerate() {
        p.send_as(
            "ada",
            &format!(
                "type: note\nto: helper\npriority: {}\nmessage: {m}\n",
                10 + i
            ),
        )
        .ok();
    }
    p.deliver_once().ok();
}

fn text(p: &Path) -> String {
    fs::read_to_string(p).unwrap()
}

#[test]
fn moderator_answers_each_digest_request_once_with_a_digest() {
    let server = FakeServer::start(vec![chat("Both want files.\nAnd renames.\u{7}")]);
    let p = project(
        &server,
        &[("ada", false), ("ben", false), ("moderator", true)],
        "forum: {moderator: moderator, digest_every: 2}\n",
        "",
    );
    let _d = p.spawn_daemon(&[]);
    p.swarm(&["session", "start", "--title", "state"]).ok();
    p.send_as(
        "ada",
        "type: post\nto: all\npriority: 50\n\nKeep every message as a file.\n",
    )
    .ok();
    wait_sent(&p, "ada", 1);
    p.send_as(
        "ben",
        "type: post\nto: all\npriority: 50\n\nMove files by renames.\n",
    )
    .ok();
    wait_sent(&p, "ben", 1);
    wait_until(DEADLINE, "the digest request at the moderator", || {
        fs::read_dir(p.hq("moderator", "inbox/new"))
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.file_name().to_string_lossy().contains("from_handoffd"))
            })
            .unwrap_or(false)
    });

    let out = run_api(&p, "moderator");
    let seen = server.seen();
    assert_eq!(
        seen.len(),
        1,
        "one call for the request, none for the posts: {}",
        out.stdout
    );
    let req = &seen[0];
    assert_eq!(req.path, "/v1/chat/completions");
    // Header names are case-insensitive (ureq sends them lower-cased).
    let auth: Vec<&String> = req
        .headers
        .iter()
        .filter(|h| h.to_ascii_lowercase().starts_with("authorization:"))
        .collect();
    assert_eq!(auth.len(), 1, "{:?}", req.headers);
    assert_eq!(auth[0].split_once(": ").unwrap().1, format!("Bearer {KEY}"));
    assert_eq!(req.body["model"], "fake-model");
    let system = req.body["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("# Swarm role: moderator"), "{system}");
    let user = req.body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("TYPE: digest_request\n") && user.contains("CONTRIBUTIONS:\n1. ["),
        "{user}"
    );
    assert!(
        user.contains("[ada -> all] post Keep every message as a file."),
        "{user}"
    );
    assert!(
        user.contains("[ben -> all] post Move files by renames."),
        "{user}"
    );

    // The daemon's requests are published from the moderator's outbox too.
    wait_sent(&p, "moderator", 2);
    let sent: Vec<String> = names(&p, "moderator", "sent")
        .into_iter()
        .filter(|n| n.contains("_from_moderator_"))
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}\n{}", out.stdout);
    assert!(sent[0].contains("_from_moderator_to_all"), "{sent:?}");
    let digest = text(&p.hq("moderator", "sent").join(&sent[0]));
    let request_id = fs::read_dir(p.hq("moderator", "inbox/completed"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|f| file_header(f, "type").as_deref() == Some("digest_request"))
        .and_then(|f| file_header(&f, "id"))
        .expect("the request completed");
    assert!(
        digest.contains("\ntype: digest\n") && digest.contains("\nsubject: digest\n"),
        "{digest}"
    );
    assert!(
        digest.contains(&format!("\nin_reply_to: {request_id}\n")),
        "{digest}"
    );
    assert!(
        digest.ends_with("\n\nBoth want files.\nAnd renames.\n"),
        "control character dropped: {digest}"
    );

    // Every item is finished; a second run finds nothing and asks nothing.
    assert!(names(&p, "moderator", "inbox/in_process").is_empty());
    run_api(&p, "moderator").stdout_has("(0 items, 0 calls");
    assert_eq!(server.seen().len(), 1);
    p.cmd("ready-next")
        .role("ada")
        .stdout_has("FROM: moderator\nTYPE: digest\n")
        .run()
        .ok();
    key_in_no_file(&p);
}

#[test]
fn an_answer_already_sent_is_not_asked_again() {
    // A run killed between its send and its finish: the item is still in
    // process, its answer queued; the next run finishes it without a call.
    let server = FakeServer::start(vec![]);
    let p = project(&server, &[("ada", false), ("helper", true)], "", "");
    p.send_as(
        "ada",
        "type: note\nto: helper\npriority: 50\nmessage: status?\n",
    )
    .ok();
    p.deliver_once().ok();
    p.cmd("ready-next")
        .role("helper")
        .stdout_has("TYPE: note")
        .run()
        .ok();
    p.send_as(
        "helper",
        "type: note\nto: ada\npriority: 50\nmessage: green\n",
    )
    .ok();
    run_api(&p, "helper").stdout_has("answered already");
    assert!(server.seen().is_empty());
    assert!(names(&p, "helper", "inbox/in_process").is_empty());
}

#[test]
fn direct_mail_gets_a_reply_broadcasts_and_out_of_turn_items_get_no_call() {
    let server = FakeServer::start(vec![
        chat("ok, on it"),
        chat(&"A long answer. ".repeat(20)),
        chat("b's turn: agreed"),
    ]);
    let p = project(&server, &[("a", false), ("b", true), ("c", false)], "", "");
    // A note to b: a one-line note back to a. A post to b: a post.
    p.send_as(
        "a",
        "type: note\nto: b\npriority: 30\nmessage: please check the build\n",
    )
    .ok();
    p.send_as(
        "a",
        "type: post\nto: b\npriority: 31\nsubject: plan\n\nWhat is the plan?\n",
    )
    .ok();
    // A broadcast: read, no call.
    p.send_as("c", "type: post\nto: all\npriority: 32\n\nFYI: lunch\n")
        .ok();
    p.deliver_once().ok();
    run_api(&p, "b");
    assert_eq!(
        server.seen().len(),
        2,
        "two calls: the note and the post to b"
    );
    p.deliver_once().ok();
    let sent = names(&p, "b", "sent");
    assert_eq!(sent.len(), 2, "{sent:?}");
    let reply1 = text(&p.hq("b", "sent").join(&sent[0]));
    let reply2 = text(&p.hq("b", "sent").join(&sent[1]));
    assert!(
        reply1.contains("\ntype: note\n")
            && reply1.contains("\nmessage: ok, on it\n")
            && reply1.contains("\nto: a\n"),
        "{reply1}"
    );
    assert!(
        reply1.contains("\npriority: 30\n") && reply1.contains("\nin_reply_to: "),
        "{reply1}"
    );
    assert!(
        reply2.contains("\ntype: post\n") && reply2.contains("A long answer. A long answer."),
        "{reply2}"
    );

    // A discussion a, b, c: a speaks; b's turn: one call, a turn in the
    // discussion. Then c speaks; b gets c's turn, not its turn: no call.
    p.swarm(&["discussion", "open", "d", "--order", "a,b,c"])
        .ok();
    p.send_as(
        "a",
        "type: post\nto: all\npriority: 50\ndiscussion: d\n\nfiles or a database?\n",
    )
    .ok();
    p.deliver_once().ok();
    run_api(&p, "b");
    assert_eq!(server.seen().len(), 3);
    let user = server.seen()[2].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        user.contains("CONTEXT:\n- a: files or a database?"),
        "{user}"
    );
    p.deliver_once().ok();
    let turn = names(&p, "b", "sent")
        .into_iter()
        .map(|n| text(&p.hq("b", "sent").join(n)))
        .find(|t| t.contains("\ndiscussion: d\n"))
        .expect("b's turn");
    assert!(
        turn.contains("\nto: all\n") && turn.ends_with("\n\nb's turn: agreed\n"),
        "{turn}"
    );
    let status = p.swarm(&["discussion", "status", "d", "--json"]).json();
    assert_eq!(status["expected"], "c");
    p.send_as(
        "c",
        "type: post\nto: all\npriority: 50\ndiscussion: d\n\nfiles.\n",
    )
    .ok();
    p.deliver_once().ok();
    assert!(
        !names(&p, "b", "inbox/new").is_empty(),
        "c's turn waits at b"
    );
    run_api(&p, "b").stdout_has("no answer needed");
    assert_eq!(server.seen().len(), 3, "no call when it is not b's turn");
    assert!(
        names(&p, "b", "inbox/new").is_empty() && names(&p, "b", "inbox/in_process").is_empty()
    );
}

#[test]
fn failures_end_as_done_current_failed_with_the_reason() {
    let slow = Duration::from_secs(3);
    let server = FakeServer::start(vec![
        // item 1: both attempts time out
        Answer::Slow(slow, "{}".into()),
        Answer::Slow(slow, "{}".into()),
        // item 2: a 500, then an answer
        Answer::Status(500, r#"{"error":{"message":"overloaded"}}"#.into()),
        chat("recovered"),
        // item 3: not JSON
        Answer::Raw("<html>oops".into()),
        // item 4: a refusal
        Answer::Ok(r#"{"choices":[{"message":{"role":"assistant","content":null,"refusal":"I cannot help with that."},"finish_reason":"stop"}]}"#.into()),
    ]);
    let p = project(
        &server,
        &[("ada", false), ("helper", true)],
        "",
        "    request_timeout: 1s\n    retries: 1\n",
    );
    notes_to_helper(&p, &["one", "two", "three", "four"]);
    let out = run_api(&p, "helper");
    out.stdout_has("retrying in 500 ms");
    assert_eq!(server.seen().len(), 6, "{}", out.stdout);
    let completed = p.hq("helper", "inbox/completed");
    let mut done: Vec<(String, Option<String>)> = handoff_names(&completed)
        .iter()
        .map(|n| {
            (
                file_header(&completed.join(n), "message").unwrap(),
                file_header(&completed.join(n), "failed"),
            )
        })
        .collect();
    done.sort_by_key(|(m, _)| ["one", "two", "three", "four"].iter().position(|x| x == m));
    let failed: Vec<Option<&str>> = done.iter().map(|(_, f)| f.as_deref()).collect();
    let why = |i: usize| failed[i].unwrap_or_else(|| panic!("item {i} not failed: {done:?}"));
    assert!(
        why(0).contains("within 1 s") && why(0).contains("after 2 attempts"),
        "{}",
        why(0)
    );
    assert_eq!(failed[1], None, "the 500 was retried");
    assert!(why(2).contains("malformed answer (not JSON"), "{}", why(2));
    assert_eq!(why(3), "the model refused: I cannot help with that.");
    p.deliver_once().ok();
    let sent = names(&p, "helper", "sent");
    assert_eq!(sent.len(), 1);
    assert!(text(&p.hq("helper", "sent").join(&sent[0])).contains("\nmessage: recovered\n"));
    key_in_no_file(&p);
}

#[test]
fn the_key_is_on_no_command_line_and_the_config_names_only_its_variable() {
    let server = FakeServer::start(vec![Answer::Slow(Duration::from_secs(2), "{}".into())]);
    let p = project(
        &server,
        &[("ada", false), ("helper", true)],
        "",
        "    retries: 0\n",
    );
    p.send_as("ada", "type: note\nto: helper\npriority: 50\nmessage: hi\n")
        .ok();
    p.deliver_once().ok();
    let started = p
        .cmd("swarm")
        .role("helper")
        .env("FAKE_API_KEY", KEY)
        .args(["run-api", "--role", "helper"])
        .start();
    let pid = started.pid();
    wait_until(DEADLINE, "the call in flight", || !server.seen().is_empty());
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert!(!cmdline.windows(KEY.len()).any(|w| w == KEY.as_bytes()));
    let r = started.finish(DEADLINE, "run-api exits");
    assert!(!r.stdout.contains(KEY) && !r.stderr.contains(KEY));
    // Without the variable: a clear error naming it, nothing taken.
    p.send_as(
        "ada",
        "type: note\nto: helper\npriority: 50\nmessage: again\n",
    )
    .ok();
    p.deliver_once().ok();
    p.cmd("swarm")
        .role("helper")
        .args(["run-api", "--role", "helper"])
        .code(1)
        .stderr_has("the environment variable FAKE_API_KEY (api_key_env of role 'helper'")
        .run();
    assert_eq!(names(&p, "helper", "inbox/new").len(), 1);
    key_in_no_file(&p);
    server.push(chat("unused"));
}

#[test]
fn api_roles_are_checked_when_the_config_is_loaded() {
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        "roles:\n  - name: m\n    agent: api\n    model: x\n",
    );
    p.cmd("swarm")
        .arg("init")
        .code(1)
        .stderr_has("role 'm' (agent: api) needs `base_url`")
        .run();
    p.write("swarm.yaml", "roles:\n  - name: m\n    agent: api\n    base_url: http://h/v1\n    model: x\n    api_key_env: sk-123\n");
    p.cmd("swarm")
        .arg("init")
        .code(1)
        .stderr_has("is not an environment variable name")
        .run();
    p.write(
        "swarm.yaml",
        "roles:\n  - name: m\n    agent: sh m.sh\n    base_url: http://h/v1\n",
    );
    p.cmd("swarm")
        .arg("init")
        .code(1)
        .stderr_has("sets `base_url`, which only `agent: api` takes")
        .run();
    p.write(
        "swarm.yaml",
        "roles:\n  - name: m\n    agent: api\n    base_url: http://127.0.0.1:9/v1\n    model: x\n",
    );
    p.swarm(&["init"]).ok();
    let tsv = fs::read_to_string(p.root.join(".swarmforge/roles.tsv")).unwrap();
    assert!(tsv.contains("\tapi\t"), "{tsv}");
}

/// Every process's command line, scanned until `stop`: the key on none.
fn watch_cmdlines(stop: Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut scans = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
                if let Ok(c) = fs::read(e.path().join("cmdline")) {
                    assert!(
                        !c.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
                        "the key is on the command line of {}: {}",
                        e.path().display(),
                        String::from_utf8_lossy(&c)
                    );
                }
            }
            scans += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        scans
    })
}

/// `swarm up` starts an `agent: api` role like any agent: a scripted
/// sender asks it, the runner answers, the sender reads the answer.
#[test]
fn swarm_up_starts_the_runner_for_an_api_role() {
    let server = FakeServer::start(vec![chat("pong")]);
    let g = Project::empty();
    let root = g.path("swarm");
    fs::create_dir_all(root.join("agents")).unwrap();
    fs::write(
        root.join("agents/asker.sh"),
        "set -eu\nif [ ! -e .swarmforge/asked ]; then\n  printf 'type: note\\nto: helper\\npriority: 50\\nmessage: ping\\n' >.swarmforge/d.txt\n  swarm-handoff .swarmforge/d.txt\n  : >.swarmforge/asked\nfi\nout=$(ready-next)\nuntil printf '%s\\n' \"$out\" | grep -qx NO_TASK; do\n  out=$(done-current)\ndone\n",
    )
    .unwrap();
    fs::write(
        root.join("swarm.yaml"),
        format!(
            "launch: {{stagger: 100ms}}\nroles:\n  - name: asker\n    worktree: asker\n    agent: sh \"$SWARMFORGE_PROJECT/agents/asker.sh\"\n  - name: helper\n    worktree: helper\n    agent: api\n    base_url: {}\n    model: fake-model\n    api_key_env: FAKE_API_KEY\n",
            server.base_url
        ),
    )
    .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let scanner = watch_cmdlines(Arc::clone(&stop));
    let mut guard = SwarmGuard::new(&root);
    guard.guard(
        g.cmd("swarm")
            .at(&root)
            .env("FAKE_API_KEY", KEY)
            .args(["up", "--no-tmux", "--until-idle", "--timeout", "60s"])
            .start(),
    );
    let out = guard.finish(Duration::from_secs(70), "the swarm finishes");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(scanner.join().unwrap() > 0);
    out.ok();
    assert_eq!(server.seen().len(), 1, "{}", out.stdout);
    let t = g.cmd("swarm").at(&root).args(["transcript"]).run();
    assert!(
        t.stdout.contains("[asker -> helper] note ping"),
        "{}",
        t.stdout
    );
    assert!(
        t.stdout.contains("[helper -> asker] note pong"),
        "{}",
        t.stdout
    );
    assert!(!out.stdout.contains(KEY) && !out.stderr.contains(KEY));
    key_in_no_file(&g);
}

/// The forum example on a model by one setting (SWARM_MODEL_URL): six
/// turns in order, each one call on the speaker's turn, a digest after the
/// third and the sixth, nothing asked out of turn.
#[test]
fn the_forum_example_runs_on_a_model_server_by_one_setting() {
    let server = FakeServer::start(vec![]);
    let g = Project::empty();
    let root = g.path("swarm");
    copy_tree(&example_dir("forum"), &root);
    let mut guard = SwarmGuard::new(&root);
    guard.guard(
        g.cmd("swarm")
            .at(&root)
            .env("SWARM_MODEL_URL", &server.base_url)
            .env("SWARM_MODEL", "fake-model")
            .env("SWARM_MODEL_KEY_ENV", "FAKE_API_KEY")
            .env("FAKE_API_KEY", KEY)
            .args(["up", "--no-tmux", "--until-idle", "--timeout", "80s"])
            .start(),
    );
    let out = guard.finish(Duration::from_secs(90), "the example swarm finishes");
    let out = out.ok();
    let t = g.cmd("swarm").at(&root).args(["transcript"]).run();
    let posts: Vec<&str> = t
        .stdout
        .lines()
        .filter(|l| l.contains(" -> all] post "))
        .collect();
    let speakers: Vec<&str> = posts
        .iter()
        .map(|l| l.split("] [").nth(1).unwrap().split(' ').next().unwrap())
        .collect();
    assert_eq!(
        speakers,
        ["ada", "ben", "cy", "ada", "ben", "cy"],
        "{}",
        t.stdout
    );
    let digests = t
        .stdout
        .lines()
        .filter(|l| l.contains("[moderator -> all] digest"))
        .count();
    assert_eq!(digests, 2, "{}", t.stdout);
    let calls: Vec<String> = server
        .seen()
        .iter()
        .map(|c| {
            let user = c.body["messages"][1]["content"].as_str().unwrap_or("");
            user.lines().take(6).collect::<Vec<_>>().join(" | ")
        })
        .collect();
    assert_eq!(
        calls.len(),
        8,
        "six turns and two digests, no other call; the calls:\n{}\nthe run's output:\n{}\n{}\nthe transcript:\n{}",
        calls.join("\n"),
        out.stdout,
        out.stderr,
        t.stdout
    );
    let st = g
        .cmd("swarm")
        .at(&root)
        .args(["discussion", "status", "design", "--json"])
        .run()
        .json();
    assert_eq!(st["close_reason"], "cap_reached");
    assert!(
        posts.iter().all(|l| l.contains(" post answer ")),
        "{}",
        t.stdout
    );
    key_in_no_file(&g);
}

/// The roundtable's seats on a model by the same setting: each answers the
/// coordinator's question once, and the coordinator closes the round.
#[test]
fn the_roundtable_seats_run_on_a_model_server_by_one_setting() {
    let server = FakeServer::start(vec![]);
    let g = Project::empty();
    let root = g.path("swarm");
    copy_tree(&example_dir("roundtable"), &root);
    let mut guard = SwarmGuard::new(&root);
    guard.guard(
        g.cmd("swarm")
            .at(&root)
            .env("SWARM_MODEL_URL", &server.base_url)
            .args(["up", "--no-tmux", "--until-idle", "--timeout", "80s"])
            .start(),
    );
    let out = guard.finish(Duration::from_secs(90), "the example swarm finishes");
    out.ok();
    let t = g.cmd("swarm").at(&root).args(["transcript"]).run();
    for seat in ["architect", "tester", "writer"] {
        let n = t
            .stdout
            .lines()
            .filter(|l| l.contains(&format!("[{seat} -> coordinator] post answer ")))
            .count();
        assert_eq!(n, 1, "{seat}:\n{}", t.stdout);
    }
    assert_eq!(server.seen().len(), 3, "{}", t.stdout);
    assert!(
        t.stdout.contains("[coordinator -> all] close consensus"),
        "{}",
        t.stdout
    );
}

/// A server or gateway that quotes the request's Authorization header back,
/// in an error (retried or final), a refusal or the answer itself: the key
/// reaches no `failed:` header, no reply, no stdout (run_api checks stdout
/// and stderr; key_in_no_file every file of the project).
#[test]
fn a_server_quoting_the_key_gets_it_redacted_everywhere() {
    let quoted = format!("invalid header Authorization: Bearer {KEY}");
    let server = FakeServer::start(vec![
        // item 1: a 500 quoting the key, then a 401 quoting it
        Answer::Status(500, serde_json::json!({"error": {"message": quoted}}).to_string()),
        Answer::Status(401, serde_json::json!({"error": {"message": quoted}}).to_string()),
        // item 2: a refusal quoting it
        Answer::Ok(serde_json::json!({"choices": [{"message": {"role": "assistant", "content": null, "refusal": quoted}, "finish_reason": "stop"}]}).to_string()),
        // item 3: an answer quoting it
        chat(&format!("your key is {KEY}")),
    ]);
    let p = project(
        &server,
        &[("ada", false), ("helper", true)],
        "",
        "    retries: 1\n",
    );
    notes_to_helper(&p, &["one", "two", "three"]);
    let out = run_api(&p, "helper");
    out.stdout_has("<redacted>");
    let completed = p.hq("helper", "inbox/completed");
    let reasons: Vec<String> = handoff_names(&completed)
        .iter()
        .filter_map(|n| file_header(&completed.join(n), "failed"))
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons.iter().all(|r| r.contains("<redacted>")),
        "{reasons:?}"
    );
    p.deliver_once().ok();
    key_in_no_file(&p);
}

const NATS_SECRET: &str = "nats-token-3c9e1f7a-SECRET";

/// `swarm up` with the person's secrets in its environment (an API role's
/// key, the bridge's token): the other agents see neither, headless and in
/// tmux (a scripted agent dumps its environment); the API role still works
/// with its own key (swarm_up_starts_the_runner_for_an_api_role).
#[test]
fn each_agent_gets_only_its_own_secrets() {
    let server = FakeServer::start(vec![]);
    let g = Project::empty();
    let root = g.path("swarm");
    fs::create_dir_all(root.join("agents")).unwrap();
    fs::write(
        root.join("agents/dump.sh"),
        "env >env.tmp && mv env.tmp env.txt\n",
    )
    .unwrap();
    fs::write(
        root.join("swarm.yaml"),
        format!(
            "launch: {{stagger: 0ms}}\nroles:\n  - name: asker\n    worktree: asker\n    agent: sh \"$SWARMFORGE_PROJECT/agents/dump.sh\"\n  - name: helper\n    worktree: helper\n    agent: api\n    base_url: {}\n    model: fake-model\n    api_key_env: FAKE_API_KEY\n",
            server.base_url
        ),
    )
    .unwrap();
    // In its own worktree: the agent is confined (the default).
    let dump = root.join(".worktrees/asker/env.txt");
    let check = |how: &str| {
        let env = fs::read_to_string(&dump).unwrap();
        assert!(env.contains("SWARMFORGE_ROLE=asker"), "{how}: {env}");
        assert!(
            !env.contains(KEY),
            "{how}: another role's key reached the agent"
        );
        assert!(
            !env.contains(NATS_SECRET),
            "{how}: the bridge token reached the agent"
        );
        assert!(!env.contains("SWARM_NATS_CREDS"), "{how}: {env}");
    };
    let up = |args: &[&str]| {
        g.cmd("swarm")
            .at(&root)
            .env("FAKE_API_KEY", KEY)
            .env("SWARM_NATS_TOKEN", NATS_SECRET)
            .env("SWARM_NATS_CREDS", "/nowhere/x.creds")
            .arg("up")
            .args(args)
    };
    let mut guard = SwarmGuard::new(&root);
    guard.guard(up(&["--no-tmux", "--until-idle", "--timeout", "60s"]).start());
    guard
        .finish(Duration::from_secs(70), "the swarm finishes")
        .ok();
    check("headless");

    if !crate::support::require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    fs::remove_file(&dump).unwrap();
    let r = up(&["--detach"]).run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    guard.socket = Some(
        root.join(
            fs::read_to_string(root.join(".swarmforge/tmux-socket"))
                .unwrap()
                .trim(),
        ),
    );
    wait_until(DEADLINE, "the agent in tmux dumped its environment", || {
        dump.exists()
    });
    check("tmux");
}
