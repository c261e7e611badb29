//! The headless runtime with the real agent CLIs (docs/headless.md): each
//! turn is one non-interactive run of Claude Code, Codex or Gemini CLI with
//! its JSON event stream, against the scripted model
//! (support/model_server.rs), with a HOME that never ran any of the CLIs
//! and the worktrees NOT trusted: no terminal, no keystroke, no dialog
//! answered (a headless CLI meets no first start).
//! Without the CLIs a test is skipped with a NOTE (a failure under CI=true).

use std::path::PathBuf;

use serde_json::Value;

use crate::real_agents::{agent_bin, codex_args, draft, strings, RealSwarm};
use crate::support::model_server::Usage;
use crate::support::Step;

#[derive(Clone, Copy, PartialEq)]
enum Cli {
    Claude,
    Codex,
    Gemini,
}

impl Cli {
    fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Gemini => "gemini",
        }
    }
}

/// A swarm of one headless `coder` of `cli` and a person, `owner`;
/// `runtime` is written into the role's entry when given.
fn swarm(cli: Cli, runtime: Option<&str>) -> Option<RealSwarm> {
    let bin = agent_bin(cli.name())?;
    let args = match cli {
        Cli::Codex => format!("\n    args: {}", codex_args("coder")),
        _ => String::new(),
    };
    let runtime = runtime
        .map(|r| format!("\n    runtime: {r}"))
        .unwrap_or_default();
    let yaml = format!(
        "launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: {}\n    worktree: coder\n    description: implements each task\n    wake: queue{args}{runtime}\n  - name: owner\n    agent: human\n",
        cli.name()
    );
    Some(RealSwarm::init(&yaml, bin))
}

fn script(s: &RealSwarm, cli: Cli, steps: Vec<Step>) {
    match cli {
        Cli::Claude => s.claude("coder", steps),
        Cli::Codex => s.codex("coder", steps),
        Cli::Gemini => s.gemini("coder", steps),
    }
}

