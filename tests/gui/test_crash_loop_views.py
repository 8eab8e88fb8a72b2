"""A crash loop looks like one in the window: a category and an amber of its own on the tile and the
row, never counted as running; the tile says "crash-looping" and, between attempts, when the next
begins; the Exit column says how the last attempt ended and why (a failed role's too); the banner
says the trouble and has *Show log*.

The statuses are the controller's own :class:`RoleStatus` records, with the crash-loop fields a
launch gives them (tests/core/test_crash_loop.py shows a real launch filling them in); the window
on a real crash loop is tests/gui/test_crash_loop_window.py."""

from __future__ import annotations

import dataclasses
import re
import time

from core.run.status import ClusterPhase, ClusterStatus, RoleStatus
from core.telemetry.step_window import StepSums
from core.views.rates import status_rates
from tests.helpers.statuses import role_status

ERROR = "ZeroDivisionError: division by zero"


def crash_cluster(now: float, *, between_attempts: bool = True) -> tuple[RoleStatus, ...]:
    """1 ps + 3 workers: worker:1 crash-looping (between attempts 2 and 3, or in attempt 3),
    worker:2 failed for good, the others running."""
    looping = dict(crash_looping=True, last_exit="exit code 1", last_error=ERROR, attempts=5, restarts=2)
    worker1 = (
        role_status(
            "worker:1", state="backoff", attempt=2, returncode=1, next_attempt_at=now + 4.4, ended_at=now, **looping
        )
        if between_attempts
        else role_status("worker:1", attempt=3, pid=4242, started_at=now - 1, **looping)
    )
    return (
        role_status("ps:0", pid=10, started_at=now - 60),
        # Its last 30 s: 285 steps, its printed step times 1/9.5 s: 9.5 global steps/s and batches/s.
        role_status(
            "worker:0",
            pid=11,
            started_at=now - 60,
            step=120,
            window=StepSums(steps=285, steps_s=30, timed=10, timed_s=10 / 9.5, last_t=now),
        ),
        worker1,
        role_status(
            "worker:2",
            state="failed",
            returncode=3,
            last_exit="exit code 3",
            last_error="RuntimeError: bad shard 7",
            detail="exit code 3 (RuntimeError: bad shard 7); gave up after 0 restarts",
        ),
    )


def test_the_overview_gives_a_crash_loop_its_category_colour_and_words() -> None:
    """On the old code worker:1 was ``backoff`` between attempts and ``running`` during them: the
    legend said "3 running" and the tile nothing."""
    from core.views.overview import CATEGORY_ORDER, build_overview, category
    from gui.run.overview import CATEGORY_COLOURS

    now = 100.0
    between = build_overview(crash_cluster(now), now=now)
    during = build_overview(crash_cluster(now, between_attempts=False), now=now)
    for model in (between, during):
        cell = model.cell("worker:1")
        assert cell is not None and cell.category == "crash-looping"
        assert dict(model.counts) == {"failed": 1, "crash-looping": 1, "running": 2}  # never "3 running"
        assert cell.trouble.startswith(f"crash-looping: exit 1 ({ERROR}), attempt 3 of 5")
    assert between.cell("worker:1").notes == ("crash-looping", "next in 4 s")  # type: ignore[union-attr]
    assert during.cell("worker:1").notes == ("crash-looping",)  # type: ignore[union-attr]
    assert CATEGORY_ORDER.index("crash-looping") < CATEGORY_ORDER.index("running")
    # A role that stopped crash-looping (the policy gave up, a healthy attempt) is what it is now.
    assert category(role_status("worker:1", state="failed", crash_looping=False)) == "failed"
    # Its own colour: amber, none of backoff's orange, failed's red, stalled's brown, starting's gold.
    colours = {CATEGORY_COLOURS[c] for c in ("backoff", "failed", "stalled", "starting", "running", "waiting")}
    assert CATEGORY_COLOURS["crash-looping"] not in colours


