#!/usr/bin/env python3
"""One agent-to-agent hop through our MCP server and through three peers'
own interfaces, interleaved in one run, fresh and with messages stored
(docs/benchmarks.md, "Against the agent-mail peers"). Run by
scripts/bench-peers.sh, which installs the pinned peers:

  python scripts/bench_peers.py --bin target/release --peers target/peers \
      [--stored 10000] [--rounds 5] [--chunk 2.0] [--traced 20]

The hop, per system, each through its own documented interface:

  ours   `swarm mcp` per role (stdio): coder `send`, reviewer `next`
         (long poll; handoffd delivers), reviewer `done`.
  mam    mcp_agent_mail's HTTP MCP server: `send_message` (ack_required),
         the recipient's `fetch_inbox` (limit 1), then `acknowledge_message`
         (an extended tool: through `call_extended_tool`).
  amb    agent-mailbox's `mailbox-mcp` per employee (stdio, to its local
         workbench): `project_message`, then the recipient's
         `project_messages` (limit 1). Its mailbox MCP has no acknowledge
         ("viewing is not acknowledgment"; tasks have accept/submit, mail
         has nothing), so its hop is send + fetch.
  cao    cli-agent-orchestrator: `send_message` through `cao-mcp-server`
         (stdio) from a worker terminal to the terminal that created it;
         cao-server pastes it into the receiver's tmux pane when that is
         idle and marks it delivered, which the hop waits for through the
         documented `GET /terminals/{id}/inbox/messages`. Its terminals run a
         stand-in for CAO's own `mock_cli` test provider (prompt, echo),
         not a real agent; CAO has no fetch or acknowledge of its own: the
         paste is the fetch, `delivered` the acknowledgement.

Timing: every system runs its servers at once; each round gives every
system (in a rotated order) `--chunk` seconds of hops, and a system's figure
is its total time over its hops. Fresh: empty stores. Stored: each store
first holds `--stored` messages between the same two agents, finished
(taken and done, acknowledged or delivered): ours and agent-mailbox by their
own send path, mcp_agent_mail and CAO by rows copied from one real send
(mcp_agent_mail: database rows and archive files, one git commit), because
their own send path would take hours for 10,000 (see docs/benchmarks.md).

fsyncs: a separate fresh set of servers, each process under
`strace -f -e trace=fsync,fdatasync,...` (seccomp filter, so other calls run
untraced), runs `--traced` hops; the fsyncs inside each hop and inside each
send call are counted from strace's timestamps. A send that returned before
any fsync of the peer's store did not survive a power loss: "survives" says
whether every traced send saw one before it returned.
"""

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from bench_project import coder_and_reviewer

SYNC_CALLS = "fsync,fdatasync,sync_file_range,syncfs,msync,sync"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def traced(cmd, trace):
    """`cmd` under strace writing to `trace`, or `cmd` itself."""
    if trace is None:
        return cmd
    return ["strace", "-f", "--seccomp-bpf", "-qq", "-ttt", "-y", "-e",
            f"trace={SYNC_CALLS}", "-o", str(trace), "--", *cmd]


def wait_for(pred, what, seconds=90):
    deadline = time.monotonic() + seconds
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def port_open(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def text(result):
    return result.content[0].text if result.content else ""


class System:
    """Servers of one system, a hop through them, and its store seeded."""

    name = ""
    durability = ""

    def __init__(self, args, root, trace_dir):
        self.args = args
        self.root = root
        self.trace_dir = trace_dir
        self.procs = []
        self.stack = contextlib.AsyncExitStack()
        self.i = 0

    def trace(self, what):
        return None if self.trace_dir is None else self.trace_dir / f"{self.name}-{what}.strace"

    def spawn(self, cmd, what, **kw):
        p = subprocess.Popen(traced(cmd, self.trace(what)), stdout=subprocess.DEVNULL,
                             stderr=kw.pop("stderr", subprocess.DEVNULL),
                             start_new_session=True, **kw)
        self.procs.append(p)
        return p

    async def stdio(self, cmd, what, env, cwd=None):
        cmd = traced(cmd, self.trace(what))
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env, cwd=cwd)
        r, w = await self.stack.enter_async_context(stdio_client(params, errlog=open(os.devnull, "w")))
        s = await self.stack.enter_async_context(ClientSession(r, w))
        await s.initialize()
        return s

    async def close(self):
        # The servers go even when closing the clients fails (a run that
        # stopped half-way must leave nothing running).
        try:
            with contextlib.suppress(Exception):
                await self.stack.aclose()
        finally:
            for p in self.procs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
            for p in self.procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=10)