/// `swarm up --no-tmux --detach`: the background supervisor runs the swarm.
pub(crate) fn up_headless(s: &RealSwarm) {
    let r = s.swarm(&["up", "--no-tmux", "--detach"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}

/// Two items, one turn each: take, finish, say so.
fn two_items() -> Vec<Step> {
    vec![
        Step::shell("ready_for_next.sh"),
        Step::shell("done_with_current.sh"),
        Step::text("Finished the first task."),
        Step::shell("ready_for_next.sh"),
        Step::shell("done_with_current.sh"),
        Step::text("Finished the second task."),
    ]
}

/// What the swarm recorded, summed per figure.
fn recorded(s: &RealSwarm) -> (Usage, Vec<Value>) {
    let text = std::fs::read_to_string(s.d.root.join(".swarmforge/telemetry/usage.jsonl"))
        .unwrap_or_default();
    let recs: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut u = Usage::default();
    for r in &recs {
        u.input += r["input_tokens"].as_u64().unwrap();
        u.output += r["output_tokens"].as_u64().unwrap();
        u.cache_read += r["cache_read_tokens"].as_u64().unwrap();
        u.cache_write += r["cache_write_tokens"].as_u64().unwrap();
    }
    (u, recs)
}

/// What the model server reported to `role`'s agent, summed.
fn reported(s: &RealSwarm, role: &str, main_only: bool) -> Usage {
    total(
        s.model
            .requests()
            .iter()
            .filter(|r| r["role"] == role && (!main_only || r["main"] == true))
            .filter(|r| !r["usage"].is_null())
            .map(|r| Usage::from_log(&r["usage"])),
    )
}

fn total(xs: impl IntoIterator<Item = Usage>) -> Usage {
    let mut u = Usage::default();
    for x in xs {
        u.input += x.input;
        u.output += x.output;
        u.cache_read += x.cache_read;
        u.cache_write += x.cache_write;
    }
    u
}

/// The usage of `role`'s first `steps` scripted answers, the last request
/// of each step counted once.
fn first_answers(s: &RealSwarm, role: &str, steps: u64) -> Usage {
    let mut by_step = std::collections::BTreeMap::new();
    for r in s.model.requests() {
        match r["step"].as_u64() {
            Some(n) if r["role"] == role && r["main"] == true && n < steps => {
                by_step.insert(n, Usage::from_log(&r["usage"]));
            }
            _ => {}
        }
    }
    total(by_step.into_values())
}

pub(crate) fn activity(s: &RealSwarm) -> Vec<Value> {
    let r = s.swarm(&["activity", "--role", "coder", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn turn_ends(s: &RealSwarm) -> usize {
    activity(s)
        .iter()
        .filter(|r| r["kind"] == "turn_end")
        .count()
}

fn session_file(s: &RealSwarm) -> PathBuf {
    s.d.root.join(".swarmforge/agents/coder/session")
}

/// An item is taken and finished with no terminal; the second item's turn
/// resumes the first one's conversation; the activity file shows the
/// turns, the tool calls and the item; the usage journal holds what the
/// model server reported, to the token.
fn two_items_two_turns(cli: Cli) {
    let Some(s) = swarm(cli, None) else {
        return;
    };
    script(&s, cli, two_items());
    up_headless(&s);
    s.d.send("owner", &draft("coder", "first task: add a --version flag"))
        .ok();
    s.wait("the first item is finished and its turn ended", || {
        s.completed("coder") == 1 && turn_ends(&s) == 1
    });
    let kept = std::fs::read_to_string(session_file(&s)).unwrap();
    assert!(kept.starts_with(&format!("{} ", cli.name())), "{kept}");
    s.d.send("owner", &draft("coder", "second task: add --help"))
        .ok();
    s.wait("the second item is finished and its turn ended", || {
        s.completed("coder") == 2 && turn_ends(&s) == 2
    });
    // The second item's first request carries the first item's conversation.
    let resumed = strings(&s.turn("coder", 3)["body"]);
    assert!(
        resumed.contains("first task: add a --version flag")
            && resumed.contains("Finished the first task."),
        "the second turn did not resume the first:\n{resumed}"
    );
    assert_eq!(std::fs::read_to_string(session_file(&s)).unwrap(), kept);

    // Activity: two turns, each with its tool calls, ending ok, the item named.
    let recs = activity(&s);
    let kinds: Vec<&str> = recs.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "turn_start").count(),
        2,
        "{recs:#?}"
    );
    assert_eq!(kinds.iter().filter(|k| **k == "turn_end").count(), 2);
    assert!(recs.iter().any(|r| r["kind"] == "tool_call"
        && r["text"]
            .as_str()
            .is_some_and(|t| t.contains("ready_for_next.sh"))));
    assert!(recs
        .iter()
        .any(|r| r["kind"] == "tool_result" && r["id"].is_string()));
    assert!(recs
        .iter()
        .filter(|r| r["kind"] == "turn_end")
        .all(|r| r["status"] == "ok"));
    let st = s.status_of("coder");
    assert_eq!(st["activity"], "idle", "{st}");

    // Usage: one record per turn, attributed to the item and its thread,
    // equal to what the server reported.
    let (got, recs) = recorded(&s);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    for r in &recs {
        assert_eq!(r["role"], "coder");
        assert_eq!(r["source"], cli.name());
        assert!(r["id"].is_string() && r["thread"].is_string(), "{r}");
    }
    assert_ne!(recs[0]["id"], recs[1]["id"]);
    starts_are_turn_starts(&s, &recs);
    let want = reported(&s, "coder", cli != Cli::Gemini);
    assert_eq!(
        got, want,
        "recorded {got:?}, the server reported {want:?}\n{recs:#?}"
    );
}

#[test]
fn claude_code_runs_headless_and_resumes_its_session() {
    two_items_two_turns(Cli::Claude);
}

#[test]
fn codex_runs_headless_and_resumes_its_session() {
    two_items_two_turns(Cli::Codex);
}

#[test]
fn gemini_cli_runs_headless_and_resumes_its_session() {
    two_items_two_turns(Cli::Gemini);
}

/// What a confined agent tries against the telemetry (docs/security.md,
/// "Confinement"): a usage record for another role and for itself, the
/// usage journal and its own activity cut to nothing, the turn-end state
/// the daemon keeps; each line of `forge.txt` is `<what>: refused` or
/// `<what>: DONE`.
const FORGE: &str = r#"T="$SWARMFORGE_PROJECT/.swarmforge/telemetry"
r="$PWD/forge.txt"
try() { w=$1; shift; if ( "$@" ) >/dev/null 2>&1; then echo "$w: DONE" >>"$r"; else echo "$w: refused" >>"$r"; fi; }
rec='{"time":"2026-12-02T00:00:00Z","role":"ROLE","source":"claude","input_tokens":999999,"output_tokens":1,"cache_read_tokens":0,"cache_write_tokens":0}'
try append_other sh -c "echo '$rec' | sed s/ROLE/owner/ >>'$T/usage.jsonl'"
try append_own sh -c "echo '$rec' | sed s/ROLE/coder/ >>'$T/usage.jsonl'"
try truncate sh -c ": >'$T/usage.jsonl'"
try replace sh -c "echo >'$T/x' && mv '$T/x' '$T/usage.jsonl'"
try activity sh -c ": >'$T/activity/coder.jsonl'"
try raise sh -c "echo >>'$T/budget-raises.jsonl'"
cat "$r"
"#;

/// A confined headless agent cannot append a usage record (for another
/// role or itself), cut or replace the usage journal or its activity:
/// `swarm turn` reads the CLI's stream outside the sandbox, and only the
/// CLI runs in it. Its real turns are still recorded, equal to what the
/// model server reported, to the token.
#[test]
fn a_confined_headless_agent_cannot_forge_or_erase_its_usage() {
    let Some(s) = swarm(Cli::Claude, None) else {
        return;
    };
    let mut steps = two_items();
    steps.insert(4, Step::shell("sh forge.sh"));
    script(&s, Cli::Claude, steps);
    // As root Claude Code refuses bypassPermissions: the person allows the
    // one script in the worktree's local settings.
    std::fs::write(s.wt("coder").join("forge.sh"), FORGE).unwrap();
    crate::real_agents::allow_in(
        &s.wt("coder").join(".claude/settings.local.json"),
        &["permissions", "allow"],
        "Bash(sh forge.sh)",
    );
    up_headless(&s);
    s.d.send("owner", &draft("coder", "first task")).ok();
    s.wait("the first item is finished and its turn ended", || {
        s.completed("coder") == 1 && turn_ends(&s) == 1
    });
    s.d.send("owner", &draft("coder", "second task")).ok();
    s.wait("the second item is finished and its turn ended", || {
        s.completed("coder") == 2 && turn_ends(&s) == 2
    });
    let results = std::fs::read_to_string(s.wt("coder").join("forge.txt")).unwrap();
    for what in [
        "append_other",
        "append_own",
        "truncate",
        "replace",
        "activity",
        "raise",
    ] {
        assert!(
            results.contains(&format!("{what}: refused")),
            "{what} was not refused:\n{results}"
        );
    }
    let (got, recs) = recorded(&s);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert!(recs.iter().all(|r| r["role"] == "coder"), "{recs:#?}");
    let want = reported(&s, "coder", true);
    assert_eq!(got, want, "recorded {got:?}, the server reported {want:?}");
    let cost = s.swarm(&["cost", "--json"]);
    assert_eq!(cost.code, 0, "{}", cost.stderr);
    assert_eq!(
        cost.json()["total"]["total_tokens"],
        want.input + want.output + want.cache_read + want.cache_write
    );
}

/// The process group of `role`'s running headless agent (`<pid> <start>`
/// in `.swarmforge/agents/<role>.pid`; the run is a group of its own).
fn agent_group(s: &RealSwarm, role: &str) -> i32 {
    let rec =
        std::fs::read_to_string(s.d.root.join(format!(".swarmforge/agents/{role}.pid"))).unwrap();
    rec.split_whitespace().next().unwrap().parse().unwrap()
}

/// Whether a `.jsonl` file in `dir` (down to `depth` folders) contains `text`.
fn holds(dir: &std::path::Path, text: &str, depth: u32) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().any(|e| {
        let p = e.path();
        if p.is_dir() {
            depth > 0 && holds(&p, text, depth - 1)
        } else {
            p.extension().is_some_and(|x| x == "jsonl")
                && std::fs::read_to_string(&p).is_ok_and(|t| t.contains(text))
        }
    })
}

/// kill -9 of the whole agent (turn reader and CLI) while the model is
/// thinking: the supervisor runs the role again, the new turn resumes the
/// session (its request carries what the killed turn had done) and the
/// item is finished.
fn killed_mid_turn_resumes(cli: Cli) {
    let Some(s) = swarm(cli, None) else {
        return;
    };
    script(
        &s,
        cli,
        vec![
            Step::shell("ready_for_next.sh"),
            Step::shell("done_with_current.sh").after("go"),
            // A CLI may close the killed turn with a message of its own
            // (Claude Code does), which moves the resumed turn one step on.
            Step::shell("done_with_current.sh"),
            Step::text("Finished."),
        ],
    );
    up_headless(&s);
    s.d.send("owner", &draft("coder", "a task to survive a crash"))
        .ok();
    s.wait("the agent is mid-turn, waiting for the model", || {
        s.reached("coder", 1)
    });
    if cli == Cli::Claude {
        // Claude Code appends its transcript (`~/.claude/projects/…/<id>.jsonl`)
        // beside its requests, not before them: a kill before the task reached
        // that file leaves nothing to resume, and the turn rightly starts fresh.
        // The crash this test means comes once the conversation is on disk.
        let projects = s.home.path().join(".claude/projects");
        s.wait("Claude Code's transcript holds the task", || {
            holds(&projects, "a task to survive a crash", 3)
        });
    }
    let kept = std::fs::read_to_string(session_file(&s)).unwrap();
    let id = kept.split_whitespace().nth(1).unwrap().to_string();
    let before = s.model.turns("coder").len();
    let pgid = agent_group(&s, "coder");
    let k = std::process::Command::new("kill")
        .args(["-9", "--", &format!("-{pgid}")])
        .status()
        .unwrap();
    assert!(k.success());
    s.wait("the restarted turn asks the model again", || {
        s.model.turns("coder").len() > before
    });
    s.model.open("go");
    s.wait("the item is finished after the crash", || {
        s.completed("coder") == 1 && turn_ends(&s) >= 1
    });
    let again = strings(&s.model.turns("coder")[before]["body"]);
    assert!(
        again.contains("a task to survive a crash"),
        "the restarted turn did not resume the conversation:\n{again}"
    );
    let recs = activity(&s);
    let starts: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "turn_start").collect();
    assert!(starts.len() >= 2, "{recs:#?}");
    let resumed = starts[1]["text"].as_str().unwrap_or("");
    assert!(
        resumed.contains(&format!("resumes session {id}")),
        "{resumed}"
    );
}

#[test]
fn claude_code_killed_mid_turn_resumes_its_session() {
    killed_mid_turn_resumes(Cli::Claude);
}

#[test]
fn codex_killed_mid_turn_resumes_its_session() {
    killed_mid_turn_resumes(Cli::Codex);
}

#[test]
fn gemini_cli_killed_mid_turn_resumes_its_session() {
    killed_mid_turn_resumes(Cli::Gemini);
}

/// A kept session the CLI does not know (its files were removed): the
/// turn starts a new conversation, says so in the journal and the
/// activity, and the item is still finished.
fn refused_resume_starts_fresh(cli: Cli) {
    let Some(s) = swarm(cli, None) else {
        return;
    };
    script(
        &s,
        cli,
        vec![
            Step::shell("ready_for_next.sh"),
            Step::shell("done_with_current.sh"),
            Step::text("Finished."),
        ],
    );
    let gone = "0b7c2f9e-1b2a-4c3d-9e8f-112233445566";
    s.d.write(
        ".swarmforge/agents/coder/session",
        &format!("{} {gone}\n", cli.name()),
    );
    up_headless(&s);
    s.d.send("owner", &draft("coder", "a task for a new conversation"))
        .ok();
    s.wait("the item is finished in a new conversation", || {
        s.completed("coder") == 1 && turn_ends(&s) >= 2
    });
    // Journaled by the turn's reader, outside the sandbox.
    s.wait("the refused resume is journaled", || {
        s.d.read(".swarmforge/daemon/events.jsonl")
            .contains("\"resume_refused\"")
    });
    let events = s.d.read(".swarmforge/daemon/events.jsonl");
    let refused: Vec<Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "resume_refused")
        .collect();
    assert_eq!(refused.len(), 1, "{events}");
    assert_eq!(refused[0]["recipient"], "coder");
    assert!(refused[0]["reason"].as_str().unwrap().contains(gone));
    let kept = std::fs::read_to_string(session_file(&s)).unwrap();
    assert!(!kept.contains(gone), "{kept}");
    assert!(activity(&s)
        .iter()
        .any(|r| r["kind"] == "note" && r["text"].as_str().unwrap_or("").contains(gone)));
}

