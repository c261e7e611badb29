//! Real coding agents (issue 18): presets, the primer, turn-end hooks,
//! wake-ups that do not interrupt, liveness and operator notifications.
//! No model runs here: fake `claude`, `codex` and `gemini` executables on
//! PATH record their argv, environment and working directory, and the
//! interactive fake behaves like a terminal agent (busy while working, an
//! idle prompt between turns).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{bin_dir, require_tool, wait_until, Project, Role, SwarmGuard};

const WAKE_TEXT: &str = "You have new handoff mail. If idle, run ready_for_next.sh.";

/// A folder of fake CLIs, first on PATH; each records what it was started
/// with into `<log>/<cli>.<role>` and exits.
struct Fakes {
    bin: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

const RECORDER: &str = r#"#!/bin/sh
out="$FAKE_LOG/$(basename "$0").$SWARMFORGE_ROLE"
{
  printf 'cwd=%s\n' "$PWD"
  printf 'role=%s\n' "$SWARMFORGE_ROLE"
  printf 'project=%s\n' "$SWARMFORGE_PROJECT"
  printf 'path0=%s\n' "${PATH%%:*}"
  for a in "$@"; do printf 'arg=%s\n' "$a" | tr '\n' '\036'; printf '\n'; done
} >"$out.tmp" && mv "$out.tmp" "$out"
"#;

/// Emulates a terminal agent: busy (printing) until `<log>/release` exists,
/// then an idle prompt; each line typed starts a short busy turn. Text that
/// arrived while it was busy is logged `TYPED_WHILE_BUSY`.
const INTERACTIVE: &str = r#"#!/bin/bash
log="$FAKE_LOG/$(basename "$0").$SWARMFORGE_ROLE.io"
echo "PID $$" >>"$log"
i=0
while [ ! -e "$FAKE_LOG/release" ]; do i=$((i+1)); echo "thinking $i"; sleep 0.1; done
if read -r -t 0.05 early; then echo "TYPED_WHILE_BUSY $early" >>"$log"; fi
echo IDLE >>"$log"
while :; do
  printf '> '
  IFS= read -r line || exit 0
  [ -z "$line" ] && continue
  echo "GOT $line" >>"$log"
  for n in 1 2 3; do echo "working $n"; sleep 0.1; done
  if read -r -t 0.05 more; then echo "TYPED_WHILE_BUSY $more" >>"$log"; fi
done
"#;

impl Fakes {
    fn new(script: &str) -> Fakes {
        Fakes::logging_to(script, None)
    }

    /// With the records in `log` (a folder a confined agent may write),
    /// else in the fakes' own temporary folder.
    fn logging_to(script: &str, log: Option<PathBuf>) -> Fakes {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let log = log.unwrap_or_else(|| dir.path().join("log"));
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(&log).unwrap();
        for cli in ["claude", "codex", "gemini"] {
            let p = bin.join(cli);
            fs::write(&p, script).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        }
        Fakes {
            bin,
            log,
            _dir: dir,
        }
    }

    fn path(&self) -> String {
        format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    fn record(&self, cli: &str, role: &str) -> Option<String> {
        fs::read_to_string(self.log.join(format!("{cli}.{role}"))).ok()
    }

    fn io(&self, cli: &str, role: &str) -> String {
        fs::read_to_string(self.log.join(format!("{cli}.{role}.io"))).unwrap_or_default()
    }

    fn release(&self) {
        fs::write(self.log.join("release"), "").unwrap();
    }
}

/// `(key, value)` lines of a recording; an argument's own newlines come back.
fn fields(rec: &str, key: &str) -> Vec<String> {
    rec.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(|v| v.trim_end_matches('\u{1e}').replace('\u{1e}', "\n"))
        .collect()
}

fn up(d: &Project, fakes: &Fakes, args: &[&str]) -> crate::support::Run {
    d.cmd("swarm")
        .arg("up")
        .args(args)
        .env("PATH", fakes.path())
        .env("FAKE_LOG", &fakes.log)
        .run()
}

fn json_file(p: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(p).unwrap()).unwrap()
}

const PRESETS_YAML: &str = r#"launch:
  stagger: 0ms
  confine: false  # the fake CLIs write their records to the test, outside the worktree
roles:
  - name: architect
    agent: claude
    worktree: architect
    model: opus
    description: plans the work
  - name: coder
    agent: codex
    worktree: coder
    model: o4-mini
    args: ["-c", "model_reasoning_effort=high"]
  - name: reviewer
    agent: gemini
    permission: full
    args: [--debug]
  - name: owner
    agent: human
"#;

#[test]
fn presets_start_each_cli_as_its_docs_say() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    d.write("swarm.yaml", PRESETS_YAML);
    let fakes = Fakes::new(RECORDER);
    // In tmux: `--no-tmux` runs presets headless (docs/headless.md).
    let _guard = up_in_tmux(&d, &fakes);
    wait_until(Duration::from_secs(30), "every fake started", || {
        ["claude.architect", "codex.coder", "gemini.reviewer"]
            .iter()
            .all(|f| fakes.log.join(f).exists())
    });
    d.swarm(&["down"]).ok();

