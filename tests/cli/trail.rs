//! `swarm transcript`, `receipts`, `audit` and `events` on fixture projects
//! whose messages are written directly as files.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use swarm_handoff::protocol::header::{Header, Message};

use crate::support::{hq, wait_until, Project, Role, Run, DEADLINE, MESSAGE_DIRS};

/// One message of a fixture.
#[derive(Clone)]
struct Msg {
    id: String,
    from: &'static str,
    to: &'static str,
    ty: &'static str,
    /// `task` for git_handoff, `message` for note, nothing for post.
    about: &'static str,
    created: String,
    body: String,
}

impl Msg {
    fn new(seq: u32, from: &'static str, to: &'static str, ty: &'static str) -> Msg {
        Msg {
            id: format!("20260616T000000Z_{seq:06}_from_{from}"),
            from,
            to,
            ty,
            about: "",
            created: "2026-06-16T00:00:00.000000Z".into(),
            body: String::new(),
        }
    }
    fn about(mut self, a: &'static str) -> Msg {
        self.about = a;
        self
    }
    /// Sets created_at and the id's second to match it.
    fn at(mut self, created: &str) -> Msg {
        self.created = created.to_string();
        let t = swarm_handoff::protocol::clock::parse(created).unwrap();
        let seq = &self.id[17..23];
        self.id = format!(
            "{}_{seq}_from_{}",
            swarm_handoff::protocol::clock::idts(t),
            self.from
        );
        self
    }
    fn body(mut self, b: &str) -> Msg {
        self.body = b.to_string();
        self
    }
    fn name(&self) -> String {
        format!("50_{}_to_{}.handoff", self.id, self.to.replace(',', "_"))
    }
    fn message(&self) -> Message {
        let mut m = Message::default();
        m.set(Header::Id, &self.id);
        m.set(Header::From, self.from);
        m.set(Header::To, self.to);
        m.set(Header::Priority, "50");
        m.set(Header::Type, self.ty);
        match self.ty {
            "git_handoff" => {
                m.set(Header::Role, self.from);
                m.set(Header::Task, self.about);
                m.set(Header::Commit, "0123456789");
            }
            "note" => m.set(Header::Message, self.about),
            _ => {}
        }
        m.set(Header::CreatedAt, &self.created);
        m.body = if self.body.is_empty() {
            let payload = match self.ty {
                "git_handoff" => format!("merge_and_process {} 0123456789", self.from),
                _ => self.about.to_string(),
            };
            format!("Re-read your role and constitution.\n\n{payload}\n")
        } else {
            self.body.clone()
        };
        m
    }
    fn original(&self) -> String {
        self.message().render()
    }
    /// A delivered copy with the given stamps (enqueued, dequeued, completed).
    fn copy(&self, recipient: &str, stamps: &[&str]) -> String {
        let mut m = self.message();
        m.set(Header::Recipient, recipient);
        for (name, v) in [Header::EnqueuedAt, Header::DequeuedAt, Header::CompletedAt]
            .iter()
            .zip(stamps)
        {
            m.set(*name, *v);
        }
        m.render()
    }
}

/// `coder` and `QA` share the main worktree; `cleaner` (batch) has its own.
fn project() -> Project {
    Project::builder()
        .role(Role::new("coder").display("Coder"))
        .role(
            Role::new("cleaner")
                .worktree("cleaner")
                .mode("batch")
                .display("Cleaner"),
        )
        .role(Role::new("QA").agent("claude").display("Qa"))
        .build()
}

/// `<worktree>/.swarmforge/handoffs/<rel>` for a role's worktree.
fn hand(p: &Project, role: &str, rel: &str) -> PathBuf {
    hq(&p.role_dir(role), rel)
}

