"""``Series.extend``: a batch gives exactly the state that appending its points one by one gives,
to the last bit of every bucket (compared through ``repr``, so 0.0 and -0.0 differ)."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.views.series import EXTEND_LOOP_BELOW, MAX_OLD_SEGMENTS, Series

SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324]


def state(series: Series) -> str:
    """Everything a reader can see of ``series``, with NaN, signed zeros and every bit shown."""
    seen: list[object] = [
        series.points(),
        series.points(t0=3.0, t1=40.0, max_points=5),
        series.extremes(),
        series.last(),
        series.appended,
        len(series),
        series.segment_count(),
    ]
    for segment in [*range(series.segment_count()), None]:
        seen.append(series.points(segment=segment))
        t, mean = series.arrays(segment=segment)
        seen.append((t.tolist(), mean.tolist()))
    return repr(seen)


def appended(capacity: int, levels: int, batches: list[list[tuple[float, float]]]) -> Series:
    series = Series(capacity=capacity, levels=levels)
    for batch in batches:
        for t, value in batch:
            series.append(t, value)
    return series


def extended(capacity: int, levels: int, batches: list[list[tuple[float, float]]]) -> Series:
    series = Series(capacity=capacity, levels=levels)
    for batch in batches:
        series.extend([t for t, _ in batch], [v for _, v in batch])
    return series


def random_batches(rng: random.Random, capacity: int, bucket_capacity: int) -> list[list[tuple[float, float]]]:
    """Batch sizes around the ring's and the levels' boundaries, times that repeat and go back."""
    sizes = [0, 1, 3, 4, 5, EXTEND_LOOP_BELOW - 1, EXTEND_LOOP_BELOW, capacity - 1, capacity, capacity + 1]
    sizes += [capacity + 4 * bucket_capacity + k for k in (-1, 0, 1, 4)] + [capacity * 40, rng.randint(0, 5000)]
    batches = []
    t = rng.uniform(-10, 10)
    for _ in range(rng.randint(1, 6)):
        batch = []
        for _ in range(rng.choice(sizes)):
            r = rng.random()
            t = t - rng.randint(1, 60) if r < 0.004 else t + rng.choice([0.0, 0.0, 1.0, 1.0, 1.0, 0.25])
            value = rng.choice(SPECIAL) if rng.random() < 0.05 else rng.gauss(0.0, 1e3)
            batch.append((t, value))
        batches.append(batch)
    return batches


@pytest.mark.parametrize("seed", range(12))
def test_extend_is_the_appends_on_random_batches(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        capacity = rng.choice([8, 9, 12, 16, 33, 64, 100])
        levels = rng.choice([1, 2, 3, 8])
        bucket_capacity = Series(capacity, levels).bucket_capacity
        batches = random_batches(rng, capacity, bucket_capacity)
        assert state(extended(capacity, levels, batches)) == state(appended(capacity, levels, batches)), (
            capacity,
            levels,
            [len(b) for b in batches],
        )


values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(SPECIAL))
steps = st.one_of(st.sampled_from([0.0, 1.0, 1.0, 0.5]), st.floats(min_value=-50, max_value=50))


@given(
    st.lists(st.tuples(steps, values), max_size=1500),
    st.lists(st.integers(min_value=0, max_value=1500), max_size=5),
    st.sampled_from([8, 9, 12, 16, 40]),
    st.integers(min_value=1, max_value=4),
)
@settings(max_examples=150, deadline=None)
def test_extend_is_the_appends_wherever_the_batches_are_cut(
    points: list[tuple[float, float]], cuts: list[int], capacity: int, levels: int
) -> None:
    t = 0.0
    timed = []
    for dt, value in points:  # a negative dt goes back: a new segment
        t += dt
        timed.append((t, value))
    bounds = sorted({0, len(timed), *(c for c in cuts if c < len(timed))})
    batches = [timed[a:b] for a, b in itertools.pairwise(bounds)]
    assert state(extended(capacity, levels, batches)) == state(appended(capacity, levels, batches))


def test_a_day_in_one_batch_is_the_day_appended() -> None:
    ts = np.arange(86_400, dtype=np.float64)
    vs = np.sin(ts / 600.0) * 100.0 + np.where(ts % 997 == 0, np.nan, 0.0)
    one = Series()
    one.extend(ts, vs)
    assert state(one) == state(appended(2048, 8, [list(zip(ts.tolist(), vs.tolist(), strict=True))]))
    assert one.appended == 86_400 and one.last() == (86_399.0, vs[-1])


def test_many_restarts_in_one_batch_keep_the_newest_segments() -> None:
    batch = [(float(step), float(run)) for run in range(MAX_OLD_SEGMENTS + 6) for step in range(300)]
    series = extended(16, 2, [[(5000.0, -1.0)], batch])
    assert series.segment_count() == MAX_OLD_SEGMENTS
    assert state(series) == state(appended(16, 2, [[(5000.0, -1.0)], batch]))
    assert series.extremes() == (-1.0, MAX_OLD_SEGMENTS + 5.0)  # the dropped runs still count there


def test_non_finite_time_raises_before_anything_is_added() -> None:
    series = extended(8, 2, [[(float(i), 1.0) for i in range(50)]])
    before = state(series)
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="finite"):
            series.extend([51.0] * 40 + [bad], [2.0] * 41)
        with pytest.raises(ValueError, match="finite"):
            series.extend([51.0, bad], [2.0, 2.0])
    with pytest.raises(ValueError, match="times"):
        series.extend([1.0, 2.0], [1.0])
    assert state(series) == before


def test_sums_past_the_largest_float_have_a_finite_mean() -> None:
    """Two values near 1e308 overflowed math.fsum: append raised OverflowError, every time."""
    series = Series(capacity=8, levels=1)
    for i in range(20):
        series.append(float(i), 1.7e308)
    _, means, _, _ = series.points()
    assert means == [1.7e308] * len(means)


def test_a_few_float_points_in_lists_make_no_arrays_and_give_the_appends_state(monkeypatch) -> None:
    """A live frame hands each series a point or two as lists of floats (a host's sample, 18
    series): they are appended as they are, without the two arrays a batch is made into. The
    state is the appends' to the bit, and a non-finite time still raises before anything is added."""
    from core.views import series as series_module

    made = []
    real = np.asarray
    monkeypatch.setattr(series_module.np, "asarray", lambda *a, **k: made.append(1) or real(*a, **k))
    points = [
        (1.0, 0.5),
        (2.0, -0.0),
        (1.5, math.nan),
        (3.0, math.inf),
        (4.0, 5e-324),
        *((10.0 + i, i / 3) for i in range(12)),
    ]
    extended, expected = Series(capacity=8, levels=2), Series(capacity=8, levels=2)
    for t, v in points:
        extended.extend([t], [v])
        expected.append(t, v)
    extended.extend([25.0, 26.0, 27.0], [1.0, 2.0, 3.0])
    for t, v in ((25.0, 1.0), (26.0, 2.0), (27.0, 3.0)):
        expected.append(t, v)
    assert made == []
    assert state(extended) == state(expected)
    with pytest.raises(ValueError, match="finite"):
        extended.extend([30.0, math.nan], [1.0, 1.0])
    assert state(extended) == state(expected)  # nothing of that batch was added
    monkeypatch.undo()
    extended.extend([38, 39], [1, 2])  # not floats (ints): the arrays' way, the same state
    expected.append(38.0, 1.0)
    expected.append(39.0, 2.0)
    assert state(extended) == state(expected)
