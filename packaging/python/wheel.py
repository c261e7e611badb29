#!/usr/bin/env python3
"""Writes the swarm-handoff wheel from already built binaries.

    wheel.py --bins DIR --version V --platform-tag TAG --readme FILE --out DIR

The wheel holds the five binaries in its scripts (pip, uv and pipx put them
on PATH) and its metadata; no Python code and nothing that runs at install.
It is what maturin's `bindings = "bin"` (pyproject.toml beside this file)
writes, made from the binaries scripts/package.sh has already built and
checked, so CI can package the binaries its tests ran and the release the
ones it built, one way for both, without a second build.
"""

import argparse
import base64
import hashlib
import os
import sys
import zipfile

BINARIES = ["swarm", "swarm-handoff", "ready-next", "done-current", "handoffd"]
SUMMARY = (
    "File-based handoff queue for agent swarms, speaking SwarmForge's "
    "on-disk protocol (prebuilt binaries)"
)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{name},sha256={digest.decode()},{len(data)}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bins", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--platform-tag", required=True)
    ap.add_argument("--readme", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compresslevel", type=int, default=9)
    a = ap.parse_args()

    dist = f"swarm_handoff-{a.version}"
    tags = [f"py3-none-{p}" for p in a.platform_tag.split(".")]
    wheel_name = f"{dist}-py3-none-{a.platform_tag}.whl"
    with open(a.readme, encoding="utf-8") as f:
        readme = f.read()
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            "Name: swarm-handoff",
            f"Version: {a.version}",
            f"Summary: {SUMMARY}",
            "License: MIT",
            "Requires-Python: >=3.8",
            "Classifier: Environment :: Console",
            "Classifier: Programming Language :: Rust",
            "Description-Content-Type: text/markdown",
            "",
            readme,
        ]
    )
    wheel = "\n".join(
        ["Wheel-Version: 1.0", "Generator: swarm-handoff packaging/python/wheel.py",
         "Root-Is-Purelib: false"] + [f"Tag: {t}" for t in tags]
    ) + "\n"

    entries = []
    for b in BINARIES:
        path = os.path.join(a.bins, b)
        with open(path, "rb") as f:
            entries.append((f"{dist}.data/scripts/{b}", f.read(), 0o755))
    entries.append((f"{dist}.dist-info/METADATA", metadata.encode(), 0o644))
    entries.append((f"{dist}.dist-info/WHEEL", wheel.encode(), 0o644))
    record_name = f"{dist}.dist-info/RECORD"
    record = "\n".join([record_line(n, d) for n, d, _ in entries] + [f"{record_name},,", ""])
    entries.append((record_name, record.encode(), 0o644))

    os.makedirs(a.out, exist_ok=True)
    out = os.path.join(a.out, wheel_name)
    tmp = out + ".part"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=a.compresslevel) as z:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data, compresslevel=a.compresslevel)
    os.replace(tmp, out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