class Ours(System):
    name = "ours"
    durability = "files: temp + fsync + rename + fsync(dir) per step (docs/protocol.md §8.1)"

    async def start(self):
        d = coder_and_reviewer(self.root)
        b = self.args.bin
        self.spawn([str(b / "handoffd"), str(d)], "handoffd", cwd=d)
        wait_for(lambda: any(" started" in p.read_text(errors="replace")
                             for p in d.rglob("handoffd.log")), "handoffd")
        env = lambda role: {"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1",
                            "SWARMFORGE_ROLE": role}
        self.coder = await self.stdio([str(b / "swarm"), "mcp"], "coder", env("coder"), str(d))
        self.reviewer = await self.stdio([str(b / "swarm"), "mcp"], "reviewer", env("reviewer"), str(d))

    async def send(self):
        self.i += 1
        r = await self.coder.call_tool("send", {"type": "note", "to": "reviewer",
                                                "message": f"hop {self.i}"})
        assert not r.isError, text(r)

    async def take(self):
        r = await self.reviewer.call_tool("next", {"wait_seconds": 25})
        assert r.structuredContent["status"] == "task", text(r)
        r = await self.reviewer.call_tool("done", {})
        assert not r.isError, text(r)

    async def seed(self, n):
        # Through the same path: the sends first, then every one taken and done.
        for _ in range(n):
            await self.send()
        for _ in range(n):
            await self.take()


class AgentMail(System):
    name = "mcp_agent_mail"
    durability = "SQLite WAL with synchronous=NORMAL, and a git commit per message (git's default: no fsync)"

    async def start(self):
        self.port = free_port()
        self.project = str(self.root / "proj")
        os.makedirs(self.project)
        self.db = self.root / "db.sqlite3"
        self.archive = self.root / "archive"
        self.env = {**os.environ, "DATABASE_URL": f"sqlite+aiosqlite:///{self.db}",
                    "STORAGE_ROOT": str(self.archive), "HTTP_PORT": str(self.port),
                    "LLM_ENABLED": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                    "HOME": str(self.root)}
        await self.serve()
        s = self.a
        for n in ("BlueLake", "GreenCastle"):
            r = await s.call_tool("register_agent", {"project_key": self.project, "program": "bench",
                                                     "model": "none", "name": n})
            assert not r.isError, text(r)

    async def serve(self):
        py = self.args.peers / "mam/bin/python"
        self.server = self.spawn([str(py), "-m", "mcp_agent_mail.cli", "serve-http"], "server",
                                 cwd=self.root, env=self.env)
        wait_for(lambda: port_open(self.port), "mcp_agent_mail's server", 180)
        url = f"http://127.0.0.1:{self.port}/mcp/"
        self.a = await self.session(url)
        self.b = await self.session(url)

    async def session(self, url):
        r, w, _ = await self.stack.enter_async_context(streamablehttp_client(url))
        s = await self.stack.enter_async_context(ClientSession(r, w))
        await s.initialize()
        return s

    async def send(self):
        self.i += 1
        r = await self.a.call_tool("send_message", {
            "project_key": self.project, "sender_name": "BlueLake", "to": ["GreenCastle"],
            "subject": f"hop {self.i}", "body_md": "hello", "ack_required": True})
        assert not r.isError, text(r)

    async def take(self):
        r = await self.b.call_tool("fetch_inbox", {"project_key": self.project,
                                                   "agent_name": "GreenCastle", "limit": 1})
        assert not r.isError, text(r)
        mid = r.structuredContent["result"][0]["id"]
        r = await self.b.call_tool("call_extended_tool", {
            "tool_name": "acknowledge_message",
            "arguments": {"project_key": self.project, "agent_name": "GreenCastle",
                          "message_id": mid}})
        assert not r.isError, text(r)

    async def seed(self, n):
        # One real hop, then its rows and archive files copied n - 1 times
        # and committed once: what n hops leave, without n git commits. The
        # server stays up (it holds no message in memory; SQLite in WAL mode
        # takes a second writer, and the archive is read from disk).
        await self.send()
        await self.take()
        await asyncio.to_thread(self.copy_last, n)
        self.i += n

    def copy_last(self, n):
        db = sqlite3.connect(self.db)
        cols = [c[1] for c in db.execute("PRAGMA table_info(messages)")]
        rcols = [c[1] for c in db.execute("PRAGMA table_info(message_recipients)")]
        mid = db.execute("SELECT max(id) FROM messages").fetchone()[0]
        m = dict(zip(cols, db.execute("SELECT * FROM messages WHERE id=?", (mid,)).fetchone()))
        r = dict(zip(rcols, db.execute("SELECT * FROM message_recipients WHERE message_id=?",
                                       (mid,)).fetchone()))
        files = [p for p in self.archive.rglob(f"*__{mid}.md")]
        with db:
            for k in range(1, n):
                new = dict(m, id=mid + k, subject=f"seed {k}")
                db.execute(f"INSERT INTO messages ({','.join(new)}) VALUES ({','.join('?' * len(new))})",
                           list(new.values()))
                nr = dict(r, message_id=mid + k)
                db.execute(f"INSERT INTO message_recipients ({','.join(nr)}) VALUES ({','.join('?' * len(nr))})",
                           list(nr.values()))
        db.close()
        for f in files:
            body = f.read_text()
            stem = f.name[: -len(f"__{mid}.md")]
            for k in range(1, n):
                (f.parent / f"{stem}-{k}__{mid + k}.md").write_text(body)
        git = ["git", "-C", str(self.archive), "-c", "user.name=seed", "-c", "user.email=s@e"]
        subprocess.run(git + ["add", "-A"], check=True)
        subprocess.run(git + ["commit", "-qm", f"seed {n - 1} messages"], check=True)


