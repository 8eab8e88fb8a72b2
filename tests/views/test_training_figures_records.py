"""The training tab takes metrics records as they are, not a MetricSample each (issue 25: ~170,000
when a day-long run reopens); its curves and figures are those the sample-by-sample code gave. The
reference below is that code; the records are those of tests/helpers/metric_records.py,
damaged ones included. The figures are the tab's Qt-free model (core/views): no widget is built."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.telemetry.metrics import MetricSample
from core.telemetry.worker_stats import WorkerStats, printed_step_time
from core.views.series import Series
from core.views.training import SERIES_CAPACITY, TrainingFigures
from tests.helpers.metric_records import DAMAGED, RECORD, stats_state


def _reference(batches: list[list[dict[str, Any]]]) -> tuple[WorkerStats, Series | None, Series | None]:
    """The stats and the loss and step-time series, as the sample-by-sample code built them: a
    printed step time drawn at its line, a derived one at its output batch's last line (the lines
    sharing its time), once a line of another time comes."""
    # The tab keeps no rate window nor straggler readings (the status has them): windows=False.
    stats = WorkerStats(windows=False)
    loss, step_time = Series(capacity=SERIES_CAPACITY), Series(capacity=SERIES_CAPACITY)
    derived: tuple[float, float, float] | None = None  # step, step time (ms), the batch's time
    for batch in batches:
        loss_x, loss_v, time_x, time_v = [], [], [], []
        for raw in batch:
            try:
                sample = MetricSample(**raw)
            except TypeError:
                continue
            if derived is not None and sample.t != derived[2]:
                time_x.append(derived[0])
                time_v.append(derived[1])
                derived = None
            stats.add(sample)
            if sample.step is None:
                continue
            if sample.loss is not None and math.isfinite(sample.loss):
                loss_x.append(float(sample.step))
                loss_v.append(sample.loss)
            if stats.step_time_s is None:
                continue
            if printed_step_time(sample.step_time_s, sample.steps_per_sec) is not None:
                time_x.append(float(sample.step))
                time_v.append(stats.step_time_s * 1000.0)
            else:
                derived = (float(sample.step), stats.step_time_s * 1000.0, sample.t)
        if loss_x:
            loss.extend(loss_x, loss_v)
        if time_x:
            step_time.extend(time_x, time_v)
    return stats, (loss if loss.appended else None), (step_time if step_time.appended else None)


def _points(series: Series | None) -> str:
    """Every segment's points (a step that goes back starts one), as text: NaN compares too."""
    if series is None:
        return "none"
    return repr([series.points(segment=k) for k in range(series.segment_count())] + [series.points()])


@given(batches=st.lists(st.lists(st.one_of(RECORD, RECORD, DAMAGED), max_size=25), min_size=1, max_size=3))
@settings(max_examples=80, deadline=None)
def test_the_tab_s_curves_and_figures_are_those_of_a_sample_at_a_time(batches: list[list[dict[str, Any]]]) -> None:
    figures = TrainingFigures()
    for batch in batches:
        figures.add_samples("worker:0", batch)
    stats, loss, step_time = _reference(batches)
    assert stats_state(figures.stats["worker:0"]) == stats_state(stats)
    assert _points(figures.loss.get("worker:0")) == _points(loss)
    assert _points(figures.step_time.get("worker:0")) == _points(step_time)


def test_the_tab_keeps_no_rate_window_nor_straggler_readings() -> None:
    """The tab derives each point's step time; the rates and stragglers it shows come from the status.
    A reopened 256-worker run handed it ~130,000 records, each taken into both before, about half of
    each record's cost on the GUI thread."""
    figures = TrainingFigures()
    records = [
        {"t": 100.0 + s, "step": s, "loss": 1.0, "step_time_s": None, "steps_per_sec": None, "extra": {}}
        | {"source": "classic"}
        for s in range(200)
    ]
    figures.add_samples("worker:0", records)
    stats = figures.stats["worker:0"]
    assert stats.window.last_t is None and len(stats.times) == 0  # was: t 299.0, 100 readings
    assert stats.step == 199 and stats.step_time_s == 1.0  # the derived step time is kept
    # A derived step time is drawn once a line of another read comes (its read may hold more
    # lines): step 199's read is the newest, so the curve ends at step 198.
    assert figures.step_time["worker:0"].last() == (198.0, 1000.0)
