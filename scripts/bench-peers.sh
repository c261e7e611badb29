#!/usr/bin/env bash
# Our MCP hop against three agent-mail peers from PyPI, each driven through
# its own interface, interleaved in one run, fresh and with messages stored;
# prints the ratios, fsyncs a hop (strace) and whether a returned send
# survives a power loss (scripts/bench_peers.py says how; docs/benchmarks.md,
# "Against the agent-mail peers", has the table).
#   scripts/bench-peers.sh [options for scripts/bench_peers.py]
#   e.g. scripts/bench-peers.sh --stored 10000 --rounds 5 --chunk 2 --traced 20
# Installs the pinned peers into target/peers/ (one venv each: their
# dependencies conflict) and the MCP client the driver uses; needs python3
# (3.10+), git, tmux and strace (apt-get install tmux strace).
set -euo pipefail
cd "$(dirname "$0")/.."

# Exact versions, looked up on PyPI on 2026-12-07 (the newest of each).
MCP_CLIENT="mcp==1.30.0"
declare -A PEERS=(
  [mam]="mcp_agent_mail==0.1.0"
  [amb]="agent-mailbox==0.8.2"
  [cao]="cli-agent-orchestrator==2.5.4"
)

for tool in git tmux strace python3; do
  command -v "$tool" >/dev/null || { echo "bench-peers: $tool is missing (apt-get install $tool)" >&2; exit 1; }
done

venv() { # venv DIR PACKAGE: DIR holds exactly PACKAGE (reinstalled when the pin changed)
  local dir=target/peers/$1 pkg=$2
  if [ "$(cat "$dir/.pinned" 2>/dev/null)" != "$pkg" ]; then
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "$pkg"
    echo "$pkg" > "$dir/.pinned"
  fi
}
mkdir -p target/peers
venv driver "$MCP_CLIENT"
for p in "${!PEERS[@]}"; do venv "$p" "${PEERS[$p]}"; done

if [ ! -x target/release/swarm ] || [ ! -x target/release/handoffd ]; then
  nice -n 10 cargo build --locked --release --bins
fi
exec target/peers/driver/bin/python scripts/bench_peers.py \
  --bin target/release --peers target/peers "$@"
