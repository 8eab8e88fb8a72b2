"""A trainer that reports only through TensorBoard summaries: its step and loss appear live in the
CLI's progress lines and `ctl status --json`, marked as read from TensorBoard, and its scalars go
to their own file, not the journal."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.run import journal
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli

pytestmark = pytest.mark.slow
TRAINERS = ROOT / "resources" / "trainers"

TB_ONLY = """
name = "tb-only"
strategy = "multi_worker_mirrored"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "tb_only_trainer.py", "--logdir={{tb_dir}}", "--steps=400", "--step_sleep=0.05"]
stop_grace_s = 3
[jobs.worker]
tasks = ["127.0.0.1:{port}"]
"""


def test_a_tensorboard_only_trainer_shows_its_step_and_loss(tmp_path: Path) -> None:
    cluster = tmp_path / "tb.toml"
    cluster.write_text(TB_ONLY.format(trainers=TRAINERS, port=free_ports(1)[0]))
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run), "--progress-every", "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 120
        progress = None
        while progress is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                if proc.poll() is not None:
                    break  # it ended without the line: the assertion below shows its output
                continue
            seen.append(line)
            if "worker:0" in line and "loss (tb)" in line and "step -" not in line:
                progress = line
        assert progress is not None, "".join(seen[-30:])
        status = run_cli("ctl", str(run), "status", "--json")
        assert status.returncode == 0, status.stderr
        worker = json.loads(status.stdout)["roles"][0]
        assert worker["loss_source"] == "tb" and worker["step"] >= 1 and worker["loss"] is not None
        assert proc.wait(180) == 0, "".join(seen[-30:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    points = list(journal.iter_jsonl(run / "roles" / "worker-0" / "scalars.jsonl"))
    tags = {p["tag"] for p in points}
    assert {"loss", "learning_rate"} <= tags
    assert max(p["step"] for p in points if p["tag"] == "loss") == 400  # the last summaries too
    assert not any(r.get("kind") == "scalars" for r in journal.iter_jsonl(run / "events.jsonl"))
