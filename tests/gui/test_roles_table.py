"""The roles table at scale (issue 11): 1 ps + 64 workers on 8 hosts, grouped by job or host,
filtered, sorted by any column, with the selection and scroll kept across frames and regrouping.

The statuses are the controller's own :class:`RoleStatus` records, built here with varied
figures so that a wrong order or count shows; the live 64-worker window is driven in
test_window_at_scale.py."""

from __future__ import annotations

import random
import time
from typing import cast

import pytest

from core.run.status import ClusterPhase, ClusterStatus, RoleState, RoleStatus

WORKERS, HOSTS = 64, 8


def role(name: str, host: str, state: RoleState, **extra: object) -> RoleStatus:
    job, index = name.split(":")
    now = time.time()
    fields: dict[str, object] = dict(
        role=name,
        job=job,
        index=int(index),
        host=host,
        address=f"{host}:1",
        state=state,
        state_since=now,
        pid=1000 + int(index),
        attempt=1,
        restarts=0,
        returncode=None,
        signal=None,
        started_at=now - 60,
        ended_at=None,
        detail="",
        log_path=None,
    )
    fields.update(extra)
    return RoleStatus(**fields)  # type: ignore[arg-type]


def cluster(frame: int, failed: str = "worker:13") -> ClusterStatus:
    """The 65 roles at a frame: steps advance, CPU and step time vary by worker and frame."""
    rng = random.Random(frame)
    roles = [role("ps:0", "127.0.0.1", RoleState.RUNNING, cpu_percent=3.0)]
    for i in range(WORKERS):
        name = f"worker:{i}"
        roles.append(
            role(
                name,
                f"127.0.0.{i % HOSTS + 1}",
                RoleState.FAILED if name == failed else RoleState.RUNNING,
                step=frame * 10 + i * 7 % 50,
                step_time_s=0.01 + rng.random() / 10,
                cpu_percent=rng.uniform(1, 300),
                returncode=1 if name == failed else None,
            )
        )
    return ClusterStatus(ClusterPhase.RUNNING, None, "", tuple(roles))


@pytest.fixture
def view(qtbot):
    from gui.run.roles import RolesView

    view = RolesView(lambda role, n: [])
    qtbot.addWidget(view)
    view.resize(1200, 400)
    view.show()
    view.show_status(cluster(0), {})
    return view


def test_natural_order_and_group_by_host_with_counts_per_state(view):
    assert view.shown_roles()[:12] == ["ps:0", *[f"worker:{i}" for i in range(11)]]
    view.set_grouping("host")
    groups = view.shown_groups()
    assert len(groups) == HOSTS
    assert groups[0] == "127.0.0.1: 9 roles (9 running)"
    # worker:13 sits on 127.0.0.6 (13 % 8 + 1) and failed.
    assert groups[5] == "127.0.0.6: 8 roles (7 running, 1 failed)"
    assert all(g.endswith(": 8 roles (8 running)") for i, g in enumerate(groups) if i not in (0, 5))
    assert view.shown_roles()[:3] == ["ps:0", "worker:0", "worker:8"]
    view.set_grouping("job")
    assert view.shown_groups() == ["ps: 1 role (1 running)", "worker: 64 roles (63 running, 1 failed)"]
    # A collapsed group hides its roles, and stays collapsed over frames.
    view.table.collapse(view.proxy.index(1, 0))
    view.show_status(cluster(1), {})
    assert view.shown_roles() == ["ps:0"]


def test_filter_by_state_name_and_host(view):
    view.select_role("worker:13")
    view.set_filter("failed")
    assert view.shown_roles() == ["worker:13"] and view.count.text() == "1 of 65 roles"
    view.set_filter("worker:1")  # not worker:10..19
    assert view.shown_roles() == ["worker:1"]
    view.set_filter("127.0.0.3")
    assert view.shown_roles() == [f"worker:{i}" for i in range(2, WORKERS, HOSTS)]
    view.set_grouping("host")  # the filter holds in groups, and keeps only the matching group
    assert view.shown_groups() == ["127.0.0.3: 8 roles (8 running)"]
    view.set_filter("worker running 127.0.0.6")  # every word must match
    assert len(view.shown_roles()) == 7 and "worker:13" not in view.shown_roles()
    view.set_filter("")
    assert len(view.shown_roles()) == WORKERS + 1
    # The selected role, hidden by a filter, is selected again once a filter shows it.
    assert view.selected_roles() == ["worker:13"]


