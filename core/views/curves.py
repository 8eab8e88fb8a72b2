"""What a plot's curve is made of, as NumPy arrays: a series' segments and their EMA smoothing.

A frame of the Training tab reads every shown worker's series and smooths it; done point by point
in Python that was most of the frame (4 workers x ~8,000 points: 20 ms of a 35 ms frame). These
give the same figures as :meth:`Series.points` and :func:`core.telemetry.worker_stats.ema` with array
operations only (the EMA's recurrence is solved in blocks: a scaled cumulative sum within a block,
a carry between blocks).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from core.telemetry.worker_stats import ema
from core.views.series import Series

Floats = npt.NDArray[np.float64]

_BLOCK = 4096


def series_xy(series: Series) -> tuple[Floats, Floats]:
    """Every segment of ``series`` (a restarted worker starts a new one), oldest first, with a NaN
    between segments so that a ``connect="finite"`` curve does not join them."""
    xs: list[Floats] = []
    ys: list[Floats] = []
    for segment in [*range(series.segment_count()), None]:
        x, y = series.arrays(segment=segment)
        if xs and len(x):
            xs.append(x[:1])
            ys.append(np.array([math.nan]))
        xs.append(x)
        ys.append(y)
    if not xs:
        return np.empty(0), np.empty(0)
    return np.concatenate(xs), np.concatenate(ys)


def ema_segments(values: Floats, weight: float) -> Floats:
    """TensorBoard's debiased EMA (:func:`ema`), restarted after each NaN so that segments do not
    bleed into each other; NaN stays NaN."""
    out = np.array(values, dtype=np.float64)
    if weight <= 0.0 or not len(out):
        return out
    breaks = np.flatnonzero(np.isnan(out))
    start = 0
    for end in [*breaks.tolist(), len(out)]:
        if end > start:
            out[start:end] = ema_array(out[start:end], weight)
        start = end + 1
    return out


def ema_array(values: Floats, weight: float) -> Floats:
    """:func:`ema` on an array: the same figures (non-finite values passed through, outside the
    average; a constant series as is), without a Python loop per value."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"smoothing weight must be within [0, 1], got {weight}")
    values = np.asarray(values, dtype=np.float64)
    if weight == 1.0:  # no smoothing window at all: the rare case, left to the reference
        return np.array(ema(values.tolist(), weight), dtype=np.float64)
    if not len(values) or np.all(values == values[0]):
        return values.copy()
    finite = np.isfinite(values)
    if finite.all():  # the common case: no gather and scatter
        return _smooth(values, weight) / (1.0 - _powers(weight, np.arange(1, len(values) + 1, dtype=np.float64)))
    x = values[finite]
    out = values.copy()
    out[finite] = _smooth(x, weight) / (1.0 - _powers(weight, np.arange(1, len(x) + 1, dtype=np.float64)))
    return out


def _powers(weight: float, exponents: Floats) -> Floats:
    """``weight ** exponents`` for increasing ``exponents``, 0 where it would fall below float64's
    smallest normal number: ``pow`` is ~10x slower there (a 4,096-point tail took 0.25 ms at weight
    0.6), and ``1 - w**n`` or ``a * w**n`` beside a normal number gives the same float either way."""
    out = np.zeros(len(exponents))
    if 0.0 < weight < 1.0:
        normal = int(np.searchsorted(exponents, -708.0 / math.log(weight), side="right"))
        out[:normal] = weight ** exponents[:normal]
    else:
        out[:] = weight**exponents
    return out


