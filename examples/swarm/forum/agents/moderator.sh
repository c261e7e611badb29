#!/bin/sh
# The moderator of the forum: for each digest_request, writes a digest to
# everyone from the contributions `ready-next` lists (CONTRIBUTIONS:), one
# line per speaker post. It completes the request before publishing the
# digest, so the daemon can ask for the next digest as soon as it delivers
# this one; `in_reply_to` names the request. Every other item (the
# speakers' posts reach it too) is read and completed. Stops at NO_TASK.
set -eu

draft=.swarmforge/digest-draft.txt

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
    type=$(printf '%s\n' "$out" | sed -n 's/^TYPE: //p' | head -n 1)
    if [ "$type" = digest_request ]; then
        request=$(printf '%s\n' "$out" | sed -n 's/^TASK: .*\/[0-9][0-9]_\(.*\)_to_.*\.handoff$/\1/p')
        done_before=$(ls .swarmforge/handoffs/sent .swarmforge/handoffs/outbox 2>/dev/null | grep -c '_from_moderator_to_all' || true)
        {
            printf 'type: digest\nto: all\npriority: 40\nsubject: digest %s\nin_reply_to: %s\n\n' \
                "$((done_before + 1))" "$request"
            printf 'Where the discussion stands:\n'
            printf '%s\n' "$out" |
                sed -n 's/^[0-9][0-9]*\. \[[^]]*\] \[\([A-Za-z0-9-]*\) -> [^]]*\] post \(.*\)$/- \1: \2/p'
        } >"$draft"
        out=$(done-current)
        swarm-handoff "$draft"
        echo "moderator: digest $((done_before + 1)) sent"
    else
        out=$(done-current)
    fi
done
echo "moderator: queue empty"
