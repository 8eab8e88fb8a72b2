"""The cluster overview: natural order, grouping by host, states a person can scan, clicks that
select a role, and a layout that stays legible from 3 roles to 64 workers on 8 hosts."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from core.run.status import RoleState, RoleStatus
from core.telemetry.step_window import StepSums
from core.views.overview import build_overview, natural_key, short_role
from core.views.rates import rate_text, status_rates
from tests.helpers.statuses import hosted_status


def big_cluster(workers: int = 64, hosts: int = 8) -> list[RoleStatus]:
    """1 ps + ``workers`` workers spread round-robin over 127.0.0.1..``hosts``, each worker with one GPU."""
    roles = [hosted_status("ps:0", "127.0.0.1")]
    for i in range(workers):
        roles.append(
            hosted_status(
                f"worker:{i}",
                f"127.0.0.{i % hosts + 1}",
                # 10 step times printed over the window, their mean 1 / (10 + i / 10) s: that many batches/s
                window=StepSums(timed=10, timed_s=10 / (10.0 + i / 10), last_t=100.0),
                gpus=(i // hosts,),
                gpu_utilization_percent=float(i),
            )
        )
    return roles


def test_natural_key_orders_numbers_by_value():
    names = ["worker:10", "worker:2", "worker:1", "ps:0", "worker:11", "chief:0"]
    assert sorted(names, key=natural_key) == ["chief:0", "ps:0", "worker:1", "worker:2", "worker:10", "worker:11"]
    hosts = ["127.0.0.10", "127.0.0.9", "node-a", "127.0.0.2"]
    assert sorted(hosts, key=natural_key) == ["127.0.0.2", "127.0.0.9", "127.0.0.10", "node-a"]


@given(st.lists(st.text(alphabet="ab:0123456789.", max_size=12), max_size=20))
def test_natural_key_never_fails_and_is_a_total_order(names):
    ordered = sorted(names, key=natural_key)
    assert sorted(ordered, key=natural_key) == ordered


def test_model_groups_by_host_with_jobs_in_order_and_trouble_first():
    roles = big_cluster(64, 8)
    roles[5] = dataclasses.replace(roles[5], state=RoleState.FAILED)  # worker:4 on 127.0.0.5
    roles[10] = dataclasses.replace(roles[10], stalled=True)  # worker:9 on 127.0.0.2
    model = build_overview(roles, rates=status_rates(roles, None))
    assert [h.host for h in model.hosts] == [f"127.0.0.{i}" for i in range(1, 9)]
    first = model.hosts[0]
    assert [c.role for c in first.cells] == ["ps:0"] + [f"worker:{i}" for i in range(0, 64, 8)]
    assert [c.short for c in first.cells[:3]] == ["ps0", "w0", "w8"]
    assert model.counts == (("failed", 1), ("stalled", 1), ("running", 63))
    assert model.hosts[4].worst == "failed" and model.hosts[1].worst == "stalled"
    assert model.role_count == 65
    assert [model.cell(f"worker:{i}").batches_per_s for i in (0, 63)] == [10.0, 16.3]
    assert model.cell("worker:63") is not None and model.cell("worker:63").gpu_utilization_percent == 63.0
    assert short_role("evaluator:0") == "e0" and short_role("chief:0") == "c0"


def test_overview_draws_64_workers_on_8_hosts_and_a_click_selects(qtbot):
    from gui.run.overview import ClusterOverview

    view = ClusterOverview()
    qtbot.addWidget(view)
    view.resize(1280, 420)
    view.show()
    view.set_roles(big_cluster(64, 8), status_rates(big_cluster(64, 8), None))
    qtbot.waitUntil(lambda: view.repaints > 0)
    assert "64 running" not in view.legend_text() and "65 running" in view.legend_text()
    rects = [view.cell_rect(f"worker:{i}") for i in range(64)]
    assert all(r is not None for r in rects)
    # Legible: every tile is at least the minimum size, inside the widget, and no two overlap.
    for r in rects:
        assert r.width() >= 40 and r.height() >= 30
        assert view.rect().contains(r)
    for i, a in enumerate(rects):
        for b in rects[i + 1 :]:
            assert not a.intersects(b)
    # Every tile shows its batches/s (it once did on w0-w9 only: "w10 11.0/s" did not fit).
    rates = {f"worker:{i}": rate_text(10.0 + i / 10) for i in range(64)}
    without = {
        role: view.painted_text.get(role) for role, rate in rates.items() if rate not in view.painted_text.get(role, "")
    }
    assert without == {}
    with qtbot.waitSignal(view.sig_role_selected) as blocker:
        qtbot.mouseClick(view, qtbot_left(), pos=rects[37].center())
    assert blocker.args == ["worker:37"]
    # The same statuses again change nothing (no repaint asked); a state change does.
    before = view.model_changes
    view.set_roles(big_cluster(64, 8), status_rates(big_cluster(64, 8), None))
    assert view.model_changes == before
    painted = view.repaints
    roles = big_cluster(64, 8)
    roles[38] = dataclasses.replace(roles[38], state=RoleState.BACKOFF)
    view.set_roles(roles, status_rates(roles, None))
    assert view.model_changes == before + 1
    qtbot.waitUntil(lambda: view.repaints > painted)
    assert view.model.cell("worker:37").category == "backoff"
    assert "1 backoff" in view.legend_text()


def test_overview_of_the_demo_cluster_uses_big_tiles(qtbot):
    from gui.run.overview import MAX_CELL, ClusterOverview

    view = ClusterOverview()
    qtbot.addWidget(view)
    view.resize(900, 300)
    view.show()
    view.set_roles(
        [
            hosted_status("ps:0", "127.0.0.1"),
            hosted_status("worker:0", "127.0.0.1"),
            hosted_status("worker:1", "127.0.0.1"),
        ]
    )
    rect = view.cell_rect("worker:1")
    assert rect is not None and rect.size() == MAX_CELL
    assert view.legend_text() == "3 running"
    box = view.host_rect("127.0.0.1")
    assert box is not None and box.width() < 4 * MAX_CELL.width() < view.width()  # hugs its 3 tiles


def qtbot_left():
    from PySide6 import QtCore

    return QtCore.Qt.MouseButton.LeftButton


def test_overview_too_small_for_its_tiles_grows_in_its_scroll_area(qtbot):
    """A window too short for 64 workers: the overview asks for the height it needs (its scroll
    area scrolls) and paints without error; asking resizes it during the paint."""
    from PySide6 import QtWidgets

    from gui.run.overview import ClusterOverview

    view = ClusterOverview()
    scroll = QtWidgets.QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setWidget(view)
    qtbot.addWidget(scroll)
    scroll.resize(500, 120)
    scroll.show()
    view.set_roles(big_cluster(64, 8), status_rates(big_cluster(64, 8), None))
    qtbot.waitUntil(lambda: view.repaints > 0)
    assert view.minimumHeight() > 120
    rects = [view.cell_rect(f"worker:{i}") for i in range(64)]
    assert all(r is not None and r.width() >= 40 for r in rects)


def test_tiles_paint_the_current_state_after_a_launch(qtbot):
    """The layout is cached while the roles stay the same; the colours must still follow the
    states (pending before a launch, running after it)."""
    from PySide6 import QtGui

    from core.views.overview import PlannedRole
    from gui.run.overview import CATEGORY_COLOURS, ClusterOverview

    view = ClusterOverview()
    qtbot.addWidget(view)
    view.resize(900, 300)
    view.show()

    def colour_of(role: str) -> str:
        rect = view.cell_rect(role)
        assert rect is not None
        image = view.grab().toImage()
        return QtGui.QColor(image.pixelColor(rect.x() + 4, rect.y() + rect.height() // 2)).name()

    view.set_roles([PlannedRole(r, r.partition(":")[0], "127.0.0.1") for r in ("ps:0", "worker:0", "worker:1")])
    assert colour_of("worker:0") == CATEGORY_COLOURS["pending"]
    view.set_roles(
        [
            hosted_status("ps:0", "127.0.0.1"),
            hosted_status("worker:0", "127.0.0.1"),
            hosted_status("worker:1", "127.0.0.1"),
        ]
    )
    assert colour_of("worker:0") == CATEGORY_COLOURS["running"]


def test_the_overview_s_height_is_laid_out_again_only_when_its_hosts_or_roles_change(qtbot, monkeypatch):
    """The window asks the overview's height every frame: at 256 workers that tried every tile
    size over 257 tiles each time. Now once per width while the hosts and their roles stand; a
    host more (or a role more on one) lays it out again."""
    from gui.run.overview import ClusterOverview

    view = ClusterOverview()
    qtbot.addWidget(view)
    view.resize(1280, 420)
    view.show()
    roles = big_cluster(200, 25)
    view.set_roles(roles, status_rates(roles, None))
    laid_out = []
    compute = view._compute_layout

    def counting(*a, **k):  # type: ignore[no-untyped-def]
        laid_out.append(1)
        return compute(*a, **k)

    monkeypatch.setattr(view, "_compute_layout", counting)
    first = view.content_height(1280)
    for frame in range(10):  # new figures every frame: the same hosts and roles
        moved = [dataclasses.replace(r, cpu_percent=float(frame)) for r in roles]
        view.set_roles(moved, status_rates(moved, None))
        assert view.content_height(1280) == first
    assert len(laid_out) == 1
    more = big_cluster(200, 26)  # a host more
    view.set_roles(more, status_rates(more, None))
    assert view.content_height(1280) == compute(1280, 1 << 20).height
    assert len(laid_out) == 2
