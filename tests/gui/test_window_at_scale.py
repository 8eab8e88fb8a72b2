"""The window on 1 ps + 64 workers spread over 8 loopback "hosts" (each its own agent, each
seeing 8 GPUs through the NVML double, as this machine has none): the overview shows every role
on its host, the GPUs tab leads with a grid of 64 tiles, a click on a tile selects the role, and
stopping the cluster leaves nothing behind. Real processes: the light trainer, no TensorFlow.

Meanwhile the window never freezes (issue 19): every garbage collection runs on the GUI thread
(the controller and the 8 agent links parse JSON all the time beside it), and the event loop
keeps turning while 64 workers stream in."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from core.cluster.spec import load
from tests.helpers.clusters import spread_light_cluster
from tests.helpers.gcwatch import collection_threads
from tests.helpers.heartbeat import INTERVAL_MS, Heartbeat
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT

pytestmark = pytest.mark.slow

WORKERS, HOSTS = 64, 8
FAKE_NVML = str(ROOT / "tests" / "helpers" / "fake_nvml.py")


def test_64_workers_on_8_hosts_in_the_overview_and_the_gpu_grid(qtbot, tmp_path: Path, monkeypatch):
    from gui.window.main_window import MainWindow

    monkeypatch.setenv("TOWERDECK_NVML_MODULE", FAKE_NVML)
    monkeypatch.setenv("FAKE_NVML_GPUS", "8")
    cluster, ports = spread_light_cluster(tmp_path, workers=WORKERS, hosts=HOSTS, name="big", gpus=[0])
    spec, problems = load(cluster)
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.resize(1400, 900)
    window.show()
    overview = window.overview
    assert overview.model.role_count == WORKERS + 1 and overview.legend_text() == f"{WORKERS + 1} pending"
    beat = Heartbeat()
    with collection_threads() as threads:
        _follow_the_run(qtbot, window, overview)
    gui_thread = threading.current_thread().name
    assert threads and set(threads) == {gui_thread}, f"collections ran on {sorted(set(threads))}"
    # A gap is the GUI thread's own CPU, its wait for a CPU, and the rest: blocked (a lock, a read).
    # The window's code controls the first and the last, however loaded the machine: GUI-thread CPU
    # per turn at 64 workers is 0.1-0.2 s on a quiet machine, 0.27-0.38 s beside two CPU hogs or
    # other suites (0.52 s on CI when a turn made two GPU cards: one a frame since); blocked time
    # catches a GUI thread waiting on I/O. The wait for a CPU is the machine's: beside
    # `stress-ng --cpu 2`, 65 trainers and 8 agents on 2 cores, one gap was 2.91 s, 2.29 s of it
    # in the run queue. The gap bound catches a freeze of the old kind (6.7 s of CPU, issue 19).
    print(beat.describe_longest())
    beat.assert_turning(max_gap_s=10.0, max_cpu_s=0.5, max_blocked_s=1.0)
    assert_nothing_left(ports, f"--test_marker={tmp_path.name}")


def _follow_the_run(qtbot, window, overview) -> None:
    window.controls.launch.trigger()
    try:
        qtbot.waitUntil(lambda: overview.legend_text().startswith(f"{WORKERS + 1} running"), timeout=180_000)
        hosts = overview.model.hosts
        assert [h.host for h in hosts] == [f"127.0.0.{i}" for i in range(1, HOSTS + 1)]
        assert [c.role for c in hosts[1].cells] == [f"worker:{i}" for i in range(1, WORKERS, HOSTS)]
        # Steps arrive: the tiles carry their batches/s, the cluster's global steps/s is in the legend.
        qtbot.waitUntil(lambda: "global steps/s" in overview.legend_text(), timeout=120_000)
        # Every worker's tile shows its rate (w10 and up once showed none: too narrow for it).
        workers = [f"worker:{i}" for i in range(WORKERS)]
        qtbot.waitUntil(lambda: all("/s" in overview.painted_text.get(w, "") for w in workers), timeout=60_000)

        window.tabs.setCurrentWidget(window.gpus)
        gpus = window.gpus
        qtbot.waitUntil(lambda: len(gpus.grid.board) == HOSTS * 8, timeout=180_000)
        qtbot.waitUntil(lambda: gpus.grid_scroll.isVisible() and len(gpus.grid.headers()) == HOSTS, timeout=10_000)

        def shown() -> list[tuple[str, int]]:
            return [k for k, c in gpus.cards.items() if k[1] >= 0 and not c.box.isHidden()]

        qtbot.waitUntil(lambda: len(shown()) == 1, timeout=10_000)  # cards are made a few a frame
        assert len([k for k in gpus.cards if k[1] >= 0]) <= gpus.figures.grid_from + 1

        # A click on a tile in the overview selects that role in the table (and so the logs).
        rect = overview.cell_rect("worker:37")
        assert rect is not None
        from PySide6 import QtCore

        from gui.run.roles import COLUMNS

        def user_turn() -> None:
            # A user's clicks are events, one per turn of the loop; done back to back here, five
            # regroups and filters counted as one turn of GUI-thread CPU (0.52 s on CI with a card).
            qtbot.wait(2 * INTERVAL_MS)

        qtbot.mouseClick(overview, QtCore.Qt.MouseButton.LeftButton, pos=rect.center())
        user_turn()
        assert window.selected_roles() == ["worker:37"]

        # The roles table at scale: grouped by host with counts per state, filtered, sorted by
        # step (numbers), the selection kept over live frames and a regroup.
        roles = window.roles
        roles.set_grouping("host")
        user_turn()
        groups = roles.shown_groups()
        assert len(groups) == HOSTS and groups[0] == "127.0.0.1: 9 roles (9 running)"
        assert groups[1:] == [f"127.0.0.{h}: 8 roles (8 running)" for h in range(2, HOSTS + 1)]
        roles.set_filter("127.0.0.3")
        user_turn()
        assert roles.shown_roles() == [f"worker:{i}" for i in range(2, WORKERS, HOSTS)]
        roles.set_filter("")
        user_turn()
        roles.set_grouping("none")
        user_turn()
        roles.table.sortByColumn(COLUMNS.index("Step"), QtCore.Qt.SortOrder.DescendingOrder)
        user_turn()
        before = {r: roles.cell(r, "Step") for r in roles.shown_roles()}
        qtbot.waitUntil(lambda: sum(roles.cell(r, "Step") != before[r] for r in before) > WORKERS // 2, timeout=30_000)
        steps = [int(roles.cell(r, "Step") or -1) for r in roles.shown_roles()]
        assert steps == sorted(steps, reverse=True) and roles.shown_roles()[-1] == "ps:0"
        assert window.selected_roles() == ["worker:37"]
        roles.set_grouping("job")
        assert window.selected_roles() == ["worker:37"]
    finally:
        window.stop_all()
        qtbot.waitUntil(lambda: window.source is not None and window.source.done, timeout=120_000)