fn put(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn m1() -> Msg {
    Msg::new(1, "coder", "cleaner,QA", "git_handoff")
        .about("fix-login")
        .at("2026-06-15T23:59:58.500000Z")
}
fn m2() -> Msg {
    Msg::new(2, "QA", "coder", "note")
        .about("Ünïcode ✓ ready for review")
        .at("2026-06-16T00:00:05.000000Z")
}
fn m3() -> Msg {
    Msg::new(3, "coder", "all", "post")
        .at("2026-06-16T00:00:07.000000Z")
        .body("Findings:\tall green \\o/\n\n| a | b |\n```\ncode\n```\n")
}
fn m4() -> Msg {
    Msg::new(4, "cleaner", "zed", "note")
        .about("hello")
        .at("2026-06-16T00:00:09.000000Z")
}
fn m5() -> Msg {
    Msg::new(5, "cleaner", "coder", "note")
        .about("still waiting")
        .at("2026-06-16T00:00:11.000000Z")
}
fn m6() -> Msg {
    Msg::new(6, "QA", "ghost", "note")
        .about("boo")
        .at("2026-06-16T00:00:13.000000Z")
}

/// A project whose trail is complete and consistent: six messages (three
/// sent, two failed, one still in an outbox) and five delivered copies.
fn fixture() -> Project {
    let p = project();
    let (m1, m2, m3, m4, m5, m6) = (m1(), m2(), m3(), m4(), m5(), m6());
    put(
        &hand(&p, "coder", &format!("sent/{}", m1.name())),
        &m1.original(),
    );
    put(
        &hand(
            &p,
            "cleaner",
            &format!(
                "inbox/completed/batch_20260616T000010Z_000001/{}",
                m1.name()
            ),
        ),
        &m1.copy(
            "cleaner",
            &[
                "2026-06-15T23:59:58.600000Z",
                "2026-06-16T00:00:10.000000Z",
                "2026-06-16T00:01:10.000000Z",
            ],
        ),
    );
    put(
        &hand(&p, "QA", &format!("inbox/in_process/{}", m1.name())),
        &m1.copy(
            "QA",
            &["2026-06-15T23:59:58.700000Z", "2026-06-16T00:00:20.000000Z"],
        ),
    );
    put(
        &hand(&p, "QA", &format!("sent/{}", m2.name())),
        &m2.original(),
    );
    put(
        &hand(&p, "coder", &format!("inbox/new/{}", m2.name())),
        &m2.copy("coder", &["2026-06-16T00:00:05.100000Z"]),
    );
    put(
        &hand(&p, "coder", &format!("sent/{}", m3.name())),
        &m3.original(),
    );
    put(
        &hand(&p, "cleaner", &format!("inbox/new/{}", m3.name())),
        &m3.copy("cleaner", &["2026-06-16T00:00:07.200000Z"]),
    );
    put(
        &hand(&p, "QA", &format!("inbox/completed/{}", m3.name())),
        &m3.copy(
            "QA",
            &[
                "2026-06-16T00:00:07.300000Z",
                "2026-06-16T00:00:30.000000Z",
                "2026-06-16T00:02:30.000000Z",
            ],
        ),
    );
    // This daemon writes the reason beside the failed original ...
    put(
        &hand(&p, "cleaner", &format!("failed/{}", m4.name())),
        &m4.original(),
    );
    put(
        &hand(&p, "cleaner", &format!("failed/{}.error", m4.name())),
        "unknown recipient zed\n",
    );
    put(
        &hand(&p, "cleaner", &format!("outbox/{}", m5.name())),
        &m5.original(),
    );
    // ... SwarmForge's left it in the outbox, and the original may carry a
    // collision prefix.
    put(
        &hand(
            &p,
            "QA",
            &format!("failed/2026-06-16T00:00:14.000Z_{}", m6.name()),
        ),
        &m6.original(),
    );
    put(
        &hand(&p, "QA", &format!("outbox/{}.error", m6.name())),
        "unknown recipient ghost\n",
    );
    p
}

/// Replaces the temp root with `<root>` so expectations read plainly.
fn rooted(p: &Project, s: &str) -> String {
    s.replace(&p.root.display().to_string(), "<root>")
}

const TEXT: &str = "\
--- 2026-06-15 ---
[23:59:58] [coder -> cleaner,QA] git_handoff fix-login
--- 2026-06-16 ---
[00:00:05] [QA -> coder] note Ünïcode ✓ ready for review
[00:00:07] [coder -> all] post Findings:\\tall green \\\\o/
[00:00:09] [cleaner -> zed] note hello [failed: unknown recipient zed]
[00:00:11] [cleaner -> coder] note still waiting
[00:00:13] [QA -> ghost] note boo [failed: unknown recipient ghost]
";

#[test]
fn transcript_text_is_one_line_per_message_in_order() {
    let p = fixture();
    let r = p.swarm(&["transcript"]);
    r.ok();
    assert_eq!(r.stdout, TEXT);
    assert_eq!(r.stderr, "");
    // The root may be given, from anywhere.
    let r = p.run_in(
        ".worktrees/cleaner/.swarmforge",
        None,
        "swarm",
        &["transcript", &p.root.display().to_string()],
    );
    assert_eq!(r.stdout, TEXT, "{}", r.stderr);
}

#[test]
fn forum_line_matches_the_transcript_line() {
    let m = m1().message();
    let line = swarm_handoff::protocol::line::forum_line(&m);
    assert_eq!(
        line,
        "[2026-06-15 23:59:58] [coder -> cleaner,QA] git_handoff fix-login\n"
    );
    assert!(TEXT.contains(&format!("[23:59:58] {}", &line[22..])));
    // A delivered copy gives the same line as its original.
    let copy = Message::parse(&m1().copy("QA", &["2026-06-15T23:59:59Z"])).unwrap();
    assert_eq!(swarm_handoff::protocol::line::forum_line(&copy), line);
}

#[test]
fn transcript_jsonl_carries_headers_body_and_state() {
    let p = fixture();
    let r = p.swarm(&["transcript", "--format", "jsonl"]);
    r.ok();
    let rows: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = rows.iter().map(|v| v["id"].as_str().unwrap()).collect();
    let want: Vec<String> = [m1(), m2(), m3(), m4(), m5(), m6()]
        .iter()
        .map(|m| m.id.clone())
        .collect();
    assert_eq!(ids, want);
    let states: Vec<&str> = rows.iter().map(|v| v["state"].as_str().unwrap()).collect();
    assert_eq!(
        states,
        ["sent", "sent", "sent", "failed", "outbox", "failed"]
    );
    let post = &rows[2];
    assert_eq!(post["time"], "2026-06-16T00:00:07.000000Z");
    assert_eq!(post["to"], "all");
    assert_eq!(post["recipients"], serde_json::json!(["cleaner", "QA"]));
    assert_eq!(post["summary"], "Findings:\\tall green \\\\o/");
    assert_eq!(post["body"], m3().body);
    assert_eq!(post["headers"]["type"], "post");
    assert_eq!(post["reason"], Value::Null);
    assert_eq!(rows[3]["reason"], "unknown recipient zed");
    assert_eq!(
        rows[4]["path"],
        hand(&p, "cleaner", &format!("outbox/{}", m5().name()))
            .display()
            .to_string()
    );
}

#[test]
fn transcript_markdown_has_a_section_per_message_with_its_file() {
    let p = fixture();
    let r = p.swarm(&["transcript", "--format", "md", "--type", "post"]);
    r.ok();
    let want = format!(
        "# Transcript: <root>\n\
         \n\
         ## [2026-06-16 00:00:07] [coder -> all] post Findings:\\tall green \\\\o/\n\
         \n\
         - state: sent\n\
         \n\
         ````text\n\
         id: {id}\n\
         from: coder\n\
         to: all\n\
         priority: 50\n\
         type: post\n\
         created_at: 2026-06-16T00:00:07.000000Z\n\
         \n\
         Findings:\tall green \\o/\n\
         \n\
         | a | b |\n\
         ```\n\
         code\n\
         ```\n\
         ````\n",
        id = m3().id
    );
    assert_eq!(rooted(&p, &r.stdout), want);
    let r = p.swarm(&["transcript", "--format", "md", "--task", "nothing"]);
    assert_eq!(rooted(&p, &r.stdout), "# Transcript: <root>\n");
    let r = p.swarm(&["transcript", "--format", "md", "--last", "1"]);
    assert!(r
        .stdout
        .contains("- state: failed\n- reason: unknown recipient ghost\n"));
}

fn lines_of(r: &Run) -> Vec<&str> {
    r.stdout
        .lines()
        .filter(|l| !l.starts_with("---"))
        .map(|l| l.split("] ").nth(1).unwrap_or(l))
        .collect()
}

#[test]
fn transcript_filters_select_messages() {
    let p = fixture();
    let r = p.swarm(&["transcript", "--role", "cleaner"]);
    r.ok();
    // Sent by cleaner, to cleaner, and to `all` (cleaner is not the sender).
    assert_eq!(
        lines_of(&r),
        [
            "[coder -> cleaner,QA",
            "[coder -> all",
            "[cleaner -> zed",
            "[cleaner -> coder"
        ]
    );
    let r = p.swarm(&["transcript", "--role", "coder", "--type", "note"]);
    assert_eq!(lines_of(&r), ["[QA -> coder", "[cleaner -> coder"]);
    let r = p.swarm(&["transcript", "--task", "fix-login"]);
    assert_eq!(
        r.stdout,
        "--- 2026-06-15 ---\n[23:59:58] [coder -> cleaner,QA] git_handoff fix-login\n"
    );
    let r = p.swarm(&[
        "transcript",
        "--since",
        "2026-06-16T00:00:05Z",
        "--until",
        "2026-06-16T00:00:11Z",
    ]);
    assert_eq!(
        lines_of(&r),
        ["[QA -> coder", "[coder -> all", "[cleaner -> zed"]
    );
    let r = p.swarm(&["transcript", "--last", "2"]);
    assert_eq!(
        r.stdout,
        "--- 2026-06-16 ---\n\
         [00:00:11] [cleaner -> coder] note still waiting\n\
         [00:00:13] [QA -> ghost] note boo [failed: unknown recipient ghost]\n"
    );
    let r = p.swarm(&["transcript", "--since", "yesterday"]);
    assert_eq!(r.code, 1);
    r.stderr_has("invalid time 'yesterday'");
}

#[test]
fn transcript_since_accepts_an_age() {
    let p = project();
    let now = chrono::Utc::now();
    let stamp =
        |ago: i64| swarm_handoff::protocol::clock::iso(now - chrono::Duration::minutes(ago));
    let a = Msg::new(1, "coder", "QA", "note")
        .about("old news")
        .at(&stamp(180));
    let b = Msg::new(2, "coder", "QA", "note")
        .about("fresh")
        .at(&stamp(10));
    put(
        &hand(&p, "coder", &format!("sent/{}", a.name())),
        &a.original(),
    );
    put(
        &hand(&p, "coder", &format!("sent/{}", b.name())),
        &b.original(),
    );
    let r = p.swarm(&["transcript", "--since", "1h"]);
    r.ok();
    assert_eq!(lines_of(&r), ["[coder -> QA"]);
    assert!(r.stdout.ends_with("note fresh\n"), "{}", r.stdout);
    let r = p.swarm(&["transcript", "--until", "2h"]);
    assert!(r.stdout.ends_with("note old news\n"), "{}", r.stdout);
}

#[test]
fn transcript_shows_each_id_once_and_skips_malformed_files() {
    let p = fixture();
    let m1 = m1();
    // The same id again: a collision-moved copy in sent/, one in failed/ and
    // one still in an outbox.
    put(
        &hand(
            &p,
            "coder",
            &format!("sent/2026-06-16T00:00:01.000Z_{}", m1.name()),
        ),
        &m1.original(),
    );
    put(
        &hand(&p, "coder", &format!("failed/{}", m1.name())),
        &m1.original(),
    );
    put(
        &hand(&p, "coder", &format!("outbox/{}", m1.name())),
        &m1.original(),
    );
    put(
        &hand(&p, "coder", "sent/garbage.handoff"),
        "no blank line\n",
    );
    put(
        &hand(&p, "coder", "sent/control.handoff"),
        "id: x\nfrom: a\x1b[2J\n\nbody\n",
    );
    let r = p.swarm(&["transcript"]);
    r.ok();
    assert_eq!(r.stdout, TEXT);
    assert_eq!(
        r.stderr,
        "warning: skipped 2 unreadable or malformed file(s) and 0 unreadable folder(s); `swarm audit --check` lists them\n"
    );
}

/// A child whose stdout lines are collected by a thread.
struct Follower {
    child: Child,
    out: Arc<Mutex<String>>,
}

impl Follower {
    fn spawn(p: &Project, args: &[&str]) -> Follower {
        let mut child = p
            .cmd("swarm")
            .args(args)
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("swarm starts");
        let out = Arc::new(Mutex::new(String::new()));
        let sink = out.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Follower { child, out }
    }

    fn text(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    fn wait_for(&self, what: &str) {
        wait_until(DEADLINE, what, || self.text().contains(what));
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn transcript_follow_prints_messages_sent_after_it_started() {
    let p = fixture();
    let f = Follower::spawn(&p, &["transcript", "--follow"]);
    f.wait_for("note boo [failed: unknown recipient ghost]\n");
    // A real send lands in coder's outbox.
    p.send(
        "coder",
        "type: note\nto: QA\npriority: 10\nmessage: sent while following\n",
    )
    .ok();
    f.wait_for("[coder -> QA] note sent while following\n");
    // A file moved into another worktree's sent/ (tmp + rename, as a daemon does).
    let m = Msg::new(9, "cleaner", "coder", "note")
        .about("late arrival")
        .at("2026-06-17T08:00:00.000000Z");
    let tmp = p.root.join("late.tmp");
    fs::write(&tmp, m.original()).unwrap();
    let dest = hand(&p, "cleaner", &format!("sent/{}", m.name()));
    fs::create_dir_all(dest.parent().unwrap()).unwrap();
    fs::rename(&tmp, &dest).unwrap();
    f.wait_for("--- 2026-06-17 ---\n[08:00:00] [cleaner -> coder] note late arrival\n");
    // The sent message moving on to sent/ is not printed twice.
    let out = hand(&p, "coder", "outbox");
    let name = p.files(&out).into_iter().next().unwrap();
    fs::create_dir_all(hand(&p, "coder", "sent")).unwrap();
    fs::rename(out.join(&name), hand(&p, "coder", &format!("sent/{name}"))).unwrap();
    let m = Msg::new(10, "QA", "coder", "note")
        .about("marker")
        .at("2026-06-17T08:00:01.000000Z");
    put(
        &hand(&p, "QA", &format!("sent/{}", m.name())),
        &m.original(),
    );
    f.wait_for("note marker\n");
    assert_eq!(f.text().matches("sent while following").count(), 1);
    assert!(f.text().starts_with(TEXT), "{}", f.text());
}

#[test]
fn receipts_show_each_recipient() {
    let p = fixture();
    let m1 = m1();
    let r = p.swarm(&["receipts", &m1.id]);
    r.ok();
    let want = format!(
        "id: {id}\n\
         from: coder\n\
         to: cleaner,QA\n\
         type: git_handoff\n\
         created_at: 2026-06-15T23:59:58.500000Z\n\
         original: sent <root>/.swarmforge/handoffs/sent/{name}\n\
         \n\
         recipient  state       enqueued_at                  dequeued_at                  completed_at                 path\n\
         cleaner    completed   2026-06-15T23:59:58.600000Z  2026-06-16T00:00:10.000000Z  2026-06-16T00:01:10.000000Z  <root>/.worktrees/cleaner/.swarmforge/handoffs/inbox/completed/batch_20260616T000010Z_000001/{name}\n\
         QA         in_process  2026-06-15T23:59:58.700000Z  2026-06-16T00:00:20.000000Z  -                            <root>/.swarmforge/handoffs/inbox/in_process/{name}\n",
        id = m1.id,
        name = m1.name()
    );
    assert_eq!(rooted(&p, &r.stdout), want);
    // The file name works as well as the id.
    let r2 = p.swarm(&["receipts", &m1.name()]);
    assert_eq!(r2.stdout, r.stdout);

    let r = p.swarm(&["receipts", &m3().id, "--json"]);
    r.ok();
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["to"], "all");
    let states: Vec<(&str, &str)> = v["recipients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["recipient"].as_str().unwrap(),
                x["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(states, [("cleaner", "new"), ("QA", "completed")]);
    assert_eq!(v["recipients"][0]["dequeued_at"], Value::Null);
    assert_eq!(
        v["recipients"][1]["completed_at"],
        "2026-06-16T00:02:30.000000Z"
    );
    assert_eq!(v["originals"][0]["state"], "sent");

    let r = p.swarm(&["receipts", &m6().id, "--json"]);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["originals"][0]["state"], "failed");
    assert_eq!(v["originals"][0]["reason"], "unknown recipient ghost");
    assert_eq!(v["recipients"][0]["recipient"], "ghost");
    assert_eq!(v["recipients"][0]["state"], "missing");

    let r = p.swarm(&["receipts", &m4().id]);
    r.stdout_has("original: failed ");
    assert!(r.stdout.contains("\nreason: unknown recipient zed\n"));
    r.stdout_has("\nzed        missing");

    let r = p.swarm(&["receipts", "20990101T000000Z_000001_from_nobody"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        rooted(&p, &r.stderr),
        "no message with id '20990101T000000Z_000001_from_nobody' in <root>\n"
    );
}

/// `swarm audit --now 2026-06-16T01:00:05.100000Z` on the fixture.
const AUDIT_TEXT: &str = "overall
  originals: sent 3, failed 2, outbox 1
  copies:    new 2, in_process 1, completed 2
  stage                    count       p50       p90       p99       max
  created -> enqueued          5   200.0ms   300.0ms   300.0ms   300.0ms
  enqueued -> dequeued         3    21.30s    22.70s    22.70s    22.70s
  dequeued -> completed        2     1m00s     2m00s     2m00s     2m00s
  oldest waiting: <m2> at coder, enqueued 2026-06-16T00:00:05.100000Z (1h00m ago)
  failures:
        1  unknown recipient ghost
        1  unknown recipient zed

role coder
  originals: sent 2, failed 0, outbox 0
  copies:    new 1, in_process 0, completed 0
  stage                    count       p50       p90       p99       max
  created -> enqueued          1   100.0ms   100.0ms   100.0ms   100.0ms
  enqueued -> dequeued         0         -         -         -         -
  dequeued -> completed        0         -         -         -         -
  oldest waiting: <m2> at coder, enqueued 2026-06-16T00:00:05.100000Z (1h00m ago)
  failures: none

role cleaner
  originals: sent 0, failed 1, outbox 1
  copies:    new 1, in_process 0, completed 1
  stage                    count       p50       p90       p99       max
  created -> enqueued          2   100.0ms   200.0ms   200.0ms   200.0ms
  enqueued -> dequeued         1    11.40s    11.40s    11.40s    11.40s
  dequeued -> completed        1     1m00s     1m00s     1m00s     1m00s
  oldest waiting: <m3> at cleaner, enqueued 2026-06-16T00:00:07.200000Z (59m57s ago)
  failures:
        1  unknown recipient zed

role QA
  originals: sent 1, failed 1, outbox 0
  copies:    new 0, in_process 1, completed 1
  stage                    count       p50       p90       p99       max
  created -> enqueued          2   200.0ms   300.0ms   300.0ms   300.0ms
  enqueued -> dequeued         2    21.30s    22.70s    22.70s    22.70s
  dequeued -> completed        1     2m00s     2m00s     2m00s     2m00s
  oldest waiting: none
  failures:
        1  unknown recipient ghost
";

#[test]
fn audit_reports_counts_latencies_and_failures() {
    let p = fixture();
    let now = "2026-06-16T01:00:05.100000Z";
    let r = p.swarm(&["audit", "--json", "--now", now]);
    r.ok();
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let o = &v["overall"];
    assert_eq!(
        o["originals"],
        serde_json::json!({"sent": 3, "failed": 2, "outbox": 1, "held": 0})
    );
    assert_eq!(
        o["copies"],
        serde_json::json!({"new": 2, "in_process": 1, "completed": 2})
    );
    let st = &o["stages"];
    // created -> enqueued: 100, 200, 100, 200, 300 ms.
    assert_eq!(
        st["created_to_enqueued"],
        serde_json::json!({"count": 5, "p50_ms": 200.0, "p90_ms": 300.0, "p99_ms": 300.0, "max_ms": 300.0})
    );
    // enqueued -> dequeued: 11.4 s, 21.3 s, 22.7 s.
    assert_eq!(st["enqueued_to_dequeued"]["count"], 3);
    assert_eq!(st["enqueued_to_dequeued"]["p50_ms"], 21300.0);
    assert_eq!(st["enqueued_to_dequeued"]["max_ms"], 22700.0);
    // dequeued -> completed: 60 s, 120 s.
    assert_eq!(st["dequeued_to_completed"]["p50_ms"], 60000.0);
    assert_eq!(st["dequeued_to_completed"]["max_ms"], 120000.0);
    assert_eq!(o["oldest_waiting"]["id"], m2().id);
    assert_eq!(o["oldest_waiting"]["recipient"], "coder");
    assert_eq!(o["oldest_waiting"]["age_ms"], 3600000.0);
    assert_eq!(
        o["failures"],
        serde_json::json!([
            {"reason": "unknown recipient ghost", "count": 1},
            {"reason": "unknown recipient zed", "count": 1}
        ])
    );
    let roles: Vec<&str> = v["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["coder", "cleaner", "QA"]);
    let cleaner = &v["roles"][1];
    assert_eq!(
        cleaner["originals"],
        serde_json::json!({"sent": 0, "failed": 1, "outbox": 1, "held": 0})
    );
    assert_eq!(
        cleaner["copies"],
        serde_json::json!({"new": 1, "in_process": 0, "completed": 1})
    );
    assert_eq!(cleaner["oldest_waiting"]["id"], m3().id);

    let r = p.swarm(&["audit", "--now", now]);
    r.ok();
    assert_eq!(
        r.stdout,
        AUDIT_TEXT
            .replace("<m2>", &m2().id)
            .replace("<m3>", &m3().id)
    );
}

#[test]
fn audit_check_passes_on_a_consistent_trail() {
    let p = fixture();
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.stdout, "CHECK OK: 6 originals, 5 copies, 0 unreadable\n");
    let r = p.swarm(&["audit", "--check", "--json"]);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["violations"], serde_json::json!([]));
}

#[test]
fn audit_check_lists_each_planted_violation() {
    let p = fixture();
    let root = |s: &str| s.replace("<root>", &p.root.display().to_string());
    // malformed: no blank line after the headers.
    put(&hand(&p, "coder", "sent/bad.handoff"), "id: x\n");
    // missing_copy: a sent message nobody received.
    let lost = Msg::new(20, "coder", "QA", "note").about("lost");
    put(
        &hand(&p, "coder", &format!("sent/{}", lost.name())),
        &lost.original(),
    );
    // orphan_copy: a copy without any original.
    let ghost = Msg::new(21, "QA", "coder", "note").about("ghost");
    put(
        &hand(&p, "coder", &format!("inbox/new/{}", ghost.name())),
        &ghost.copy("coder", &["2026-06-16T00:00:01Z"]),
    );
    // time_order: dequeued before enqueued.
    let early = Msg::new(22, "QA", "coder", "note").about("early");
    put(
        &hand(&p, "QA", &format!("sent/{}", early.name())),
        &early.original(),
    );
    put(
        &hand(&p, "coder", &format!("inbox/in_process/{}", early.name())),
        &early.copy("coder", &["2026-06-16T00:00:09Z", "2026-06-16T00:00:08Z"]),
    );
    // recipient_not_in_to (+ a missing copy for the real recipient).
    let astray = Msg::new(23, "coder", "cleaner", "note").about("astray");
    put(
        &hand(&p, "coder", &format!("sent/{}", astray.name())),
        &astray.original(),
    );
    put(
        &hand(&p, "QA", &format!("inbox/new/{}", astray.name())),
        &astray.copy("QA", &["2026-06-16T00:00:01Z"]),
    );
    // completed_twice: a second completed copy at cleaner.
    put(
        &hand(&p, "cleaner", &format!("inbox/completed/{}", m1().name())),
        &m1().copy(
            "cleaner",
            &[
                "2026-06-16T00:00:01Z",
                "2026-06-16T00:00:02Z",
                "2026-06-16T00:00:03Z",
            ],
        ),
    );
    // duplicate_original.
    put(
        &hand(
            &p,
            "QA",
            &format!("sent/2026-06-16T00:00:06.000Z_{}", m2().name()),
        ),
        &m2().original(),
    );
    // wrong_inbox: a copy for cleaner in the main worktree's inbox.
    let wrong = Msg::new(24, "QA", "cleaner", "note").about("wrong");
    put(
        &hand(&p, "QA", &format!("sent/{}", wrong.name())),
        &wrong.original(),
    );
    put(
        &hand(&p, "coder", &format!("inbox/new/{}", wrong.name())),
        &wrong.copy("cleaner", &["2026-06-16T00:00:01Z"]),
    );
    // state_mismatch + bad_time: a copy in new/ carrying a bad dequeued_at.
    let odd = Msg::new(25, "coder", "QA", "note").about("odd");
    put(
        &hand(&p, "coder", &format!("sent/{}", odd.name())),
        &odd.original(),
    );
    put(
        &hand(&p, "QA", &format!("inbox/new/{}", odd.name())),
        &odd.copy("QA", &["2026-06-16T00:00:01Z", "soon"]),
    );
    // missing_header: an original without created_at.
    put(
        &hand(&p, "coder", "outbox/50_nodate.handoff"),
        "id: 20260616T000000Z_000026_from_coder\nfrom: coder\nto: QA\ntype: note\n\nx\n",
    );
    // rejected: moved aside by ready-next.
    put(
        &hand(&p, "QA", "inbox/rejected/2026-06-16T00:00:00Z_x.handoff"),
        "junk",
    );
    put(
        &hand(
            &p,
            "QA",
            "inbox/rejected/2026-06-16T00:00:00Z_x.handoff.error",
        ),
        "malformed: no blank line after the headers\n",
    );

    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let sent = |m: &Msg| root(&format!("<root>/.swarmforge/handoffs/sent/{}", m.name()));
    let want = [
        format!(
            "VIOLATION bad_time {}: 'dequeued_at' is not an RFC 3339 time: soon",
            root(&format!("<root>/.swarmforge/handoffs/inbox/new/{}", odd.name()))
        ),
        format!(
            "VIOLATION completed_twice {} -> cleaner: 2 completed copies: {}, {}",
            m1().id,
            root(&format!(
                "<root>/.worktrees/cleaner/.swarmforge/handoffs/inbox/completed/{}",
                m1().name()
            )),
            root(&format!(
                "<root>/.worktrees/cleaner/.swarmforge/handoffs/inbox/completed/batch_20260616T000010Z_000001/{}",
                m1().name()
            ))
        ),
        format!(
            "VIOLATION duplicate_original {}: 2 originals: {}, {}",
            m2().id,
            root(&format!(
                "<root>/.swarmforge/handoffs/sent/2026-06-16T00:00:06.000Z_{}",
                m2().name()
            )),
            sent(&m2())
        ),
        format!(
            "VIOLATION malformed {}: malformed: no blank line after the headers",
            root("<root>/.swarmforge/handoffs/sent/bad.handoff")
        ),
        format!(
            "VIOLATION missing_copy {} -> cleaner: no copy at cleaner of {}",
            astray.id,
            sent(&astray)
        ),
        format!(
            "VIOLATION missing_copy {} -> QA: no copy at QA of {}",
            lost.id,
            sent(&lost)
        ),
        format!(
            "VIOLATION missing_header {}: no 'created_at' header",
            root("<root>/.swarmforge/handoffs/outbox/50_nodate.handoff")
        ),
        format!(
            "VIOLATION orphan_copy {}: no original of {} in any outbox, sent/ or failed/",
            root(&format!("<root>/.swarmforge/handoffs/inbox/new/{}", ghost.name())),
            ghost.id
        ),
        format!(
            "VIOLATION recipient_not_in_to {}: recipient 'QA' is not in to 'cleaner' (from 'coder')",
            root(&format!("<root>/.swarmforge/handoffs/inbox/new/{}", astray.name()))
        ),
        format!(
            "VIOLATION rejected {}: malformed: no blank line after the headers",
            root("<root>/.swarmforge/handoffs/inbox/rejected/2026-06-16T00:00:00Z_x.handoff")
        ),
        format!(
            "VIOLATION state_mismatch {}: 'dequeued_at' set but the copy is in new/",
            root(&format!("<root>/.swarmforge/handoffs/inbox/new/{}", odd.name()))
        ),
        format!(
            "VIOLATION time_order {}: dequeued_at 2026-06-16T00:00:08.000000Z is before enqueued_at 2026-06-16T00:00:09.000000Z",
            root(&format!("<root>/.swarmforge/handoffs/inbox/in_process/{}", early.name()))
        ),
        format!(
            "VIOLATION wrong_inbox {}: recipient 'cleaner' works in {}",
            root(&format!("<root>/.swarmforge/handoffs/inbox/new/{}", wrong.name())),
            root("<root>/.worktrees/cleaner")
        ),
    ];
    let got: Vec<&str> = r.stdout.lines().collect();
    let (last, list) = got.split_last().unwrap();
    // wrong.name() is also missing at cleaner's own inbox: listed too.
    let mut want: Vec<String> = want.to_vec();
    want.push(format!(
        "VIOLATION missing_copy {} -> cleaner: no copy at cleaner of {}",
        wrong.id,
        sent(&wrong)
    ));
    want.sort();
    assert_eq!(list, want.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        *last,
        format!(
            "CHECK FAILED: {} violations (13 originals, 11 copies, 1 unreadable)",
            want.len()
        )
    );
    let r = p.swarm(&["audit", "--check", "--json"]);
    assert_eq!(r.code, 2);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["violations"].as_array().unwrap().len(), want.len());
}

#[test]
fn audit_check_expands_all_and_catches_a_missing_recipient() {
    let p = fixture();
    // m3 went to `all`: remove QA's copy.
    fs::remove_file(hand(&p, "QA", &format!("inbox/completed/{}", m3().name()))).unwrap();
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stdout.starts_with(&format!(
            "VIOLATION missing_copy {} -> QA: no copy at QA of ",
            m3().id
        )),
        "{}",
        r.stdout
    );
    // A copy of an `all` message back at its sender is not addressed.
    put(
        &hand(&p, "coder", &format!("inbox/new/{}", m3().name())),
        &m3().copy("coder", &["2026-06-16T00:00:08Z"]),
    );
    let r = p.swarm(&["audit", "--check"]);
    assert!(r.stdout.contains("VIOLATION recipient_not_in_to "));
    assert!(r
        .stdout
        .contains("recipient 'coder' is not in to 'all' (from 'coder')"));
}

#[test]
fn hostile_files_are_reported_never_crash() {
    let p = fixture();
    for d in MESSAGE_DIRS {
        let dir = hand(&p, "QA", d);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("bin.handoff"), [0xff, 0xfe, 0x00, b'\n', b'\n']).unwrap();
        fs::write(dir.join("empty.handoff"), "").unwrap();
        fs::write(dir.join("esc.handoff"), "id: x\x1b]0;pwned\x07\n\nb\n").unwrap();
        fs::write(dir.join("nul.handoff"), "id: y\n\nbody\x00\n").unwrap();
        fs::write(dir.join("big.handoff"), "x".repeat(2 * 1024 * 1024)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("link.handoff")).unwrap();
        fs::create_dir_all(dir.join("adir.handoff")).unwrap();
        fs::write(dir.join("noval.handoff"), "id\n\n").unwrap();
        // Parses, but says nothing useful.
        fs::write(dir.join("bare.handoff"), "\n\x09tab only\n").unwrap();
    }
    for args in [
        vec!["transcript"],
        vec!["transcript", "--format", "jsonl"],
        vec!["transcript", "--format", "md"],
        vec!["audit"],
        vec!["audit", "--json"],
        vec!["audit", "--check"],
        vec!["audit", "--check", "--json"],
        vec!["receipts", "x"],
        vec!["receipts", "y"],
        vec!["events"],
    ] {
        let r = p.swarm(&args);
        assert!(
            !r.stderr.contains("panicked") && r.code >= 0 && r.code <= 2,
            "{args:?}: {} {}",
            r.code,
            r.stderr
        );
        assert!(
            !r.stdout.contains('\x1b') && !r.stderr.contains('\x1b'),
            "{args:?} printed a raw escape"
        );
    }
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 2);
    // 7 refused files in each of 6 folders.
    assert_eq!(
        r.stdout.matches("VIOLATION malformed ").count(),
        7 * 6,
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("not valid UTF-8"));
    assert!(r.stdout.contains("symlink"));
    assert!(r.stdout.contains("file too large (2097152 bytes)"));
    // The parsable `bare.handoff` lacks every header.
    assert!(r.stdout.contains("bare.handoff: no 'id' header"));
    let r = p.swarm(&["transcript"]);
    assert!(
        r.stdout.starts_with(TEXT) || r.stdout.contains("[? -> ?] ? tab only"),
        "{}",
        r.stdout
    );
}

