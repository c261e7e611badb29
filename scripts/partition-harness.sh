#!/usr/bin/env bash
# Long partition runs (tests/cli/partition.rs, docs/bridge.md "Partitions,
# tested"): a three-node JetStream cluster and three hosts in network
# namespaces, a seeded nemesis (links down, one-way drops, kill -9 of servers,
# bridges and daemons, SIGSTOP, clock skew), then the exactly-once and
# `swarm audit --check` checks. Needs root.
#   scripts/partition-harness.sh [rounds] [first-seed] [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
export CI=true SWARM_PARTITION_ROUNDS=${1:-60}
exec scripts/harness-table.sh partition::partitions PARTITION-RUN SWARM_PARTITION_SEED "${2:-1}" "${3:-5}" \
  seed rounds faults messages copies losses duplicates
