#!/usr/bin/env python3
"""The wake path (issue 47.4, docs/benchmarks.md "The wake path"): from
`HANDOFF QUEUED` to the recipient agent's next run starting, in tmux and
headless, against the agent process's own start measured in the same run.

  python3 scripts/bench_wake.py [BIN_DIR] [N]

BIN_DIR holds the five binaries (default target/release, else target/debug);
N messages per runtime (default 20). In a temp project, a swarm of one
stand-in agent (`coder`, `sh agent.sh`: it records the time it starts, takes
its item and finishes it) and one person (`owner`) runs with `swarm up`
(tmux) and then `swarm up --no-tmux`. For each message the driver takes the
time `swarm-handoff` returned `HANDOFF QUEUED`, and waits for the agent's
next start record (`date +%s%N`, written first thing). The baseline is the
same stand-in's own start, `sh agent-start.sh` run by the driver and timed
from before its start to its first record, interleaved with the messages.

Prints, for each runtime, the median and 90th percentile of the wake time,
the baseline's median, and the difference and ratio; the issue's aims are
tmux <= 300 ms and headless <= the agent's own start + 50 ms.

The `acp` row (`runtime: acp`, headless): the agent is a scripted ACP
agent (a shell script as `gemini`) whose session stays open; the wake is
the time from `HANDOFF QUEUED` to its next `session/prompt` arriving (it
records the time first thing, then takes and finishes the item and ends
the turn). No process starts, so there is no baseline; the aim is 50 ms.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_project import git_repo

ROOT = Path(__file__).resolve().parent.parent


def bin_dir():
    if len(sys.argv) > 1:
        return Path(sys.argv[1]).resolve()
    rel = ROOT / "target/release"
    return rel if (rel / "swarm").exists() else ROOT / "target/debug"


BIN = bin_dir()
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20
ENV = dict(
    os.environ,
    PATH=f"{BIN}:{os.environ.get('PATH', '')}",
    GIT_CONFIG_NOSYSTEM="1",
)

AGENT = """#!/bin/sh
date +%s%N >>"{starts}"
case "$(ready-next)" in
  *NO_TASK*) exit 0 ;;
esac
done-current >/dev/null
"""

# The baseline: the same shell's start and its first record, nothing else.
START_ONLY = """#!/bin/sh
date +%s%N >>"{starts}"
"""


# A scripted ACP agent (as `gemini`): answers `initialize` and
# `session/new`, then for each `session/prompt` records the time, takes
# and finishes the item, and ends the turn.
ACP_AGENT = """#!/bin/sh
say() {{ printf '%s\\n' "$1"; }}
read -r l; say '{{"jsonrpc":"2.0","id":0,"result":{{"protocolVersion":1,"agentCapabilities":{{}}}}}}'
read -r l; say '{{"jsonrpc":"2.0","id":1,"result":{{"sessionId":"s-1"}}}}'
while read -r l; do
  case "$l" in
    *'"session/prompt"'*)
      date +%s%N >>"{starts}"
      id=$(printf '%s' "$l" | sed -n 's/.*"id":\\([0-9]*\\).*/\\1/p')
      ready_for_next.sh >/dev/null 2>&1; done_with_current.sh >/dev/null 2>&1
      say '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"stopReason":"end_turn"}}}}' ;;
  esac
