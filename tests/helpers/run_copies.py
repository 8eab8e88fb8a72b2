"""Many runs on disk from one: copies of a real finished run, each with its own id, start and outcome."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def make_runs(template: Path, root: Path, count: int) -> list[Path]:
    """``count`` copies of a real finished run, each with its own id, start and figures."""
    root.mkdir(parents=True, exist_ok=True)
    info = json.loads((template / "run.json").read_text())
    paths = []
    for i in range(count):
        path = root / f"run-{i:04d}"
        shutil.copytree(template, path, ignore=shutil.ignore_patterns("summary.json", "*.log", "agents"))
        outcome = ("succeeded", "failed", "stopped")[i % 3]
        (path / "run.json").write_text(
            json.dumps({**info, "id": path.name, "created": 1.0e9 + i, "ended": 1.0e9 + i + 60, "result": outcome})
        )
        paths.append(path)
    return paths
