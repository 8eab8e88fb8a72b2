"""Training panel: loss against step for every worker, step time per worker, the run's global steps/s.

Fed with ``metrics`` events (parsed from each role's output), ``scalars`` events (TensorBoard
event files: any tag can be picked for the upper plot; a trainer that only writes summaries gets
its ``loss`` tag there, marked ``(tb)``) and the roles' status; redrawn at
most once a frame and only when something changed. Every series is a bounded
:class:`~core.views.series.Series`, read back downsampled to the plot's width, so a whole
run's history pans and zooms smoothly. The figures themselves are kept, Qt-free, by
:class:`core.views.training.TrainingFigures`, which the panel owns; this module draws them.

Past ``spread_from`` workers (default 8) a line per worker is a band nobody can read: the tab shows
the cluster's spread instead (:mod:`gui.run.tabs.spread`): the median loss and step time with their
10-90 % and min-max bands, the slowest workers and any ticked one drawn on top, and a heat map of
step time per worker. *Every worker* switches back to a line each. The workers named in the
spread's keys have *Profile* and *Why is this worker slow?* (:mod:`gui.run.tabs.spread_menu`).
"""

from __future__ import annotations

import bisect
import html
import math
import time
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from core.run.events import CheckpointsChanged, RecoveryChanged
from core.run.status import RoleStatus
from core.views.curves import IncrementalEma, series_xy
from core.views.empty import no_curve_text
from core.views.overview import natural_key
from core.views.rates import StepRates
from core.views.series import Series
from core.views.spread import slowest
from core.views.training import LOSS, TB_PREFIX, TrainingFigures
from gui.run.tabs.checkpoints import CheckpointsPanel
from gui.run.tabs.plotting import FollowX, axis_label, fit_to_pixels, light_grid, padded, settle
from gui.run.tabs.spread import SpreadPlot, StepTimeHeatmap, refresh_from
from gui.run.tabs.spread_menu import SlowestWorkersMenu

MAX_POINTS = 8192  # per curve handed to pyqtgraph, whose NumPy peak downsampling then fits them to the pixels
REFRESH_HZ = 5.0  # curves are recomputed at most this often; the table keeps the frame rate
# One-pixel (cosmetic) pens: Qt strokes a wider line point by point, which was 2.3x the cost of a
# plot's frame with four curves (benchmarks/bench_plot_choices.py); colour tells the workers apart.
PEN_PX = 1
SPREAD_FROM = 8
SLOWEST_SHOWN = 3
# Workers whose curves (three plot items each) one frame may make: a live 64-worker launch with
# *Every worker* ticked made all 65 workers' curves in one frame, a second and more without an
# event loop turn on a loaded machine. The rest come in the next frames.
CURVES_PER_FRAME = 4
# The spread's three views, redrawn one a frame in turn (each at a third of the frame rate), each
# only when its data moved: the three in one frame, each re-ticking its axes, were that frame's
# 10-17 ms paint at 256 simulated workers (docs/benchmarks.md, item 16).
SPREAD_PARTS = ("loss", "time", "heat")
# Room the spread's views keep ahead of the newest step (a share of the steps shown) and above and
# below the values: their axes move, and re-tick, only when the data leaves it. In a run's first
# minute, with 3 % ahead and the 6 % of an auto range, both axes of both spreads moved about twice
# a second, 1-1.5 ms each (axes counted by plot following 256 simulated workers).
SPREAD_AHEAD = 0.15
SPREAD_Y_HEADROOM = 0.1


def role_colour(index: int) -> QtGui.QColor:
    return pg.intColor(index, hues=8, values=1, maxValue=200)


