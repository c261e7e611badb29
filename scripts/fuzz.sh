#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time (default 60 s each), starting
# from the committed seeds in fuzz/seeds/<target>/ (read only) and the local,
# growing corpus in fuzz/corpus/<target>/ (git-ignored).
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
  seeds=()
  [ -d "seeds/$t" ] && seeds=("seeds/$t")
  echo "== fuzzing $t for ${secs}s"
  cargo fuzz run "$t" "corpus/$t" "${seeds[@]}" -- -max_total_time="$secs" -max_len=4096
done
echo "fuzz: all targets ran ${secs}s without a crash"