def test_sort_numbers_as_numbers_and_names_naturally(view):
    from gui.run.roles import COLUMNS

    status = cluster(0)
    by_cpu = [r.role for r in sorted(status.roles, key=lambda r: r.cpu_percent or 0.0)]
    view.table.sortByColumn(COLUMNS.index("CPU"), view.table.header().sortIndicatorOrder().AscendingOrder)
    assert view.shown_roles() == by_cpu
    # A new frame with other figures re-sorts in place.
    status = cluster(1)
    view.show_status(status, {})
    assert view.shown_roles() == [r.role for r in sorted(status.roles, key=lambda r: r.cpu_percent or 0.0)]
    view.table.sortByColumn(COLUMNS.index("Step"), view.table.header().sortIndicatorOrder().DescendingOrder)
    steps = [int(view.cell(name, "Step") or -1) for name in view.shown_roles()]
    assert steps == sorted(steps, reverse=True) and steps[0] > 9  # numbers, not text ("9" > "10")
    view.table.sortByColumn(COLUMNS.index("Role"), view.table.header().sortIndicatorOrder().DescendingOrder)
    assert view.shown_roles()[:3] == ["worker:63", "worker:62", "worker:61"]
    assert view.shown_roles()[-1] == "ps:0"


def test_a_frame_re_sorts_only_on_its_sort_column_and_measures_only_changed_cells(view, qtbot, monkeypatch):
    """Issue 19: every frame changed every row (uptime, step, CPU), and a full-width signal made the
    proxy re-sort and the header measure every cell of the 65 rows, 10 times a second."""
    from gui.run.roles import COLUMNS, RolesProxy
    from gui.run.roles_model import RolesModel

    calls = {"lessThan": 0, "data": 0}
    less_than, data = RolesProxy.lessThan, RolesModel.data

    def counting_less_than(self, left, right):  # type: ignore[no-untyped-def]
        calls["lessThan"] += 1
        return less_than(self, left, right)

    def counting_data(self, index, role=0):  # type: ignore[no-untyped-def]
        calls["data"] += 1
        return data(self, index, role)

    monkeypatch.setattr(RolesProxy, "lessThan", counting_less_than)
    monkeypatch.setattr(RolesModel, "data", counting_data)
    view.table.sortByColumn(COLUMNS.index("Role"), view.table.header().sortIndicatorOrder().AscendingOrder)
    qtbot.wait(1)
    calls.update(lessThan=0, data=0)
    for frame in range(1, 11):  # every worker's step, step time and CPU change at each frame
        view.show_status(cluster(frame), {})
        qtbot.wait(1)  # paints
    assert calls["lessThan"] == 0, "a frame that changed no role name re-sorted the table by name"
    # Painting the visible rows reads a few roles per cell; measuring the 65 rows read ~10000 a frame.
    assert calls["data"] < 10 * 2500, f"{calls['data'] / 10:.0f} reads of the model a frame"
    view.table.sortByColumn(COLUMNS.index("Step"), view.table.header().sortIndicatorOrder().AscendingOrder)
    calls.update(lessThan=0)
    view.show_status(cluster(11), {})
    assert calls["lessThan"] > 0  # the steps changed: re-sorted
    steps = [int(view.cell(name, "Step") or -1) for name in view.shown_roles()]
    assert steps[:-1] == sorted(steps[:-1]) and steps[-1] == -1  # ps:0 has no step: last
    # A cell that grows wider than its column widens it.
    column = COLUMNS.index("Step")
    view.show_status(cluster(10**9), {})
    needed = view.table.fontMetrics().horizontalAdvance(view.cell("worker:1", "Step"))
    assert view.table.header().sectionSize(column) >= needed


