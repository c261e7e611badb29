//! `swarm down` leaves nothing running (docs/launcher.md, "Stopping"):
//! after a `swarm up` killed with -9, with an agent that ignores SIGHUP and
//! a process it started that left its group; and a killed headless
//! supervisor takes its agents with it, so a second `swarm up` never runs
//! two agents on one queue. Checked in the process table.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::support::{require_tool, signal, wait_until, Project, SwarmGuard};

const WAIT: Duration = Duration::from_secs(40);

/// Live processes (no zombies) whose environment says they are `role`'s
/// agent in the project at `root`: (pid, command line).
fn agent_processes(root: &Path, role: &str) -> Vec<(u32, String)> {
    let want = [
        format!("SWARMFORGE_PROJECT={}", root.display()),
        format!("SWARMFORGE_ROLE={role}"),
    ];
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(env) = fs::read(e.path().join("environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
        if !want.iter().all(|w| vars.contains(&w.as_bytes())) {
            continue;
        }
        let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .unwrap_or("");
        if state == "Z" || state == "X" || state.is_empty() {
            continue;
        }
        let cmd = fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default();
        out.push((pid, cmd));
    }
    out
}

fn yaml(d: &Project, extra: &str) -> String {
    format!(
        "launch:\n  stagger: 0ms\nroles:\n  - name: lead\n    agent: human\n  - name: coder\n    agent: bash {}\n    worktree: coder\n{extra}",
        d.path("agents/coder.sh").display()
    )
}

/// An agent like Codex or Gemini CLI: it survives SIGHUP, and a server it
/// started left its process group.
const STUBBORN: &str = r#"trap '' HUP
setsid sleep 997 &
echo "$!" >>"$PWD/started"
while :; do sleep 1; done
"#;

/// Unconfined, `swarm down` sweeps the processes that left the agent's
/// group; confined (the default), the sandbox's pid namespace ends them
/// with the agent, so nothing is left for the sweep.
#[test]
fn down_after_a_killed_tmux_up_stops_every_agent_process() {
    down_after_a_killed_tmux_up(false);
    down_after_a_killed_tmux_up(true);
}

fn down_after_a_killed_tmux_up(confined: bool) {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    if !require_tool("setsid", "apt-get install -y util-linux") {
        return;
    }
    let d = Project::empty();
    d.write("agents/coder.sh", STUBBORN);
    let yaml = yaml(&d, "");
    let yaml = if confined {
        yaml
    } else {
        yaml.replace(
            "launch:\n",
            "launch:\n  confine: false  # the sweep of processes outside the agent's group is what is tested\n",
        )
    };
    d.write("swarm.yaml", &yaml);
    let mut guard = SwarmGuard::new(&d.root);
    let pid = guard.guard(d.cmd("swarm").args(["up"]).start());
    wait_until(WAIT, "the agent and its server run", || {
        d.path(".worktrees/coder/started").exists() && agent_processes(&d.root, "coder").len() >= 2
    });
    signal(pid, libc::SIGKILL);
    guard.finish(WAIT, "swarm up is gone");
    let r = d.swarm(&["down"]);
    r.ok();
    r.stdout_has("killed tmux sessions: swarmforge-lead swarmforge-coder");
    if !confined {
        r.stdout_has("stopped processes agents left outside their group: ");
    }
    wait_until(WAIT, "no agent process left", || {
        agent_processes(&d.root, "coder").is_empty()
    });
}

#[test]
fn a_killed_headless_supervisor_takes_its_agents_and_a_second_up_runs_one() {
    let d = Project::empty();
    // One long run per start; each start logged.
    d.write(
        "agents/coder.sh",
        "echo \"$$\" >>\"$PWD/started\"\nsleep 998\n",
    );
    d.write("swarm.yaml", &yaml(&d, ""));
    let mut guard = SwarmGuard::new(&d.root);
    let pid = guard.guard(d.cmd("swarm").args(["up", "--no-tmux"]).start());
    let starts = || {
        fs::read_to_string(d.path(".worktrees/coder/started"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    wait_until(WAIT, "the agent runs", || {
        starts() == 1 && !agent_processes(&d.root, "coder").is_empty()
    });
    signal(pid, libc::SIGKILL);
    guard.finish(WAIT, "swarm up is gone");
    // The agent (its shell, the script, its sleep) goes with its supervisor.
    wait_until(WAIT, "no agent process left", || {
        agent_processes(&d.root, "coder").is_empty()
    });
    // A second swarm: one agent on the queue, not two.
    d.swarm(&["up", "--no-tmux", "--detach"]).ok();
    // Until its `sleep` runs: between bash's fork and the exec of `sleep`
    // the child still reads as the script, which is not a second agent.
    wait_until(WAIT, "the new agent runs its sleep", || {
        starts() == 2
            && agent_processes(&d.root, "coder")
                .iter()
                .any(|(_, c)| c.starts_with("sleep 998"))
    });
    let procs = agent_processes(&d.root, "coder");
    let scripts = procs
        .iter()
        .filter(|(_, c)| c.starts_with("bash ") && c.contains("agents/coder.sh"))
        .count();
    assert_eq!(scripts, 1, "{procs:?}");
    d.swarm(&["down"]).ok();
    let left = agent_processes(&d.root, "coder");
    assert!(left.is_empty(), "left running: {left:?}");
}
