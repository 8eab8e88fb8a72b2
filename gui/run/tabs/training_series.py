"""The training tab's figures, apart from its drawing: each role's loss and step-time series, its
worker stats, the TensorBoard scalars by tag, and the spread's per-worker bins, fed by the run's
``metrics`` and ``scalars`` events and its roles' status.

A mixin of :class:`gui.run.tabs.training.TrainingPanel`: it only marks the panel dirty; the panel
redraws from these figures at most once a frame.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from PySide6 import QtWidgets

from core.run.status import RoleStatus
from core.telemetry.loss_tags import loss_tags_in
from core.telemetry.worker_stats import METRIC_FIELDS, WorkerStats
from core.views.series import Series
from core.views.spread import BinnedWorkers

SERIES_CAPACITY = 4096
MAX_TAGS = 64  # TensorBoard tags offered for plotting; more are a histogram dump, not a curve to read
LOSS = "loss"


class TrainingSeries:
    """Every worker's training figures, bounded, as the events bring them."""

    # What the panel provides (see gui.run.tabs.training.TrainingPanel).
    plot_choice: QtWidgets.QComboBox

    if TYPE_CHECKING:  # provided by the panel; no stubs at run time to shadow the real ones

        def _ensure_worker(self, role: str) -> None: ...

    def _init_series(self) -> None:
        self.loss: dict[str, Series] = {}
        self.step_time: dict[str, Series] = {}
        self.stats: dict[str, WorkerStats] = {}
        self.scalars: dict[str, dict[str, Series]] = {}  # TensorBoard tag -> role -> series
        self.stragglers: set[str] = set()
        self._dirty = False
        self.loss_bins = BinnedWorkers(origin=0.0)
        self.time_bins = BinnedWorkers(origin=0.0)

    def _clear_series(self) -> None:
        self.loss.clear()
        self.step_time.clear()
        self.stats.clear()
        self.scalars.clear()
        self.loss_bins = BinnedWorkers(origin=0.0)
        self.time_bins = BinnedWorkers(origin=0.0)

    def add_samples(self, role: str, samples: list[dict[str, Any]]) -> None:
        """Take a ``metrics`` event's samples for ``role``."""
        stats = self.stats.setdefault(role, WorkerStats())
        loss_x: list[float] = []
        loss_v: list[float] = []
        time_x: list[float] = []
        time_v: list[float] = []
        take, fields = stats.take, METRIC_FIELDS  # the records as they are, not a MetricSample each (issue 25)
        for record in samples:
            if record.keys() != fields:
                continue  # not a metrics record: MetricSample(**record) refuses it
            step, loss = record["step"], record["loss"]
            take(record["t"], step, loss, record["step_time_s"], record["steps_per_sec"], record["extra"])
            if step is None:
                continue
            self._dirty = True
            if loss is not None and math.isfinite(loss):
                loss_x.append(float(step))
                loss_v.append(loss)
            if stats.step_time_s is not None:
                time_x.append(float(step))
                time_v.append(stats.step_time_s * 1000.0)
        # The bins take a batch in one vectorised pass (a reopened run hands over thousands).
        for table, bins, xs, values in (
            (self.loss, self.loss_bins, loss_x, loss_v),
            (self.step_time, self.time_bins, time_x, time_v),
        ):
            if xs:
                self._series(table, role).extend(xs, values)  # point by point for a live run's few
                bins.add_many(role, xs, values)

    def add_scalars(self, role: str, points: list[dict[str, object]]) -> None:
        """Take a ``scalars`` event's points ({tag, step, wall_time, value}) for ``role``."""
        batches: dict[str, tuple[list[float], list[float]]] = {}  # tag -> steps, values: one extend each
        for p in points:
            tag, step, value = p.get("tag"), p.get("step"), p.get("value")
            if not isinstance(tag, str) or not isinstance(step, int) or not isinstance(value, (int, float)):
                continue
            by_role = self.scalars.get(tag)
            if by_role is None:
                if len(self.scalars) >= MAX_TAGS:
                    continue
                by_role = self.scalars[tag] = {}
                self.plot_choice.addItem(f"tb: {tag}")
            if math.isfinite(value):
                steps, values = batches.setdefault(tag, ([], []))
                steps.append(float(step))
                values.append(float(value))
        for tag, (steps, values) in batches.items():
            self._series(self.scalars[tag], role).extend(steps, values)
            self._dirty = True

    def shown_series(self, role: str) -> tuple[Series | None, str]:
        """The series the upper plot shows for ``role``, and what it is (``loss``, ``loss (tb)``, a tag)."""
        chosen = self.plot_choice.currentText()
        if chosen.startswith("tb: "):
            tag = chosen[4:]
            return self.scalars.get(tag, {}).get(role), tag
        if role in self.loss:
            return self.loss[role], LOSS
        for tag in loss_tags_in(self.scalars):  # no loss in the output: the TensorBoard one
            series = self.scalars.get(tag, {}).get(role)
            if series is not None:
                return series, f"{LOSS} (tb)"
        return None, LOSS

    def set_status(self, roles: tuple[RoleStatus, ...]) -> None:
        stragglers = {r.role for r in roles if r.straggler}
        if stragglers != self.stragglers:
            self.stragglers = stragglers
            self._dirty = True

    def _series(self, table: dict[str, Series], role: str) -> Series:
        series = table.get(role)
        if series is None:
            series = table[role] = Series(capacity=SERIES_CAPACITY)
            self._ensure_worker(role)
        return series
