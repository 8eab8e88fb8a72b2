"""The window's launch in a process of its own (core/controller/child_launch.py): a large cluster's
controller runs in ``launch --quiet``, which the window follows and controls through the run's
control socket. TOWERDECK_WINDOW_LAUNCH_PROCESS_ROLES=1 takes this path with a light cluster."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from core.cluster.spec import load
from core.run.rundir import launcher_alive
from tests.helpers.clusters import light_cluster
from tests.helpers.procs import listening, of_run
from tests.helpers.project import ROOT
from tests.helpers.widgets import cell

ROLES = ("ps:0", "worker:0", "worker:1")


@pytest.fixture(autouse=True)
def in_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOWERDECK_WINDOW_LAUNCH_PROCESS_ROLES", "1")


def state(window, role: str) -> str:
    return cell(window, role, "State").split(" (")[0]


def ports_of(cluster: Path) -> list[int]:
    spec, _ = load(cluster)
    assert spec is not None
    return [t.port for t in spec.tasks()]


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.1)


def launched_window(qtbot, tmp_path: Path, cluster: Path):
    from gui.window.main_window import MainWindow

    spec, _ = load(cluster)
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    window.controls.launch.trigger()
    qtbot.waitUntil(lambda: window.binding.child is not None, timeout=120_000)
    qtbot.waitUntil(lambda: all(state(window, r) == "running" for r in ROLES), timeout=120_000)
    return window


@pytest.mark.timeout(300)
def test_the_window_runs_the_launch_in_a_child_it_follows_controls_and_stops_on_close(qtbot, tmp_path: Path):
    cluster = light_cluster(tmp_path, workers=2, steps=1_000_000, rate=20.0)
    window = launched_window(qtbot, tmp_path, cluster)
    child = window.binding.child
    assert child is not None and window.controller is None  # no controller in the window's process
    assert child.child.pid != os.getpid() and psutil.Process(child.child.pid).is_running()
    assert os.getsid(child.child.pid) == child.child.pid  # its own session: the window's death leaves it
    run = child.path
    assert (run / "launcher.log").is_file() and not list((tmp_path / "runs").glob(".launching-*"))

    # Steps shown: the table's step and the training tab's loss curves, read from the run directory.
    qtbot.waitUntil(lambda: cell(window, "worker:0", "Step").isdigit(), timeout=60_000)
    window.tabs.setCurrentWidget(window.training)
    qtbot.waitUntil(
        lambda: (
            len(window.training.loss_curves) == 2
            and all(
                s.getData()[0] is not None and len(s.getData()[0]) >= 3
                for _r, s in window.training.loss_curves.values()
            )
        ),
        timeout=60_000,
    )

    # A role stopped and restarted from the window, through the child's control socket.
    window.binding.act_on_roles(lambda source, role: source.stop_role(role), ["worker:1"])
    qtbot.waitUntil(lambda: state(window, "worker:1") == "stopped", timeout=60_000)
    window.binding.act_on_roles(lambda source, role: source.restart_role(role), ["worker:1"])
    qtbot.waitUntil(lambda: state(window, "worker:1") == "running", timeout=60_000)

    # Closing with "stop": every role stopped through the child, which exits; the window closes after.
    window.answer_close_question("stop")
    window.close()
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=120_000)
    assert child.done and child.child.returncode is not None
    wait_for(lambda: not of_run(run) and not listening(ports_of(cluster)), 20, "the run's processes and ports gone")


@pytest.mark.timeout(300)
def test_leave_closes_the_window_and_the_child_supervises_until_ctl_stops_it(qtbot, tmp_path: Path):
    cluster = light_cluster(tmp_path, workers=2, steps=1_000_000, rate=20.0)
    window = launched_window(qtbot, tmp_path, cluster)
    child = window.binding.child
    assert child is not None
    run = child.path
    try:
        window.answer_close_question("leave")
        window.close()
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=30_000)
        # The child and its roles run on, and the run says so to other processes.
        assert not child.done and launcher_alive(run)
        assert len(of_run(run)) >= 3
        stopped = subprocess.run(
            [sys.executable, str(ROOT / "main.py"), "ctl", str(run), "stop-all"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert stopped.returncode == 0, stopped.stderr
        assert child.wait(120), "the launch process did not exit once its cluster was stopped"
        wait_for(lambda: not of_run(run) and not listening(ports_of(cluster)), 20, "the run's processes and ports gone")
    finally:
        if not child.done:
            child.child.kill()  # a failed test's launcher and roles never outlive it
        for left in of_run(run):
            left.kill()


@pytest.mark.timeout(180)
def test_a_launch_whose_port_is_taken_says_one_line_and_leaves_nothing(qtbot, tmp_path: Path):
    from gui.window.main_window import MainWindow

    cluster = light_cluster(tmp_path, workers=2, steps=100)
    port = ports_of(cluster)[1]
    with socket.socket() as held:
        held.bind(("127.0.0.1", port))
        held.listen()
        spec, _ = load(cluster)
        window = MainWindow(spec, runs_root=tmp_path / "runs")
        qtbot.addWidget(window)
        window.show()
        window.controls.launch.trigger()
        qtbot.waitUntil(lambda: window.statusBar().currentMessage().startswith("not launched: "), timeout=120_000)
        message = window.statusBar().currentMessage()
        assert str(port) in message and "\n" not in message and "Traceback" not in message, message
        assert window.source is None and window.binding.pending is None
        # Nothing left: no staging folder, no run directory, no launch process.
        assert list((tmp_path / "runs").iterdir()) == []
        assert not [p for p in psutil.Process().children(recursive=True) if "launch" in " ".join(p.cmdline())]


@pytest.mark.timeout(300)
def test_the_run_survives_the_window_killed(tmp_path: Path):
    """Today the window's own process runs the controller: SIGKILLed, the run has no launcher any
    more (its control socket dead); with the launch in a child, the child supervises on."""
    cluster = light_cluster(tmp_path, workers=2, steps=1_000_000, rate=20.0)
    runs = Path(os.environ["TOWERDECK_DATA_DIR"]) / "runs"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    window = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "helpers" / "window_launch.py"), str(cluster)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    run: Path | None = None
    try:
        assert window.stdout is not None
        line = window.stdout.readline()  # "run: PATH" once every role runs
        assert line.startswith("run: "), line
        run = Path(line[5:].strip())
        assert run.parent == runs
        window.send_signal(signal.SIGKILL)
        window.wait(30)
        assert launcher_alive(run), "the run lost its launcher with the window"
        assert len(of_run(run)) >= 3
        stopped = subprocess.run(
            [sys.executable, str(ROOT / "main.py"), "ctl", str(run), "stop-all"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert stopped.returncode == 0, stopped.stderr
        wait_for(lambda: not launcher_alive(run), 120, "the launch process exits once its cluster is stopped")
        wait_for(lambda: not of_run(run) and not listening(ports_of(cluster)), 30, "the run's processes and ports gone")
    finally:
        if window.poll() is None:
            window.kill()
            window.wait(30)
        for left in of_run(run) if run is not None else []:  # a failed run's roles never outlive the test
            left.kill()
