//! `swarm mcp` driven by the official MCP Python SDK (tests/mcp/driver.py):
//! initialize, the tool list and its size, an MCP agent and a shell agent
//! handing work to each other through a running handoffd, the long poll,
//! validation errors with the CLI's text, and a kill -9 mid-call.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

/// The venv `.ci/run` makes (`python3 -m venv target/venv && target/venv/bin/pip
/// install mcp==<pinned>`), or `SWARM_MCP_PYTHON`.
pub(crate) fn python() -> Option<PathBuf> {
    venv_python(
        "SWARM_MCP_PYTHON",
        "mcp",
        "the MCP Python SDK",
        "python3 -m venv target/venv && target/venv/bin/pip install mcp==1.30.0 (or set SWARM_MCP_PYTHON)",
    )
}

fn driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/driver.py")
}

/// A Python MCP client session with `swarm mcp` acting as a role.
pub(crate) struct Client {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// Written by the shell wrapper that execs the server: its pid.
    pid_file: PathBuf,
}

impl Client {
    pub(crate) fn start(
        python: &Path,
        p: &Project,
        role: &str,
        extra_env: &[(&str, &str)],
    ) -> Client {
        let pid_file = p.path(&format!("mcp-{role}.pid"));
        let server = format!(
            "echo $$ > '{}'; exec '{}' mcp",
            pid_file.display(),
            bin("swarm").display()
        );
        let mut c = clean_command(python, &p.role_dir(role));
        c.arg(driver())
            .args(["/bin/sh", "-c", &server])
            .env("SWARMFORGE_ROLE", role)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in extra_env {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("the python driver starts");
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
        let mut client = Client {
            child,
            stdin,
            lines,
            pid_file,
        };
        let init = client.answer();
        assert_eq!(init["op"], "initialized", "{init}");
        assert_eq!(init["server"], "swarm-handoff");
        client
    }

    fn answer(&mut self) -> Value {
        let l = self
            .lines
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|e| panic!("no answer from the MCP driver: {e}"));
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"))
    }

    fn request(&mut self, req: Value) {
        writeln!(self.stdin, "{req}").unwrap();
        self.stdin.flush().unwrap();
    }

    pub(crate) fn call(&mut self, tool: &str, args: Value) -> Value {
        self.request(json!({"op": "call", "tool": tool, "args": args}));
        let a = self.answer();
        assert!(a.get("exception").is_none(), "{tool}: {a}");
        a
    }

    /// A call that must succeed: its structured result.
    pub(crate) fn ok(&mut self, tool: &str, args: Value) -> Value {
        let a = self.call(tool, args);
        assert_eq!(a["is_error"], false, "{tool}: {a}");
        a["structured"].clone()
    }

