//! SwarmForge's dashboard API on `swarm serve` (docs/swarmforge-compat.md §7,
//! docs/cockpit.md "SwarmForge's dashboard API"): each path driven as the
//! Matrix bridge forgelet-bridge drives it (its `internal/dashboard/api.go`
//! and `clarifications.go`: Go's HTTP client, JSON bodies, the base URL from
//! its configuration, here `http://swarm:<token>@127.0.0.1:<port>`, which Go
//! sends as `Authorization: Basic`), the shapes taken from upstream's
//! dashboard (sgo/forgelet-swarmforge `swarmforge/scripts/pack_web.bb`), the
//! effect checked on disk, in both layouts. Real binaries, real HTTP,
//! deadlines only.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Value};

use crate::serve::{id_of, start, Cockpit, Reply, NOTE, PARSER_CLARIFY};
use crate::support::{copies_of, file_name, files, git, Layout, Project, Role, DEADLINE};

const LAYOUTS: [Layout; 2] = [Layout::Init, Layout::SwarmForge];

/// `coder` at the main checkout (SwarmForge's master role), `qa` in its own
/// worktree, `boss` the person; every `note` waits for approval.
fn project(layout: Layout) -> Project {
    project_with(layout, "")
}

/// [`project`] with more of swarm.yaml's `types:`.
fn project_with(layout: Layout, types: &str) -> Project {
    Project::builder()
        .layout(layout)
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .role(Role::new("boss").worktree("boss").agent("human"))
        .config(&format!(
            "wake: {{method: none}}\ntypes:\n  note:\n    approval: required\n{types}"
        ))
        .queue_dirs()
        .build()
}

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// What forgelet-bridge's Go client sends for a base URL with the token as
/// its password: no Origin, no cookie, `Authorization: Basic`.
fn bridge(c: &Cockpit, method: &str, path: &str, body: Option<Value>) -> Reply {
    bridge_as(c, &c.token, method, path, body, &[])
}

fn bridge_as(
    c: &Cockpit,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
    extra: &[(&str, &str)],
) -> Reply {
    let auth = format!("Basic {}", base64(format!("swarm:{token}").as_bytes()));
    let mut h = vec![
        ("User-Agent", "Go-http-client/1.1"),
        ("Accept-Encoding", "gzip"),
        ("Authorization", auth.as_str()),
    ];
    if body.is_some() {
        h.push(("Content-Type", "application/json"));
    }
    h.extend_from_slice(extra);
    let text = body.map(|b| b.to_string()).unwrap_or_default();
    c.raw(method, path, &h, &text)
}

fn state(c: &Cockpit) -> Value {
    let r = bridge(c, "GET", "/api/state", None);
    assert_eq!(r.code, 200, "{}", r.body);
    r.json()
}

