#!/usr/bin/env bash
# Fault injection with real faults (tests/cli/faults.rs): a tiny tmpfs for a
# full disk (ENOSPC), chattr +i for folders that refuse writes even to root
# (EPERM), strace --inject into the running daemon and the helpers (EIO on
# fsync and renameat2), libfaketime for a sender whose clock steps back.
# A test whose tool or privilege is missing skips with a NOTE, or fails when
# CI=true; this script installs the tools when it can and runs the tests with
# CI=true, so it fails when anything could not be injected.
#   scripts/fault-inject.sh
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v faketime >/dev/null 2>&1 || need+=(faketime)
command -v chattr >/dev/null 2>&1 || need+=(e2fsprogs)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "${need[@]}"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! CI=true cargo test --locked --test cli faults:: -- --nocapture >"$log" 2>&1; then
  cat "$log"
  exit 1
fi
grep -E "^test |^test result" "$log"
if grep -q "NOTE:" "$log"; then
  grep "NOTE:" "$log"
  echo "fault-inject: some faults could not be injected on this machine (see the NOTE lines)"
  exit 2
fi
echo "fault-inject: every fault injected; nothing lost, every cause logged, delivery resumed"
