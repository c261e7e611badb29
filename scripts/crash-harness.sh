#!/usr/bin/env bash
# Long crash-injection run: SIGKILLs handoffd, senders and receivers at random
# moments for many rounds, then checks exactly-once delivery.
#   scripts/crash-harness.sh [rounds] [seed]
set -euo pipefail
cd "$(dirname "$0")/.."
export CRASH_ROUNDS=${1:-3000}
[ -n "${2:-}" ] && export CRASH_SEED=$2
cargo test --release --locked --test cli crash:: -- --nocapture