def test_the_tile_legend_row_exit_and_banner_of_a_crash_looping_worker(qtbot) -> None:
    """On the old code: a green running tile, "3 running", an empty Exit column, no banner."""
    from PySide6 import QtCore, QtGui

    from gui.run.overview import CATEGORY_COLOURS, ClusterOverview
    from gui.run.roles import COLUMNS, RolesView
    from gui.run.roles_model import CRASH_LOOP_BACKGROUND, FAILED_BACKGROUND

    now = time.time()
    roles = crash_cluster(now)
    overview = ClusterOverview()
    qtbot.addWidget(overview)
    overview.resize(900, 300)
    overview.show()
    overview.set_roles(roles, status_rates(roles, None))
    image = overview.grab().toImage()  # paints
    rect = overview.cell_rect("worker:1")
    assert rect is not None
    assert QtGui.QColor(image.pixelColor(rect.x() + 3, rect.y() + 3)).name() == CATEGORY_COLOURS["crash-looping"]
    assert re.fullmatch(r"w1 crash-looping next in [45] s", overview.painted_text["worker:1"]), overview.painted_text
    assert overview.legend_text() == (
        "1 failed · 1 crash-looping · 2 running · 9.50 global steps/s (mean over the last 30 s)"
    )

    view = RolesView(lambda role, n: [])
    qtbot.addWidget(view)
    view.resize(1400, 500)
    view.show()
    status = ClusterStatus(ClusterPhase.RUNNING, None, "", roles)
    view.show_status(status, {})
    state = view.state_index("worker:1")
    assert re.fullmatch(r"crash-looping \(attempt 3 of 5 in [45] s\)", state.data()), state.data()
    assert state.data(QtCore.Qt.ItemDataRole.FontRole).bold()
    assert state.data(QtCore.Qt.ItemDataRole.BackgroundRole) == CRASH_LOOP_BACKGROUND
    assert state.data(QtCore.Qt.ItemDataRole.ToolTipRole).startswith(f"crash-looping: exit 1 ({ERROR}), attempt 3")
    assert view.cell("worker:1", "Exit") == f"exit code 1 ({ERROR})"
    assert view.cell("worker:2", "Exit") == "exit code 3 (RuntimeError: bad shard 7)"  # a failed role's too
    assert view.state_index("worker:2").data(QtCore.Qt.ItemDataRole.BackgroundRole) == FAILED_BACKGROUND
    assert view.cell("worker:0", "Exit") == "" and "Exit" in COLUMNS
    view.set_grouping("job")
    assert "worker: 3 roles (1 running, 1 crash-looping, 1 failed)" in view.shown_groups()
    view.set_filter("crash-looping")
    assert view.shown_roles() == ["worker:1"]
    view.set_filter("")
    # During an attempt: the attempt it is in, and the last attempt's exit and error still said.
    view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", crash_cluster(now, between_attempts=False)), {})
    assert view.cell("worker:1", "State") == "crash-looping (attempt 3 of 5)"
    assert view.cell("worker:1", "Exit") == f"exit code 1 ({ERROR})"

    view.show_status(status, {})
    assert view.banner.isVisibleTo(view)
    text = view.banner.text()
    assert "<b>worker:2 failed</b>: exit 3 (RuntimeError: bad shard 7)" in text
    assert re.search(
        rf"<b>worker:1 crash-looping</b>: exit 1 \({ERROR}\), attempt 3 of 5 · next attempt in [45] s", text
    )
    assert set(view.banner.buttons) == {"worker:1", "worker:2"}
    asked: list[str] = []
    view.banner.sig_show_log.connect(asked.append)
    qtbot.mouseClick(view.banner.buttons["worker:1"], QtCore.Qt.MouseButton.LeftButton)
    assert asked == ["worker:1"]
    # The loop over (an attempt made a step): the banner, the row and the tile say so at once.
    healthy = tuple(
        role_status("worker:1", pid=4243, attempt=3, step=5, last_exit="exit code 1", last_error=ERROR)
        if r.role == "worker:1"
        else r
        for r in roles
        if r.role != "worker:2"
    )
    view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", healthy), {})
    overview.set_roles(healthy)
    assert view.banner.isHidden() and view.cell("worker:1", "State") == "running"
    assert overview.legend_text().startswith("3 running")


def test_the_banner_keeps_its_rows_while_a_countdown_ticks_and_counts_what_does_not_fit(qtbot) -> None:
    """64 crash-looping workers would push the table off the screen: four lines, then a count."""
    from gui.run.banner import MAX_ROWS
    from gui.run.roles import RolesView

    view = RolesView(lambda role, n: [])
    qtbot.addWidget(view)
    view.show()
    now = time.time()
    roles = tuple(
        role_status(
            f"worker:{i}",
            state="backoff",
            attempt=2,
            crash_looping=True,
            last_exit="exit code 1",
            last_error=ERROR,
            attempts=5,
            next_attempt_at=now + 30,
        )
        for i in range(64)
    )
    view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", roles), {})
    buttons = dict(view.banner.buttons)
    assert len(buttons) == MAX_ROWS
    assert view.banner.text().endswith("… and 60 more roles in trouble: filter the table by their state")
    later = tuple(dataclasses.replace(r, next_attempt_at=now + 20) for r in roles)
    view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", later), {})
    assert view.banner.buttons == buttons  # the same widgets: only the countdown's text changed


def test_the_exit_column_widens_to_show_why_when_a_row_turns_amber_or_red(qtbot) -> None:
    """A row whose background changes (running -> crash-looping, running -> failed) changes its
    Exit cell in the same frame. On the old code only the first and last columns of such a row were
    measured: the Exit column kept its header's width and read "exit ..." (seen under Xvfb)."""
    from gui.run.roles import COLUMNS, RolesView

    now = time.time()
    for role in ("worker:2", "worker:1"):  # turns red (failed), turns amber (crash-looping)
        view = RolesView(lambda role, n: [])
        qtbot.addWidget(view)
        view.resize(1400, 500)
        view.show()
        view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", (role_status(role, pid=4241),)), {})
        ended = next(r for r in crash_cluster(now) if r.role == role)
        view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", (ended,)), {})
        text = view.cell(role, "Exit")
        assert text.startswith("exit code ")
        width = view.table.header().sectionSize(COLUMNS.index("Exit"))
        assert width >= view.table.fontMetrics().horizontalAdvance(text), (role, text, width)


def test_the_banner_draws_a_role_that_gave_up_as_failed_not_as_still_looping(qtbot) -> None:
    """Seen under Xvfb: when the policy gave up, the banner's text said "worker:1 failed" but the
    crash-looping line it replaced was still drawn (deleted later, never hidden)."""
    from gui.run.roles import RolesView

    view = RolesView(lambda role, n: [])
    qtbot.addWidget(view)
    view.show()
    now = time.time()
    view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", crash_cluster(now)[:3]), {})
    (line,) = view.banner.shown_text()
    assert "worker:1 crash-looping" in line
    gave_up = role_status(
        "worker:1", state="failed", attempt=5, returncode=1, last_exit="exit code 1", last_error=ERROR, restarts=4
    )
    view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", (*crash_cluster(now)[:2], gave_up)), {})
    assert view.banner.shown_text() == [f"<b>worker:1 failed</b>: exit 1 ({ERROR})"]
