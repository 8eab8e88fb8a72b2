"""The window's Role > Profile and Role > Why is this worker slow? on a worker of another host,
through a real sshd: its agent traces it there, the files come into the window's run directory
like a local capture's, and the verdict names the remote worker's slow input (worker:1, on
127.0.0.2, sleeps in its input pipeline; tests/ssh/test_remote_profile.py has the cluster)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from core.cluster.spec import load
from tests.helpers.ports import free_ports
from tests.helpers.remote_clusters import write_remote_profile_cluster
from tests.helpers.role_profiles import why_verdict
from tests.helpers.ssh_server import SshServer, assert_nothing_left_under

pytestmark = pytest.mark.slow


def test_profile_and_why_on_a_remote_worker_from_the_window(qtbot, tmp_path: Path, sshd: SshServer) -> None:
    from gui.window.main_window import MainWindow

    ports = [*free_ports(2), free_ports(1, "127.0.0.2")[0]]
    spec, problems = load(write_remote_profile_cluster(tmp_path, sshd, ports))
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.answer_close_question("stop")
    window.show()
    try:
        window.controls.launch.trigger()  # the pre-flight passes and the launch goes on by itself
        qtbot.waitUntil(lambda: window.controller is not None, timeout=120_000)
        for role in ("worker:0", "worker:1"):
            qtbot.waitUntil(lambda r=role: window.roles.cell(r, "State").startswith("running"), timeout=180_000)
            qtbot.waitUntil(lambda r=role: "AvgTime" in "".join(window.logs.last_lines(r, 50)), timeout=180_000)
        run_dir = window.source.path

        # Role > Profile on the remote worker alone.
        window.select_role("worker:1")
        window.profiler.action.trigger()
        assert window.profiler.busy == "worker:1"  # asked off the GUI thread: the window goes on
        qtbot.waitUntil(lambda: window.profiler.busy is None, timeout=120_000)
        message = window.profiler.last_message
        m = re.fullmatch(r"profiled worker:1 into (\S+)", message)
        assert m, message
        capture = run_dir / "profiles" / m[1]
        (entry,) = json.loads((capture / "profile.json").read_text())["roles"]
        assert entry["ok"] and entry["xplane"].startswith("worker-1/plugins/profile/"), entry
        here = capture / entry["xplane"]
        # The same bytes as the role wrote on its host, in the run's directory there.
        (there,) = (tmp_path / "host2").glob(f"*/{here.relative_to(run_dir)}")
        assert there.read_bytes() == here.read_bytes()
        assert window.tabs.currentWidget() is window.profiler.panel

        # Role > Why is this worker slow? on it: traced there beside the local median worker.
        window.why.action.trigger()
        assert window.profiler.busy == "worker:1, worker:0"
        qtbot.waitUntil(lambda: window.profiler.busy is None, timeout=240_000)
        message = window.why.last_message
        assert message.startswith("why is worker:1 slow? "), message
        share, median_share = why_verdict(message.removeprefix("why is worker:1 slow? "))
        assert share >= 50 and median_share < share / 2, message
        panel = window.profiler.panel
        qtbot.waitUntil(lambda: panel.verdict_text() != "", timeout=60_000)  # the tab shows it once drawn
        assert panel.verdict_text().startswith(
            f"Why is worker:1 slow? {message.removeprefix('why is worker:1 slow? ')}"
        )
        assert panel.shown is not None and [p.role for p in panel.shown.profiles] == ["worker:1", "worker:0"]
        for role in ("worker:0", "worker:1"):
            assert window.roles.cell(role, "State").startswith("running")  # unharmed
    finally:
        window.stop_all()
        qtbot.waitUntil(lambda: window.source is None or window.source.done, timeout=90_000)
        window.close()
    assert_nothing_left_under(tmp_path, ports, timeout_s=30)
