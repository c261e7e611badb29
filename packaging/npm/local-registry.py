#!/usr/bin/env python3
"""A read-only npm registry on 127.0.0.1 serving the tarballs in one folder.

    local-registry.py DIR PORTFILE LOGFILE

For scripts/install-proof.sh: npm installs `swarm-handoff` the way a user
does (`npm install -g swarm-handoff`, resolving its optionalDependencies by
os, cpu and libc) from the packages scripts/package.sh made, with no other
registry in reach. Each request is logged (method, path, status); a request
for anything this folder does not hold is answered 404 and logged as such,
so the proof can fail on a package that would fetch anything else. Writes
the port it listens on to PORTFILE once it is ready, and its pid to
PORTFILE.pid.
"""

import base64
import hashlib
import http.server
import json
import os
import sys
import tarfile
import urllib.parse

ROOT, PORTFILE, LOGFILE = sys.argv[1], sys.argv[2], sys.argv[3]


def load_packages():
    """name -> {version -> (manifest, tarball file name)}"""
    pkgs = {}
    for f in sorted(os.listdir(ROOT)):
        if not f.endswith(".tgz"):
            continue
        path = os.path.join(ROOT, f)
        with tarfile.open(path) as t:
            manifest = json.load(t.extractfile("package/package.json"))
        data = open(path, "rb").read()
        manifest["dist"] = {
            "tarball": f"/-/files/{f}",
            "shasum": hashlib.sha1(data).hexdigest(),
            "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
        }
        pkgs.setdefault(manifest["name"], {})[manifest["version"]] = (manifest, f)
    return pkgs


PACKAGES = load_packages()


class Handler(http.server.BaseHTTPRequestHandler):
    def log(self, status):
        with open(LOGFILE, "a") as log:
            log.write(f"{self.command} {self.path} {status}\n")

    def send(self, status, body, ctype):
        self.log(status)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        host = f"http://127.0.0.1:{self.server.server_address[1]}"
        if path.startswith("/-/files/"):
            name = path[len("/-/files/"):]
            for versions in PACKAGES.values():
                for _, f in versions.values():
                    if f == name:
                        data = open(os.path.join(ROOT, f), "rb").read()
                        return self.send(200, data, "application/octet-stream")
        name = path.lstrip("/")
        if name in PACKAGES:
            versions = {}
            for v, (m, _) in PACKAGES[name].items():
                m = dict(m, dist=dict(m["dist"], tarball=host + m["dist"]["tarball"]))
                versions[v] = m
            latest = sorted(versions, key=lambda v: [int(x) if x.isdigit() else 0 for x in v.split(".")])[-1]
            doc = {"name": name, "dist-tags": {"latest": latest}, "versions": versions}
            return self.send(200, json.dumps(doc).encode(), "application/json")
        self.send(404, b'{"error":"not found"}', "application/json")

    do_HEAD = do_GET

    def do_POST(self):
        self.send(404, b"{}", "application/json")

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".pid", "w") as f:
    f.write(str(os.getpid()))
tmp = PORTFILE + ".part"
with open(tmp, "w") as f:
    f.write(str(server.server_address[1]))
os.replace(tmp, PORTFILE)
server.serve_forever()
