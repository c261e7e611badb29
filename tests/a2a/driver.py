"""Drives `swarm a2a` with the official A2A Python SDK (a2a-sdk, pinned in
.ci/run) for tests/cli/a2a.rs. One JSON request per stdin line, one JSON
answer per stdout line:

  {"op": "card", "role": R}                        -> {"card": {...}}
  {"op": "send", "role": R, "text": T, "message_id": M,
   "task_id": T?, "blocking": bool, "push": {...}?} -> {"events": [...]}
  {"op": "stream", same as send}                   -> {"events": [...]} (when the stream ends)
  {"op": "get" | "cancel" | "subscribe", "role": R, "id": T}
  {"op": "push", "role": R, "task_id": T, "url": U, "token": K}

A refused call answers {"exception": <class name>, "message": ...}.
argv: base URL, token file.
"""

import asyncio
import json
import sys

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)

BASE = sys.argv[1]
TOKEN = open(sys.argv[2]).read().strip()


async def client(role, streaming, polling=False):
    http = httpx.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60.0
    )
    config = ClientConfig(httpx_client=http, streaming=streaming, polling=polling)
    return http, await ClientFactory(config).create_from_url(f"{BASE}/a2a/{role}")


def request(req):
    msg = Message(
        message_id=req["message_id"],
        role=Role.ROLE_USER,
        parts=[Part(text=req["text"])],
    )
    if req.get("task_id"):
        msg.task_id = req["task_id"]
    r = SendMessageRequest(message=msg)
    if "push" in req:
        p = req["push"]
        r.configuration.task_push_notification_config.url = p["url"]
        r.configuration.task_push_notification_config.token = p.get("token", "")
    return r


async def handle(req):
    op = req["op"]
    role = req["role"]
    if op == "card":
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
        async with http:
            card = await A2ACardResolver(
                http, f"{BASE}/a2a/{role}"
            ).get_agent_card()
            return {"card": MessageToDict(card)}
    streaming = op in ("stream", "subscribe")
    http, c = await client(role, streaming, polling=not req.get("blocking", True))
    try:
        return await call(c, op, req)
    finally:
        await http.aclose()


async def call(c, op, req):
    if op in ("send", "stream"):
        events = [MessageToDict(e) async for e in c.send_message(request(req))]
        return {"events": events}
    if op == "get":
        return {"task": MessageToDict(await c.get_task(GetTaskRequest(id=req["id"])))}
    if op == "cancel":
        return {"task": MessageToDict(await c.cancel_task(CancelTaskRequest(id=req["id"])))}
    if op == "subscribe":
        events = [
            MessageToDict(e)
            async for e in c.subscribe(SubscribeToTaskRequest(id=req["id"]))
        ]
        return {"events": events}
    if op == "push":
        cfg = TaskPushNotificationConfig(
            task_id=req["task_id"], url=req["url"], token=req.get("token", "")
        )
        got = await c.create_task_push_notification_config(cfg)
        return {"config": MessageToDict(got)}
    raise ValueError(f"unknown op {op}")


async def main():
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        req = json.loads(line)
        try:
            out = await handle(req)
        except Exception as e:  # the test reads the refusal
            out = {"exception": type(e).__name__, "message": str(e)}
        print(json.dumps(out), flush=True)


asyncio.run(main())
