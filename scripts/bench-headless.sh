#!/usr/bin/env bash
# Supervisor overhead per headless turn (docs/headless.md): `swarm turn`
# (build the command, run the CLI, read its stream into the session file,
# the activity file and the usage journal) against starting the same CLI
# with the same command line by hand, output thrown away.
#
#   scripts/bench-headless.sh [TURNS] [BIN_DIR] [EVENTS]
#
# The CLI is a stand-in `claude` that prints a typical stream of EVENTS
# events (init, assistant text and tool calls, tool results, a result with
# usage) and exits, so the figures are the swarm's own cost; a real CLI's
# start-up (node) and the model's time come on top of both columns equally.
# Prints the mean wall time per turn of each, the difference and the ratio.
# CONFINE=false runs the swarm with `launch: {confine: false}`; by default
# (confined) `swarm turn` also starts the CLI inside bubblewrap, which the
# by-hand column does not: run both to see what each part costs.
set -euo pipefail

TURNS=${1:-20}
BIN=${2:-target/debug}
EVENTS=${3:-40}
BIN=$(cd "$BIN" && pwd)
TMP=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT
cd "$TMP"
git init -q -b master . && git -c user.name=t -c user.email=t@e commit -q --allow-empty -m init
mkdir -p fake
cat >fake/claude <<FAKE
#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"bench-session","model":"m"}'
i=0
while [ \$i -lt $EVENTS ]; do
  echo '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"ls -la src"}}]}}'
  echo '{"type":"user","message":{"content":[{"type":"tool_result","content":"a.rs b.rs c.rs","is_error":false}]}}'
  i=\$((i + 2))
done
echo '{"type":"result","subtype":"success","is_error":false,"session_id":"bench-session","total_cost_usd":0.01,"usage":{"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}'
FAKE
chmod +x fake/claude
export PATH="$TMP/fake:$BIN:$PATH"
printf 'roles:\n  - name: coder\n    agent: claude\n    worktree: coder\n    runtime: headless\n  - name: owner\n    agent: human\n' >swarm.yaml
if [ "${CONFINE:-true}" = false ]; then printf 'launch: {confine: false}\n' >>swarm.yaml; fi
swarm init -q >/dev/null
swarm up --no-tmux --until-idle --timeout 1ms >"$TMP/up.log" 2>&1 || true
printf 'type: note\nto: coder\npriority: 20\nmessage: bench\n' >draft.txt
SWARMFORGE_ROLE=owner swarm-handoff draft.txt >/dev/null
handoffd --once "$TMP" >/dev/null
WT="$TMP/.worktrees/coder"
# The exact command line `swarm turn` runs (resuming, as every turn but the first).
swarm turn --role coder >/dev/null
CMD="claude -p --output-format stream-json --verbose --append-system-prompt-file '$TMP/.swarmforge/prompts/coder.md' --permission-mode acceptEdits --resume 'bench-session' 'New work waits for you (role coder). Start now: run ready_for_next.sh, and handle it as your instructions say.'"

now() { date +%s%N; }
t0=$(now)
for _ in $(seq "$TURNS"); do (cd "$WT" && sh -c "$CMD" >/dev/null); done
t1=$(now)
for _ in $(seq "$TURNS"); do (cd "$WT" && swarm turn --role coder >/dev/null 2>&1); done
t2=$(now)
hand=$(( (t1 - t0) / TURNS / 1000 ))
ours=$(( (t2 - t1) / TURNS / 1000 ))
lines=$(wc -l <"$TMP/.swarmforge/telemetry/activity/coder.jsonl")
echo "confine=${CONFINE:-true} turns=$TURNS events/turn=$EVENTS by_hand_us=$hand swarm_turn_us=$ours overhead_us=$((ours - hand)) ratio=$(awk "BEGIN{printf \"%.2f\", $ours/$hand}") activity_lines=$lines"
