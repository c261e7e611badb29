#!/usr/bin/env bash
# Soak: 8 senders x 4 recipients x N messages per sender (default 10 000)
# through the real binaries, receivers draining concurrently; samples
# handoffd's VmRSS, reports latency percentiles per tenth of the run, and
# exits 1 if anything was lost or duplicated or the daemon's memory grew.
#   scripts/soak.sh [messages-per-sender] [extra options for benches/soak.rs]
#   e.g. scripts/soak.sh 10000 --rate 40     (40 messages/s per sender)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
shift || true
cargo bench --locked --bench soak -- --messages "$n" "$@"
