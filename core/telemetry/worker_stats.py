"""Figures over a role's training samples: the latest step, loss and step time of one worker
(:class:`WorkerStats`, with its rate window and straggler readings), and TensorBoard's smoothing.
The samples come from :mod:`core.telemetry.metrics`."""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.telemetry.metrics import MetricSample, inverse_or_none, positive_or_none
from core.telemetry.step_window import StepWindow
from core.telemetry.stragglers import DERIVED_SPAN_S, StepTimes

METRIC_FIELDS = frozenset(f.name for f in dataclasses.fields(MetricSample))
# Batch ends kept to measure a derived step time back from: those of the last DERIVED_SPAN_S,
# bounded for a flood of chunks read milliseconds apart.
MAX_BATCH_ENDS = 256


class WorkerStats:
    """The latest figures for one worker, from its samples; constant memory.

    ``step_time_s`` is the printed one when a sample has it (or ``1 / steps_per_sec``); otherwise it
    is derived from the samples' times, which are when the agent read the lines: the lines of one
    read (one output batch) share a time, and a batch may hold seconds of lines when the agent or
    the controller was behind. So it is measured between batch ends only, from the newest batch end
    at least :data:`DERIVED_SPAN_S` back: ``(t - t_end) / (step - step_end)``. Between a batch's
    first line and the last one before it, a burst's seconds would be one step's time (a worker
    stepping every 0.3 s read 7 s). In a worker's first seconds it is measured from its oldest
    batch end, once that is half the span back. The span keeps a read's jitter (a quarter of a
    second) a small part of the figure, and chunks of a flood read milliseconds apart from reading
    as a step each. The figure is final at a batch's last line; an earlier line of the batch reads
    the steps made so far, so a chart plots the batch's last line only. A step or clock that goes
    backwards (a restarted worker) starts the derivation afresh. Steps are whatever the trainer
    prints: a global step under between-graph replication makes this the time per global step.

    ``window`` keeps the last 30 s of steps for the step rates (:mod:`core.telemetry.step_window`),
    ``times`` the step-time readings the straggler judge reads (:mod:`core.telemetry.stragglers`).
    With ``windows=False`` both stay empty: a view that shows neither (the Training tab, which
    derives each point's step time here) skips them, about half of each record's cost, and a
    reopened 256-worker run hands that tab ~130,000 records.
    """

    def __init__(self, *, windows: bool = True) -> None:
        self.step: int | None = None
        self.loss: float | None = None
        self.step_time_s: float | None = None
        self.steps_per_sec: float | None = None
        self.extra: dict[str, float] = {}
        self.samples = 0
        self.last_t: float | None = None
        self._batch: tuple[float, int] | None = None  # the newest output batch: its time, its last step
        self._ends: collections.deque[tuple[float, int]] = collections.deque(maxlen=MAX_BATCH_ENDS)
        self.window = StepWindow()
        self.times = StepTimes()
        self._windows = windows

    def add(self, sample: MetricSample) -> None:
        """Take one sample into account."""
        self.take(
            sample.t,
            sample.step,
            loss=sample.loss,
            step_time_s=sample.step_time_s,
            steps_per_sec=sample.steps_per_sec,
            extra=sample.extra,
        )

    def add_records(self, records: Iterable[Mapping[str, Any]], *, windows_from: int = 0) -> None:
        """:meth:`add` for records of metrics.jsonl (a sample's fields as a dict) without making the
        samples: opening a day-long run of 64 workers takes ~170,000 of them. A record whose keys are not
        exactly the sample's fields is skipped, as ``MetricSample(**record)`` refuses it.

        ``windows_from``: the records before this index are not taken into the rate window and the
        straggler readings (the other figures take them all). A skimmed file's first records are
        spaced over its span, minutes or hours apart: what those windows hold at the end comes from
        its newest lines, read whole after them (:func:`core.run.skim.skim_parts`)."""
        take, fields = self.take, METRIC_FIELDS
        for i, r in enumerate(records):
            if r.keys() == fields:
                take(
                    r["t"],
                    r["step"],
                    loss=r["loss"],
                    step_time_s=r["step_time_s"],
                    steps_per_sec=r["steps_per_sec"],
                    extra=r["extra"],
                    windows=i >= windows_from,
                )

    def take(
        self,
        t: float,
        step: int | None,
        *,
        loss: float | None,
        step_time_s: float | None,
        steps_per_sec: float | None,
        extra: dict[str, float],
        windows: bool = True,
    ) -> None:
        """Take one sample given by its fields (what :meth:`add` and :meth:`add_records` do);
        ``windows=False``: not into the rate window and the straggler readings."""
        self.samples += 1
        self.last_t = t
        if loss is not None:
            self.loss = loss
        if extra:
            self.extra.update(extra)
        # A step time that is not a finite positive number (a damaged record) is not a figure.
        printed = printed_step_time(step_time_s, steps_per_sec)
        if windows and self._windows:
            self.window.take(t, step, printed)
            self.times.take(t, step, printed)
        if step is not None:
            derived = self._derive(t, step)
            if printed is None:
                printed = derived
            self.step = step
        if printed is not None:
            self.step_time_s = printed
            self.steps_per_sec = 1.0 / printed

    def _derive(self, t: float, step: int) -> float | None:
        """The step time from batch ends (see the class docstring), None when there is none yet."""
        batch, ends = self._batch, self._ends
        if batch is None or step < batch[1] or t < batch[0]:
            ends.clear()  # the first step, a restart or the clock went back: start afresh
            self._batch = (t, step)
            return None
        if t > batch[0]:
            ends.append(batch)  # the batch before this line's is complete
        self._batch = (t, step)
        cutoff = t - DERIVED_SPAN_S
        while len(ends) > 1 and ends[1][0] <= cutoff:
            ends.popleft()
        # ends[0]: the newest end DERIVED_SPAN_S back, or in a worker's first seconds the oldest,
        # once half the span has passed (a figure over a quarter-second read or two is mostly jitter).
        if not ends or step <= ends[0][1] or t - ends[0][0] < DERIVED_SPAN_S / 2:
            return None
        return positive_or_none((t - ends[0][0]) / (step - ends[0][1]))


def printed_step_time(step_time_s: object, steps_per_sec: object) -> float | None:
    """The step time a record's trainer printed (or one over the steps/s it printed), if it is a
    finite positive number: what every reader of metrics records takes as printed."""
    given = step_time_s if isinstance(step_time_s, (int, float)) and not isinstance(step_time_s, bool) else None
    rate = steps_per_sec if isinstance(steps_per_sec, (int, float)) and not isinstance(steps_per_sec, bool) else None
    return positive_or_none(given) or inverse_or_none(rate)


def ema(values: Sequence[float], weight: float) -> list[float]:
    """TensorBoard's scalar smoothing: a debiased exponential moving average.

    As TensorBoard's line chart does it: ``last = last * w + (1 - w) * v`` starting from 0, divided
    by ``1 - w ** n`` where ``n`` counts the finite values so far; a non-finite value is passed
    through unsmoothed (and does not enter the average); a constant series is returned as is.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"smoothing weight must be within [0, 1], got {weight}")
    last = 0.0
    num_accum = 0
    is_constant = all(v == values[0] for v in values) if values else True
    out: list[float] = []
    for v in values:
        if is_constant or not math.isfinite(v):
            out.append(float(v))
            continue
        last = last * weight + (1.0 - weight) * v
        num_accum += 1
        debias = 1.0 - weight**num_accum if weight != 1.0 else 1.0
        out.append(last / debias)
    return out
