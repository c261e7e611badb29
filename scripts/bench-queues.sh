#!/usr/bin/env bash
# Our queue against the bare fsync loop, Maildir via safecat and python dirq,
# side by side in one run on one disk (benches/queues.rs), then the delivery
# benchmark (benches/delivery.rs). Installs the peers when missing.
#   scripts/bench-queues.sh [options for benches/queues.rs]
#   e.g. scripts/bench-queues.sh --messages 2000 --hops 300 --backlog 100000 --trail 50000
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v safecat >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq safecat
fi
python3 -c 'import dirq' 2>/dev/null || python3 -m pip install --quiet dirq
cargo bench --locked --bench queues -- "$@"
