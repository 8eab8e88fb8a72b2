"""Leaving a run and coming back: detach, a SIGKILLed TowerDeck, reattach with no gap (local)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from core.cluster.spec import load
from core.controller.controller import Controller
from core.run.events import Event
from core.run.rundir import RunDir
from tests.helpers.clusters import between_graph
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def no_strays(tmp_path: Path) -> Iterator[None]:
    """Roles left running on purpose must not outlive a failed test."""
    yield
    for p in role_processes(tmp_path):
        with contextlib.suppress(psutil.Error):
            p.kill()


def role_processes(run_dir: Path) -> list[psutil.Process]:
    """Live processes of the run's roles (they carry TOWERDECK_RUN_DIR) and its agent (cwd)."""
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if p.environ().get("TOWERDECK_RUN_DIR", "").startswith(str(run_dir)) or p.cwd().startswith(str(run_dir)):
                found.append(p)
        except psutil.Error:
            continue
    return found


def launch_in_background(cluster: Path, run_dir: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run_dir), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_training(run_dir: Path, timeout_s: float = 120) -> None:
    deadline = time.time() + timeout_s
    log = run_dir / "roles" / "worker-1" / "attempt-1.log"
    # The trainer prints "Step: N, ..." (and TF's own INFO lines may say "step = N").
    while not (log.is_file() and re.search(r"[Ss]tep\W+\d+", log.read_text())):
        assert time.time() < deadline, "worker:1 never trained"
        time.sleep(0.1)


def test_sigkilled_launcher_leaves_roles_running_and_reattach_shows_the_rest_without_gap(tmp_path: Path):
    cluster, ports = between_graph(tmp_path, steps=2000, sleep=0.02)
    run_dir = tmp_path / "run"
    launcher = launch_in_background(cluster, run_dir)
    try:
        wait_for_training(run_dir)
        time.sleep(1.5)  # let the launcher record what it has seen
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(10)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        launcher.communicate()
    time.sleep(1.0)
    # The ps never ends by itself: alive now, it was left running, not stopped.
    alive = [p.environ().get("TOWERDECK_ROLE") for p in role_processes(run_dir)]
    assert "ps:0" in alive, "the roles did not keep running"
    assert (run_dir / "run.json").is_file() and (run_dir / "events.jsonl").is_file()
    seen = json.loads((run_dir / "agents" / "127.0.0.1.seen.json").read_text())
    assert seen, "the launcher recorded nothing it had seen"

    parsed = {
        role: (p["attempt"], p["end"])
        for role, name in (("ps:0", "ps-0"), ("worker:0", "worker-0"), ("worker:1", "worker-1"))
        if (path := run_dir / "roles" / name / "parsed.json").is_file() and (p := json.loads(path.read_text()))
    }
    spec, problems = load(run_dir / "cluster.toml")
    assert spec is not None, problems
    controller = Controller(spec, RunDir.open(run_dir), attach=True)
    received: dict[str, list[str]] = {}
    lock = threading.Lock()

    def on_event(event: Event) -> None:
        if event.kind == "role_output" and event.role:
            with lock:
                received.setdefault(event.role, []).append(event.payload.text)

    controller.subscribe(on_event)
    controller.start()
    try:
        assert controller.wait(240), "the reattached run did not end"
        status = controller.status()
    finally:
        controller.close()
    assert status.result == "succeeded", status
    for role, name in (("ps:0", "ps-0"), ("worker:0", "worker-0"), ("worker:1", "worker-1")):
        attempt, start = seen.get(role, (1, 0))
        assert attempt == 1
        if role in parsed:  # where the killed launcher had parsed to wins over the lazily saved seen
            attempt, start = parsed[role]
        text = (run_dir / "roles" / name / "attempt-1.log").read_bytes()
        # Exactly the output after what the killed launcher had parsed (or seen): no gap, no repeat.
        assert "".join(received.get(role, [])).encode() == text[start:], role
    assert_nothing_left(ports, marker="\0never\0")
    assert not role_processes(run_dir)


def test_sigkilled_launcher_with_on_disconnect_stop_has_the_agent_stop_the_roles(tmp_path: Path):
    cluster, ports = between_graph(tmp_path, steps=5000, sleep=0.02)
    run_dir = tmp_path / "run"
    launcher = launch_in_background(cluster, run_dir, "--on-disconnect", "stop")
    try:
        wait_for_training(run_dir)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(10)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        launcher.communicate()
    deadline = time.time() + 20
    while role_processes(run_dir):
        assert time.time() < deadline, f"left running: {[p.cmdline() for p in role_processes(run_dir)]}"
        time.sleep(0.2)
    assert_nothing_left(ports, marker="\0never\0")
    # What worker:1 printed before the agent stopped it is kept (the test waited for its steps).
    assert re.search(r"[Ss]tep\W+\d+", (run_dir / "roles" / "worker-1" / "attempt-1.log").read_text())


def test_detach_then_attach_from_the_command_line_to_success(tmp_path: Path):
    cluster, ports = between_graph(tmp_path, steps=1500, sleep=0.02)
    run_dir = tmp_path / "run"
    launcher = launch_in_background(cluster, run_dir)
    try:
        wait_for_training(run_dir)
        reply = run_cli("ctl", str(run_dir), "detach", timeout=60)
        assert reply.returncode == 0, reply.stdout + reply.stderr
        out, _ = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 0, out
    assert "left running; reattach with: python main.py attach" in out
    # The ps never ends by itself: alive now, it was left running, not stopped.
    assert any(p.environ().get("TOWERDECK_ROLE") == "ps:0" for p in role_processes(run_dir))
    result = run_cli("attach", str(run_dir), timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"ps:0 +stopped", result.stdout), result.stdout  # stopped once training was over
    assert re.search(r"worker:1 +succeeded +exit code 0", result.stdout), result.stdout
    info = json.loads((run_dir / "run.json").read_text())
    assert info["state"] == "done" and info["result"] == "succeeded"
    assert_nothing_left(ports, marker="\0never\0")
    assert not role_processes(run_dir)
    assert os.path.isdir(run_dir / "roles")
