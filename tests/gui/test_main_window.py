"""The window driven like a user drives it, against a real local TensorFlow cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.spec import load
from tests.conftest import ROOT
from tests.core.test_launch import between_graph
from tests.helpers.procs import assert_nothing_left

pytestmark = pytest.mark.slow


def cell(window, role: str, column: str) -> str:
    from gui.main_window import COLUMNS

    for row in range(window.table.rowCount()):
        if window.table.item(row, 0).text() == role:
            return window.table.item(row, COLUMNS.index(column)).text()
    raise AssertionError(f"no row for {role}")


def test_launch_watch_stop_a_worker_and_stop_all(qtbot, tmp_path: Path):
    from gui.main_window import MainWindow

    cluster, ports = between_graph(tmp_path, steps=100000, sleep=0.01)
    spec, _ = load(cluster)
    assert spec is not None
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    assert cell(window, "worker:1", "State") == "not launched"

    window.action_launch.trigger()
    qtbot.waitUntil(
        lambda: all(cell(window, r, "State") == "running" for r in ("ps:0", "worker:0", "worker:1")), timeout=60_000
    )
    # Loss points arrive and are drawn; the table shows step and loss; the log follows worker:0.
    qtbot.waitUntil(
        lambda: (
            len(window.curves) == 2
            and all(c.getData()[0] is not None and len(c.getData()[0]) >= 3 for c in window.curves.values())
        ),
        timeout=60_000,
    )
    assert cell(window, "worker:0", "Step").isdigit() and float(cell(window, "worker:0", "Loss")) > 0
    assert cell(window, "worker:0", "RSS").endswith("MiB")
    assert window.log_title.text() == "Output of worker:0"
    qtbot.waitUntil(lambda: "Step:" in window.log_view.toPlainText(), timeout=10_000)

    window.select_role("worker:1")
    assert window.selected_roles() == ["worker:1"]
    window.action_stop.trigger()
    qtbot.waitUntil(lambda: cell(window, "worker:1", "State") == "stopped", timeout=30_000)
    assert cell(window, "worker:0", "State") == "running"

    window.action_restart.trigger()
    qtbot.waitUntil(
        lambda: cell(window, "worker:1", "State") == "running" and cell(window, "worker:1", "Restarts") == "1",
        timeout=60_000,
    )

    window.action_stop_all.trigger()
    qtbot.waitUntil(lambda: window.controller.done, timeout=60_000)
    qtbot.waitUntil(lambda: "cluster done" in window.phase_label.text(), timeout=5_000)
    assert cell(window, "ps:0", "State") == "stopped"
    assert window.action_launch.isEnabled()
    assert_nothing_left(ports, marker="\0none\0")


def test_screenshot_command_renders_a_live_run(tmp_path: Path):
    shot = tmp_path / "shot.png"
    cluster, ports = between_graph(tmp_path, steps=100000, sleep=0.01)
    result = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), str(cluster), "--launch", "--screenshot", str(shot), "--after", "12"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    from PySide6.QtGui import QImage

    image = QImage(str(shot))
    assert image.width() >= 1280 and image.height() >= 800
    assert_nothing_left(ports, marker="\0none\0")
