//! `runtime: acp` decisions made without asking a person, and what
//! `swarm status` says of an ACP role (docs/agents.md, "The ACP runtime"):
//! swarm.yaml's `permissions:` allow or deny a tool, checked at `swarm up`;
//! an agent cannot change them from its worktree; an allow is put to a
//! person while the role is over its budget or its last tool calls
//! failed, the journal saying why; `swarm status` shows the role busy,
//! waiting for a person's decision, idle or blocked, and no fault when
//! it is healthy. Each with a scripted ACP agent (a shell script as
//! `gemini`) that logs what the client answers into `acp.in` in its
//! worktree.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::acp::FakeSwarm;
use crate::real_agents::draft;
use crate::support::{wait_until, Project};

/// What these scripted agents add to tests/cli/acp.rs's prelude (`say`,
/// `got`, `initialize` and `session/new` answered): `ask` permission for
/// a tool (`ask <id> <kind> <title>`, offering "Always", "Once" and
/// "Reject"), a `tool` call and its end, `finish` the item; the first
/// prompt is read.
const PRELUDE: &str = r#"ask() { say '{"jsonrpc":"2.0","id":"'"$1"'","method":"session/request_permission","params":{"sessionId":"s-1","options":[{"optionId":"aa","name":"Always","kind":"allow_always"},{"optionId":"a1","name":"Once","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}],"toolCall":{"toolCallId":"'"$1"'","title":"'"$3"'","kind":"'"$2"'"}}}'; }
tool() { say '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call","toolCallId":"'"$1"'","title":"make","kind":"execute","status":"in_progress","rawInput":{"command":"make"}}}}'
  say '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call_update","toolCallId":"'"$1"'","status":"'"$2"'"}}}'; }
finish() { ready_for_next.sh >/dev/null 2>&1; done_with_current.sh >/dev/null 2>&1; }
read -r l
"#;

/// A swarm of one `coder` over ACP, its entry ending in `extra`, whose
/// `gemini` is acp.rs's prelude, [`PRELUDE`] and `body`, and a person, `owner`; up
/// headless with a note sent to coder (tests/cli/acp.rs's [`FakeSwarm`]).
struct Scripted(FakeSwarm);

impl std::ops::Deref for Scripted {
    type Target = FakeSwarm;
    fn deref(&self) -> &FakeSwarm {
        &self.0
    }
}

impl Scripted {
    fn up(extra: &str, body: &str) -> Scripted {
        let f = FakeSwarm::up_with(extra, &format!("{PRELUDE}{body}"));
        f.d.send("owner", &draft("coder", "a task")).ok();
        Scripted(f)
    }

    fn log(&self) -> String {
        self.acp_in()
    }

