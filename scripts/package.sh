#!/usr/bin/env bash
# Builds, from the working tree, what a person without Rust installs: the npm
# packages (`npm pack`: the launcher `swarm-handoff` and this platform's
# `swarm-handoff-<platform>`) and the wheel, into OUTDIR, with SHA256SUMS.
#
#   scripts/package.sh OUTDIR                  release build, then package
#   scripts/package.sh OUTDIR --bins DIR       package binaries already
#                                              built (CI: the ones its tests ran)
#   scripts/package.sh OUTDIR --target TRIPLE  (release workflow) cross build
#   scripts/package.sh OUTDIR --launcher-only  the launcher package alone
#
# The version is Cargo.toml's (`cargo metadata`), the only place it is
# written; every package and `swarm --version` carry it, the latter with the
# commit (SWARM_BUILD_COMMIT, build.rs). Linux binaries are linked through
# zig against glibc 2.17's symbols (packaging/zig-linker; the tools in a venv
# from packaging/requirements.txt, $SWARM_PACK_VENV or target/pack) and are
# refused when they need a newer glibc or any library but the C library's.
# No package gets an install script: one that has any is refused.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

usage() { echo "usage: scripts/package.sh OUTDIR [--bins DIR] [--target TRIPLE] [--launcher-only]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1; shift
bins="" target="" launcher_only=no
while [ $# -gt 0 ]; do
  case $1 in
  --bins) bins=$(cd "${2:?--bins DIR}" && pwd); shift 2 ;;
  --target) target=${2:?--target TRIPLE}; shift 2 ;;
  --launcher-only) launcher_only=yes; shift ;;
  *) usage ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

version=$(cargo metadata --no-deps --format-version 1 --locked |
  python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="swarm-handoff"))')
: "${SWARM_BUILD_COMMIT:=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}"
export SWARM_BUILD_COMMIT
BINARIES=(swarm swarm-handoff ready-next done-current handoffd)
platforms=$(grep -v '^#' packaging/npm/platforms.tsv)

# The platform row for TRIPLE (default: this machine's).
if [ -z "$target" ]; then
  case "$(uname -s) $(uname -m)" in
  "Linux x86_64") target=x86_64-unknown-linux-gnu ;;
  "Linux aarch64") target=aarch64-unknown-linux-gnu ;;
  "Darwin x86_64") target=x86_64-apple-darwin ;;
  "Darwin arm64") target=aarch64-apple-darwin ;;
  *) echo "package.sh: no package for $(uname -s) $(uname -m) (platforms: packaging/npm/platforms.tsv)" >&2; exit 1 ;;
  esac
fi
row=$(awk -F'\t' -v t="$target" '$5 == t' <<<"$platforms")
[ -n "$row" ] || { echo "package.sh: $target is not in packaging/npm/platforms.tsv" >&2; exit 1; }
IFS=$'\t' read -r suffix npm_os npm_cpu npm_libc _ wheel_tag <<<"$row"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# check_binary FILE: on Linux, glibc 2.17's symbols at most and no library
# but the C library's (the dynamic loader, libc, libm, libpthread, libdl,
# librt, as glibc 2.17 splits them).
check_binary() {
  local f=$1 max needed
  case $target in *-linux-gnu) ;; *) return 0 ;; esac
  max=$(objdump -T "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
  if [ -n "$max" ] && [ "$(printf '%s\n2.17\n' "$max" | sort -V | tail -n 1)" != 2.17 ]; then
    echo "package.sh: $f needs glibc $max (at most 2.17 is shipped)" >&2
    echo "  hint: link through packaging/zig-linker (this script does it for its own build)" >&2
    return 1
  fi
  needed=$(objdump -p "$f" | awk '$1 == "NEEDED" {print $2}' |
    grep -v -E '^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux-(x86-64|aarch64)\.so\.[12])$' || true)
  if [ -n "$needed" ]; then
    echo "package.sh: $f needs libraries beyond the C library: $needed" >&2
    return 1
  fi
  echo "$(basename "$f"): glibc ${max:-none} at most; needs $(objdump -p "$f" | awk '$1 == "NEEDED" {printf "%s ", $2}')"
}

# no_install_scripts DIR: a package.json with an install-time script is refused.
no_install_scripts() {
  python3 - "$1/package.json" <<'PY'
import json, sys
scripts = json.load(open(sys.argv[1])).get("scripts", {})
bad = sorted(set(scripts) & {"preinstall", "install", "postinstall", "prepare", "preprepare", "postprepare"})
if bad:
    sys.exit(f"package.sh: {sys.argv[1]} has install-time scripts {bad}: packages must install without running anything")
PY
}

# SHA256SUMS of what OUTDIR holds (sha256sum, or macOS's shasum).
checksums() {
  local sum=(sha256sum)
  command -v sha256sum >/dev/null || sum=(shasum -a 256)
  (cd "$out" && "${sum[@]}" -- *.tgz $(ls -- *.whl 2>/dev/null) >SHA256SUMS)
}

npm_pack() {
  no_install_scripts "$1"
  (cd "$1" && npm pack --silent --pack-destination "$out" >/dev/null)
}

