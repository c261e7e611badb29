//! A failure at an agent's start is never silent (issue 42.2,
//! docs/headless.md "An agent that dies at start"): `swarm up` (tmux, `-d`,
//! headless) names the role and quotes the first lines of its error, and
//! exits 1 when no agent could start; `swarm status` shows such a role
//! `dead` with the reason, never `idle`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

/// An agent that fails at once, the way a sandbox that refuses does.
const FAILS: &str = "sh -c 'echo boom >&2; echo second line >&2; exit 3'";
/// An agent that runs and waits for its next wake-up (a scripted agent
/// with nothing to do exits 0).
const WORKS: &str = "sh -c 'echo fine; exit 0'";

/// A swarm of `roles` (name, agent) and a person, `lead`.
fn swarm(roles: &[(&str, &str)]) -> Project {
    let p = Project::empty();
    let mut yaml =
        String::from("launch:\n  stagger: 0ms\nroles:\n  - name: lead\n    agent: human\n");
    for (name, agent) in roles {
        yaml.push_str(&format!(
            "  - name: {name}\n    agent: {agent}\n    worktree: {name}\n"
        ));
    }
    p.write("swarm.yaml", &yaml);
    p
}

fn role(p: &Project, name: &str) -> Value {
    let st = p.swarm(&["status", "--json"]).ok().json();
    st["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no role {name} in {st}"))
}

/// What every start failure says: the role, the status, the error quoted.
fn names_the_failure(text: &str, role: &str) {
    assert!(
        text.contains(&format!(
            "warning: {role}: its agent exited at once (exit 3"
        )),
        "{text}"
    );
    assert!(text.contains("  | boom\n"), "{text}");
    assert!(text.contains("  | second line"), "{text}");
}

#[test]
fn headless_up_until_idle_says_no_agent_could_start() {
    let p = swarm(&[("coder", FAILS)]);
    let mut guard = SwarmGuard::new(&p.root);
    guard.guard(
        p.cmd("swarm")
            .args(["up", "--no-tmux", "--until-idle", "--timeout", "60s"])
            .start(),
    );
    let up = guard.finish(Duration::from_secs(90), "swarm up --until-idle returns");
    assert_eq!(up.code, 1, "{up:?}");
    names_the_failure(&up.stderr, "coder");
    up.stderr_has("swarm up: no agent could start (coder)");
}

#[test]
fn headless_up_detached_exits_1_when_no_agent_could_start() {
    let p = swarm(&[("coder", FAILS)]);
    let _guard = SwarmGuard::new(&p.root);
    let up = p
        .cmd("swarm")
        .args(["up", "--no-tmux", "--detach"])
        .run_within(Duration::from_secs(60));
    assert_eq!(up.code, 1, "{up:?}");
    names_the_failure(&up.stderr, "coder");
    up.stderr_has("no agent could start (coder)");
}

/// One of two agents dies at start: `swarm up -d` exits 0 but names it;
/// `swarm status` shows it dead with the exit status and first error
/// line, the other not dead.
#[test]
fn headless_one_dead_agent_of_two_is_named_and_dead_in_status() {
    let p = swarm(&[("coder", WORKS), ("tester", FAILS)]);
    let _guard = SwarmGuard::new(&p.root);
    let up = p
        .cmd("swarm")
        .args(["up", "--no-tmux", "--detach"])
        .run_within(Duration::from_secs(60));
    assert_eq!(up.code, 0, "{up:?}");
    names_the_failure(&up.stderr, "tester");
    assert!(!up.stderr.contains("warning: coder"), "{}", up.stderr);
    let t = role(&p, "tester");
    assert_eq!(t["agent_state"], "dead", "{t}");
    assert_eq!(t["agent_reason"], "exit 3: boom", "{t}");
    assert_ne!(role(&p, "coder")["agent_state"], "dead");
    p.swarm(&["status"])
        .ok()
        .stdout_has("tester: agent dead since ")
        .stdout_has(": exit 3: boom\n");
    p.swarm(&["down"]).ok();
}

