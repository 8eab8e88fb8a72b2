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
while it ran 5 TensorFlow test suites (load average 6). From one frame to the next only the columns
the new points touched are worked out again (a live frame: the newest), so 1,024 workers cost
about what 64 did; past a worker per pixel row the heat map shares rows between neighbours, each
showing the slowest of them. A restarted worker that repeats steps averages into the same
bins (the per-worker view keeps its segments).
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from core.views.overview import natural_key

__all__ = ["BinnedWorkers", "HeatMap", "Spread", "slowest"]

_FEW = 64
"""Batches of a worker up to this size wait for the one pass over every worker's points at the next
read (:meth:`BinnedWorkers._keep`); bigger ones (a past run's file) get a pass of their own. A window
following a run gets a second of each worker's lines at once (ten at 10 lines/s): with 8 here, each
of 256 workers' batches took its own two 1,024-bin ``bincount`` passes, 40 % of the Training
tab's cost per point."""
_PENDING_MAX = 100_000  # points waiting for a read (a few MB) before they go into the bins anyway

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


@dataclass
class _View:
    """What one width's views were worked out from, and the results (see ``_view_at``)."""

    max_columns: int | None
    group: int
    rows: int
    width: float
    origin: float
    version: int
    names: list[str]
    order: IntArray  # the rows of the sums in natural order of the workers' names
    edges: FloatArray
    means: FloatArray  # the buffers' first columns
    stats: _Stats
    heat: FloatArray
    means_buffer: FloatArray  # workers x bins, written in place as columns change
    heat_buffer: FloatArray
    grouped: dict[int, tuple[list[str], FloatArray]]  # rows shared k at a time -> labels, workers/k x bins


@dataclass(frozen=True)
class HeatMap:
    """``values[row, col]``: worker ``rows[row]``'s mean in bin ``col`` over that bin's median across
    workers (1.0 = typical, 2.0 = twice the median); ``edges`` has one more entry than columns."""

    rows: tuple[str, ...]
    edges: FloatArray
    values: FloatArray
    per_row: int = 1  # workers a row shows (the slowest of them), past one worker per pixel row


