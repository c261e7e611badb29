#!/usr/bin/env bash
# Counts the places outside the protocol layer that still speak the file
# grammar themselves (docs/design.md, "The mail store"): a mail header named
# by a string through the by-name accessors, the `.handoff` suffix, message
# type names and `all` compared by hand, listings of state folders,
# hard-coded message size caps. A header named by a string in a header call
# is no longer counted: `Message` and `Draft` take a `Header` (the closed
# set of protocol/header.rs), so the compiler refuses one. Each count must stay at or below its ceiling; lower a ceiling
# when a change brings its count down, never raise it. Exit 1 above a ceiling.
#
#   scripts/protocol-literals.sh          counts and ceilings
#   scripts/protocol-literals.sh --list   also every place counted
set -euo pipefail
cd "$(dirname "$0")/.."
list=no
[ "${1:-}" = --list ] && list=yes

# Files outside the protocol layer (crates/swarm-protocol) and its
# foundation (crates/swarm-base: fsx, and sys, which lists only its own log
# parts), tests
# included: a test that builds file names by hand drifts too.
files=$(git ls-files 'src/*.rs' 'crates/*.rs' | grep -vE '^crates/swarm-(protocol|base)/')

# Modules that own a store of their own (not the mail store) and list only
# its folder: the A2A tasks, the user's agent definitions, reservations, the
# search index's segments, a role's rotated activity parts, the daemon's
# seat requests, a confined agent's forum and board requests, the forum's
# session and discussion records. Their listings are that store's one place,
# as protocol/ is the mail store's; the state-listing count leaves them out.
own_stores='^crates/[^/]+/src/(a2a/store|forum/record|forum/requests(/[a-z_]+)?|lineup/seat|reservations/mod|search/index|telemetry/activity)\.rs$'

# Every name of the `Header` set: the by-name accessors (`get_named`,
# `set_named`, `push_named`, and forum/record.rs's `field`, `push_some`)
# and a push onto a message's header list are for a name that is data or
# a key of a store of its own, never one of these.
headers='id|from|to|cc|mentions|recipient|priority|type|role|task|commit|message|subject|title|question|allow_multiple|allow_custom|choices|reaction|in_reply_to|thread|session|discussion|artifact|hop|wake|reason|failed|created_at|enqueued_at|dequeued_at|completed_at|trace_id|task_id|task_base_commit|card_type|delivery_kind|batch_task_ids|non-forwarding|seat|seat_role|definition'
types='note|clarify|answer|react|git_handoff|digest|digest_request|review|handoff|task_done'

# name | ceiling | pattern (grep -E). The ceilings are today's counts.
checks=(
  "header-by-name|0|(_named|field|push_some)\\((&?mut )?(m, )?\"($headers)\"|headers\\.push\\(\\(\"($headers)\""
  "handoff-suffix|0|\"\\.handoff\""
  "type-literal|0|(==|!=) *\"($types)\"|Some\\(\"($types)\"\\)"
  "all-literal|2|(==|!=) *\"all\"|Some\\(\"all\"\\)|split\\(','\\)"
  "state-listing|1|read_dir\\((\\&?[a-z]|std|crate|Worktree|project)"
  "size-cap|0|read_bounded\\([^;]*1024 \\* 1024"
)
fail=0
for c in "${checks[@]}"; do
  IFS='|' read -r name ceiling pattern <<<"$c"
  scope=$files
  if [ "$name" = state-listing ]; then
    scope=$(printf '%s\n' $files | grep -vE "$own_stores")
  fi
  hits=$(grep -nE -- "$pattern" $scope || true)
  n=$(printf '%s' "$hits" | grep -c . || true)
  status=ok
  if [ "$n" -gt "$ceiling" ]; then status=OVER; fail=1; fi
  printf '%-16s %4d (ceiling %d) %s\n' "$name" "$n" "$ceiling" "$status"
  if [ "$list" = yes ] || [ "$status" = OVER ]; then
    printf '%s\n' "$hits" | sed 's/^/    /'
  fi
done
if [ "$fail" = 1 ]; then
  echo "protocol-literals: a count is over its ceiling; use the protocol layer (crates/swarm-protocol/src/protocol/header.rs's Header and accessors, grammar.rs, layout.rs) instead" >&2
  exit 1
fi