#[test]
fn claude_code_refusing_a_resume_starts_fresh_and_says_so() {
    refused_resume_starts_fresh(Cli::Claude);
}

#[test]
fn codex_refusing_a_resume_starts_fresh_and_says_so() {
    refused_resume_starts_fresh(Cli::Codex);
}

#[test]
fn gemini_cli_refusing_a_resume_starts_fresh_and_says_so() {
    refused_resume_starts_fresh(Cli::Gemini);
}

/// [`swarm`] of Claude Code for `swarm up` in tmux, woken in its pane
/// (`wake: idle`, the default); None after a NOTE without tmux or the CLI.
fn claude_in_tmux(runtime: Option<&str>) -> Option<RealSwarm> {
    in_tmux(Cli::Claude, runtime)
}

/// [`swarm`] of `cli` for `swarm up` in tmux, woken in its pane.
fn in_tmux(cli: Cli, runtime: Option<&str>) -> Option<RealSwarm> {
    if !crate::support::require_tool("tmux", "apt-get install -y tmux") {
        return None;
    }
    let s = swarm(cli, runtime)?;
    s.d.write(
        "swarm.yaml",
        &s.d.read("swarm.yaml").replace("    wake: queue\n", ""),
    );
    Some(s)
}

/// `runtime: headless` for one role of a tmux swarm: its pane runs one
/// headless turn per wake-up (no interactive CLI, so no trust dialog in
/// an untrusted worktree), and the item is finished.
#[test]
fn a_headless_role_in_a_tmux_swarm_takes_its_item_without_a_dialog() {
    let Some(mut s) = claude_in_tmux(Some("headless")) else {
        return;
    };
    script(
        &s,
        Cli::Claude,
        vec![
            Step::shell("ready_for_next.sh"),
            Step::shell("done_with_current.sh"),
            Step::text("Finished."),
        ],
    );
    s.up_with(&[]);
    s.d.send(
        "owner",
        &draft("coder", "a task for a pane without a dialog"),
    )
    .ok();
    s.wait("the item is finished and the turn ended", || {
        s.completed("coder") == 1 && turn_ends(&s) == 1
    });
    let (_, recs) = recorded(&s);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert!(std::fs::read_to_string(session_file(&s))
        .unwrap()
        .starts_with("claude "));
    // Nothing waits for a person.
    let st = s.status_of("coder");
    assert_ne!(st["agent_state"], "needs_input", "{st}");
}

