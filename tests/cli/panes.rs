//! Liveness that tells the truth (docs/agents.md, "When an agent waits for
//! a person"): an agent's pane showing a dialog is `needs_input` and no
//! wake-up is typed into it; a rate limit is `blocked`; a scripted agent
//! that exited 0 is `idle`, one that failed `dead`; one wake-up runs an
//! agent once. Fake agents in real tmux panes; no model.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::support::{require_tool, wait_until, Project, SwarmGuard};

const WAIT: Duration = Duration::from_secs(40);
const WAKE_TEXT: &str = "You have new handoff mail. If idle, run ready_for_next.sh.";

/// A fake of Claude Code's folder-trust dialog: "No, exit" highlighted;
/// Enter on it exits 1, Down then Enter trusts and shows an idle prompt
/// whose typed lines are logged `GOT`. Every key is logged `KEY`.
pub(crate) const DIALOG: &str = r#"#!/bin/bash
log="$PWD/io.$SWARMFORGE_ROLE"
echo "START $$" >>"$log"
cat <<'EOF'
 Accessing workspace:

 Quick safety check: Is this a project you created or one you trust? (Like your own code, a well-known open source
 project, or work from your team). If not, take a moment to review what's in this folder first.

 ❯ No, exit
   Yes, I trust this folder

 Enter to confirm · Esc to cancel
EOF
at=0
while :; do
  IFS= read -rsn1 c || exit 0
  if [ "$c" = $'\e' ]; then read -rsn2 rest; c="ESC$rest"; fi
  echo "KEY ${c:-ENTER}" >>"$log"
  case "$c" in
    'ESC[B'|'ESCOB') at=1 ;;
    'ESC[A'|'ESCOA') at=0 ;;
    '')
      if [ $at = 0 ]; then echo "ANSWERED_NO" >>"$log"; echo "didn't start: not trusted"; exit 1; fi
      break ;;
  esac
done
clear
echo "TRUSTED" >>"$log"
while :; do
  printf '> '
  IFS= read -r line || exit 0
  [ -z "$line" ] && continue
  echo "GOT $line" >>"$log"
done
"#;

/// A pane showing a rate-limit error under an idle prompt.
const LIMITED: &str = r#"#!/bin/bash
log="$PWD/io.$SWARMFORGE_ROLE"
echo "START $$" >>"$log"
echo "working on it"
echo "  ⎿  API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}"
while :; do
  printf '> '
  IFS= read -r line || exit 0
  echo "GOT $line" >>"$log"
done
"#;

/// A scripted agent: takes at most one item per run, logs the run
/// (`NO_TASK` or the item's `msg-…` word), finishes the item and exits with
/// the code in `<project>/exitcode` (0 without it).
pub(crate) const ONE_ITEM: &str = r#"out=$(ready-next 2>&1)
case "$out" in
  *NO_TASK*) what=NO_TASK ;;
  *) what=$(printf '%s\n' "$out" | grep -o 'msg-[a-z]*' | head -n 1); done-current >/dev/null 2>&1 ;;
esac
echo "run $what" >>"$PWD/runs.$SWARMFORGE_ROLE"
exit "$(cat "$SWARMFORGE_PROJECT/exitcode" 2>/dev/null || echo 0)"
"#;

const NOTIFY: &str = "notify:\n  command: printf '%s|%s|%s|%s\\n' \"$SWARMFORGE_EVENT\" \"$SWARMFORGE_ROLE\" \"$SWARMFORGE_ID\" \"$SWARMFORGE_SUMMARY\" >> \"$SWARMFORGE_PROJECT/notified\"\n";

/// A swarm with the person `lead` and the agent `coder` running `agent`
/// (a script written into the project) with `wake`, re-woken every ~second.
fn swarm(d: &Project, script: &str, wake: &str) -> SwarmGuard {
    swarm_with(
        d,
        script,
        wake,
        "daemon:\n  sweep: 200ms\n  ack_within: 1s\n  rewake_cap: 2s\n",
    )
}

