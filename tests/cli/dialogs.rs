//! A dialog answered once stays answered (issue 42, docs/agents.md "When an
//! agent waits for a person"): Claude Code's "Detected a custom API key"
//! question, met by every interactive Claude Code role when the person's
//! key is in `ANTHROPIC_API_KEY`. `swarm trust` records the person's
//! consent where Claude Code keeps it (the key's last 20 characters, never
//! the key), `trust --check` and `doctor` name the dialog until then; a
//! person who answers in the pane instead (`swarm attach --choose`, which
//! sees both options) answers once, for every later start of the confined
//! agent. Claude Code's first start in a HOME that never ran it (its theme
//! picker and security notes) is met the same way: shown, answered in the
//! pane, and not met again. And an authentication error from the model is
//! `blocked` while the CLI still retries, not once its retries are spent.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::real_agents::{agent_bin, draft, RealSwarm};
use crate::support::{require_tool, Project, Step, FIRST_START};

/// A key of the shape Anthropic issues (not a real one).
const KEY: &str = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789-TESTKEYxyzAA";
/// What Claude Code stores of it: the last 20 characters.
const SUFFIX: &str = "3456789-TESTKEYxyzAA";

const YAML: &str = r#"roles:
  - name: lead
    agent: claude
    worktree: master
  - name: helper
    agent: claude
    worktree: helper
  - name: batch
    agent: claude
    worktree: batch
    runtime: headless
  - name: owner
    agent: human
"#;

fn json_of(p: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(p).unwrap()).unwrap()
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file()
                && fs::read(&p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
            {
                out.push(p);
            }
        }
    }
    out
}

fn codes(r: &crate::support::Run) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().iter())
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Failed before: `trust --check` and doctor were silent about the key and
/// `swarm trust` did not record the consent, so every start of a Claude
/// Code role waited at the dialog.
#[test]
fn swarm_trust_records_consent_to_the_api_key_and_never_the_key() {
    let d = Project::empty();
    d.write("swarm.yaml", YAML);
    d.swarm(&["init"]).ok();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let claude = h.join(".claude.json");
    fs::write(
        &claude,
        json!({"hasCompletedOnboarding": true, "customApiKeyResponses": {"approved": ["an-older-key-suffix"], "rejected": []}}).to_string(),
    )
    .unwrap();
    let run = |args: &[&str]| {
        d.cmd("swarm")
            .args(args)
            .env("HOME", h)
            .env("ANTHROPIC_API_KEY", KEY)
            .run()
    };

    let r = run(&["trust", "--check"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "API key not answered: lead, helper (claude): ANTHROPIC_API_KEY is set and {} holds no answer for it",
            claude.display()
        )),
        "{}",
        r.stdout
    );
    let found = codes(&run(&["doctor", "--json"]));
    let key: Vec<&(String, String)> = found
        .iter()
        .filter(|(c, _)| c == "AGENT_CLI_API_KEY_UNANSWERED")
        .collect();
    assert_eq!(key.len(), 1, "{found:?}");
    // The headless role (`claude -p`) uses the key unasked.
    assert!(key[0].1.starts_with("role lead, helper: "), "{key:?}");

    let r = run(&["trust"]);
    r.ok();
    assert!(
        r.stdout.contains(&format!(
            "lead, helper (claude): {} customApiKeyResponses.approved (the last 20 characters of ANTHROPIC_API_KEY): added",
            claude.display()
        )),
        "{}",
        r.stdout
    );
    let v = json_of(&claude);
    assert_eq!(
        v["customApiKeyResponses"]["approved"],
        json!(["an-older-key-suffix", SUFFIX])
    );
    assert_eq!(v["hasCompletedOnboarding"], true);
    // Only what Claude Code itself stores: no file anywhere holds the key.
    let head = &KEY[..KEY.len() - SUFFIX.len()];
    for dir in [h, d.root.as_path()] {
        assert_eq!(files_holding(dir, head), Vec::<PathBuf>::new());
    }

    let r = run(&["trust", "--check"]);
    assert!(!r.stdout.contains("API key"), "{}", r.stdout);
    let found = codes(&run(&["doctor", "--json"]));
    assert!(
        !found
            .iter()
            .any(|(c, _)| c == "AGENT_CLI_API_KEY_UNANSWERED"),
        "{found:?}"
    );
    // Again: nothing to add.
    assert!(run(&["trust"])
        .stdout
        .contains("already trusted, left alone"));

    // `untrust` removes exactly the consent `trust` added.
    run(&["untrust"]).ok();
    assert_eq!(
        json_of(&claude)["customApiKeyResponses"]["approved"],
        json!(["an-older-key-suffix"])
    );

    // A "No" the person gave in Claude Code is theirs: left alone, and
    // not a finding (Claude Code does not ask again).
    fs::write(
        &claude,
        json!({"customApiKeyResponses": {"approved": [], "rejected": [SUFFIX]}}).to_string(),
    )
    .unwrap();
    let r = run(&["trust"]);
    assert!(
        r.stdout.contains("answered No in the CLI, left alone"),
        "{}",
        r.stdout
    );
    assert_eq!(
        json_of(&claude)["customApiKeyResponses"],
        json!({"approved": [], "rejected": [SUFFIX]})
    );
    let found = codes(&run(&["doctor", "--json"]));
    assert!(
        !found
            .iter()
            .any(|(c, _)| c == "AGENT_CLI_API_KEY_UNANSWERED"),
        "{found:?}"
    );

    // Without a key in the environment there is no dialog and no line.
    let r = d.cmd("swarm").args(["trust"]).env("HOME", h).run();
    assert!(!r.stdout.contains("customApiKeyResponses"), "{}", r.stdout);
}