/// A `claude` whose stream is hostile: invalid UTF-8, a 3 MiB line, an
/// unknown event type, a 200 kB tool input, control characters. It does
/// the protocol's work for real (the wrappers) and reports usage.
const HOSTILE_CLAUDE: &str = r#"#!/bin/bash
printf '%s\n' "$*" >>"$PWD/claude.args"
echo '{"type":"system","subtype":"init","session_id":"hostile-1","model":"fake-model"}'
printf '\377\376{"type":"assistant"}\n'
head -c 3000000 /dev/zero | tr '\0' x; echo
echo '{"type":"brand-new-event","x":1}'
big=$(head -c 200000 /dev/zero | tr '\0' y)
echo "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"tool_use\",\"name\":\"Bash\",\"input\":{\"command\":\"$big\"}}]}}"
echo '{"type":"assistant","message":{"content":[{"type":"text","text":"red \u001b[31m alert"}]}}'
out=$(ready_for_next.sh 2>&1)
echo '{"type":"user","message":{"content":[{"type":"tool_result","content":"took it","is_error":false}]}}'
done_with_current.sh >/dev/null 2>&1
echo '{"type":"result","subtype":"success","is_error":false,"session_id":"hostile-1","total_cost_usd":0.25,"usage":{"input_tokens":11,"output_tokens":22,"cache_read_input_tokens":33,"cache_creation_input_tokens":44}}'
"#;

