#!/usr/bin/env bash
# Deep queues at any call spacing, the re-wake sweep and replies against
# history (benches/deep.rs): RUNS runs (default 3) for each build named,
# then every table row's ratios across the runs and their median.
#   scripts/bench-deep.sh [BIN_DIR ...] [-- options for benches/deep.rs]
#   e.g. scripts/bench-deep.sh /tmp/before-bin target/release -- --waiting 100000
# A BIN_DIR holds handoffd, ready-next, done-current and swarm-handoff; with
# none, this checkout's release build is measured. Prints `uptime` first:
# the machine's load belongs with the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do dirs+=("$(realpath "$1")"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#dirs[@]} -gt 0 ] || dirs=("")
runs="${RUNS:-3}"
echo "load: $(uptime)"
# Built with the release profile (not `cargo bench`'s own), so the library
# is the one `cargo build --release` made.
exe="$(cargo build --release --locked --bench deep --message-format=json \
  | python3 -c 'import json, sys
for m in map(json.loads, sys.stdin):
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "deep" and m.get("executable"):
        print(m["executable"])' | tail -1)"
out="$(mktemp -d)"
for d in "${dirs[@]}"; do
  for r in $(seq 1 "$runs"); do
    echo "== ${d:-this build}, run $r" >&2
    SWARM_BENCH_BIN="$d" "$exe" --bench "$@" \
      | tee "$out/$(basename "${d:-this}").$r" >&2
  done
done
echo "load: $(uptime)"
python3 - "$out" "$runs" "${dirs[@]}" <<'PY'
import os, statistics, sys
out, runs, dirs = sys.argv[1], int(sys.argv[2]), sys.argv[3:] or [""]
for d in dirs:
    name = os.path.basename(d) if d else "this"
    rows = {}
    for r in range(1, runs + 1):
        section = ""
        for line in open(os.path.join(out, f"{name}.{r}")):
            if line.startswith("###"):
                section = line.split(",")[0].strip("# \n")
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 3 or cells[0].startswith("---"):
                continue
            try:
                ratio = float(cells[-1])
            except ValueError:
                continue
            rows.setdefault(f"{section} | {cells[0]}", []).append(ratio)
    print(f"\n{d or 'this build'}: ratio per run, median")
    for k, v in rows.items():
        print(f"| {k} | {', '.join(f'{x:.2f}' for x in v)} | {statistics.median(v):.2f} |")
PY
