#!/usr/bin/env bash
# Installs the packages scripts/package.sh made (PKGDIR) as a person without
# Rust does, and runs them: an ordinary account (swarm-user when run as
# root, as .ci/run makes it; else the caller), PATH without cargo or rustc,
# every registry out of reach (a proxy that answers nothing; npm's registry
# is packaging/npm/local-registry.py on 127.0.0.1, serving PKGDIR only; pip
# gets --no-index, uv --offline). The copies: npm's, pip's in a fresh venv,
# and, with $SWARM_INSTALLER_WHEELS (uv's and pipx's wheels, which .ci/run
# downloads), `uv tool install`'s and `pipx install`'s. Then, for each:
#   - `swarm --version` names the version and the commit;
#   - the binaries need glibc 2.17 at most and only the C library (ldd);
#   - `swarm demo` runs;
#   - with --scenario, the user lab's real agent CLI scenario (tests/cli/
#     userlab.rs, the trio example with the user's own Claude Code, Codex
#     and Gemini CLI against a scripted model) runs from that copy
#     (SWARM_USERLAB_BIN), through cargo nextest, as .ci/run does.
# Fails when a package asks npm for anything PKGDIR does not hold, or has
# an install script, or the wheel holds anything but the binaries and its
# metadata. Prints the install times (from local files) and sizes.
#
# With --bench RUNS, also scripts/bench-start.sh on both installed copies.
#
#   scripts/install-proof.sh PKGDIR [--scenario] [--bench RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pkgdir=$(cd "${1:?usage: scripts/install-proof.sh PKGDIR [--scenario] [--bench RUNS]}" && pwd)
shift
scenario=no bench=0
while [ $# -gt 0 ]; do
  case $1 in
  --scenario) scenario=yes; shift ;;
  --bench) bench=${2:?--bench RUNS}; shift 2 ;;
  *) echo "usage: scripts/install-proof.sh PKGDIR [--scenario] [--bench RUNS]" >&2; exit 2 ;;
  esac
done
fail() { echo "install-proof: $*" >&2; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }

if [ "$(id -u)" = 0 ]; then
  user=swarm-user
  getent passwd "$user" >/dev/null || fail "no account $user (.ci/run makes it)"
else
  user=$(id -un)
fi
home=$(getent passwd "$user" | cut -d: -f6)
# The account's environment: nothing of ours but a plain PATH, and a proxy
# that refuses every connection except to loopback.
as_user() {
  local cmd=(env -i HOME="$home" USER="$user" LOGNAME="$user" LANG=C.UTF-8
    PATH=/usr/local/bin:/usr/bin:/bin
    http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9
    HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9
    no_proxy=127.0.0.1,localhost NO_PROXY=127.0.0.1,localhost
    PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
    npm_config_update_notifier=false npm_config_audit=false npm_config_fund=false "$@")
  if [ "$(id -u)" = 0 ]; then
    (cd "$home" && runuser -u "$user" -- "${cmd[@]}")
  else
    (cd "$home" && "${cmd[@]}")
  fi
}
for tool in cargo rustc rustup; do
  if as_user sh -c "command -v $tool" >/dev/null 2>&1; then
    fail "$tool is on $user's PATH: the proof is for a machine without Rust"
  fi
done