/// A folder holding `script` as `claude`, and a PATH with it first.
fn fake_claude(script: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("claude");
    std::fs::write(&fake, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (dir, path)
}

/// A swarm of one `coder` (`yaml`'s roles) whose `claude` is the fake
/// `script`, with the owner's `task` delivered to it, run by `swarm up
/// --no-tmux --until-idle`; the fake (kept in the returned folder) logs its
/// arguments into `claude.args` in its own worktree (the agent is confined).
fn up_with_fake_claude(
    yaml: &str,
    script: &str,
    task: &str,
) -> (
    crate::support::Project,
    tempfile::TempDir,
    crate::support::Run,
) {
    let d = crate::support::Project::empty();
    d.write("swarm.yaml", yaml);
    d.swarm(&["init"]).ok();
    let (dir, path) = fake_claude(script);
    d.send("owner", &draft("coder", task)).ok();
    d.deliver_once().ok();
    let up = d
        .cmd("swarm")
        .args(["up", "--no-tmux", "--until-idle", "--timeout", "120s"])
        .env("PATH", &path)
        .env("FAKE_LOG", dir.path())
        .run();
    (d, dir, up)
}

/// The CLI's stream is untrusted: every bad line is bounded, skipped and
/// counted, the supervisor goes on, the item is finished, and every file
/// the turn wrote stays readable. `swarm fresh` then forgets the session.
#[test]
fn a_hostile_stream_is_bounded_skipped_and_counted() {
    let (d, _fake, up) = up_with_fake_claude(
        "launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: claude\n    worktree: coder\n  - name: owner\n    agent: human\n",
        HOSTILE_CLAUDE,
        "a task through a hostile stream",
    );
    assert_eq!(up.code, 0, "{}\n{}", up.stdout, up.stderr);
    assert!(!up.stderr.contains("gets no terminal"), "{}", up.stderr);
    let wt = d.role_dir("coder");
    assert_eq!(
        crate::support::handoff_names(&crate::support::hq(&wt, "inbox/completed")).len(),
        1
    );
    // One non-interactive run with the stream-json flags and the primer.
    let args = std::fs::read_to_string(d.role_dir("coder").join("claude.args")).unwrap();
    assert_eq!(args.lines().count(), 1, "{args}");
    assert!(
        args.starts_with("-p --output-format stream-json --verbose --append-system-prompt-file "),
        "{args}"
    );

    let r = d.swarm(&["activity", "--role", "coder", "--json"]);
    r.ok();
    let recs: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("every activity line is a record"))
        .collect();
    let note = recs
        .iter()
        .find(|r| r["kind"] == "note")
        .unwrap_or_else(|| panic!("{recs:#?}"));
    assert_eq!(
        note["text"],
        "skipped 2 unreadable line(s) and 1 event(s) of unknown type (brand-new-event)"
    );
    let call = recs.iter().find(|r| r["kind"] == "tool_call").unwrap();
    assert_eq!(call["name"], "Bash");
    assert!(call["text"].as_str().unwrap().chars().count() <= 2001);
    let text = recs.iter().find(|r| r["kind"] == "text").unwrap();
    assert!(!text["text"].as_str().unwrap().contains('\u{1b}'), "{text}");
    assert!(recs
        .iter()
        .any(|r| r["kind"] == "turn_end" && r["status"] == "ok"));
    // The text form prints every record on one line.
    let plain = d.swarm(&["activity"]);
    plain.ok();
    assert!(plain.stdout.contains("coder tool_call"), "{}", plain.stdout);
    assert!(!plain.stdout.contains('\u{1b}'));

    // Usage, as the CLI reported it, with the item and its thread.
    let usage = d.read(".swarmforge/telemetry/usage.jsonl");
    let u: Value = serde_json::from_str(usage.lines().next().unwrap()).unwrap();
    assert_eq!(
        (
            &u["input_tokens"],
            &u["output_tokens"],
            &u["cache_read_tokens"],
            &u["cache_write_tokens"],
            &u["cost_usd"],
            &u["model"]
        ),
        (
            &Value::from(11),
            &Value::from(22),
            &Value::from(33),
            &Value::from(44),
            &Value::from(0.25),
            &Value::from("fake-model")
        )
    );
    assert!(u["id"].is_string() && u["thread"] == u["id"], "{u}");

    // The session is kept, and forgotten on request.
    assert_eq!(
        d.read(".swarmforge/agents/coder/session"),
        "claude hostile-1\n"
    );
    let f = d.swarm(&["fresh", "coder"]);
    f.ok();
    assert!(f.stdout.contains("next turn starts a new conversation"));
    assert!(!d.root.join(".swarmforge/agents/coder/session").exists());
    let bad = d.swarm(&["fresh", "nobody"]);
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(bad.stderr.contains("nobody"));
}

