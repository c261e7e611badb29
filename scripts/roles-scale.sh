#!/usr/bin/env bash
# Cost with many roles (issue 12, item 8): an idle daemon's CPU and one
# `swarm-handoff` call, for a role table of N roles, each in its own worktree
# folder (the worst case: N outboxes to scan, N distinct worktree paths).
#
#   scripts/roles-scale.sh [N] [BIN_DIR] [WINDOW_SECONDS]
#
# EXTRA_YAML is appended to swarm.yaml (e.g. EXTRA_YAML='daemon: {rescan: 60s}\n').
#
# Prints one line: roles, idle daemon CPU seconds over the window (utime+stime
# from /proc/<pid>/stat), its share of one core, and the wall time of one
# swarm-handoff. Compare two builds by passing their bin dirs; report ratios,
# the absolute figures depend on the machine and its load.
set -euo pipefail

N=${1:-2000}
BIN=${2:-target/debug}
WINDOW=${3:-10}
BIN=$(cd "$BIN" && pwd)
TMP=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT
PID=

cd "$TMP"
git init -q -b master . && git -c user.name=t -c user.email=t@e commit -q --allow-empty -m init
mkdir -p .swarmforge
{
    printf 'coder\tmaster\t%s\tswarmforge-coder\tCoder\tcodex\ttask\n' "$TMP"
    for i in $(seq 1 "$N"); do
        printf 'r%d\tr%d\t%s/wt/r%d\tswarmforge-r%d\tR%d\tcodex\ttask\n' "$i" "$i" "$TMP" "$i" "$i" "$i"
    done
} > .swarmforge/roles.tsv
mkdir -p wt && (cd wt && seq -f 'r%.0f' 1 "$N" | xargs mkdir -p)
printf "wake: {method: none}\n${EXTRA_YAML:-}" > swarm.yaml

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

"$BIN/handoffd" "$TMP" 2> "$TMP/handoffd.err" &
PID=$!
# Ready once it logged `started` (the first pass and the watches are done).
for _ in $(seq 1 6000); do
    grep -q ' started' .swarmforge/daemon/handoffd.log 2>/dev/null && break
    sleep 0.05
done
grep -q ' started' .swarmforge/daemon/handoffd.log
sleep "${SETTLE:-5}"  # past start-up: the first passes list every (new) outbox
t0=$(ticks "$PID")
sleep "$WINDOW"
t1=$(ticks "$PID")
cpu=$(echo "scale=3; ($t1 - $t0) / $HZ" | bc)
share=$(echo "scale=1; 100 * ($t1 - $t0) / $HZ / $WINDOW" | bc)

printf 'type: note\nto: r1\npriority: 50\nmessage: hello\n' > draft.txt
s=$(date +%s.%N)
SWARMFORGE_ROLE=coder "$BIN/swarm-handoff" draft.txt > /dev/null
e=$(date +%s.%N)
send=$(echo "scale=3; $e - $s" | bc)
echo "roles=$N idle_cpu_s=$cpu over ${WINDOW}s (${share}% of a core) swarm_handoff_s=$send"
