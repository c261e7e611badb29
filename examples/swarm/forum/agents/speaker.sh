#!/bin/sh
# A speaker of the forum (ada, ben, cy). The first speaker opens the forum
# session and the discussion once. Every run reads what waits (the other
# speakers' turns, the moderator's digests), then speaks its next line from
# lines/<role>.txt if `swarm can-send` says it is its turn. Stops when its
# queue is empty; the supervisor runs it again when something arrives.
set -eu

me=$SWARMFORGE_ROLE
topic=design
draft=.swarmforge/speaker-draft.txt

if [ "$me" = ada ] && [ ! -e .swarmforge/forum-opened ]; then
    swarm session start --title "How should the swarm keep its state?"
    swarm discussion open "$topic" --order ada,ben,cy --max-turns 6
    : >.swarmforge/forum-opened
fi

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
    echo "$me: read a $type from $from"
    printf '%s\n' "$out" | sed -n 's/^LATEST_DIGEST: /  the latest digest is /p'
    out=$(done-current)
done

if swarm can-send --discussion "$topic"; then
    said=$(cat .swarmforge/turns-taken 2>/dev/null || echo 0)
    line=$(sed -n "$((said + 1))p" "$SWARMFORGE_PROJECT/lines/$me.txt")
    printf 'type: post\nto: all\npriority: 50\ndiscussion: %s\n\n%s\n' "$topic" "$line" >"$draft"
    swarm-handoff "$draft"
    echo $((said + 1)) >.swarmforge/turns-taken
fi
echo "$me: queue empty"
