"""Closing the window with "stop" leaves no host agent behind (rule 5: no orphans).

The window as a user runs it (``python main.py CLUSTER --launch``, closed with "stop" once every
role runs, in a process of its own: tests/helpers/close_window.py) on 1 ps + 16 light workers over
8 loopback hosts, one agent each. The process exits once its window is closed, as the real one
does. Every agent must be gone soon after: told to shut down, its bye seen, before the controller
says it is done. Before, the controller said done first and closed its agents after, one by one,
on a daemon thread that the exiting process cut short; the agents not yet told lost their relay,
kept their exit records for a reattach and lingered LINGER_S (600 s), 4 of 8 at 64 workers.

The CLI's Ctrl-C on the same cluster is checked too: `launch` joins the controller's thread, so it
did not lose its agents, and it must not start to."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.helpers.cli_launch import Launch
from tests.helpers.clusters import spread_light_cluster
from tests.helpers.procs import assert_nothing_left, of_run
from tests.helpers.project import ROOT
from tests.helpers.waits import wait_for

pytestmark = pytest.mark.slow

WORKERS, HOSTS = 16, 8
DRIVER = ROOT / "tests" / "helpers" / "close_window.py"


def agents_of(run: Path) -> list[str]:
    """The run's agents still alive (they work in its folder), with their command lines."""
    found = []
    for proc in of_run(run):
        with contextlib.suppress(psutil.Error):
            line = " ".join(proc.cmdline())
            if "agent.pyz" in line:
                found.append(f"{proc.pid} {line}")
    return found


@pytest.mark.timeout(420)
def test_closing_the_window_with_stop_leaves_no_agent_of_8_hosts(tmp_path: Path):
    cluster, ports = spread_light_cluster(tmp_path, workers=WORKERS, hosts=HOSTS, name="spread")
    window = subprocess.run(
        [sys.executable, str(DRIVER), str(cluster)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert window.returncode == 0, window.stderr[-3000:]
    runs = [Path(line.removeprefix("run: ")) for line in window.stdout.splitlines() if line.startswith("run: ")]
    assert len(runs) == 1, window.stdout
    run = runs[0]
    assert len(list(run.glob("agent-*.log"))) == HOSTS

    def logs() -> str:
        return "\n".join(f"{p.name}: {p.read_text()[-600:]}" for p in sorted(run.glob("agent-*.log")))

    try:
        # Gone within a bounded wait, not after LINGER_S: every agent was told to shut down.
        wait_for(
            lambda: not agents_of(run),
            timeout_s=60,
            what=f"no agent of {run} left",
            context=lambda: "\n".join([*agents_of(run), logs()]),
        )
        assert not list((run / "agents").glob("*.sock")), logs()
        assert_nothing_left(ports, f"--test_marker={tmp_path.name}")
    finally:
        for proc in of_run(run):  # what a failure left: the test's own processes, ended by pid
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)


@pytest.mark.timeout(420)
def test_ctrl_c_on_a_launch_of_8_hosts_leaves_no_agent(tmp_path: Path, launches: list[Launch]):
    cluster, ports = spread_light_cluster(tmp_path, workers=WORKERS, hosts=HOSTS, name="spread")
    run = tmp_path / "run"
    launch = Launch(cluster, run)
    launches.append(launch)

    def all_running() -> bool:
        if not (run / "run.json").exists() or "control_socket" not in (run / "run.json").read_text():
            return False
        roles = launch.status()["roles"]
        return len(roles) == WORKERS + 1 and all(r["state"] == "running" for r in roles)

    wait_for(all_running, timeout_s=180, what="every role running")
    launch.proc.send_signal(signal.SIGINT)
    code, out = launch.finish()
    assert code != 0 and "stopped by the user" in out, out[-2000:]
    try:
        wait_for(
            lambda: not agents_of(run), timeout_s=60, what=f"no agent of {run} left", context=lambda: agents_of(run)
        )
        assert_nothing_left(ports, f"--test_marker={tmp_path.name}")
    finally:
        for proc in of_run(run):
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
