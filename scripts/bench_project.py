"""The project the Python benchmarks run in (scripts/bench_mcp.py,
scripts/bench_peers.py): a git repository with roles coder and reviewer on
master in one folder, fsync on, no wake-up."""

import subprocess
from pathlib import Path


def coder_and_reviewer(d: Path) -> Path:
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@e"]
    subprocess.run(["git", "init", "-q", "-b", "master"], cwd=d, check=True)
    (d / "README").write_text("x\n")
    subprocess.run(git + ["add", "."], cwd=d, check=True)
    subprocess.run(git + ["commit", "-qm", "i"], cwd=d, check=True)
    (d / ".swarmforge").mkdir()
    rows = "".join(
        f"{r}\tmaster\t{d}\tswarmforge-{r}\t{r.title()}\tclaude\ttask\n"
        for r in ("coder", "reviewer")
    )
    (d / ".swarmforge/roles.tsv").write_text(rows)
    (d / "swarm.yaml").write_text("wake: {method: none}\n")
    return d