# The launcher: the five commands, the platform packages as optional
# dependencies (npm installs the one whose os, cpu and libc match).
launcher="$stage/npm/swarm-handoff"
mkdir -p "$launcher"
cp -r packaging/npm/swarm-handoff/. "$launcher/"
mkdir -p "$launcher/bin"
for b in "${BINARIES[@]}"; do
  sed "s/@NAME@/$b/" packaging/npm/launch.sh >"$launcher/bin/$b"
  chmod 755 "$launcher/bin/$b"
done
python3 - "$launcher/package.json" "$version" <<PY
import json, sys
path, version = sys.argv[1], sys.argv[2]
suffixes = [l.split("\t")[0] for l in """$platforms""".splitlines() if l.strip()]
pkg = {
    "name": "swarm-handoff",
    "version": version,
    "description": "File-based handoff queue for agent swarms: swarm, swarm-handoff, ready-next, done-current, handoffd (prebuilt, no install script)",
    "license": "MIT",
    "bin": {b: f"bin/{b}" for b in ["swarm", "swarm-handoff", "ready-next", "done-current", "handoffd"]},
    "files": ["bin", "README.md"],
    "os": ["linux", "darwin"],
    "optionalDependencies": {f"swarm-handoff-{s}": version for s in suffixes},
}
json.dump(pkg, open(path, "w"), indent=2)
open(path, "a").write("\n")
PY
npm_pack "$launcher"
[ "$launcher_only" = yes ] && { checksums; exit 0; }

# The binaries: given, or a release build here.
if [ -z "$bins" ]; then
  build=(cargo build --release --locked --bins)
  case $target in
  *-linux-gnu)
    if [ "$target" = x86_64-unknown-linux-gnu ] || [ "$target" = aarch64-unknown-linux-gnu ]; then
      venv=${SWARM_PACK_VENV:-$root/target/pack}
      if [ "$(cat "$venv/pinned" 2>/dev/null)" != "$(cat packaging/requirements.txt)" ]; then
        rm -rf "$venv" && python3 -m venv "$venv"
        "$venv/bin/pip" install -q -r packaging/requirements.txt
        cp packaging/requirements.txt "$venv/pinned"
      fi
      export SWARM_PACK_VENV=$venv
      SWARM_ZIG_TARGET=${target%%-*}-linux-gnu.2.17
      export SWARM_ZIG_TARGET
      upper=$(echo "$target" | tr 'a-z-' 'A-Z_')
      export "CARGO_TARGET_${upper}_LINKER=$root/packaging/zig-linker"
    fi
    ;;
  esac
  host=$(rustc -vV | sed -n 's/^host: //p')
  if [ "$target" != "$host" ]; then
    build+=(--target "$target")
    bins=$root/target/$target/release
  else
    bins=$root/target/release
  fi
  echo "package.sh: ${build[*]} (commit $SWARM_BUILD_COMMIT)"
  nice -n 10 "${build[@]}"
fi

mkdir -p "$stage/bin"
for b in "${BINARIES[@]}"; do
  [ -x "$bins/$b" ] || { echo "package.sh: $bins/$b is missing (build the five binaries first)" >&2; exit 1; }
  cp "$bins/$b" "$stage/bin/$b"
  # Debug info stays out of the packages (the release keeps it beside the
  # binary, in <binary>.dwp); the symbol table stays for backtraces.
  if command -v objcopy >/dev/null && [[ $target == *-linux-gnu ]]; then
    objcopy --strip-debug "$stage/bin/$b"
  fi
  check_binary "$stage/bin/$b" || { echo "  (from $bins/$b)" >&2; exit 1; }
done
reported=$("$stage/bin/swarm" --version 2>/dev/null || echo "(not runnable here)")
echo "package.sh: swarm --version: $reported"

# The platform package: the binaries, nothing to run at install.
plat="$stage/npm/swarm-handoff-$suffix"
mkdir -p "$plat/bin"
cp "$stage/bin/"* "$plat/bin/"
chmod 755 "$plat/bin/"*
cat >"$plat/README.md" <<EOF
# swarm-handoff-$suffix

The prebuilt swarm-handoff binaries for $npm_os $npm_cpu${npm_libc:+ ($npm_libc)}, version $version. Install
\`swarm-handoff\`, which picks this package when it fits the machine:
\`npm install -g swarm-handoff\`.
EOF
python3 - "$plat/package.json" "$version" "$suffix" "$npm_os" "$npm_cpu" "$npm_libc" <<'PY'
import json, sys
path, version, suffix, os_, cpu, libc = sys.argv[1:]
pkg = {
    "name": f"swarm-handoff-{suffix}",
    "version": version,
    "description": f"The swarm-handoff binaries for {suffix} (installed through the swarm-handoff package)",
    "license": "MIT",
    "files": ["bin", "README.md"],
    "os": [os_],
    "cpu": [cpu],
    "preferUnplugged": True,
}
if libc != "-":
    pkg["libc"] = [libc]
json.dump(pkg, open(path, "w"), indent=2)
open(path, "a").write("\n")
PY
npm_pack "$plat"

python3 packaging/python/wheel.py --bins "$stage/bin" --version "$version" \
  --platform-tag "$wheel_tag" --readme packaging/python/README.md --out "$out" \
  --compresslevel "${SWARM_WHEEL_COMPRESSLEVEL:-9}" >/dev/null

checksums
echo "package.sh: $version ($reported) in $out:"
(cd "$out" && ls -l -- *.tgz *.whl | awk '{printf "  %-72s %6.1f MB\n", $9, $5 / 1e6}')
