"""The window shows a recovery: a killed ps of a between-graph cluster (light trainers) puts an
amber "recovering: ..." line above the run, which turns to "recovered: resumed at step N" once the
restarted roles train again; the words are the journal's, as `ctl status` prints them."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from core.cluster.spec import load
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT

CLUSTER = """
strategy = "between_graph"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=0", "--rate_hz=20"]
stop_grace_s = 2
[jobs.ps]
tasks = ["127.0.0.1:{p0}"]
[jobs.worker]
tasks = ["127.0.0.1:{p1}", "127.0.0.1:{p2}"]
[recovery]
backoff_s = 0.5
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_killed_ps_shows_its_recovery_above_the_run(qtbot, tmp_path: Path) -> None:
    from gui.window.main_window import MainWindow

    p0, p1, p2 = free_ports(3)
    cluster = tmp_path / "c.toml"
    cluster.write_text(CLUSTER.format(trainers=ROOT / "resources" / "trainers", p0=p0, p1=p1, p2=p2))
    spec, problems = load(cluster)
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    window.launch()
    banner = window.recovery_banner

    def ps_pid() -> int | None:
        source = window.source
        roles = source.status().roles if source is not None else []
        ps = next((r for r in roles if r.role == "ps:0"), None)
        workers = [r for r in roles if r.role.startswith("worker") and (r.step or 0) >= 10]
        return ps.pid if ps is not None and ps.state == "running" and len(workers) == 2 else None

    qtbot.waitUntil(lambda: ps_pid() is not None, timeout=90_000)
    assert not banner.isVisible()  # no recovery, no line
    os.kill(ps_pid() or 0, signal.SIGKILL)
    qtbot.waitUntil(lambda: banner.isVisible() and banner.text().startswith("recovering:"), timeout=30_000)
    assert banner.text() == "recovering: ps:0 killed by SIGKILL; restarting the cluster (recovery 1 of 3)"
    assert "#fff1c7" in banner.styleSheet()  # amber while under way
    qtbot.waitUntil(lambda: banner.text().startswith("recovered: resumed at step"), timeout=90_000)
    assert "#fff1c7" not in banner.styleSheet()
    window.controller.stop_all()
    qtbot.waitUntil(lambda: window.controller.done, timeout=60_000)
    assert_nothing_left([p0, p1, p2], marker=str(tmp_path))
