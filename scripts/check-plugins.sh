#!/usr/bin/env bash
# Checks the plugin files (plugins/, .claude-plugin/marketplace.json,
# .agents/plugins/marketplace.json) with the agent CLIs themselves, in a
# throwaway HOME: Claude Code's `claude plugin validate --strict` (the
# marketplace and the plugin), Gemini CLI's `gemini extensions validate`,
# and Codex's own install (`codex plugin marketplace add`, `codex plugin
# add`), after which `codex mcp list` must show the swarm's server. Each
# manifest's version must be Cargo.toml's. The CLIs: $SWARM_AGENT_CLIS (as
# .ci/run sets it), else target/agent-clis.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "check-plugins: $*" >&2; exit 1; }
clis=${SWARM_AGENT_CLIS:-$PWD/target/agent-clis}/node_modules/.bin
version=$(cargo metadata --no-deps --format-version 1 --locked |
  python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="swarm-handoff"))')
for m in plugins/claude-code/.claude-plugin/plugin.json plugins/gemini-cli/gemini-extension.json \
  plugins/codex/.codex-plugin/plugin.json; do
  v=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$m")
  [ "$v" = "$version" ] || fail "$m says version $v, Cargo.toml $version: set it to $version"
done
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
run() { env -i HOME="$home" PATH="$clis:/usr/local/bin:/usr/bin:/bin" "$@" </dev/null; }
run claude plugin validate --strict . >"$home/out" 2>&1 || { cat "$home/out" >&2; fail "claude: the marketplace"; }
run claude plugin validate --strict plugins/claude-code >"$home/out" 2>&1 || { cat "$home/out" >&2; fail "claude: the plugin"; }
run gemini extensions validate plugins/gemini-cli >"$home/out" 2>&1 || { cat "$home/out" >&2; fail "gemini: the extension"; }
# Codex refuses to make its helper links under /tmp; the warning is harmless.
run codex plugin marketplace add "$PWD" >"$home/out" 2>&1 || { cat "$home/out" >&2; fail "codex: the marketplace"; }
run codex plugin add swarm-handoff@swarm-handoff >"$home/out" 2>&1 || { cat "$home/out" >&2; fail "codex: the plugin"; }
run codex mcp list 2>/dev/null | grep -q -E '^swarm +swarm +mcp ' || fail "codex: the plugin's MCP server (swarm mcp) is not listed"
echo "check-plugins: Claude Code, Gemini CLI and Codex take the plugin files (version $version)"