mkdir -p "$home/.cache"
[ "$(id -u)" = 0 ] && chown "$user:" "$home/.cache"
work=$(as_user mktemp -d "$home/.cache/swarm-install-proof.XXXXXX")
registry_pid=""
cleanup() {
  # The registry itself (runuser's child), by the pid it wrote.
  [ -s "$work/port.pid" ] && kill "$(cat "$work/port.pid")" 2>/dev/null
  [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cp "$pkgdir"/*.tgz "$pkgdir"/*.whl "$root/packaging/npm/local-registry.py" "$work/"
[ "$(id -u)" = 0 ] && chown -R "$user:" "$work"
version=$(python3 -c 'import sys,tarfile,json; print(json.load(tarfile.open(sys.argv[1]).extractfile("package/package.json"))["version"])' "$work/swarm-handoff-"[0-9]*.tgz)

# npm, from a registry that holds only our packages.
as_user python3 "$work/local-registry.py" "$work" "$work/port" "$work/requests" >"$work/registry.log" 2>&1 &
registry_pid=$!
deadline=$((SECONDS + 10))
until [ -s "$work/port" ]; do
  kill -0 "$registry_pid" && [ $SECONDS -lt $deadline ] || fail "the local registry did not start"
  sleep 0.05
done
port=$(cat "$work/port")
t0=$(now)
as_user npm install -g swarm-handoff --prefix "$work/npm" --cache "$work/npm-cache" \
  --registry "http://127.0.0.1:$port/" --no-audit --no-fund --loglevel=error --foreground-scripts \
  || fail "npm install -g swarm-handoff failed"
npm_time=$(secs "$t0" "$(now)")
# npx runs the command named as the package, `swarm-handoff`; its `demo`
# is the demo (packaging/npm/launch.sh).
as_user npx --yes --cache "$work/npm-cache" --registry "http://127.0.0.1:$port/" \
  swarm-handoff demo >"$work/npx.out" 2>&1 || { cat "$work/npx.out" >&2; fail "npx swarm-handoff demo"; }
# Every request: our packages' documents and tarballs; a 404 only for the
# platform packages not built here (npm asks for each optional dependency).
ours=$(grep -v '^#' "$root/packaging/npm/platforms.tsv" | cut -f1 | sed 's/^/swarm-handoff-/' | paste -sd'|')
if bad=$(grep -v -E "^GET /(swarm-handoff|$ours) (200|404)$|^GET /-/files/[^/]+\.tgz 200$" "$work/requests"); then
  fail "npm asked for what the packages do not hold (a download at install): $bad"
fi
grep -q "^GET /-/files/swarm-handoff-linux-x64-gnu-$version.tgz 200$" "$work/requests" ||
  fail "npm did not fetch the platform package (optionalDependencies os/cpu/libc): $(cat "$work/requests")"
while IFS= read -r pj; do
  python3 - "$pj" <<'PY' || fail "$pj has an install-time script"
import json, sys
s = json.load(open(sys.argv[1])).get("scripts", {})
sys.exit(1 if set(s) & {"preinstall", "install", "postinstall", "prepare"} else 0)
PY
done < <(find "$work/npm/lib/node_modules" -name package.json -not -path '*/bin/*')

# The wheel, into a fresh venv, from the file alone.
whl=$(ls "$work"/*.whl)
if extra=$(python3 -m zipfile -l "$whl" | awk 'NR > 1 {print $1}' |
  grep -v -E '^swarm_handoff-[^/]+\.data/scripts/(swarm|swarm-handoff|ready-next|done-current|handoffd)$|^swarm_handoff-[^/]+\.dist-info/(METADATA|WHEEL|RECORD)$'); then
  fail "the wheel holds more than the binaries and its metadata: $extra"
fi
as_user python3 -m venv "$work/venv"
t0=$(now)
as_user "$work/venv/bin/pip" install -q --no-index --find-links "$work" swarm-handoff ||
  fail "pip install --no-index swarm-handoff failed"
pip_time=$(secs "$t0" "$(now)")

# uv and pipx, as a person installs them (pip, from their wheels in
# $SWARM_INSTALLER_WHEELS, which .ci/run downloads once per machine), then
# the wheel through each: `uv tool install`, `uvx --from`, `pipx install`,
# every one offline, from the file alone.
copies=(npm venv)
if [ -n "${SWARM_INSTALLER_WHEELS:-}" ]; then
  mkdir -p "$work/installers"
  cp "$SWARM_INSTALLER_WHEELS"/*.whl "$work/installers/"
  [ "$(id -u)" = 0 ] && chown -R "$user:" "$work/installers"
  as_user python3 -m venv "$work/tools"
  as_user "$work/tools/bin/pip" install -q --no-index --find-links "$work/installers" uv pipx ||
    fail "pip install uv pipx (from $SWARM_INSTALLER_WHEELS) failed"
  uv_env=(UV_OFFLINE=1 UV_PYTHON_DOWNLOADS=never UV_CACHE_DIR="$work/uv-cache"
    UV_TOOL_DIR="$work/uv-tools" UV_TOOL_BIN_DIR="$work/uv/bin")
  t0=$(now)
  as_user env "${uv_env[@]}" "$work/tools/bin/uv" tool install -q --find-links "$work" swarm-handoff ||
    fail "uv tool install swarm-handoff failed"
  uv_time=$(secs "$t0" "$(now)")
  as_user env "${uv_env[@]}" "$work/tools/bin/uvx" --find-links "$work" --from swarm-handoff \
    swarm --version >"$work/uvx.out" 2>&1 || { cat "$work/uvx.out" >&2; fail "uvx --from swarm-handoff swarm"; }
  t0=$(now)
  as_user env PIPX_HOME="$work/pipx-home" PIPX_BIN_DIR="$work/pipx/bin" PIPX_MAN_DIR="$work/pipx-man" \
    "$work/tools/bin/pipx" install --pip-args="--no-index --find-links=$work" swarm-handoff >"$work/pipx.out" 2>&1 ||
    { cat "$work/pipx.out" >&2; fail "pipx install swarm-handoff failed"; }
  pipx_time=$(secs "$t0" "$(now)")
  copies+=(uv pipx)
elif [ "${CI:-}" = true ]; then
  fail "SWARM_INSTALLER_WHEELS is not set: the uv and pipx installs are not proven (.ci/run sets it)"
fi

echo "install-proof: as $user, no Rust on PATH, registries out of reach:"
echo "  npm install -g swarm-handoff (local registry): ${npm_time} s"
echo "  pip install swarm-handoff (--no-index, fresh venv): ${pip_time} s"
if [ -n "${uv_time:-}" ]; then
  echo "  uv tool install swarm-handoff (offline, --find-links): ${uv_time} s; uvx --from swarm-handoff: $(cat "$work/uvx.out")"
  echo "  pipx install swarm-handoff (--no-index): ${pipx_time} s"
fi
for f in "$pkgdir"/*.tgz "$pkgdir"/*.whl; do
  printf '  %-76s %6.1f MB\n' "$(basename "$f")" "$(stat -c %s "$f" | awk '{print $1 / 1e6}')"
done

for copy in "${copies[@]}"; do
  bin=$work/$copy/bin
  v=$(as_user "$bin/swarm" --version)
  [[ $v == "swarm $version (commit "*")" ]] || fail "$copy: swarm --version says '$v'"
  for b in swarm swarm-handoff ready-next done-current handoffd; do
    real=$(readlink -f "$bin/$b")
    [ "$copy" = npm ] && real=$work/npm/lib/node_modules/swarm-handoff/node_modules/swarm-handoff-linux-x64-gnu/bin/$b
    [ -x "$real" ] || fail "$copy: $b is not where the launcher looks ($real)"
    if ldd "$real" | grep -q 'not found'; then fail "$copy: $b: $(ldd "$real")"; fi
    libs=$(ldd "$real" | awk '{print $1}' | grep -v -E '^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1)$' || true)
    [ -z "$libs" ] || fail "$copy: $b needs more than the C library: $libs"
    max=$(objdump -T "$real" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
    [ "$(printf '%s\n2.17\n' "$max" | sort -V | tail -n 1)" = 2.17 ] || fail "$copy: $b needs glibc $max"
  done
  as_user sh -c 'cd "$HOME" && PATH="$1:$PATH" swarm demo' - "$bin" >"$work/demo-$copy.out" 2>&1 ||
    { cat "$work/demo-$copy.out" >&2; fail "$copy: swarm demo failed"; }
  echo "  $copy: $v; glibc 2.17 at most, only the C library; swarm demo ran ($(wc -l <"$work/demo-$copy.out") lines)"
  # uv's and pipx's copies are the wheel's binaries again, proven above.
  if [ "$scenario" = yes ] && [[ $copy == npm || $copy == venv ]]; then
    (cd "$root" && SWARM_USERLAB_BIN=$bin cargo nextest run --locked --no-fail-fast --test cli \
      -E 'test(=userlab::the_trio_example_runs_in_tmux_with_the_users_own_agent_clis)') ||
      fail "$copy: the real agent CLI scenario failed from the installed copy"
  fi
done
if [ "$bench" -gt 0 ]; then
  "$root/scripts/bench-start.sh" "$bench" "npm (launcher + binary)=$work/npm/bin/ready-next" \
    "npm's binary itself=$work/npm/lib/node_modules/swarm-handoff/node_modules/swarm-handoff-linux-x64-gnu/bin/ready-next" \
    "wheel (venv)=$work/venv/bin/ready-next"
fi
echo "install-proof: OK"
