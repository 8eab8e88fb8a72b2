"""The Training tab's figures, without the drawing: each worker's loss and step-time series, its
stats, the TensorBoard scalars by tag, the stragglers, and the spread's per-worker bins. Fed by
the run's ``metrics`` and ``scalars`` events and its roles' status. Qt-free.

:class:`TrainingFigures` is owned by the tab (:class:`gui.run.tabs.training.TrainingPanel`),
which draws from it at most once a frame: :attr:`TrainingFigures.version` moves on every change
a drawing could show, so the tab compares it with the version it last drew. What the upper plot
shows is the tab's choice (a combo box there), filled from :meth:`TrainingFigures.plot_choices`
and passed back to :meth:`TrainingFigures.shown_series`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from core.run.status import RoleStatus
from core.telemetry.loss_tags import loss_tags_in
from core.telemetry.worker_stats import METRIC_FIELDS, WorkerStats, printed_step_time
from core.views.empty import trainers
from core.views.overview import natural_key
from core.views.rates import StepRates, cluster_text
from core.views.series import Series
from core.views.spread import BinnedWorkers

__all__ = ["LOSS", "MAX_TAGS", "SERIES_CAPACITY", "TB_PREFIX", "TrainingFigures"]

SERIES_CAPACITY = 4096
MAX_TAGS = 64  # TensorBoard tags offered for plotting; more are a histogram dump, not a curve to read
LOSS = "loss"
TB_PREFIX = "tb: "  # a plot choice naming a TensorBoard tag: "tb: learning_rate"


class TrainingFigures:
    """Every worker's training figures, bounded, as the events bring them."""

    def __init__(self) -> None:
        self.loss: dict[str, Series] = {}
        self.step_time: dict[str, Series] = {}
        self.stats: dict[str, WorkerStats] = {}
        self.scalars: dict[str, dict[str, Series]] = {}  # TensorBoard tag -> role -> series
        self.stragglers: set[str] = set()
        self.rates = StepRates()  # the run's, from the roles' status (core.views.rates)
        self.loss_bins = BinnedWorkers(origin=0.0)
        self.time_bins = BinnedWorkers(origin=0.0)
        self.workers: list[str] = []  # every role with a series, in the order they came
        self.trainers: frozenset[str] = frozenset()  # the roles that may print steps, from their status
        # Each role's newest derived step time (step, ms) and its batch's time, drawn when it ends.
        self._derived: dict[str, tuple[tuple[float, float] | None, object]] = {}
        self.version = 0  # moves on every change a drawing could show

    def clear(self) -> None:
        """Forget every figure (another run is shown)."""
        self.loss.clear()
        self.step_time.clear()
        self.stats.clear()
        self.scalars.clear()
        self.stragglers = set()
        self.rates = StepRates()
        self.loss_bins = BinnedWorkers(origin=0.0)
        self.time_bins = BinnedWorkers(origin=0.0)
        self.workers.clear()
        self.trainers = frozenset()
        self._derived.clear()
        self.version += 1

    # ------------------------------------------------------------------ input

    def add_samples(self, role: str, samples: Iterable[Mapping[str, Any]]) -> None:
        """Take a ``metrics`` event's samples for ``role``."""
        stats = self.stats.get(role)
        if stats is None:
            # Each point's step time is derived here; the rates and stragglers come from the status.
            stats = self.stats[role] = WorkerStats(windows=False)
        loss_x: list[float] = []
        loss_v: list[float] = []
        time_x: list[float] = []
        time_v: list[float] = []
        # The records as they are, not a MetricSample each: a reopened day-long run hands over
        # ~170,000 of them.
        take, fields = stats.take, METRIC_FIELDS
        # A derived step time is final at its output batch's last line (WorkerStats): plotted
        # there, once the next line's time says the batch ended (a later event's, maybe: the same
        # points however the records are split into events).
        derived, derived_t = self._derived.pop(role, (None, None))  # the batch's newest line: step, ms
        for record in samples:
            if record.keys() != fields:
                continue  # not a metrics record: MetricSample(**record) refuses it
            step, loss, t = record["step"], record["loss"], record["t"]
            if derived is not None and t != derived_t:
                time_x.append(derived[0])
                time_v.append(derived[1])
                derived = None
            take(
                t,
                step,
                loss=loss,
                step_time_s=record["step_time_s"],
                steps_per_sec=record["steps_per_sec"],
                extra=record["extra"],
            )
            if step is None:
                continue
            self.version += 1
            if loss is not None and math.isfinite(loss):
                loss_x.append(float(step))
                loss_v.append(loss)
            if stats.step_time_s is None:
                continue
            if printed_step_time(record["step_time_s"], record["steps_per_sec"]) is not None:
                time_x.append(float(step))
                time_v.append(stats.step_time_s * 1000.0)
            else:
                derived, derived_t = (float(step), stats.step_time_s * 1000.0), t
        if derived is not None:
            self._derived[role] = (derived, derived_t)
        # The bins take a batch in one vectorised pass (a reopened run hands over thousands).
        for table, bins, xs, values in (
            (self.loss, self.loss_bins, loss_x, loss_v),
            (self.step_time, self.time_bins, time_x, time_v),
        ):
            if xs:
                self._series(table, role).extend(xs, values)  # point by point for a live run's few
                bins.add_many(role, xs, values)

    def add_scalars(self, role: str, points: Iterable[Mapping[str, object]]) -> None:
        """Take a ``scalars`` event's points ({tag, step, wall_time, value}) for ``role``."""
        batches: dict[str, tuple[list[float], list[float]]] = {}  # tag -> steps, values: one extend each
        for p in points:
            tag, step, value = p.get("tag"), p.get("step"), p.get("value")
            if not isinstance(tag, str) or not isinstance(step, int) or not isinstance(value, (int, float)):
                continue
            if tag not in self.scalars:
                if len(self.scalars) >= MAX_TAGS:
                    continue
                self.scalars[tag] = {}
                self.version += 1  # a new plot choice
            if math.isfinite(value):
                steps, values = batches.setdefault(tag, ([], []))
                steps.append(float(step))
                values.append(float(value))
        for tag, (steps, values) in batches.items():
            self._series(self.scalars[tag], role).extend(steps, values)
            self.version += 1

    def apply_status(self, roles: Iterable[RoleStatus], rates: StepRates | None = None) -> None:
        """Take the roles' status: which workers are stragglers; and the run's rates
        (:func:`core.views.rates.status_rates`)."""
        roles = tuple(roles)
        stragglers = {r.role for r in roles if r.straggler}
        rates = rates if rates is not None else StepRates()
        training = frozenset(r.role for r in trainers(roles))
        if stragglers != self.stragglers or rates != self.rates or training != self.trainers:
            self.stragglers = stragglers
            self.rates = rates
            self.trainers = training
            self.version += 1

    def _series(self, table: dict[str, Series], role: str) -> Series:
        series = table.get(role)
        if series is None:
            series = table[role] = Series(capacity=SERIES_CAPACITY)
            if role not in self.workers:
                self.workers.append(role)
        return series

    # ------------------------------------------------------------------ reading

    def plot_choices(self) -> list[str]:
        """What the upper plot can show: the loss, then each TensorBoard tag as ``tb: TAG``, in the
        order the tags came (only ever appended to, until :meth:`clear`)."""
        return [LOSS, *(TB_PREFIX + tag for tag in self.scalars)]

    def shown_series(self, role: str, choice: str) -> tuple[Series | None, str]:
        """The series the upper plot shows for ``role`` when ``choice`` (one of
        :meth:`plot_choices`) is picked, and what it is: ``loss``, ``loss (tb)`` (no loss in the
        output: TensorBoard's), or a tag."""
        if choice.startswith(TB_PREFIX):
            tag = choice[len(TB_PREFIX) :]
            return self.scalars.get(tag, {}).get(role), tag
        if role in self.loss:
            return self.loss[role], LOSS
        for tag in loss_tags_in(self.scalars):  # no loss in the output: the TensorBoard one
            series = self.scalars.get(tag, {}).get(role)
            if series is not None:
                return series, f"{LOSS} (tb)"
        return None, LOSS

    def plotted_roles(self) -> list[str]:
        """The roles with any curve, in natural order (``worker:2`` before ``worker:10``): a
        worker's colour is its place here."""
        roles = set(self.loss) | set(self.step_time) | {r for by in self.scalars.values() for r in by}
        return sorted(roles, key=natural_key)

    def step_times_ms(self) -> dict[str, float | None]:
        """Each worker's latest step time in milliseconds (None before it has one)."""
        return {r: (s.step_time_s * 1000.0 if s.step_time_s is not None else None) for r, s in self.stats.items()}

    def spread_key(self, *, step_time: bool) -> str:
        """Whose figures a spread's median is of (the step-time spread's, or the loss's), counting
        the workers not read yet: ``median of 700 of 1,024 workers (324 no step time yet)``. A
        median of the workers read so far, said as if of all, hid a quarter of a 1,024-worker run."""
        series = self.step_time if step_time else self.loss
        read = len(series)
        total = len(self.trainers | series.keys())
        if read >= total:
            return f"median of {read:,} workers"
        what = "step time" if step_time else "loss"
        return f"median of {read:,} of {total:,} workers ({total - read:,} no {what} yet)"

    def rate_text(self) -> str:
        """The run's global steps/s and examples/s (core.views.rates), and the stragglers by name."""
        text = cluster_text(self.rates) or "no steps yet"
        if self.stragglers:
            text += "\nstraggler: " + ", ".join(sorted(self.stragglers))
        return text