/// `swarm activity --follow` prints records appended after it started,
/// across a rotation, and nothing twice.
#[test]
fn activity_follow_prints_new_records_as_they_come() {
    let d = crate::support::Project::empty();
    d.write(
        "swarm.yaml",
        "roles:\n  - name: coder\n    agent: claude\n    worktree: coder\n",
    );
    d.swarm(&["init"]).ok();
    let file = d.root.join(".swarmforge/telemetry/activity/coder.jsonl");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let rec = |text: &str| {
        format!(
            "{{\"time\":\"2026-01-01T00:00:00Z\",\"role\":\"coder\",\"kind\":\"text\",\"id\":null,\"name\":null,\"text\":\"{text}\",\"status\":null}}\n"
        )
    };
    std::fs::write(&file, rec("before")).unwrap();
    let out_path = d.root.join("follow.out");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = d
        .cmd("swarm")
        .args(["activity", "--follow", "--role", "coder"])
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let printed = || std::fs::read_to_string(&out_path).unwrap_or_default();
    crate::support::wait_until(std::time::Duration::from_secs(20), "the old record", || {
        printed().contains("before")
    });
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(rec("after").as_bytes()).unwrap();
    crate::support::wait_until(std::time::Duration::from_secs(20), "the new record", || {
        printed().contains("after")
    });
    // Rotated away: the new live file is read from its start.
    std::fs::rename(&file, file.with_extension("jsonl.000000000000")).unwrap();
    std::fs::write(&file, rec("rotated")).unwrap();
    crate::support::wait_until(
        std::time::Duration::from_secs(20),
        "the rotated record",
        || printed().contains("rotated"),
    );
    let _ = child.kill();
    let _ = child.wait();
    let text = printed();
    assert_eq!(text.matches("before").count(), 1, "{text}");
    assert_eq!(text.matches("after").count(), 1, "{text}");
    assert!(text.contains("coder text: after"), "{text}");
}

/// A small budget parks a headless role (docs/cost.md, "Budgets"): the
/// turn that used it up ends with its item still in process; the
/// supervisor starts no new turn and shows the role `parked`; an
/// attention item and a `budget_reached` notify event say so; `swarm
/// budget raise` releases it, the next turn resumes the conversation and
/// finishes the item, and nothing is lost.
#[test]
fn a_budget_parks_a_headless_role_until_a_raise() {
    let Some(bin) = agent_bin("claude") else {
        return;
    };
    let probe = tempfile::tempdir().unwrap();
    let notes = probe.path().join("notify.txt");
    let yaml = format!(
        "launch:\n  stagger: 0ms\nnotify: {{command: \"echo $SWARMFORGE_EVENT $SWARMFORGE_ROLE >> {}\"}}\nroles:\n  - name: coder\n    agent: claude\n    worktree: coder\n    description: implements each task\n    wake: queue\n    budget: {{tokens: 100, per: swarm}}\n  - name: owner\n    agent: human\n",
        notes.display()
    );
    let s = RealSwarm::init(&yaml, bin);
    script(
        &s,
        Cli::Claude,
        vec![
            Step::shell("ready_for_next.sh"),
            Step::text("Pausing here; the rest next turn."),
            Step::shell("done_with_current.sh"),
            Step::text("Finished."),
        ],
    );
    up_headless(&s);
    s.d.send("owner", &draft("coder", "a task that outgrows its budget"))
        .ok();
    s.wait("the first turn ended with the item in process", || {
        turn_ends(&s) == 1
    });
    let wt = s.wt("coder");
    let in_process = || crate::support::handoff_names(&crate::support::hq(&wt, "inbox/in_process"));
    assert_eq!(in_process().len(), 1, "the item stays in process");

    // Parked: shown by the supervisor, the journal, notify and status.
    s.wait("the supervisor shows coder parked", || {
        s.status_of("coder")["agent_state"] == "parked"
    });
    s.wait(
        "budget_reached journaled and told to notify.command",
        || std::fs::read_to_string(&notes).is_ok_and(|n| n.contains("budget_reached coder")),
    );
    let item = crate::budgets::budget_item(&s.d.swarm(&["status", "--json"]).ok().json());
    assert_eq!(item["role"], "coder");
    let turns = s.model.turns("coder").len();
    let recs = activity(&s);
    assert_eq!(
        recs.iter().filter(|r| r["kind"] == "turn_start").count(),
        1,
        "no new turn while parked: {recs:#?}"
    );
    assert_eq!(in_process().len(), 1);
    assert_eq!(s.completed("coder"), 0);

    // A person's raise: the role goes on in its conversation and finishes.
    s.swarm(&["budget", "raise", "coder", "--tokens", "100000"])
        .ok();
    s.wait("the item is finished after the raise", || {
        s.completed("coder") == 1 && turn_ends(&s) == 2
    });
    assert!(s.model.turns("coder").len() > turns);
    let resumed = strings(&s.turn("coder", 2)["body"]);
    assert!(
        resumed.contains("a task that outgrows its budget"),
        "the turn after the raise did not resume the conversation:\n{resumed}"
    );
    let st = s.d.swarm(&["status", "--json"]).ok().json();
    assert!(!crate::budgets::has_budget_item(&st), "{st}");
    assert_ne!(s.status_of("coder")["agent_state"], "parked");
    s.wait("budget_released journaled", || {
        s.d.read(".swarmforge/daemon/events.jsonl")
            .contains("\"budget_released\"")
    });
    s.d.swarm(&["audit", "--check"]).ok();
}