/// [`swarm`] with `daemon` as the `daemon:` section.
fn swarm_with(d: &Project, script: &str, wake: &str, daemon: &str) -> SwarmGuard {
    swarm_quiet(d, script, wake, daemon, "300ms")
}

/// [`swarm_with`] with `quiet` as `wake.quiet`.
fn swarm_quiet(d: &Project, script: &str, wake: &str, daemon: &str, quiet: &str) -> SwarmGuard {
    d.write("agents/coder.sh", script);
    let yaml = format!(
        "launch:\n  stagger: 0ms\nwake:\n  quiet: {quiet}\n{daemon}{NOTIFY}roles:\n  - name: lead\n    agent: human\n  - name: coder\n    agent: bash {}\n    worktree: coder\n    wake: {wake}\n",
        d.path("agents/coder.sh").display()
    );
    d.write("swarm.yaml", &yaml);
    let mut guard = SwarmGuard::new(&d.root);
    let r = d.cmd("swarm").args(["up", "--detach"]).run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    guard.socket = Some(PathBuf::from(d.read(".swarmforge/tmux-socket").trim()));
    guard
}

fn send(d: &Project, to: &str, msg: &str) {
    d.send(
        "lead",
        &format!("type: note\nto: {to}\npriority: 10\nmessage: {msg}\n"),
    )
    .ok();
}

fn coder(d: &Project) -> Value {
    let st = d.swarm(&["status", "--json"]).json();
    st["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "coder")
        .cloned()
        .unwrap()
}

fn kinds(d: &Project, role: &str) -> Vec<String> {
    d.events()
        .iter()
        .filter(|e| e["recipient"] == role)
        .map(|e| e["kind"].as_str().unwrap_or("").to_string())
        .collect()
}

fn count(d: &Project, role: &str, kind: &str) -> usize {
    kinds(d, role).iter().filter(|k| *k == kind).count()
}

fn io(d: &Project) -> String {
    fs::read_to_string(d.path(".worktrees/coder/io.coder")).unwrap_or_default()
}

fn notified(d: &Project) -> String {
    fs::read_to_string(d.path("notified")).unwrap_or_default()
}

#[test]
fn a_dialog_is_needs_input_no_wake_is_typed_into_it_and_a_person_answers_it() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    let _guard = swarm(&d, DIALOG, "immediate");
    wait_until(WAIT, "the dialog is up", || io(&d).contains("START"));
    send(&d, "coder", "msg-one");
    wait_until(WAIT, "needs_input in status", || {
        coder(&d)["agent_state"] == "needs_input"
    });
    let c = coder(&d);
    let prompt = c["agent_prompt"].as_str().unwrap().to_string();
    assert!(prompt.contains("Claude Code asks whether to trust"), "{c}");
    assert_eq!(c["agent_options"][1]["label"], "Yes, I trust this folder");
    assert_eq!(
        c["agent_options"][1]["keys"],
        serde_json::json!(["Down", "Enter"])
    );
    let nm = c["not_moving"].as_str().unwrap();
    assert!(nm.starts_with("agent waits for a person: "), "{nm}");

    // The re-wake sweep keeps trying; every wake-up is held, none typed.
    wait_until(WAIT, "three held wake-ups", || {
        count(&d, "coder", "wake_held") >= 3
    });
    wait_until(WAIT, "the person notified", || {
        notified(&d).contains("needs_input|coder||Claude Code asks whether to trust")
    });
    let seen = io(&d);
    assert!(
        !seen.contains("KEY"),
        "a wake-up typed into the dialog:\n{seen}"
    );
    assert_eq!(seen.matches("START").count(), 1, "{seen}");
    let k = kinds(&d, "coder");
    assert!(
        !k.iter().any(|k| k == "woken" || k == "renotified"),
        "{k:?}"
    );
    assert_eq!(count(&d, "coder", "needs_input"), 1, "{k:?}");
    assert_eq!(notified(&d).matches("needs_input|").count(), 1);
    let text = d.swarm(&["status"]).stdout;
    assert!(
        text.contains("coder: agent needs_input") && text.contains("-> swarm attach coder"),
        "{text}"
    );
    let st = d.swarm(&["status", "--json"]).json();
    let att = st["attention"].as_array().unwrap();
    assert!(
        att.iter()
            .any(|a| a["kind"] == "needs_input" && a["role"] == "coder"),
        "{st}"
    );

    // The person: where to look, and an answer by the option's own keys.
    let sock = d.read(".swarmforge/tmux-socket");
    d.swarm(&["attach", "coder", "--print"])
        .ok()
        .stdout_has(&format!(
            "tmux -S {} attach-session -t =swarmforge-coder",
            sock.trim()
        ));
    d.cmd("swarm")
        .args(["attach", "nobody"])
        .code(1)
        .stderr_has("no role \"nobody\"")
        .run();
    d.cmd("swarm")
        .args(["attach", "coder", "--choose", "7"])
        .code(1)
        .stderr_has("there is no option 7; nothing was typed")
        .run();
    d.swarm(&["attach", "coder", "--choose", "2"])
        .ok()
        .stdout_has("with \"Yes, I trust this folder\"");
    wait_until(WAIT, "the agent trusted", || io(&d).contains("TRUSTED"));
    // The held mail now gets its wake-up, and the wait is over everywhere.
    wait_until(WAIT, "the wake-up typed once the dialog is gone", || {
        io(&d).contains(&format!("GOT {WAKE_TEXT}"))
    });
    wait_until(WAIT, "the attention item gone", || {
        let st = d.swarm(&["status", "--json"]).json();
        !st["attention"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "needs_input")
    });
    assert!(!io(&d).contains("ANSWERED_NO"));
    d.cmd("swarm")
        .args(["attach", "coder", "--choose", "1"])
        .code(1)
        .stderr_has("waits for no answer now; nothing was typed")
        .run();
}

