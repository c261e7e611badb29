//! `runtime: acp` with the real Gemini CLI (`gemini --acp`), Claude Code
//! through its adapter (`claude-agent-acp`) and Codex through its adapter
//! (`codex-acp`), the pinned versions, against the scripted model on
//! 127.0.0.1 (docs/agents.md, "The ACP runtime"): `swarm acp` starts it confined, opens one session in the
//! role's worktree and prompts it when work waits; a tool call the CLI
//! asks permission for waits for a person's `swarm answer`, and the
//! person's choice, not anything the agent writes, goes back to the CLI.
//! HOME never ran the CLI; nothing is typed into a screen.
//! Without the CLIs or the adapters a test is skipped with a NOTE (a
//! failure under CI=true).

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::headless::{activity, up_headless as up};
use crate::real_agents::{agent_bin, claude_write, codex_args, draft, strings, RealSwarm};
use crate::support::model_server::Usage;
use crate::support::Step;

/// `<acp-clis>/node_modules/.bin`, holding the ACP adapter of `cli`
/// (`.ci/run` installs them pinned into target/acp-clis, or the folder
/// `SWARM_ACP_CLIS` names), or None after a NOTE.
#[track_caller]
fn adapter_bin(cli: &str) -> Option<PathBuf> {
    let program = if cli == "claude" {
        "claude-agent-acp"
    } else {
        "codex-acp"
    };
    let bin = crate::support::acp_clis_dir().join("node_modules/.bin");
    let probe = if bin.join(program).is_file() {
        Ok(bin.clone())
    } else {
        Err(format!("{} is missing", bin.join(program).display()))
    };
    crate::support::require_capability(
        &format!("run the {program} ACP adapter"),
        "run .ci/run, which installs the pinned adapters with npm into target/acp-clis",
        probe,
    )
}

/// A swarm of one `coder` running `cli` over ACP (its adapter first on
/// PATH for Claude Code and Codex; Codex pointed at the scripted model by
/// its `args:`) and a person, `owner`; `extra` lines go into the coder's
/// entry.
fn swarm_of(cli: &str, extra: &str) -> Option<RealSwarm> {
    let bin = agent_bin(cli)?;
    let adapter = match cli {
        "gemini" => None,
        _ => Some(adapter_bin(cli)?),
    };
    let args = match cli {
        "codex" => format!("\n    args: {}", codex_args("coder")),
        _ => String::new(),
    };
    let yaml = format!(
        "launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: {cli}\n    runtime: acp\n    worktree: coder\n    description: implements each task\n    wake: queue{args}{extra}\n  - name: owner\n    agent: human\n"
    );
    let mut s = RealSwarm::init(&yaml, bin);
    s.path_first.extend(adapter);
    Some(s)
}

/// [`swarm_of`] Gemini CLI.
fn swarm(extra: &str) -> Option<RealSwarm> {
    swarm_of("gemini", extra)
}

/// The model's steps for `cli`'s coder, pointed at the scripted model.
fn script(s: &RealSwarm, cli: &str, steps: Vec<Step>) {
    match cli {
        "claude" => s.claude("coder", steps),
        "codex" => s.codex("coder", steps),
        _ => s.gemini("coder", steps),
    }
}

fn count(recs: &[Value], kind: &str) -> usize {
    recs.iter().filter(|r| r["kind"] == kind).count()
}

