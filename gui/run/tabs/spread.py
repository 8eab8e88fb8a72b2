"""Drawing the cluster's spread (past a handful of workers, instead of one line per worker):

- :class:`SpreadPlot`: the workers' median as a line, the 10-90 % band and the min-max band
  behind it, and the slowest workers drawn on top in their own colours. The key is a label above
  the plot, never over the data; its workers' names are links to *Profile* and *Why*
  (:mod:`gui.run.tabs.spread_menu`).
- :class:`StepTimeHeatmap`: one row per worker (natural order), one column per x bin, colour =
  step time over that bin's median across workers, so a straggler appearing is a bright streak.
  Past a worker per pixel row (1,024 workers), neighbours share a row showing the slowest of them.

Both read a :class:`~core.views.spread.BinnedWorkers` and redraw only when its version moved.
"""

from __future__ import annotations

import html

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from core.views.spread import BinnedWorkers, HeatMap, Spread
from gui.run.tabs.plotting import axis_label, light_grid, padded
from gui.run.tabs.spread_menu import role_link

MEDIAN_COLOUR = "#1f4e79"
HIGHLIGHT_COLOURS = ("#c62828", "#d9822b", "#6a1b9a", "#00838f", "#8d6e63")
HEAT_TITLE = "Step time relative to the median (rows: workers)"
HEAT_TITLE_SHARED = "Step time relative to the median (rows: {} neighbouring workers each, the slowest of them)"
MIN_HEAT_ROWS = 64  # a map not laid out yet (0 pixels high) still shows this many rows
HEAT_RANGE = (0.5, 2.5)  # ratio to the median: below is as fast as it gets, above is saturated red


class _Band(QtWidgets.QGraphicsPathItem):
    """The area between a low and a high edge, built in one vectorised pass (pyqtgraph's
    FillBetweenItem rebuilds its path once per edge change, in Python)."""

    def __init__(self, colour: QtGui.QColor) -> None:
        super().__init__()
        self.setPen(QtGui.QPen(QtCore.Qt.PenStyle.NoPen))
        self.setBrush(QtGui.QBrush(colour))

    def set_edges(self, x: np.ndarray, low: np.ndarray, high: np.ndarray) -> None:
        if x.size == 0:
            self.setPath(QtGui.QPainterPath())
            return
        xs = np.concatenate([x, x[::-1], x[:1]])
        ys = np.concatenate([low, high[::-1], low[:1]])
        self.setPath(pg.arrayToQPath(xs, ys, connect="all"))