    let root = d.root.display().to_string();
    let bin = bin_dir().display().to_string();
    let claude = fakes.record("claude", "architect").unwrap();
    assert_eq!(
        fields(&claude, "cwd"),
        [format!("{root}/.worktrees/architect")]
    );
    assert_eq!(fields(&claude, "role"), ["architect"]);
    assert_eq!(fields(&claude, "project"), [root.as_str()]);
    assert_eq!(
        fields(&claude, "path0"),
        [format!("{root}/.swarmforge/bin")]
    );
    assert_eq!(
        fields(&claude, "arg"),
        [
            "--append-system-prompt-file".to_string(),
            format!("{root}/.swarmforge/prompts/architect.md"),
            "--permission-mode".into(),
            "acceptEdits".into(),
            "--model".into(),
            "opus".into(),
            "You are the agent of role architect in this swarm; your instructions are loaded. Start now: run ready_for_next.sh.".into(),
        ]
    );
    let primer = |role: &str| {
        let r = d.swarm(&["prompt", role]);
        r.ok();
        r.stdout.clone()
    };
    assert_eq!(
        d.read(".swarmforge/prompts/architect.md"),
        primer("architect")
    );
    assert_eq!(
        json_file(&d.path(".worktrees/architect/.claude/settings.local.json")),
        json!({
            "hooks": {"Stop": [{"hooks": [{"type": "command",
                "command": format!("'{bin}/swarm' hook claude Stop"), "timeout": 30}]}]},
            "permissions": {"allow": ["Bash(ready_for_next.sh:*)",
                "Bash(done_with_current.sh:*)", "Bash(swarm_handoff.sh:*)"]}
        })
    );

    let codex = fakes.record("codex", "coder").unwrap();
    assert_eq!(fields(&codex, "cwd"), [format!("{root}/.worktrees/coder")]);
    assert_eq!(
        fields(&codex, "arg"),
        [
            "--cd".to_string(),
            format!("{root}/.worktrees/coder"),
            "-c".into(),
            "allow_login_shell=false".into(),
            // The turn-end hook on the command line (agents/codex_hooks.rs).
            "-c".into(),
            format!(
                "hooks.Stop=[{{hooks=[{{type=\"command\",command=\"'{bin}/swarm' hook codex Stop\",timeout=30}}]}}]"
            ),
            "--sandbox".into(),
            "workspace-write".into(),
            "--ask-for-approval".into(),
            "on-request".into(),
            "--add-dir".into(),
            root.clone(),
            "--model".into(),
            "o4-mini".into(),
            "-c".into(),
            "model_reasoning_effort=high".into(),
            "You are the agent of role coder in this swarm; your instructions are loaded. Start now: run ready_for_next.sh.".into(),
        ]
    );
    let agents_md = d.read(".worktrees/coder/AGENTS.md");
    assert!(
        agents_md.starts_with("<!-- swarm-handoff: begin")
            && agents_md.contains(&primer("coder"))
            && agents_md.ends_with("<!-- swarm-handoff: end -->\n"),
        "{agents_md}"
    );
    // Codex loads no hooks.json from a linked worktree: the hook came on
    // the command line above, and no file is written for it.
    assert!(!d.path(".worktrees/coder/.codex/hooks.json").exists());

    // In the shared root the primer is the first prompt, not GEMINI.md
    // (roles sharing a worktree would overwrite each other's).
    let gemini = fakes.record("gemini", "reviewer").unwrap();
    assert_eq!(fields(&gemini, "cwd"), [root.as_str()]);
    assert_eq!(
        fields(&gemini, "arg"),
        [
            "--approval-mode".to_string(),
            "yolo".into(),
            "--debug".into(),
            "--prompt-interactive".into(),
            primer("reviewer").trim_end().to_string(),
        ]
    );
    assert!(!d.path("GEMINI.md").exists());
    assert_eq!(
        json_file(&d.path(".gemini/settings.json")),
        json!({"hooks": {"AfterAgent": [{"hooks": [{"name": "swarm-handoff", "type": "command",
            "command": format!("'{bin}/swarm' hook gemini AfterAgent"), "timeout": 30000}]}]},
            "tools": {"allowed": ["run_shell_command(ready_for_next.sh)",
                "run_shell_command(done_with_current.sh)", "run_shell_command(swarm_handoff.sh)"]}})
    );
    assert!(fakes.record("claude", "owner").is_none());
    // Our files stay out of `git status` in every worktree.
    let status = crate::support::git(&d.path(".worktrees/coder"), &["status", "--porcelain"]);
    assert_eq!(status, "", "{status}");
}

