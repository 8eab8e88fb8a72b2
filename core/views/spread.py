"""The cluster's spread instead of every line: past a handful of workers, one curve per worker is a
solid band nobody can read. :class:`BinnedWorkers` is what the Training tab draws then:

- :meth:`BinnedWorkers.spread`: per x bin, the median across workers with a min-max band and a
  10th-90th percentile band;
- :meth:`BinnedWorkers.heatmap`: each worker's value (step time) per x bin over that bin's median
  across workers, so a straggler appearing is a bright streak;
- :func:`slowest`: the workers to name and draw on top.

It is fed the same points as the per-worker series, O(1) each: every worker has a row of
``bins`` sums and counts over equal x bins; when x passes the last bin, every row merges its
bins in pairs and the bin width doubles. So memory is ``workers x bins`` whatever the run's
length, and a frame costs a few vectorised passes over that matrix (one sort among them), not a
pass over each worker's history: 12-15 ms for 64 workers x 1024 bins on this 2-core machine
while it ran 5 TensorFlow test suites (load average 6). A restarted worker that repeats steps averages into the same
bins (the per-worker view keeps its segments).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.views.overview import natural_key

__all__ = ["BinnedWorkers", "HeatMap", "Spread", "slowest"]

_FEW = 8
"""Batches up to this size go point by point (:meth:`BinnedWorkers.add`): 64 workers' one new
point each through the vectorised path was 2 ms of a 9 ms frame."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_Stats = tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, IntArray]  # median, min, max, q10, q90, n


@dataclass(frozen=True)
class Spread:
    """Per bin: centre ``x``, ``median``, ``low``/``high`` (min and max), ``q_low``/``q_high``
    (10th and 90th percentiles, nearest rank), ``count`` (workers with a value there). NaN where
    no worker has one."""

    x: FloatArray
    median: FloatArray
    low: FloatArray
    high: FloatArray
    q_low: FloatArray
    q_high: FloatArray
    count: IntArray


@dataclass(frozen=True)
class HeatMap:
    """``values[row, col]``: worker ``rows[row]``'s mean in bin ``col`` over that bin's median across
    workers (1.0 = typical, 2.0 = twice the median); ``edges`` has one more entry than columns."""

    rows: tuple[str, ...]
    edges: FloatArray
    values: FloatArray


