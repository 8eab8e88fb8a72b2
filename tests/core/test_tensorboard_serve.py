"""``runs tensorboard RUN``: the pinned TensorBoard on a real run's event files (a TensorFlow
trainer that writes summaries), named by role, answering on 127.0.0.1, and gone after Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from core.cluster.spec import load
from core.run import journal
from core.run.csv_export import export_csv, read_csv
from core.run.tensorboard import event_dirs
from tests.helpers.clusters import launch_tensorboard_run, tensorboard_runs
from tests.helpers.procs import gone
from tests.helpers.project import ROOT, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tb_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished real run with event files for the tests here, which only read it (or a copy)."""
    return launch_tensorboard_run(tmp_path_factory.mktemp("tb") / "runs" / "tb")


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as reply:  # 127.0.0.1 only
        return json.loads(reply.read())


def test_runs_tensorboard_serves_the_roles_event_files_and_leaves_nothing(tmp_path: Path, tb_run: Path) -> None:
    run = tb_run  # launched to success (launch_tensorboard_run asserts it)

    spec, _ = load(run / "cluster.toml")
    assert spec is not None
    assert sorted(event_dirs(run, spec).local) == ["worker-0", "worker-1"]
    assert event_dirs(run, spec).missing == {}

    # The same real run's TensorBoard scalars, exported as CSV, are its scalars.jsonl line by line.
    export_csv(run, tmp_path / "csv")
    rows = read_csv(tmp_path / "csv" / "scalars.csv")
    for role in ("worker-0", "worker-1"):
        points = list(journal.iter_jsonl(run / "roles" / role / "scalars.jsonl"))
        mine = [r for r in rows if r["role"] == role.replace("-", ":")]
        assert len(mine) == len(points) > 0
        assert [(r["tag"], int(r["step"]), float(r["wall_time"]), float(r["value"])) for r in mine] == [
            (p["tag"], p["step"], p["wall_time"], p["value"]) for p in points
        ]
        assert {r["tag"] for r in mine} >= {"loss"}

    args = ["runs", "tensorboard", str(run), "--no-browser"]
    proc, lines, text, reader = _serve_until_ready(args, dict(os.environ))
    try:
        m = re.search(r"TensorBoard on (http://127\.0\.0\.1:(\d+)/) \(pid (\d+)\): worker-0, worker-1", text)
        assert m, text
        url, port, pid = m.group(1), int(m.group(2)), int(m.group(3))
        tensorboard = psutil.Process(pid)
        assert any(c.laddr.port == port and c.laddr.ip == "127.0.0.1" for c in tensorboard.net_connections("tcp"))
        runs: object = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # it loads the event files in the background
            runs = _get(url + "data/runs")
            if isinstance(runs, list) and {r.split("/")[0] for r in runs} == {"worker-0", "worker-1"}:
                break
            time.sleep(0.5)
        # Named by role, and nothing more (TensorBoard's own naming once made these "worker-0/.").
        assert isinstance(runs, list) and sorted(runs) == ["worker-0", "worker-1"], runs
        tags = _get(url + "data/plugin/scalars/tags")
        assert isinstance(tags, dict) and all("loss" in tags[r] for r in runs), tags
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        reader.join(10)
    rest = "".join(lines.queue)
    assert proc.returncode == 0, text + rest
    assert "TensorBoard stopped" in rest
    assert gone(pid)
    with pytest.raises(OSError):
        _get(url + "data/runs")  # nothing listens there any more


def _serve_until_ready(
    args: list[str], env: dict[str, str]
) -> tuple[subprocess.Popen[str], queue.Queue[str], str, threading.Thread]:
    """``python main.py ARGS`` started, read until it says how to stop it; the process, what it
    printed after, what it printed until then, and the thread reading it (joined after the stop,
    so that its last lines are in the queue)."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True)
    reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + 120
    while not any("Ctrl-C" in line for line in seen) and time.monotonic() < deadline and proc.poll() is None:
        try:
            seen.append(lines.get(timeout=1))
        except queue.Empty:
            continue
    return proc, lines, "".join(seen), reader


@pytest.mark.timeout(600)
def test_runs_tensorboard_overlays_several_runs_named_by_run_and_role(tmp_path: Path, tb_run: Path) -> None:
    """`runs tensorboard A B`: one TensorBoard, each run's roles named `<run name>/<role>`; after
    Ctrl-C no TensorBoard, port or private folder is left."""
    first, second = tensorboard_runs(tmp_path, tb_run)
    private = tmp_path / "tmp"
    private.mkdir()
    env = {**os.environ, "TMPDIR": str(private)}
    proc, lines, text, reader = _serve_until_ready(
        ["runs", "tensorboard", str(first), str(second), "--no-browser"], env
    )
    try:
        m = re.search(r"TensorBoard on (http://127\.0\.0\.1:(\d+)/) \(pid (\d+)\): (.*)", text)
        assert m, text
        url, pid = m.group(1), int(m.group(3))
        assert m.group(4).split(", ") == ["tb/worker-0", "tb/worker-1", "tb-b/worker-0", "tb-b/worker-1"]
        expected = ["tb-b/worker-0", "tb-b/worker-1", "tb/worker-0", "tb/worker-1"]
        runs: object = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and runs != expected:  # it loads the event files in the background
            runs = sorted(_get(url + "data/runs"))  # type: ignore[call-overload]
            time.sleep(0.5)
        assert runs == expected
        tags = _get(url + "data/plugin/scalars/tags")
        assert isinstance(tags, dict) and all("loss" in tags[r] for r in expected), tags
        assert any(p.name.startswith("towerdeck-tensorboard-") for p in private.iterdir())
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        reader.join(10)
    assert proc.returncode == 0, text + "".join(lines.queue)
    assert gone(pid)
    with pytest.raises(OSError):
        _get(url + "data/runs")
    assert list(private.iterdir()) == []  # its folder of links went with it; the runs are whole
    assert sorted(p.name for p in (first / "roles" / "worker-0" / "tensorboard").rglob("*tfevents*"))


def test_runs_tensorboard_without_event_files_says_so(tmp_path: Path) -> None:
    old = ROOT / "tests" / "fixtures" / "run_c23e87e"
    result = run_cli("runs", "tensorboard", str(old), "--no-browser")
    assert result.returncode == 1
    assert "no role of run_c23e87e has TensorBoard event files here" in result.stderr
    missing = run_cli("runs", "tensorboard")
    assert missing.returncode == 2 and "name the run" in missing.stderr