class TrainingPanel(QtWidgets.QWidget):
    """Loss and step-time plots with a per-worker toggle, EMA smoothing and a log scale, drawn
    from its :class:`~core.views.training.TrainingFigures`."""

    def __init__(self) -> None:
        super().__init__()
        self.figures = TrainingFigures()
        self._dirty = False  # a change of the panel's own (a tick, the smoothing): redraw
        self._figures_drawn = -1  # the figures' version the plots show
        self._workers_listed = 0  # how many of the figures' workers have a row in the list
        # Each listed worker's row, and the rows' natural keys in list order: a worker is listed (and
        # labelled) without a walk over the rows, which at 256 workers made listing them 33,000 reads
        # of a row's name and sort key.
        self._items: dict[str, QtWidgets.QListWidgetItem] = {}
        self._item_keys: list[tuple[tuple[int, int | str], ...]] = []
        self.loss_curves: dict[str, tuple[pg.PlotDataItem, pg.PlotDataItem]] = {}
        self.time_curves: dict[str, pg.PlotDataItem] = {}
        self._curves_pending = False  # workers still without curves: the next frame makes more
        self._last_refresh = 0.0
        self._drawn: dict[tuple[str, str], tuple[object, ...]] = {}
        self._smoothers: dict[str, IncrementalEma] = {}  # per worker: only a curve's new tail is smoothed
        self._time_pens: dict[str, tuple[bool, int]] = {}  # per worker: straggler?, colour
        self.spread_from = SPREAD_FROM
        self._spread_drawn: dict[str, tuple[object, ...]] = {}  # per part of SPREAD_PARTS: what it shows
        self._spread_pending: list[str] = []  # the parts of a spread refresh still to draw, one a frame
        self._spread_cycle: tuple[Any, ...] = ()  # that refresh's slowest and ticked workers, their notes
        self.empty_note = ""  # why a worker has no curve (core.views.empty.no_curve_text), from the status
        # The ticked workers (visible_roles), kept until a row changes: reading 256 rows' ticks
        # was a third of a spread refresh and of each status at 256 workers.
        self._ticked: list[str] | None = None
        self._build()

    def _build(self) -> None:
        self.workers = QtWidgets.QListWidget()
        self.workers.setToolTip("Tick a worker to show its curves")
        self.workers.itemChanged.connect(self._on_worker_changed)
        self.workers.setMaximumWidth(220)
        self.smoothing = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.smoothing.setRange(0, 99)
        self.smoothing.setValue(60)
        self.smoothing.setToolTip("TensorBoard's EMA smoothing of the loss (0 = raw)")
        self.smoothing_label = QtWidgets.QLabel()
        self.smoothing.valueChanged.connect(self._on_smoothing_changed)
        self.log_scale = QtWidgets.QCheckBox("Log scale (loss)")
        self.log_scale.toggled.connect(lambda on: self._on_log_scale_toggled(on=on))
        self.plot_choice = QtWidgets.QComboBox()
        self.plot_choice.addItem(LOSS)
        self.plot_choice.setToolTip("What the upper plot shows: the loss, or any TensorBoard scalar (tb: tag)")
        self.plot_choice.currentTextChanged.connect(self._on_metric_changed)
        self.rate_label = QtWidgets.QLabel("no steps yet")
        self.rate_label.setWordWrap(True)
        font = self.rate_label.font()
        font.setBold(True)
        self.rate_label.setFont(font)

        side = QtWidgets.QVBoxLayout()
        side.addWidget(QtWidgets.QLabel("Workers"))
        side.addWidget(self.workers, 1)
        side.addWidget(QtWidgets.QLabel("Plot"))
        side.addWidget(self.plot_choice)
        side.addWidget(self.smoothing_label)
        side.addWidget(self.smoothing)
        side.addWidget(self.log_scale)
        side.addWidget(self.rate_label)
        self._on_smoothing_changed(self.smoothing.value())

        self.loss_plot = self._plot("Loss by step", "loss")
        self.time_plot = self._plot("Step time by step", "step time", "ms")
        self.time_plot.setXLink(self.loss_plot)
        self._follow = FollowX(self.loss_plot, headroom=0.03)  # both plots' step axis, moved seldom
        self._x_extent: dict[tuple[str, str], tuple[float, float]] = {}  # (plot, role) -> steps drawn
        # A pan or zoom re-clips the curves, which re-fits the other axis at the next paint and
        # paints again: settle both plots as soon as the range moves (one paint each).
        self.loss_plot.getViewBox().sigXRangeChanged.connect(self._on_range_moved)
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        split.setObjectName("training-plots")  # the window keeps where the user left it
        split.addWidget(self.loss_plot)
        split.addWidget(self.time_plot)
        # Step time is what a user reads for stragglers: two fifths of the plots, not a strip.
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([600, 400])
        self.plots_split = split
        # The key sits above the plots, never over the curves (a pyqtgraph legend is drawn inside
        # the view box and hid the data): the spread mode's kind of key, a line per shown worker.
        self.key = QtWidgets.QLabel()
        self.key.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.key.setWordWrap(True)
        self._key_drawn: tuple[object, ...] | None = None
        plots = QtWidgets.QWidget()
        plots_layout = QtWidgets.QVBoxLayout(plots)
        plots_layout.setContentsMargins(0, 0, 0, 0)
        plots_layout.addWidget(self.key)
        plots_layout.addWidget(split, 1)
        # The cluster's spread, past spread_from workers.
        self.spread_loss = SpreadPlot("Loss by step: the workers' spread", "loss")
        self.spread_time = SpreadPlot("Step time by step: the workers' spread", "step time", unit="ms")
        self.spread_time.plot.setXLink(self.spread_loss.plot)
        # The spreads' step axis (and the heat map's, linked below) follows the data with room,
        # moved seldom (an auto-ranged one moved, and re-ticked the axes, at every refresh); a pan
        # or zoom of any of the three stops it.
        self._spread_follow = FollowX(self.spread_loss.plot, headroom=0.03, ahead=SPREAD_AHEAD)
        self.spread_time.plot.getViewBox().sigRangeChangedManually.connect(self._spread_follow.stop)
        # ... and each spread's Y, with SPREAD_Y_HEADROOM above and below its values.
        self._spread_follow_y = {
            plot: FollowX(plot.plot, headroom=SPREAD_Y_HEADROOM, axis="y")
            for plot in (self.spread_loss, self.spread_time)
        }
        # The workers the keys name: Profile and Why on each (wired by the window).
        self.slowest_menu = SlowestWorkersMenu(self, (self.spread_loss.key, self.spread_time.key))
        self.heatmap = StepTimeHeatmap()
        # The same steps as the spreads above it (its own range ended 8 % further on at 256 workers).
        self.heatmap.plot.setXLink(self.spread_loss.plot)
        self.heatmap.plot.getViewBox().sigRangeChangedManually.connect(self._spread_follow.stop)
        spread = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        spread.setObjectName("training-spread")
        for index, widget in enumerate((self.spread_loss, self.spread_time, self.heatmap)):
            spread.addWidget(widget)
            # The step-time spread as tall as the loss's: a strip under it read as a line at 64 workers.
            spread.setStretchFactor(index, (3, 3, 2)[index])
        spread.setSizes([300, 300, 200])
        self.views = QtWidgets.QStackedWidget()
        self.views.addWidget(plots)
        self.views.addWidget(spread)
        self.every_worker = QtWidgets.QCheckBox("Every worker (a line each)")
        self.every_worker.setToolTip(
            f"Past {SPREAD_FROM} workers the plots show the spread; tick to draw a line per worker"
        )
        self.every_worker.toggled.connect(lambda _on: self._mark_dirty())
        side.addWidget(self.every_worker)
        # The run's checkpoints: a short list here, markers on the plots' step axis.
        self.checkpoints = CheckpointsPanel()
        side.addWidget(self.checkpoints)

        layout = QtWidgets.QHBoxLayout(self)
        side_box = QtWidgets.QWidget()
        side_box.setLayout(side)
        side_box.setMaximumWidth(240)
        layout.addWidget(side_box)
        layout.addWidget(self.views, 1)

    @staticmethod
    def _plot(title: str, y_label: str, unit: str = "") -> pg.PlotWidget:
        plot = pg.PlotWidget(title=title)
        plot.setBackground("w")
        light_grid(plot)
        padded(plot)
        axis_label(plot, "bottom", "step")
        axis_label(plot, "left", y_label, unit=unit)
        return plot

    # ------------------------------------------------------------------ input

    def add_samples(self, role: str, samples: list[dict[str, Any]]) -> None:
        """Take a ``metrics`` event's samples for ``role``."""
        self.figures.add_samples(role, samples)
        self._list_new_workers()

    def add_scalars(self, role: str, points: list[dict[str, object]]) -> None:
        """Take a ``scalars`` event's points for ``role``; a new tag is offered for the upper plot."""
        self.figures.add_scalars(role, points)
        choices = self.figures.plot_choices()
        for text in choices[self.plot_choice.count() :]:
            self.plot_choice.addItem(text)
        self._list_new_workers()

    def add_checkpoints(self, payload: CheckpointsChanged | RecoveryChanged) -> None:
        """Take a ``checkpoints`` event (listed, and marked on the step axis) or a ``recovery`` one
        (where it resumed, marked)."""
        self.checkpoints.add(payload)
        self._dirty = True

    def set_status(
        self, roles: tuple[RoleStatus, ...] | None, now: float | None = None, *, rates: StepRates | None = None
    ) -> None:
        """Take the roles' status (None before a launch): the stragglers are marked, the run's rates
        (``rates``) shown, and the key says why a worker has no curve (none has stepped yet, it
        waits for a ps, it is between attempts), never "no worker ticked" of a run whose workers
        have not reported."""
        if roles is not None:
            self.figures.apply_status(roles, rates)
        plotted = self.figures.plotted_roles()
        ticked = len(set(self.visible_roles()) & set(plotted))
        note = no_curve_text(roles, plotted=plotted, ticked=ticked, now=time.time() if now is None else now)
        if note != self.empty_note:
            self.empty_note = note
            self._dirty = True

    def _list_new_workers(self) -> None:
        workers = self.figures.workers
        for role in workers[self._workers_listed :]:
            self._ensure_worker(role)
        self._workers_listed = len(workers)

    def clear(self) -> None:
        self.checkpoints.clear()  # its markers first, while the plots still hold them
        for plot in (self.loss_plot, self.time_plot):
            plot.clear()
        self.figures.clear()
        self._workers_listed = 0
        self.plot_choice.blockSignals(True)
        self.plot_choice.clear()
        self.plot_choice.addItem(LOSS)
        self.plot_choice.blockSignals(False)
        self.loss_curves.clear()
        self.time_curves.clear()
        self._curves_pending = False
        self._drawn.clear()
        self._smoothers.clear()
        self._time_pens.clear()
        self._x_extent.clear()
        self._follow.range = None
        self._key_drawn = None
        self.key.clear()
        self.workers.clear()
        self._ticked = None
        self._items.clear()
        self._item_keys.clear()
        self.rate_label.setText("no steps yet")
        self._spread_drawn.clear()
        self._spread_pending.clear()
        self._spread_follow.range = None
        for follow in self._spread_follow_y.values():
            follow.range = None
        self.empty_note = ""

    def _on_metric_changed(self, text: str) -> None:
        self.loss_plot.setTitle("Loss by step" if text in ("", LOSS) else f"{text} by step")
        axis_label(self.loss_plot, "left", text[len(TB_PREFIX) :] if text.startswith(TB_PREFIX) else LOSS)
        self._drawn.clear()
        self._dirty = True

    def _ensure_worker(self, role: str) -> None:
        listed = len(self._items)
        if role in self._items:  # by the exact name: "worker:1" is not "worker:10"
            return
        item = QtWidgets.QListWidgetItem(role)
        item.setData(QtCore.Qt.ItemDataRole.UserRole, role)
        item.setFlags(item.flags() | QtCore.Qt.ItemFlag.ItemIsUserCheckable)
        # Past spread_from workers a tick means "draw it over the spread": none is ticked at first.
        many = listed + 1 > self.spread_from
        item.setCheckState(QtCore.Qt.CheckState.Unchecked if many else QtCore.Qt.CheckState.Checked)
        if many and listed == self.spread_from:
            self.workers.blockSignals(True)
            for i in range(self.workers.count()):
                self.workers.item(i).setCheckState(QtCore.Qt.CheckState.Unchecked)
            self.workers.blockSignals(False)
        key = natural_key(role)  # worker:2 before worker:10
        row = bisect.bisect_right(self._item_keys, key)  # after its equals, as it always went
        self._item_keys.insert(row, key)
        self._items[role] = item
        self.workers.insertItem(row, item)
        self._ticked = None

    def _mark_dirty(self) -> None:
        self._dirty = True

    def set_live(self, *, live: bool) -> None:
        """Whether the run shown is live: only a live run's spread keeps room ahead of its newest
        step (a finished run's views end at its last step)."""
        ahead = SPREAD_AHEAD if live else 0.0
        if self._spread_follow.set_room(ahead=ahead):
            self._spread_drawn.clear()  # every view again, to fit its range
            self._dirty = True

    def _on_worker_changed(self, _item: QtWidgets.QListWidgetItem) -> None:
        self._ticked = None
        self._dirty = True

    def _on_smoothing_changed(self, value: int) -> None:
        self.smoothing_label.setText(f"Smoothing: {value / 100:.2f}")
        self._dirty = True

    def _on_log_scale_toggled(self, *, on: bool) -> None:
        self.loss_plot.setLogMode(x=False, y=on)
        self._dirty = True

    # ------------------------------------------------------------------ drawing

    def visible_roles(self) -> list[str]:
        """The ticked workers, in the list's order."""
        if self._ticked is None:
            out = []
            for i in range(self.workers.count()):
                item = self.workers.item(i)
                if item.checkState() == QtCore.Qt.CheckState.Checked:
                    out.append(str(item.data(QtCore.Qt.ItemDataRole.UserRole)))
            self._ticked = out
        return list(self._ticked)

    def shown_series(self, role: str) -> tuple[Series | None, str]:
        """The series the upper plot shows for ``role`` with the plot chosen now, and what it is."""
        return self.figures.shown_series(role, self.plot_choice.currentText())

    def smoothing_weight(self) -> float:
        return self.smoothing.value() / 100.0

    @property
    def spread_mode(self) -> bool:
        return self.workers.count() > self.spread_from and not self.every_worker.isChecked()

    def refresh(self, *, force: bool = False) -> None:
        """Redraw what changed, at most ``REFRESH_HZ`` times a second unless ``force``; the
        spread's views one a frame (``force``: all at once)."""
        now = time.monotonic()
        if self._spread_pending and not force and self.spread_mode:
            self._refresh_spread_part()  # the spread refresh under way: its next view
            return
        throttled = not force and not self._curves_pending and now - self._last_refresh < 1.0 / REFRESH_HZ
        figures = self.figures
        if not (self._dirty or figures.version != self._figures_drawn) or throttled:
            return
        self._dirty = False
        self._figures_drawn = figures.version
        self._curves_pending = False
        self._last_refresh = now
        self.views.setCurrentIndex(1 if self.spread_mode else 0)
        plots = [self.loss_plot, self.time_plot, self.spread_loss.plot, self.spread_time.plot]
        self.checkpoints.refresh([(plot, plot in (self.loss_plot, self.spread_loss.plot)) for plot in plots])
        if self.spread_mode:
            self._start_spread()
            self._refresh_spread_part(every=force)
            self._refresh_rate()
            return
        visible = set(self.visible_roles())
        self._refresh_key(visible)
        weight = self.smoothing_weight()
        log = self.log_scale.isChecked()
        made = 0
        for i, role in enumerate(figures.plotted_roles()):
            colour = role_colour(i)
            straggler = role in figures.stragglers
            self._label_worker(role, colour, straggler=straggler)
            if role not in self.loss_curves:
                if made >= CURVES_PER_FRAME:
                    self._dirty = self._curves_pending = True  # the next frame makes the next few
                    continue
                made += 1
            raw_curve, smooth_curve = self._loss_curves(role, colour)
            time_curve = self._time_curve(role, colour)
            shown = role in visible
            for curve in (raw_curve, smooth_curve, time_curve):
                curve.setVisible(shown)
            if not shown:
                continue
            series, what = self.shown_series(role)
            if series is None:
                raw_curve.setData([], [])
                smooth_curve.setData([], [])
                self._drawn.pop(("loss", role), None)
            else:
                loss_key = (series.appended, weight, log, what)
                if self._drawn.get(("loss", role)) != loss_key:  # recompute only what changed
                    self._drawn[("loss", role)] = loss_key
                    x, y = series_xy(series)
                    if log:
                        y = np.where(y > 0, y, math.nan)
                    smoother = self._smoothers.setdefault(role, IncrementalEma())
                    _set(smooth_curve, x, smoother.smooth(y, weight) if weight > 0 else y)
                    _set(raw_curve, x, y)
                    self._x_extent[("loss", role)] = (float(x[0]), float(x[-1])) if len(x) else (0.0, 0.0)
                raw_curve.setVisible(weight > 0)
            if role in figures.step_time:
                times = figures.step_time[role]
                time_key = (times.appended, straggler)
                if self._drawn.get(("time", role)) != time_key:
                    self._drawn[("time", role)] = time_key
                    x, y = series_xy(times)
                    _set(time_curve, x, y)
                    self._x_extent[("time", role)] = (float(x[0]), float(x[-1])) if len(x) else (0.0, 0.0)
                pen_key = (straggler, colour.rgba())
                if self._time_pens.get(role) != pen_key:  # a new pen makes pyqtgraph redo the curve
                    self._time_pens[role] = pen_key
                    time_curve.setPen(pg.mkPen(colour, width=3 if straggler else PEN_PX, style=_dash(on=straggler)))
        self._refresh_rate()
        drawn = [extent for (_, role), extent in self._x_extent.items() if role in visible]
        if drawn:
            self._follow.update(min(lo for lo, _ in drawn), max(hi for _, hi in drawn))
        settle(self.loss_plot, self.time_plot)

    def _refresh_key(self, visible: set[str]) -> None:
        """One coloured name per shown worker (dashed stragglers say so), above the plots."""
        stragglers = self.figures.stragglers
        shown = [(i, role) for i, role in enumerate(self.figures.plotted_roles()) if role in visible]
        key = (tuple(shown), tuple(sorted(stragglers & visible)), self.empty_note)
        if key == self._key_drawn:
            return
        self._key_drawn = key
        parts = [
            f'<span style="color:{role_colour(i).name()}">&#9632; <b>{role}</b>'
            f"{' (straggler, dashed)' if role in stragglers else ''}</span>"
            for i, role in shown
        ]
        if self.empty_note:
            parts.append(html.escape(self.empty_note))
        self.key.setText(" · ".join(parts) if parts else "no worker ticked")

    def key_text(self) -> str:
        """The per-worker key as plain text (what a user reads above the plots)."""
        return QtGui.QTextDocumentFragment.fromHtml(self.key.text()).toPlainText()

    def _on_range_moved(self, *_args: object) -> None:
        settle(self.loss_plot, self.time_plot)

    def _start_spread(self) -> None:
        """A spread refresh: which workers go on top (the slowest, the ticked) and every view due."""
        figures = self.figures
        times = figures.step_times_ms()
        top = slowest(times, k=SLOWEST_SHOWN)
        picked = [r for r in self.visible_roles() if r not in top]
        notes = {r: f"{times[r]:.0f} ms" for r in top if times.get(r) is not None}
        for r in picked:
            notes[r] = "(ticked)"
        self.slowest_menu.roles, self.slowest_menu.notes = (*top, *picked), notes
        columns = max(100, self.spread_time.plot.width())
        self._spread_cycle = (columns, {r: notes[r] for r in [*top, *picked]})
        self._spread_pending = list(SPREAD_PARTS)

    def _refresh_spread_part(self, *, every: bool = False) -> None:
        """Draw the next view of the spread refresh whose data moved (``every``: all of them)."""
        figures = self.figures
        columns, highlight = self._spread_cycle
        on_top = tuple(highlight.items())
        while self._spread_pending:
            part = self._spread_pending.pop(0)
            bins = figures.loss_bins if part == "loss" else figures.time_bins
            if part == "heat":
                key: tuple[object, ...] = (bins.version, columns, self.heatmap.pixel_rows())
            else:
                key = (bins.version, len(figures.trainers), columns, on_top)
            if self._spread_drawn.get(part) == key:
                continue  # unchanged: the next view, this frame
            self._spread_drawn[part] = key
            if part == "heat":
                refresh_from(bins, None, self.heatmap, columns=columns)
            else:
                plot = self.spread_loss if part == "loss" else self.spread_time
                refresh_from(
                    bins,
                    plot,
                    None,
                    columns=columns,
                    highlight=highlight,
                    counted=figures.spread_key(step_time=part == "time"),
                )
                if plot.y_extent is not None:
                    self._spread_follow_y[plot].update(*plot.y_extent)
            # The three views' steps, one range (linked): moved when any view's data leaves it.
            extents = [e for e in (self.spread_loss.extent, self.spread_time.extent, self.heatmap.extent) if e]
            if extents:
                self._spread_follow.update(min(lo for lo, _ in extents), max(hi for _, hi in extents))
            settle(self.spread_loss.plot, self.spread_time.plot, self.heatmap.plot)
            if not every:
                return

    def _refresh_rate(self) -> None:
        self.rate_label.setText(self.figures.rate_text())

    def _label_worker(self, role: str, colour: QtGui.QColor, *, straggler: bool) -> None:
        item = self._items.get(role)
        if item is None:
            return
        text = f"{role}  (straggler)" if straggler else role
        if item.text() != text:
            self.workers.blockSignals(True)
            item.setText(text)
            item.setForeground(colour)
            item.setToolTip("slower than 1.5x the median of the other workers" if straggler else "")
            self.workers.blockSignals(False)
        elif item.foreground().color() != colour:
            item.setForeground(colour)

    def _loss_curves(self, role: str, colour: QtGui.QColor) -> tuple[pg.PlotDataItem, pg.PlotDataItem]:
        curves = self.loss_curves.get(role)
        if curves is None:
            faint = QtGui.QColor(colour)
            faint.setAlpha(60)
            raw = self.loss_plot.plot(pen=pg.mkPen(faint, width=1))
            smooth = self.loss_plot.plot(pen=pg.mkPen(colour, width=PEN_PX))
            for curve in (raw, smooth):
                # Set after the curve exists: pyqtgraph ignores these at creation.
                fit_to_pixels(curve, clip=False)  # segments go back in steps
            curves = self.loss_curves[role] = (raw, smooth)
        return curves

    def _time_curve(self, role: str, colour: QtGui.QColor) -> pg.PlotDataItem:
        curve = self.time_curves.get(role)
        if curve is None:
            curve = self.time_plot.plot(pen=pg.mkPen(colour, width=PEN_PX))
            fit_to_pixels(curve, clip=False)  # segments go back in steps
            self.time_curves[role] = curve
        return curve


def _dash(*, on: bool) -> QtCore.Qt.PenStyle:
    return QtCore.Qt.PenStyle.DashLine if on else QtCore.Qt.PenStyle.SolidLine


def _set(curve: pg.PlotDataItem, x: np.ndarray, y: np.ndarray) -> None:
    """Hand a curve its arrays: NaN marks a break (``connect="finite"``), and the values are
    known to be finite otherwise, so pyqtgraph's per-frame finiteness scan is skipped."""
    curve.setData(x, y, connect="finite", skipFiniteCheck=True)