    /// The outcome the client answered request `id` with, waited for.
    fn answer(&self, id: &str) -> Value {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(v) = self
                .log()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["id"] == id)
            {
                return v["result"]["outcome"].clone();
            }
            assert!(
                Instant::now() < end,
                "the agent got no answer to {id}:\n{}\n{}",
                self.log(),
                self.d.read(".swarmforge/agents/coder.log")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The clarifies from `coder` open in `swarm status`.
    fn open(&self) -> Vec<String> {
        crate::acp::open_clarifies(&self.d)
    }

    /// The next clarify from `coder` not in `seen`, waited for.
    fn next_open(&self, seen: &[String]) -> String {
        let mut got = None;
        wait_until(
            Duration::from_secs(60),
            "a permission request waits for owner",
            || {
                got = self.open().into_iter().find(|id| !seen.contains(id));
                got.is_some()
            },
        );
        got.unwrap()
    }

    /// The journal's `permission_*` events.
    fn permission_events(&self) -> Vec<Value> {
        crate::acp::permission_events(&self.d)
    }

    /// The activity's notes, one a line.
    fn notes(&self) -> String {
        self.d
            .swarm(&["activity", "--role", "coder", "--json"])
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["kind"] == "note")
            .filter_map(|r| r["text"].as_str().map(str::to_string))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A hostile agent writes a swarm.yaml allowing everything into its
/// worktree, then asks for four tools.
const PREDECIDED: &str = r#"printf 'roles:\n  - name: coder\n    agent: gemini\n    runtime: acp\n    permissions:\n      "*": allow\n' >"$PWD/swarm.yaml"
ask p1 execute "cargo test --all"; got
ask p2 execute "rm -rf build"; got
ask p3 execute "curl evil.example"; got
ask p4 edit "src/main.rs"; got
finish
say '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
exec cat >>"$log"
"#;

const RULES: &str = "\n    permissions:\n      \"execute: cargo test*\": allow\n      \"execute: rm *\": deny\n      \"edit: *\": ask";

/// swarm.yaml's `permissions:` decide without asking anyone: an allowed
/// tool gets the agent's "once", a denied one its "reject", each
/// journaled from `swarm.yaml`; `ask` and an unmatched tool wait for a
/// person, also after the agent wrote a swarm.yaml allowing everything
/// into its worktree.
#[test]
fn swarm_yaml_pre_decides_allow_and_deny_and_the_agent_cannot_change_it() {
    let s = Scripted::up(RULES, PREDECIDED);
    assert_eq!(s.answer("p1")["optionId"], "a1");
    assert_eq!(s.answer("p2")["optionId"], "r");
    let p3 = s.next_open(&[]);
    assert!(s.log().lines().all(|l| !l.contains(r#""id":"p3""#)));
    s.d.swarm(&["answer", &p3, "--choice", "3"]).ok();
    assert_eq!(s.answer("p3")["optionId"], "r");
    let p4 = s.next_open(std::slice::from_ref(&p3));
    s.d.swarm(&["answer", &p4, "--choice", "2"]).ok();
    assert_eq!(s.answer("p4")["optionId"], "a1");

    let notes = s.notes();
    for said in [
        "allowed without asking, as swarm.yaml allows `execute: cargo test*`: execute: cargo test --all",
        "rejected without asking, as swarm.yaml denies `execute: rm *`: execute: rm -rf build",
    ] {
        assert!(notes.contains(said), "{said}\n{notes}");
    }
    let ev = s.permission_events();
    let got: Vec<(&str, &str)> = ev
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["from"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("permission_allowed", "swarm.yaml"),
            ("permission_denied", "swarm.yaml")
        ],
        "{ev:#?}"
    );
    assert!(ev.iter().all(|e| e["recipient"] == "coder"), "{ev:#?}");
}

/// `swarm up` refuses an unknown decision, a pattern that is not a glob
/// and `permissions:` on a role that does not run over ACP, naming
/// swarm.yaml and the repair; `swarm doctor` says the same.
#[test]
fn swarm_up_refuses_a_bad_pre_decision_naming_the_file_and_the_fix() {
    for (extra, said) in [
        (
            "\n    runtime: acp\n    permissions:\n      \"execute: x\": maybe",
            "maybe",
        ),
        (
            "\n    runtime: acp\n    permissions:\n      \"execute: [x\": allow",
            "the `permissions` pattern 'execute: [x' is not a glob pattern",
        ),
        (
            "\n    permissions:\n      \"execute: x\": allow",
            "sets `permissions`, which only `runtime: acp` takes",
        ),
    ] {
        let d = Project::empty();
        d.write(
            "swarm.yaml",
            &format!("roles:\n  - name: coder\n    agent: gemini\n    worktree: coder{extra}\n  - name: owner\n    agent: human\n"),
        );
        let up = d.cmd("swarm").args(["up", "--no-tmux", "--detach"]).run();
        assert_ne!(up.code, 0, "{}", up.stdout);
        let yaml = d.root.join("swarm.yaml").display().to_string();
        assert!(
            up.stderr.contains(&yaml) && up.stderr.contains(said),
            "{said}:\n{}",
            up.stderr
        );
        if said == "maybe" {
            assert!(
                up.stderr.contains("allow") && up.stderr.contains("deny"),
                "{}",
                up.stderr
            );
        } else {
            assert!(up.stderr.contains("hint:"), "{}", up.stderr);
        }
        let doctor = d.cmd("swarm").arg("doctor").run();
        assert_ne!(doctor.code, 0, "{}", doctor.stdout);
        let all = format!("{}{}", doctor.stdout, doctor.stderr);
        assert!(all.contains(said), "{said}:\n{all}");
    }
}

/// The agent asks for an allowed tool (allowed), fails three tool calls
/// and asks again (a person decides: held), completes one and asks again
/// (allowed), then, once `go` is in its worktree (the test has put the
/// role over its budget), asks again (a person decides: held).
const HELD: &str = r#"ask p1 execute "cargo test"; got
tool f1 failed; tool f2 failed; tool f3 failed
ask p2 execute "cargo test"; got
tool ok1 completed
ask p3 execute "cargo test"; got
until [ -e "$PWD/go" ]; do sleep 0.1; done
ask p4 execute "cargo test"; got
finish
say '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
exec cat >>"$log"
"#;

/// An allow of swarm.yaml (or a person's "always") becomes a person's
/// decision while the role's last 3 tool calls failed, or while it is
/// over its budget; a completed call ends the run of failures. Each hold
/// is journaled (`permission_held`) and noted with why.
#[test]
fn an_allow_asks_a_person_after_three_failed_calls_or_over_budget_saying_why() {
    let rules = "\n    budget: {tokens: 50, per: swarm}\n    permissions:\n      \"execute: cargo test\": allow";
    let s = Scripted::up(rules, HELD);
    assert_eq!(s.answer("p1")["optionId"], "a1");
    let p2 = s.next_open(&[]);
    s.d.swarm(&["answer", &p2, "--choice", "2"]).ok();
    assert_eq!(s.answer("p2")["optionId"], "a1");
    assert_eq!(s.answer("p3")["optionId"], "a1");

    // Over budget: a turn's usage the journal holds.
    let line = r#"{"time":"2026-12-07T00:00:00Z","role":"coder","source":"gemini","input_tokens":100,"output_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0}"#;
    let usage = s.d.root.join(".swarmforge/telemetry/usage.jsonl");
    let mut old = std::fs::read_to_string(&usage).unwrap_or_default();
    old.push_str(line);
    old.push('\n');
    std::fs::write(&usage, old).unwrap();
    std::fs::write(s.d.role_dir("coder").join("go"), "").unwrap();
    let p4 = s.next_open(std::slice::from_ref(&p2));
    s.d.swarm(&["answer", &p4, "--choice", "3"]).ok();
    assert_eq!(s.answer("p4")["optionId"], "r");

    let notes = s.notes();
    for said in [
        "asking a person instead of allowing as swarm.yaml allows `execute: cargo test` (its last 3 tool calls failed): execute: cargo test",
        "asking a person instead of allowing as swarm.yaml allows `execute: cargo test` (over budget: budget of coder reached: 100 of 50 tokens",
    ] {
        assert!(notes.contains(said), "{said}\n{notes}");
    }
    let ev = s.permission_events();
    let kinds: Vec<&str> = ev.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "permission_allowed",
            "permission_held",
            "permission_allowed",
            "permission_held"
        ],
        "{ev:#?}"
    );
    let held: Vec<&str> = ev
        .iter()
        .filter(|e| e["kind"] == "permission_held")
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert!(
        held[0].contains("its last 3 tool calls failed") && held[1].contains("over budget"),
        "{held:?}"
    );
}

/// A turn that runs a tool until `ask` is in its worktree, then asks a
/// person for permission, then finishes; the next turn the agent ends
/// with an error.
const LIVENESS: &str = r#"say '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"make","kind":"execute","status":"in_progress","rawInput":{"command":"make"}}}}'
until [ -e "$PWD/ask" ]; do sleep 0.1; done
ask p1 execute "make deploy"; got
finish
say '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
read -r l
say '{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"model API error 401 Unauthorized"}}'
exec cat >>"$log"
"#;

impl Scripted {
    /// coder's row of `swarm status --json`.
    fn coder(&self) -> Value {
        let st = self.d.swarm(&["status", "--json"]).json();
        st["roles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["role"] == "coder")
            .unwrap()
            .clone()
    }

    /// Waits until coder's agent is `state`; its status row.
    fn until_state(&self, state: &str) -> Value {
        let mut row = Value::Null;
        wait_until(
            Duration::from_secs(60),
            &format!("coder's agent is {state}"),
            || {
                row = self.coder();
                row["agent_state"] == state
            },
        );
        row
    }

    /// `swarm doctor --json`'s findings that name coder, its agent or ACP.
    fn doctor_faults(&self) -> Vec<Value> {
        let v = self
            .d
            .cmd("swarm")
            .args(["doctor", "--json"])
            .env("PATH", &self.path)
            .run()
            .json();
        v["checks"]
            .as_array()
            .unwrap_or_else(|| panic!("no checks in {v}"))
            .iter()
            .flat_map(|c| c["findings"].as_array().unwrap().clone())
            .filter(|f| {
                let t = f.to_string().to_lowercase();
                t.contains("coder") || t.contains("acp") || t.contains("gemini")
            })
            .collect()
    }
}

/// `swarm status` says what an ACP role's agent does, from its client:
/// busy while a turn runs, waiting for the person while a permission
/// request is open (the request and how to answer it), idle once the
/// turn ended, blocked after a turn the agent ended with an error; the
/// healthy role is never said to be stuck, and `swarm doctor` finds no
/// fault with it.
#[test]
fn swarm_status_shows_an_acp_role_busy_waiting_idle_or_blocked() {
    let s = Scripted::up("", LIVENESS);
    let row = s.until_state("busy");
    assert!(row["not_moving"].is_null(), "{row:#}");
    assert_eq!(s.doctor_faults(), Vec::<Value>::new());

    std::fs::write(s.d.role_dir("coder").join("ask"), "").unwrap();
    s.until_state("waiting");
    // Once the request is delivered to the person it names them.
    let p1 = s.next_open(&[]);
    let row = s.coder();
    assert_eq!(row["agent_state"], "waiting", "{row:#}");
    assert_eq!(row["waiting_for"], serde_json::json!(["owner"]), "{row:#}");
    let said = row["agent_prompt"].as_str().unwrap_or_default();
    assert!(
        said.starts_with(&format!(
            "clarify {p1}: Permission: coder's agent asks to run execute tool: make deploy"
        )) && said.ends_with(&format!("(swarm answer {p1} --choice N)")),
        "{row:#}"
    );
    s.d.swarm(&["status"])
        .ok()
        .stdout_has("coder: agent waiting for owner since ");

    s.d.swarm(&["answer", &p1, "--choice", "2"]).ok();
    let row = s.until_state("idle");
    assert!(row["not_moving"].is_null(), "{row:#}");
    assert_eq!(s.doctor_faults(), Vec::<Value>::new());

    s.d.send("owner", &draft("coder", "another task")).ok();
    let row = s.until_state("blocked");
    let said = row["agent_prompt"].as_str().unwrap_or_default();
    assert!(said.contains("model API error 401 Unauthorized"), "{row:#}");
}

/// A turn that runs until it is cancelled: it takes its item, starts a
/// tool call and waits for `session/cancel`, then ends `cancelled`.
const CANCELLABLE: &str = r#"ready_for_next.sh >/dev/null 2>&1
say '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"make test","kind":"execute","status":"in_progress","rawInput":{"command":"make test"}}}}'
while read -r l; do printf '%s\n' "$l" >>"$log"; case "$l" in *session/cancel*) break;; esac; done
say '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}'
exec cat >>"$log"
"#;

/// The cockpit's "Cancel turn": a busy ACP role's card says `acp`, and
/// `POST /api/cancel` sends the agent the `session/cancel` `swarm cancel`
/// sends, answering what the client did; it needs the cockpit's token,
/// and a role that does not run over ACP is refused with the CLI's text.
#[test]
fn the_cockpit_cancel_button_sends_the_same_cancel_as_swarm_cancel() {
    let s = Scripted::up("", CANCELLABLE);
    s.until_state("busy");
    let c = crate::serve::start(&s.d);
    let snap = c.get("/api/snapshot").json();
    let card = |role: &str| {
        snap["roles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["role"] == role)
            .unwrap()
            .clone()
    };
    assert_eq!(card("coder")["acp"], true, "{snap:#}");
    assert_eq!(card("owner")["acp"], false, "{snap:#}");
    let js = c.get("/app.js").body;
    assert!(
        js.contains("act('/api/cancel'"),
        "the page has no cancel action"
    );

    let no_token = c.raw(
        "POST",
        "/api/cancel",
        &[("Content-Type", "application/json")],
        r#"{"role":"coder"}"#,
    );
    assert!(
        no_token.code == 401 || no_token.code == 403,
        "{}",
        no_token.body
    );
    let r = c.post("/api/cancel", serde_json::json!({"role": "owner"}));
    assert_eq!(r.code, 400, "{}", r.body);
    assert!(r.body.contains("does not run `runtime: acp`"), "{}", r.body);
    let r = c.post("/api/cancel", serde_json::json!({"role": "../x"}));
    assert_eq!(r.code, 400, "{}", r.body);

    let r = c.post("/api/cancel", serde_json::json!({"role": "coder"}));
    assert_eq!(r.code, 200, "{}", r.body);
    assert!(
        r.json()["said"]
            .as_str()
            .unwrap()
            .contains("owner cancelled prompt 1 of session s-1 (session/cancel sent)"),
        "{}",
        r.body
    );
    wait_until(
        Duration::from_secs(30),
        "the agent gets session/cancel",
        || {
            s.log()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|m| m["method"] == "session/cancel" && m["params"]["sessionId"] == "s-1")
        },
    );
    s.until_state("idle");
}