class AgentMailbox(System):
    name = "agent-mailbox"
    durability = "SQLite WAL, default synchronous (FULL), in its workbench"

    SETUP = r"""
import json, os, sys
from pathlib import Path
from agent_mailbox.workbench_store import WorkbenchStore
from agent_mailbox import workbench_mail_sessions as ms
home, proj, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
s = WorkbenchStore(home)
p = s.create_project("bench", proj)["id"]
ids = {}
for name in ("sender", "receiver"):
    e = s.create_employee(name, "claude", connection_type="cli")["id"]
    s.add_project_member(p, e)
    t = ms.create_session(s, e, p, "bench")
    f = out / f"{name}.json"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, json.dumps({"token": t["token"], "home": str(home), "employee_id": e,
                             "project_id": p, "session_id": t["id"]}).encode())
    os.close(fd)
    ids[name] = e
print(json.dumps({"project": p, **ids}))
"""
    SEED = r"""
import json, sys
from pathlib import Path
from agent_mailbox.workbench_store import WorkbenchStore
from agent_mailbox import workbench_mail_sessions as ms
home, session, b, n = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
s = WorkbenchStore(home)
token = json.loads(session.read_text())["token"]
for k in range(n):
    ms.invoke(s, token, "message", {"title": f"seed {k}", "body": "hello", "recipient_id": b})
"""

    async def start(self):
        self.home = self.root / "home"
        proj = self.root / "proj"
        proj.mkdir()
        # Its flood folding (a sender's 11th message in 5 minutes and on
        # becomes a title in a digest) is turned off through its documented
        # variables, so every hop is a message of its own.
        self.env = {**os.environ, "HOME": str(self.root), "AGENT_MAILBOX_FOLD_LIMIT": "1000000000",
                    "AGENT_MAILBOX_BACKLOG_FOLD": "0"}
        self.env.pop("AGENT_MAILBOX_BROWSER", None)
        py = str(self.args.peers / "amb/bin/python")
        out = subprocess.run([py, "-c", self.SETUP, str(self.home), str(proj), str(self.root)],
                             env=self.env, check=True, capture_output=True, text=True).stdout
        self.ids = json.loads(out.strip().splitlines()[-1])
        amb = str(self.args.peers / "amb/bin/agent-mailbox")
        self.spawn([amb, "--home", str(self.home)], "workbench", env=self.env)
        wait_for(lambda: (self.home / "workbench/instance.json").exists(), "agent-mailbox's workbench")
        self.a = await self.stdio([amb, "mailbox-mcp", "--session-file", str(self.root / "sender.json")],
                                  "sender", self.env)
        self.b = await self.stdio([amb, "mailbox-mcp", "--session-file", str(self.root / "receiver.json")],
                                  "receiver", self.env)

    async def send(self):
        self.i += 1
        r = await self.a.call_tool("project_message", {"title": f"hop {self.i}", "body": "hello",
                                                       "recipient_id": self.ids["receiver"]})
        assert not r.isError, text(r)

    async def take(self):
        r = await self.b.call_tool("project_messages", {"folder": "inbox", "limit": 1})
        assert not r.isError, text(r)
        got = json.loads(text(r))["messages"][0]["title"]
        assert got == f"hop {self.i}", got

    async def seed(self, n):
        py = str(self.args.peers / "amb/bin/python")
        # The workbench's own handler of the mailbox MCP's `message` call, in
        # process (no HTTP): the same transaction per message.
        await asyncio.to_thread(
            subprocess.run, [py, "-c", self.SEED, str(self.home), str(self.root / "sender.json"),
                             self.ids["receiver"], str(n)], env=self.env, check=True)


