"""The Run page gives its room to the charts: at 1600x1000 with 1 ps + 2 workers the overview and the
roles table take the height their content needs (up to a share, then they scroll), the plots the
rest (60 % of the window, the step-time plot a third of the plots); splitters the user moved are
where they were after a restart of the window; no point sits on the frame; keys are outside the
data; units read ms and %. Real light-trainer processes where a run is needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.cluster.spec import load, parse_text
from tests.helpers.clusters import light_cluster
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.widgets import wait_frames

WINDOW = (1600, 1000)


def light_spec(tmp_path: Path, workers: int = 2, *, steps: int = 400):
    spec, problems = load(light_cluster(tmp_path, workers=workers, steps=steps, rate=20.0))
    assert spec is not None, problems
    return spec, [task.port for task in spec.tasks()]


def shown_window(qtbot, spec, tmp_path: Path):
    from gui.window.main_window import MainWindow

    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.resize(*WINDOW)
    window.show()
    qtbot.waitExposed(window)
    window.pages.setCurrentWidget(window.monitor)
    return window


def gap_to_frame_px(plot) -> tuple[float, float]:
    """The pixels between the highest and lowest drawn point and the top and bottom of the frame."""
    box = plot.getViewBox()
    (x_lo, x_hi), _ = box.viewRange()
    ys = []
    for curve in plot.getPlotItem().listDataItems():
        x, y = curve.getData()
        if curve.isVisible() and x is not None and len(x):
            inside = (x >= x_lo) & (x <= x_hi)
            ys.extend(float(v) for v in y[inside])
    assert ys, "no point drawn"
    frame = box.sceneBoundingRect()
    top = box.mapViewToScene(pg_point(x_lo, max(ys))).y() - frame.top()
    bottom = frame.bottom() - box.mapViewToScene(pg_point(x_lo, min(ys))).y()
    return top, bottom


def pg_point(x: float, y: float):
    from PySide6 import QtCore

    return QtCore.QPointF(x, y)


@pytest.mark.timeout(180)
def test_the_plots_get_the_room_the_overview_and_table_do_not_need(qtbot, tmp_path: Path) -> None:
    spec, ports = light_spec(tmp_path)
    window = shown_window(qtbot, spec, tmp_path)
    window.launch()
    qtbot.waitUntil(lambda: window.source is not None, timeout=30_000)
    training = window.training
    qtbot.waitUntil(lambda: len(training.time_curves) == 2, timeout=60_000)
    qtbot.waitUntil(
        lambda: all(c.getData()[0] is not None and len(c.getData()[0]) > 20 for c in training.time_curves.values()),
        timeout=60_000,
    )
    wait_frames(qtbot, window)  # the splitter fits the tiles and rows that are there now

    height = window.height()
    loss, time_ = training.loss_plot.height(), training.time_plot.height()
    assert loss + time_ >= 0.6 * height, (loss, time_, window.split.sizes())
    assert time_ >= (loss + time_) / 3, (loss, time_)
    # The overview and the table take what their content needs, and show all of it.
    scroll = window.overview_scroll
    needed = window.overview.content_height(scroll.viewport().width()) + 2 * scroll.frameWidth()
    assert scroll.height() <= needed + 2 and not scroll.verticalScrollBar().maximum()
    roles = window.roles
    assert roles.height() <= max(roles.content_height() + 2, roles.minimumSizeHint().height())
    assert window.roles.table.verticalScrollBar().maximum() == 0  # every row on screen
    # No point on or above the frame: the step times' first (highest) points were on the top edge.
    for plot in (training.loss_plot, training.time_plot):
        top, bottom = gap_to_frame_px(plot)
        assert top >= 3 and bottom >= 3, (plot.getPlotItem().titleLabel.text, top, bottom)
    # Units as people write them: the step time in ms, never pyqtgraph's "s (x0.001)".
    label = training.time_plot.getAxis("left").labelString()
    assert "(ms)" in label and "(x" not in label

    window.controls.stop_all.trigger()
    qtbot.waitUntil(lambda: window.controller.done, timeout=30_000)
    assert_nothing_left(ports, marker=str(tmp_path))


@pytest.mark.timeout(60)
def test_a_long_roles_table_stops_at_its_share_and_scrolls(qtbot, tmp_path: Path) -> None:
    from gui.window.main_window import OVERVIEW_MAX_SHARE, TABLE_MAX_SHARE

    ports = free_ports(65)
    tasks = ", ".join(f'"127.0.0.1:{p}"' for p in ports[1:])
    spec, problems = parse_text(
        f'strategy = "custom"\ncommand = ["python", "x.py"]\n[jobs.ps]\ntasks = ["127.0.0.1:{ports[0]}"]\n'
        f"[jobs.worker]\ntasks = [{tasks}]\n",
        tmp_path / "c.toml",
    )
    assert spec is not None, problems
    window = shown_window(qtbot, spec, tmp_path)
    qtbot.waitUntil(lambda: len(window.roles.shown_roles()) == 65, timeout=10_000)
    qtbot.waitUntil(lambda: window.split.sizes()[1] > 0 and window.roles.table.verticalScrollBar().maximum() > 0)
    total = sum(window.split.sizes())
    overview, table, tabs = window.split.sizes()
    assert table <= TABLE_MAX_SHARE * total + 1 and overview <= OVERVIEW_MAX_SHARE * total + 1
    assert tabs >= total * (1 - TABLE_MAX_SHARE - OVERVIEW_MAX_SHARE) - 2


def drag(qtbot, splitter, handle_index: int, dy: int) -> None:
    """A user's drag of a splitter handle with the mouse (press, move, release)."""
    from PySide6 import QtCore, QtGui, QtWidgets

    handle = splitter.handle(handle_index)
    start = QtCore.QPointF(handle.width() / 2, handle.height() / 2)
    end = start + QtCore.QPointF(0, dy)
    left = QtCore.Qt.MouseButton.LeftButton
    none = QtCore.Qt.KeyboardModifier.NoModifier
    for kind, at, buttons in (
        (QtCore.QEvent.Type.MouseButtonPress, start, left),
        (QtCore.QEvent.Type.MouseMove, end, left),
        (QtCore.QEvent.Type.MouseButtonRelease, end, QtCore.Qt.MouseButton.NoButton),
    ):
        event = QtGui.QMouseEvent(kind, at, handle.mapToGlobal(at), left, buttons, none)
        QtWidgets.QApplication.sendEvent(handle, event)
    qtbot.wait(50)


