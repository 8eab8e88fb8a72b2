"""A stop that comes while a reattach is still connecting to the run's agents stops the roles.

The stop gave up every connection being made (right for a launch, where nothing has started
yet), so a window that attached and stopped within ~50 ms left the roles running on their agent
and the run stopping for good (seen as a flaky GUI test: tests/gui/test_runs_page.py)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from core.cluster.spec import load
from core.controller.session import LaunchSession
from tests.helpers.cli_launch import launching, role_pids
from tests.helpers.clusters import cluster_file
from tests.helpers.procs import assert_nothing_left


# When the stop comes after the attach began, in seconds: the connection to the agent takes
# ~50-200 ms (a relay process starts), so some of these land while it is being made.
@pytest.mark.parametrize("after_s", [0.0, 0.03, 0.06, 0.1, 0.15])
def test_a_stop_while_the_reattach_connects_stops_the_roles(tmp_path: Path, after_s: float) -> None:
    path = cluster_file(tmp_path, "kept", 1, steps=0)
    root = Path(os.environ["TOWERDECK_DATA_DIR"]) / "runs"
    with launching(path, "--on-disconnect", "keep") as launcher:
        deadline = time.monotonic() + 120
        while not any(root.glob("*/roles/worker-0/metrics.jsonl")):
            assert time.monotonic() < deadline, "the cluster never trained"
            time.sleep(0.05)
        launcher.send_signal(signal.SIGKILL)  # the launcher dies; its agent keeps the roles
        launcher.wait()
    run = next(root.iterdir())
    spec, problems = load(run / "cluster.toml")
    assert spec is not None, problems
    pids = role_pids(run)
    assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
    session = LaunchSession.attach(run, spec, who="test")
    session.start()
    controller = session.controller
    try:
        time.sleep(after_s)  # a delay to try, not a wait for a condition: each lands the stop elsewhere
        controller.stop_all()
        assert controller.wait(60), [(r.role, r.state.value) for r in controller.status().roles]
    finally:
        if not controller.wait(0):
            controller.kill_all()
            controller.wait(30)
        session.close()
    assert {r.state.value for r in controller.status().roles} == {"stopped"}
    assert_nothing_left([t.port for t in spec.tasks()], str(tmp_path), timeout_s=20)
    assert not any(psutil.pid_exists(p) for p in pids)
