#!/bin/sh
# The cleaner of the pipeline example (batch mode): takes every waiting
# git_handoff of one priority at once, merges their commits into its own
# worktree, tidies the libraries (tabs become two spaces, no trailing
# blanks), commits and hands one git_handoff back to the coder. Stops at
# NO_TASK.
set -eu

gitc() { git -c user.name=cleaner -c user.email=cleaner@swarm.invalid "$@"; }
tab=$(printf '\t')

out=$(ready-next)
until printf '%s\n' "$out" | grep -qx NO_TASK; do
    tasks=$(printf '%s\n' "$out" | sed -n 's/^TASK_NAME: //p' | tr '\n' ' ')
    tasks=${tasks% }
    for commit in $(printf '%s\n' "$out" | sed -n 's/^merge_and_process [A-Za-z0-9-]* \([0-9a-f]\{10\}\)$/\1/p'); do
        gitc merge -q --no-edit "$commit"
    done
    for f in lib/*.sh; do
        [ -e "$f" ] || continue
        sed -e "s/$tab/  /g" -e 's/[[:space:]]*$//' "$f" >"$f.tidy"
        mv "$f.tidy" "$f"
    done
    if [ -n "$(git status --porcelain -- lib)" ]; then
        gitc add lib
        gitc commit -q -m "cleaner: tidy $tasks"
    fi
    draft=.swarmforge/cleaner-draft.txt
    printf 'type: git_handoff\nto: coder\npriority: 50\ntask: %s\ncommit: %s\n' \
        "tidy-$(printf '%s' "$tasks" | tr ' ' '-' | cut -c1-70)" \
        "$(git rev-parse --short=10 HEAD)" >"$draft"
    swarm-handoff "$draft"
    out=$(done-current)
done
echo "cleaner: queue empty"