@pytest.mark.timeout(60)
def test_splitters_the_user_moved_are_where_they_were_after_a_restart(qtbot, tmp_path: Path) -> None:
    spec, _ports = light_spec(tmp_path)
    window = shown_window(qtbot, spec, tmp_path)
    qtbot.waitUntil(lambda: len(window.roles.shown_roles()) == 3, timeout=10_000)
    wait_frames(qtbot, window)
    plots_split = window.training.plots_split
    fitted_plots = plots_split.sizes()
    drag(qtbot, window.split, 2, 80)  # the table taller
    drag(qtbot, plots_split, 1, -120)  # the step-time plot taller
    moved_main, moved_plots = window.split.sizes(), plots_split.sizes()
    assert moved_plots[0] <= fitted_plots[0] - 100, (fitted_plots, moved_plots)
    wait_frames(qtbot, window)  # the window must not fit the table back to its rows
    assert window.split.sizes() == moved_main
    window.close()

    again = shown_window(qtbot, spec, tmp_path)
    wait_frames(qtbot, again)
    for got, want in ((again.split.sizes(), moved_main), (again.training.plots_split.sizes(), moved_plots)):
        assert all(abs(g - w) <= 2 for g, w in zip(got, want, strict=True)), (got, want)
    again.close()


def test_gpu_cards_leave_room_above_100_percent_and_keep_their_key_outside(qtbot) -> None:
    from gui.run.tabs.gpus import GpuPanel
    from gui.window.plot_render import plot_title

    panel = GpuPanel()
    qtbot.addWidget(panel)
    panel.resize(1200, 800)
    panel.show()
    for t in range(30):
        panel.add_sample({"host": "node1", "t": 100.0 + t, "figures": {"cpu_percent": 100.0}, "roles": {}, "gpus": []})
    panel.refresh()
    card = panel.cards[("node1", -1)]
    plot = card.plot
    assert plot.getPlotItem().legend is None  # pyqtgraph's legend sat over the curves
    key = card.box.findChildren(type(card.values))
    assert any("CPU %" in label.text() and "memory %" in label.text() for label in key)
    top, _bottom = gap_to_frame_px(plot)
    assert top >= 3, top  # a busy CPU's line at 100 % was drawn on the top border
    for side in ("left", "bottom"):
        assert plot.getAxis(side).autoSIPrefix is False
    # Exported, a card's plot is named by its boxes (it has no title of its own): not "plot-1".
    assert plot_title(plot) == "Host node1 CPU and memory"