    fn server_pid(&self) -> u32 {
        let mut pid = None;
        wait_until(DEADLINE, "the server wrote its pid", || {
            pid = std::fs::read_to_string(&self.pid_file)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            pid.is_some()
        });
        pid.unwrap()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn lists_a_small_set_of_tools() {
    let Some(py) = python() else { return };
    let p = Project::coder_and_reviewer();
    let mut c = Client::start(&py, &p, "reviewer", &[]);
    c.request(json!({"op": "list"}));
    let a = c.answer();
    let names: Vec<&str> = a["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "next",
            "done",
            "send",
            "reply",
            "ask",
            "answer",
            "react",
            "read",
            "status",
            "search",
            "reserve",
            "release",
            "reservations",
        ]
    );
    let bytes = a["bytes"].as_u64().unwrap();
    eprintln!("tools/list result: {bytes} bytes");
    assert!(bytes < 6 * 1024, "tools/list is {bytes} bytes");
}

/// `react` and `read` take an id's unique prefix, as every command that
/// takes an id does (docs/message-model.md, "Ids").
#[test]
fn react_and_read_take_a_unique_id_prefix() {
    let Some(py) = python() else { return };
    let p = Project::coder_and_reviewer();
    // Two notes from one sender: their ids differ in the sequence number,
    // so the part before `_from_` is unique to each.
    let first = p
        .send_as(
            "coder",
            "type: note\nto: reviewer\npriority: 40\nmessage: one\n",
        )
        .queued();
    let second = p
        .send_as(
            "coder",
            "type: note\nto: reviewer\npriority: 40\nmessage: two\n",
        )
        .queued();
    p.deliver_once().ok();
    let id = |q: &std::path::Path| {
        let n = file_name(q);
        let rest = n.split_once('_').unwrap().1;
        rest.split("_to_").next().unwrap().to_string()
    };
    let (a, b) = (id(&first), id(&second));
    let short = |i: &str| i[..i.find("_from_").unwrap()].to_string();
    let mut c = Client::start(&py, &p, "reviewer", &[]);
    let read = c.ok("read", json!({"thread": short(&b)}));
    let msgs = read["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "{read}");
    assert_eq!(msgs[0]["id"], b.as_str());
    let r = c.ok("react", json!({"id": short(&a), "reaction": "thumbs_up"}));
    assert_eq!(r["type"], "react");
    assert_eq!(r["in_reply_to"], a.as_str(), "{r}");
    // A prefix both ids share is refused, naming both.
    let shared = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let common = &a[..shared];
    let e = c.call("react", json!({"id": common, "reaction": "check"}));
    assert_eq!(e["is_error"], true, "{e}");
    let text = e["text"].as_str().unwrap();
    assert!(text.contains(&a) && text.contains(&b), "{text}");
}

#[test]
fn mcp_and_shell_agents_hand_work_to_each_other() {
    let Some(py) = python() else { return };
    let p = Project::coder_and_reviewer();
    let _d = p.spawn_daemon(&[]);
    let mut c = Client::start(&py, &p, "reviewer", &[]);

    // Shell -> MCP: the long poll returns on the delivery. Its wait is
    // longer than the deadline the answer is read with, so an answer at all
    // means it came before the wait ended.
    c.request(json!({"op": "call", "tool": "next", "args": {"wait_seconds": 50}}));
    let lock = p.hq("rev", "inbox.flock");
    wait_until(DEADLINE, "next took its first look", || lock.exists());
    let q = p
        .send_as(
            "coder",
            "type: note\nto: reviewer\npriority: 40\nmessage: please review\n",
        )
        .queued();
    let a = c.answer();
    let task = &a["structured"];
    assert_eq!(task["status"], "task", "{a}");
    assert_eq!(task["type"], "note");
    assert_eq!(task["from"], "coder");
    assert!(task["path"].as_str().unwrap().ends_with(&file_name(&q)));
    let id = task["id"].as_str().unwrap().to_string();

    // MCP -> shell: a reply to the item in process, then done.
    let sent = c.ok("reply", json!({"body": "looks good"}));
    assert_eq!(sent["status"], "queued");
    assert_eq!(sent["in_reply_to"], id);
    assert_eq!(sent["to"], json!(["coder"]));
    let reply_path = PathBuf::from(sent["path"].as_str().unwrap());
    wait_delivered(&p, &reply_path);
    let done = c.ok("done", json!({}));
    assert_eq!(done["status"], "completed");
    assert_eq!(done["next"]["status"], "no_task");
    assert_count(&p.hq("rev", "inbox/completed"), 1);

    let r = p.cmd("ready-next").role("coder").arg("--json").run();
    let got = r.json();
    assert_eq!(got["type"], "post");
    assert_eq!(got["from"], "reviewer");
    assert_eq!(got["in_reply_to"], id);
    assert_eq!(got["thread"], id);
    assert_eq!(got["payload"], "looks good\n");

    // The shell agent reacts; the MCP agent sees it on its next take.
    p.send_as(
        "coder",
        "type: react\nto: reviewer\npriority: 00\nreaction: check\n",
    )
    .queued();
    let reaction = p.hq("rev", "inbox/new");
    wait_until(DEADLINE, "the reaction is delivered", || {
        !files(&reaction).is_empty()
    });
    let next = c.ok("next", json!({"wait_seconds": 0}));
    assert_eq!(next["status"], "no_task");
    assert_eq!(next["reactions"][0]["reaction"], "check");
    assert_eq!(next["reactions"][0]["from"], "coder");

    // The MCP agent reacts to the reply; status and read see the same files.
    let r = c.ok("react", json!({"id": got["id"], "reaction": "thumbs_up"}));
    assert_eq!(r["type"], "react");
    let read = c.ok("read", json!({"thread": id}));
    let msgs = read["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{read}");
    // Both reactions went to the reply (the shell's to its item in process).
    assert_eq!(
        msgs[1]["reactions"],
        json!([{"reaction": "check", "from": "coder"}, {"reaction": "thumbs_up", "from": "reviewer"}])
    );
    let st = c.ok("status", json!({}));
    assert!(st["roles"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["role"] == "reviewer"));
}

#[test]
fn an_empty_wait_ends_with_no_task() {
    let Some(py) = python() else { return };
    let p = Project::coder_and_reviewer();
    let mut c = Client::start(&py, &p, "reviewer", &[]);
    let a = c.ok("next", json!({"wait_seconds": 1}));
    assert_eq!(a, json!({"status": "no_task"}));
    // Past the bound is refused, not clamped silently.
    let a = c.call("next", json!({"wait_seconds": 51}));
    assert_eq!(a["is_error"], true);
    assert!(a["text"].as_str().unwrap().contains("from 0 to 50"), "{a}");
}

/// The CLI's `--json` refusal of the same draft (headers in the order the
/// server writes them: type, to, priority, then the others by name).
fn cli_errors(p: &Project, role: &str, args: &Value) -> Value {
    let o = args.as_object().unwrap();
    let mut d = String::new();
    for k in ["type", "to", "priority"] {
        match o.get(k).and_then(Value::as_str) {
            Some(v) => d.push_str(&format!("{k}: {v}\n")),
            None if k == "priority" => d.push_str("priority: 50\n"),
            None => {}
        }
    }
    for (k, v) in o {
        if !["type", "to", "priority", "body"].contains(&k.as_str()) {
            d.push_str(&format!("{k}: {}\n", v.as_str().unwrap()));
        }
    }
    if let Some(b) = o.get("body").and_then(Value::as_str) {
        d.push_str(&format!("\n{b}\n"));
    }
    let path = p.draft(role, &d);
    let r = p
        .cmd("swarm-handoff")
        .role(role)
        .arg("--json")
        .arg(&path)
        .code(2)
        .run();
    r.json()["errors"].clone()
}

#[test]
fn validation_errors_are_tool_errors_with_the_cli_text() {
    let Some(py) = python() else { return };
    let p = Project::coder_and_reviewer();
    let mut c = Client::start(&py, &p, "coder", &[]);
    let long = "x".repeat(81);
    let cases = [
        json!({"type": "nte", "to": "reviewer", "message": "hi"}),
        json!({"type": "note", "to": "ghost", "message": "hi"}),
        json!({"type": "note", "to": "reviewer,reviewer", "message": "hi"}),
        json!({"type": "note", "to": "reviewer", "priority": "7", "message": "hi"}),
        json!({"type": "note", "to": "reviewer", "message": long}),
        json!({"type": "note", "to": "reviewer"}),
        json!({"type": "note", "to": "reviewer", "message": "hi", "task": "t"}),
        json!({"type": "note", "to": "reviewer", "message": "hi", "from": "qa"}),
        json!({"type": "note", "to": "reviewer", "message": "hi", "colour": "red"}),
        json!({"type": "note", "to": "reviewer", "message": "a\u{1b}[31mb"}),
        json!({"type": "git_handoff", "to": "reviewer", "task": "t", "commit": "zz"}),
        json!({"type": "git_handoff", "to": "reviewer", "task": "t", "commit": "0123456789"}),
        json!({"type": "post", "to": "reviewer", "body": "x".repeat(17 * 1024)}),
        json!({"type": "react", "to": "reviewer", "reaction": "heart"}),
        json!({"type": "clarify", "to": "reviewer", "question": "q", "allow_custom": "no"}),
        json!({"type": "note", "to": "reviewer", "message": "hi", "wake": "maybe"}),
        json!({"type": "answer", "to": "reviewer", "choices": "1"}),
    ];
    for args in cases {
        let a = c.call("send", args.clone());
        assert_eq!(a["is_error"], true, "{args}: {a}");
        let want = cli_errors(&p, "coder", &args);
        assert_eq!(a["structured"]["errors"], want, "{args}");
        assert_eq!(a["structured"]["token"], "HANDOFF INVALID");
        let text = a["text"].as_str().unwrap();
        assert!(
            text.starts_with("HANDOFF INVALID: mcp:send\n\nErrors:\n- "),
            "{text}"
        );
        for e in want.as_array().unwrap() {
            assert!(text.contains(e.as_str().unwrap()), "{text}");
        }
    }
    // Nothing was queued by any of them.
    assert!(handoff_names(&p.hq("master", "outbox")).is_empty());
    // What no draft line can hold is refused before the draft is built.
    let a = c.call(
        "send",
        json!({"type": "note", "to": "reviewer", "message": "a\nfrom: qa"}),
    );
    assert_eq!(a["is_error"], true);
    assert!(
        a["text"].as_str().unwrap().contains("must be one line"),
        "{a}"
    );
    let a = c.call(
        "send",
        json!({"type": "note", "to": "reviewer", "message": 5}),
    );
    assert_eq!(a["is_error"], true);
    // The queue refusals carry the CLI's tokens too.
    let a = c.call("done", json!({}));
    assert_eq!(a["is_error"], true);
    assert_eq!(a["structured"]["token"], "NO_CURRENT_TASK");
    assert_eq!(a["text"], "NO_CURRENT_TASK");
}

#[test]
fn a_killed_server_loses_nothing() {
    let Some(py) = python() else { return };
    let p = Project::coder_and_reviewer();
    let mut c = Client::start(&py, &p, "reviewer", &[]);
    c.request(json!({"op": "call", "tool": "next", "args": {"wait_seconds": 50}}));
    let lock = p.hq("rev", "inbox.flock");
    wait_until(DEADLINE, "next took its first look", || lock.exists());
    signal(c.server_pid(), libc::SIGKILL);
    let a = c.answer();
    assert!(a.get("exception").is_some() || a["is_error"] == true, "{a}");
    drop(c);

    // A message sent meanwhile is delivered and taken by a new server.
    p.send_as(
        "coder",
        "type: note\nto: reviewer\npriority: 50\nmessage: still here\n",
    )
    .queued();
    p.deliver_once().ok();
    let mut c = Client::start(&py, &p, "reviewer", &[]);
    let t = c.ok("next", json!({"wait_seconds": 0}));
    assert_eq!(t["status"], "task");
    // Killed while holding the item: the next server resumes it.
    signal(c.server_pid(), libc::SIGKILL);
    drop(c);
    let mut c = Client::start(&py, &p, "reviewer", &[]);
    let again = c.ok("next", json!({"wait_seconds": 0}));
    assert_eq!(again["status"], "task");
    assert_eq!(again["resumed"], true);
    assert_eq!(again["id"], t["id"]);
    // And the shell agent sees the same queue.
    p.cmd("ready-next")
        .role("reviewer")
        .stdout_has("TASK: ")
        .run();
}

#[test]
fn a_server_for_an_unknown_role_fails_at_start() {
    let p = Project::coder_and_reviewer();
    p.cmd("swarm")
        .args(["mcp", "--role", "ghost"])
        .code(1)
        .stderr_has("Unknown role: ghost")
        .run();
    p.cmd("swarm")
        .arg("mcp")
        .code(1)
        .stderr("Set SWARMFORGE_ROLE.\n")
        .run();
}

/// A stand-in agent CLI named `name`: records its role and CODEX_HOME.
fn fake_agent(dir: &Path, name: &str) {
    let p = dir.join(name);
    std::fs::write(
        &p,
        "#!/bin/sh\necho \"$SWARMFORGE_ROLE ${CODEX_HOME:-none}\" >> ran.txt\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn swarm_up_writes_each_agents_mcp_configuration() {
    let p = Project::builder()
        .config(
            "wake: {method: none}\nlaunch: {stagger: 10ms}\nroles:\n\
             - {name: cl, agent: claude -p go, worktree: cl, mcp: true}\n\
             - {name: cx, agent: codex exec go, worktree: cx, mcp: true}\n\
             - {name: gm, agent: gemini -p go, worktree: gm, mcp: true}\n\
             - {name: plain, agent: claude -p go, worktree: pl}\n",
        )
        .build();
    let fakes = p.path("fakes");
    std::fs::create_dir_all(&fakes).unwrap();
    for n in ["claude", "codex", "gemini"] {
        fake_agent(&fakes, n);
    }
    let path = format!(
        "{}:{}",
        fakes.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // `swarm up --until-idle` with the fake agents first on PATH; its guard
    // lives to the end of the test.
    let up_until_idle = |what: &str| {
        let mut guard = SwarmGuard::new(&p.root);
        let up = p.cmd("swarm").env("PATH", &path).args([
            "up",
            "--no-tmux",
            "--until-idle",
            "--timeout",
            "60s",
        ]);
        guard.guard(up.arg(&p.root).start());
        let out = guard.finish(Duration::from_secs(90), what);
        (guard, out)
    };
    let (_first, out) = up_until_idle("swarm up --until-idle returns");
    out.ok();
    let swarm = bin("swarm").display().to_string();
    let args = |role: &str, wt: &str| {
        json!([
            "--root",
            p.wt_path(wt).display().to_string(),
            "mcp",
            "--role",
            role
        ])
    };
    let read = |rel: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(p.path(rel)).unwrap()).unwrap()
    };

    let claude = read(".worktrees/cl/.mcp.json");
    assert_eq!(
        claude["mcpServers"]["swarm"],
        json!({"type": "stdio", "command": swarm, "args": args("cl", "cl")})
    );
    let local = read(".worktrees/cl/.claude/settings.local.json");
    assert_eq!(local["enabledMcpjsonServers"], json!(["swarm"]));
    // Its tools are allowed too, or Claude Code asks before each call.
    assert!(
        local["permissions"]["allow"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("mcp__swarm"))),
        "{local}"
    );
    let gemini = read(".worktrees/gm/.gemini/settings.json");
    assert_eq!(gemini["mcpServers"]["swarm"]["command"], swarm);
    assert_eq!(gemini["mcpServers"]["swarm"]["args"], args("gm", "gm"));
    let codex = p.read(".worktrees/cx/.codex/config.toml");
    assert!(codex.contains("[mcp_servers.swarm]\n"), "{codex}");
    assert!(codex.contains(&format!("command = \"{swarm}\"")), "{codex}");
    assert!(codex.contains("\"mcp\", \"--role\", \"cx\"]"), "{codex}");
    // Only the role that asked for it.
    assert!(!p.path(".worktrees/pl/.mcp.json").exists());
    // Every file written holds this machine's absolute paths: none of them
    // shows in `git status` (an agent's `git add -A` would commit it).
    for wt in ["cl", "cx", "gm"] {
        let st = std::process::Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=all"])
            .current_dir(p.wt_path(wt))
            .output()
            .unwrap();
        let st = String::from_utf8_lossy(&st.stdout).into_owned();
        for f in [
            ".mcp.json",
            "settings.local.json",
            ".codex/config.toml",
            ".gemini/settings.json",
        ] {
            assert!(!st.contains(f), "{wt}: {f} not excluded:\n{st}");
        }
    }
    // Codex runs with CODEX_HOME in its worktree; the others keep theirs.
    // Each in its own worktree (the agents are confined).
    let ran: String = ["cl", "cx", "gm"]
        .iter()
        .map(|w| std::fs::read_to_string(p.wt_path(w).join("ran.txt")).unwrap_or_default())
        .collect();
    let cx_home = p.wt_path("cx").join(".codex");
    assert!(
        ran.contains(&format!("cx {}\n", cx_home.display())),
        "{ran}"
    );
    assert!(ran.contains("cl none\n"), "{ran}");
    // The configured command starts a server for the role: past the role
    // check, it waits for a client (closing stdin at once ends it).
    p.cmd(&swarm)
        .args([
            "--root",
            p.wt_path("cx").to_str().unwrap(),
            "mcp",
            "--role",
            "cx",
        ])
        .stderr("swarm mcp: connection closed: initialize request\n")
        .run();
    // Running up again keeps what others put in the JSON files.
    let mut merged = claude.clone();
    merged["mcpServers"]["other"] = json!({"command": "x"});
    std::fs::write(p.path(".worktrees/cl/.mcp.json"), merged.to_string()).unwrap();
    let (_second, out) = up_until_idle("second swarm up returns");
    out.ok();
    let again = read(".worktrees/cl/.mcp.json");
    assert_eq!(again["mcpServers"]["other"], json!({"command": "x"}));
    assert_eq!(again["mcpServers"]["swarm"], claude["mcpServers"]["swarm"]);
}

#[test]
fn an_mcp_role_sharing_its_folder_with_another_agent_of_its_cli_is_refused() {
    let p = Project::builder()
        .config(
            "roles:\n- {name: a, agent: claude, worktree: master, mcp: true}\n- {name: b, agent: claude, worktree: master}\n",
        )
        .build();
    let fakes = p.path("fakes");
    std::fs::create_dir_all(&fakes).unwrap();
    fake_agent(&fakes, "claude");
    let path = format!(
        "{}:{}",
        fakes.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let r = p
        .cmd("swarm")
        .env("PATH", &path)
        .args(["up", "--no-tmux", "--until-idle", "--timeout", "5s"])
        .code(1)
        .run();
    r.stderr_has("role 'a' has `mcp: true` and shares its folder");
    r.stderr_has("with role 'b', whose agent would load the same MCP configuration and act as 'a'");
    assert!(!p.path(".mcp.json").exists());
}

#[test]
fn an_mcp_roles_primer_teaches_the_tools_not_the_wrappers() {
    let p = Project::builder()
        .config(
            "roles:\n- {name: a, agent: claude, worktree: wa, mcp: true}\n- {name: b, agent: claude, worktree: wb}\n- {name: boss, agent: human}\n",
        )
        .build();
    let mcp = p.swarm(&["prompt", "a"]);
    mcp.ok();
    let t = &mcp.stdout;
    for want in [
        "Call `next`",
        "Call `done`",
        "- `send` {type: note, to: b, message: <one line, at most 80 characters>}",
        "call `ask` with `to: boss`",
        "When `next` returns `no_task`",
        "mcp__swarm__<tool>",
    ] {
        assert!(t.contains(want), "lacks {want:?}:\n{t}");
    }
    for wrapper in [
        "swarm_handoff.sh",
        "done_with_current.sh",
        "ready_for_next.sh` ",
    ] {
        assert!(!t.contains(wrapper), "teaches {wrapper}:\n{t}");
    }
    // A role without `mcp: true` keeps the wrappers.
    let plain = p.swarm(&["prompt", "b"]);
    assert!(
        plain.stdout.contains("swarm_handoff.sh <file>"),
        "{}",
        plain.stdout
    );
}

#[test]
fn mcp_true_needs_a_known_agent_cli() {
    let p = Project::builder()
        .config("roles:\n- {name: a, agent: sh x.sh, worktree: wa, mcp: true}\n")
        .build();
    p.swarm(&["up", "--no-tmux", "--until-idle", "--timeout", "5s"]);
    let r = p
        .cmd("swarm")
        .args(["up", "--no-tmux", "--until-idle", "--timeout", "5s"])
        .code(1)
        .run();
    r.stderr_has("role 'a' has `mcp: true`, but its agent is not claude, codex or gemini");
}

#[test]
fn ask_and_answer_through_the_tools() {
    let Some(py) = python() else { return };
    let p = Project::builder()
        .role("coder")
        .role(Role::new("reviewer").worktree("rev"))
        .role(Role::new("boss").worktree("boss").agent("human"))
        .config("wake: {method: none}\n")
        .build();
    let mut coder = Client::start(&py, &p, "coder", &[]);
    // The MCP agent asks a person; the person answers with `swarm answer`.
    let asked = coder.ok(
        "ask",
        json!({"to": "boss", "question": "Ship it?", "options": ["yes", "not yet"], "allow_custom": false}),
    );
    assert_eq!(asked["type"], "clarify");
    p.deliver_once().ok();
    let id = asked["id"].as_str().unwrap();
    p.swarm(&["answer", id, "--choice", "2"]).ok();
    p.deliver_once().ok();
    let got = coder.ok("next", json!({"wait_seconds": 0}));
    assert_eq!(got["type"], "answer", "{got}");
    assert_eq!(got["in_reply_to"], id);
    assert_eq!(got["payload"], "2. not yet\n");

    // A shell agent asks the MCP agent, which answers with the tool.
    let mut rev = Client::start(&py, &p, "reviewer", &[]);
    p.send_as(
        "coder",
        "type: clarify\nto: reviewer\npriority: 50\nquestion: Which one?\n\nred\nblue\n",
    )
    .queued();
    p.deliver_once().ok();
    let q = rev.ok("next", json!({"wait_seconds": 0}));
    assert_eq!(q["clarify"]["options"], json!(["red", "blue"]));
    let bad = rev.call("answer", json!({"id": q["id"], "choices": [3]}));
    assert_eq!(bad["is_error"], true);
    assert_eq!(bad["structured"]["token"], "ANSWER INVALID");
    assert!(
        bad["text"]
            .as_str()
            .unwrap()
            .contains("Choice 3 is not an option of clarify"),
        "{bad}"
    );
    let a = rev.ok("answer", json!({"id": q["id"], "choices": [2]}));
    assert_eq!(a["status"], "answered");
    assert!(a["completed"].is_string(), "{a}");
}

#[test]
fn read_is_bounded_and_filtered() {
    let Some(py) = python() else { return };
    let p = Project::coder_and_reviewer();
    for i in 0..25 {
        p.send_as(
            "coder",
            &format!("type: note\nto: reviewer\npriority: 50\nmessage: note {i}\n"),
        )
        .queued();
    }
    p.send_as(
        "coder",
        &format!(
            "type: post\nto: reviewer\npriority: 50\nsubject: big\n\n{}\n",
            "y".repeat(15000)
        ),
    )
    .queued();
    let mut c = Client::start(&py, &p, "reviewer", &[]);
    let r = c.ok("read", json!({}));
    let msgs = r["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 20);
    assert_eq!(r["omitted"], 6);
    assert_eq!(msgs[19]["type"], "post");
    assert!(msgs[19]["body"].as_str().unwrap().chars().count() <= 2001);
    let notes = c.ok("read", json!({"type": "note", "last": 3}));
    let notes = notes["messages"].as_array().unwrap();
    assert_eq!(notes.len(), 3);
    assert_eq!(notes[2]["summary"], "note 24");
    let bad = c.call("read", json!({"last": 1000}));
    assert_eq!(bad["is_error"], true);
}

/// The MCP `next` answer of a card's item carries `card_type` and
/// `this_card`, as `ready-next` prints them (upstream's
/// `ready-for-next-task-prints-card-type-and-this-card`: "CARD_TYPE:" and
/// "THIS_CARD: next <role>").
#[test]
fn next_names_the_card_type_and_where_the_card_goes() {
    let Some(py) = python() else { return };
    let p = Project::builder()
        .role("lead")
        .role(crate::support::Role::new("implement").worktree("implementation"))
        .queue_dirs()
        .build();
    p.config("wake: {method: none}\ncards:\n  change: [lead, implement]\n");
    p.swarm(&["card", "new", "change", "c1", "--text", "a change"])
        .ok();
    p.deliver_once().ok();
    let mut c = Client::start(&py, &p, "lead", &[]);
    let a = c.ok("next", json!({"wait_seconds": 0}));
    let text = a.to_string();
    assert!(text.contains(r#""card_type":"change""#), "{a}");
    assert!(text.contains(r#""this_card":"next implement""#), "{a}");
}