/// Claude Code for `role` with the person's key in `ANTHROPIC_API_KEY`:
/// its endpoint in the worktree's settings, no other credential.
fn claude_with_key(s: &mut RealSwarm, role: &str, steps: Vec<Step>) {
    s.model.script(role, steps);
    let wt = s.wt(role);
    s.d.write(
        &format!(
            "{}/.claude/settings.json",
            wt.strip_prefix(&s.d.root).unwrap().display()
        ),
        &json!({"env": {
            "ANTHROPIC_BASE_URL": s.model.url(role),
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }})
        .to_string(),
    );
    s.env.push(("ANTHROPIC_API_KEY".into(), PathBuf::from(KEY)));
}

/// The person's first session of Claude Code in this swarm, before they
/// set a key: its first start answered in the pane (support/first_run.rs),
/// then `swarm down`. Claude Code started for the first time with a key in
/// `ANTHROPIC_API_KEY` checks its connection to api.anthropic.com first,
/// which no test reaches; a person who is online passes that check and
/// then meets the same pages.
fn first_session_without_a_key(s: &mut RealSwarm, role: &str) {
    s.claude(role, Vec::new());
    s.up_with(&[]);
    s.swarm(&["down"]).ok();
    s.token_in_env.set(false);
}

const ONE_CLAUDE: &str = "launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: claude\n    worktree: coder\n    wake: queue\n  - name: owner\n    agent: human\n";