fn events_file(p: &Project, text: &str) -> PathBuf {
    let path = p.root.join(".swarmforge/daemon/events.jsonl");
    put(&path, text);
    path
}

const E1: &str = r#"{"kind":"started","time":"2026-06-16T00:00:00.000000Z","id":null,"from":null,"to":null,"recipient":null,"path":null,"reason":null}"#;
const E2: &str = r#"{"kind":"delivered","time":"2026-06-16T00:00:01.000000Z","id":"i","from":"coder","to":"QA","recipient":"QA","path":"/p","reason":null}"#;
const E3: &str = r#"{"kind":"failed","time":"2026-06-16T00:00:02.000000Z","id":"j","from":"coder","to":"zed","recipient":null,"path":"/q","reason":"unknown recipient zed"}"#;

#[test]
fn events_since_resumes_exactly() {
    let p = fixture();
    let r = p.swarm(&["events"]);
    r.ok();
    assert_eq!(r.stdout, "");
    events_file(&p, &format!("{E1}\n{E2}\n{E3}\n{{\"kind\":\"half"));
    let r = p.swarm(&["events"]);
    r.ok();
    // The line still being written is held back.
    assert_eq!(r.stdout, format!("{E1}\n{E2}\n{E3}\n"));
    let r = p.swarm(&["events", "--with-offset"]);
    let o1 = E1.len() + 1;
    let o2 = o1 + E2.len() + 1;
    let o3 = o2 + E3.len() + 1;
    assert_eq!(r.stdout, format!("{o1} {E1}\n{o2} {E2}\n{o3} {E3}\n"));
    let r = p.swarm(&["events", "--since", &o1.to_string()]);
    assert_eq!(r.stdout, format!("{E2}\n{E3}\n"));
    let r = p.swarm(&["events", "--since", &o3.to_string(), "--with-offset"]);
    r.ok();
    assert_eq!(r.stdout, "");
    // Completing the line makes it appear at the stored offset.
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(p.root.join(".swarmforge/daemon/events.jsonl"))
        .unwrap();
    f.write_all(b"\"}\n").unwrap();
    let r = p.swarm(&["events", "--since", &o3.to_string(), "--with-offset"]);
    assert_eq!(r.stdout, format!("{} {{\"kind\":\"half\"}}\n", o3 + 16));
    let r = p.swarm(&["events", "--since", "5"]);
    assert_eq!(r.code, 1);
    r.stderr_has("offset 5 is not at the start of a line");
    let r = p.swarm(&["events", "--since", "99999"]);
    assert_eq!(r.code, 1);
    r.stderr_has("offset 99999 is beyond the end of");
}