/// The panes are looked at every `daemon.pane_check` (2 s by default), not
/// only on the re-wake sweep (`daemon.sweep`, 10 s by default): with the
/// sweep set too far off to ever run here, a dialog is still journaled and
/// the person told, with nothing typed into it.
#[test]
fn a_dialog_is_reported_on_the_pane_check_without_waiting_for_the_sweep() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    let _guard = swarm_with(
        &d,
        DIALOG,
        "immediate",
        "daemon:\n  sweep: 1h\n  pane_check: 300ms\n",
    );
    wait_until(WAIT, "the dialog is up", || io(&d).contains("START"));
    wait_until(WAIT, "needs_input journaled", || {
        count(&d, "coder", "needs_input") == 1
    });
    wait_until(WAIT, "the person notified", || {
        notified(&d).contains("needs_input|coder||Claude Code asks whether to trust")
    });
    assert!(!io(&d).contains("KEY"), "{}", io(&d));
}

/// A second `swarm up` starts its agents one by one (`launch.stagger`)
/// while the daemon already looks at the panes: an agent whose session is
/// not started yet is not reported dead (the earlier run's session list
/// said it should be running).
#[test]
fn a_second_up_does_not_report_agents_dead_before_their_sessions_start() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    d.write(
        "swarm.yaml",
        "launch:\n  stagger: 2s\ndaemon:\n  pane_check: 100ms\nroles:\n  - name: one\n    agent: sleep 600\n    worktree: one\n  - name: two\n    agent: sleep 600\n    worktree: two\n",
    );
    let mut guard = SwarmGuard::new(&d.root);
    // A HOME, as a user has: without one the false report did not show.
    let home = tempfile::tempdir().unwrap();
    for run in 1..=2 {
        let r = d
            .cmd("swarm")
            .args(["up", "--detach"])
            .env("HOME", home.path())
            .run();
        assert_eq!(r.code, 0, "run {run}: {}\n{}", r.stdout, r.stderr);
        guard.socket = Some(PathBuf::from(d.read(".swarmforge/tmux-socket").trim()));
        // `swarm up -d` returns once each agent outlived its start window
        // (issue 42.2): a silent `sleep` may be idle by then.
        wait_until(WAIT, "both agents run", || {
            let st = d.swarm(&["status", "--json"]).json();
            st["roles"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| matches!(r["agent_state"].as_str(), Some("busy" | "idle")))
        });
        d.swarm(&["down"]).ok();
    }
    let dead: Vec<Value> = d
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "agent_dead")
        .collect();
    assert!(dead.is_empty(), "{dead:?}");
}

