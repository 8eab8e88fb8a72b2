"""The spread views draw what the accumulator says: the median line and bands, the slowest
workers on top with a key above the plot, and a heat map whose straggler row is bright."""

from __future__ import annotations

import math

import numpy as np

from tests.helpers.step_times import step_times


def test_spread_plot_draws_median_bands_and_named_slowest(qtbot):
    from gui.run.tabs.spread import SpreadPlot, refresh_from

    view = SpreadPlot("Step time by step", "step time (s)")
    qtbot.addWidget(view)
    view.resize(900, 500)
    view.show()
    acc = step_times(64, 400, slow="worker:13", slow_from=200)
    refresh_from(acc, view, None, columns=200)
    xs, ys = view.median.getData()
    assert len(xs) > 100 and np.allclose(ys, np.median([0.1 + 0.001 * w for w in range(64)]), rtol=0.02)
    # The bands are filled areas (an edge without a path would leave them silently invisible).
    for band in (view.outer_band, view.inner_band):
        assert not band.path().isEmpty() and band.path().boundingRect().height() > 0
    assert view.edges[1][-1] > 1.9 * (0.1 + 0.001 * 13) * 0.99
    refresh_from(acc, view, None, columns=200, highlight={"worker:13": "226 ms"})
    xs, ys = view.highlights["worker:13"].getData()
    assert ys[0] == 0.1 + 0.001 * 13 and math.isclose(ys[-1], 2 * (0.1 + 0.001 * 13))
    text = view.key_text()
    assert "median of 64 workers" in text and "worker:13 226 ms" in text
    view.set_highlights({}, {})
    assert view.highlights == {} and "worker:13" not in view.key_text()
    # The key is a label above the plot: it never covers the data.
    assert view.key.geometry().bottom() <= view.plot.geometry().top()


def test_heatmap_rows_are_workers_and_the_straggler_is_bright(qtbot):
    from gui.run.tabs.spread import StepTimeHeatmap, refresh_from

    view = StepTimeHeatmap()
    qtbot.addWidget(view)
    view.resize(900, 600)
    view.show()
    acc = step_times(64, 400, slow="worker:13", slow_from=200)
    refresh_from(acc, None, view, columns=100)
    assert view.rows[0] == "worker:0" and view.rows[13] == "worker:13" and len(view.rows) == 64
    image = view.image.image
    assert image.shape == (64, 100)
    assert image[13, -1] > 1.6 and image[12, -1] < 1.0  # 2 x 0.113 s over a median of 0.1315 s
    qtbot.waitUntil(lambda: view.plot.getViewBox().height() > 300)
    view._set_row_ticks()
    ticks = view.plot.getAxis("left")._tickLevels[0]
    assert ticks[0][1] == "worker:0" and 8 <= len(ticks) < 64  # as many as fit, not one per row


def test_a_heatmap_cell_without_data_is_not_drawn_in_the_scale_s_fast_colour(qtbot):
    """Before: no data was drawn as 0.0, the darkest colour, which the scale reads as "much faster
    than the median": workers not read yet (a window behind a 1,024-worker run) looked fast."""
    from PySide6 import QtCore

    from core.views.spread import HeatMap
    from gui.run.tabs.spread import HEAT_RANGE, StepTimeHeatmap

    view = StepTimeHeatmap()
    qtbot.addWidget(view)
    view.resize(600, 400)
    view.show()
    values = np.full((2, 10), 1.0)
    values[1, 5:] = np.nan  # worker:1 has no data past bin 5
    values[0, 0] = HEAT_RANGE[0]  # the scale's fastest colour, for comparison
    view.set_heatmap(HeatMap(rows=("worker:0", "worker:1"), edges=np.arange(11.0), values=values))
    qtbot.waitUntil(lambda: view.plot.getViewBox().height() > 100)
    image = view.plot.grab().toImage()

    def colour_at(col: float, row: float) -> tuple[int, int, int]:
        scene = view.plot.getViewBox().mapViewToScene(QtCore.QPointF(col, row))
        point = view.plot.mapFromScene(scene)
        c = image.pixelColor(point)
        return c.red(), c.green(), c.blue()

    fastest = colour_at(0.5, 0.5)
    no_data = colour_at(8.5, 1.5)
    assert no_data != fastest, (no_data, fastest)
    assert min(no_data) > 200, no_data  # the plot's white shows through: nothing there