class BinnedWorkers:
    """Per-worker means over equal x bins that coarsen as x grows; see the module docstring."""

    def __init__(self, bins: int = 1024, origin: float | None = None, width: float = 1.0) -> None:
        if bins < 2 or bins % 2:
            raise ValueError("bins must be an even number of at least 2")
        self.bins = bins
        self._origin = origin
        self._width = float(width)
        self._rows: dict[str, int] = {}
        self._sums = np.zeros((4, bins))
        self._counts = np.zeros((4, bins), dtype=np.int64)
        self._points = np.zeros(4, dtype=np.int64)  # each row's points, all bins together
        self._data_group = 1  # bins a column takes at least: see _columns_for_data
        self._used = 0  # columns that ever held a point
        self.version = 0
        # One frame asks for the spread, the heat map and a row per highlighted worker at the same
        # width: the means are worked out once per (version, width), and from one frame to the
        # next only in the columns the new points touched (_dirty_from on).
        self._view: _View | None = None
        self._dirty_from = 0
        # A live frame brings a point or two from each of hundreds of workers: they wait here, in
        # order, and go into the bins in one vectorised pass when the bins are next read (a
        # NumPy update per point of 256 workers was the Training tab's largest cost per frame).
        self._pending_workers: list[str] = []
        self._pending_x: list[float] = []
        self._pending_v: list[float] = []

    @property
    def origin(self) -> float | None:
        """The x of bin 0's left edge: the first point's, unless given."""
        self._flush()
        return self._origin

    @property
    def width(self) -> float:
        """Each bin's width in x; doubles whenever the points outgrow the bins."""
        self._flush()
        return self._width

    def __len__(self) -> int:
        self._flush()
        return len(self._rows)

    def memory_bytes(self) -> int:
        self._flush()
        return int(self._sums.nbytes + self._counts.nbytes)

    def _row(self, worker: str) -> int:
        row = self._rows.get(worker)
        if row is None:
            row = self._rows[worker] = len(self._rows)
            if row >= self._sums.shape[0]:
                grow = self._sums.shape[0]
                self._sums = np.vstack([self._sums, np.zeros((grow, self.bins))])
                self._counts = np.vstack([self._counts, np.zeros((grow, self.bins), dtype=np.int64)])
                self._points = np.concatenate([self._points, np.zeros(grow, dtype=np.int64)])
        return row

    def _coarsen_until(self, index: int) -> int:
        while index >= self.bins:
            half = self.bins // 2
            self._sums[:, :half] = self._sums.reshape(self._sums.shape[0], half, 2).sum(axis=2)
            self._counts[:, :half] = self._counts.reshape(self._counts.shape[0], half, 2).sum(axis=2)
            self._sums[:, half:] = 0.0
            self._counts[:, half:] = 0
            self._used = (self._used + 1) // 2
            self._width *= 2
            self._dirty_from = 0
            index //= 2
        return index

    def add(self, worker: str, x: float, value: float) -> None:
        """One point of ``worker``; non-finite values are left out."""
        self._flush()
        if not (math.isfinite(x) and math.isfinite(value)):
            return
        if self._origin is None:
            self._origin = x
        row = self._row(worker)
        index = self._coarsen_until(max(0, int((x - self._origin) // self._width)))
        self._sums[row, index] += value
        self._counts[row, index] += 1
        self._points[row] += 1
        self._dirty_from = min(self._dirty_from, index)
        self._used = max(self._used, index + 1)
        self.version += 1

    def add_many(self, worker: str, xs: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """Many points of ``worker`` at once (loading a past run's metrics file): the same result
        as calling :meth:`add` for each, in one vectorised pass."""
        if isinstance(xs, list) and isinstance(values, list) and len(xs) <= _FEW:
            # A live frame's points (the Training tab's lists): no array made for them.
            self._keep(worker, zip(cast(list[float], xs), cast(list[float], values), strict=True))
            return
        x = np.asarray(xs, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        if x.size <= _FEW:
            self._keep(worker, zip(x.tolist(), v.tolist(), strict=True))
            return
        self._flush()
        ok = np.isfinite(x) & np.isfinite(v)
        x, v = x[ok], v[ok]
        if x.size == 0:
            return
        if self._origin is None:
            self._origin = float(x[0])
        row = self._row(worker)
        index = np.maximum(0, np.floor((x - self._origin) / self._width)).astype(np.int64)
        top = int(index.max())
        if top >= self.bins:
            # Coarsen as add() would have on the way, then re-bin these points at the new width.
            self._coarsen_until(top)
            index = np.maximum(0, np.floor((x - self._origin) / self._width)).astype(np.int64)
        self._sums[row] += np.bincount(index, weights=v, minlength=self.bins)[: self.bins]
        self._counts[row] += np.bincount(index, minlength=self.bins)[: self.bins]
        self._points[row] += x.size
        self._dirty_from = min(self._dirty_from, int(index.min()))
        self._used = max(self._used, int(index.max()) + 1)
        self.version += 1

    def _keep(self, worker: str, pairs: Iterable[tuple[float, float]]) -> None:
        """A few points of ``worker`` wait for one pass over every worker's at the next read."""
        kept = 0
        isfinite = math.isfinite
        for one_x, one_v in pairs:
            if isfinite(one_x) and isfinite(one_v):  # as add() leaves them out
                self._pending_workers.append(worker)
                self._pending_x.append(float(one_x))
                self._pending_v.append(float(one_v))
                kept += 1
        if not kept:
            return
        self.version += 1
        if len(self._pending_x) >= _PENDING_MAX:  # nobody reads (another tab shown): bounded
            self._flush()

    def _flush(self) -> None:
        """The waiting points into the bins, as :meth:`add` on each in order would put them."""
        if not self._pending_x:
            return
        workers, xs, values = self._pending_workers, self._pending_x, self._pending_v
        self._pending_workers, self._pending_x, self._pending_v = [], [], []
        x = np.asarray(xs, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        ok = np.isfinite(x) & np.isfinite(v)
        if not ok.all():
            kept = np.flatnonzero(ok)
            x, v = x[kept], v[kept]
            workers = [workers[i] for i in kept.tolist()]
        if x.size == 0:
            return
        if self._origin is None:
            self._origin = float(x[0])
        row_of = self._row  # rows in order of first point, as add() gives them
        rows = np.fromiter((row_of(w) for w in workers), dtype=np.int64, count=len(workers))
        index = np.maximum(0, np.floor((x - self._origin) / self._width)).astype(np.int64)
        top = int(index.max())
        if top >= self.bins:
            self._coarsen_until(top)
            index = np.maximum(0, np.floor((x - self._origin) / self._width)).astype(np.int64)
        np.add.at(self._sums, (rows, index), v)
        np.add.at(self._counts, (rows, index), 1)
        np.add.at(self._points, rows, 1)
        self._dirty_from = min(self._dirty_from, int(index.min()))
        self._used = max(self._used, int(index.max()) + 1)

    def _means(self, max_columns: int | None) -> tuple[list[str], FloatArray, FloatArray] | None:
        """Worker names (natural order), bin edges and the workers x bins means (NaN: no point);
        read-only, shared by every caller until the next point arrives."""
        view = self._view_at(max_columns)
        return None if view is None else (view.names, view.edges, view.means)

    def _view_at(self, max_columns: int | None) -> _View | None:
        """The means, their column statistics and the heat map at ``max_columns`` bins, brought up
        to date. Only the columns from the first one a point touched since the last call are
        worked out again: a live frame adds a point per worker to the newest bin, and redoing
        every column (a sort of 1,024 workers x 1,024 bins, twice) was 170 ms of a frame."""
        self._flush()
        if not self._rows or self._used == 0 or self._origin is None:
            return None
        group = self._columns_for_data()
        if max_columns is not None and max_columns > 0 and self._used > max_columns:
            group = max(group, math.ceil(self._used / max_columns))
        columns = math.ceil(self._used / group)
        view = self._view
        same = (
            view is not None
            and view.max_columns == max_columns
            and view.group == group
            and view.rows == len(self._rows)
            and view.width == self._width
            and view.origin == self._origin
        )
        if same and view is not None and view.version == self.version:
            return view
        if same and view is not None:
            first = min(self._dirty_from // group, view.means.shape[1], columns)
            names, order = view.names, view.order
        else:
            first = 0
            names = sorted(self._rows, key=natural_key)
            order = np.fromiter((self._rows[n] for n in names), dtype=np.int64, count=len(names))
        start = first * group
        sums = self._sums[order, start : self._used]
        counts = self._counts[order, start : self._used]
        if group > 1:
            pad = (-sums.shape[1]) % group
            if pad:
                sums = np.pad(sums, ((0, 0), (0, pad)))
                counts = np.pad(counts, ((0, 0), (0, pad)))
            sums = sums.reshape(len(order), -1, group).sum(axis=2)
            counts = counts.reshape(len(order), -1, group).sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            fresh = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        stats = self._column_stats(fresh)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            heat = np.where(stats[0] > 0, fresh / stats[0], np.nan)
        if first:
            assert view is not None
            means_buffer, heat_buffer = view.means_buffer, view.heat_buffer
            joined = tuple(np.concatenate([old[:first], new]) for old, new in zip(view.stats, stats, strict=True))
            stats = (joined[0], joined[1], joined[2], joined[3], joined[4], joined[5])
        else:
            # Written in place from one frame to the next: copying 1,024 x 1,024 means and heat
            # cells to add one column was 20 ms a frame.
            means_buffer = np.full((len(order), self.bins), np.nan)
            heat_buffer = np.full((len(order), self.bins), np.nan)
        means_buffer[:, first:columns] = fresh
        heat_buffer[:, first:columns] = heat
        grouped: dict[int, tuple[list[str], FloatArray]] = {}
        if first and view is not None:
            for k, (labels, buffer) in view.grouped.items():  # a heat map of shared rows: its new columns
                buffer[:, first:columns] = _slowest_of(heat_buffer[:, first:columns], k)
                grouped[k] = (labels, buffer)
        edges = self._origin + self._width * group * np.arange(columns + 1, dtype=np.float64)
        self._view = _View(
            max_columns=max_columns,
            group=group,
            rows=len(self._rows),
            width=self._width,
            origin=self._origin,
            version=self.version,
            names=names,
            order=order,
            edges=edges,
            means=means_buffer[:, :columns],
            stats=stats,
            heat=heat_buffer[:, :columns],
            means_buffer=means_buffer,
            heat_buffer=heat_buffer,
            grouped=grouped,
        )
        self._dirty_from = self.bins
        return self._view

    def _columns_for_data(self) -> int:
        """Bins a column takes so that the median worker has about a point in each: no finer
        than the data. A step time measured between two reads of a worker's output is one point
        per read (every 10 steps at 10 steps/s and a 1 s read), and a slow worker's points lie
        closer in steps than a fast one's; at a bin a step, most columns held the slow workers'
        points only, so "the median of 1,024 workers" drew the slow ones' step time there (a
        zigzag between 100 and 300 ms, 2026-11-29). A power of two, changed only when the data
        needs a coarser column or allows one under half as wide (so it does not flip each frame)."""
        rows = len(self._rows)
        if rows < 2 or self._used == 0:
            return 1
        points = float(np.median(self._points[:rows]))
        needed = self._used / points if points > 0 else 1.0  # bins between the median worker's points
        group = self._data_group
        if needed > group * 1.1 or needed < 0.4 * group:  # (1.1: a first bin left empty by the origin)
            group = 1 if needed <= 1.1 else 1 << math.ceil(math.log2(needed))
            self._data_group = group
        return group

    def _stats(self, max_columns: int | None, means: FloatArray) -> _Stats:
        """:meth:`_column_stats` of ``_means(max_columns)``, kept with them."""
        view = self._view_at(max_columns)
        assert view is not None
        return view.stats

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
        _, edges, means = made
        view = self._view
        assert view is not None
        values = means[int(np.flatnonzero(view.order == self._rows[worker])[0])]
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

    def heatmap(self, max_columns: int | None = None, *, max_rows: int | None = None) -> HeatMap | None:
        """Each worker relative to the bin's median across workers. Past ``max_rows`` workers
        (more than the map has pixel rows) neighbours share a row, which shows the slowest of them:
        a straggler stays a bright streak, named by the row's first and last worker."""
        view = self._view_at(max_columns)
        if view is None:
            return None
        names, values = view.names, view.heat
        if max_rows is not None and max_rows > 0 and len(names) > max_rows:
            k = math.ceil(len(names) / max_rows)
            made = view.grouped.get(k)
            if made is None:
                buffer = np.full((math.ceil(len(names) / k), self.bins), np.nan)
                buffer[:, : values.shape[1]] = _slowest_of(values, k)
                made = view.grouped[k] = ([_span(names[i : i + k]) for i in range(0, len(names), k)], buffer)
            return HeatMap(rows=tuple(made[0]), edges=view.edges, values=made[1][:, : values.shape[1]], per_row=k)
        return HeatMap(rows=tuple(names), edges=view.edges, values=values)


def _slowest_of(values: FloatArray, k: int) -> FloatArray:
    """``values`` with every ``k`` neighbouring rows made one: the highest of them (NaN only where
    all are)."""
    pad = (-values.shape[0]) % k
    padded = np.pad(values, ((0, pad), (0, 0)), constant_values=np.nan) if pad else values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN cell stays NaN
        result: FloatArray = np.nanmax(padded.reshape(-1, k, padded.shape[1]), axis=1)
    return result


def _span(names: list[str]) -> str:
    """``worker:4-7`` for workers 4 to 7 (one job), else the first and last name."""
    if len(names) == 1:
        return names[0]
    first, last = names[0], names[-1]
    job, _, index = first.partition(":")
    other, _, last_index = last.partition(":")
    return f"{job}:{index}-{last_index}" if job == other else f"{first}-{last}"


def slowest(step_times_s: Mapping[str, float | None], k: int = 3, factor: float = 1.2) -> list[str]:
    """Up to ``k`` workers, slowest first, whose step time is at least ``factor`` times the median
    of all workers' (so a uniform cluster names nobody)."""
    usable = {n: float(v) for n, v in step_times_s.items() if v is not None and math.isfinite(v) and v > 0}
    if len(usable) < 2:
        return []
    median = statistics.median(usable.values())  # a few dozen floats: no numpy round trip
    ranked = sorted(usable, key=lambda n: (-usable[n], natural_key(n)))
    return [n for n in ranked if usable[n] >= factor * median][:k]
