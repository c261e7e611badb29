#!/usr/bin/env bash
# Cost of log rotation (issue 17, item 4): one `handoffd --once` pass over N
# notes with `logs.max_bytes` set to MAX_BYTES, so compare a tiny bound (a
# rotation every few events) with the default 16 MiB (none at all here).
#
#   scripts/log-rotation-cost.sh [N] [MAX_BYTES] [BIN_DIR]
#
# Prints one line: N, MAX_BYTES, the pass's wall time, and how many rotated
# parts events.jsonl left. Absolute figures depend on the machine and its
# load (and on fsync); compare runs made side by side.
set -euo pipefail

N=${1:-2000}
MAX=${2:-1024}
BIN=${3:-target/release}
BIN=$(cd "$BIN" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
git init -q -b master
printf 'roles:\n  - {name: a, agent: human}\n  - {name: b, agent: human}\nwake: {method: none}\nlogs: {max_bytes: %s, keep: 100000}\n' "$MAX" >swarm.yaml
"$BIN/swarm" init -q >/dev/null
out=.swarmforge/handoffs/outbox
mkdir -p "$out/tmp"
for i in $(seq 1 "$N"); do
  id=$(printf '20260615T140531Z_%06d_from_a' "$i")
  printf 'id: %s\nfrom: a\nto: b\npriority: 50\ntype: note\nmessage: m%s\ncreated_at: 2026-06-15T14:05:31.123456Z\n\nRe-read your role and constitution.\n\nm\n' "$id" "$i" >"$out/tmp/x"
  mv "$out/tmp/x" "$out/50_${id}_to_b.handoff"
done
start=$(date +%s%N)
"$BIN/handoffd" --once "$TMP" >/dev/null
end=$(date +%s%N)
parts=$(find .swarmforge/daemon -name 'events.jsonl.[0-9]*' | wc -l)
echo "notes=$N max_bytes=$MAX pass=$(((end - start) / 1000000))ms events_parts=$parts"
