#!/usr/bin/env bash
# Long partition runs (tests/cli/partition.rs): a three-node JetStream
# cluster and three hosts in network namespaces, a seeded nemesis (links down,
# one-way drops, kill -9 of servers, bridges and daemons, SIGSTOP, clock
# skew), then the exactly-once and `swarm audit --check` checks. Needs root.
#   scripts/partition-harness.sh [rounds] [first-seed] [runs]
# Prints one table row per run, as docs/bridge.md publishes them.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-60}
seed=${2:-1}
runs=${3:-5}
export CI=true SWARM_PARTITION_ROUNDS=$rounds
cargo build --locked --tests -q
echo "| seed | rounds (faults) | messages | copies delivered | losses | duplicates | time |"
echo "|---|---|---|---|---|---|---|"
for ((i = 0; i < runs; i++)); do
  s=$((seed + i))
  log=$(mktemp)
  start=$(date +%s)
  if SWARM_PARTITION_SEED=$s cargo test --locked -q --test cli \
      partition::partitions -- --nocapture >"$log" 2>&1; then
    line=$(grep -m1 '^PARTITION-RUN' "$log")
    field() { sed -E "s/.* $1=([^ ]*).*/\1/" <<<"$line"; }
    echo "| $s | $(field rounds) ($(field faults)) | $(field messages) | $(field copies) | $(field losses) | $(field duplicates) | $(( $(date +%s) - start )) s |"
    rm -f "$log"
  else
    echo "| $s | FAILED: see $log | | | | | |"
  fi
done
