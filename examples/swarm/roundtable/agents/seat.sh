#!/bin/sh
# A seat of the roundtable (architect, tester, writer): answers the
# coordinator's question with one delivery to the coordinator, shared with
# the other seats (cc). The architect needs the owner's decision first: it
# asks a `clarify` and leaves the question in process (parked) until the
# answer arrives, which `ready-next` then prints as an ANSWER block.
# Deliveries of the other seats and the final `close` are read and
# completed. Stops at NO_TASK.
set -eu

me=$SWARMFORGE_ROLE
others=$(printf 'architect\ntester\nwriter\n' | grep -vx "$me" | paste -sd, -)
draft=.swarmforge/seat-draft.txt

# With SWARM_MODEL_URL set (an OpenAI-compatible server, e.g. Ollama's
# http://127.0.0.1:11434/v1), a model answers instead of the canned text:
# the built-in runner takes over (SWARM_MODEL: the model, default llama3.2;
# SWARM_MODEL_KEY_ENV: the name of the variable holding the key, if any).
if [ -n "${SWARM_MODEL_URL:-}" ]; then
    exec swarm run-api --role "$SWARMFORGE_ROLE" --base-url "$SWARM_MODEL_URL" \
        --model "${SWARM_MODEL:-llama3.2}" ${SWARM_MODEL_KEY_ENV:+--api-key-env "$SWARM_MODEL_KEY_ENV"}
fi

out=$(ready-next)
until printf '%s\n' "$out" | grep -qx NO_TASK; do
    from=$(printf '%s\n' "$out" | sed -n 's/^FROM: //p' | head -n 1)
    type=$(printf '%s\n' "$out" | sed -n 's/^TYPE: //p' | head -n 1)
    if [ "$type" = post ] && [ "$from" = coordinator ]; then
        answer=$(printf '%s\n' "$out" | sed -n 's/^ANSWER_CHOICE: [0-9]*\. //p' | head -n 1)
        if [ "$me" = architect ] && [ -z "$answer" ]; then
            if [ ! -e .swarmforge/asked-owner ]; then
                printf 'type: clarify\nto: owner\npriority: 10\nquestion: Which storage may the queue use?\n\nA database server\nPlain files\nAn embedded database\n' >"$draft"
                swarm-handoff "$draft"
                : >.swarmforge/asked-owner
            fi
            echo "$me: waiting for the owner"
            exit 0
        fi
        case $me in
        architect) say="Store each message as a file ($answer, as the owner chose) and move it by atomic renames." ;;
        tester) say="Kill the daemon at random moments and check every message arrives exactly once." ;;
        *) say="One page: send with swarm-handoff, take with ready-next, finish with done-current." ;;
        esac
        printf 'type: post\nto: coordinator\ncc: %s\npriority: 50\nsubject: %s recommends\n\n%s\n' \
            "$others" "$me" "$say" >"$draft"
        swarm-handoff "$draft"
    else
        echo "$me: read a $type from $from"
    fi
    out=$(done-current)
done
echo "$me: queue empty"
