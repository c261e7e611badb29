#!/usr/bin/env python3
"""What a file system charges for replacing a small file by temp + rename
(a new inode each time, the old one freed) against rewriting it in place,
measured side by side in one run (docs/benchmarks.md, "Where a hop's time
goes").

On ext4 without a journal, each inode creation skips the inodes freed in
the last minutes (the kernel's recently_deleted check), so a workload that
replaces files grows dearer as it runs. Ratios only: the machine is shared.

    python3 scripts/inode-churn.py [DIR] [N]     # defaults: /tmp 5000
"""

import os
import sys
import tempfile
import time


def replace_by_rename(d, n):
    """temp + rename over: one inode created and one freed per round."""
    t = time.perf_counter()
    for _ in range(n):
        fd = os.open(f"{d}/t", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
        os.write(fd, b"x" * 300)
        os.close(fd)
        os.rename(f"{d}/t", f"{d}/f")
    return (time.perf_counter() - t) / n * 1e6


def in_place(d, n):
    """open, the same bytes written over the start of one file, close: no
    inode churn (what fsx::overwrite_unsynced does)."""
    os.close(os.open(f"{d}/s", os.O_CREAT | os.O_WRONLY, 0o644))
    t = time.perf_counter()
    for _ in range(n):
        fd = os.open(f"{d}/s", os.O_WRONLY)
        os.fstat(fd)
        os.pwrite(fd, b"x" * 300, 0)
        os.close(fd)
    return (time.perf_counter() - t) / n * 1e6


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    d = tempfile.mkdtemp(dir=base)
    try:
        first = in_place(d, n)
        rounds = [replace_by_rename(d, n) for _ in range(4)]
        last = in_place(d, n)
        print(f"in place, before: {first:.1f} µs")
        for i, r in enumerate(rounds):
            print(f"replace by rename, round {i + 1}: {r:.1f} µs ({r / first:.1f}x in place)")
        print(f"in place, after: {last:.1f} µs")
    finally:
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)


if __name__ == "__main__":
    main()