/// The pinned Claude Code, confined, with the key in the environment:
/// `swarm status` shows its dialog with both options, the person chooses
/// "Yes" with `swarm attach --choose` (and the folder trust dialog of the
/// new worktree likewise), and after `swarm down` and `swarm up` the agent
/// takes its mail without asking again. Failed before: only
/// "No (recommended)" was offered (the unmarked "Yes" line was not read),
/// and the answer, kept only in the sandbox's copy of `~/.claude.json`,
/// was lost at the next start.
#[test]
fn a_confined_claudes_api_key_answer_is_offered_in_full_and_kept_across_restarts() {
    if !require_tool("tmux", "apt-get install -y tmux") || crate::support::require_bwrap().is_none()
    {
        return;
    }
    let Some(bin) = agent_bin("claude") else {
        return;
    };
    let mut s = RealSwarm::init(ONE_CLAUDE, bin);
    first_session_without_a_key(&mut s, "coder");
    claude_with_key(&mut s, "coder", vec![Step::text("Read the mail.")]);
    // The person's HOME never ran Claude Code itself.
    assert!(!s.home.path().join(".claude.json").exists());
    s.up_with(&[]);
    // The worktree is new to Claude Code: the person answers its folder
    // trust dialog in the pane, as they would, when it comes.
    s.wait("the API-key dialog is needs_input", || {
        let c = s.status_of("coder");
        let prompt = c["agent_prompt"].as_str().unwrap_or("");
        if prompt.contains("trust this folder") {
            let yes = c["agent_options"].as_array().and_then(|o| {
                o.iter()
                    .position(|o| o["label"].as_str().is_some_and(|l| l.starts_with("Yes")))
            });
            if let Some(i) = yes {
                // The pane may have moved on since the status was read
                // (`attach` then says it waits for no answer and types
                // nothing): the next look sees what it shows now.
                let _ = s.swarm(&["attach", "coder", "--choose", &(i + 1).to_string()]);
            }
        }
        prompt.contains("API key")
    });
    let c = s.status_of("coder");
    assert_eq!(c["agent_state"], "needs_input", "{c}");
    let labels: Vec<&str> = c["agent_options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Yes", "No (recommended)"], "{c}");
    let r = s.swarm(&["attach", "coder", "--choose", "1"]);
    r.ok();
    assert!(r.stdout.contains("with \"Yes\""), "{}", r.stdout);
    s.wait("the dialog is answered", || {
        s.status_of("coder")["agent_prompt"].is_null()
    });

    s.swarm(&["down"]).ok();
    s.up_with(&[]);
    s.d.send("owner", &draft("coder", "hello after a restart"))
        .ok();
    s.wait("the restarted agent takes its mail unasked", || {
        let c = s.status_of("coder");
        assert!(
            !c["agent_prompt"]
                .as_str()
                .is_some_and(|p| p.contains("API key")),
            "the API-key dialog came back after a restart: {c}"
        );
        s.reached("coder", 0)
    });
    // The answer stayed in the agent's own copy; the person's HOME still
    // has no file (only `swarm trust` writes there).
    assert!(!s.home.path().join(".claude.json").exists());
    let copy = json_of(&s.d.root.join(".swarmforge/agents/coder/home/.claude.json"));
    assert_eq!(
        copy["customApiKeyResponses"]["approved"],
        json!([SUFFIX]),
        "{copy}"
    );
}

/// The model answers 401 (a revoked key): Claude Code retries for about
/// three minutes, showing `401 <message> · retrying in …`. The swarm sees
/// `blocked` while it still retries (fewer requests than its ten
/// attempts). Failed before: `busy` until the retries were spent.
#[test]
fn an_authentication_error_is_blocked_while_claude_still_retries() {
    if !require_tool("tmux", "apt-get install -y tmux") || crate::support::require_bwrap().is_none()
    {
        return;
    }
    let Some(bin) = agent_bin("claude") else {
        return;
    };
    let mut s = RealSwarm::init(ONE_CLAUDE, bin);
    s.claude(
        "coder",
        vec![Step::refuse(401, "authentication_error", "token revoked")],
    );
    s.up_with(&["--trust"]);
    s.d.send("owner", &draft("coder", "please start")).ok();
    let mut seen = (Value::Null, 0);
    s.wait("the agent is blocked", || {
        let c = s.status_of("coder");
        if c["agent_state"] == "blocked" {
            seen = (c, s.model.turns("coder").len());
            return true;
        }
        false
    });
    let (c, asked) = seen;
    assert!(
        c["agent_prompt"]
            .as_str()
            .is_some_and(|p| p.contains("401")),
        "{c}"
    );
    assert!(
        (1..10).contains(&asked),
        "blocked only after {asked} requests (the retries were spent)"
    );
    // One error, one `blocked` event: the attempts that follow (a new
    // countdown and attempt number on screen each) are not new prompts.
    s.wait("two more attempts", || {
        s.model.turns("coder").len() >= asked + 2
    });
    let blocked = || {
        s.d.events()
            .into_iter()
            .filter(|e| e["kind"] == "blocked" && e["recipient"] == "coder")
            .count()
    };
    s.wait("the daemon logged it", || blocked() >= 1);
    assert_eq!(blocked(), 1, "{:?}", s.d.events());
}

/// `swarm up --trust` with the key in the environment: the person's
/// consent, recorded as Claude Code records it, reaches the confined agent
/// (its copy of `~/.claude.json` is seeded from the person's), which takes
/// its mail without asking. Failed before: it waited at the dialog.
#[test]
fn swarm_up_trust_answers_the_api_key_dialog_of_a_confined_claude() {
    if !require_tool("tmux", "apt-get install -y tmux") || crate::support::require_bwrap().is_none()
    {
        return;
    }
    let Some(bin) = agent_bin("claude") else {
        return;
    };
    let mut s = RealSwarm::init(ONE_CLAUDE, bin);
    first_session_without_a_key(&mut s, "coder");
    claude_with_key(&mut s, "coder", vec![Step::text("Read the mail.")]);
    s.up_with(&["--trust"]);
    s.d.send("owner", &draft("coder", "hello")).ok();
    s.wait("the agent takes its mail unasked", || {
        let c = s.status_of("coder");
        assert!(
            !c["agent_prompt"]
                .as_str()
                .is_some_and(|p| p.contains("API key")),
            "the API-key dialog waits despite `swarm up --trust`: {c}"
        );
        s.reached("coder", 0)
    });
    assert_eq!(
        json_of(&s.home.path().join(".claude.json"))["customApiKeyResponses"]["approved"],
        json!([SUFFIX])
    );
}