class Cao(System):
    name = "cli-agent-orchestrator"
    durability = "SQLite rollback journal, default synchronous (FULL)"

    MOCK = """#!/usr/bin/env python3
# A stand-in for CAO's mock_cli test provider: prompt, read a line, echo it.
import sys
sys.stdout.reconfigure(encoding="utf-8")
sys.stdin.reconfigure(encoding="utf-8", errors="replace")
print("\\u276f ", end="", flush=True)
for line in sys.stdin:
    print("> MOCK: " + line.strip()[:60], flush=True)
    print("\\u276f ", end="", flush=True)
"""

    async def start(self):
        r = self.root
        (r / "bin").mkdir()
        (r / "bin/mock_cli").write_text(self.MOCK)
        (r / "bin/mock_cli").chmod(0o755)
        (r / "tmux").mkdir()
        (r / "work").mkdir()
        path = f"{r}/bin:/usr/local/bin:/usr/bin:/bin"
        (r / "tmux.conf").write_text(
            f"set -g default-command \"exec env PATH={path} PS1='$ ' bash --noprofile --norc\"\n")
        self.port = free_port()
        self.env = {**os.environ, "CAO_HOME_DIR": str(r / "home"), "CAO_API_PORT": str(self.port),
                    "TMUX_TMPDIR": str(r / "tmux"), "PATH": f"{r}/bin:{os.environ['PATH']}",
                    "HOME": str(r)}
        # A tmux server of its own (its socket under the run's folder), so
        # no other tmux session is touched.
        subprocess.run(["tmux", "-f", str(r / "tmux.conf"), "new-session", "-d", "-s", "keep"],
                       env=self.env, check=True)
        self.spawn([str(self.args.peers / "cao/bin/cao-server")], "server", env=self.env)
        wait_for(lambda: port_open(self.port), "cao-server", 120)
        base = f"http://127.0.0.1:{self.port}"
        a = self.post(f"/sessions?agent_profile=developer&provider=mock_cli&session_name=bench"
                      f"&working_directory={r}/work")
        b = self.post(f"/sessions/{a['session_name']}/terminals?agent_profile=developer&provider=mock_cli"
                      f"&caller_id={a['id']}&working_directory={r}/work")
        self.receiver, self.base = a["id"], base
        env = {**self.env, "CAO_TERMINAL_ID": b["id"]}
        self.worker = await self.stdio([str(self.args.peers / "cao/bin/cao-mcp-server")], "mcp", env)

    def post(self, path):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method="POST")
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.load(resp)

    def pending(self):
        url = f"{self.base}/terminals/{self.receiver}/inbox/messages?limit=1&status=pending"
        with urllib.request.urlopen(url, timeout=60) as resp:
            return json.load(resp)

    async def send(self):
        self.i += 1
        r = await self.worker.call_tool("send_message", {"message": f"hop {self.i}"})
        assert not r.isError and json.loads(text(r)).get("success"), text(r)

    async def take(self):
        # Delivered = pasted into the receiver's pane (usually before send returns).
        while self.pending():
            await asyncio.sleep(0.002)

    async def close(self):
        try:
            await super().close()
        finally:
            subprocess.run(["tmux", "kill-server"], env=self.env, stderr=subprocess.DEVNULL)

    async def seed(self, n):
        db = next((self.root / "home").rglob("cli-agent-orchestrator.db"))
        c = sqlite3.connect(db)
        with c:
            c.executemany("INSERT INTO inbox (sender_id, receiver_id, message, status, created_at) "
                          "VALUES ('seed', ?, ?, 'delivered', datetime('now'))",
                          [(self.receiver, f"seed {k}") for k in range(n)])
        c.close()


