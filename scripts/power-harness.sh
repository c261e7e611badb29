#!/usr/bin/env bash
# Long power-loss runs (tests/cli/power.rs, docs/power-loss.md): the workload
# on the recording FUSE file system, then every sync as a crash point, each
# rebuilt, recovered and checked. Needs root and /dev/fuse.
#   scripts/power-harness.sh [sends] [first-seed] [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
export CI=true SWARM_POWER_SENDS=${1:-40} SWARM_POWER_POINTS=all
exec scripts/harness-table.sh power::a_power POWER-RUN SWARM_POWER_SEED "${2:-1}" "${3:-3}" \
  seed sends syncs ops points failures
