"""The overview past a tile per role: 1,024 workers on 128 hosts show a tile per host (roles
running of all, the spread of its batches/s, its worst state first and as its colour), hosts in
trouble first, and a click that shows the host's roles with a way back. Fed with role statuses as
the controller publishes them (core.run.status.RoleStatus)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from core.run.status import RoleState, RoleStatus
from core.telemetry.step_window import StepSums
from core.views.overview import build_overview, host_tiles
from core.views.rates import status_rates
from tests.helpers.statuses import hosted_status


def cluster(workers: int, hosts: int) -> list[RoleStatus]:
    """1 ps + ``workers`` workers round-robin on node-1..node-``hosts``; worker i at 10 + i/100 batches/s."""
    roles = [hosted_status("ps:0", "node-1")]
    for i in range(workers):
        roles.append(
            hosted_status(
                f"worker:{i}",
                f"node-{i % hosts + 1}",
                window=StepSums(timed=10, timed_s=10 / (10.0 + i / 100), last_t=100.0),
                gpus=(i // hosts % 8,),
                gpu_utilization_percent=50.0,
            )
        )
    return roles


def in_trouble(roles: list[RoleStatus]) -> list[RoleStatus]:
    """worker:4 (node-5) failed, worker:9 (node-10) stalled, worker:70 (node-71) crash-looping."""
    roles = list(roles)
    roles[5] = dataclasses.replace(roles[5], state=RoleState.FAILED)
    roles[10] = dataclasses.replace(roles[10], stalled=True)
    roles[71] = dataclasses.replace(roles[71], crash_looping=True)
    return roles


def test_host_tiles_put_the_worst_hosts_first_with_their_rates_spread():
    roles = in_trouble(cluster(1024, 128))
    tiles = host_tiles(build_overview(roles, rates=status_rates(roles, None)))
    assert [t.host for t in tiles[:4]] == ["node-5", "node-71", "node-10", "node-1"]
    five, seventy_one, ten, one = tiles[:4]
    assert five.worst == "failed" and five.roles == 8 and five.running == 7 and five.trouble == (("failed", 1),)
    assert seventy_one.worst == "crash-looping" and seventy_one.running == 8
    assert ten.worst == "stalled" and ten.trouble == (("stalled", 1),)
    assert one.roles == 9 and one.running == 9 and one.trouble == ()  # the ps too
    # node-1 holds worker 0, 128, ..., 896: 10.00 to 18.96 batches/s
    assert one.rate_min == 10.0 and one.rate_max == pytest.approx(18.96) and one.rate_median is not None
    assert [t.host for t in tiles[4:7]] == ["node-2", "node-3", "node-4"]  # then in natural order


@pytest.mark.timeout(120)
def test_1024_workers_show_a_tile_per_host_and_a_click_shows_its_roles(qtbot):
    from PySide6 import QtCore

    from gui.run.overview import ClusterOverview

    view = ClusterOverview()
    qtbot.addWidget(view)
    view.resize(1900, 700)
    view.show()
    roles = in_trouble(cluster(1024, 128))
    view.set_roles(roles)  # the first statuses may come before any rate
    qtbot.waitUntil(lambda: view.painted_text.get("node-2") == "node-2 8/8 8 running")
    view.set_roles(roles, status_rates(roles, None))  # the same hosts in the same order, rates now
    # workers 1, 129 ... 897
    qtbot.waitUntil(lambda: view.painted_text.get("node-2") == "node-2 8/8 10.0–19.0 batches/s")
    assert view.host_mode and view.cell_rect("worker:0") is None  # no tile per role
    tiles = view.shown_host_tiles()
    assert len(tiles) == 128 and tiles[0].host == "node-5"
    rects = [view.host_tile_rect(t.host) for t in tiles]
    for i, a in enumerate(rects):
        assert all(not a.intersects(b) for b in rects[i + 1 : i + 12])
    assert view.painted_text["node-5"] == "node-5 7/8 1 failed"
    assert view.painted_text["node-10"] == "node-10 8/8 1 stalled"
    assert "1 failed" in view.legend_text() and "1022 running" in view.legend_text()
    # A click on a host: its roles as tiles, the legend's way back; a click on a role selects it.
    qtbot.mouseClick(view, QtCore.Qt.MouseButton.LeftButton, pos=view.host_tile_rect("node-5").center())
    assert view.drill == "node-5" and view.shown_host_tiles() == []
    assert view.cell_rect("worker:4") is not None and view.cell_rect("worker:5") is None
    assert [h.host for h in view._hosts()] == ["node-5"]
    with qtbot.waitSignal(view.sig_role_selected) as blocker:
        qtbot.mouseClick(view, QtCore.Qt.MouseButton.LeftButton, pos=view.cell_rect("worker:132").center())
    assert blocker.args == ["worker:132"]
    qtbot.mouseClick(view, QtCore.Qt.MouseButton.LeftButton, pos=view.back_rect().center())
    assert view.drill is None and len(view.shown_host_tiles()) == 128
    # A host recovering moves back to its place in natural order.
    healed = cluster(1024, 128)
    view.set_roles(healed, status_rates(healed, None))
    assert [t.host for t in view.shown_host_tiles()[:3]] == ["node-1", "node-2", "node-3"]


def test_256_roles_keep_a_tile_per_role(qtbot):
    from gui.run.overview import ClusterOverview

    view = ClusterOverview()
    qtbot.addWidget(view)
    view.resize(1900, 700)
    view.show()
    roles = cluster(255, 32)  # 256 roles with the ps
    view.set_roles(roles, status_rates(roles, None))
    assert not view.host_mode and view.cell_rect("worker:254") is not None and view.shown_host_tiles() == []


@pytest.mark.timeout(120)
def test_a_frame_at_1024_workers_is_a_frame(qtbot):
    """Statuses that change every frame (rates move) at 1,024 workers: the model and a paint of
    the host tiles stay well inside a frame's budget on a loaded machine (a generous bound; the
    figures are in docs/benchmarks.md)."""
    from gui.run.overview import ClusterOverview

    view = ClusterOverview()
    qtbot.addWidget(view)
    view.resize(1900, 700)
    view.show()
    roles = cluster(1024, 128)
    view.set_roles(roles, status_rates(roles, None))
    view.repaint()
    frames = []
    for f in range(5):
        moved = [dataclasses.replace(r, stalled=(i == f + 1)) for i, r in enumerate(roles)]
        t0 = time.perf_counter()
        view.set_roles(moved, status_rates(moved, None))
        view.repaint()
        frames.append(time.perf_counter() - t0)
    assert sorted(frames)[2] < 1.0, frames
