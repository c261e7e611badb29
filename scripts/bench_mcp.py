#!/usr/bin/env python3
"""Per-call cost of the MCP tools beside the CLI, in one run (docs/mcp.md).

  target/venv/bin/python scripts/bench_mcp.py [BIN_DIR] [N]

BIN_DIR holds the five binaries (default target/release, else target/debug);
N calls per measurement (default 200). Measures, in a temp project with
fsync on:

  publish    a bare durable publish: write a temp file, fsync, rename, fsync
             the folder (what every queued message costs at least)
  cli_send   swarm-handoff <draft> as a new process per call
  mcp_send   the send tool through one running `swarm mcp` (official Python SDK)
  cli_empty  ready-next with nothing waiting (NO_TASK)
  mcp_empty  next with nothing waiting, wait_seconds 0
  cli_cycle  ready-next + done-current on a delivered note
  mcp_cycle  next + done on a delivered note

and prints the mean per call and the ratios. Absolute times depend on the
machine; the ratios are the result.
"""

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench_project import coder_and_reviewer

ROOT = Path(__file__).resolve().parent.parent


def bin_dir():
    if len(sys.argv) > 1:
        return Path(sys.argv[1]).resolve()
    rel = ROOT / "target/release"
    return rel if (rel / "swarm").exists() else ROOT / "target/debug"


N = int(sys.argv[2]) if len(sys.argv) > 2 else 200
BIN = bin_dir()


def env(role):
    return {
        "PATH": os.environ.get("PATH", ""),
        "GIT_CONFIG_NOSYSTEM": "1",
        "SWARMFORGE_ROLE": role,
    }


def project():
    return coder_and_reviewer(Path(tempfile.mkdtemp(prefix="bench-mcp-")).resolve())


def run(d, role, *args):
    subprocess.run([str(BIN / args[0]), *args[1:]], cwd=d, env=env(role),
                   check=True, stdout=subprocess.DEVNULL)


def publish(d):
    tmp = d / "pub-tmp"
    out = d / "pub"
    tmp.mkdir()
    out.mkdir()
    body = b"x" * 400
    t = time.perf_counter()
    for i in range(N):
        p = tmp / f"{i}.tmp"
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, body)
        os.fsync(fd)
        os.close(fd)
        os.rename(p, out / f"{i}.handoff")
        dfd = os.open(out, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
    return (time.perf_counter() - t) / N


def cli_send(d):
    t = time.perf_counter()
    for i in range(N):
        (d / "draft.txt").write_text(f"type: note\nto: reviewer\npriority: 50\nmessage: m{i}\n")
        run(d, "coder", "swarm-handoff", "draft.txt")
    return (time.perf_counter() - t) / N


def deliver(d):
    run(d, "coder", "handoffd", "--once", str(d))


def cli_empty(d):
    t = time.perf_counter()
    for _ in range(N):
        run(d, "reviewer", "ready-next")
    return (time.perf_counter() - t) / N


def cli_cycle(d):
    t = time.perf_counter()
    for _ in range(N):
        run(d, "reviewer", "ready-next")
        run(d, "reviewer", "done-current")
    return (time.perf_counter() - t) / N


async def mcp_measure(d, role, fn):
    params = StdioServerParameters(command=str(BIN / "swarm"), args=["mcp"],
                                   env=env(role), cwd=str(d))
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            return await fn(s)


async def mcp_send(s):
    t = time.perf_counter()
    for i in range(N):
        res = await s.call_tool("send", {"type": "note", "to": "reviewer", "message": f"m{i}"})
        assert not res.isError, res
    return (time.perf_counter() - t) / N


async def mcp_empty(s):
    t = time.perf_counter()
    for _ in range(N):
        res = await s.call_tool("next", {"wait_seconds": 0})
        assert res.structuredContent["status"] == "no_task", res
    return (time.perf_counter() - t) / N


async def mcp_cycle(s):
    t = time.perf_counter()
    for _ in range(N):
        res = await s.call_tool("next", {"wait_seconds": 0})
        assert res.structuredContent["status"] == "task", res
        res = await s.call_tool("done", {})
        assert not res.isError, res
    return (time.perf_counter() - t) / N


def main():
    d = project()
    r = {}
    r["publish"] = publish(d)
    r["cli_send"] = cli_send(d)
    r["mcp_send"] = asyncio.run(mcp_measure(d, "coder", mcp_send))
    deliver(d)  # 2N notes now wait for reviewer
    r["cli_cycle"] = cli_cycle(d)
    r["mcp_cycle"] = asyncio.run(mcp_measure(d, "reviewer", mcp_cycle))
    r["cli_empty"] = cli_empty(d)
    r["mcp_empty"] = asyncio.run(mcp_measure(d, "reviewer", mcp_empty))
    print(f"binaries: {BIN}; N = {N}; fsync on")
    for k, v in r.items():
        print(f"  {k:10} {v * 1e3:8.3f} ms/call")
    ratios = [
        ("mcp_send / cli_send", r["mcp_send"] / r["cli_send"]),
        ("mcp_send / publish", r["mcp_send"] / r["publish"]),
        ("cli_send / publish", r["cli_send"] / r["publish"]),
        ("mcp_empty / cli_empty", r["mcp_empty"] / r["cli_empty"]),
        ("mcp_cycle / cli_cycle", r["mcp_cycle"] / r["cli_cycle"]),
    ]
    for k, v in ratios:
        print(f"  {k:22} {v:6.2f}")


main()
