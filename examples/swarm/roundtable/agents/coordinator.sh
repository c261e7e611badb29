#!/bin/sh
# The coordinator of the roundtable: puts one question to each seat (once),
# reads the deliveries as they come, and when every seat has delivered,
# closes the round for everyone with reason `consensus`. Stops at NO_TASK.
set -eu

state=.swarmforge/roundtable
mkdir -p "$state"
draft="$state/draft.txt"

ask() { # <seat> <question>
    printf 'type: post\nto: %s\npriority: 20\nsubject: %s\n\nYour seat at the roundtable: %s Deliver one recommendation.\n' \
        "$1" "$2" "$2" >"$draft"
    swarm-handoff "$draft"
}

if [ ! -e "$state/dispatched" ]; then
    ask architect "How should the queue store its messages?"
    ask tester "How do we prove no message is lost?"
    ask writer "How do we explain the queue to new users?"
    : >"$state/dispatched"
fi

out=$(ready-next)
until printf '%s\n' "$out" | grep -qx NO_TASK; do
    from=$(printf '%s\n' "$out" | sed -n 's/^FROM: //p' | head -n 1)
    type=$(printf '%s\n' "$out" | sed -n 's/^TYPE: //p' | head -n 1)
    if [ "$type" = post ]; then
        echo "coordinator: delivery from $from"
        echo "$from" >>"$state/delivered"
    fi
    out=$(done-current)
done

seats=$(sort -u "$state/delivered" 2>/dev/null | wc -l | tr -d " ")
if [ "$seats" -eq 3 ] && [ ! -e "$state/closed" ]; then
    printf 'type: close\nto: all\npriority: 20\nreason: consensus\n\nConsensus: files on disk, one atomic rename per step, a crash test to prove it, and a one-page guide.\n' >"$draft"
    swarm-handoff "$draft"
    : >"$state/closed"
fi
echo "coordinator: queue empty ($seats of 3 seats delivered)"
