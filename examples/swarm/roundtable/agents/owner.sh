#!/bin/sh
# The owner, scripted: answers every clarify with `swarm answer` (choice 2
# and a remark), which also completes the question in the owner's inbox;
# reads everything else. Stops at NO_TASK.
set -eu

out=$(ready-next)
until printf '%s\n' "$out" | grep -qx NO_TASK; do
    type=$(printf '%s\n' "$out" | sed -n 's/^TYPE: //p' | head -n 1)
    if [ "$type" = clarify ]; then
        id=$(printf '%s\n' "$out" | sed -n 's/^TASK: .*\/[0-9][0-9]_\(.*\)_to_.*\.handoff$/\1/p')
        printf '%s\n' "$out" | sed -n 's/^QUESTION: /owner: asked: /p'
        swarm answer "$id" --choice 2 --text "No servers to run, please."
        out=$(ready-next)
    else
        echo "owner: read a $type"
        out=$(done-current)
    fi
done
echo "owner: queue empty"
