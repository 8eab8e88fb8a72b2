"""The plots' NumPy curves give the same figures as the reference series read and EMA."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.telemetry.worker_stats import ema
from core.views.curves import IncrementalEma, ema_array, ema_segments, series_xy
from core.views.series import Series

values = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([math.inf, -math.inf]))
any_finite = st.floats(allow_nan=False, allow_infinity=False)


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        (math.isnan(x) and math.isnan(y)) or x == y or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6)
        for x, y in zip(a, b, strict=True)
    )


@given(st.lists(values, max_size=700), st.floats(0.0, 1.0))
@settings(max_examples=200, deadline=None)
def test_ema_array_is_tensorboards_ema(xs: list[float], weight: float) -> None:
    assert close(ema_array(np.array(xs, dtype=float), weight).tolist(), ema(xs, weight))


@given(st.lists(any_finite, max_size=300), st.sampled_from([0.05, 0.3, 0.6, 0.9, 0.99]))
@settings(max_examples=200, deadline=None)
def test_ema_array_takes_any_magnitude(xs: list[float], weight: float) -> None:
    """Huge and tiny values alike: the blocks shrink (or a plain loop runs) before anything overflows."""
    got, want = ema_array(np.array(xs, dtype=float), weight).tolist(), ema(xs, weight)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-300 + 1e-9 * max(map(abs, xs)))


def test_ema_array_over_a_long_run_stays_on_the_reference() -> None:
    xs = (2.0 * np.exp(-np.arange(20_000) / 4000) + 0.05 * np.sin(np.arange(20_000) / 7)).tolist()
    for weight in (0.0, 0.3, 0.6, 0.9, 0.99):
        assert close(ema_array(np.array(xs), weight).tolist(), ema(xs, weight))


@given(st.lists(st.one_of(st.floats(-100, 100), st.just(math.nan)), max_size=300), st.floats(0.0, 0.99))
@settings(max_examples=200, deadline=None)
def test_ema_segments_restart_after_each_nan(xs: list[float], weight: float) -> None:
    expected: list[float] = []
    start = 0
    for i, v in enumerate([*xs, math.nan]):
        if math.isnan(v):
            expected.extend(ema(xs[start:i], weight))
            if i < len(xs):
                expected.append(v)
            start = i + 1
    assert close(ema_segments(np.array(xs, dtype=float), weight).tolist(), expected)


def test_series_xy_joins_segments_with_a_nan_break() -> None:
    series = Series(capacity=16, levels=2)
    for step in range(100):
        series.append(float(step), float(step))
    for step in range(10):  # a restart: the step goes back
        series.append(float(step), -1.0)
    x, y = series_xy(series)
    old_t, old_mean, _, _ = series.points(segment=0)
    new_t, new_mean, _, _ = series.points()
    assert x.tolist() == [*old_t, new_t[0], *new_t]
    assert close(y.tolist(), [*old_mean, math.nan, *new_mean])


edits = st.lists(
    st.tuples(
        st.sampled_from(["append", "rewrite_tail", "truncate", "weight"]),
        st.lists(st.one_of(st.floats(-100, 100), st.just(math.nan), st.sampled_from([math.inf, 5.0])), max_size=40),
        st.floats(0.0, 1.0),
    ),
    max_size=12,
)


@given(st.lists(st.one_of(st.floats(-100, 100), st.just(math.nan), st.just(2.0)), max_size=200), edits)
@settings(max_examples=300, deadline=None)
def test_incremental_ema_equals_the_full_ema_after_any_edits(first: list[float], changes: list) -> None:
    """Growing, rewriting the newest values (a series re-bucketed), shrinking, a new weight: each
    call gives what smoothing the whole curve afresh gives."""
    smoother = IncrementalEma()
    values, weight = list(first), 0.6
    assert close(smoother.smooth(np.array(values), weight).tolist(), ema_segments(np.array(values), weight).tolist())
    for kind, new, where in changes:
        cut = int(where * len(values))
        if kind == "append":
            values += new
        elif kind == "rewrite_tail":
            values = values[:cut] + new
        elif kind == "truncate":
            values = values[:cut]
        else:
            weight = round(where, 2)
        got = smoother.smooth(np.array(values, dtype=float), weight).tolist()
        assert close(got, ema_segments(np.array(values, dtype=float), weight).tolist())


def test_incremental_ema_smooths_only_the_new_tail_of_a_live_series() -> None:
    series = Series(capacity=256, levels=3)
    for step in range(5000):
        series.append(float(step), 1.0 + math.sin(step / 30))
    smoother = IncrementalEma()
    smoother.smooth(series_xy(series)[1], 0.6)
    assert smoother.recomputed == len(series_xy(series)[1])
    tails = []
    for step in range(5000, 5064):
        series.append(float(step), 1.0 + math.sin(step / 30))
        y = series_xy(series)[1]
        assert close(smoother.smooth(y, 0.6).tolist(), ema_segments(y, 0.6).tolist())
        tails.append(smoother.recomputed)
    assert smoother.smooth(y, 0.6) is smoother.smooth(y, 0.6)  # nothing new: the same curve, no work
    assert smoother.recomputed == 0
    assert sorted(tails)[len(tails) // 2] == 1  # most frames smooth the one new point
    assert max(tails) > 1  # a frame that re-buckets redoes what moved
