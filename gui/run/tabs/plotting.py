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

import math
from typing import Any

import pyqtgraph as pg
from PySide6 import QtCore

GRID_COLOUR = "#e4e4e4"


def light_grid(plot: pg.PlotWidget | pg.PlotItem) -> None:
    """Grid lines at major ticks, drawn opaque and light (ticks share the pen)."""
    plot.showGrid(x=True, y=True, alpha=1.0)
    for axis in ("left", "bottom"):
        item = plot.getAxis(axis)
        item.setStyle(maxTickLevel=0)
        item.setTickPen(pg.mkPen(GRID_COLOUR))


# The fraction of a view's range left empty at each side when it fits its data: no point sits on
# the frame (pyqtgraph's default, 2 % of a short plot, put the first step times on the top edge).
DATA_PADDING = 0.06


def axis_label(plot: pg.PlotWidget | pg.PlotItem, side: str, text: str, *, unit: str = "") -> None:
    """``text (unit)`` on the axis, the unit as people write it (ms, GiB, %). pyqtgraph's automatic
    SI prefix is turned off: it rescales the ticks and writes ``s (x0.001)`` or ``(x1e-06)``."""
    axis = plot.getAxis(side)
    axis.enableAutoSIPrefix(False)
    if text or unit:  # an empty label would still take its width
        plot.setLabel(side, f"{text} ({unit})" if text and unit else text or unit)


def padded(plot: pg.PlotWidget | pg.PlotItem) -> None:
    """Room between the data and the frame when the view fits its data (see :data:`DATA_PADDING`)."""
    plot.getViewBox().setDefaultPadding(DATA_PADDING)


def fit_to_pixels(curve: pg.PlotDataItem, *, clip: bool = True) -> None:
    """Peak downsampling to the view's pixel width and (``clip``) clipping to the view, set after
    the curve exists (pyqtgraph ignores them at creation). Clipping assumes X increases along the
    data: not for a curve whose segments start again from a lower X (a restarted worker)."""
    curve.setDownsampling(auto=True, method="peak")
    curve.opts["autoDownsampleFactor"] = 1.0  # no setter; read at each draw
    curve.setClipToView(clip)


def settle(*plots: pg.PlotWidget | pg.PlotItem) -> None:
    """Fit the auto-ranged views of ``plots`` to their data and update their transforms now."""
    boxes = [plot.getViewBox() for plot in plots]
    for box in boxes:  # every range first: linked views follow each other
        box.updateAutoRange()
    for box in boxes:
        box.updateMatrix()


class FollowX:
    """Keeps a plot's X range (``axis="y"``: its Y range) on its data while moving it as seldom
    as possible.

    pyqtgraph's auto-range refits the view to the data whenever the data changes: in a live plot
    that is every frame, and each move re-clips, re-downsamples and re-ticks every curve. Here the
    range is set with ``headroom`` (a fraction of the data's width) on both sides, more on the side
    the data grows to (``ahead``: past its end; ``behind``: before its start, a history whose newest
    point stays at 0), and moved only when the data leaves it or shrinks to under half of it. A pan
    or zoom by the user stops the
    following; the plot's auto-range button ('A') starts it again.
    """

    def __init__(
        self, plot: pg.PlotWidget, headroom: float, *, axis: str = "x", ahead: float = 0.0, behind: float = 0.0
    ) -> None:
        self.plot = plot
        self.headroom = headroom
        self.ahead, self.behind = ahead, behind
        self._axis = 0 if axis == "x" else 1
        self.following = True
        self.range: tuple[float, float] | None = None
        plot.getViewBox().sigRangeChangedManually.connect(self.stop)

    def set_room(self, *, ahead: float | None = None, behind: float | None = None) -> bool:
        """Change the room kept on the growing side (a finished run's data grows no more: none);
        the next :meth:`update` fits the range anew. Whether it changed."""
        room = (self.ahead if ahead is None else ahead, self.behind if behind is None else behind)
        if room == (self.ahead, self.behind):
            return False
        self.ahead, self.behind = room
        self.range = None
        return True

    def stop(self, *_args: object) -> None:
        """The user panned or zoomed (this plot, or one linked to it): the range stays theirs."""
        self.following = False

    def update(self, lo: float, hi: float) -> None:
        """The data now spans ``[lo, hi]`` on the axis."""
        box = self.plot.getViewBox()
        asked = box.autoRangeEnabled()[self._axis] is not False  # at first, or the 'A' button
        if asked:
            self.following = True
        if not self.following or not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
            return
        current = self.range
        if not asked and current is not None:
            inside = current[0] <= lo and hi <= current[1]
            if inside and (hi - lo) >= 0.5 * (current[1] - current[0]):
                return
        margin = self.headroom * (hi - lo) or (0.1 * abs(hi) if self._axis else 0.0) or 1.0
        self.range = (lo - margin - self.behind * (hi - lo), hi + margin + self.ahead * (hi - lo))
        if self._axis:
            self.plot.setYRange(*self.range, padding=0)
        else:
            self.plot.setXRange(*self.range, padding=0)


def plot_with_menu_on_demand(**kwargs: Any) -> pg.PlotWidget:
    """A :class:`pg.PlotWidget` whose context menus are built at its first right-click, not when it
    is made: the view's menu (two axis panels of widgets) and the plot's options were about two
    thirds of a plot's making, 100-300 ms of the GUI thread in one turn on a loaded machine (the
    GPUs tab's first frame at 256 GPUs). The menus are pyqtgraph's own once built."""
    plot = pg.PlotWidget(enableMenu=False, **kwargs)
    box = plot.getViewBox()
    clicked = box.mouseClickEvent

    def first_click(event: Any) -> None:
        if event.button() == QtCore.Qt.MouseButton.RightButton and box.menu is None:
            plot.getPlotItem().setMenuEnabled(True)  # builds the view's menu, with the plot's options in it
            del box.mouseClickEvent  # the class's own from now on
        clicked(event)

    box.mouseClickEvent = first_click
    return plot