def test_selection_and_scroll_survive_updates_sorting_and_regrouping(view, qtbot):
    from gui.run.roles import COLUMNS

    view.resize(1200, 200)  # a view that scrolls
    view.select_role("worker:50")
    scroll = view.table.verticalScrollBar().value()
    assert scroll > 0 and view.selected_roles() == ["worker:50"]
    changes: list[list[str]] = []
    view.sig_selection_changed.connect(lambda: changes.append(view.selected_roles()))
    for frame in range(1, 11):
        view.show_status(cluster(frame), {})
        assert view.selected_roles() == ["worker:50"]
        assert view.table.verticalScrollBar().value() == scroll
    view.table.sortByColumn(COLUMNS.index("CPU"), view.table.header().sortIndicatorOrder().AscendingOrder)
    view.show_status(cluster(11), {})
    assert view.selected_roles() == ["worker:50"]
    view.set_grouping("host")
    assert view.selected_roles() == ["worker:50"]
    view.set_grouping("job")
    view.show_status(cluster(12, failed="worker:50"), {})
    assert view.selected_roles() == ["worker:50"] and changes == []
    # A role leaving the table takes its selection with it, and says so.
    smaller = cluster(13)
    view.show_status(
        ClusterStatus(smaller.phase, None, "", tuple(r for r in smaller.roles if r.role != "worker:50")), {}
    )
    assert view.selected_roles() == [] and changes == [[]]


def test_state_cell_colour_font_and_failed_row(view):
    from PySide6 import QtCore

    index = view.state_index("worker:13")
    assert index.data() == "failed"
    assert index.data(QtCore.Qt.ItemDataRole.FontRole).bold()
    assert index.data(QtCore.Qt.ItemDataRole.BackgroundRole).name() == "#fde2e2"
    assert view.state_index("worker:12").data(QtCore.Qt.ItemDataRole.BackgroundRole) is None


def test_at_scale_the_table_shows_new_figures_once_a_second_and_a_new_state_at_once(qtbot) -> None:
    """Issue 19: past 16 roles, a frame whose only news is figures (every step count moves every
    frame) leaves the table and the overview alone for a second; a role's new state goes through
    on the next frame. Up to 16 roles every frame goes through."""
    from core.run.status import ClusterPhase, ClusterStatus
    from gui.window import frame
    from gui.window.main_window import MainWindow

    window = MainWindow(None)
    qtbot.addWidget(window)
    assert window.frame._figures_due(cluster(0))
    assert not window.frame._figures_due(cluster(1))  # new steps and CPU only: not yet
    assert window.frame._figures_due(cluster(2, failed="worker:40"))  # worker:40 failed: at once
    assert not window.frame._figures_due(cluster(3, failed="worker:40"))
    states, _ = window.frame._figures_shown
    window.frame._figures_shown = (states, time.monotonic() - frame.FIGURES_EVERY_S)  # a second on
    assert window.frame._figures_due(cluster(4, failed="worker:40"))
    small = ClusterStatus(ClusterPhase.RUNNING, None, "", cluster(5).roles[: frame.FIGURES_SCALE_ROLES])
    assert window.frame._figures_due(small) and window.frame._figures_due(small)  # a small run: every frame


def big_cluster(frame: int, **changes: dict[str, object]) -> ClusterStatus:
    """1 ps + 256 workers on 32 hosts at a frame: every worker's step, loss, step time, CPU and RSS
    move at each frame (as a live run's do every second); ``changes``: a role's fields changed."""
    rng = random.Random(frame)
    roles = [role("ps:0", "127.0.0.1", RoleState.RUNNING, cpu_percent=3.0)]
    for i in range(256):
        name = f"worker:{i}"
        fields: dict[str, object] = dict(
            step=frame * 10 + i,
            loss=rng.random(),
            step_time_s=0.1 + rng.random() / 100,
            cpu_percent=rng.uniform(1, 50),
            rss_bytes=int(rng.uniform(1e8, 2e8)),
        )
        fields.update(changes.get(name, {}))
        roles.append(
            role(name, f"127.0.0.{i % 32 + 1}", cast(RoleState, fields.pop("state", RoleState.RUNNING)), **fields)
        )
    return ClusterStatus(ClusterPhase.RUNNING, None, "", tuple(roles))


