"""The projects the Python benchmarks run in: a git repository with one
commit (scripts/bench_wake.py adds its own swarm.yaml), and on it roles
coder and reviewer on master in one folder, fsync on, no wake-up
(scripts/bench_mcp.py, scripts/bench_peers.py)."""

import subprocess
from pathlib import Path


def git_repo(d: Path) -> Path:
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@e"]
    subprocess.run(["git", "init", "-q", "-b", "master"], cwd=d, check=True)
    (d / "README").write_text("x\n")
    subprocess.run(git + ["add", "."], cwd=d, check=True)
    subprocess.run(git + ["commit", "-qm", "i"], cwd=d, check=True)
    return d


def coder_and_reviewer(d: Path) -> Path:
    git_repo(d)
    (d / ".swarmforge").mkdir()
    rows = "".join(
        f"{r}\tmaster\t{d}\tswarmforge-{r}\t{r.title()}\tclaude\ttask\n"
        for r in ("coder", "reviewer")
    )
    (d / ".swarmforge/roles.tsv").write_text(rows)
    (d / "swarm.yaml").write_text("wake: {method: none}\n")
    return d
