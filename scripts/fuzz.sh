#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time (default 60 s each).
#   scripts/fuzz.sh [seconds-per-target]
# cargo-fuzz needs nightly flags; RUSTC_BOOTSTRAP lets the stable toolchain
# accept them, since no other toolchain can be installed here.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-60}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
export RUSTC_BOOTSTRAP=1
for t in header draft config; do
  mkdir -p "corpus/$t"
  echo "== fuzzing $t for ${secs}s"
  cargo fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -max_len=4096
done
echo "fuzz: all targets ran ${secs}s without a crash"
