#!/usr/bin/env bash
# Runs one seeded harness test once per seed and prints a Markdown table row
# per run from the summary line the test prints (e.g. "POWER-RUN seed=1 ...").
# Used by scripts/power-harness.sh and scripts/partition-harness.sh.
#   scripts/harness-table.sh <test filter> <summary tag> <seed variable> <first seed> <runs> <field>...
set -euo pipefail
cd "$(dirname "$0")/.."
filter=$1 tag=$2 seedvar=$3 seed=$4 runs=$5
shift 5
cargo build --locked --test cli -q
echo "| $(IFS='|'; echo "$*" | sed 's/|/ | /g') | time |"
echo "|$(printf -- '---|%.0s' "$@" x)"
for ((i = 0; i < runs; i++)); do
  s=$((seed + i))
  log=$(mktemp)
  start=$(date +%s)
  if env "$seedvar=$s" cargo test --locked -q --test cli "$filter" -- --nocapture >"$log" 2>&1; then
    line=$(grep -m1 "^$tag" "$log")
    row="|"
    for f in "$@"; do row="$row $(sed -E "s/.* $f=([^ ]*).*/\1/" <<<"$line") |"; done
    echo "$row $(( $(date +%s) - start )) s |"
    rm -f "$log"
  else
    echo "| $s: FAILED, see $log |"
  fi
done