/// `/api/state` once `want` holds (the cockpit learns of new files from its
/// watcher).
fn state_until(c: &Cockpit, what: &str, want: &dyn Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + DEADLINE;
    loop {
        let s = state(c);
        if want(&s) {
            return s;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}: {s:#}");
        std::thread::yield_now();
    }
}

/// `swarm audit --check` finds `n` violations of `kind` (exit 2), and
/// `swarm status` says `line` and `why`.
fn not_ok(p: &Project, kind: &str, n: usize, line: &str, why: &str) {
    let r = p.cmd("swarm").args(["audit", "--check"]).run();
    assert_eq!(r.code, 2, "{}", r.stdout);
    let found = r.stdout.matches(&format!("VIOLATION {kind} ")).count();
    assert_eq!(found, n, "{}", r.stdout);
    p.swarm(&["status"]).ok().stdout_has(line).stdout_has(why);
}

/// A note from coder to qa, held for approval: its queued path and id.
fn held_note(p: &Project) -> (PathBuf, String) {
    let queued = p.send_as("coder", NOTE).ok().queued();
    p.deliver_once().ok();
    let id = id_of(&queued);
    (queued, id)
}

#[test]
fn the_bridge_reads_approvals_and_approves_what_the_state_showed() {
    for layout in LAYOUTS {
        let p = project(layout);
        let c = start(&p);
        let (queued, id) = held_note(&p);
        let held = p.hq("master", "pending_approval").join(file_name(&queued));
        assert!(held.is_file());
        // Approved only as shown: before any state was read, nothing is.
        let r = bridge(
            &c,
            "POST",
            &format!("/api/approvals/{id}/approve"),
            Some(json!({})),
        );
        assert_eq!(r.code, 422, "{}", r.body);
        assert!(!p.path(&format!(".swarmforge/approvals/{id}")).exists());

        // pack_web.bb `dashboard-state`: {master_role, master_display, lanes,
        // tasks, approvals, work_in_flight, chat, clarifications}; an
        // approval is {id, gate, task_id, task, artifacts, reviews}, and the
        // bridge's ApprovalRequest also reads `from` and `to`.
        let s = state(&c);
        assert_eq!(s["master_role"], "coder", "{s:#}");
        assert_eq!(s["master_display"], "Coder");
        for k in ["lanes", "tasks", "chat", "clarifications"] {
            assert!(s[k].is_array(), "{k}: {s:#}");
        }
        let a = &s["approvals"][0];
        assert_eq!(a["id"], id.as_str());
        assert_eq!(
            (a["from"].as_str(), a["to"].as_str()),
            (Some("coder"), Some("qa"))
        );
        assert_eq!(a["gate"], "coder → qa");
        assert!(a["artifacts"].is_array() && a["reviews"].is_object());
        // queue-row: {task, tasks, batch_tasks, role, state, updated_at, activity}.
        let w = s["work_in_flight"].as_array().unwrap();
        assert_eq!(w.len(), 2, "the agents, not the person: {w:?}");
        for row in w {
            for k in [
                "task",
                "tasks",
                "batch_tasks",
                "role",
                "state",
                "updated_at",
                "activity",
            ] {
                assert!(!row[k].is_null(), "{k}: {row}");
            }
            assert!(["no_session", "live", "idle"].contains(&row["state"].as_str().unwrap()));
        }

        // Refused before anything happens: no token, a wrong one, another
        // site's page carrying the right one.
        let before = crate::support::snapshot(&p.root);
        let url = format!("/api/approvals/{id}/approve");
        let body = json!({"id": id, "project": ""});
        let r = c.raw(
            "POST",
            &url,
            &[("Content-Type", "application/json")],
            &body.to_string(),
        );
        assert_eq!(r.code, 401, "{}", r.body);
        assert!(r.json()["error"].as_str().unwrap().contains("token"));
        let r = bridge_as(&c, "not-the-token", "POST", &url, Some(body.clone()), &[]);
        assert_eq!(r.code, 401, "{}", r.body);
        let r = bridge_as(
            &c,
            &c.token,
            "POST",
            &url,
            Some(body.clone()),
            &[("Origin", "http://evil.example")],
        );
        assert_eq!(r.code, 403, "{}", r.body);
        let r = c.raw("GET", "/api/state", &[], "");
        assert_eq!(r.code, 401, "{}", r.body);
        assert_eq!(
            crate::support::snapshot(&p.root),
            before,
            "a refusal changed files"
        );

        // Content swapped after the state showed it: not approved.
        let original = std::fs::read_to_string(&held).unwrap();
        std::fs::write(&held, original.replace("ship it", "ship it all")).unwrap();
        let r = bridge(&c, "POST", &url, Some(body.clone()));
        assert_eq!(r.code, 422, "{}", r.body);
        assert_eq!(r.json()["token"], "CHANGED_SINCE_REVIEW");
        assert!(!p.path(&format!(".swarmforge/approvals/{id}")).exists());
        // Nor once the state was read again (the dashboard refreshes while
        // the person reads what it showed first): without a sha256 only the
        // content as first shown is approved (issue 43, point 8).
        state(&c);
        let r = bridge(&c, "POST", &url, Some(body.clone()));
        assert_eq!(r.code, 422, "{}", r.body);
        assert_eq!(r.json()["token"], "CHANGED_SINCE_REVIEW");
        assert!(
            r.body
                .contains("changed since GET /api/state first showed it"),
            "{}",
            r.body
        );
        assert!(!p.path(&format!(".swarmforge/approvals/{id}")).exists());
        std::fs::write(&held, original).unwrap();

        // api.go `Approve`: POST /api/approvals/<id>/approve {id, project};
        // pack_web.bb answers {"ok":true}. The effect: `swarm approve`'s.
        let r = bridge(&c, "POST", &url, Some(body.clone()));
        assert_eq!(r.code, 200, "{}", r.body);
        assert_eq!(r.json()["ok"], true);
        assert!(p.path(&format!(".swarmforge/approvals/{id}")).is_file());
        p.deliver_once().ok();
        assert_eq!(copies_of(&p.wt_path("qa"), &file_name(&queued)).len(), 1);
        assert!(p
            .events()
            .iter()
            .any(|e| e["kind"] == "approved"
                && e["reason"].as_str().unwrap().contains("SwarmForge API")));

        // Upstream's answers: an unknown id 404 `Unknown approval: <id>`;
        // reject 400 with its dialog text; errors as {"error": ...}.
        let r = bridge(&c, "POST", &url, Some(body.clone()));
        assert_eq!(r.code, 404, "{}", r.body);
        assert_eq!(r.json()["error"], format!("Unknown approval: {id}"));
        let r = bridge(
            &c,
            "POST",
            &format!("/api/approvals/{id}/reject"),
            Some(json!({})),
        );
        assert_eq!(r.code, 400);
        assert_eq!(
            r.json()["error"],
            "Reject opens the dialog; use Retry, Delete, or Accept."
        );
        let r = bridge(
            &c,
            "POST",
            &url,
            Some(json!({"id": id, "project": "elsewhere"})),
        );
        assert_eq!(r.code, 404, "{}", r.body);
        let r = c.raw(
            "POST",
            &url,
            &[
                ("Authorization", &format!("Bearer {}", c.token)),
                ("Content-Type", "text/plain"),
            ],
            "id=1",
        );
        assert_eq!(r.code, 415, "{}", r.body);
    }
}

#[test]
fn retry_sends_the_held_handoff_back_with_the_comments() {
    for layout in LAYOUTS {
        let p = project(layout);
        let c = start(&p);
        let (queued, id) = held_note(&p);
        assert_eq!(state(&c)["approvals"][0]["id"], id.as_str());

        // api.go `SendBack`: POST /api/tasks/retry {id, project, comments}.
        let r = bridge(&c, "POST", "/api/tasks/retry", Some(json!({"project": ""})));
        assert_eq!(r.code, 400);
        assert_eq!(r.json()["error"], "Missing approval id");
        let r = bridge(
            &c,
            "POST",
            "/api/tasks/retry",
            Some(json!({"id": id, "project": "", "comments": "Add the tests first.\nThen ship."})),
        );
        assert_eq!(r.code, 200, "{}", r.body);
        assert_eq!(r.json()["ok"], true);
        // Denied as `swarm deny` does, the first line of the comments as why.
        let error = p
            .hq("master", "failed")
            .join(format!("{}.error", file_name(&queued)));
        assert_eq!(
            std::fs::read_to_string(error).unwrap(),
            "denied: sent back: Add the tests first.\n"
        );
        assert!(files(&p.hq("master", "pending_approval")).is_empty());
        assert!(state(&c)["approvals"].as_array().unwrap().is_empty());
        // The comments are no chat message, though coder is the master role.
        let end = Instant::now() + DEADLINE;
        while !c.get("/api/transcript").body.contains("Sent back: ") {
            assert!(Instant::now() < end, "the cockpit never saw the comments");
            std::thread::yield_now();
        }
        assert!(state(&c)["chat"].as_array().unwrap().is_empty());
        // The comments reach the sender from the person, whole.
        p.deliver_once().ok();
        p.cmd("ready-next")
            .role("coder")
            .stdout_has("FROM: boss")
            .stdout_has("Add the tests first.\nThen ship.")
            .run();
        let r = bridge(
            &c,
            "POST",
            "/api/tasks/retry",
            Some(json!({"id": id, "comments": "x"})),
        );
        assert_eq!(r.code, 404, "{}", r.body);
        assert_eq!(r.json()["error"], format!("Unknown approval: {id}"));
    }
}

#[test]
fn the_bridge_answers_a_clarification_and_chats_with_the_master_role() {
    for layout in LAYOUTS {
        let p = project(layout);
        let c = start(&p);
        let clarify = p.send_as("qa", PARSER_CLARIFY).ok().queued();
        let cid = id_of(&clarify);
        p.deliver_once().ok();

        // clarifications.go reads {id, status, project, role, body} and keeps
        // status "pending"; pack_web.bb `parse-clarification` adds response
        // and created_at; `role` is who asked (the answer goes back there).
        let s = state_until(&c, "the clarification", &|s| {
            s["clarifications"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        });
        let q = &s["clarifications"][0];
        assert_eq!(q["id"], cid.as_str());
        assert_eq!(q["status"], "pending");
        assert_eq!(q["role"], "qa");
        assert_eq!(q["body"], "which parser?\n1. peg\n2. hand-written");

        // POST /api/clarifications/<id>/answer {id, project, text}; an
        // unknown id is 404 `Unknown clarification: <id>` (pack_web.bb).
        let r = bridge(
            &c,
            "POST",
            "/api/clarifications/20990101T000000Z_000001_from_qa/answer",
            Some(json!({"text": "peg"})),
        );
        assert_eq!(r.code, 404, "{}", r.body);
        assert_eq!(
            r.json()["error"],
            "Unknown clarification: 20990101T000000Z_000001_from_qa"
        );
        let r = bridge(
            &c,
            "POST",
            &format!("/api/clarifications/{cid}/answer"),
            Some(json!({"id": cid, "project": "", "text": "2"})),
        );
        assert_eq!(r.code, 200, "{}", r.body);
        assert_eq!(r.json()["ok"], true);
        p.deliver_once().ok();
        p.cmd("ready-next")
            .role("qa")
            .stdout_has("hand-written")
            .run();
        let s = state_until(&c, "the answered clarification", &|s| {
            s["clarifications"][0]["status"] == "done"
        });
        assert_eq!(s["clarifications"][0]["response"], "hand-written");
        let r = bridge(
            &c,
            "POST",
            &format!("/api/clarifications/{cid}/answer"),
            Some(json!({"text": "peg"})),
        );
        assert_eq!(r.code, 422, "answered already: {}", r.body);

        // api.go `Chat`: POST /api/chat {text}: the person's post to the
        // master role; blank text is answered ok and sends nothing.
        let r = bridge(&c, "POST", "/api/chat", Some(json!({"text": "  "})));
        assert_eq!(r.code, 200, "{}", r.body);
        assert!(files(&p.hq("boss", "outbox")).is_empty());
        let r = bridge(
            &c,
            "POST",
            "/api/chat",
            Some(json!({"text": "How far is the parser?\nThe demo is at five."})),
        );
        assert_eq!(r.code, 200, "{}", r.body);
        let chat_id = r.json()["id"].as_str().unwrap().to_string();
        p.deliver_once().ok();
        p.cmd("ready-next")
            .role("coder")
            .stdout_has("FROM: boss")
            .stdout_has("How far is the parser?\nThe demo is at five.")
            .run();
        let s = state_until(&c, "the chat", &|s| {
            s["chat"].as_array().is_some_and(|a| !a.is_empty())
        });
        assert_eq!(s["chat"][0]["id"], chat_id.as_str());
        assert_eq!(s["chat"][0]["status"], "pending");
        // The master role's reply to it is the chat's response.
        p.send_as(
            "coder",
            "type: post\nto: boss\npriority: 50\n\nHalf done; in time.\n",
        )
        .ok();
        p.deliver_once().ok();
        let s = state_until(&c, "the chat's response", &|s| {
            s["chat"][0]["status"] == "done"
        });
        assert_eq!(s["chat"][0]["response"], "Half done; in time.");

        // The project: this one, and creating another is refused.
        let r = bridge(&c, "GET", "/api/projects", None);
        assert_eq!(r.code, 200, "{}", r.body);
        let name = file_name(&p.root);
        assert_eq!(r.json()["open_projects"], json!([name]));
        let r = bridge(
            &c,
            "POST",
            "/api/projects",
            Some(json!({"name": "other", "pack": "six-pack"})),
        );
        assert_eq!(r.code, 409, "{}", r.body);
        assert!(r.json()["error"].as_str().unwrap().contains("swarm init"));
        let r = c.raw(
            "POST",
            "/api/chat",
            &[
                ("Content-Type", "application/json"),
                ("Origin", "http://evil.example"),
                ("X-Swarm-Token", &c.token),
            ],
            "{\"text\":\"hi\"}",
        );
        assert_eq!(r.code, 403, "{}", r.body);
    }
}

/// The board, when there is one (`.swarmforge/board/tasks.tsv`, one card a
/// line: name, lane, created, updated, task id, audit count; pack_web.bb
/// `task-entry`), is SwarmForge's `tasks`; without one, `tasks` and
/// `lanes` are empty.
#[test]
fn the_board_is_read_when_there_is_one() {
    let p = project(Layout::SwarmForge);
    let c = start(&p);
    let s = state(&c);
    assert_eq!(
        (s["tasks"].clone(), s["lanes"].clone()),
        (json!([]), json!([]))
    );
    std::fs::create_dir_all(p.path(".swarmforge/board")).unwrap();
    std::fs::write(
        p.path(".swarmforge/board/tasks.tsv"),
        "parser\tqa\t2026-12-01T10:00:00Z\t2026-12-01T11:00:00Z\t20261201T100000000000Z-parser\t2\n\
         docs\tdone\t2026-12-01T09:00:00Z\t2026-12-01T09:30:00Z\t\t0\n",
    )
    .unwrap();
    let s = state(&c);
    assert_eq!(s["lanes"], json!(["coder", "qa", "done"]), "{s:#}");
    assert_eq!(
        s["tasks"][0],
        json!({"name": "parser", "id": "20261201T100000000000Z-parser", "lane": "qa",
               "updated_at": "2026-12-01T11:00:00Z", "audit_count": 2, "status": "waiting in queue"})
    );
    assert_eq!(s["tasks"][1]["id"], "docs", "the id defaults to the name");
    assert_eq!(s["tasks"][1]["status"], "");
}

/// Review comments live where upstream keeps them: pack_web.bb
/// `save-review!` (`POST /api/approvals/<id>/comments {path, comments}`)
/// writes `<id>.reviews.json` beside `pending_approval/<id>.handoff` as
/// `{"<path>": "<comments>"}`, `approval-entry` shows them as `reviews`,
/// `retry-message` puts each as "<path>:\n<comments>" into what is sent
/// back, and they go when the hold goes.
#[test]
fn review_comments_are_kept_beside_the_held_handoff_as_upstream_keeps_them() {
    for layout in LAYOUTS {
        let p = project(layout);
        let c = start(&p);
        let (queued, id) = held_note(&p);
        let pending = p.path(".swarmforge/handoffs/pending_approval");
        let stem = file_name(&queued).trim_end_matches(".handoff").to_string();
        let reviews = pending.join(format!("{stem}.reviews.json"));
        assert_eq!(state(&c)["approvals"][0]["reviews"], json!({}));
        let url = format!("/api/approvals/{id}/comments");
        let r = bridge(&c, "POST", &url, Some(json!({"comments": "x"})));
        assert_eq!(r.code, 400, "{}", r.body);
        assert_eq!(r.json()["error"], "Missing path");
        let r = bridge(
            &c,
            "POST",
            &url,
            Some(json!({"path": "docs/spec.md", "comments": "Name the parser."})),
        );
        assert_eq!(r.code, 200, "{}", r.body);
        assert_eq!(r.json()["ok"], true);
        let kept: Value = serde_json::from_slice(&std::fs::read(&reviews).unwrap()).unwrap();
        assert_eq!(kept, json!({"docs/spec.md": "Name the parser."}));
        assert_eq!(
            state(&c)["approvals"][0]["reviews"],
            json!({"docs/spec.md": "Name the parser."})
        );
        p.cmd("swarm").args(["audit", "--check"]).run().ok();

        // Retry: the comments reach the sender, and leave with the hold.
        let r = bridge(
            &c,
            "POST",
            "/api/tasks/retry",
            Some(json!({"id": id, "comments": "Again, please."})),
        );
        assert_eq!(r.code, 200, "{}", r.body);
        assert!(!reviews.exists(), "{:?}", files(&pending));
        assert!(files(&pending).is_empty());
        p.deliver_once().ok();
        p.cmd("ready-next")
            .role("coder")
            .stdout_has("Again, please.\n\ndocs/spec.md:\nName the parser.")
            .run();
        let r = bridge(
            &c,
            "POST",
            &url,
            Some(json!({"path": "a", "comments": "b"})),
        );
        assert_eq!(r.code, 404, "{}", r.body);
    }
}

/// A clarify to a person and a person's chat with the master role are
/// SwarmForge's request files, derived from the messages: pack_web.bb
/// `clar-pending-dir`/`clar-done-dir`
/// (`.swarmforge/dashboard/clarifications/{pending,done}/<id>.request`),
/// `render-clarification` (`id`, `status`, `role`, `created_at`,
/// `response` with newlines as `\n`, a blank line, the question) and
/// `answer-clarification!` (the answer writes `done/` with `status: done`
/// and `response`, and removes `pending/`); `chat-pending-dir` /
/// `chat-done-dir` (`.swarmforge/dashboard/requests/{pending,done}`) and
/// `write-chat-request!` (`id`, `status: pending`, `created_at`, a blank
/// line, the text), where forgelet-bridge reads the reply from `done/`.
#[test]
fn clarifications_and_chat_are_swarmforges_request_files_derived_from_the_messages() {
    for layout in LAYOUTS {
        let p = project(layout);
        let c = start(&p);
        let clarify = p.send_as("qa", PARSER_CLARIFY).ok().queued();
        let cid = id_of(&clarify);
        p.deliver_once().ok();
        let dash = p.path(".swarmforge/dashboard");
        let pending = dash.join(format!("clarifications/pending/{cid}.request"));
        let done = dash.join(format!("clarifications/done/{cid}.request"));
        let text = std::fs::read_to_string(&pending)
            .unwrap_or_else(|e| panic!("{layout:?}: {}: {e}", pending.display()));
        assert!(
            text.starts_with(&format!(
                "id: {cid}\nstatus: pending\nrole: qa\ncreated_at: 20"
            )),
            "{text}"
        );
        assert!(
            text.ends_with("\n\nwhich parser?\n1. peg\n2. hand-written\n"),
            "{text}"
        );
        assert!(!done.exists());

        let r = bridge(
            &c,
            "POST",
            &format!("/api/clarifications/{cid}/answer"),
            Some(json!({"text": "2\n"})),
        );
        assert_eq!(r.code, 200, "{}", r.body);
        p.deliver_once().ok();
        let text = std::fs::read_to_string(&done).unwrap();
        assert!(
            text.starts_with(&format!(
                "id: {cid}\nstatus: done\nrole: qa\ncreated_at: 20"
            )),
            "{text}"
        );
        assert!(text.contains("\nresponse: hand-written\n\n"), "{text}");
        assert!(!pending.exists());

        // Chat: the person's post to the master role, then its reply.
        let r = bridge(
            &c,
            "POST",
            "/api/chat",
            Some(json!({"text": "How far is the parser?\nThe demo is at five."})),
        );
        assert_eq!(r.code, 200, "{}", r.body);
        let chat_id = r.json()["id"].as_str().unwrap().to_string();
        p.deliver_once().ok();
        let asked = dash.join(format!("requests/pending/{chat_id}.request"));
        let replied = dash.join(format!("requests/done/{chat_id}.request"));
        let text = std::fs::read_to_string(&asked).unwrap();
        assert!(
            text.starts_with(&format!("id: {chat_id}\nstatus: pending\ncreated_at: 20")),
            "{text}"
        );
        assert!(
            text.ends_with("\n\nHow far is the parser?\nThe demo is at five.\n"),
            "{text}"
        );
        p.cmd("ready-next")
            .role("coder")
            .stdout_has("FROM: boss")
            .run();
        p.send_as(
            "coder",
            "type: post\nto: boss\npriority: 50\n\nHalf done;\nin time.\n",
        )
        .ok();
        p.deliver_once().ok();
        let text = std::fs::read_to_string(&replied).unwrap();
        assert!(text.contains("\nstatus: done\n"), "{text}");
        assert!(
            text.contains("\nresponse: Half done;\\nin time.\n"),
            "{text}"
        );
        assert!(!asked.exists());
        p.cmd("swarm").args(["audit", "--check"]).run().ok();

        // A file that says other than the messages is NOT OK, and the
        // next delivery pass writes it again from them.
        std::fs::write(&done, "id: x\nstatus: done\n\nforged\n").unwrap();
        std::fs::write(
            dash.join("requests/pending/req-1.request"),
            "id: req-1\n\nhi\n",
        )
        .unwrap();
        not_ok(
            &p,
            "dashboard",
            2,
            "dashboard: NOT IN STEP: ",
            "says other than message",
        );
        p.deliver_once().ok();
        assert!(std::fs::read_to_string(&done)
            .unwrap()
            .contains("hand-written"));
        std::fs::remove_file(dash.join("requests/pending/req-1.request")).unwrap();
        p.cmd("swarm").args(["audit", "--check"]).run().ok();
    }
}

/// pack_web.bb `get-mission`: `GET /api/mission` answers 200,
/// `text/plain; charset=utf-8`, the project root's `mission.md`, or an
/// empty body when there is none. Behind the same token; a symlink is not
/// followed out of the project.
#[test]
fn the_mission_is_served_as_upstream_serves_it() {
    for layout in LAYOUTS {
        let p = project(layout);
        let c = start(&p);
        let r = bridge(&c, "GET", "/api/mission", None);
        assert_eq!((r.code, r.body.as_str()), (200, ""), "{layout:?}");
        std::fs::write(
            p.path("mission.md"),
            "# Mission\n\nShip the parser by Friday.\n",
        )
        .unwrap();
        let r = bridge(&c, "GET", "/api/mission", None);
        assert_eq!(r.code, 200);
        assert!(
            r.head
                .to_ascii_lowercase()
                .contains("content-type: text/plain; charset=utf-8"),
            "{}",
            r.head
        );
        assert_eq!(r.body, "# Mission\n\nShip the parser by Friday.\n");
        let r = c.raw("GET", "/api/mission", &[], "");
        assert_eq!(r.code, 401, "{}", r.body);
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(outside.path(), "secret\n").unwrap();
        std::fs::remove_file(p.path("mission.md")).unwrap();
        std::os::unix::fs::symlink(outside.path(), p.path("mission.md")).unwrap();
        let r = bridge(&c, "GET", "/api/mission", None);
        assert_eq!((r.code, r.body.as_str()), (200, ""));
    }
}

/// A POST the bridge makes that must succeed.
fn posted(c: &Cockpit, path: &str, body: Value) -> Reply {
    let r = bridge(c, "POST", path, Some(body));
    assert_eq!(r.code, 200, "{path}: {}", r.body);
    r
}

/// `project`, with every `git_handoff` held for approval too.
fn git_project(layout: Layout) -> Project {
    project_with(layout, "  git_handoff:\n    approval: required\n")
}

/// coder commits `spec.md` and hands task `parser` to qa; held. Its id,
/// the commit and the commit before it.
fn held_git_handoff(p: &Project) -> (String, String, String) {
    let wt = p.role_dir("coder");
    let before = git(&wt, &["rev-parse", "HEAD"]);
    let n = git(&wt, &["rev-list", "--count", "HEAD"]);
    std::fs::write(wt.join("spec.md"), format!("the parser, take {n}\n")).unwrap();
    git(&wt, &["add", "spec.md"]);
    git(&wt, &["commit", "-q", "-m", "spec"]);
    let commit = git(&wt, &["rev-parse", "HEAD"]);
    let queued = p
        .send_as(
            "coder",
            "type: git_handoff\nto: qa\npriority: 50\ntask: parser\nartifact: spec.md\n",
        )
        .ok()
        .queued();
    p.deliver_once().ok();
    assert!(files(&p.hq("master", "pending_approval")).contains(&file_name(&queued)));
    (id_of(&queued), commit, before)
}

fn branch(p: &Project, name: &str) -> Option<String> {
    let r = std::process::Command::new("git")
        .arg("-C")
        .arg(p.role_dir("coder"))
        .args(["rev-parse", "--verify", "--quiet", name])
        .output()
        .unwrap();
    r.status
        .success()
        .then(|| String::from_utf8_lossy(&r.stdout).trim().to_string())
}

/// Upstream keeps a task's review history in
/// `.swarmforge/rejected-tasks/<task-id>/reviews.json` (pack_web.bb
/// `task-reviews-file`), `{"<path>": [{"at": …, "text": …}]}`:
/// `save-review!` appends each comment saved on a document
/// (`append-task-review!`, blank text skipped), `retry-approval!` appends
/// the Retry comments to every document of the hold (`approval-doc-paths`:
/// its artifacts and the reviewed paths), `approve!` drops it
/// (`drop-task-reviews!`). Here a denial keeps its reason the same way;
/// `swarm status` and `/api/state` show it, and a history of another
/// shape is NOT OK.
#[test]
fn a_rejected_tasks_review_history_is_kept_where_upstream_keeps_it() {
    for layout in LAYOUTS {
        let p = git_project(layout);
        let c = start(&p);
        let (id, _, _) = held_git_handoff(&p);
        let history = p.path(".swarmforge/rejected-tasks/parser/reviews.json");
        let url = format!("/api/approvals/{id}/comments");
        for comments in ["", "Name the parser."] {
            posted(&c, &url, json!({"path": "spec.md", "comments": comments}));
        }
        let kept: Value = serde_json::from_slice(&std::fs::read(&history).unwrap()).unwrap();
        assert_eq!(kept["spec.md"].as_array().unwrap().len(), 1, "{kept}");
        assert_eq!(kept["spec.md"][0]["text"], "Name the parser.");
        assert!(kept["spec.md"][0]["at"].as_str().unwrap().starts_with("20"));
        let s = state(&c);
        assert_eq!(s["approvals"][0]["history"], kept, "{s:#}");
        assert_eq!(s["rejected_tasks"][0]["task_id"], "parser");

        posted(
            &c,
            "/api/tasks/retry",
            json!({"id": id, "comments": "Again, please."}),
        );
        let kept: Value = serde_json::from_slice(&std::fs::read(&history).unwrap()).unwrap();
        let texts: Vec<&str> = kept["spec.md"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["Name the parser.", "Again, please."], "{kept}");
        p.swarm(&["status"])
            .ok()
            .stdout_has("rejected: parser: 2 review comment(s) on 1 document(s)");
        p.cmd("swarm").args(["audit", "--check"]).run().ok();

        // `swarm deny` is a rejection too: its reason joins the history.
        let (id, _, _) = held_git_handoff(&p);
        p.swarm(&["deny", &id, "--reason", "Wrong parser."]).ok();
        assert!(p
            .read(".swarmforge/rejected-tasks/parser/reviews.json")
            .contains("Wrong parser."));
        // Approved: the history is done with.
        let (id, _, _) = held_git_handoff(&p);
        state(&c);
        let r = bridge(&c, "POST", &format!("/api/approvals/{id}/approve"), None);
        assert_eq!(r.code, 200, "{}", r.body);
        assert!(!history.exists());

        // Another shape is NOT OK, in status and audit.
        std::fs::create_dir_all(history.parent().unwrap()).unwrap();
        std::fs::write(&history, r#"{"spec.md": "Name the parser."}"#).unwrap();
        std::fs::write(
            p.path(".swarmforge/rejected-tasks/parser.reviews.json"),
            "{}",
        )
        .unwrap();
        not_ok(
            &p,
            "rejected_tasks",
            2,
            "rejected-tasks: NOT OK: ",
            "rejected-tasks/<task-id>/reviews.json",
        );
    }
}

/// Upstream's Delete (the Reject dialog's `rt-delete`: `POST
/// /api/tasks/delete {id}`; pack_web.bb `delete-approval!`) snapshots the
/// commit as branches `rejected/<task-id>/<n>` and
/// `rejected/<task-id>/latest` (`snapshot-rejected!`, the first free `n`),
/// rolls the sender's worktree back to `task_base_commit` or the commit's
/// parent (`rollback-to-base!`), copies the task's files into
/// `rejected-tasks/<task-id>/` (`archive-rejected!`) and drops the hold
/// and its review history; `{name}` of a card not marked rejected is 400
/// `Not rejected: <name>`, no name 400 `Missing task name`. Its Retry
/// (`retry-approval!`) snapshots the same way. Here the hold is denied to
/// `failed/` (never deleted), and the worktree is reset only when nothing
/// can be lost.
#[test]
fn delete_snapshots_the_commit_archives_the_hold_and_rolls_back_safely() {
    for layout in LAYOUTS {
        let p = git_project(layout);
        let c = start(&p);
        let coder = p.role_dir("coder");
        let (id, commit, before) = held_git_handoff(&p);

        for (body, why) in [
            (json!({}), "Missing task name"),
            (json!({"name": "parser"}), "Not rejected: parser"),
        ] {
            let r = bridge(&c, "POST", "/api/tasks/delete", Some(body));
            assert_eq!(r.code, 400, "{}", r.body);
            assert_eq!(r.json()["error"], why);
        }
        // Behind the same guard as every path.
        let r = c.raw(
            "POST",
            "/api/tasks/delete",
            &[("Content-Type", "application/json")],
            &json!({"id": id}).to_string(),
        );
        assert_eq!(r.code, 401, "{}", r.body);
        let r = bridge_as(
            &c,
            &c.token,
            "POST",
            "/api/tasks/delete",
            Some(json!({"id": id})),
            &[("Origin", "http://evil.example")],
        );
        assert_eq!(r.code, 403, "{}", r.body);
        assert_eq!(branch(&p, "rejected/parser/latest"), None);

        // Retry snapshots first, and resets nothing.
        posted(
            &c,
            "/api/tasks/retry",
            json!({"id": id, "comments": "Again."}),
        );
        assert_eq!(
            branch(&p, "rejected/parser/1").as_deref(),
            Some(commit.as_str())
        );
        assert_eq!(
            branch(&p, "rejected/parser/latest").as_deref(),
            Some(commit.as_str())
        );
        assert_eq!(git(&coder, &["rev-parse", "HEAD"]), commit);

        // Delete with uncommitted work in the worktree: snapshot, no reset.
        let (id, commit2, _) = held_git_handoff(&p);
        std::fs::write(coder.join("spec.md"), "half edited\n").unwrap();
        let r = posted(&c, "/api/tasks/delete", json!({"id": id}));
        assert!(
            r.json()["not_reset"]
                .as_str()
                .unwrap()
                .contains("uncommitted"),
            "{}",
            r.body
        );
        assert_eq!(
            branch(&p, "rejected/parser/2").as_deref(),
            Some(commit2.as_str())
        );
        assert_eq!(git(&coder, &["rev-parse", "HEAD"]), commit2);
        git(&coder, &["checkout", "--", "spec.md"]);

        // Delete of a clean one: kept, denied, archived, rolled back.
        let (id, commit3, base3) = held_git_handoff(&p);
        assert_eq!(base3, commit2);
        let held3 = files(&p.hq("master", "pending_approval"))
            .into_iter()
            .find(|f| f.ends_with(".handoff"))
            .unwrap();
        posted(
            &c,
            &format!("/api/approvals/{id}/comments"),
            json!({"path": "spec.md", "comments": "No."}),
        );
        let r = posted(&c, "/api/tasks/delete", json!({"id": id, "project": ""}));
        assert_eq!(r.json()["ok"], true);
        assert_eq!(
            branch(&p, "rejected/parser/3").as_deref(),
            Some(commit3.as_str())
        );
        assert_eq!(
            branch(&p, "rejected/parser/latest").as_deref(),
            Some(commit3.as_str())
        );
        assert_eq!(
            git(&coder, &["rev-parse", "HEAD"]),
            commit2,
            "rolled back to the parent"
        );
        assert!(files(&p.hq("master", "pending_approval")).is_empty());
        let error = p.hq("master", "failed").join(format!("{held3}.error"));
        assert_eq!(
            std::fs::read_to_string(error).unwrap(),
            "denied: deleted by a person\n"
        );
        let folder = p.path(".swarmforge/rejected-tasks/parser");
        let archived = files(&folder);
        assert!(archived.contains(&held3), "{archived:?}");
        assert!(
            archived
                .iter()
                .any(|n| n.ends_with(".reviews.json") && n != "reviews.json"),
            "{archived:?}"
        );
        assert!(!folder.join("reviews.json").exists(), "{archived:?}");
        let r = bridge(&c, "POST", "/api/tasks/delete", Some(json!({"id": id})));
        assert_eq!(r.code, 404, "{}", r.body);
        assert_eq!(r.json()["error"], format!("Unknown approval: {id}"));
        p.swarm(&["status"])
            .ok()
            .stdout_has("file(s) kept by Delete");
        p.cmd("swarm").args(["audit", "--check"]).run().ok();
        let _ = before;
    }
}
