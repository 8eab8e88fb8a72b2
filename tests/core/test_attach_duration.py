"""``attach`` says how long the run took, not how long the attach watched it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli

pytestmark = pytest.mark.slow

TRAINERS = ROOT / "resources" / "trainers"
CLUSTER = """
name = "taken-over"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=80", "--rate_hz=20"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{ps}"]
[jobs.worker]
tasks = ["127.0.0.1:{worker}"]
"""


def journal(run: Path) -> list[dict[str, object]]:
    path = run / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def steps(run: Path) -> int:
    path = run / "roles" / "worker-0" / "metrics.jsonl"
    return sum(1 for _ in path.open()) if path.is_file() else 0


@pytest.mark.timeout(240)
def test_attach_reports_the_runs_own_duration(tmp_path: Path) -> None:
    """Before: attach printed the seconds it had watched ("succeeded after 0.4 s" for a 9.8 s run)."""
    ps, worker = free_ports(2)
    cluster = tmp_path / "c.toml"
    cluster.write_text(CLUSTER.format(trainers=TRAINERS, ps=ps, worker=worker))
    run = tmp_path / "run"
    launcher = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run), "--progress-every", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while steps(run) < 30:  # 1.5 s of its 4 s of training, at least
            assert launcher.poll() is None and time.monotonic() < deadline, "the worker never trained"
            time.sleep(0.05)
        launcher.send_signal(signal.SIGKILL)  # its agent keeps the roles (--on-disconnect keep)
        launcher.wait(30)
        killed_at = time.time()
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    result = run_cli("attach", str(run), "--progress-every", "0", timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    said = re.search(r"^succeeded after ([0-9.]+) s:", result.stdout, re.MULTILINE)
    assert said is not None, result.stdout
    records = journal(run)
    first = float(records[0]["t"])  # type: ignore[arg-type]
    done = next(float(r["t"]) for r in records if r.get("kind") == "cluster_state" and r.get("phase") == "done")  # type: ignore[arg-type]
    assert float(said.group(1)) == pytest.approx(done - first, abs=0.06)
    assert float(said.group(1)) > killed_at - first  # longer than the launcher lived, whatever the attach saw