/// A `claude` that takes its item, uses 500 tokens and ends its turn with
/// the item still in process.
const THIRSTY_CLAUDE: &str = r#"#!/bin/bash
printf '%s\n' "$*" >>"$PWD/claude.args"
echo '{"type":"system","subtype":"init","session_id":"thirsty-1","model":"fake-model"}'
ready_for_next.sh >/dev/null 2>&1
echo '{"type":"result","subtype":"success","is_error":false,"session_id":"thirsty-1","usage":{"input_tokens":400,"output_tokens":100}}'
"#;

/// `swarm up --no-tmux --until-idle` with a role its budget parks: the
/// supervisor starts no run for it (one turn, not a stall count of them)
/// and ends at once, saying the budget holds it, with its item in process.
#[test]
fn until_idle_ends_when_only_a_budget_holds_the_work() {
    let (d, _fake, up) = up_with_fake_claude(
        "launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: claude\n    worktree: coder\n    budget: {tokens: 100, per: day}\n  - name: owner\n    agent: human\n",
        THIRSTY_CLAUDE,
        "a task too big for its budget",
    );
    assert_ne!(up.code, 0, "{}\n{}", up.stdout, up.stderr);
    up.stderr_has("work waits for coder (parked by a budget)");
    up.stdout_has("coder: parked, budget of coder reached: 500 of 100 tokens");
    let args = std::fs::read_to_string(d.role_dir("coder").join("claude.args")).unwrap();
    assert_eq!(args.lines().count(), 1, "one turn only: {args}");
    let log = d.read(".swarmforge/agents/coder.log");
    assert_eq!(log.matches("[swarm] run ").count(), 1, "{log}");
    let wt = d.role_dir("coder");
    assert_eq!(
        crate::support::handoff_names(&crate::support::hq(&wt, "inbox/in_process")).len(),
        1
    );
}

/// docs/cost.md, "Budgets": a role parked by its budget shows `parked`
/// only while the budget holds it. Here its item is finished by a person
/// while it is parked, and the raise that follows clears `parked` at once,
/// with nothing waiting for the role.
#[test]
fn a_raise_clears_parked_when_nothing_waits_any_more() {
    let d = crate::support::Project::empty();
    d.write(
        "swarm.yaml",
        "launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: claude\n    worktree: coder\n    budget: {tokens: 100, per: day}\n  - name: owner\n    agent: human\n",
    );
    d.swarm(&["init"]).ok();
    let (dir, path) = fake_claude(THIRSTY_CLAUDE);
    let mut guard = crate::support::SwarmGuard::new(&d.root);
    d.cmd("swarm")
        .args(["up", "--no-tmux", "--detach"])
        .env("PATH", &path)
        .env("FAKE_LOG", dir.path())
        .run()
        .ok();
    d.send("owner", &draft("coder", "a task too big for its budget"))
        .ok();
    let parked = d.path(".swarmforge/agents/coder.parked");
    crate::support::wait_until(
        std::time::Duration::from_secs(60),
        "coder is parked",
        || parked.exists(),
    );
    // The person finishes the item themselves.
    d.cmd("done-current")
        .role("coder")
        .at(d.role_dir("coder"))
        .run()
        .ok();
    d.swarm(&["budget", "raise", "coder", "--tokens", "100000"])
        .ok();
    crate::support::wait_until(
        std::time::Duration::from_secs(60),
        "parked is cleared",
        || !parked.exists(),
    );
    let st = d.swarm(&["status", "--json"]);
    assert!(
        !st.stdout.contains("\"agent_state\":\"parked\""),
        "{}",
        st.stdout
    );
    d.swarm(&["down"]).ok();
    guard.running = None;
}

/// A `runtime: tmux` Claude Code (the interactive CLI in its pane, the
/// worktree trusted by `swarm up --trust`): at its turn end the Stop hook
/// reads what its transcript gained into the activity file and the usage
/// journal, as a headless turn's stream is read (docs/headless.md, "In
/// tmux mode"); `swarm cost` holds what the model server reported, to the
/// token, and a second turn adds only its own part of the transcript.
#[test]
fn claude_code_in_tmux_records_activity_and_usage_from_its_transcript() {
    in_tmux_records_activity_and_usage(Cli::Claude, "Bash");
}

/// The same for Codex, from its session file (rollout), whose path its
/// `Stop` hook is given; its shell tool is `exec_command`.
#[test]
fn codex_in_tmux_records_activity_and_usage_from_its_rollout() {
    in_tmux_records_activity_and_usage(Cli::Codex, "exec_command");
}

