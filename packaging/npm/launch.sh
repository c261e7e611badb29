#!/bin/sh
# npm's entry for one of the five commands (swarm, swarm-handoff,
# ready-next, done-current, handoffd): runs the prebuilt binary of the same name from
# the platform package npm chose through optionalDependencies (os, cpu,
# libc). A shell script, not a Node one: `ready-next` runs once per hop,
# and exec leaves no process between the agent and the binary (exit code,
# signals and stdin are the binary's own). Nothing is installed or
# downloaded here or at install time.
# Each command is a file of its own, this one with its name filled in by
# scripts/package.sh: pnpm's and yarn's shims run it by its real path, so
# $0 cannot tell which command was meant.
name=@NAME@
# pick DIR...: the first platform package among DIRs holding this command
# (bin=its bin folder). Platform packages only: npm installed the one whose
# os, cpu and libc fit.
pick() {
  for dir do
    case ${dir##*/} in
    swarm-handoff-linux-* | swarm-handoff-darwin-*)
      if [ -x "$dir/bin/$name" ]; then
        bin=$dir/bin
        return 0
      fi
      ;;
    esac
  done
  return 1
}
# Where npm puts it, seen from where npm puts this command, first: no
# process started (`ready-next` runs once per hop). From <prefix>/bin (npm
# install -g), node_modules/.bin (a project's, npx's), or this file itself
# (pnpm's and yarn's shims).
here=${0%/*}
if ! pick "$here"/../lib/node_modules/swarm-handoff/node_modules/swarm-handoff-* \
  "$here"/../node_modules/swarm-handoff-* "$here"/../swarm-handoff/node_modules/swarm-handoff-* \
  "$here"/../swarm-handoff-*; then
  # Anywhere else: follow the links to this file, then nested, then beside.
  self=$0
  while [ -L "$self" ]; do
    link=$(readlink "$self") || break
    case $link in
    /*) self=$link ;;
    *) self=${self%/*}/$link ;;
    esac
  done
  pkg=${self%/*}/..
  pick "$pkg"/node_modules/swarm-handoff-* "$pkg"/../swarm-handoff-* || bin=""
fi
if [ -n "$bin" ]; then
  # `npx swarm-handoff demo` (npx runs the command named as the package):
  # the demo, as the README promises; only from npx's own cache and only
  # for `demo`, which as a draft file name is refused when no such file
  # exists.
  if [ "$name" = swarm-handoff ] && [ "${1:-}" = demo ] && [ ! -e demo ]; then
    case $0 in */_npx/*) exec "$bin/swarm" "$@" ;; esac
  fi
  exec "$bin/$name" "$@"
fi
cat >&2 <<MSG
$name: no prebuilt swarm-handoff binary for this machine ($(uname -s) $(uname -m)).
  Prebuilt packages: swarm-handoff-linux-x64-gnu and swarm-handoff-linux-arm64-gnu
  (glibc 2.17 or later), swarm-handoff-darwin-x64, swarm-handoff-darwin-arm64.
  hint: if this machine is one of those, reinstall without --omit=optional or
  --no-optional (npm install -g swarm-handoff); otherwise build from source:
  cargo install --locked --path . in a clone of the repository (Rust 1.89+)
MSG
exit 127