class BinnedWorkers:
    """Per-worker means over equal x bins that coarsen as x grows; see the module docstring."""

    def __init__(self, bins: int = 1024, origin: float | None = None, width: float = 1.0) -> None:
        if bins < 2 or bins % 2:
            raise ValueError("bins must be an even number of at least 2")
        self.bins = bins
        self.origin = origin
        self.width = float(width)
        self._rows: dict[str, int] = {}
        self._sums = np.zeros((4, bins))
        self._counts = np.zeros((4, bins), dtype=np.int64)
        self._used = 0  # columns that ever held a point
        self.version = 0
        # One frame asks for the spread, the heat map and a row per highlighted worker at the same
        # width: the means matrix is built once per (version, width), not once per question.
        self._means_cache: tuple[tuple[int, int | None], tuple[list[str], FloatArray, FloatArray] | None] | None = None
        self._stats_cache: tuple[tuple[int, int | None], _Stats] | None = None  # the spread's and the heat map's

    def __len__(self) -> int:
        return len(self._rows)

    def memory_bytes(self) -> int:
        return int(self._sums.nbytes + self._counts.nbytes)

    def _row(self, worker: str) -> int:
        row = self._rows.get(worker)
        if row is None:
            row = self._rows[worker] = len(self._rows)
            if row >= self._sums.shape[0]:
                grow = self._sums.shape[0]
                self._sums = np.vstack([self._sums, np.zeros((grow, self.bins))])
                self._counts = np.vstack([self._counts, np.zeros((grow, self.bins), dtype=np.int64)])
        return row

    def _coarsen_until(self, index: int) -> int:
        while index >= self.bins:
            half = self.bins // 2
            self._sums[:, :half] = self._sums.reshape(self._sums.shape[0], half, 2).sum(axis=2)
            self._counts[:, :half] = self._counts.reshape(self._counts.shape[0], half, 2).sum(axis=2)
            self._sums[:, half:] = 0.0
            self._counts[:, half:] = 0
            self._used = (self._used + 1) // 2
            self.width *= 2
            index //= 2
        return index

    def add(self, worker: str, x: float, value: float) -> None:
        """One point of ``worker``; non-finite values are left out."""
        if not (math.isfinite(x) and math.isfinite(value)):
            return
        if self.origin is None:
            self.origin = x
        row = self._row(worker)
        index = self._coarsen_until(max(0, int((x - self.origin) // self.width)))
        self._sums[row, index] += value
        self._counts[row, index] += 1
        self._used = max(self._used, index + 1)
        self.version += 1

    def add_many(self, worker: str, xs: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """Many points of ``worker`` at once (loading a past run's metrics file): the same result
        as calling :meth:`add` for each, in one vectorised pass."""
        x = np.asarray(xs, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        if x.size <= _FEW:  # a live frame's point or two: NumPy's cost per call is more than the work
            for one_x, one_v in zip(x.tolist(), v.tolist(), strict=True):
                self.add(worker, one_x, one_v)
            return
        ok = np.isfinite(x) & np.isfinite(v)
        x, v = x[ok], v[ok]
        if x.size == 0:
            return
        if self.origin is None:
            self.origin = float(x[0])
        row = self._row(worker)
        index = np.maximum(0, np.floor((x - self.origin) / self.width)).astype(np.int64)
        top = int(index.max())
        if top >= self.bins:
            # Coarsen as add() would have on the way, then re-bin these points at the new width.
            self._coarsen_until(top)
            index = np.maximum(0, np.floor((x - self.origin) / self.width)).astype(np.int64)
        self._sums[row] += np.bincount(index, weights=v, minlength=self.bins)[: self.bins]
        self._counts[row] += np.bincount(index, minlength=self.bins)[: self.bins]
        self._used = max(self._used, int(index.max()) + 1)
        self.version += 1

    def _means(self, max_columns: int | None) -> tuple[list[str], FloatArray, FloatArray] | None:
        """Worker names (natural order), bin edges and the workers x bins means (NaN: no point);
        read-only, shared by every caller until the next point arrives."""
        key = (self.version, max_columns)
        if self._means_cache is not None and self._means_cache[0] == key:
            return self._means_cache[1]
        made = self._compute_means(max_columns)
        self._means_cache = (key, made)
        return made

    def _compute_means(self, max_columns: int | None) -> tuple[list[str], FloatArray, FloatArray] | None:
        if not self._rows or self._used == 0 or self.origin is None:
            return None
        names = sorted(self._rows, key=natural_key)
        order = [self._rows[n] for n in names]
        sums = self._sums[order, : self._used]
        counts = self._counts[order, : self._used]
        group = 1
        if max_columns is not None and max_columns > 0 and self._used > max_columns:
            group = math.ceil(self._used / max_columns)
            pad = (-self._used) % group
            if pad:
                sums = np.pad(sums, ((0, 0), (0, pad)))
                counts = np.pad(counts, ((0, 0), (0, pad)))
            sums = sums.reshape(len(order), -1, group).sum(axis=2)
            counts = counts.reshape(len(order), -1, group).sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        edges = self.origin + self.width * group * np.arange(means.shape[1] + 1, dtype=np.float64)
        return names, edges, means

    def _stats(self, max_columns: int | None, means: FloatArray) -> _Stats:
        """:meth:`_column_stats` of ``_means(max_columns)``, once per (version, width): the spread
        and the heat map of the same workers sort the same matrix."""
        key = (self.version, max_columns)
        if self._stats_cache is None or self._stats_cache[0] != key:
            self._stats_cache = (key, self._column_stats(means))
        return self._stats_cache[1]

    @staticmethod
    def _column_stats(means: FloatArray) -> _Stats:
        ordered = np.sort(means, axis=0)  # NaN sorts last
        count = np.sum(np.isfinite(means), axis=0).astype(np.int64)
        has = count > 0
        last = np.maximum(count - 1, 0)

        def at(rank: IntArray) -> FloatArray:
            picked = np.take_along_axis(ordered, rank[np.newaxis, :], axis=0)[0]
            return np.where(has, picked, np.nan)

        upper_mid = np.where(count % 2 == 0, count // 2, last // 2).astype(np.int64)
        median = (at(last // 2) + at(upper_mid)) / 2
        q_low = at(np.floor(0.1 * last).astype(np.int64))
        q_high = at(np.ceil(0.9 * last).astype(np.int64))
        return median, at(np.zeros_like(count)), at(last), q_low, q_high, count

    def row(self, worker: str, max_columns: int | None = None) -> tuple[FloatArray, FloatArray]:
        """One worker's means at the same bins as :meth:`spread` (bin centres, values), without
        the bins where it has none: how a highlighted worker is drawn over the band."""
        made = self._means(max_columns)
        if made is None or worker not in self._rows:
            return np.empty(0), np.empty(0)
        names, edges, means = made
        values = means[names.index(worker)]
        centres = (edges[:-1] + edges[1:]) / 2
        finite = np.isfinite(values)
        return centres[finite], values[finite]

    def spread(self, max_columns: int | None = None) -> Spread | None:
        """The workers' median and bands, at most ``max_columns`` bins (the plot's pixel width)."""
        made = self._means(max_columns)
        if made is None:
            return None
        _, edges, means = made
        median, low, high, q_low, q_high, count = self._stats(max_columns, means)
        return Spread(
            x=(edges[:-1] + edges[1:]) / 2, median=median, low=low, high=high, q_low=q_low, q_high=q_high, count=count
        )

    def heatmap(self, max_columns: int | None = None) -> HeatMap | None:
        """Each worker relative to the bin's median across workers."""
        made = self._means(max_columns)
        if made is None:
            return None
        names, edges, means = made
        median = self._stats(max_columns, means)[0]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            values = np.where(median > 0, means / median, np.nan)
        return HeatMap(rows=tuple(names), edges=edges, values=values)


def slowest(step_times_s: Mapping[str, float | None], k: int = 3, factor: float = 1.2) -> list[str]:
    """Up to ``k`` workers, slowest first, whose step time is at least ``factor`` times the median
    of all workers' (so a uniform cluster names nobody)."""
    usable = {n: float(v) for n, v in step_times_s.items() if v is not None and math.isfinite(v) and v > 0}
    if len(usable) < 2:
        return []
    median = statistics.median(usable.values())  # a few dozen floats: no numpy round trip
    ranked = sorted(usable, key=lambda n: (-usable[n], natural_key(n)))
    return [n for n in ranked if usable[n] >= factor * median][:k]
