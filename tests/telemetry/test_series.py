"""Bounded multi-resolution series: fixed memory over a day, spikes kept, exact newest point."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.views.series import MAX_OLD_SEGMENTS, Series

DAY_S = 24 * 3600
GPUS = 64
FIGURES_PER_GPU = 6  # utilization, memory, temperature, power, loss, step time
BUDGET_BYTES = 64 * 1024 * 1024


def test_a_day_at_one_second_fits_a_flat_bound() -> None:
    series = Series()
    at_30k = None
    for i in range(DAY_S):
        series.append(float(i), math.sin(i / 600.0))
        if i == 30_000:  # past the raw ring and four levels (2,048 + 4 x 256 x 4**k points): all a day needs
            at_30k = series.memory_bytes()
    assert at_30k == series.memory_bytes()
    assert series.memory_bytes() < 256 * 1024
    # Entries held are bounded by the structure, not by the run's length.
    assert len(series) <= series.capacity + 8 * series.bucket_capacity
    assert series.appended == DAY_S
    ts, _, _, _ = series.points()
    assert ts[0] < 600 and ts[-1] == DAY_S - 1  # the whole day is still covered


def test_a_series_allocates_a_level_only_when_a_bucket_reaches_it() -> None:
    """Opening a 256-worker run makes ~1,000 series that get a few hundred points each: every level
    allocated up front was 8 x 6 x 4 KB zeroed per training series (285 KB held, where its points
    take 64 KB), about 6 % of the GUI thread's time opening a day-long 256-worker run."""
    series = Series(capacity=4096)
    raw_bytes = 2 * 4096 * 8
    for i in range(512):  # what a reopened run hands a worker's curve
        series.append(float(i), 1.0)
    assert series.memory_bytes() < raw_bytes + 8192  # was 284,712: every level's arrays
    for i in range(512, 4096 + 4):  # one bucket: level 0 only
        series.append(float(i), 1.0)
    one_level = 6 * series.bucket_capacity * 8
    assert raw_bytes + one_level < series.memory_bytes() < raw_bytes + one_level + 8192
    assert series.points()[0][:2] == [1.5, 4.0]  # the bucket's middle, then the first exact point


def test_64_gpus_times_6_figures_for_a_day_fit_the_budget() -> None:
    series = Series()
    for i in range(DAY_S):
        series.append(float(i), 1.0)
    total = GPUS * FIGURES_PER_GPU * series.memory_bytes()
    print(f"\n{GPUS} GPUs x {FIGURES_PER_GPU} figures x 24 h: {total / 2**20:.1f} MiB")
    assert total < BUDGET_BYTES


def test_early_spike_is_the_max_of_the_whole_run() -> None:
    series = Series()
    for i in range(DAY_S):
        series.append(float(i), 1000.0 if i == 3600 else 1.0 + (i % 7) * 0.01)
    _, _, mins, maxs = series.points()
    assert max(maxs) == 1000.0
    assert min(mins) == 1.0
    assert series.extremes() == (1.0, 1000.0)
    # Still there when the plot asks for few points.
    _, _, mins, maxs = series.points(max_points=100)
    assert len(maxs) <= 100
    assert max(maxs) == 1000.0 and min(mins) == 1.0
    # And when it asks for the hour around it.
    _, _, _, maxs = series.points(3000.0, 4000.0)
    assert max(maxs) == 1000.0


def test_newest_point_is_exact() -> None:
    series = Series(capacity=64, levels=2)
    assert series.last() is None
    for i in range(10_000):
        series.append(i * 0.1, i / 3.0)
    assert series.last() == (9999 * 0.1, 9999 / 3.0)
    ts, means, mins, maxs = series.points()
    assert (ts[-1], means[-1], mins[-1], maxs[-1]) == (9999 * 0.1, 9999 / 3.0, 9999 / 3.0, 9999 / 3.0)


def test_points_are_time_ordered_and_clipped() -> None:
    series = Series(capacity=64, levels=3)
    for i in range(5000):
        series.append(float(i), float(i % 10))
    ts, _, _, _ = series.points()
    assert ts == sorted(ts)
    ts, means, mins, maxs = series.points(1000.0, 4980.0)
    assert ts == sorted(ts)
    assert ts[0] >= 1000.0 and ts[-1] <= 4980.0
    assert ts[-1] == 4980.0  # the exact point at the bound
    assert len(ts) == len(means) == len(mins) == len(maxs)
    assert series.points(6000.0, 7000.0) == ([], [], [], [])
    ts, _, _, _ = series.points(max_points=10)
    assert 0 < len(ts) <= 10 and ts == sorted(ts)


def test_recent_points_are_at_full_resolution() -> None:
    series = Series(capacity=128, levels=4)
    for i in range(1000):
        series.append(float(i), float(i))
    ts, means, _, _ = series.points(900.0)
    assert ts == [float(i) for i in range(900, 1000)]
    assert means == ts


def test_last_level_keeps_the_whole_run_by_merging_pairs() -> None:
    series = Series(capacity=8, levels=1)
    for i in range(100_000):
        series.append(float(i), -5.0 if i == 10 else 0.0)
    assert len(series) <= 8 + series.bucket_capacity
    ts, means, mins, _ = series.points()
    assert ts[0] < 100_000 / 8 and min(mins) == -5.0  # buckets of even width cover it all
    assert all(m == pytest.approx(0.0, abs=1e-3) for m in means)