class Counted:
    """Counts role_row calls, the model's dataChanged signals and font measurements."""

    def __init__(self, view, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        from PySide6 import QtGui

        from gui.run import roles

        self.rows = self.signals = self.measured = 0
        role_row, advance = roles.role_row, QtGui.QFontMetrics.horizontalAdvance

        def counting_row(*a, **k):  # type: ignore[no-untyped-def]
            self.rows += 1
            return role_row(*a, **k)

        def counting_advance(metrics, *a):  # type: ignore[no-untyped-def]
            self.measured += 1
            return advance(metrics, *a)

        monkeypatch.setattr(roles, "role_row", counting_row)
        monkeypatch.setattr(QtGui.QFontMetrics, "horizontalAdvance", counting_advance)
        view.model.dataChanged.connect(lambda *_: setattr(self, "signals", self.signals + 1))

    def take(self) -> tuple[int, int, int]:
        counts = (self.rows, self.signals, self.measured)
        self.rows = self.signals = self.measured = 0
        return counts


def test_257_rows_refreshed_at_once_cost_one_signal_and_few_font_measurements(view, qtbot, monkeypatch):
    from gui.run.roles import COLUMNS

    """At 257 roles every row's figures change once a second: the refresh emitted a dataChanged a
    row (257, each through the proxy and the view) and measured each changed cell's text (~2,600)."""
    view.show_status(big_cluster(0), {})  # a reset: the columns fitted
    view.show_status(big_cluster(1), {})  # the shapes of this run's texts seen once
    counted = Counted(view, monkeypatch)
    view.show_status(big_cluster(2), {})
    rows, signals, measured = counted.take()
    assert rows == 257
    assert signals == 1, f"{signals} dataChanged signals for one refresh of 257 rows"
    assert measured <= 20, f"{measured} texts measured for one refresh of 257 rows"
    assert view.cell("worker:200", "Step") == str(20 + 200)  # and the table shows it
    # A text wider than its column still widens it (new shapes are measured).
    column = COLUMNS.index("Step")
    view.show_status(big_cluster(10**9), {})
    needed = view.table.fontMetrics().horizontalAdvance(view.cell("worker:1", "Step"))
    assert view.table.header().sectionSize(column) >= needed


def test_a_large_run_s_rows_are_refreshed_a_share_a_frame_and_a_change_at_once(view, qtbot, monkeypatch):
    """A large run's table is fed every frame, a tenth of its rows' figures each time: the 257 rows
    at once were the 20-40 ms p95 frame at 256 workers. A new state, a restart, a stalled mark
    still reach their row on the frame that brings them."""
    view.show_status(big_cluster(0), {}, part=0, parts=10)
    counted = Counted(view, monkeypatch)
    per_frame = []
    for frame in range(1, 11):  # a second of frames, every worker's figures new in each
        view.show_status(big_cluster(frame), {}, part=frame % 10, parts=10)
        per_frame.append(counted.take())
    assert sum(rows for rows, _, _ in per_frame) == 257  # every row once a second
    assert max(rows for rows, _, _ in per_frame) <= 26, per_frame
    assert max(signals for _, signals, _ in per_frame) <= 26, per_frame
    # Every row shows the last second's figures: worker:i's step as of its part's frame.
    for i in (0, 5, 99, 255):
        frame = next(f for f in range(1, 11) if (i + 1) % 10 == f % 10)
        assert view.cell(f"worker:{i}", "Step") == str(frame * 10 + i)
    # worker:100 (row 101, part 1) fails, worker:7 restarts and worker:8 stalls on a frame of part 5.
    changes = {
        "worker:100": {"state": RoleState.FAILED, "returncode": 1},
        "worker:7": {"restarts": 1, "attempt": 2},
        "worker:8": {"stalled": True, "stalled_for_s": 65.0},
    }
    view.show_status(big_cluster(11, **changes), {}, part=5, parts=10)
    rows, _, _ = counted.take()
    assert rows <= 26 + 3
    assert view.state_index("worker:100").data() == "failed"
    assert view.cell("worker:100", "Exit").startswith("exit code 1")
    assert view.cell("worker:7", "Restarts") == "1"
    assert view.cell("worker:8", "State") == "running (stalled 1:05)"
    assert "worker:100 failed" in view.banner.text()


def test_a_frame_of_a_large_run_reads_neither_the_selection_nor_the_header_s_size(view, qtbot, monkeypatch):
    """Each frame of a large run feeds the table and asks its height; while the set of roles
    stands, neither reads the selection (its rows sorted by where they show) nor asks the header
    its size (which measures every column's title once a section moved): both were paid every
    frame at 257 roles."""
    from PySide6 import QtWidgets

    view.show_status(big_cluster(0), {}, part=0, parts=10)
    view.select_role("worker:7")
    view.content_height(cap=300)
    calls = {"selection": 0, "header": 0}
    selected_roles, size_hint = view.selected_roles, QtWidgets.QHeaderView.sizeHint

    def counting_selection():  # type: ignore[no-untyped-def]
        calls["selection"] += 1
        return selected_roles()

    def counting_size(header):  # type: ignore[no-untyped-def]
        calls["header"] += 1
        return size_hint(header)

    monkeypatch.setattr(view, "selected_roles", counting_selection)
    monkeypatch.setattr(QtWidgets.QHeaderView, "sizeHint", counting_size)
    heights = set()
    for frame in range(1, 11):
        view.show_status(big_cluster(frame), {}, part=frame % 10, parts=10)
        heights.add(view.content_height(cap=300))
    assert calls == {"selection": 0, "header": 0}, calls
    assert len(heights) == 1
    # A new set of roles (a reset) still puts the selection back.
    smaller = big_cluster(11)
    view.show_status(type(smaller)(smaller.phase, None, "", smaller.roles[:200]), {}, part=1, parts=10)
    assert calls["selection"] >= 1 and selected_roles() == ["worker:7"]


def test_batches_cell_is_a_figure_or_a_dash_that_says_why(view):
    from PySide6 import QtCore

    from core.telemetry.step_window import StepSums
    from core.views.rates import status_rates
    from gui.run.roles import BATCHES_COLUMN, COLUMNS

    counted = StepSums(steps=300.0, steps_s=30.0, last_t=100.0)  # the shared global step advanced
    timed = StepSums(steps=300.0, steps_s=30.0, timed=300, timed_s=15.0, last_t=100.0)  # 50 ms printed
    roles = [
        role("ps:0", "127.0.0.1", RoleState.RUNNING),
        role("worker:0", "127.0.0.1", RoleState.RUNNING, step=300, window=counted),
        role("worker:1", "127.0.0.2", RoleState.RUNNING, step=300, window=timed),
        role("worker:2", "127.0.0.2", RoleState.RUNNING),  # no step yet
    ]
    status = ClusterStatus(ClusterPhase.RUNNING, None, "", tuple(roles))
    view.forget_shown()
    view.show_status(status, {}, rates=status_rates(roles, None))  # no spec: between-graph, as the demo

    def cell(name: str) -> tuple[str, str]:
        index = view.state_index(name).siblingAtColumn(COLUMNS.index(BATCHES_COLUMN))
        return index.data(), index.data(QtCore.Qt.ItemDataRole.ToolTipRole)

    # Before: a blank cell without a tooltip for worker:0, worker:2 and the ps, read as broken.
    text, why = cell("worker:0")
    assert text == "-" and why.startswith("between-graph: the step it prints is the cluster's global step"), why
    assert cell("worker:1") == ("20.0", "its own updates, mean over the last 30 s")
    assert cell("worker:2") == ("-", "no steps in the last 30 s")
    assert cell("ps:0") == ("-", "not a training role: it makes no training steps")
