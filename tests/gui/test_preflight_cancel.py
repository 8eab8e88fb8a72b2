"""Quitting during a host pre-flight ends it at once (issue 19): the probes and the ssh under
them are killed, instead of Python joining the window's worker thread for up to 60 s at exit.

The host never answers: the real OpenSSH client reaches it through a ProxyCommand that sleeps."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from core.cluster.spec import ClusterSpec, load
from core.preflight.runner import PreflightRun, preflight
from tests.helpers.ports import free_ports
from tests.helpers.procs import with_marker


def _hanging_cluster(tmp_path: Path) -> tuple[ClusterSpec, str]:
    marker = f"towerdeck-hang-{tmp_path.name}"
    (tmp_path / "ssh_config").write_text(f"Host hang-host\n    ProxyCommand sh -c 'sleep 600' {marker}\n")
    ports = free_ports(2)
    (tmp_path / "c.toml").write_text(
        f"""name = "hang"
strategy = "between_graph"
workdir = "{tmp_path}"
command = ["python3", "-u", "trainer.py"]
ssh_config = "ssh_config"
[jobs.ps]
tasks = ["10.99.0.3:{ports[0]}"]
[jobs.worker]
tasks = ["10.99.0.3:{ports[1]}"]
[hosts."10.99.0.3"]
ssh = "hang-host"
"""
    )
    spec, problems = load(tmp_path / "c.toml")
    assert spec is not None, problems
    return spec, marker


def _wait_for(condition, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_cancelled_preflight_kills_its_ssh_at_once(tmp_path: Path) -> None:
    spec, marker = _hanging_cluster(tmp_path)
    cancel = PreflightRun()
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(preflight(spec, 60.0, run=cancel)))
    worker.start()
    _wait_for(lambda: with_marker(marker), 30, "the ProxyCommand to start")
    cancelled_at = time.monotonic()
    cancel.cancel()
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - cancelled_at < 5
    [result] = results[0]  # type: ignore[misc]
    assert not result.ok and result.checks[0].detail.startswith("cancelled")
    _wait_for(lambda: not with_marker(marker), 5, "the ssh and its ProxyCommand to be gone")


def test_closing_the_window_during_a_preflight_kills_the_ssh(qtbot, tmp_path: Path) -> None:
    from gui.window.main_window import MainWindow

    spec, marker = _hanging_cluster(tmp_path)
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    window.check_hosts()
    qtbot.waitUntil(lambda: bool(with_marker(marker)), timeout=30_000)
    window.close()
    qtbot.waitUntil(lambda: not with_marker(marker), timeout=5_000)