#[test]
fn a_second_up_keeps_the_projects_own_instructions_and_settings() {
    let d = Project::empty();
    // `mcp: true`: the role's CODEX_HOME is `.codex` in its worktree, whose
    // hooks.json gets the turn-end hook (other Codex roles get it on their
    // command line, agents/codex_hooks.rs).
    d.write(
        "swarm.yaml",
        "launch:\n  stagger: 0ms\n  confine: false  # the fake CLIs write their records to the test, outside the worktree\nroles:\n  - name: coder\n    agent: codex\n    worktree: coder\n    mcp: true\n",
    );
    let fakes = Fakes::new(RECORDER);
    let _guard = SwarmGuard::new(&d.root);
    d.swarm(&["init"]).ok();
    d.write(".worktrees/coder/AGENTS.md", "# House rules\nTabs.\n");
    d.write(
        ".worktrees/coder/.codex/hooks.json",
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "lint"}]}]}, "x": 1}"#,
    );
    for _ in 0..2 {
        let r = up(&d, &fakes, &["--no-tmux", "--detach"]);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        d.swarm(&["down"]).ok();
    }
    let md = d.read(".worktrees/coder/AGENTS.md");
    assert!(
        md.starts_with("# House rules\nTabs.\n\n<!-- swarm-handoff: begin"),
        "{md}"
    );
    assert_eq!(md.matches("swarm-handoff: begin").count(), 1, "{md}");
    let hooks = json_file(&d.path(".worktrees/coder/.codex/hooks.json"));
    assert_eq!(hooks["x"], 1);
    let stop = hooks["hooks"]["Stop"].as_array().unwrap();
    assert_eq!(stop.len(), 2, "{hooks}");
    assert_eq!(stop[0]["hooks"][0]["command"], "lint");

    // A settings file that is not JSON is refused, never overwritten.
    d.write(".worktrees/coder/.codex/hooks.json", "{oops");
    let r = up(&d, &fakes, &["--no-tmux", "--detach"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    r.stderr_has(&format!(
        "{}: not valid JSON",
        d.path(".worktrees/coder/.codex/hooks.json").display()
    ));
    r.stderr_has("hint: repair it");
    assert_eq!(d.read(".worktrees/coder/.codex/hooks.json"), "{oops");
}

const PRIMER_YAML: &str = r#"roles:
  - name: lead
    agent: claude
    description: splits requests into tasks
    prompt: |
      You split each request into tasks for dev.
  - name: dev
    agent: codex
    worktree: dev
    description: implements tasks
    allowed_types: [note]
  - name: owner
    agent: human
forum:
  moderator: lead
"#;

#[test]
fn the_primer_follows_allowed_types_people_and_the_forum() {
    let d = Project::empty();
    d.write("swarm.yaml", PRIMER_YAML);
    let lead = d.cmd("swarm").args(["prompt", "lead", "--size"]).run();
    lead.ok();
    let t = &lead.stdout;
    assert!(t.starts_with("# Swarm role: lead\n\n"), "{t}");
    assert!(
        t.contains("## Your job\n\nYou split each request into tasks for dev.\n"),
        "{t}"
    );
    assert!(
        t.contains("- `dev` (agent): implements tasks\n- `owner` (person)\n"),
        "{t}"
    );
    assert!(
        t.contains(
            "You may send git_handoff, note, post, clarify, answer, digest, close or react:"
        ),
        "{t}"
    );
    assert!(t.contains("```\ntype: clarify\nto: owner\npriority: 50\nquestion: <the question>\nallow_multiple: no\nallow_custom: no\n\n<option 1>\n<option 2>\n```"), "{t}");
    assert!(t.contains("```\ntype: digest\nto: all\n"), "{t}");
    assert!(t.contains("## Asking a person\n"), "{t}");
    assert!(t.contains("## Forum\n"), "{t}");
    assert!(t.contains("## When to stop\n"), "{t}");
    // The figure docs/agents.md quotes is bytes/4; it stays small.
    let tokens: usize = lead
        .stderr
        .split("about ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert_eq!(tokens, t.len().div_ceil(4));
    assert!(tokens < 1200, "{tokens}");

    let dev = d.swarm(&["prompt", "dev"]);
    dev.ok();
    let t = &dev.stdout;
    assert!(t.contains("You may send note:\n\n```\ntype: note\nto: lead\npriority: 50\nmessage: <one line, at most 80 characters>\n```\n"), "{t}");
    for absent in [
        "type: git_handoff",
        "type: clarify",
        "type: digest",
        "## Asking a person",
    ] {
        assert!(!t.contains(absent), "{absent} in {t}");
    }
    assert!(
        t.contains("- `lead` (agent): splits requests into tasks\n"),
        "{t}"
    );

    // Without a person and a forum, neither section appears.
    d.write(
        "swarm.yaml",
        "roles:\n  - name: a\n    agent: claude\n  - name: b\n    agent: gemini\n",
    );
    let t = d.swarm(&["prompt", "a"]).stdout;
    assert!(
        !t.contains("## Asking a person") && !t.contains("## Forum"),
        "{t}"
    );
    assert!(t.contains("No job was configured for this role"), "{t}");

    let j = d.swarm(&["prompt", "a", "--json"]).json();
    assert_eq!(
        (j["role"].as_str(), j["text"].as_str()),
        (Some("a"), Some(t.as_str()))
    );
    assert_eq!(j["approx_tokens"], t.len().div_ceil(4));
    assert!(j["schema_version"].is_number(), "{j}");
    let r = d.cmd("swarm").args(["prompt", "zed"]).code(1).run();
    r.stderr_has("no role 'zed' in");
    r.stderr_has("hint: one of: a, b");
}

fn hook(p: &Project, role: Option<&str>, cli: &str, event: &str, stdin: &str) -> String {
    let mut c = p.cmd("swarm").args(["hook", cli, event]).stdin(stdin);
    if let Some(r) = role {
        c = c.role(r);
    }
    let r = c.run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout
}

/// Sends `draft` as `role` from its own worktree.
fn send(p: &Project, role: &str, draft: &str) {
    let dir = p.role_dir(role);
    fs::write(dir.join("draft.txt"), draft).unwrap();
    p.cmd("swarm-handoff")
        .role(role)
        .arg("draft.txt")
        .run()
        .ok();
}

fn note(p: &Project, from: &str, to: &str, msg: &str) {
    send(
        p,
        from,
        &format!("type: note\nto: {to}\npriority: 10\nmessage: {msg}\n"),
    );
}

/// Without a daemon: send, then one delivery pass.
fn note_now(p: &Project, from: &str, to: &str, msg: &str) {
    note(p, from, to, msg);
    p.deliver_once().ok();
}

#[test]
fn the_hook_answers_in_each_clis_format_and_is_bounded() {
    let p = Project::builder()
        .role(Role::new("coder").worktree("coder"))
        .role(Role::new("lead").worktree("lead"))
        .queue_dirs()
        .build();
    let allow = "{}\n";
    assert_eq!(hook(&p, Some("coder"), "claude", "Stop", "{}"), allow);
    note_now(&p, "lead", "coder", "one");
    let reason = "New handoff mail is waiting for role coder. Run ready_for_next.sh now, do the item it prints, then run done_with_current.sh.";
    let block = format!("{{\"decision\":\"block\",\"reason\":\"{reason}\"}}\n");
    let deny = format!("{{\"decision\":\"deny\",\"reason\":\"{reason}\"}}\n");
    let active = r#"{"session_id":"s","hook_event_name":"Stop","stop_hook_active":true}"#;
    assert_eq!(hook(&p, Some("coder"), "claude", "Stop", "{}"), block);
    // Told once and the same mail still waits: the turn may end.
    assert_eq!(hook(&p, Some("coder"), "claude", "Stop", active), allow);
    assert_eq!(hook(&p, Some("coder"), "codex", "Stop", "not json"), block);
    assert_eq!(hook(&p, Some("coder"), "gemini", "AfterAgent", "{}"), deny);
    // Mail keeps arriving while the agent keeps going: at most 5 in a row.
    let mut blocks = 1;
    assert_eq!(hook(&p, Some("coder"), "claude", "Stop", "{}"), block);
    for i in 0..8 {
        note_now(&p, "lead", "coder", &format!("more-{i}"));
        if hook(&p, Some("coder"), "claude", "Stop", active) == block {
            blocks += 1;
        }
    }
    assert_eq!(blocks, 5);
    // Work in process: nothing to say.
    p.cmd("ready-next").role("coder").run().ok();
    assert_eq!(hook(&p, Some("coder"), "claude", "Stop", "{}"), allow);
    // Not a role, no role, no project (a hook left behind): harmless.
    assert_eq!(hook(&p, Some("lead"), "codex", "Stop", "{}"), allow);
    let r = p
        .cmd("swarm")
        .args(["hook", "claude", "Stop"])
        .stdin("{}")
        .run();
    assert_eq!((r.code, r.stdout.as_str()), (0, allow));
    r.stderr_has("SWARMFORGE_ROLE is not set");
    let elsewhere = tempfile::tempdir().unwrap();
    let r = p
        .cmd("swarm")
        .role("coder")
        .at(elsewhere.path())
        .args(["hook", "gemini", "AfterAgent"])
        .stdin("{}")
        .run();
    assert_eq!((r.code, r.stdout.as_str()), (0, allow));
    p.cmd("swarm")
        .args(["hook", "cursor", "Stop"])
        .code(1)
        .stderr_has("unknown CLI 'cursor'")
        .run();
    p.cmd("swarm")
        .args(["hook", "gemini", "Stop"])
        .code(1)
        .stderr_has("install it for AfterAgent")
        .run();
}

/// A CLI plugin's copy of the turn-end hook (`--plugin`, plugins/*/hooks)
/// answers only where the swarm's own hook does not run in the same
/// session: beside it, the turn end would be answered twice (the agent told
/// twice, the continuation counted twice, two turn-end requests).
#[test]
fn a_plugins_hook_stands_aside_where_the_swarms_own_hook_runs() {
    let p = Project::builder()
        .role(Role::new("coder").worktree("coder"))
        .role(Role::new("lead").worktree("lead"))
        .queue_dirs()
        .build();
    note_now(&p, "lead", "coder", "one");
    let wt = p.role_dir("coder");
    let input = format!(
        "{{\"transcript_path\": \"{}\"}}",
        wt.join("t.jsonl").display()
    );
    let turn_ends = p.path(".swarmforge/agents/coder/turn-end");
    let plugin = |cli: &str, event: &str, env: Option<&str>| {
        let mut c = p
            .cmd("swarm")
            .role("coder")
            .at(&wt)
            .args(["hook", cli, event, "--plugin"])
            .stdin(input.as_str());
        if let Some(v) = env {
            c = c.env("SWARMFORGE_TURN_HOOK", v);
        }
        let r = c.run();
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout
    };
    let allow = "{}\n";
    // The only hook (a session the person started, no swarm settings): it
    // does the hook's whole work.
    assert!(plugin("claude", "Stop", None).contains("\"block\""));
    assert!(turn_ends.exists(), "no turn-end request left");
    fs::remove_file(&turn_ends).unwrap();
    // An agent's file naming only the plugin's own command is no swarm hook.
    fs::create_dir_all(wt.join(".claude")).unwrap();
    let settings = |cmd: &str| {
        serde_json::json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": cmd}]}]}})
            .to_string()
    };
    fs::write(
        wt.join(".claude/settings.local.json"),
        settings("swarm hook claude Stop --plugin"),
    )
    .unwrap();
    assert!(plugin("claude", "Stop", None).contains("\"block\""));
    fs::remove_file(&turn_ends).unwrap();
    // The worktree's settings as `swarm up` writes them: the swarm's hook
    // answers, the plugin's lets the turn end and leaves nothing.
    fs::write(
        wt.join(".claude/settings.local.json"),
        settings("'/opt/bin/swarm' hook claude Stop"),
    )
    .unwrap();
    assert_eq!(plugin("claude", "Stop", None), allow);
    assert!(!turn_ends.exists(), "the plugin's copy left a turn end");
    // Started by `swarm up` (Codex's hook on its command line): the
    // environment says so, for that CLI only.
    assert_eq!(plugin("codex", "Stop", Some("codex")), allow);
    assert!(plugin("codex", "Stop", Some("claude")).contains("\"block\""));
    assert!(!plugin("gemini", "AfterAgent", None).contains(allow));
}

/// docs/cost.md: a turn end whose transcript cannot be read is not lost
/// silently: the hook (which may run confined) only leaves the turn end in
/// the role's folder; the daemon's reading of it fails, and a `lost` usage
/// record and an `activity_lost` event in the journal say so; `swarm cost`
/// counts the turn as not read instead of showing sums that look whole.
#[test]
fn an_unreadable_transcript_is_counted_as_a_turn_not_read() {
    let p = Project::builder()
        .role(Role::new("coder").worktree("coder").agent("claude"))
        .role(Role::new("lead").worktree("lead"))
        .queue_dirs()
        .build();
    p.deliver_once().ok(); // the daemon has run: its journal exists
                           // A transcript outside Claude Code's projects folder is refused.
    let r = p
        .cmd("swarm")
        .role("coder")
        .args(["hook", "claude", "Stop"])
        .stdin(r#"{"hook_event_name":"Stop","transcript_path":"/etc/hostname.jsonl"}"#)
        .run();
    assert_eq!((r.code, r.stdout.as_str()), (0, "{}\n"), "{}", r.stderr);
    assert!(!p.root.join(".swarmforge/telemetry/usage.jsonl").exists());
    p.deliver_once().ok();
    let usage = p.read(".swarmforge/telemetry/usage.jsonl");
    assert_eq!(usage.lines().count(), 1, "{usage}");
    let rec: Value = serde_json::from_str(usage.lines().next().unwrap()).unwrap();
    assert_eq!(rec["role"], "coder");
    assert!(rec["lost"].as_str().is_some_and(|w| !w.is_empty()), "{rec}");
    let lost: Vec<Value> = events(&p)
        .into_iter()
        .filter(|e| e["kind"] == "activity_lost" && e["recipient"] == "coder")
        .collect();
    assert_eq!(lost.len(), 1, "{lost:?}");
    // Read once: another pass journals nothing new.
    p.deliver_once().ok();
    assert_eq!(
        p.read(".swarmforge/telemetry/usage.jsonl").lines().count(),
        1
    );
    let r = p.cmd("swarm").args(["cost"]).run();
    r.ok();
    let coder = r
        .stdout
        .lines()
        .find(|l| l.starts_with("coder"))
        .unwrap_or_default();
    assert!(coder.contains("(1 not read)"), "{}", r.stdout);
    r.stdout_has("not read: those turns ended");
    let json = p.cmd("swarm").args(["cost", "--json"]).run();
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["total"]["unread_turns"], 1, "{v}");
    // status and audit say so too.
    p.cmd("swarm")
        .args(["status"])
        .run()
        .stdout_has("(+1 turns not read)");
    let audit = p.cmd("swarm").args(["audit", "--json"]).run().json();
    let coder = audit["spend"]["roles"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["role"] == "coder"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(coder["unread_turns"], 1, "{audit}");
    // A request that is not one (the agent's folder is the agent's) is
    // journaled once too.
    p.write(".swarmforge/agents/coder/turn-end", "{not json");
    p.deliver_once().ok();
    p.deliver_once().ok();
    let lost = events(&p)
        .into_iter()
        .filter(|e| e["kind"] == "activity_lost")
        .count();
    assert_eq!(lost, 2);
}

fn events(d: &Project) -> Vec<Value> {
    d.events()
}

fn kinds_for(d: &Project, role: &str) -> Vec<String> {
    events(d)
        .iter()
        .filter(|e| e["recipient"] == role)
        .map(|e| e["kind"].as_str().unwrap_or("").to_string())
        .collect()
}

fn wake_yaml(wake: &str) -> String {
    format!(
        "launch:\n  stagger: 0ms\n  confine: false  # the fake CLIs write their records to the test, outside the worktree\nwake:\n  quiet: 300ms\ndaemon:\n  sweep: 200ms\n  ack_within: 600s\nroles:\n  - name: lead\n    agent: human\n  - name: coder\n    agent: claude\n    worktree: coder\n    wake: {wake}\n"
    )
}

/// `swarm up --detach` in tmux; the guard stops the swarm and its tmux.
fn up_in_tmux(d: &Project, fakes: &Fakes) -> SwarmGuard {
    let mut guard = SwarmGuard::new(&d.root);
    let r = up(d, fakes, &["--detach"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    guard.socket = Some(PathBuf::from(d.read(".swarmforge/tmux-socket").trim()));
    guard
}

fn tmux_swarm(d: &Project, fakes: &Fakes, yaml: &str) -> SwarmGuard {
    d.write("swarm.yaml", yaml);
    let guard = up_in_tmux(d, fakes);
    wait_until(Duration::from_secs(30), "the fake agent runs", || {
        fakes.io("claude", "coder").contains("PID ")
    });
    guard
}

#[test]
fn an_idle_wake_waits_for_the_busy_agent_and_lands_once_it_is_idle() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    let fakes = Fakes::new(INTERACTIVE);
    let _guard = tmux_swarm(&d, &fakes, &wake_yaml("idle"));
    note(&d, "lead", "coder", "build-it");
    wait_until(Duration::from_secs(30), "the wake-up deferred", || {
        kinds_for(&d, "coder").contains(&"deferred_busy".to_string())
    });
    let st = d.swarm(&["status", "--json"]).json();
    let coder = &st["roles"].as_array().unwrap()[1];
    assert_eq!(coder["agent_state"], "busy", "{st}");
    assert_eq!(coder["not_moving"], "wake deferred: busy", "{st}");
    assert!(!kinds_for(&d, "coder").contains(&"woken".to_string()));
    fakes.release();
    wait_until(Duration::from_secs(30), "the wake-up typed", || {
        fakes
            .io("claude", "coder")
            .contains(&format!("GOT {WAKE_TEXT}"))
    });
    // The event follows the typing (text, Enter, then the journal).
    wait_until(Duration::from_secs(30), "woken journaled", || {
        kinds_for(&d, "coder").contains(&"woken".to_string())
    });
    let io = fakes.io("claude", "coder");
    assert!(!io.contains("TYPED_WHILE_BUSY"), "{io}");
    let k = kinds_for(&d, "coder");
    let at = |w: &str| {
        k.iter()
            .position(|x| x == w)
            .unwrap_or_else(|| panic!("{w} not in {k:?}"))
    };
    assert!(at("deferred_busy") < at("woken"), "{k:?}");
    assert_eq!(
        k.iter().filter(|x| *x == "deferred_busy").count(),
        1,
        "{k:?}"
    );
}

#[test]
fn an_immediate_wake_types_at_once() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    let fakes = Fakes::new(INTERACTIVE);
    let _guard = tmux_swarm(&d, &fakes, &wake_yaml("immediate"));
    note(&d, "lead", "coder", "build-it");
    wait_until(Duration::from_secs(30), "woken", || {
        kinds_for(&d, "coder").contains(&"woken".to_string())
    });
    fakes.release();
    wait_until(Duration::from_secs(30), "the fake saw the typing", || {
        fakes.io("claude", "coder").contains("IDLE")
    });
    let io = fakes.io("claude", "coder");
    assert!(
        io.contains(&format!("TYPED_WHILE_BUSY {WAKE_TEXT}")),
        "{io}"
    );
    assert!(!kinds_for(&d, "coder").contains(&"deferred_busy".to_string()));
}

#[test]
fn liveness_and_notifications_follow_a_killed_agent() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    let fakes = Fakes::new(INTERACTIVE);
    // `queue`: nothing types into the pane, so the dead agent stays dead.
    let yaml = format!(
        "{}notify:\n  command: printf '%s|%s|%s|%s\\n' \"$SWARMFORGE_EVENT\" \"$SWARMFORGE_ROLE\" \"$SWARMFORGE_ID\" \"$SWARMFORGE_SUMMARY\" >> \"$SWARMFORGE_PROJECT/notified\"\n",
        wake_yaml("queue")
    );
    let guard = tmux_swarm(&d, &fakes, &yaml);
    fakes.release();
    wait_until(Duration::from_secs(30), "the fake is idle", || {
        fakes.io("claude", "coder").contains("IDLE")
    });
    let state = |d: &Project| {
        let st = d.swarm(&["status", "--json"]).json();
        st["roles"].as_array().unwrap()[1].clone()
    };
    wait_until(Duration::from_secs(30), "idle in status", || {
        state(&d)["agent_state"] == "idle"
    });
    assert_eq!(
        state(&d)["agent_since"].as_str().map(|s| s.ends_with('Z')),
        Some(true)
    );
    assert!(state(&d).get("not_moving").unwrap().is_null());
    let io = fakes.io("claude", "coder");
    let pid: u32 = io
        .lines()
        .find_map(|l| l.strip_prefix("PID "))
        .unwrap()
        .parse()
        .unwrap();
    crate::support::signal(pid, libc::SIGKILL);
    note(&d, "lead", "coder", "anyone-there");
    wait_until(Duration::from_secs(30), "dead in status", || {
        state(&d)["agent_state"] == "dead"
    });
    let s = state(&d);
    assert_eq!(s["not_moving"], "agent dead", "{s}");
    assert!(kinds_for(&d, "coder").iter().all(|k| k != "woken"));
    let text = d.swarm(&["status"]).stdout;
    assert!(text.contains("coder: agent dead since "), "{text}");
    assert!(text.contains("; not moving: agent dead"), "{text}");

    // The watchdog sees the exit and tells the person, once.
    wait_until(Duration::from_secs(30), "agent_dead notified", || {
        fs::read_to_string(d.path("notified")).is_ok_and(|t| {
            t.contains(
                "agent_dead|coder||its agent exited with status 137 (session swarmforge-coder)\n",
            )
        })
    });
    // The session gone too: still the same death, not a second notice.
    let sock = guard.socket.clone().unwrap();
    crate::support::clean_command(Path::new("tmux"), &d.root)
        .arg("-S")
        .arg(&sock)
        .args(["kill-session", "-t", "=swarmforge-coder"])
        .output()
        .unwrap();
    wait_until(Duration::from_secs(30), "dead, session gone", || {
        state(&d)["agent_state"] == "dead"
    });
    // A clarify to the person, and a file the daemon must refuse.
    send(
        &d,
        "coder",
        "type: clarify\nto: lead\npriority: 10\nquestion: which parser?\n\npeg\nhand-written\n",
    );
    d.write(
        ".worktrees/coder/.swarmforge/handoffs/outbox/10_20260101T000000Z_000099_from_coder_to_lead.handoff",
        "garbage\n",
    );
    wait_until(
        Duration::from_secs(30),
        "clarify and failure notified",
        || {
            fs::read_to_string(d.path("notified")).is_ok_and(|t| {
                t.contains("clarify_waiting|lead|") && t.contains("delivery_failed|")
            })
        },
    );
    let lines = d.read("notified");
    assert_eq!(lines.matches("agent_dead|coder|").count(), 1, "{lines}");
    assert_eq!(lines.matches("clarify_waiting|").count(), 1, "{lines}");
    let clarify = lines
        .lines()
        .find(|l| l.starts_with("clarify_waiting"))
        .unwrap();
    assert!(
        clarify.contains("_from_coder|coder asks: which parser?"),
        "{clarify}"
    );
    // The asker waits on the person, and status says so.
    let id = clarify.split('|').nth(2).unwrap();
    assert_eq!(
        state(&d)["not_moving"],
        format!("waiting on clarify {id} to lead")
    );
}

#[test]
fn swarmforge_conf_agents_start_as_swarmforge_starts_them_with_the_primer_added() {
    let d = Project::empty();
    d.write(
        "swarmforge/swarmforge.conf",
        "window architect claude master\n",
    );
    d.write("swarmforge/constitution.prompt", "Be good.\n");
    d.write("swarmforge/roles/architect.prompt", "Plan.\n");
    // A SwarmForge project has no swarm.yaml to opt out of confinement: the
    // fake records into the root, the architect's own worktree (master).
    let fakes = Fakes::logging_to(RECORDER, Some(d.path("fake-log")));
    let _guard = SwarmGuard::new(&d.root);
    let r = up(&d, &fakes, &["--no-tmux", "--detach"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    wait_until(Duration::from_secs(30), "the fake started", || {
        fakes.record("claude", "architect").is_some()
    });
    d.swarm(&["down"]).ok();
    let root = d.root.display().to_string();
    let pf = d.read(".swarmforge/prompts/architect.md");
    assert!(
        pf.starts_with("Read swarmforge/constitution.prompt, then read every file it refers to recursively, and obey all of those instructions.\nRead swarmforge/roles/architect.prompt, then")
            && pf.contains("\n# Swarm role: architect\n"),
        "{pf}"
    );
    assert_eq!(
        fields(&fakes.record("claude", "architect").unwrap(), "arg"),
        [
            "--append-system-prompt-file".to_string(),
            format!("{root}/.swarmforge/prompts/architect.md"),
            "--permission-mode".into(),
            "acceptEdits".into(),
            "-n".into(),
            "SwarmForge Architect".into(),
            pf.trim_end().to_string(),
        ]
    );
    // SwarmForge's agents get no hook settings of ours.
    assert!(!d.path(".claude").exists());
}

#[test]
fn init_example_gives_a_new_project_real_agents() {
    let d = Project::empty();
    let r = d.swarm(&["init", "--example", "trio"]);
    r.ok();
    r.stdout_has("(4 roles from");
    let yaml = d.read("swarm.yaml");
    for agent in [
        "agent: claude",
        "agent: codex",
        "agent: gemini",
        "agent: human",
    ] {
        assert!(yaml.contains(agent), "{agent}");
    }
    assert!(d
        .read("README.md")
        .contains("npm install -g @anthropic-ai/claude-code"));
    let tsv = d.read(".swarmforge/roles.tsv");
    assert!(
        tsv.contains("\tclaude\ttask\n") && tsv.contains("\tgemini\ttask\n"),
        "{tsv}"
    );
    let t = d.swarm(&["prompt", "coder"]).stdout;
    assert!(t.contains("You may send git_handoff or note:"), "{t}");
    // Never over an existing swarm.yaml; unknown names list the known ones.
    d.cmd("swarm")
        .args(["init", "--example", "trio"])
        .code(1)
        .stderr_has("swarm.yaml already exists")
        .run();
    let e = Project::empty();
    e.cmd("swarm")
        .args(["init", "--example", "nope"])
        .code(1)
        .stderr_has("available: trio, pipeline, roundtable, forum")
        .run();
}

#[test]
fn a_queue_role_is_not_woken_on_delivery_only_by_the_re_wake_sweep() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    let fakes = Fakes::new(INTERACTIVE);
    let yaml = wake_yaml("queue").replace("ack_within: 600s", "ack_within: 1s");
    let _guard = tmux_swarm(&d, &fakes, &yaml);
    fakes.release();
    wait_until(Duration::from_secs(30), "the fake is idle", || {
        fakes.io("claude", "coder").contains("IDLE")
    });
    note(&d, "lead", "coder", "when-you-can");
    wait_until(Duration::from_secs(30), "re-woken by the sweep", || {
        kinds_for(&d, "coder").contains(&"renotified".to_string())
    });
    let k = kinds_for(&d, "coder");
    assert!(!k.contains(&"woken".to_string()), "{k:?}");
    wait_until(Duration::from_secs(30), "the wake text arrived", || {
        fakes
            .io("claude", "coder")
            .contains(&format!("GOT {WAKE_TEXT}"))
    });
    assert!(!fakes.io("claude", "coder").contains("TYPED_WHILE_BUSY"));
}

#[test]
fn a_tracked_agents_md_is_left_alone_and_the_primer_goes_in_the_first_prompt() {
    let d = Project::empty();
    crate::support::git(&d.root, &["init", "-q", "-b", "master"]);
    d.write("AGENTS.md", "# Committed rules\n");
    crate::support::git(&d.root, &["add", "AGENTS.md"]);
    crate::support::git(&d.root, &["commit", "-q", "-m", "rules"]);
    d.write(
        "swarm.yaml",
        "launch:\n  stagger: 0ms\n  confine: false  # the fake CLIs write their records to the test, outside the worktree\nroles:\n  - name: coder\n    agent: codex\n    worktree: coder\n",
    );
    let fakes = Fakes::new(RECORDER);
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let mut guard = SwarmGuard::new(&d.root);
    let r = up(&d, &fakes, &["--detach"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    guard.socket = Some(PathBuf::from(d.read(".swarmforge/tmux-socket").trim()));
    r.stdout_has(
        "coder: AGENTS.md is tracked by git, so the primer goes in the first prompt instead",
    );
    wait_until(Duration::from_secs(30), "the fake started", || {
        fakes.record("codex", "coder").is_some()
    });
    d.swarm(&["down"]).ok();
    assert_eq!(d.read(".worktrees/coder/AGENTS.md"), "# Committed rules\n");
    let args = fields(&fakes.record("codex", "coder").unwrap(), "arg");
    assert_eq!(
        args.last().unwrap(),
        d.read(".swarmforge/prompts/coder.md").trim_end()
    );
    let status = crate::support::git(&d.path(".worktrees/coder"), &["status", "--porcelain"]);
    assert_eq!(status, "", "{status}");
}

#[test]
fn headless_liveness_is_busy_while_the_agent_runs_and_idle_after() {
    let d = Project::empty();
    d.write(
        "swarm.yaml",
        "launch:\n  stagger: 0ms\n  confine: false  # the fake CLIs write their records to the test, outside the worktree\nroles:\n  - name: worker\n    agent: sh -c 'while [ ! -e \"$FAKE_LOG/release\" ]; do sleep 0.05; done'\n",
    );
    let fakes = Fakes::new(RECORDER);
    let _guard = SwarmGuard::new(&d.root);
    let r = up(&d, &fakes, &["--no-tmux", "--detach"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let state =
        |d: &Project| d.swarm(&["status", "--json"]).json()["roles"][0]["agent_state"].clone();
    wait_until(Duration::from_secs(30), "busy", || state(&d) == "busy");
    fakes.release();
    wait_until(Duration::from_secs(30), "idle", || state(&d) == "idle");
    d.swarm(&["down"]).ok();
    // No swarm running: unknown, not dead.
    assert!(state(&d).is_null());
}

/// A confined Gemini CLI role set to use Gemini's own container sandbox
/// (an argument, GEMINI_SANDBOX, `tools.sandbox` in its settings): `swarm
/// up` refuses before starting anything, naming the role, where the sandbox
/// was turned on and both ways out, and `swarm doctor` reports
/// GEMINI_SANDBOX_CONFINED; not once the swarm is unconfined.
#[test]
fn a_confined_gemini_role_set_to_use_its_own_sandbox_is_explained() {
    let d = Project::empty();
    let yaml = |confine: &str, args: &str| {
        format!("launch:\n  stagger: 0ms\n{confine}roles:\n  - name: coder\n    agent: gemini\n    worktree: coder\n{args}  - name: owner\n    agent: human\n")
    };
    d.write("swarm.yaml", &yaml("", "    args: [\"--sandbox\"]\n"));
    d.swarm(&["init"]).ok();
    let doctor = |env: &[(&str, &str)]| {
        let mut c = d.cmd("swarm").args(["doctor", "--json"]);
        for (k, v) in env {
            c = c.env(k, v);
        }
        crate::support::doctor_messages(&c.run().json(), "GEMINI_SANDBOX_CONFINED")
    };
    let found = doctor(&[]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("role coder") && found[0].contains("--sandbox"),
        "{found:?}"
    );
    let r = d.cmd("swarm").args(["up", "--detach"]).run();
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("role coder: Gemini CLI is set to use its own container sandbox (its argument --sandbox)")
            && r.stderr.contains("GEMINI_SANDBOX=false")
            && r.stderr.contains("confine: false"),
        "{}",
        r.stderr
    );
    assert!(!d.path(".swarmforge/tmux-socket").exists());
    // The variable, and the worktree's settings.
    d.write("swarm.yaml", &yaml("", ""));
    assert!(doctor(&[]).is_empty());
    assert!(doctor(&[("GEMINI_SANDBOX", "podman")])[0].contains("GEMINI_SANDBOX=podman"));
    assert!(doctor(&[("GEMINI_SANDBOX", "false")]).is_empty());
    d.write(
        ".worktrees/coder/.gemini/settings.json",
        r#"{"tools": {"sandbox": "docker"}}"#,
    );
    assert!(doctor(&[])[0].contains(".worktrees/coder/.gemini/settings.json"));
    // Unconfined, Gemini's own sandbox is the person's choice.
    d.write(
        "swarm.yaml",
        &yaml("  confine: false\n", "    args: [\"--sandbox\"]\n"),
    );
    assert!(doctor(&[]).is_empty());
}

/// Claude Code refuses `permission: full` (bypassPermissions) as root
/// unless IS_SANDBOX=1: as root, `swarm up` refuses before starting
/// anything, naming the role and the three ways out, and `swarm doctor`
/// reports CLAUDE_FULL_AS_ROOT; with IS_SANDBOX=1, or as an ordinary user,
/// the role starts with that mode (docs/agents.md "Claude Code as root").
#[test]
fn claude_with_full_permission_is_refused_as_root_unless_the_machine_is_a_sandbox() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    d.write(
        "swarm.yaml",
        "launch:\n  stagger: 0ms\n  confine: false  # the fake CLIs write their records to the test, outside the worktree\nroles:\n  - name: coder\n    agent: claude\n    worktree: coder\n    permission: full\n  - name: owner\n    agent: human\n",
    );
    let fakes = Fakes::new(RECORDER);
    let root = swarm_handoff::launch::agents::claude_root::euid() == 0;
    d.swarm(&["init"]).ok();
    let doctor = d.swarm(&["doctor", "--json"]).json();
    let found = doctor.to_string().contains("CLAUDE_FULL_AS_ROOT");
    assert_eq!(found, root, "{doctor:#}");
    let mut guard = SwarmGuard::new(&d.root);
    if root {
        let r = up(&d, &fakes, &["--detach"]);
        assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains(
                "role coder: Claude Code refuses `permission: full` (bypassPermissions) when run as root"
            ) && r.stderr.contains("IS_SANDBOX=1")
                && r.stderr.contains("permission: edits"),
            "{}",
            r.stderr
        );
        assert!(!d.path(".swarmforge/tmux-socket").exists());
        assert!(fakes.record("claude", "coder").is_none());
    }
    // The person says the machine is a sandbox (or is not root): it starts.
    let r = d
        .cmd("swarm")
        .args(["up", "--detach"])
        .env("PATH", fakes.path())
        .env("FAKE_LOG", &fakes.log)
        .env("IS_SANDBOX", "1")
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    guard.socket = Some(PathBuf::from(d.read(".swarmforge/tmux-socket").trim()));
    wait_until(Duration::from_secs(30), "claude started", || {
        fakes.record("claude", "coder").is_some()
    });
    let args = fields(&fakes.record("claude", "coder").unwrap(), "arg");
    assert!(
        args.windows(2)
            .any(|w| w[0] == "--permission-mode" && w[1] == "bypassPermissions"),
        "{args:?}"
    );
    d.swarm(&["down"]).ok();
}