SYSTEMS = [Ours, AgentMail, AgentMailbox, Cao]


async def hop(s):
    t0 = time.perf_counter()
    await s.send()
    t1 = time.perf_counter()
    await s.take()
    return t1 - t0, time.perf_counter() - t0


async def close_all(systems):
    # In reverse order: anyio's cancel scopes must close in the reverse of
    # the order they opened.
    for s in reversed(systems):
        try:
            await s.close()
        except BaseException as e:  # noqa: BLE001 - the next ones must still close
            print(f"  closing {s.name}: {e!r}", file=sys.stderr)


async def start_all(args, base, label, trace_dir=None):
    systems = []
    for cls in SYSTEMS:
        if cls.name not in args.only:
            continue
        root = base / f"{label}-{cls.name}"
        root.mkdir()
        s = cls(args, root, trace_dir)
        systems.append(s)
        t = time.perf_counter()
        try:
            await s.start()
        except BaseException:
            await close_all(systems)
            raise
        print(f"  {label}: {cls.name} up in {time.perf_counter() - t:.1f} s", flush=True)
    return systems


async def timed(args, systems, label):
    for s in systems:  # warm-up
        for _ in range(2):
            await hop(s)
    total = {s.name: [0.0, 0.0, 0] for s in systems}
    for r in range(args.rounds):
        order = systems[r % len(systems):] + systems[: r % len(systems)]
        for s in order:
            end = time.perf_counter() + args.chunk
            while True:
                send, whole = await hop(s)
                t = total[s.name]
                t[0] += send
                t[1] += whole
                t[2] += 1
                if time.perf_counter() >= end:
                    break
    return {k: (v[0] / v[2], v[1] / v[2], v[2]) for k, v in total.items()}


SYNC_LINE = re.compile(r"^\d+\s+(\d+\.\d+)\s+(\w+)\((\d+)(?:<([^>]*)>)?")


def fsync_counts(args, systems, trace_dir, windows):
    """Per system: fsyncs a hop, fsyncs inside a send, sends with none,
    and the files fsynced (a hop's share)."""
    out = {}
    for s in systems:
        calls = []
        for f in trace_dir.glob(f"{s.name}-*.strace"):
            for line in f.read_text(errors="replace").splitlines():
                m = SYNC_LINE.match(line)
                if m:
                    calls.append((float(m.group(1)), m.group(2), m.group(4) or "?"))
        hops = windows[s.name]
        in_hop = [[c for c in calls if a <= c[0] <= z] for a, _, z in hops]
        in_send = [[c for c in calls if a <= c[0] <= m] for a, m, _ in hops]
        files = {}
        for cs in in_hop:
            for _, call, path in cs:
                # A message's own file (named by its id or a temp name) as
                # <file>, so the files of different hops add up.
                head, _, tail = path.replace(str(s.root), "").rpartition("/")
                if re.search(r"\d{4,}|[0-9a-f]{16,}|\.(tmp|handoff|md)$", tail):
                    tail = "<file>"
                key = f"{head}/{tail}"
                files[f"{call} {key}"] = files.get(f"{call} {key}", 0) + 1
        n = len(hops)
        out[s.name] = {
            "per_hop": sum(map(len, in_hop)) / n,
            "per_send": sum(map(len, in_send)) / n,
            "sends_without": sum(1 for cs in in_send if not cs),
            "hops": n,
            "files": {k: v / n for k, v in sorted(files.items(), key=lambda kv: -kv[1])},
        }
    return out


