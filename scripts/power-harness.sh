#!/usr/bin/env bash
# Long power-loss runs (tests/cli/power.rs): the workload on the recording
# FUSE file system (tests/cli/lazyfs.rs), then every sync as a crash point,
# each rebuilt, recovered and checked. Needs root and /dev/fuse.
#   scripts/power-harness.sh [sends] [first-seed] [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
export CI=true SWARM_POWER_SENDS=${1:-40} SWARM_POWER_POINTS=all
seed=${2:-1}
runs=${3:-3}
echo "| seed | sends | syncs recorded | crash points checked | failures | time |"
echo "|---|---|---|---|---|---|"
for ((i = 0; i < runs; i++)); do
  s=$((seed + i))
  log=$(mktemp)
  start=$(date +%s)
  if SWARM_POWER_SEED=$s cargo test --locked -q --test cli \
      power::a_power_cut -- --nocapture >"$log" 2>&1; then
    line=$(grep -m1 '^POWER-RUN' "$log")
    field() { sed -E "s/.* $1=([^ ]*).*/\1/" <<<"$line"; }
    echo "| $s | $(field sends) | $(field syncs) | $(field points) | 0 | $(( $(date +%s) - start )) s |"
    rm -f "$log"
  else
    echo "| $s | FAILED: see $log | | | | |"
  fi
done