class SpreadPlot(QtWidgets.QWidget):
    """Median with bands plus named highlighted workers; see the module docstring."""

    def __init__(self, title: str, y_label: str, *, unit: str = "", parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.key = QtWidgets.QLabel()
        self.key.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.key.setWordWrap(True)
        self.plot = pg.PlotWidget(title=title)
        self.plot.setBackground("w")  # as the other Training plots
        axis_label(self.plot, "left", y_label, unit=unit)
        axis_label(self.plot, "bottom", "step")
        padded(self.plot)
        # Major ticks only, opaque: the minor ones, blended over the whole view, were half of a
        # Training frame (measured: 52-56 ms -> 25-26 ms, README); see gui.run.tabs.plotting.
        light_grid(self.plot)
        item = self.plot.getPlotItem()
        self.outer_band = _Band(QtGui.QColor(43, 108, 176, 45))
        self.inner_band = _Band(QtGui.QColor(43, 108, 176, 100))
        item.addItem(self.outer_band)
        item.addItem(self.inner_band)
        self.median = item.plot(pen=pg.mkPen(MEDIAN_COLOUR, width=2))
        self.highlights: dict[str, pg.PlotDataItem] = {}
        self._spare_curves: list[pg.PlotDataItem] = []  # hidden, for the next highlighted worker
        self._colours: dict[int, str] = {}  # each curve's pen colour (by the curve's id)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.key)
        layout.addWidget(self.plot, 1)
        self._counted = "median"
        self.extent: tuple[float, float] | None = None  # the steps the spread spans (None: no data)
        self.y_extent: tuple[float, float] | None = None  # its values, min to max (None: no data)

    def set_spread(self, spread: Spread | None, counted: str) -> None:
        """Draw ``spread``; ``counted`` says whose median it is (``TrainingFigures.spread_key``)."""
        self._counted = counted
        if spread is None:
            empty = np.empty(0)
            self.outer_band.set_edges(empty, empty, empty)
            self.inner_band.set_edges(empty, empty, empty)
            self.median.setData([], [])
            self.edges = (empty, empty)
            self.extent = self.y_extent = None
            return
        finite = np.isfinite(spread.median)
        x = spread.x[finite]
        self.extent = (float(x[0]), float(x[-1])) if x.size else None
        self.y_extent = (float(np.min(spread.low[finite])), float(np.max(spread.high[finite]))) if x.size else None
        self.outer_band.set_edges(x, spread.low[finite], spread.high[finite])
        self.inner_band.set_edges(x, spread.q_low[finite], spread.q_high[finite])
        self.median.setData(x, spread.median[finite])
        self.edges = (spread.low[finite], spread.high[finite])

    def set_highlights(self, curves: dict[str, tuple[npt.ArrayLike, npt.ArrayLike]], notes: dict[str, str]) -> None:
        """Draw these workers on top, in order (the first is the slowest); ``notes`` is a short
        text per worker for the key (e.g. its step time). A worker that leaves the highlights
        hands its curve to the next one: no plot item is made and dropped per refresh."""
        for name in list(self.highlights):
            if name not in curves:
                spare = self.highlights.pop(name)
                spare.setData([], [])
                spare.hide()
                self._spare_curves.append(spare)
        parts = [
            f'<span style="color:{MEDIAN_COLOUR}"><b>{html.escape(self._counted)}</b></span>, '
            "bands: 10-90 % and min-max"
        ]
        for i, (name, (xs, ys)) in enumerate(curves.items()):
            colour = HIGHLIGHT_COLOURS[i % len(HIGHLIGHT_COLOURS)]
            curve = self.highlights.get(name)
            if curve is None:
                curve = self.highlights[name] = self._spare_curves.pop() if self._spare_curves else self._new_curve()
                curve.show()
            if self._colours.get(id(curve)) != colour:  # a new pen makes pyqtgraph redo the curve
                self._colours[id(curve)] = colour
                curve.setPen(pg.mkPen(colour, width=1.5))
            curve.setData(xs, ys)
            note = notes.get(name, "")
            link = role_link(name, colour, f"<b>{name}</b>")  # its menu: gui.run.tabs.spread_menu
            parts.append(f'<span style="color:{colour}">{link}{" " + note if note else ""}</span>')
        self.key.setText(" · ".join(parts))

    def _new_curve(self) -> pg.PlotDataItem:
        curve = self.plot.getPlotItem().plot()
        curve.setZValue(10)
        curve.setClipToView(True)
        curve.setDownsampling(auto=True, method="peak")
        return curve

    def key_text(self) -> str:
        return QtGui.QTextDocumentFragment.fromHtml(self.key.text()).toPlainText()


class StepTimeHeatmap(QtWidgets.QWidget):
    """Workers x bins, each cell its step time over the bin's median; see the module docstring."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot = pg.PlotWidget(title=HEAT_TITLE)
        self.plot.setBackground("w")
        axis_label(self.plot, "bottom", "step")
        axis_label(self.plot, "left", "")  # rows named by their ticks: never a scale factor
        self.plot.invertY(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(pg.colormap.get("inferno"))
        self.plot.addItem(self.image)
        self.bar = pg.ColorBarItem(values=HEAT_RANGE, colorMap=pg.colormap.get("inferno"), interactive=False, width=12)
        self.bar.setImageItem(self.image, insert_in=self.plot.getPlotItem())
        self.rows: tuple[str, ...] = ()
        self.extent: tuple[float, float] | None = None  # the steps the map spans (None: no data)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)

    def pixel_rows(self) -> int:
        """How many rows the map can show, one a pixel: past that, neighbouring workers share a row
        (:meth:`BinnedWorkers.heatmap`); 1,024 rows drawn into 300 pixels cost a frame."""
        return max(MIN_HEAT_ROWS, int(self.plot.getViewBox().height()))

    def set_heatmap(self, heat: HeatMap | None) -> None:
        if heat is None or heat.values.size == 0:
            self.image.clear()
            self.rows = ()
            self.extent = None
            return
        # No data stays NaN, which pyqtgraph draws transparent: the plot's white shows through.
        # Drawn as 0.0 it was the scale's darkest colour, which reads "much faster than the
        # median": workers a window has not read yet looked fast.
        self.image.setImage(heat.values, autoLevels=False, levels=HEAT_RANGE)
        title = HEAT_TITLE if heat.per_row == 1 else HEAT_TITLE_SHARED.format(heat.per_row)
        if self.plot.getPlotItem().titleLabel.text != title:
            self.plot.setTitle(title)
        x0, x1 = float(heat.edges[0]), float(heat.edges[-1])
        self.extent = (x0, x1)
        self.image.setRect(QtCore.QRectF(x0, 0.0, x1 - x0, float(len(heat.rows))))
        if heat.rows != self.rows:
            self.rows = heat.rows
            self._set_row_ticks()

    def _set_row_ticks(self) -> None:
        """As many worker names as fit the axis without overlapping (the axis drops crowded labels
        silently); the rest are a hover away in the overview and the roles table."""
        if not self.rows:
            return
        axis = self.plot.getAxis("left")
        line_px = QtGui.QFontMetrics(axis.style.get("tickFont") or self.font()).height() + 2
        room = max(1, int(self.plot.getViewBox().height() // line_px))
        every = max(1, -(-len(self.rows) // room))
        ticks = [(i + 0.5, name) for i, name in enumerate(self.rows) if i % every == 0]
        axis.setTicks([ticks, []])

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:
        super().resizeEvent(event)
        self._set_row_ticks()


def refresh_from(
    acc: BinnedWorkers,
    plot: SpreadPlot | None,
    heat: StepTimeHeatmap | None,
    *,
    columns: int,
    highlight: dict[str, str] | None = None,
    counted: str | None = None,
) -> None:
    """Redraw both views from ``acc`` at ``columns`` bins (use the plot's pixel width);
    ``highlight`` maps the workers to draw on top (slowest first) to their note in the key;
    ``counted`` says whose median the key names (by default the workers in ``acc``)."""
    if plot is not None:
        plot.set_spread(acc.spread(max_columns=columns), counted or f"median of {len(acc):,} workers")
        if highlight is not None:
            plot.set_highlights({w: acc.row(w, columns) for w in highlight}, highlight)
    if heat is not None:
        heat.set_heatmap(acc.heatmap(max_columns=columns, max_rows=heat.pixel_rows()))
