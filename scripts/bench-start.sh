#!/usr/bin/env bash
# The start-up of `ready-next` on an empty inbox against `/bin/true`, in the
# same run (docs/benchmarks.md, "Installed packages"): `perf stat -r RUNS`
# of each command given, in a throwaway one-role project, CPU time
# (task-clock) and wall time per run, and each one's ratio to /bin/true's.
#
#   scripts/bench-start.sh RUNS LABEL=READY_NEXT [LABEL=READY_NEXT ...]
#
# e.g. the npm copy (through its launcher) and the wheel's:
#   scripts/bench-start.sh 300 npm=$PREFIX/bin/ready-next venv=$VENV/bin/ready-next
set -euo pipefail
runs=${1:?usage: scripts/bench-start.sh RUNS LABEL=READY_NEXT ...}
shift
command -v perf >/dev/null || { echo "bench-start: needs perf (apt-get install linux-perf)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
(cd "$dir" && git init -q && git -c user.name=b -c user.email=b@invalid commit -q --allow-empty -m init &&
  mkdir .swarmforge &&
  printf 'coder\tmaster\t%s\tswarmforge-coder\tCoder\tclaude\ttask\n' "$dir" >.swarmforge/roles.tsv)

# measure LABEL CMD...: "<cpu ms> <wall ms>" per run, averaged over RUNS.
measure() {
  local out
  out=$(cd "$dir" && SWARMFORGE_ROLE=coder perf stat -r "$runs" -e task-clock "$@" 2>&1 >/dev/null)
  awk '/task-clock/ {cpu = $1} /seconds time elapsed/ {wall = $1 * 1000} END {printf "%.3f %.3f", cpu, wall}' <<<"$out"
}
read -r true_cpu true_wall <<<"$(measure /bin/true)"
printf '| command | CPU per run | wall per run | CPU / `/bin/true` | wall / `/bin/true` |\n| --- | --- | --- | --- | --- |\n'
printf '| `/bin/true` | %.2f ms | %.2f ms | 1 | 1 |\n' "$true_cpu" "$true_wall"
for arg in "$@"; do
  label=${arg%%=*} cmd=${arg#*=}
  # Absolute, keeping a link as given (npm's commands are links).
  cmd=$(cd "$(dirname "$cmd")" && pwd)/$(basename "$cmd")
  [ "$(cd "$dir" && SWARMFORGE_ROLE=coder "$cmd")" = NO_TASK ] || { echo "bench-start: $cmd did not answer NO_TASK" >&2; exit 1; }
  read -r cpu wall <<<"$(measure "$cmd")"
  awk -v l="$label" -v c="$cpu" -v w="$wall" -v tc="$true_cpu" -v tw="$true_wall" \
    'BEGIN {printf "| %s | %.2f ms | %.2f ms | %.1f× | %.1f× |\n", l, c, w, c / tc, w / tw}'
done
