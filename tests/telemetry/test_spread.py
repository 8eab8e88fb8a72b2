"""Spread, slowest workers and the step-time heat map: what the Training tab draws past a
handful of workers. Memory follows workers x bins, never the run's length; the statistics match
numpy's on the same binned values."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from core.views.spread import BinnedWorkers, slowest
from tests.helpers.step_times import step_times


def test_spread_has_the_median_and_a_band_that_holds_the_straggler():
    acc = step_times(64, 2000, slow="worker:13", slow_from=1000)
    result = acc.spread(max_columns=100)
    assert result is not None and len(result.x) == 100
    assert np.all(result.count == 64)
    base = np.array([0.1 + 0.001 * w for w in range(64)])
    assert np.allclose(result.median, np.median(base), rtol=0.02)
    assert np.allclose(result.high[:45], base.max(), rtol=0.01)
    assert np.allclose(result.high[55:], 2 * base[13], rtol=0.01)  # worker:13 doubled
    assert np.all(result.q_high[55:] < result.high[55:])  # the percentile band leaves the outlier out
    assert np.allclose(result.low, 0.1, rtol=0.01)
    assert result.x[0] > 0 and result.x[-1] < 2000 + acc.width


def test_slowest_names_only_real_outliers_slowest_first():
    assert slowest({f"worker:{i}": 0.1 for i in range(32)}) == []
    times = {f"worker:{i}": 0.1 for i in range(32)} | {"worker:7": 0.3, "worker:20": 0.5, "worker:3": None}
    assert slowest(times, k=3) == ["worker:20", "worker:7"]
    assert slowest({"worker:0": 1.0}) == []


def test_heatmap_marks_the_straggler_from_when_it_slowed():
    hm = step_times(32, 1000, slow="worker:10", slow_from=500).heatmap(max_columns=50)
    assert hm is not None and hm.values.shape == (32, 50) and len(hm.edges) == 51
    assert hm.rows[:3] == ("worker:0", "worker:1", "worker:2") and hm.rows[10] == "worker:10"
    row = hm.values[10]
    assert np.all(row[:24] < 1.1) and np.all(row[26:] > 1.8)
    assert np.nanmax(np.delete(hm.values, 10, axis=0)) < 1.2


def test_memory_follows_workers_and_bins_not_the_run_length():
    acc = BinnedWorkers(bins=256, origin=0.0)
    for step in range(0, 2_000_000, 97):  # far more steps than bins: the bins coarsen
        acc.add("worker:0", float(step), 1.0)
        acc.add("worker:1", float(step), 3.0)
    assert acc.width >= 2_000_000 / 256 and acc.memory_bytes() <= 4 * 256 * 16
    result = acc.spread()
    assert result is not None and len(result.x) <= 256
    assert np.allclose(result.median, 2.0) and np.allclose(result.low, 1.0) and np.allclose(result.high, 3.0)
    assert BinnedWorkers().spread() is None


@given(
    st.dictionaries(
        st.sampled_from([f"worker:{i}" for i in range(7)]),
        st.lists(st.tuples(st.floats(0, 1e4), st.floats(-1e6, 1e6)), min_size=1, max_size=40),
        min_size=1,
    ),
    st.sampled_from([4, 16, 64]),
)
def test_statistics_match_numpy_on_the_binned_values(data, bins):
    acc = BinnedWorkers(bins=bins, origin=0.0)
    for name, points in data.items():
        for x, v in points:
            acc.add(name, x, v)
    acc.add("worker:9", math.nan, 1.0)  # ignored, as is any non-finite value
    made = acc._means(None)
    assert made is not None
    _, _, means = made
    result = acc.spread()
    assert result is not None
    for col in range(means.shape[1]):
        values = means[:, col][np.isfinite(means[:, col])]
        if values.size == 0:
            assert math.isnan(result.median[col]) and result.count[col] == 0
            continue
        assert result.count[col] == values.size
        assert math.isclose(result.median[col], float(np.median(values)), rel_tol=1e-9, abs_tol=1e-9)
        assert result.low[col] == values.min() and result.high[col] == values.max()
        assert values.min() <= result.q_low[col] <= result.q_high[col] <= values.max()


@given(
    st.lists(st.tuples(st.floats(0, 5e4), st.floats(-10, 10)), min_size=1, max_size=200), st.sampled_from([4, 8, 32])
)
def test_add_many_equals_adding_one_by_one(points, bins):
    one, many = BinnedWorkers(bins=bins, origin=0.0), BinnedWorkers(bins=bins, origin=0.0)
    for x, v in points:
        one.add("worker:0", x, v)
    many.add_many("worker:0", [x for x, _ in points], [v for _, v in points])
    assert one.width == many.width
    a, b = one._means(None), many._means(None)
    assert a is not None and b is not None
    assert np.allclose(a[2], b[2], equal_nan=True) and np.allclose(a[1], b[1])


@given(
    st.lists(st.tuples(st.floats(0, 5e4), st.floats(-10, 10)), min_size=1, max_size=200),
    st.sampled_from([4, 8, 32]),
    st.integers(1, 12),
)
def test_small_batches_as_a_live_run_sends_them_equal_one_batch(points, bins, batch):
    """A live run hands over a point or a few a frame (taken point by point), a reopened run
    thousands at once (vectorised): the same bins either way."""
    live, reopened = BinnedWorkers(bins=bins, origin=0.0), BinnedWorkers(bins=bins, origin=0.0)
    for start in range(0, len(points), batch):
        chunk = points[start : start + batch]
        live.add_many("worker:0", [x for x, _ in chunk], [v for _, v in chunk])
    reopened.add_many("worker:0", [x for x, _ in points], [v for _, v in points])
    assert live.width == reopened.width
    a, b = live._means(None), reopened._means(None)
    assert a is not None and b is not None
    assert np.allclose(a[2], b[2], equal_nan=True) and np.allclose(a[1], b[1])
    assert np.allclose(live.spread().median, reopened.spread().median, equal_nan=True)


def test_the_median_is_of_the_workers_not_of_the_few_whose_points_lie_closer():
    """A step time is measured between two reads of a worker's output: one point a read, every 10
    steps for a worker at 10 steps/s read once a second, every 3 for one at 3 steps/s. At a bin a
    step, the columns between the fast workers' points held only the slow workers' points, and
    "the median of 1,024 workers" drew their step time there: a zigzag between 100 and 300 ms
    over the slow workers' steps (a window on a live 1,024-worker run, 2026-11-29). A column is
    no finer than the median worker's points, so each holds about every worker."""
    bins = BinnedWorkers(origin=0.0)
    for w in range(100):  # in phase, as simulated agents started together read
        steps = np.arange(10.0, 1001.0, 10.0)
        bins.add_many(f"worker:{w}", steps, np.full(steps.size, 100.0))
    for w in (100, 101):  # slow: 300 ms a step, a read every 3 steps, up to step 300
        steps = np.arange(3.0, 301.0, 3.0)
        bins.add_many(f"worker:{w}", steps, np.full(steps.size, 300.0))
    spread = bins.spread(max_columns=1400)  # a wide plot: the bins' own resolution allowed
    assert spread is not None
    has = spread.count > 0
    assert np.all(spread.median[has] == 100.0), spread.median[has][:20]
    early = has & (spread.x < 300)
    assert np.min(spread.count[early]) >= 100, spread.count[early][:20]  # every worker in each column
    heat = bins.heatmap(max_columns=1400)
    assert heat is not None
    fast_rows = heat.values[:100, : int(np.sum(spread.x < 1000))]
    assert np.isfinite(fast_rows).mean() > 0.95  # no stripes of columns without the fast workers
    # Dense points (a loss a step) keep a column a bin.
    loss = BinnedWorkers(origin=0.0)
    for w in range(4):
        loss.add_many(f"worker:{w}", np.arange(1.0, 501.0), np.linspace(2.0, 0.1, 500))
    dense = loss.spread(max_columns=1400)
    assert dense is not None and dense.x.size == 501  # a column a bin (bin 0, before step 1, is empty)


def test_the_column_width_for_the_data_does_not_flip_from_frame_to_frame():
    """Live, the median worker's points grow with the steps: the column width keeps a power of two
    and moves only when the data needs a coarser one or allows one under half as wide, so the
    view is not redone whole every frame (a full redo at 1,024 x 1,024 is 170 ms)."""
    bins = BinnedWorkers(origin=0.0)
    groups = []
    for read in range(1, 301):  # 300 reads of 10 steps, 50 workers, a frame after each
        for w in range(50):
            bins.add(f"worker:{w}", 10.0 * read + (w % 3), 100.0 + w % 7)
        bins.spread(max_columns=2000)
        groups.append(bins._view.group if bins._view is not None else None)
    changes = sum(1 for a, b in itertools.pairwise(groups) if a != b)
    assert changes <= 4, groups  # the first reads, then a coarsening of the bins or two
    assert groups[-1] in (4, 8, 16), groups[-1]
