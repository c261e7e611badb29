#!/bin/sh
# The coder of the pipeline example: a deterministic stand-in for a model.
#
# 1. For each task in tasks.txt whose lib/<name>.sh does not exist yet, write
#    it in a hurry (tabs, trailing blanks), commit it and hand the commit to
#    the cleaner as a git_handoff.
# 2. Work the queue: merge each tidied commit the cleaner sends back, check
#    that every library still parses, finish the item. Stop at NO_TASK.
set -eu

gitc() { git -c user.name=coder -c user.email=coder@swarm.invalid "$@"; }

handoff() { # <task> <commit>
    draft=.swarmforge/coder-draft.txt
    printf 'type: git_handoff\nto: cleaner\npriority: 50\ntask: %s\ncommit: %s\n' "$1" "$2" >"$draft"
    swarm-handoff "$draft"
}

mkdir -p lib
while IFS='|' read -r name description body; do
    case "$name" in '' | '#'*) continue ;; esac
    file="lib/$name.sh"
    [ -e "$file" ] && continue
    # Sloppy on purpose, so the cleaner has real work.
    printf '# %s: %s  \n%s() {\t\n\t%s   \n}\n' "$name" "$description" "$name" "$body" >"$file"
    gitc add "$file"
    gitc commit -q -m "coder: add $name"
    handoff "$name" "$(git rev-parse --short=10 HEAD)"
done <"$SWARMFORGE_PROJECT/tasks.txt"

out=$(ready-next)
until printf '%s\n' "$out" | grep -qx NO_TASK; do
    commit=$(printf '%s\n' "$out" | sed -n 's/^merge_and_process [A-Za-z0-9-]* \([0-9a-f]\{10\}\)$/\1/p' | head -n 1)
    if [ -n "$commit" ]; then
        gitc merge -q --no-edit "$commit"
        for f in lib/*.sh; do sh -n "$f"; done
        echo "coder: merged $commit"
    fi
    out=$(done-current)
done
echo "coder: queue empty"