def test_nan_and_inf_values() -> None:
    series = Series(capacity=8, levels=2)
    for i in range(100):
        series.append(float(i), math.nan if i < 20 else (math.inf if i == 50 else 1.0))
    _, means, _, maxs = series.points()
    assert max(m for m in maxs if m == m) == math.inf
    assert math.isnan(means[0])  # a bucket of only NaN reads NaN
    assert series.extremes() == (1.0, math.inf)
    assert Series().points() == ([], [], [], [])
    assert Series().extremes() is None


def test_step_going_back_starts_a_new_segment() -> None:
    series = Series(capacity=16, levels=2)
    for step in range(0, 500):
        series.append(float(step), 2.0)
    for step in range(400, 600):  # the worker restarted from its step-400 checkpoint
        series.append(float(step), 1.0)
    assert series.segment_count() == 1
    ts, means, _, _ = series.points()
    assert ts[0] >= 400 and ts == sorted(ts) and set(means) == {1.0}
    old_ts, old_means, old_mins, old_maxs = series.points(segment=0)
    assert old_ts == sorted(old_ts) and old_ts[0] < 50 and old_ts[-1] == 499.0
    assert set(old_means) == set(old_mins) == set(old_maxs) == {2.0}
    assert series.extremes() == (1.0, 2.0)
    assert series.last() == (599.0, 1.0)


def test_old_segments_are_bounded() -> None:
    series = Series(capacity=16, levels=2)
    for _ in range(MAX_OLD_SEGMENTS + 5):
        for step in range(1000):
            series.append(float(step), 1.0)
    assert series.segment_count() == MAX_OLD_SEGMENTS
    one = Series(capacity=16, levels=2)
    for step in range(1000):  # its levels allocated, as the live segment's are
        one.append(float(step), 1.0)
    assert series.memory_bytes() < one.memory_bytes() + MAX_OLD_SEGMENTS * 5 * (series.bucket_capacity * 8 + 128)


def test_rejects_non_finite_time_and_bad_sizes() -> None:
    with pytest.raises(ValueError, match="finite"):
        Series().append(math.nan, 1.0)
    with pytest.raises(ValueError, match="capacity"):
        Series(capacity=1)
    with pytest.raises(ValueError, match="levels"):
        Series(levels=0)


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


@given(
    st.lists(
        st.tuples(st.floats(min_value=0, max_value=50), st.floats(allow_nan=True, allow_infinity=True)), max_size=600
    ),
    st.integers(min_value=8, max_value=40),
    st.integers(min_value=1, max_value=4),
)
@settings(max_examples=200, deadline=None)
def test_random_appends_never_raise_and_stay_bounded(
    steps: list[tuple[float, float]], capacity: int, levels: int
) -> None:
    series = Series(capacity=capacity, levels=levels)
    t = 0.0
    for dt, value in steps:
        t += dt if dt < 45 else -dt  # now and then time goes back
        series.append(t, value)
        assert len(series) <= series.capacity + levels * series.bucket_capacity
    series.points(max_points=7)
    series.points(t0=10.0, t1=20.0)
    for k in range(series.segment_count()):
        series.points(segment=k)
    if steps:
        assert series.last() is not None


@given(
    st.lists(st.tuples(st.floats(min_value=0, max_value=5), finite), min_size=1, max_size=800),
    st.integers(min_value=8, max_value=40),
    st.integers(min_value=1, max_value=3),
    st.one_of(st.none(), st.integers(min_value=1, max_value=50)),
)
@settings(max_examples=200, deadline=None)
def test_buckets_have_min_le_mean_le_max_and_keep_extremes(
    steps: list[tuple[float, float]], capacity: int, levels: int, max_points: int | None
) -> None:
    series = Series(capacity=capacity, levels=levels)
    t = 0.0
    for dt, value in steps:
        t += dt
        series.append(t, value)
    ts, means, mins, maxs = series.points(max_points=max_points)
    assert ts == sorted(ts)
    assert all(lo <= mean <= hi for lo, mean, hi in zip(mins, means, maxs, strict=True))
    values = [v for _, v in steps]
    assert min(mins) == min(values) and max(maxs) == max(values)
    assert (ts[-1], means[-1]) == series.last() or max_points is not None


@given(
    st.lists(st.tuples(st.floats(min_value=-3, max_value=5), st.floats(-1e6, 1e6)), min_size=0, max_size=600),
    st.integers(min_value=8, max_value=40),
    st.integers(min_value=1, max_value=3),
)
@settings(max_examples=150, deadline=None)
def test_arrays_read_what_points_reads_for_every_segment(
    steps: list[tuple[float, float]], capacity: int, levels: int
) -> None:
    """The plots' NumPy read gives the same times and means as ``points`` (live and finished)."""
    series = Series(capacity=capacity, levels=levels)
    t = 0.0
    for dt, value in steps:  # a negative dt starts a new segment
        t += dt
        series.append(t, value)
    for segment in [*range(series.segment_count()), None]:
        ts, means, _, _ = series.points(segment=segment)
        x, y = series.arrays(segment=segment)
        assert x.tolist() == ts
        assert y.tolist() == means