#[test]
fn a_rate_limit_on_screen_is_blocked_with_its_reason() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    let _guard = swarm(&d, LIMITED, "immediate");
    wait_until(WAIT, "the agent is up", || io(&d).contains("START"));
    wait_until(WAIT, "blocked in status", || {
        coder(&d)["agent_state"] == "blocked"
    });
    assert!(coder(&d)["agent_prompt"]
        .as_str()
        .unwrap()
        .contains("rate_limit_error"));
    wait_until(WAIT, "the person notified", || {
        notified(&d).contains("agent_blocked|coder||")
    });
    send(&d, "coder", "msg-one");
    wait_until(WAIT, "a held wake-up", || {
        count(&d, "coder", "wake_held") >= 1
    });
    assert!(!io(&d).contains("GOT"), "{}", io(&d));
}

#[test]
fn a_scripted_agent_that_exited_0_is_idle_and_one_that_failed_is_dead() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    let _guard = swarm(&d, ONE_ITEM, "immediate");
    let runs = || fs::read_to_string(d.path(".worktrees/coder/runs.coder")).unwrap_or_default();
    wait_until(WAIT, "the first run", || runs().contains("run NO_TASK"));
    wait_until(WAIT, "idle in status", || {
        coder(&d)["agent_state"] == "idle"
    });
    let c = coder(&d);
    assert!(c["agent_since"].as_str().is_some_and(|s| s.ends_with('Z')));
    assert!(c["not_moving"].is_null(), "{c}");
    // The exit 0 was no death: the one `agent_dead` below is the failure's.
    d.write("exitcode", "3\n");
    send(&d, "coder", "msg-one");
    wait_until(WAIT, "the item done by a failing run", || {
        runs().contains("run msg-one")
    });
    wait_until(WAIT, "dead in status", || {
        coder(&d)["agent_state"] == "dead"
    });
    wait_until(WAIT, "agent_dead notified", || {
        notified(&d).contains("agent_dead|coder||its agent exited with status 3")
    });
    assert_eq!(notified(&d).matches("agent_dead|").count(), 1);
    assert!(!notified(&d).contains("needs_input"));
}

#[test]
fn one_wake_up_runs_an_exited_scripted_agent_once() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    let _guard = swarm(&d, ONE_ITEM, "immediate");
    let runs = || fs::read_to_string(d.path(".worktrees/coder/runs.coder")).unwrap_or_default();
    wait_until(WAIT, "the first run", || runs().contains("run NO_TASK"));
    send(&d, "coder", "msg-one");
    wait_until(WAIT, "woken, and the item done", || {
        runs().contains("run msg-one") && count(&d, "coder", "woken") == 1
    });
    send(&d, "coder", "msg-two");
    wait_until(WAIT, "the second item done", || {
        runs().contains("run msg-two")
    });
    // Two wake-ups, two runs: no run without an item between them.
    assert_eq!(runs(), "run NO_TASK\nrun msg-one\nrun msg-two\n");
    let log = d.log();
    assert!(!log.contains("notify_failed"), "{log}");
}

/// An agent that exited waits at its pane script's `read`, which nothing
/// else writes to: `wake: idle` types at once instead of first watching the
/// pane stay still for `wake.quiet` (issue 47.4: the tmux wake path went
/// from 1.2 s to tens of milliseconds; scripts/bench_wake.py). With a quiet
/// of two minutes, only that can wake it within the wait.
#[test]
fn an_exited_agent_is_woken_without_the_quiet_look() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    let _guard = swarm_quiet(&d, ONE_ITEM, "idle", "", "120s");
    let runs = || fs::read_to_string(d.path(".worktrees/coder/runs.coder")).unwrap_or_default();
    wait_until(WAIT, "the first run", || runs().contains("run NO_TASK"));
    wait_until(WAIT, "the pane script waits at read", || {
        coder(&d)["agent_state"] == "idle"
    });
    send(&d, "coder", "msg-one");
    wait_until(WAIT, "woken, and the item done", || {
        runs().contains("run msg-one") && count(&d, "coder", "woken") == 1
    });
    assert_eq!(
        count(&d, "coder", "deferred_busy"),
        0,
        "{:?}",
        kinds(&d, "coder")
    );
}