def test_every_plot_of_the_run_page_writes_its_units_without_si_rescaling(qtbot, tmp_path: Path) -> None:
    """pyqtgraph rescales an axis whose values are tiny or huge and writes the factor in the label
    (``loss (x1e-06)``, ``s (x0.001)``): every plot of the Training tab, the spread views included,
    writes its unit instead."""
    import pyqtgraph as pg

    spec, _ports = light_spec(tmp_path)
    window = shown_window(qtbot, spec, tmp_path)
    plots = window.training.findChildren(pg.PlotWidget)
    assert len(plots) >= 5  # loss, step time, the two spread plots, the heat map
    for plot in plots:
        for side in ("left", "bottom"):
            axis = plot.getAxis(side)
            assert axis.autoSIPrefix is False, (plot.getPlotItem().titleLabel.text, side)
    # A loss of 1e-6 keeps its own numbers on the spread plot's axis.
    spread = window.training.spread_loss.plot
    spread.plot([0, 1, 2], [3e-6, 2e-6, 1e-6])
    spread.getAxis("left").updateAutoSIPrefix()
    assert "(x" not in spread.getAxis("left").labelString()
    window.close()


@pytest.mark.timeout(60)
def test_fitting_the_split_walks_only_the_rows_that_fill_the_tables_share(qtbot, tmp_path: Path) -> None:
    """The window fits its split every frame; with 257 roles the table is at its share after a
    dozen rows, and walking all of them each frame cost 13 % of the GUI thread."""
    ports = free_ports(257)
    tasks = ", ".join(f'"127.0.0.1:{p}"' for p in ports[1:])
    spec, problems = parse_text(
        f'strategy = "custom"\ncommand = ["python", "x.py"]\n[jobs.ps]\ntasks = ["127.0.0.1:{ports[0]}"]\n'
        f"[jobs.worker]\ntasks = [{tasks}]\n",
        tmp_path / "c.toml",
    )
    assert spec is not None, problems
    window = shown_window(qtbot, spec, tmp_path)
    roles = window.roles
    qtbot.waitUntil(lambda: len(roles.shown_roles()) == 257, timeout=10_000)
    qtbot.waitUntil(lambda: window.split.sizes()[1] > 0 and roles.table.verticalScrollBar().maximum() > 0)
    from gui.window.main_window import TABLE_MAX_SHARE

    cap = int(TABLE_MAX_SHARE * sum(window.split.sizes()))
    walked: list[int] = []
    measured: list[int] = []
    index, size_hint = roles.proxy.index, roles.table.sizeHintForRow
    roles.proxy.index = lambda row, column, *parent: walked.append(row) or index(row, column, *parent)
    roles.table.sizeHintForRow = lambda row: measured.append(row) or size_hint(row)
    try:
        for _ in range(10):  # a second of frames
            window.fit_split()
    finally:
        del roles.proxy.index
        del roles.table.sizeHintForRow
    row_h = roles.table.sizeHintForRow(0)
    # Other code asks for row 0 too; a walk's rows are 0, 1, 2 ... as far as it went (flat: none).
    assert not walked or max(walked) + 1 <= cap // row_h + 2, (max(walked), cap, row_h)
    # A row's height is measured once, not every frame (every cell of a row, through the proxy).
    assert len(measured) <= 1, measured
    # The same split as counting every row gives: the table at its share.
    assert window.split.sizes()[1] == min(roles.content_height(), cap) == cap
