"""The window with roles on other machines (127.0.0.2 and 127.0.0.3 through a real sshd):
the pre-flight table before a launch, then the remote roles and their hosts on screen."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.cluster.spec import load
from tests.helpers.remote_clusters import write_remote_cluster
from tests.helpers.ssh_server import SshServer, assert_nothing_left_under
from tests.helpers.widgets import cell

pytestmark = pytest.mark.slow


def test_window_checks_remote_hosts_then_launches_across_them(qtbot, tmp_path: Path, sshd: SshServer):
    from PySide6 import QtWidgets

    from gui.window.main_window import MainWindow
    from gui.window.preflight import PreflightDialog

    cluster, ports = write_remote_cluster(tmp_path, sshd, steps=100000, sleep=0.01)
    # The light trainer (the classic flags and step lines, no TensorFlow): the pre-flight, the launch
    # across the hosts and what the window shows of them are TowerDeck's whatever the roles run; the
    # between-graph example trained across the two ssh hosts is tests/ssh/test_remote_launch.py's
    # test_launch_one_ps_two_workers_across_two_ssh_hosts_to_success, and the pre-flight still
    # checks TensorFlow on each host (asserted below).
    text = cluster.read_text()
    trainer = '"between_graph.py", "--train_steps=100000", "--step_sleep=0.01", "--log_every=10"'
    assert trainer in text
    cluster.write_text(text.replace(trainer, '"light_trainer.py", "--steps=0", "--rate_hz=20"'))
    broken = tmp_path / "broken.toml"
    broken.write_text(cluster.read_text().replace("light_trainer.py", "no_such_trainer.py"))
    spec, problems = load(broken)
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()

    # A missing script on the remote hosts: the launch stops at the pre-flight and says why.
    window.controls.launch.trigger()
    assert window.controller is None
    qtbot.waitUntil(lambda: bool(window.findChildren(PreflightDialog)), timeout=90_000)
    dialog = window.findChildren(PreflightDialog)[-1]
    rows = [
        [dialog.table.item(r, c).text() for c in range(dialog.table.columnCount())]
        for r in range(dialog.table.rowCount())
    ]
    failed = [r for r in rows if r[3] == "FAILED"]
    assert {r[0] for r in failed} == {"127.0.0.2", "127.0.0.3"} and all(r[2] == "script" for r in failed), rows
    assert "0 of 2 hosts ready" in dialog.summary.text()
    assert any(r[2] == "tensorflow" and r[3] == "ok" for r in rows)
    dialog.accept()
    assert window.controller is None  # nothing was launched

    # The good cluster: the pre-flight passes and the launch goes on by itself.
    spec, _ = load(cluster)
    window.editor.set_spec(spec)
    qtbot.waitUntil(lambda: window.controls.launch.isEnabled(), timeout=10_000)
    window.controls.launch.trigger()
    qtbot.waitUntil(lambda: window.controller is not None, timeout=90_000)
    qtbot.waitUntil(
        lambda: all(cell(window, r, "State") == "running" for r in ("ps:0", "worker:0", "worker:1")), timeout=90_000
    )
    assert cell(window, "worker:1", "Host") == "127.0.0.3"  # connected: the address alone
    assert {h: s["state"] for h, s in window.frame.host_states.items()} == {
        "127.0.0.2": "connected",
        "127.0.0.3": "connected",
    }
    qtbot.waitUntil(lambda: cell(window, "worker:1", "Step") != "", timeout=60_000)
    window.tabs.setCurrentWidget(window.gpus)
    qtbot.waitUntil(lambda: {"127.0.0.2", "127.0.0.3"} <= set(window.gpus.hosts), timeout=20_000)
    assert not [w for w in QtWidgets.QApplication.topLevelWidgets() if isinstance(w, QtWidgets.QMessageBox)]
    window.controls.stop_all.trigger()
    qtbot.waitUntil(lambda: window.controller.done, timeout=60_000)
    assert_nothing_left_under(tmp_path, ports)