def _smooth(x: Floats, weight: float) -> Floats:
    """``last = last * w + (1 - w) * v`` from 0, for every ``v`` of ``x`` (all finite).

    Within a block, ``last_i = (1 - w) * w**i * cumsum(w**-j * v_j)``: the block is as long as
    ``w**-j * v_j`` stays far from overflow (hundreds to thousands of values, so a handful of
    blocks); between blocks, the carry decays by ``w**(i + 1)``. No matrix product: BLAS starts
    threads for one, and on a busy 2-core machine a frame waited milliseconds for them.
    """
    n = len(x)
    largest = float(np.max(np.abs(x))) if n else 0.0
    headroom = 290.0 - math.log10(max(1.0, largest))  # decades left below float64's 1e308
    decades = -math.log10(weight) if weight > 0.0 else math.inf
    block = min(_BLOCK, int(headroom / decades)) if weight < 1.0 else _BLOCK
    if block < 8:  # a very light EMA or huge values: a plain loop, rare
        out = np.empty(n)
        last = 0.0
        for i, v in enumerate(x.tolist()):
            last = last * weight + (1.0 - weight) * v
            out[i] = last
        return out
    blocks = -(-n // block)
    padded = np.zeros(blocks * block)
    padded[:n] = x
    powers = weight ** np.arange(block + 1, dtype=np.float64)
    rows = padded.reshape(blocks, block) / powers[:block]
    y = np.cumsum(rows, axis=1) * (powers[:block] * (1.0 - weight))
    decay = powers[1:]
    carry = 0.0
    for b in range(blocks):
        if carry:
            y[b] += decay * carry
        carry = float(y[b, -1])
    return y.reshape(-1)[:n]


class IncrementalEma:
    """:func:`ema_segments` of one curve from frame to frame, smoothing only what changed.

    A live curve changes at its end: a new point, and as a :class:`Series` fills, a few of its
    newest buckets merged into coarser ones. The EMA at a point depends only on the values up to
    it, so the smoothing of the longest unchanged prefix is kept (with the running average and the
    count of finite values at each point, to resume from) and only the rest is smoothed again.
    "Unchanged" is compared value by value, not assumed from how the series grew, so a re-bucketed
    series or a new segment redoes exactly what moved. Same figures as :func:`ema_segments`, to the
    last few bits of rounding.
    """

    def __init__(self) -> None:
        self._weight: float | None = None
        self._values: Floats = np.empty(0)
        self._running: Floats = np.empty(0)  # the un-debiased average after each point
        self._counts: Floats = np.empty(0)  # finite values so far in the point's segment
        self._smoothed: Floats = np.empty(0)  # what a non-constant segment shows
        self._out: Floats = np.empty(0)
        self.recomputed = 0
        """Points smoothed at the last call (the rest was kept)."""

    def smooth(self, values: Floats, weight: float) -> Floats:
        """``ema_segments(values, weight)``; the array returned is new (never changed later)."""
        values = np.asarray(values, dtype=np.float64)
        n = len(values)
        if not 0.0 < weight < 1.0:  # nothing to keep between frames: the plain function
            self._weight = None
            self.recomputed = n
            return ema_segments(values, weight)
        old = self._values
        start = 0
        if weight == self._weight:
            m = min(n, len(old))
            same = (old[:m] == values[:m]) | (np.isnan(old[:m]) & np.isnan(values[:m]))
            moved = np.flatnonzero(~same)
            start = int(moved[0]) if len(moved) else m
            if start == n == len(old):
                self.recomputed = 0
                return self._out
        self._weight = weight
        self.recomputed = n - start
        running = np.empty(n)
        counts = np.empty(n)
        smoothed = np.empty(n)
        out = np.empty(n)
        running[:start] = self._running[:start]
        counts[:start] = self._counts[:start]
        smoothed[:start] = self._smoothed[:start]
        breaks = np.flatnonzero(np.isnan(values[:start]))
        segment = int(breaks[-1]) + 1 if len(breaks) else 0  # the first segment to look at again
        out[:segment] = self._out[:segment]
        ends = np.flatnonzero(np.isnan(values[start:])) + start
        for end in [*ends.tolist(), n]:
            if end > start:
                carry = (running[start - 1], counts[start - 1]) if start > segment else (0.0, 0.0)
                _resume(
                    values[start:end],
                    weight,
                    carry,
                    running=running[start:end],
                    counts=counts[start:end],
                    smoothed=smoothed[start:end],
                )
            if end < n:  # the break itself
                running[end] = counts[end] = 0.0
                smoothed[end] = math.nan
            piece = values[segment:end]
            constant = len(piece) and bool(np.all(piece == piece[0]))
            out[segment:end] = piece if constant else smoothed[segment:end]
            if end < n:
                out[end] = math.nan
            segment = start = end + 1
        self._values, self._out = values.copy(), out
        self._running, self._counts, self._smoothed = running, counts, smoothed
        return out


def _resume(
    x: Floats, weight: float, carry: tuple[float, float], *, running: Floats, counts: Floats, smoothed: Floats
) -> None:
    """Smooth ``x`` (no NaN) on from ``carry`` (running average, finite count), into the last three."""
    finite = np.isfinite(x)
    xf = x if finite.all() else x[finite]
    average, count = carry
    k = np.arange(1, len(xf) + 1, dtype=np.float64)
    totals = _smooth(xf, weight) + average * _powers(weight, k) if len(xf) else xf
    seen = count + k
    debiased = totals / (1.0 - _powers(weight, seen))
    if xf is x:
        running[:] = totals
        counts[:] = seen
        smoothed[:] = debiased
        return
    index = np.cumsum(finite) - 1  # the last finite value at or before each point
    before = index < 0
    running[:] = np.where(before, average, totals[np.maximum(index, 0)] if len(xf) else average)
    counts[:] = count + index + 1
    smoothed[:] = x
    smoothed[finite] = debiased