/// The same for Gemini CLI, from its chat recording, whose path its
/// `AfterAgent` hook is given; its shell tool is `run_shell_command`.
#[test]
fn gemini_cli_in_tmux_records_activity_and_usage_from_its_chat_recording() {
    in_tmux_records_activity_and_usage(Cli::Gemini, "run_shell_command");
}

fn in_tmux_records_activity_and_usage(cli: Cli, shell_tool: &str) {
    let Some(mut s) = in_tmux(cli, None) else {
        return;
    };
    script(
        &s,
        cli,
        vec![
            Step::shell("ready_for_next.sh"),
            Step::shell("done_with_current.sh"),
            Step::text("Finished the first task."),
            Step::shell("ready_for_next.sh"),
            Step::shell("done_with_current.sh"),
            Step::text("Finished the second task."),
        ],
    );
    // Queued before `swarm up`, so it is there at the agent's first look
    // (a `--wait` that outlasts the CLI's patience with a silent command
    // returned "(empty)" under load while the wait went on and took the
    // item: Gemini CLI, CI of 2026-12-08).
    s.d.send("owner", &draft("coder", "first task in a pane"))
        .ok();
    s.up_with(&["--trust"]);
    s.wait("the item is finished and the turn end recorded", || {
        s.completed("coder") == 1 && turn_ends(&s) == 1
    });
    let recs = activity(&s);
    let kinds: Vec<&str> = recs.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"turn_start"), "{recs:#?}");
    assert_eq!(kinds.last(), Some(&"turn_end"), "{recs:#?}");
    assert!(
        recs.iter().any(|r| r["kind"] == "tool_call"
            && r["name"] == shell_tool
            && r["text"]
                .as_str()
                .is_some_and(|t| t.contains("ready_for_next.sh"))),
        "{recs:#?}"
    );
    // The result recorded is what the CLI itself captured of the command,
    // as it sent it to the model (step 1's request): under load Gemini CLI
    // 0.61 now and then captures nothing of a command that printed the item
    // ("Output: (empty)", seen twice in CI at the run's busiest start).
    let captured = s
        .turn("coder", 1)
        .to_string()
        .contains("first task in a pane");
    assert!(
        recs.iter().any(|r| r["kind"] == "tool_result"
            && r["status"] == "ok"
            && r["text"].as_str().is_some_and(|t| if captured {
                t.contains("first task in a pane")
            } else {
                t.contains("(empty)")
            })),
        "{recs:#?}"
    );
    assert!(
        recs.iter()
            .any(|r| r["kind"] == "text" && r["text"] == "Finished the first task."),
        "{recs:#?}"
    );
    // Every record names the item the turn worked on (finished by then).
    assert!(recs.iter().all(|r| r["id"].is_string()), "{recs:#?}");
    let (got, usage) = recorded(&s);
    assert_eq!(usage.len(), 1, "{usage:#?}");
    assert_eq!(usage[0]["source"], cli.name());
    assert_eq!(usage[0]["id"], recs[0]["id"]);
    // The first turn's three answers (steps 0 to 2), once each: the next
    // turn may have begun by now, and a request the CLI sent again under
    // load is one answer in its transcript.
    let want = first_answers(&s, "coder", 3);
    assert_eq!(got, want, "recorded {got:?}, the server reported {want:?}");
    let cost = s.swarm(&["cost", "--json"]);
    assert_eq!(cost.code, 0, "{}", cost.stderr);
    let total = &cost.json()["total"];
    assert_eq!(
        total["total_tokens"],
        want.input + want.output + want.cache_read + want.cache_write,
        "{total}"
    );

    // The next turn: only what the transcript gained since.
    s.d.send("owner", &draft("coder", "second task in a pane"))
        .ok();
    s.wait("the second item is finished and its turn recorded", || {
        s.completed("coder") == 2 && turn_ends(&s) == 2
    });
    let recs = activity(&s);
    assert_eq!(
        recs.iter()
            .filter(|r| r["kind"] == "text" && r["text"] == "Finished the first task.")
            .count(),
        1,
        "{recs:#?}"
    );
    let (got, usage) = recorded(&s);
    assert_eq!(usage.len(), 2, "{usage:#?}");
    assert_ne!(usage[0]["id"], usage[1]["id"]);
    assert_eq!(got, reported(&s, "coder", true));
    starts_are_turn_starts(&s, &usage);
}

/// Each usage record's `started` is the time of a `turn_start` in the
/// activity, before the usage's own time: a turn's span has its length.
fn starts_are_turn_starts(s: &RealSwarm, usage: &[Value]) {
    let starts: Vec<Value> = activity(s)
        .into_iter()
        .filter(|r| r["kind"] == "turn_start")
        .map(|r| r["time"].clone())
        .collect();
    for u in usage {
        assert!(starts.contains(&u["started"]), "{u} / {starts:?}");
        let t = |k: &str| chrono::DateTime::parse_from_rfc3339(u[k].as_str().unwrap()).unwrap();
        assert!(t("started") < t("time"), "{u}");
    }
}
