"""Drives `swarm mcp` with the official MCP Python SDK (a client nobody
here wrote). Usage: driver.py <server command> [args...]

Reads one JSON request per line on stdin, answers one JSON line each:
  {"op": "list"}                       -> {"op": "list", "tools": [...], "bytes": N}
  {"op": "call", "tool": T, "args": A} -> {"op": "call", "is_error": B, "text": S, "structured": V}
First line out: {"op": "initialized", ...}. A failed request answers
{"op": ..., "exception": "..."}; stdin closed ends the session.
"""

import asyncio
import json
import os
import sys
from datetime import timedelta

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def out(v):
    sys.stdout.write(json.dumps(v) + "\n")
    sys.stdout.flush()


async def main():
    params = StdioServerParameters(
        command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ), cwd=os.getcwd()
    )
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w, read_timeout_seconds=timedelta(seconds=120)) as s:
            init = await s.initialize()
            out({"op": "initialized", "server": init.serverInfo.name,
                 "protocol": init.protocolVersion})
            loop = asyncio.get_running_loop()
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                if not line:
                    break
                req = json.loads(line)
                op = req.get("op")
                try:
                    if op == "list":
                        res = await s.list_tools()
                        dumped = res.model_dump(mode="json", by_alias=True, exclude_none=True)
                        size = len(json.dumps(dumped, separators=(",", ":")))
                        out({"op": op, "tools": dumped["tools"], "bytes": size})
                    elif op == "call":
                        res = await s.call_tool(req["tool"], req.get("args") or {})
                        text = "".join(c.text for c in res.content if c.type == "text")
                        out({"op": op, "is_error": bool(res.isError), "text": text,
                             "structured": res.structuredContent})
                    else:
                        out({"op": op, "exception": "unknown op"})
                except Exception as e:  # reported, so the test can assert on it
                    out({"op": op, "exception": repr(e)})


asyncio.run(main())