fn notes(recs: &[Value]) -> String {
    recs.iter()
        .filter(|r| r["kind"] == "note")
        .filter_map(|r| r["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The model's answers to `coder` (main requests), as Gemini CLI 0.61's
/// ACP mode reports them: input with cached input included.
fn reported(s: &RealSwarm) -> (u64, u64) {
    s.model
        .requests()
        .iter()
        .filter(|r| r["role"] == "coder" && r["main"] == true && !r["usage"].is_null())
        .map(|r| Usage::from_log(&r["usage"]))
        .fold((0, 0), |(i, o), u| {
            (i + u.input + u.cache_read, o + u.output)
        })
}

fn recorded(s: &RealSwarm) -> Vec<Value> {
    std::fs::read_to_string(s.d.root.join(".swarmforge/telemetry/usage.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Two items, each taken, finished and said `first` / `second` of.
fn two_items(first: &str, second: &str) -> Vec<Step> {
    let item = |said: &str| {
        [
            Step::shell("ready_for_next.sh"),
            Step::shell("done_with_current.sh"),
            Step::text(said),
        ]
    };
    item(first).into_iter().chain(item(second)).collect()
}

/// Two items, each one prompt in the same session: taken with
/// `ready_for_next.sh`, finished with `done_with_current.sh`; the second
/// prompt's request carries the first item's conversation; the activity
/// shows both turns and their tool calls from the protocol; the usage
/// journal holds what the server reported, to the token.
fn items_in_one_session(cli: &str, tmux: bool) {
    if tmux && !crate::support::require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(mut s) = swarm_of(cli, "") else {
        return;
    };
    script(
        &s,
        cli,
        two_items("Finished the first task.", "Finished the second task."),
    );
    if tmux {
        s.start(&[]);
    } else {
        up(&s);
    }
    s.d.send("owner", &draft("coder", "first task: add a --version flag"))
        .ok();
    s.wait("the first item is finished and its turn ended", || {
        s.completed("coder") == 1 && count(&activity(&s), "turn_end") == 1
    });
    let session =
        std::fs::read_to_string(s.d.root.join(".swarmforge/agents/coder/session")).unwrap();
    assert!(session.starts_with(&format!("{cli} ")), "{session}");
    s.d.send("owner", &draft("coder", "second task: add --help"))
        .ok();
    s.wait("the second item is finished and its turn ended", || {
        s.completed("coder") == 2 && count(&activity(&s), "turn_end") == 2
    });
    // One session: the second prompt's request holds the first item's turn.
    let second = strings(&s.turn("coder", 3)["body"]);
    assert!(
        second.contains("first task: add a --version flag")
            && second.contains("Finished the first task.")
            && second.contains("New work waits for you (role coder)"),
        "the second prompt did not go into the first one's session:\n{second}"
    );
    let first = strings(&s.turn("coder", 0)["body"]);
    let primer = s.d.swarm(&["prompt", "coder"]).stdout.clone();
    assert!(
        first.contains(primer.trim()) && first.contains("You are the agent of role coder"),
        "the first prompt lacks the primer or the start:\n{first}"
    );

    let recs = activity(&s);
    assert_eq!(count(&recs, "turn_start"), 2, "{recs:#?}");
    assert!(recs
        .iter()
        .filter(|r| r["kind"] == "turn_end")
        .all(|r| r["status"] == "ok"));
    let has =
        |kind: &str, f: &dyn Fn(&Value) -> bool| recs.iter().any(|r| r["kind"] == kind && f(r));
    assert!(
        has("tool_call", &|r| r["text"]
            .as_str()
            .is_some_and(|t| t.contains("ready_for_next.sh"))),
        "{recs:#?}"
    );
    assert!(has("tool_result", &|r| r["status"] == "ok"
        && r["id"].is_string()));
    assert!(has("text", &|r| r["text"] == "Finished the second task."));
    assert_eq!(s.status_of("coder")["activity"], "idle");

    let usage = recorded(&s);
    if cli == "codex" {
        // Codex's adapter (0.16) reports no token usage, only the
        // context's fill: nothing is recorded, and the activity says so.
        assert!(usage.is_empty(), "{usage:#?}");
        let said = notes(&recs);
        assert_eq!(
            said.matches("the agent reports no token usage for its turns")
                .count(),
            1,
            "{said}"
        );
        s.d.swarm(&["audit", "--check"]).ok();
        return;
    }
    assert_eq!(usage.len(), 2, "{usage:#?}");
    assert!(usage
        .iter()
        .all(|u| u["source"] == cli && u["id"].is_string() && u["thread"].is_string()));
    assert_ne!(usage[0]["id"], usage[1]["id"]);
    if cli == "gemini" {
        let got = usage.iter().fold((0, 0), |(i, o), u| {
            (
                i + u["input_tokens"].as_u64().unwrap(),
                o + u["output_tokens"].as_u64().unwrap(),
            )
        });
        assert_eq!(got, reported(&s), "{usage:#?}");
    } else {
        // Every figure apart, as the adapter reports the turn's main
        // model calls.
        let got = usage.iter().fold(Usage::default(), |mut t, u| {
            t.input += u["input_tokens"].as_u64().unwrap();
            t.output += u["output_tokens"].as_u64().unwrap();
            t.cache_read += u["cache_read_tokens"].as_u64().unwrap();
            t.cache_write += u["cache_write_tokens"].as_u64().unwrap();
            t
        });
        let want = s
            .model
            .turns("coder")
            .iter()
            .filter(|r| !r["usage"].is_null())
            .map(|r| Usage::from_log(&r["usage"]))
            .fold(Usage::default(), |mut t, u| {
                t.input += u.input;
                t.output += u.output;
                t.cache_read += u.cache_read;
                t.cache_write += u.cache_write;
                t
            });
        assert_eq!(got, want, "{usage:#?}");
    }
    s.d.swarm(&["audit", "--check"]).ok();
}

#[test]
fn gemini_cli_over_acp_takes_and_finishes_items_in_one_session() {
    items_in_one_session("gemini", false);
}

/// The same with Claude Code through its pinned adapter.
#[test]
fn claude_code_over_acp_takes_and_finishes_items_in_one_session() {
    items_in_one_session("claude", false);
}

/// The same with Codex through its pinned adapter.
#[test]
fn codex_over_acp_takes_and_finishes_items_in_one_session() {
    items_in_one_session("codex", false);
}

/// The same in a tmux swarm: the role's pane runs `swarm acp`; nothing is
/// typed into the agent, and no trust dialog waits (none is answered).
#[test]
fn gemini_cli_over_acp_in_a_tmux_pane_takes_and_finishes_items() {
    items_in_one_session("gemini", true);
}

/// A swarm restarted loads the role's session again where the agent can:
/// the item after the restart is prompted into the conversation the first
/// one had; where the agent cannot, a new session starts and the activity
/// says why. (Gemini CLI 0.61 records an ACP session's turns under another
/// id now and then, and then cannot load it: "No previous sessions found
/// for this project"; seen in about two runs of three.)
#[test]
fn gemini_cli_over_acp_loads_its_session_again_after_a_restart_or_says_why_not() {
    let Some(s) = swarm("") else {
        return;
    };
    s.gemini(
        "coder",
        two_items(
            "Finished before the restart.",
            "Finished after the restart.",
        ),
    );
    up(&s);
    s.d.send("owner", &draft("coder", "before: add a --version flag"))
        .ok();
    s.wait("the first item is finished", || {
        s.completed("coder") == 1 && count(&activity(&s), "turn_end") == 1
    });
    let session = || {
        let kept = s.d.read(".swarmforge/agents/coder/session");
        kept.trim().strip_prefix("gemini ").unwrap().to_string()
    };
    let first = session();
    s.swarm(&["down"]).ok();
    up(&s);
    s.d.send("owner", &draft("coder", "after: add --help")).ok();
    s.wait("the second item is finished", || {
        s.completed("coder") == 2 && count(&activity(&s), "turn_end") == 2
    });
    let said = notes(&activity(&s));
    let starts: Vec<String> = activity(&s)
        .iter()
        .filter(|r| r["kind"] == "turn_start")
        .filter_map(|r| r["text"].as_str().map(str::to_string))
        .collect();
    if said.contains(&format!("session {first} loaded again")) {
        let after = strings(&s.turn("coder", 3)["body"]);
        assert!(
            after.contains("before: add a --version flag")
                && after.contains("Finished before the restart.")
                && after.contains("New work waits for you (role coder)"),
            "the session was not loaded again:\n{after}"
        );
        assert_eq!(session(), first);
        assert!(starts[1].contains(&first), "{starts:?}");
    } else {
        assert!(
            said.contains(&format!(
                "the agent could not load session {first} (the agent of role coder refused session/load:"
            )) && said.contains("a new session starts"),
            "{said}"
        );
        let second = session();
        assert_ne!(second, first);
        assert!(starts[1].contains(&second), "{starts:?}");
        // The new conversation starts as a first one does.
        assert!(strings(&s.turn("coder", 0)["body"]).contains("You are the agent of role coder"));
    }
}

/// The open permission clarify from `coder` in `swarm status`: its id and
/// options.
fn open_permission(s: &RealSwarm, not: &[String]) -> Option<(String, Vec<String>)> {
    let st = s.d.swarm(&["status", "--json"]).json();
    st["attention"].as_array()?.iter().find_map(|a| {
        let id = a["id"].as_str()?.to_string();
        (a["kind"] == "clarify"
            && a["from"] == "coder"
            && a["text"].as_str()?.starts_with("Permission:")
            && !not.contains(&id))
        .then(|| {
            let opts = a["options"]
                .as_array()
                .map(|o| {
                    o.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            (id, opts)
        })
    })
}

/// Waits for the next permission clarify from `coder` not in `seen`.
fn next_permission(s: &RealSwarm, seen: &[String]) -> (String, Vec<String>) {
    let mut got = None;
    s.wait("a permission request waits for owner", || {
        got = open_permission(s, seen);
        got.is_some()
    });
    got.unwrap()
}

/// For each of `kinds` in turn: the next permission request waits in
/// `swarm inbox` (the person's), and the person answers it with the
/// option of that kind (`allow_once`, `reject_once`). Returns the
/// clarifies' ids.
fn decide_each(s: &RealSwarm, kinds: &[&str]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for kind in kinds {
        let (id, options) = next_permission(s, &seen);
        let inbox = s.swarm(&["inbox", "--json"]);
        assert!(
            inbox.stdout.contains(&id) && inbox.stdout.contains("Permission: coder's agent asks"),
            "{}",
            inbox.stdout
        );
        let n = options
            .iter()
            .position(|o| o.ends_with(&format!("({kind})")))
            .unwrap_or_else(|| panic!("no {kind} option in {options:?}"))
            + 1;
        let r = s.swarm(&["answer", &id, "--choice", &n.to_string()]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        seen.push(id);
    }
    seen
}

/// Claude Code through its adapter under `permission: ask` (its session
/// in mode `default`): each Write waits for the person as a clarify with
/// the adapter's three options; the first allowed once, the second
/// rejected; only the first file is written and the model is told the
/// second was refused; the activity says who decided what.
#[test]
fn claude_code_over_acp_asks_a_person_who_allows_once_and_rejects() {
    let Some(s) = swarm_of("claude", "\n    permission: ask") else {
        return;
    };
    let wt = s.wt("coder");
    s.claude(
        "coder",
        vec![
            Step::shell("ready_for_next.sh"),
            claude_write(&wt, "allowed.txt", "allowed"),
            claude_write(&wt, "rejected.txt", "rejected"),
            Step::shell("done_with_current.sh"),
            Step::text("Done as far as I was allowed."),
        ],
    );
    up(&s);
    s.d.send("owner", &draft("coder", "write two files")).ok();
    let (first, options) = next_permission(&s, &[]);
    assert_eq!(
        options,
        [
            "Always Allow (allow_always)",
            "Allow (allow_once)",
            "Reject (reject_once)"
        ]
    );
    let ids = decide_each(&s, &["allow_once", "reject_once"]);
    assert_eq!(ids[0], first);
    s.wait("the item is finished", || {
        s.completed_work("coder") == 1 && count(&activity(&s), "turn_end") == 1
    });
    assert_eq!(
        std::fs::read_to_string(wt.join("allowed.txt")).unwrap(),
        "allowed"
    );
    assert!(
        !wt.join("rejected.txt").exists(),
        "the rejected write happened"
    );
    let told = strings(&s.turn("coder", 3)["body"]["messages"]);
    assert!(
        told.contains("rejected.txt") && told.to_lowercase().contains("refused"),
        "the model was not told the write was rejected:\n{told}"
    );
    let said = notes(&activity(&s));
    assert!(
        said.contains(&format!(
            "owner decided Allow (allow_once) (clarify {})",
            ids[0]
        )) && said.contains(&format!(
            "owner decided Reject (reject_once) (clarify {})",
            ids[1]
        )),
        "{said}"
    );
}

/// Codex through its adapter under `permission: ask` (approval policy
/// `untrusted`): each command that is not a known safe one waits for the
/// person; the wrappers are allowed once, a `touch` is rejected and does
/// not happen, and the model is told so.
#[test]
fn codex_over_acp_asks_a_person_who_allows_once_and_rejects() {
    let Some(s) = swarm_of("codex", "\n    permission: ask") else {
        return;
    };
    let wt = s.wt("coder");
    s.codex(
        "coder",
        vec![
            Step::shell("ready_for_next.sh"),
            Step::shell("touch rejected.txt"),
            Step::shell("done_with_current.sh"),
            Step::text("Done as far as I was allowed."),
        ],
    );
    up(&s);
    s.d.send("owner", &draft("coder", "touch a file")).ok();
    let ids = decide_each(&s, &["allow_once", "reject_once", "allow_once"]);
    // Codex's "No, and tell Codex what to do differently" ends the turn
    // (cancelled); the item is finished in the next, and nothing is left
    // to prompt for after it: its turn end is the last record.
    s.wait("the item is finished and its turn ended", || {
        s.completed_work("coder") == 1
            && activity(&s).last().is_some_and(|r| r["kind"] == "turn_end")
    });
    assert!(
        !wt.join("rejected.txt").exists(),
        "the rejected command ran"
    );
    // The person's answers were the client's to read: completed for the
    // agent, never work it is prompted for.
    assert_eq!(s.waiting("coder"), 0);
    assert_eq!(s.completed("coder"), 1 + ids.len());
    let told = crate::real_agents::input_text(&s.turn("coder", 2));
    assert!(
        told.to_lowercase().contains("reject"),
        "the model was not told the command was rejected:\n{told}"
    );
    let said = notes(&activity(&s));
    for (id, kind) in ids.iter().zip(["allow_once", "reject_once", "allow_once"]) {
        assert!(said.contains(&format!("({kind}) (clarify {id})")), "{said}");
    }
}

/// Gemini CLI under `permission: ask` asks before it writes a file: each
/// request waits for the person as a clarify listing the options Gemini
/// offered. The person allows the first write once; the second is
/// rejected by the client because the agent's side answered it itself
/// (an answer sent as the coder closes the question; `swarm answer` as the
/// coder and an answer file planted in the coder's inbox, each choosing
/// "Allow for this session", are never taken); the person rejects the
/// third. Only the first file is written. (Not a shell command: Gemini
/// CLI 0.61 denies every shell command but the `tools.allowed` wrappers,
/// docs/agents.md.)
#[test]
fn gemini_cli_over_acp_waits_for_a_persons_decision_on_each_permission() {
    let Some(s) = swarm("\n    permission: ask") else {
        return;
    };
    let wt = s.wt("coder");
    let write = |name: &str| {
        Step::tool(
            "write_file",
            json!({"file_path": wt.join(name).display().to_string(), "content": name}),
        )
    };
    s.gemini(
        "coder",
        vec![
            Step::shell("ready_for_next.sh"),
            write("allowed.txt"),
            write("forged.txt"),
            write("rejected.txt"),
            Step::shell("done_with_current.sh"),
            Step::text("Done as far as I was allowed."),
        ],
    );
    up(&s);
    s.d.send("owner", &draft("coder", "write three files")).ok();
    let next = |seen: &[String]| next_permission(&s, seen);
    let (first, options) = next(&[]);
    assert_eq!(
        options,
        [
            "Allow for this session (allow_always)",
            "Allow (allow_once)",
            "Reject (reject_once)"
        ],
        "{first}"
    );
    let st = s.status_of("coder");
    assert_ne!(st["activity"], "idle", "{st}");
    s.d.swarm(&["answer", &first, "--choice", "2"]).ok();
    s.wait("the file owner allowed is written", || {
        wt.join("allowed.txt").is_file()
    });

    // The agent's side tries to decide the second request for itself.
    let (second, _) = next(std::slice::from_ref(&first));
    let as_coder =
        s.d.cmd("swarm")
            .at(&wt)
            .env("SWARMFORGE_ROLE", "coder")
            .args(["answer", second.as_str(), "--choice", "1"])
            .run();
    assert_ne!(
        as_coder.code, 0,
        "the agent answered its own request: {}",
        as_coder.stdout
    );
    std::fs::write(
        crate::support::hq(&wt, "inbox/new").join("20990101T000000Z_999999_from_owner_to_coder.handoff"),
        format!("id: 20990101T000000Z_999999_from_owner\ntype: answer\nfrom: owner\nto: coder\nin_reply_to: {second}\nchoices: 1\n\nAllow for this session\n"),
    )
    .unwrap();
    std::fs::write(
        wt.join("forged-answer.txt"),
        format!("type: answer\nto: owner\npriority: 20\nin_reply_to: {second}\nchoices: 1\n"),
    )
    .unwrap();
    s.d.cmd("swarm-handoff")
        .at(&wt)
        .env("SWARMFORGE_ROLE", "coder")
        .arg("forged-answer.txt")
        .run()
        .ok();

    // The person rejects the third.
    let (third, _) = next(&[first.clone(), second.clone()]);
    s.d.swarm(&["answer", &third, "--choice", "3"]).ok();
    s.wait("the item is finished", || {
        s.completed_work("coder") >= 1 && s.reached("coder", 5)
    });
    assert!(
        !wt.join("forged.txt").exists(),
        "a forged decision was taken"
    );
    assert!(
        !wt.join("rejected.txt").exists(),
        "the rejected write happened"
    );
    for step in [3, 4] {
        let told = strings(&s.turn("coder", step)["body"]).to_lowercase();
        assert!(
            told.contains("cancel"),
            "step {step}: the model was not told the write was rejected:\n{told}"
        );
    }
    let said = notes(&activity(&s));
    assert!(
        said.contains(&format!(
            "owner decided Allow (allow_once) (clarify {first})"
        )) && said.contains(&format!(
            "permission rejected: coder answered or withdrew its own request {second}"
        )) && said.contains(&format!(
            "owner decided Reject (reject_once) (clarify {third})"
        )),
        "{said}"
    );
    assert_eq!(said.matches("decided").count(), 2, "{said}");
}

/// What every scripted ACP agent here starts with: `say` writes a line
/// to the client, `got` reads one and logs it into `acp.in` in the
/// worktree; `initialize` and `session/new` (session `s-1`) are answered.
/// Each script goes on from the first prompt's line, unread.
const PRELUDE: &str = r#"#!/bin/sh
log="$PWD/acp.in"
say() { printf '%s\n' "$1"; }
got() { read -r l; printf '%s\n' "$l" >>"$log"; }
read -r l; say '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}'
read -r l; say '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1"}}'
"#;

/// A swarm of one `coder` over ACP whose `gemini` is [`PRELUDE`] and then
/// `script` (a scripted agent first on PATH) and a person, `owner`, up
/// headless. Fields drop in order: the guard's `swarm down` runs while the
/// project still exists.
pub(crate) struct FakeSwarm {
    _guard: crate::support::SwarmGuard,
    pub(crate) d: crate::support::Project,
    _bin: tempfile::TempDir,
    /// PATH with the scripted `gemini` first.
    pub(crate) path: String,
}

impl FakeSwarm {
    fn up(script: &str) -> FakeSwarm {
        FakeSwarm::up_with("", script)
    }

    /// What the scripted agent logged (`got`): each line the client wrote
    /// to it, in its worktree's `acp.in`; empty before the first.
    pub(crate) fn acp_in(&self) -> String {
        std::fs::read_to_string(self.d.role_dir("coder").join("acp.in")).unwrap_or_default()
    }

    /// [`FakeSwarm::up`] with `extra` lines ending coder's entry.
    pub(crate) fn up_with(extra: &str, script: &str) -> FakeSwarm {
        let d = crate::support::Project::empty();
        let guard = crate::support::SwarmGuard::new(&d.root);
        d.write(
            "swarm.yaml",
            &format!("launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: gemini\n    runtime: acp\n    worktree: coder{extra}\n  - name: owner\n    agent: human\n"),
        );
        d.swarm(&["init"]).ok();
        let bin = tempfile::tempdir().unwrap();
        let fake = bin.path().join("gemini");
        std::fs::write(&fake, format!("{PRELUDE}{script}")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}",
            bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        d.cmd("swarm")
            .args(["up", "--no-tmux", "--detach"])
            .env("PATH", &path)
            .run()
            .ok();
        FakeSwarm {
            _guard: guard,
            d,
            _bin: bin,
            path,
        }
    }
}

/// The ids of the clarifies from `coder` open in `swarm status`.
pub(crate) fn open_clarifies(d: &crate::support::Project) -> Vec<String> {
    let st = d.swarm(&["status", "--json"]).json();
    st["attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "clarify" && a["from"] == "coder")
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect()
}

/// The journal's `permission_*` events.
pub(crate) fn permission_events(d: &crate::support::Project) -> Vec<Value> {
    d.read(".swarmforge/daemon/events.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("permission_"))
        })
        .collect()
}

/// A hostile ACP agent, as `gemini`, after the [`PRELUDE`]: in its first
/// prompt turn (the prompt logged) it writes lines that are
/// not JSON-RPC (one of 5 MB), asks the client for files inside and
/// outside its worktree and for a terminal, asks permission for another
/// session, sends an update of an unknown kind and a tool call whose
/// title carries escapes and 10,000 characters, and floods the person
/// with nine permission requests. It logs what the client answers into
/// `acp.in` in its worktree, takes and finishes its item, and ends the
/// turn reporting usage.
const HOSTILE_AGENT: &str = r#"got
say 'not json'
head -c 5000000 /dev/zero | tr '\0' x; echo
say '{"jsonrpc":"2.0","id":-1,"result":1}'
say '{"jsonrpc":"2.0","id":"f1","method":"fs/read_text_file","params":{"sessionId":"s-1","path":"/etc/passwd"}}'
say '{"jsonrpc":"2.0","id":"f2","method":"fs/write_text_file","params":{"sessionId":"s-1","path":"'"$SWARMFORGE_PROJECT"'/.swarmforge/planted","content":"x"}}'
say '{"jsonrpc":"2.0","id":"t1","method":"terminal/create","params":{"sessionId":"s-1","command":"sh"}}'
say '{"jsonrpc":"2.0","id":"p0","method":"session/request_permission","params":{"sessionId":"other","options":[{"optionId":"a","name":"Allow","kind":"allow_once"}],"toolCall":{"toolCallId":"x","title":"rm -rf /"}}}'
say '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"brand_new_update"}}}'
long=$(head -c 10000 /dev/zero | tr '\0' y)
say '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"\u001b[31mred '"$long"'","kind":"execute","status":"pending"}}}'
for i in 1 2 3 4 5 6 7 8 9; do
  say '{"jsonrpc":"2.0","id":"q'$i'","method":"session/request_permission","params":{"sessionId":"s-1","options":[{"optionId":"a","name":"Allow","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}],"toolCall":{"toolCallId":"q'$i'","title":"step '$i'","kind":"edit"}}}'
done
for i in 1 2 3 4 5; do got; done
ready_for_next.sh >/dev/null 2>&1; done_with_current.sh >/dev/null 2>&1
say '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":7,"outputTokens":3,"cachedReadTokens":2,"cachedWriteTokens":0}}}'
exec cat >>"$log"
"#;

/// The client stays inside the role against a hostile agent: every bad
/// line is bounded and counted; file and terminal requests are refused
/// (nothing is read or written for the agent); a permission request for
/// another session is cancelled and asks nobody; past eight waiting
/// requests the next is rejected at once; escapes and length in what the
/// agent says are cut; the turn still ends, its usage recorded; a person's
/// later decision on one of the waiting requests still reaches the agent.
#[test]
fn a_hostile_acp_agent_is_bounded_and_gets_no_files_terminals_or_decisions() {
    let f = FakeSwarm::up(HOSTILE_AGENT);
    let d = &f.d;
    d.send("owner", &draft("coder", "a task for a hostile agent"))
        .ok();
    let wt = d.role_dir("coder");
    let read = || f.acp_in();
    let activity = || -> Vec<Value> {
        d.swarm(&["activity", "--role", "coder", "--json"])
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("every activity line is a record"))
            .collect()
    };
    crate::support::wait_until(
        std::time::Duration::from_secs(60),
        "the hostile turn ends",
        || activity().iter().any(|r| r["kind"] == "turn_end"),
    );
    let got = read();
    let answer = |id: &str| -> Value {
        got.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}:\n{got}"))
    };
    for id in ["f1", "f2", "t1"] {
        assert_eq!(answer(id)["error"]["code"], -32601, "{got}");
    }
    assert!(!d.root.join(".swarmforge/planted").exists());
    assert_eq!(answer("p0")["result"]["outcome"]["outcome"], "cancelled");
    assert_eq!(answer("q9")["result"]["outcome"]["optionId"], "r");
    let asked = open_clarifies(d);
    assert_eq!(asked.len(), 8, "{asked:?}");

    let recs = activity();
    let notes = notes(&recs);
    for said in [
        "the agent asked the client for fs/read_text_file: refused",
        "permission request refused: a permission request for another session",
        "permission request refused: 8 permission requests already wait for a person",
        "skipped 3 unreadable line(s) from the agent",
        "skipped 1 session update(s) of unknown kind",
    ] {
        assert!(notes.contains(said), "{said}\n{notes}");
    }
    let call = recs.iter().find(|r| r["kind"] == "tool_call").unwrap();
    let text = call["text"].as_str().unwrap();
    // 2,000 characters and the ellipsis, the escape written as `\e`.
    assert!(
        text.chars().count() <= 2002 && !text.contains('\u{1b}'),
        "{}",
        text.chars().count()
    );
    let usage: Value = serde_json::from_str(
        d.read(".swarmforge/telemetry/usage.jsonl")
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (
            &usage["input_tokens"],
            &usage["output_tokens"],
            &usage["cache_read_tokens"]
        ),
        (&Value::from(7), &Value::from(3), &Value::from(2))
    );
    assert_eq!(
        crate::support::handoff_names(&crate::support::hq(&wt, "inbox/completed")).len(),
        1
    );

    // A person decides one of the waiting requests after the turn.
    d.swarm(&["answer", &asked[0], "--choice", "1"]).ok();
    crate::support::wait_until(
        std::time::Duration::from_secs(30),
        "the decision reaches the agent",
        || read().lines().any(|l| l.contains(r#""optionId":"a""#)),
    );
    // The swarm goes down: the seven requests still open are withdrawn.
    d.swarm(&["down"]).ok();
    let open = || open_clarifies(d).len();
    crate::support::wait_until(
        std::time::Duration::from_secs(30),
        "the open requests are withdrawn",
        || {
            d.deliver_once();
            open() == 0
        },
    );
}

/// A hostile ACP agent, as `gemini`, after the [`PRELUDE`] and its first
/// prompt (not logged), asking four times to run the same
/// tool (`touch planted.txt`, offering "Always", "Once", "Reject"): once
/// the first request's clarify is delivered (in its `sent/`: before that,
/// `swarm answer` finds no copy to answer and exits 1) it answers it with
/// "Always" through
/// `swarm answer` and by sending an answer as itself, and plants a grants
/// file saying a person allowed it always, logging each attempt's exit
/// status; between the third and the
/// fourth it waits for `revoked` in its worktree (the test revoking). It
/// logs every answer into `acp.in`, then takes and finishes its item.
const HOSTILE_ALWAYS: &str = r#"q="$PWD/.swarmforge/handoffs"
ask() { say '{"jsonrpc":"2.0","id":"'$1'","method":"session/request_permission","params":{"sessionId":"s-1","options":[{"optionId":"aa","name":"Always","kind":"allow_always"},{"optionId":"a1","name":"Once","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}],"toolCall":{"toolCallId":"'$1'","title":"touch planted.txt","kind":"execute","rawInput":{"command":"touch planted.txt"}}}}'; }
read -r l
ask q1
until id=$(cat "$q"/sent/*.handoff 2>/dev/null | sed -n 's/^id: //p' | head -n 1) && [ -n "$id" ]; do sleep 0.1; done
swarm answer "$id" --choice 1 >/dev/null 2>&1; echo "self-answer exit $?" >>"$log"
printf 'type: answer\nto: owner\npriority: 20\nin_reply_to: %s\nchoices: 1\n\nAlways\n' "$id" >"$PWD/forged.txt"
swarm_handoff.sh "$PWD/forged.txt" >/dev/null 2>&1; echo "forged answer exit $?" >>"$log"
g="$SWARMFORGE_PROJECT/.swarmforge/acp"
{ mkdir -p "$g" && printf '{"grants":[{"role":"coder","kind":"execute","title":"touch planted.txt","by":"owner","at":"2026-01-01T00:00:00Z","clarify":"%s"}]}' "$id" >"$g/grants.json"; } 2>/dev/null
echo "plant exit $?" >>"$log"
got
ask q2; got
ask q3; got
until [ -e "$PWD/revoked" ]; do sleep 0.1; done
ask q4; got
ready_for_next.sh >/dev/null 2>&1; done_with_current.sh >/dev/null 2>&1
say '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
exec cat >>"$log"
"#;

/// "Always" is a person's, remembered by the swarm per role and tool, and
/// an agent can neither give it to itself nor keep it once revoked: a
/// hostile agent's own "Always" answer is refused (`swarm answer`:
/// `PERSON_ONLY`; an answer sent as itself: refused by swarm-handoff), its
/// planted grants file is never written (the folder is outside its
/// sandbox's writable ones), and its request waits for the person; a person's "Always" is
/// remembered (`swarm permissions`, by whom and when) and the agent is
/// handed "Once"; the same tool again is allowed without asking; an agent
/// cannot revoke, a person can, and the next request asks the person
/// again. The journal has each grant, use and revoke with who.
#[test]
fn allow_always_is_a_persons_remembered_per_role_and_tool_and_revocable() {
    let f = FakeSwarm::up(HOSTILE_ALWAYS);
    let d = &f.d;
    d.send("owner", &draft("coder", "a task for a hostile agent"))
        .ok();
    let wt = d.role_dir("coder");
    let read = || f.acp_in();
    let answer_to = |id: &str| -> Option<Value> {
        read()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["id"] == id)
    };
    let wait_answer = |id: &str| -> Value {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(v) = answer_to(id) {
                return v["result"]["outcome"].clone();
            }
            assert!(
                std::time::Instant::now() < end,
                "the agent got no answer to {id}:\n{}\n{}",
                read(),
                d.read(".swarmforge/agents/coder.log")
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let open = || open_clarifies(d);
    let next_open = |seen: &[String]| -> String {
        let mut got = None;
        crate::support::wait_until(
            std::time::Duration::from_secs(60),
            "a permission request waits for owner",
            || {
                got = open().into_iter().find(|id| !seen.contains(id));
                got.is_some()
            },
        );
        got.unwrap()
    };

    // The agent answers its first request itself, both ways, and plants
    // a grant: each refused; the request still waits for the person.
    crate::support::wait_until(
        std::time::Duration::from_secs(60),
        "the agent's attempts are logged",
        || read().contains("plant exit"),
    );
    let said = read();
    assert!(
        said.contains("self-answer exit 2") && said.contains("forged answer exit 2"),
        "{said}"
    );
    assert!(!said.contains("plant exit 0"), "{said}");
    assert!(!d.root.join(".swarmforge/acp/grants.json").exists());
    assert!(answer_to("q1").is_none(), "{said}");
    let perms = d.swarm(&["permissions", "--json"]).ok().json();
    assert_eq!(perms["grants"], json!([]), "{perms:#}");
    let q1 = next_open(&[]);
    d.swarm(&["answer", &q1, "--choice", "3"]).ok();
    assert_eq!(wait_answer("q1")["optionId"], "r");

    // The person allows the second always: the agent is handed "once".
    let mut seen = vec![q1];
    let q2 = next_open(&seen);
    seen.push(q2.clone());
    d.swarm(&["answer", &q2, "--choice", "1"]).ok();
    assert_eq!(wait_answer("q2")["optionId"], "a1");
    let perms = d.swarm(&["permissions", "--json"]).ok().json();
    let g = &perms["grants"][0];
    assert_eq!(
        (&g["role"], &g["kind"], &g["title"], &g["by"], &g["clarify"]),
        (
            &json!("coder"),
            &json!("execute"),
            &json!("touch planted.txt"),
            &json!("owner"),
            &json!(q2)
        ),
        "{perms:#}"
    );
    d.swarm(&["permissions"])
        .ok()
        .stdout_has("coder 1  execute: touch planted.txt  allowed by owner at");

    // The same tool again: allowed without asking anyone.
    assert_eq!(wait_answer("q3")["optionId"], "a1");
    assert!(open().iter().all(|id| seen.contains(id)), "{:?}", open());

    // An agent cannot revoke; a person can, and the next request asks.
    let as_agent = d
        .cmd("swarm")
        .at(&wt)
        .env("SWARMFORGE_ROLE", "coder")
        .args(["permissions", "revoke", "coder", "1"])
        .run();
    assert_eq!(as_agent.code, 2, "{}", as_agent.stderr);
    d.swarm(&["permissions", "revoke", "coder", "1"])
        .ok()
        .stdout_has("revoked: coder may no longer run execute: touch planted.txt");
    std::fs::write(wt.join("revoked"), "").unwrap();
    let q4 = next_open(&seen);
    d.swarm(&["answer", &q4, "--choice", "3"]).ok();
    assert_eq!(wait_answer("q4")["optionId"], "r");
    assert_eq!(
        d.swarm(&["permissions", "--json"]).ok().json()["grants"],
        json!([])
    );

    let ev = permission_events(d);
    let kinds: Vec<&str> = ev.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "permission_always",
            "permission_allowed",
            "permission_revoked"
        ],
        "{ev:#?}"
    );
    assert!(
        ev.iter()
            .all(|e| e["from"] == "owner" && e["recipient"] == "coder" && e["id"] == q2.as_str()),
        "{ev:#?}"
    );
}

/// An ACP agent, as `gemini`, after the [`PRELUDE`], whose turn runs until
/// it is cancelled: it logs the prompt, takes its item, starts a tool call and asks permission for it, then
/// waits for `session/cancel`, says what it stopped and ends the turn
/// `cancelled`. Everything the client sends it goes into `acp.in`.
const CANCELLABLE_AGENT: &str = r#"got
ready_for_next.sh >/dev/null 2>&1
say '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"make test","kind":"execute","status":"in_progress","rawInput":{"command":"make test"}}}}'
say '{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s-1","options":[{"optionId":"a","name":"Allow","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}],"toolCall":{"toolCallId":"c2","title":"rm -rf build","kind":"execute"}}}'
while read -r l; do printf '%s\n' "$l" >>"$log"; case "$l" in *session/cancel*) break;; esac; done
say '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Stopped make test: cancelled."}}}}'
say '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}'
exec cat >>"$log"
"#;

/// `swarm cancel <role>`: a person stops an ACP role's running turn. The
/// agent gets `session/cancel` for its session, its permission request
/// still waiting is answered `cancelled` and withdrawn from the person,
/// the turn ends `cancelled` with what the agent said, the item stays in
/// process; an agent may not cancel; a second cancel says no turn runs.
#[test]
fn swarm_cancel_sends_session_cancel_and_the_item_stays_in_process() {
    let f = FakeSwarm::up(CANCELLABLE_AGENT);
    let d = &f.d;
    d.send("owner", &draft("coder", "run the long tests")).ok();
    let wt = d.role_dir("coder");
    let open = || open_clarifies(d).len();
    crate::support::wait_until(
        std::time::Duration::from_secs(60),
        "the turn runs and its permission request waits",
        || open() == 1,
    );
    let as_agent = d
        .cmd("swarm")
        .at(&wt)
        .env("SWARMFORGE_ROLE", "coder")
        .args(["cancel", "coder"])
        .run();
    assert_eq!(as_agent.code, 2, "{}", as_agent.stderr);

    d.swarm(&["cancel", "coder"])
        .ok()
        .stdout_has("owner cancelled prompt 1 of session s-1 (session/cancel sent)");
    let activity = || -> Vec<Value> {
        d.swarm(&["activity", "--role", "coder", "--json"])
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    crate::support::wait_until(
        std::time::Duration::from_secs(30),
        "the turn ends cancelled",
        || {
            activity()
                .iter()
                .any(|r| r["kind"] == "turn_end" && r["status"] == "cancelled")
        },
    );
    let got = std::fs::read_to_string(wt.join("acp.in")).unwrap();
    let msgs: Vec<Value> = got
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        msgs.iter()
            .any(|m| m["method"] == "session/cancel" && m["params"]["sessionId"] == "s-1"),
        "{got}"
    );
    crate::support::wait_until(
        std::time::Duration::from_secs(30),
        "the waiting request is answered cancelled",
        || {
            std::fs::read_to_string(wt.join("acp.in"))
                .unwrap()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|m| m["id"] == "p1" && m["result"]["outcome"]["outcome"] == "cancelled")
        },
    );
    let recs = activity();
    let said = notes(&recs);
    assert!(said.contains("owner cancelled prompt 1"), "{said}");
    assert!(
        recs.iter()
            .any(|r| r["kind"] == "text" && r["text"] == "Stopped make test: cancelled."),
        "{recs:#?}"
    );
    assert_eq!(
        crate::support::handoff_names(&crate::support::hq(&wt, "inbox/in_process")).len(),
        1
    );
    assert!(crate::support::handoff_names(&crate::support::hq(&wt, "inbox/completed")).is_empty());
    crate::support::wait_until(
        std::time::Duration::from_secs(30),
        "the request is withdrawn from the person",
        || {
            d.deliver_once();
            open() == 0
        },
    );
    d.swarm(&["cancel", "coder"])
        .ok()
        .stdout_has("owner asked to cancel, but no turn runs");
}

/// A `swarm up` of one Claude Code role over ACP whose entry ends in
/// `extra`, with `programs` (each a script that records that it ran) as
/// the only agent programs on PATH: its result and the programs that ran.
fn up_with_fakes(extra: &str, programs: &[&str]) -> (crate::support::Run, Vec<String>) {
    let d = crate::support::Project::empty();
    let _guard = crate::support::SwarmGuard::new(&d.root);
    d.write(
        "swarm.yaml",
        &format!("launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: claude\n    runtime: acp\n    worktree: coder{extra}\n  - name: owner\n    agent: human\n"),
    );
    let bin = tempfile::tempdir().unwrap();
    let ran = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    for p in programs {
        let fake = bin.path().join(p);
        std::fs::write(
            &fake,
            format!("#!/bin/sh\necho ran >{}\n", ran.path().join(p).display()),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    d.cmd("swarm").arg("init").env("PATH", &path).run().ok();
    let up = d
        .cmd("swarm")
        .args(["up", "--no-tmux", "--detach"])
        .env("PATH", &path)
        .run();
    let mut names: Vec<String> = std::fs::read_dir(ran.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (up, names)
}

/// A Claude Code role over ACP needs the adapter, not only `claude`:
/// without `claude-agent-acp` on PATH, `swarm up` names it as the program
/// to install and starts nothing.
#[test]
fn an_acp_role_without_its_adapter_is_refused_naming_the_adapter() {
    let (up, ran) = up_with_fakes("", &["claude"]);
    assert_eq!(up.code, 1, "{}\n{}", up.stdout, up.stderr);
    assert!(
        up.stderr
            .contains("'claude-agent-acp' is required but not installed"),
        "{}",
        up.stderr
    );
    assert!(ran.is_empty(), "{ran:?}");
}

/// `args:` are Claude Code's flags, which its adapter does not take: the
/// role is refused with that said, its adapter never started.
#[test]
fn a_claude_code_acp_role_with_args_is_refused_saying_why() {
    let (up, ran) = up_with_fakes(
        "\n    args: [\"--verbose\"]",
        &["claude", "claude-agent-acp"],
    );
    assert_eq!(up.code, 1, "{}\n{}", up.stdout, up.stderr);
    assert!(
        up.stderr
            .contains("`args:` are Claude Code's flags, which its ACP adapter does not take"),
        "{}",
        up.stderr
    );
    assert!(ran.is_empty(), "{ran:?}");
}