/// The same headless (`swarm up --no-tmux`, `claude -p`): its stream
/// reports each retry (`api_retry`, `error_status: 401`), and the role is
/// `blocked` from the first, naming the error, while the CLI still
/// retries. Failed before: `busy` until the turn ended.
#[test]
fn a_headless_claudes_authentication_error_is_blocked_while_it_retries() {
    if crate::support::require_bwrap().is_none() {
        return;
    }
    let Some(bin) = agent_bin("claude") else {
        return;
    };
    let s = RealSwarm::init(ONE_CLAUDE, bin);
    s.claude(
        "coder",
        vec![Step::refuse(401, "authentication_error", "token revoked")],
    );
    let r = s.swarm(&["up", "--no-tmux", "--detach", "--trust"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    s.d.send("owner", &draft("coder", "please start")).ok();
    let mut seen = (Value::Null, 0);
    s.wait("the headless agent is blocked", || {
        let c = s.status_of("coder");
        if c["agent_state"] == "blocked" {
            seen = (c, s.model.turns("coder").len());
            return true;
        }
        false
    });
    let (c, asked) = seen;
    assert_eq!(
        c["agent_prompt"], "claude API error 401 authentication_failed",
        "{c}"
    );
    assert!(
        (1..10).contains(&asked),
        "blocked only after {asked} requests (the retries were spent)"
    );
    // The mark is written before its journal line: the line follows.
    s.wait("the daemon logged it", || {
        s.d.events()
            .iter()
            .any(|e| e["kind"] == "blocked" && e["recipient"] == "coder")
    });
}

/// Headless Codex (`codex exec --json`) and Gemini CLI (`-p
/// --output-format stream-json`) answered 401 by the model: `blocked`, with
/// the CLI's words, from Codex's first reconnect (it tries five times, then
/// fails the turn) and from Gemini CLI's failed turn (it retries nothing it
/// reports on a 401; the mark stays after the turn it ended), not a role
/// restarted until it is parked (issue 42, point 4). Failed before:
/// neither stream was read for a refusal.
#[test]
fn a_headless_codex_or_gemini_authentication_error_is_blocked() {
    if crate::support::require_bwrap().is_none() {
        return;
    }
    for (cli, said) in [
        ("codex", "codex API error 401 Unauthorized"),
        ("gemini", "gemini API error 401 UNAUTHENTICATED"),
    ] {
        let Some(bin) = agent_bin(cli) else {
            return;
        };
        let args = match cli {
            "codex" => format!("    args: {}\n", crate::real_agents::codex_args("coder")),
            _ => String::new(),
        };
        let yaml = format!(
            "launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: {cli}\n    worktree: coder\n{args}  - name: owner\n    agent: human\n"
        );
        let s = RealSwarm::init(&yaml, bin);
        match cli {
            "codex" => s.codex(
                "coder",
                vec![Step::refuse(401, "invalid_api_key", "token revoked")],
            ),
            _ => s.gemini(
                "coder",
                vec![Step::refuse(401, "UNAUTHENTICATED", "API key not valid.")],
            ),
        }
        let r = s.swarm(&["up", "--no-tmux", "--detach", "--trust"]);
        assert_eq!(r.code, 0, "{cli}: {}\n{}", r.stdout, r.stderr);
        s.d.send("owner", &draft("coder", "please start")).ok();
        let mut seen = Value::Null;
        s.wait(&format!("the headless {cli} is blocked"), || {
            seen = s.status_of("coder");
            seen["agent_state"] == "blocked"
        });
        assert_eq!(seen["agent_prompt"], said, "{cli}: {seen}");
        s.wait(&format!("the daemon logged {cli} blocked"), || {
            s.d.events()
                .iter()
                .any(|e| e["kind"] == "blocked" && e["recipient"] == "coder")
        });
    }
}

/// The label of each option `role`'s status offers.
fn labels(c: &Value) -> Vec<String> {
    c["agent_options"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| o["label"].as_str().unwrap_or("").to_string())
        .collect()
}

/// A HOME that never ran Claude Code: the confined agent's pane opens with
/// Claude Code's first start. `swarm status` shows the theme picker as
/// `needs_input` with all seven themes, the person chooses one with `swarm
/// attach --choose`, then passes the security notes the same way; the
/// agent takes its task. After `swarm down` and `swarm up` the first start
/// does not come back, and the answers stay in the agent's copy (never
/// written into the person's files). Failed before: neither page was seen
/// (the picker's check mark hid its marker, the notes have no option), so
/// status said nothing and `--choose` refused to type.
#[test]
fn claudes_first_start_in_a_never_used_home_is_answered_in_the_pane_once() {
    if !require_tool("tmux", "apt-get install -y tmux") || crate::support::require_bwrap().is_none()
    {
        return;
    }
    let Some(bin) = agent_bin("claude") else {
        return;
    };
    let mut s = RealSwarm::init(ONE_CLAUDE, bin);
    let task = vec![
        Step::shell("ready_for_next.sh"),
        Step::shell("done_with_current.sh"),
        Step::text("Done."),
    ];
    s.claude("coder", [task.clone(), task].concat());
    let person = s.home.path().join(".claude.json");
    assert!(!person.exists());
    s.start(&["--trust"]);

    let mut c = Value::Null;
    s.wait("the theme picker is needs_input", || {
        c = s.status_of("coder");
        c["agent_prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with(FIRST_START))
    });
    assert_eq!(c["agent_state"], "needs_input", "{c}");
    assert!(c["agent_prompt"].as_str().unwrap().contains("theme"), "{c}");
    assert_eq!(labels(&c).len(), 7, "{c}");
    assert_eq!(labels(&c)[0], "Auto (match terminal)", "{c}");
    assert_eq!(labels(&c)[1], "Dark mode", "{c}");
    // The person is told each option and how to choose it.
    let plain = s.swarm(&["status"]).stdout;
    assert!(
        plain.contains("coder: agent needs_input")
            && plain.contains("first start")
            && plain.contains("; options: 1. Auto (match terminal) | 2. Dark mode | 3. Light mode")
            && plain.contains("(swarm attach coder --choose N)"),
        "{plain}"
    );
    let r = s.swarm(&["attach", "coder", "--choose", "2"]);
    r.ok();
    assert!(r.stdout.contains("with \"Dark mode\""), "{}", r.stdout);
    s.wait("the security notes are needs_input", || {
        c = s.status_of("coder");
        c["agent_prompt"]
            .as_str()
            .is_some_and(|p| p.contains("security notes"))
    });
    assert_eq!(labels(&c), ["Continue"], "{c}");
    s.swarm(&["attach", "coder", "--choose", "1"]).ok();
    s.d.send("owner", &draft("coder", "the first task")).ok();
    s.wait("the agent takes and finishes its task", || {
        s.completed("coder") == 1
    });

    s.swarm(&["down"]).ok();
    // Queued while the swarm is down: in the inbox at the restarted agent's
    // first look (`swarm up` starts it after the first delivery), where
    // sent after the start it waited for the re-wake (`wake: queue`, 60 s).
    s.d.send("owner", &draft("coder", "a task after a restart"))
        .ok();
    s.start(&[]);
    s.wait("the restarted agent finishes its task unasked", || {
        let c = s.status_of("coder");
        assert!(
            !c["agent_prompt"]
                .as_str()
                .is_some_and(|p| p.starts_with(FIRST_START)),
            "the first start came back after a restart: {c}"
        );
        s.completed("coder") == 2
    });
    // The answers are in the agent's copy, not the person's file (which
    // holds only the folder trust `swarm up --trust` recorded).
    let copy = json_of(&s.d.root.join(".swarmforge/agents/coder/home/.claude.json"));
    assert_eq!(copy["hasCompletedOnboarding"], true, "{copy}");
    let mine = json_of(&person);
    assert!(mine.get("hasCompletedOnboarding").is_none(), "{mine}");
    // Claude Code writes the theme chosen into the user settings, which the
    // person's own sessions load: read-only to the agent, so not written.
    let settings = fs::read_to_string(s.home.path().join(".claude/settings.json")).unwrap();
    assert!(!settings.contains("theme"), "{settings}");
}