fn tmux_up(p: &Project, guard: &mut SwarmGuard) -> Run {
    let up = p
        .cmd("swarm")
        .args(["up", "--detach"])
        .run_within(Duration::from_secs(60));
    if let Ok(s) = std::fs::read_to_string(p.path(".swarmforge/tmux-socket")) {
        guard.socket = Some(PathBuf::from(s.trim()));
    }
    up
}

#[test]
fn tmux_up_detached_exits_1_when_no_agent_could_start() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let p = swarm(&[("coder", FAILS)]);
    let mut guard = SwarmGuard::new(&p.root);
    let up = tmux_up(&p, &mut guard);
    assert_eq!(up.code, 1, "{up:?}");
    names_the_failure(&up.stderr, "coder");
    up.stderr_has("swarm up: no agent could start (coder); the swarm is stopped");
    // Nothing is left half up.
    assert!(!p.path(".swarmforge/tmux-socket").exists());
}

#[test]
fn tmux_one_dead_agent_of_two_is_named_and_dead_in_status() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let p = swarm(&[("coder", WORKS), ("tester", FAILS)]);
    let mut guard = SwarmGuard::new(&p.root);
    let up = tmux_up(&p, &mut guard);
    assert_eq!(up.code, 0, "{up:?}");
    names_the_failure(&up.stderr, "tester");
    assert!(!up.stderr.contains("warning: coder"), "{}", up.stderr);
    let t = role(&p, "tester");
    assert_eq!(t["agent_state"], "dead", "{t}");
    assert_eq!(t["agent_reason"], "exit 3: boom", "{t}");
    assert_ne!(role(&p, "coder")["agent_state"], "dead");
    p.swarm(&["status"])
        .ok()
        .stdout_has("tester: agent dead since ")
        .stdout_has(": exit 3: boom\n");
}

/// A hostile agent's dying words: terminal escapes, a huge line, many
/// lines. `swarm up` and `swarm status` quote at most 5 lines, each cut,
/// with every control character escaped: nothing reaches the person's
/// terminal raw.
#[test]
fn a_dying_agents_output_is_quoted_bounded_and_escaped() {
    let p = Project::empty();
    p.write(
        "agents/evil.sh",
        "printf '\\033]0;pwned\\007\\033[2Jcleared\\n'\nhead -c 50000 /dev/zero\necho\nfor i in 1 2 3 4 5 6 7 8 9; do echo \"line $i\"; done\nexit 3\n",
    );
    p.write(
        "swarm.yaml",
        &format!(
            "launch:\n  stagger: 0ms\nroles:\n  - name: evil\n    agent: sh {}\n    worktree: evil\n  - name: coder\n    agent: {WORKS}\n    worktree: coder\n",
            p.path("agents/evil.sh").display()
        ),
    );
    let _guard = SwarmGuard::new(&p.root);
    let up = p
        .cmd("swarm")
        .args(["up", "--no-tmux", "--detach"])
        .run_within(Duration::from_secs(60));
    assert_eq!(up.code, 0, "{up:?}");
    assert!(
        !up.stderr.contains('\u{1b}') && !up.stderr.contains('\u{7}'),
        "{:?}",
        up.stderr
    );
    let quoted: Vec<&str> = up
        .stderr
        .lines()
        .filter(|l| l.starts_with("  | "))
        .collect();
    assert_eq!(quoted.len(), 5, "{quoted:?}");
    assert!(quoted[0].contains("\\e]0;pwned"), "{quoted:?}");
    assert!(quoted.iter().all(|l| l.len() < 300), "{quoted:?}");
    assert_eq!(quoted[4], "  | line 3");
    let e = role(&p, "evil");
    assert_eq!(e["agent_state"], "dead", "{e}");
    let why = e["agent_reason"].as_str().unwrap();
    assert!(why.starts_with("exit 3: \\e]0;pwned"), "{why}");
    let text = p.swarm(&["status"]).ok().stdout.clone();
    assert!(!text.contains('\u{1b}'), "{text:?}");
    p.swarm(&["down"]).ok();
}