async def traced_pass(args, base):
    trace_dir = base / "strace"
    trace_dir.mkdir()
    systems = await start_all(args, base, "traced", trace_dir)
    windows = {}
    try:
        for s in systems:
            for _ in range(2):
                await hop(s)
            ws = []
            for _ in range(args.traced):
                a = time.time()
                await s.send()
                m = time.time()
                await s.take()
                ws.append((a, m, time.time()))
            windows[s.name] = ws
    finally:
        await close_all(systems)
    time.sleep(1)  # strace flushes its files as the traced processes exit
    return fsync_counts(args, systems, trace_dir, windows)


async def scenario(args, base, label, stored):
    systems = await start_all(args, base, label)
    try:
        if stored:
            async def seed(s):
                t = time.perf_counter()
                await s.seed(stored)
                print(f"  {label}: {s.name} holds {stored} more messages "
                      f"({time.perf_counter() - t:.0f} s)", flush=True)
            # At once (nothing is timed yet): the seeding takes minutes.
            await asyncio.gather(*(seed(s) for s in systems))
        return await timed(args, systems, label)
    finally:
        await close_all(systems)


def versions(args):
    out = {}
    for short, pkgs in (("mam", ["mcp_agent_mail"]), ("amb", ["agent-mailbox"]),
                        ("cao", ["cli-agent-orchestrator"])):
        py = args.peers / short / "bin/python"
        if py.exists():
            for p in pkgs:
                v = subprocess.run([str(py), "-c", f"import importlib.metadata as m; print(m.version('{p}'))"],
                                   capture_output=True, text=True).stdout.strip()
                out[p] = v
    return out


def report(args, fresh, stored, fs):
    dur = {c.name: c.durability for c in SYSTEMS}
    print()
    print(f"binaries: {args.bin}; rounds {args.rounds} x {args.chunk} s per system; "
          f"stored = {args.stored}; strace over {args.traced} hops")
    print("peers:", ", ".join(f"{k} {v}" for k, v in versions(args).items()))
    print()
    print("| system | hop, fresh (ms) | ratio to ours | hop, "
          f"{args.stored} stored (ms) | ratio to ours | send alone fresh / stored (ms) | "
          "fsyncs a hop | fsyncs before send returns | a returned send survives a power loss | store |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in [c.name for c in SYSTEMS if c.name in args.only]:
        f, st, x = fresh.get(s), stored.get(s), fs.get(s, {})
        of, os_ = fresh.get("ours"), stored.get("ours")
        cell = lambda v, base: f"{v[1] / base[1]:.2f}" if v and base else "-"
        ms = lambda v: f"{v[1] * 1e3:.1f} (n={v[2]})" if v else "-"
        sd = lambda v: f"{v[0] * 1e3:.1f}" if v else "-"
        survives = "-"
        if x:
            survives = ("yes" if x["sends_without"] == 0
                        else f"no: {x['sends_without']} of {x['hops']} sends returned before any fsync")
        print(f"| {s} | {ms(f)} | {cell(f, of)} | {ms(st)} | {cell(st, os_)} | {sd(f)} / {sd(st)} | "
              f"{x.get('per_hop', float('nan')):.2f} | {x.get('per_send', float('nan')):.2f} | "
              f"{survives} | {dur[s]} |")
    print()
    for s, x in fs.items():
        top = "; ".join(f"{v:.2f} {k}" for k, v in x["files"].items())
        print(f"  {s}: fsyncs a hop by file: {top or 'none'}")


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", type=Path, required=True)
    ap.add_argument("--peers", type=Path, required=True)
    ap.add_argument("--stored", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chunk", type=float, default=2.0)
    ap.add_argument("--traced", type=int, default=20)
    ap.add_argument("--only", default=",".join(c.name for c in SYSTEMS))
    ap.add_argument("--keep", action="store_true", help="keep the temp folders")
    args = ap.parse_args()
    args.bin, args.peers = args.bin.resolve(), args.peers.resolve()
    args.only = args.only.split(",")
    base = Path(tempfile.mkdtemp(prefix="bench-peers-", dir=os.environ.get("TMPDIR", "/tmp")))
    try:
        print("fsyncs (strace):", flush=True)
        fs = await traced_pass(args, base)
        print("fresh:", flush=True)
        fresh = await scenario(args, base, "fresh", 0)
        print(f"stored ({args.stored}):", flush=True)
        stored = await scenario(args, base, "stored", args.stored) if args.stored else {}
        report(args, fresh, stored, fs)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