done
"""


def acp_project():
    d = git_repo(Path(tempfile.mkdtemp(prefix="bench-wake-acp-")).resolve())
    starts = d / "starts"
    bin_ = d / "fake-bin"
    bin_.mkdir()
    (bin_ / "gemini").write_text(ACP_AGENT.format(starts=starts))
    (bin_ / "gemini").chmod(0o755)
    (d / "swarm.yaml").write_text(
        "launch:\n  stagger: 0ms\n  confine: false\n"
        "roles:\n"
        "  - name: coder\n    agent: gemini\n    runtime: acp\n    worktree: coder\n"
        "  - name: owner\n    agent: human\n"
    )
    subprocess.run(["swarm", "init"], cwd=d, env=ENV, check=True, capture_output=True)
    return d, starts, dict(ENV, PATH=f"{bin_}:{ENV['PATH']}")


def project(tag):
    d = git_repo(Path(tempfile.mkdtemp(prefix=f"bench-wake-{tag}-")).resolve())
    starts = d / "starts"
    (d / "agent.sh").write_text(AGENT.format(starts=starts))
    (d / "swarm.yaml").write_text(
        "launch:\n  stagger: 0ms\n  confine: false\n"
        "roles:\n"
        f"  - name: coder\n    agent: sh {d / 'agent.sh'}\n"
        "  - name: owner\n    agent: human\n"
    )
    subprocess.run(["swarm", "init"], cwd=d, env=ENV, check=True, capture_output=True)
    return d, starts


def records(path):
    try:
        return [int(x) for x in path.read_text().split()]
    except FileNotFoundError:
        return []


def wait_for(cond, what, secs=30.0):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.002)
    raise SystemExit(f"bench_wake: timed out waiting for {what}")


def inbox_idle(d):
    inbox = d / ".swarmforge/handoffs/inbox"
    return not any((inbox / "new").glob("*.handoff")) and not any(
        (inbox / "in_process").glob("*.handoff")
    )


def baseline(d):
    starts = d / "baseline"
    script = d / "start-only.sh"
    script.write_text(START_ONLY.format(starts=starts))
    before = len(records(starts))
    t0 = time.time_ns()
    subprocess.run(["sh", str(script)], check=True)
    return (records(starts)[before] - t0) / 1e6


def run(tag, up_args):
    if tag == "acp":
        d, starts, env = acp_project()
        inbox_of = d / ".worktrees/coder"
        # Its client is up with the session open, and nothing runs.
        state = d / ".swarmforge/acp/state/coder"
        ready = lambda: state.exists() and state.read_text().startswith("idle")
    else:
        d, starts = project(tag)
        env, inbox_of = ENV, d
        # The first run at start, with nothing waiting.
        ready = lambda: len(records(starts)) >= 1
    up = subprocess.run(
        ["swarm", "up", "--detach", *up_args], cwd=d, env=env, capture_output=True, text=True
    )
    if up.returncode != 0:
        raise SystemExit(f"bench_wake: swarm up {up_args} failed:\n{up.stderr}")
    try:
        wait_for(ready, "the agent ready")
        wake, base = [], []
        draft = d / "draft.txt"
        for i in range(N):
            wait_for(lambda: inbox_idle(inbox_of), "the inbox to drain")
            time.sleep(0.3)  # the agent's previous run has exited
            base.append(baseline(d))
            before = len(records(starts))
            draft.write_text(f"type: note\nto: coder\npriority: 10\nmessage: m{i}\n")
            sent = subprocess.run(
                ["swarm-handoff", str(draft)],
                cwd=d,
                env=dict(ENV, SWARMFORGE_ROLE="owner"),
                capture_output=True,
                text=True,
            )
            queued = time.time_ns()
            if "HANDOFF QUEUED" not in sent.stdout:
                raise SystemExit(f"bench_wake: send failed: {sent.stdout}{sent.stderr}")
            wait_for(lambda: len(records(starts)) > before, f"wake {i}")
            wake.append((records(starts)[before] - queued) / 1e6)
        return wake, base
    finally:
        subprocess.run(["swarm", "down"], cwd=d, env=ENV, capture_output=True)


def p90(xs):
    return sorted(xs)[max(0, int(len(xs) * 0.9) - 1)]


def main():
    print(f"wake path, {N} messages per runtime, binaries {BIN}")
    print(f"{'runtime':<10} {'wake med':>9} {'wake p90':>9} {'start med':>10} {'diff':>8} {'ratio':>6}")
    only = os.environ.get("BENCH_WAKE_ONLY")
    runs = [("tmux", []), ("headless", ["--no-tmux"]), ("acp", ["--no-tmux"])]
    for tag, args in [r for r in runs if not only or r[0] == only]:
        wake, base = run(tag, args)
        w, b = statistics.median(wake), statistics.median(base)
        if tag == "acp":
            # A session kept open: no process start to compare with.
            print(f"{tag:<10} {w:8.1f}ms {p90(wake):8.1f}ms {'-':>10} {'-':>8} {'-':>6}  (aim <= 50 ms)")
            continue
        print(f"{tag:<10} {w:8.1f}ms {p90(wake):8.1f}ms {b:9.1f}ms {w - b:7.1f}ms {w / b:5.1f}x")


if __name__ == "__main__":
    main()