#[test]
fn the_first_delivery_after_up_waits_for_the_pane_instead_of_failing() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = Project::empty();
    // Mail already queued: the daemon delivers it the moment it starts,
    // before `swarm up` has created the sessions.
    d.write("agents/coder.sh", ONE_ITEM);
    let yaml = format!(
        "launch:\n  stagger: 0ms\nroles:\n  - name: lead\n    agent: human\n  - name: coder\n    agent: bash {}\n    worktree: coder\n    wake: immediate\n",
        d.path("agents/coder.sh").display()
    );
    d.write("swarm.yaml", &yaml);
    d.swarm(&["init"]).ok();
    send(&d, "coder", "msg-one");
    let mut guard = SwarmGuard::new(&d.root);
    let r = d.cmd("swarm").args(["up", "--detach"]).run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    guard.socket = Some(PathBuf::from(d.read(".swarmforge/tmux-socket").trim()));
    wait_until(WAIT, "woken", || count(&d, "coder", "woken") == 1);
    let log = d.log();
    assert!(!log.contains("notify_failed"), "{log}");
}

/// A tmux server an agent made (its sessions named as the swarm's) and a
/// `.swarmforge/tmux-socket` planted to name it: no reader follows the
/// pointer (protocol::tmux_socket). `swarm status` shows no liveness read
/// from that server and says why, with the repair; `swarm attach` refuses
/// with the same message; a delivery wakes nobody through it; `swarm down`
/// (the repair) kills none of its sessions and removes the pointer; and a
/// pointer naming a plain file does not get that file removed.
#[test]
fn a_planted_socket_pointer_is_followed_by_no_reader() {
    let p = Project::with_roles(&[
        ("lead", "master", "codex", "task"),
        ("coder", "coder", "codex", "task"),
    ]);
    let Some(evil) = crate::support::Tmux::new() else {
        return;
    };
    evil.session("swarmforge-coder", None, "cat");
    let planted = format!("{}\n", evil.sock.display());
    p.write(".swarmforge/tmux-socket", &planted);
    let believed = |s: &str| {
        s.contains(".swarmforge/tmux-socket: cannot be believed")
            && s.contains("which is not the socket this swarm makes")
            && s.contains("hint: run `swarm down`")
    };

    let st = p.swarm(&["status", "--json"]);
    let v = st.json();
    let why = v["tmux_socket_problem"].as_str().unwrap_or_default();
    assert!(believed(why), "{v:#}");
    let coder = v["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "coder")
        .unwrap();
    assert!(
        coder["agent_state"].is_null(),
        "liveness from the planted server: {coder:#}"
    );
    let text = p.swarm(&["status"]);
    assert!(believed(&text.stdout), "{}", text.stdout);

    let r = p.swarm(&["attach", "coder"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(believed(&r.stderr), "{}", r.stderr);

    p.post("master", &crate::support::note("lead", 1, "coder", "hello"));
    let r = p.deliver_once();
    assert!(r.stdout.contains("delivered 1"), "{r:?}");
    assert!(r.stderr.contains("no wake-up through tmux"), "{r:?}");
    assert!(
        !p.path(".swarmforge/daemon/wake/coder").exists(),
        "woken through the planted socket"
    );
    assert!(!evil.pane("swarmforge-coder").contains(WAKE_TEXT));

    let r = p.swarm(&["down"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        evil.has("swarmforge-coder"),
        "swarm down killed the planted server's session"
    );
    assert!(!p.path(".swarmforge/tmux-socket").exists());

    let victim = p.write("victim", "keep me");
    p.write(
        ".swarmforge/tmux-socket",
        &format!("{}\n", victim.display()),
    );
    let r = p.swarm(&["down"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(!p.path(".swarmforge/tmux-socket").exists());
}