#[test]
fn events_follow_streams_new_lines() {
    let p = fixture();
    let path = events_file(&p, &format!("{E1}\n"));
    let o1 = (E1.len() + 1).to_string();
    let f = Follower::spawn(&p, &["events", "--follow", "--with-offset", "--since", &o1]);
    let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(format!("{E2}\n").as_bytes()).unwrap();
    let o2 = E1.len() + 1 + E2.len() + 1;
    f.wait_for(&format!("{o2} {E2}\n"));
    file.write_all(E3.as_bytes()).unwrap();
    file.write_all(b"\n").unwrap();
    f.wait_for(E3);
    assert!(!f.text().contains(E1), "{}", f.text());
}

#[test]
fn events_follow_waits_for_the_file_to_appear() {
    let p = fixture();
    let f = Follower::spawn(&p, &["events", "--follow"]);
    // Nothing yet: the daemon folder does not even exist.
    events_file(&p, &format!("{E1}\n"));
    f.wait_for(E1);
}

#[test]
fn roles_sharing_a_worktree_share_one_copy() {
    let p = fixture();
    // coder and QA share the main worktree: the daemon delivers once there.
    let m = Msg::new(30, "cleaner", "coder,QA", "note")
        .about("both of you")
        .at("2026-06-16T00:00:20.000000Z");
    put(
        &hand(&p, "cleaner", &format!("sent/{}", m.name())),
        &m.original(),
    );
    put(
        &hand(&p, "coder", &format!("inbox/new/{}", m.name())),
        &m.copy("coder", &["2026-06-16T00:00:20.100000Z"]),
    );
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let r = p.swarm(&["receipts", &m.id]);
    r.ok();
    let rows: Vec<&str> = r.stdout.lines().skip(7).collect();
    assert!(rows[1].starts_with("coder  "), "{}", r.stdout);
    assert!(
        rows[2].starts_with("QA (shared inbox, copy for coder)  new  "),
        "{}",
        r.stdout
    );
    // A second copy in that inbox is one too many.
    put(
        &hand(&p, "coder", &format!("inbox/completed/{}", m.name())),
        &m.copy(
            "QA",
            &[
                "2026-06-16T00:00:20.100000Z",
                "2026-06-16T00:00:21Z",
                "2026-06-16T00:00:22Z",
            ],
        ),
    );
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stdout.starts_with(&format!(
            "VIOLATION duplicate_copy {} -> QA,coder: 2 copies: ",
            m.id
        )),
        "{}",
        r.stdout
    );
}

