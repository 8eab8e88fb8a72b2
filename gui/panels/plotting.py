"""What every TowerDeck plot does to be drawn at 60 Hz (measured in ``benchmarks/bench_frames.py``).

A light grid at major ticks only, in an opaque pen: pyqtgraph draws grid lines from the axes'
cached pictures across the whole view, and a translucent pen (``showGrid(alpha=...)``) blends every
pixel of every line at every paint (0.7 ms against 0.2 ms a plot; minor ticks doubled it again).

Curves drawn at the pixel width (:func:`fit_to_pixels`): pyqtgraph's automatic downsampling
keeps about ``autoDownsampleFactor`` (default 5) points per pixel, so a bounded series of 8,192
points on a 1,100-pixel plot was never downsampled at all; at 1 the peak method keeps a min and a
max per pixel column, what a line at that width can show.

One paint per plot per frame (:func:`settle`):

pyqtgraph fits an auto-ranged view to its data when it paints (``ViewBox.prepareForPaint``). A
range that changes there changes the axes and the view's transform, which asks for a second paint
of the same plot in the same turn of the event loop: every frame that added a point was painted
twice (counted in ``benchmarks/bench_frames.py``). Doing that work right after the curves get their
data, before the paint, leaves nothing for the paint to change.
"""

from __future__ import annotations

import pyqtgraph as pg

GRID_COLOUR = "#e4e4e4"


def light_grid(plot: pg.PlotWidget | pg.PlotItem) -> None:
    """Grid lines at major ticks, drawn opaque and light (ticks share the pen)."""
    plot.showGrid(x=True, y=True, alpha=1.0)
    for axis in ("left", "bottom"):
        item = plot.getAxis(axis)
        item.setStyle(maxTickLevel=0)
        item.setTickPen(pg.mkPen(GRID_COLOUR))


def fit_to_pixels(curve: pg.PlotDataItem) -> None:
    """Peak downsampling to the view's pixel width and clipping to the view, set after the curve
    exists (pyqtgraph ignores them at creation)."""
    curve.setDownsampling(auto=True, method="peak")
    curve.opts["autoDownsampleFactor"] = 1.0  # no setter; read at each draw
    curve.setClipToView(True)


def settle(*plots: pg.PlotWidget | pg.PlotItem) -> None:
    """Fit the auto-ranged views of ``plots`` to their data and update their transforms now."""
    boxes = [plot.getViewBox() for plot in plots]
    for box in boxes:  # every range first: linked views follow each other
        box.updateAutoRange()
    for box in boxes:
        box.updateMatrix()
