"""Compare runs: 2-8 runs' curves overlaid, each run one colour, above the side-by-side
table of :func:`core.views.compare_table.compare_rows` with the rows that differ highlighted.

Per run and plot (loss, step time, and any TensorBoard scalar the roles wrote; by step or by
seconds since the run started): a run with up to :data:`LINES_UP_TO` training roles draws each role
as a line; past that its workers' median is the line and their min-max a band behind it
(:class:`core.views.spread.BinnedWorkers`, the Training tab's spread). The speed plot draws each
run's global steps/s over the last 30 s as it was at each moment (:func:`core.views.rates.rate_series`,
whose last point is the figure the table and the runs list give). Everything is read off the GUI
thread; the view draws once it arrives.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from core.run.compare import (
    Curves,
    Scalar,
    duplicates_loss,
    load_for_compare,
    rate_records,
    read_curves,
    read_scalars,
)
from core.run.index import RunSummary
from core.views.compare_table import CompareRow, compare_rows
from core.views.rates import GLOBAL, RatePoint, label, rate_series
from core.views.spread import BinnedWorkers
from gui.offthread import Relay, run_off_thread
from gui.run.tabs.spread import _Band as Band

RUN_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
LINES_UP_TO = 2  # roles drawn one line each; more: the median and a min-max band
SPREAD_COLUMNS = 512
DIFF_BRUSH = QtGui.QColor("#fde68a")
SPEED_PLOT = label(GLOBAL)
PLOTS = (("loss", "loss"), ("step time", "ms"), (SPEED_PLOT, GLOBAL))
Loaded = tuple[
    list[RunSummary],
    list[CompareRow],
    list[dict[str, Curves]],
    list[dict[str, dict[str, Scalar]]],
    list[list[RatePoint]],
]
SCALAR_PLOT = "TensorBoard scalar"


def _load(paths: list[Path]) -> Loaded:
    summaries = load_for_compare(paths)
    rows = compare_rows(summaries)
    trainers = [[r for r in s.roles if not r.startswith("ps:")] for s in summaries]
    curves = [read_curves(s.path, roles) for s, roles in zip(summaries, trainers, strict=True)]
    scalars = [read_scalars(s.path, roles) for s, roles in zip(summaries, trainers, strict=True)]
    speeds = [
        rate_series(
            rate_records(s.path, roles),
            strategy=s.strategy,
            batch_size={r: f.batch_size for r, f in s.role_figures.items()},
        )
        for s, roles in zip(summaries, trainers, strict=True)
    ]
    return summaries, rows, curves, scalars, speeds


def _series(curve: Curves, plot: str) -> np.ndarray:
    return curve.loss if plot == "loss" else curve.step_time_s * 1000.0  # ms, as people write step times


class CompareView(QtWidgets.QWidget):
    """The compare view of ``paths`` (2-8 run directories); ``sig_loaded`` once it is drawn."""

    sig_loaded = QtCore.Signal()

    def __init__(self, paths: list[Path], parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent, QtCore.Qt.WindowType.Window)
        self.setWindowTitle(f"TowerDeck - compare {len(paths)} runs")
        self.resize(1280, 860)
        self.paths = paths
        self.summaries: list[RunSummary] = []
        self.rows: list[CompareRow] = []
        self.curves: list[dict[str, Curves]] = []
        self.scalars: list[dict[str, dict[str, Scalar]]] = []
        self.speeds: list[list[RatePoint]] = []  # per run: its figures over time
        self.error = ""
        # What each plot drew, (run id, role or "band"), for the tests and the screenshot script.
        self.drawn: dict[str, list[tuple[str, str]]] = {}
        self._relay = Relay(self)
        self.x_box = QtWidgets.QComboBox()
        self.x_box.addItem("by step", "step")
        self.x_box.addItem("by time since start (s)", "time")
        self.x_box.currentIndexChanged.connect(lambda _i: self._draw())
        self.tag_box = QtWidgets.QComboBox()  # the TensorBoard tag of the fourth plot
        self.tag_box.currentIndexChanged.connect(lambda _i: self._draw())
        self.key = QtWidgets.QLabel("reading the runs...")
        self.key.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.key.setWordWrap(True)
        self.plots: dict[str, pg.PlotWidget] = {}
        plots = QtWidgets.QHBoxLayout()
        for name, unit in (*PLOTS, (SCALAR_PLOT, "value")):
            widget = pg.PlotWidget(title=name)
            widget.setBackground("w")
            widget.setLabel("left", unit)
            widget.getAxis("left").enableAutoSIPrefix(False)  # "ms", never "s (x0.001)"
            widget.showGrid(x=True, y=True, alpha=0.2)
            self.plots[name] = widget
            plots.addWidget(widget)
        self.table = QtWidgets.QTableWidget()
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.only_diff = QtWidgets.QCheckBox("only rows that differ")
        self.only_diff.toggled.connect(lambda _c: self._fill_table())
        top = QtWidgets.QWidget()
        top_layout = QtWidgets.QVBoxLayout(top)
        head = QtWidgets.QHBoxLayout()
        head.addWidget(self.key, 1)
        head.addWidget(self.tag_box)
        head.addWidget(self.x_box)
        top_layout.addLayout(head)
        top_layout.addLayout(plots, 1)
        bottom = QtWidgets.QWidget()
        bottom_layout = QtWidgets.QVBoxLayout(bottom)
        bottom_layout.addWidget(self.only_diff)
        bottom_layout.addWidget(self.table, 1)
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setSizes([430, 430])
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(split)
        run_off_thread(self._relay, lambda: _load(paths), self._on_loaded, name="compare-load")

    def _on_loaded(self, loaded: Loaded | None, error: BaseException | None) -> None:
        if error is not None or loaded is None:
            self.error = str(error)
            self.key.setText(f"cannot compare: {error}")
            self.sig_loaded.emit()
            return
        self.summaries, self.rows, self.curves, self.scalars, self.speeds = loaded
        tags = [
            tag for tag in sorted({tag for per_run in self.scalars for tag in per_run}) if not self._repeats_loss(tag)
        ]
        self.tag_box.blockSignals(True)
        self.tag_box.addItems(tags)
        self.tag_box.blockSignals(False)
        self.tag_box.setVisible(bool(tags))
        self.plots[SCALAR_PLOT].setVisible(bool(tags))
        self._fill_table()
        self._draw()
        self.sig_loaded.emit()

    def _repeats_loss(self, tag: str) -> bool:
        """A tag whose every run's series are the loss plot's own: a second plot of them says nothing."""
        held = [
            (curves, scalars[tag]) for curves, scalars in zip(self.curves, self.scalars, strict=True) if tag in scalars
        ]
        return bool(held) and all(duplicates_loss(curves, per_role) for curves, per_role in held)

    # ------------------------------------------------------------------ the table

    def _fill_table(self) -> None:
        rows = [r for r in self.rows[1:] if r.differs or not self.only_diff.isChecked()]
        self.table.clear()
        self.table.setRowCount(len(rows))
        self.table.setColumnCount(len(self.summaries))
        self.table.setHorizontalHeaderLabels([s.id for s in self.summaries])
        self.table.setVerticalHeaderLabels([("* " if r.differs else "") + r.label for r in rows])
        for i, row in enumerate(rows):
            for j, value in enumerate(row.values):
                item = QtWidgets.QTableWidgetItem(value)
                item.setToolTip(value)
                if row.differs:
                    item.setBackground(DIFF_BRUSH)
                self.table.setItem(i, j, item)
        for j in range(len(self.summaries)):
            header = self.table.horizontalHeaderItem(j)
            if header is not None:
                header.setForeground(QtGui.QBrush(QtGui.QColor(RUN_COLOURS[j % len(RUN_COLOURS)])))
        self.table.resizeColumnsToContents()

    def differing_labels(self) -> list[str]:
        """The labels of the highlighted rows as the table shows them now."""
        labels = []
        for i in range(self.table.rowCount()):
            item = self.table.item(i, 0)
            if item is not None and item.background().color() == DIFF_BRUSH:
                header = self.table.verticalHeaderItem(i)
                labels.append(header.text().removeprefix("* ") if header else "")
        return labels

    # ------------------------------------------------------------------ the curves

    def _draw(self) -> None:
        by_time = self.x_box.currentData() == "time"
        self.drawn = {name: [] for name in self.plots}
        for widget in self.plots.values():
            widget.getPlotItem().clear()
            widget.setLabel("bottom", "seconds since start" if by_time else "step")
        parts = []
        for i, (summary, curves) in enumerate(zip(self.summaries, self.curves, strict=True)):
            colour = RUN_COLOURS[i % len(RUN_COLOURS)]
            workers = len(curves)
            style = "one line a role" if workers <= LINES_UP_TO else f"median and min-max of {workers}"
            parts.append(f'<span style="color:{colour}"><b>{summary.id}</b> ({summary.shape()}; {style})</span>')
            for name, widget in self.plots.items():
                if name == SPEED_PLOT:
                    self._draw_speed(widget, colour, points=self.speeds[i], summary=summary, by_time=by_time)
                    continue
                if name == SCALAR_PLOT:
                    per_role = self.scalars[i].get(self.tag_box.currentText(), {})
                    xs = {r: (c.wall_time - summary.created) if by_time else c.step for r, c in per_role.items()}
                    ys = {r: c.value for r, c in per_role.items()}
                else:
                    xs = {r: (c.t - summary.created) if by_time else c.step for r, c in curves.items()}
                    ys = {r: _series(c, name) for r, c in curves.items()}
                self._draw_run(widget, name, colour, xs=xs, ys=ys, run=summary.id)
        self.plots[SCALAR_PLOT].setTitle(f"TensorBoard: {self.tag_box.currentText()}")
        self.key.setText(" · ".join(parts) if parts else "no training metrics in these runs")

    def _draw_speed(
        self, widget: pg.PlotWidget, colour: str, *, points: list[RatePoint], summary: RunSummary, by_time: bool
    ) -> None:
        """One line a run: its global steps/s over the window that ended at each moment."""
        shown = [p for p in points if p.rates.global_steps_per_s is not None and (by_time or p.step is not None)]
        if not shown:
            return
        xs = np.array([(p.t - summary.created) if by_time else (p.step or 0.0) for p in shown])
        ys = np.array([p.rates.global_steps_per_s for p in shown], dtype=np.float64)
        widget.getPlotItem().plot(xs, ys, pen=pg.mkPen(colour, width=1.5))
        self.drawn[SPEED_PLOT].append((summary.id, "global"))

    def _draw_run(
        self,
        widget: pg.PlotWidget,
        plot: str,
        colour: str,
        *,
        xs: dict[str, np.ndarray],
        ys: dict[str, np.ndarray],
        run: str,
    ) -> None:
        item = widget.getPlotItem()
        if len(xs) <= LINES_UP_TO:
            for role in xs:
                finite = np.isfinite(ys[role])
                if finite.any():
                    item.plot(xs[role][finite], ys[role][finite], pen=pg.mkPen(colour, width=1.5))
                    self.drawn[plot].append((run, role))
            return
        binned = BinnedWorkers(bins=SPREAD_COLUMNS)
        for role in xs:
            binned.add_many(role, xs[role], ys[role])
        spread = binned.spread(SPREAD_COLUMNS)
        if spread is None:
            return
        finite = np.isfinite(spread.median)
        band_colour = QtGui.QColor(colour)
        band_colour.setAlpha(50)
        band = Band(band_colour)
        band.set_edges(spread.x[finite], spread.low[finite], spread.high[finite])
        item.addItem(band)
        item.plot(spread.x[finite], spread.median[finite], pen=pg.mkPen(colour, width=2))
        self.drawn[plot].append((run, "band"))

    def key_text(self) -> str:
        return QtGui.QTextDocumentFragment.fromHtml(self.key.text()).toPlainText()
