"""``launch --quiet``: the launch the window runs in a child process prints no per-role lines (the
window shows them from the run directory), only the run directory and the summary at the end."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.clusters import light_cluster
from tests.helpers.project import ROOT


@pytest.mark.timeout(180)
def test_quiet_launch_prints_no_state_or_progress_lines(tmp_path: Path):
    cluster = light_cluster(tmp_path, workers=2, steps=20, rate=40.0)
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run), "--quiet"],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"run directory: {run}\n")
    # Without --quiet every state change and progress line is printed, each after its time
    # ("12:00:01  worker:0     running ..."); with it, none is.
    stamped = [line for line in done.stdout.splitlines() if re.match(r"\d\d:\d\d:\d\d  ", line)]
    assert stamped == [], stamped
    assert "worker:0     succeeded" in done.stdout  # the summary at the end is still printed
    assert (run / "roles" / "worker-0").is_dir()