#[test]
fn forum_log_and_transcript_agree_after_a_real_delivery() {
    let p = Project::new(&[("coder", "task"), ("QA", "task")]);
    p.send(
        "coder",
        "type: note\nto: QA\npriority: 10\nmessage: first\n",
    )
    .ok();
    let commit = p.commit("work");
    p.send(
        "QA",
        &format!(
            "type: git_handoff\nto: coder\npriority: 20\ntask: fix-login\ncommit: {}\n",
            &commit[..10]
        ),
    )
    .ok();
    p.deliver_once().ok();
    p.run(Some("QA"), "ready-next", &[]).ok();
    p.run(Some("QA"), "done-current", &[]).ok();
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.stdout, "CHECK OK: 2 originals, 2 copies, 0 unreadable\n");
    let forum = fs::read_to_string(p.path(".swarmforge/forum.log")).unwrap();
    let t = p.swarm(&["transcript"]);
    t.ok();
    // Same lines, but forum.log carries the date inside the brackets.
    let mut day = String::new();
    let mut from_transcript = Vec::new();
    for l in t.stdout.lines() {
        match l.strip_prefix("--- ") {
            Some(d) => day = d[..10].to_string(),
            None => from_transcript.push(format!("[{day} {}", &l[1..])),
        }
    }
    let mut from_forum: Vec<String> = forum.lines().map(str::to_string).collect();
    from_forum.sort();
    from_transcript.sort();
    assert_eq!(from_forum, from_transcript, "{forum}\n{}", t.stdout);
    assert!(
        forum.contains("[QA -> coder] git_handoff fix-login\n"),
        "{forum}"
    );
}
