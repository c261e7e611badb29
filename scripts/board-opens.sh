#!/usr/bin/env bash
# How many old handoffs one delivering pass of a running handoffd, and one
# card git_handoff send, open in a project that declares cards, with N old
# originals in sent/ (docs/swarmforge-compat.md §4, "What a pass costs").
# Needs strace. Prints one line of counts; the pass is counted on the
# daemon's main thread (the search indexer reads the one new file).
# usage: scripts/board-opens.sh <bin dir> <history N>  -> prints openat counts of sent/ files
# for one delivering pass of a running handoffd, and for one card git_handoff send.
set -euo pipefail
B=$1; N=$2
D=$(mktemp -d); P=$D/p
mkdir -p $P && cd $P && git init -q && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m init
cat > swarm.yaml <<'Y'
wake: {method: none}
cards:
  change: [lead, implement]
roles:
  - {name: lead, agent: codex}
  - {name: implement, agent: claude, worktree: implementation}
Y
$B/swarm init >/dev/null
S=.swarmforge/handoffs/sent; mkdir -p $S
for i in $(seq 1 $N); do
  seq=$(printf %06d $((i+100)))
  printf 'id: 20260101T000000Z_%s_from_lead\nfrom: lead\nto: implement\npriority: 50\ntype: note\nmessage: old\ncreated_at: 2026-01-01T00:00:00.000000Z\n\nRe-read your role and constitution.\n\nold\n' $seq > $S/50_20260101T000000Z_${seq}_from_lead_to_implement.handoff
done
$B/swarm card new change c1 --text "a change" >/dev/null
$B/handoffd . > $D/daemon.out 2>&1 &
DP=$!
until grep -q "delivered .*from_handoffd" .swarmforge/daemon/handoffd.log 2>/dev/null; do sleep 0.05; done
sleep 3
# One note delivered while strace watches the daemon.
strace -f -qq -e trace=openat -p $DP -o $D/pass.trace & ST=$!
sleep 0.5
printf 'type: note\nto: implement\npriority: 50\nmessage: hello\n' > d.txt
SWARMFORGE_ROLE=lead $B/swarm-handoff d.txt >/dev/null
until grep -q "delivered .*_from_lead_to_implement" .swarmforge/daemon/handoffd.log; do sleep 0.05; done
sleep 0.5
kill $ST; wait $ST 2>/dev/null || true
# One card git_handoff send (lead -> implement naming c1).
echo x > f.txt; git add f.txt; git -c user.email=a@b -c user.name=a commit -q -m f
printf 'type: git_handoff\nto: implement\npriority: 50\ntask: c1\n' > g.txt
SWARMFORGE_ROLE=lead strace -f -qq -e trace=openat -o $D/send.trace $B/swarm-handoff g.txt >/dev/null
kill $DP; wait $DP 2>/dev/null || true
echo "N=$N pass_sent_opens(main thread)=$(grep -E "^$DP +openat" $D/pass.trace | grep -c "/sent/.*handoff" || true) pass_sent_opens(all threads)=$(grep -c "/sent/.*handoff" $D/pass.trace || true) send_sent_opens=$(grep -c "/sent/.*handoff" $D/send.trace || true)"
