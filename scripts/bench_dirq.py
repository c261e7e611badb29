#!/usr/bin/env python3
"""The python-dirq side of benches/queues.rs (driven by it; see
docs/benchmarks.md). Each command prints one line: seconds spent on the work,
measured inside this process (interpreter start-up excluded; `startup`
measures that on its own).

  bench_dirq.py startup
  bench_dirq.py enqueue DIR N      N x QueueSimple.add
  bench_dirq.py hop DIR N          N x (add, first, lock, get, remove)
  bench_dirq.py fill DIR N         N x add (untimed set-up for `first`)
  bench_dirq.py first DIR          first element of a backlog: first, lock, get, remove
"""

import sys
import time

t0 = time.perf_counter()
from dirq.QueueSimple import QueueSimple  # noqa: E402

IMPORTED = time.perf_counter() - t0
BODY = b"x" * 400


def main():
    cmd = sys.argv[1]
    if cmd == "startup":
        print(f"{IMPORTED:.6f}")
        return
    path = sys.argv[2]
    q = QueueSimple(path)
    if cmd in ("enqueue", "fill"):
        n = int(sys.argv[3])
        t = time.perf_counter()
        for _ in range(n):
            q.add(BODY)
        print(f"{time.perf_counter() - t:.6f}")
    elif cmd == "hop":
        n = int(sys.argv[3])
        t = time.perf_counter()
        for _ in range(n):
            q.add(BODY)
            name = q.first()
            if not q.lock(name):
                raise SystemExit(f"cannot lock {name}")
            assert q.get(name) == BODY
            q.remove(name)
        print(f"{time.perf_counter() - t:.6f}")
    elif cmd == "first":
        t = time.perf_counter()
        name = q.first()
        if not q.lock(name):
            raise SystemExit(f"cannot lock {name}")
        q.get(name)
        q.remove(name)
        print(f"{time.perf_counter() - t:.6f}")
    else:
        raise SystemExit(f"unknown command {cmd}")


main()
