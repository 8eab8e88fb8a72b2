"""The spread at 1,024 workers: the views are worked out again only in the columns new points
touched, with the same figures as from scratch; past as many workers as the heat map has pixel
rows, neighbours share a row that shows the slowest of them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.views.spread import BinnedWorkers

point = st.tuples(st.integers(0, 5), st.floats(0, 300), st.floats(0.01, 10))


def same(a: BinnedWorkers, b: BinnedWorkers, columns: int | None) -> None:
    pairs = (
        (a.spread(columns), b.spread(columns)),
        (a.heatmap(columns), b.heatmap(columns)),
        (a.heatmap(columns, max_rows=2), b.heatmap(columns, max_rows=2)),  # 6 workers: 3 a row
    )
    for mine, theirs in pairs:
        assert repr(mine) == repr(theirs)  # repr: NaN cells compare too
    for worker in ("worker:0", "worker:3"):
        assert repr(a.row(worker, columns)) == repr(b.row(worker, columns))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(point, max_size=12), max_size=10), st.sampled_from([8, 16]), st.sampled_from([None, 3, 5]))
def test_views_asked_between_points_equal_views_from_scratch(batches, bins, columns):
    live = BinnedWorkers(bins=bins, origin=0.0)
    seen: list[tuple[int, float, float]] = []
    for batch in batches:
        for worker, x, value in batch:
            live.add(f"worker:{worker}", x, value)
        seen.extend(batch)
        fresh = BinnedWorkers(bins=bins, origin=0.0)
        for worker, x, value in seen:
            fresh.add(f"worker:{worker}", x, value)
        # The column width the data allows moves with hysteresis (so it does not flip from frame
        # to frame): it depends on when it was asked. The same one, the same views.
        fresh._data_group = live._data_group
        same(live, fresh, columns)


def test_a_heat_map_of_1024_workers_has_a_row_per_pixel_showing_the_slowest():
    acc = BinnedWorkers(bins=64, origin=0.0)
    x = np.arange(640, dtype=float)
    for w in range(1024):
        slow = 3.0 if w == 517 else 1.0
        acc.add_many(f"worker:{w}", x, np.full(x.size, 0.1) * np.where(x >= 320, slow, 1.0))
    full = acc.heatmap(max_columns=64)
    assert full is not None and len(full.rows) == 1024
    heat = acc.heatmap(max_columns=64, max_rows=300)
    assert (
        heat is not None
        and heat.per_row == 4
        and len(heat.rows) == 256
        and heat.values.shape == (256, full.values.shape[1])
    )
    assert heat.rows[0] == "worker:0-3" and heat.rows[-1] == "worker:1020-1023"
    # Natural order: worker:517 shares the row of 516-519.
    (row,) = (i for i, name in enumerate(heat.rows) if name == "worker:516-519")
    assert heat.values[row, -1] == pytest.approx(3.0) and heat.values[row, 0] == pytest.approx(1.0)
    assert np.nanmax(np.delete(heat.values, row, axis=0)) == pytest.approx(1.0)
    assert acc.heatmap(max_columns=64, max_rows=2000).rows == full.rows  # room for every worker


nonfinite_or_point = st.tuples(
    st.integers(0, 5), st.one_of(st.floats(0, 300), st.just(float("nan"))), st.floats(0.01, 10)
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(nonfinite_or_point, min_size=1, max_size=3), max_size=40),
    st.sampled_from([8, 16]),
    st.sampled_from([None, 3]),
    st.integers(1, 15),
)
def test_live_points_of_many_workers_taken_in_one_pass_equal_adding_each(calls, bins, columns, read_every):
    """A live frame's point or two per worker wait for the next read and go in together: the
    same views, origin and width as :meth:`BinnedWorkers.add` on each point in order."""
    live = BinnedWorkers(bins=bins)  # no origin given: the first finite point's
    each = BinnedWorkers(bins=bins)
    for n, call in enumerate(calls):
        worker = f"worker:{call[0][0]}"
        live.add_many(worker, [x for _, x, _ in call], [v for _, _, v in call])
        for _, x, value in call:
            each.add(worker, x, value)
        if n % read_every == 0:
            same(live, each, columns)
    same(live, each, columns)
    assert (live.origin, live.width, len(live)) == (each.origin, each.width, len(each))


def metrics_record(step: int) -> dict[str, Any]:
    """A ``metrics`` event's sample, as the inbox hands it to the Training tab."""
    return {"t": 1.0 + step, "step": step, "loss": 1.0 / step, "step_time_s": 0.1, "steps_per_sec": 10.0} | {
        "extra": {},
        "source": "step",
    }


def test_a_live_frame_of_256_workers_goes_into_the_bins_without_a_numpy_update_per_point(monkeypatch):
    """The Training tab's figures take a metrics event per worker per frame: point by point, each
    was two NumPy element updates per bins (BinnedWorkers.add), the tab's largest cost at 256."""
    from core.views.training import TrainingFigures

    figures = TrainingFigures()
    for step in range(1, 4):  # three frames, a point per worker each
        for w in range(256):
            figures.add_samples(f"worker:{w}", [metrics_record(step)])
        figures.loss_bins.spread()  # the frame reads the bins
        figures.time_bins.spread()
    calls: list[str] = []
    add = BinnedWorkers.add
    monkeypatch.setattr(BinnedWorkers, "add", lambda self, *a: calls.append(a[0]) or add(self, *a))
    for w in range(256):
        figures.add_samples(f"worker:{w}", [metrics_record(4)])
    figures.loss_bins.spread()
    assert calls == []
    assert len(figures.loss_bins) == len(figures.time_bins) == 256
    _, losses = figures.loss_bins.row("worker:255")
    assert losses[-1] == 0.25  # the frame's points are in


def test_a_followed_run_s_second_of_lines_per_worker_goes_into_the_bins_in_one_pass(monkeypatch):
    """A window following a run gets each worker's last second of lines at once (10 at 10 lines/s):
    each of 256 workers' batches took two 1,024-bin ``bincount`` passes of its own per bins, 40 %
    of the Training tab's cost per point at 256 simulated workers. They wait for the frame's read."""
    from core.views.training import TrainingFigures

    figures = TrainingFigures()
    for w in range(256):
        figures.add_samples(f"worker:{w}", [metrics_record(step) for step in range(1, 11)])
    figures.loss_bins.spread()
    figures.time_bins.spread()
    passes: list[int] = []
    bincount = np.bincount
    monkeypatch.setattr(np, "bincount", lambda *a, **k: passes.append(1) or bincount(*a, **k))
    for w in range(256):
        figures.add_samples(f"worker:{w}", [metrics_record(step) for step in range(11, 21)])
    figures.loss_bins.spread()
    figures.time_bins.spread()
    assert passes == [], f"{len(passes)} bincount passes for one second of 256 workers' lines"
    _, losses = figures.loss_bins.row("worker:255")
    assert losses[-1] == 1.0 / 20  # the second's points are in
