"""Bounded multi-resolution time series for live plots of long runs.

A :class:`Series` keeps the newest ``capacity`` points exactly, in a ring buffer. Older points are
folded into ``levels`` levels of buckets (``t_start, t_end, min, max, mean, count``), each level a
ring of ``capacity // 8`` buckets (at least 16):

- when the raw ring is full, its oldest ``FACTOR`` (4) points become one level-0 bucket;
- when level k is full, its oldest 4 buckets merge into one bucket of level k + 1, so a level-k
  bucket covers 4**(k+1) points;
- the last level's buckets all hold the same number of incoming buckets; when it is full they
  merge in pairs in place and that number doubles, so the whole run stays covered, evenly, at an
  ever coarser resolution however long it lasts.

The raw ring is allocated up front and each level's arrays at its first bucket (most series never
reach their deeper levels: a reopened run hands a worker's curve ~512 points), so the memory held
grows to a fixed bound, level by level, and never past it. With the
defaults (2048 points, 8 levels of 256 buckets) a 1 s series keeps the last 34 minutes exactly,
and 24 hours fit in the first four levels (oldest buckets about 4 minutes wide). Buckets keep min
and max, so a spike an hour ago still shows; :meth:`Series.extremes` is the exact min and max of
everything ever appended.

NaN values are stored in the raw ring but left out of a bucket's min, max and mean (a bucket of
only NaN reads NaN); infinities are kept.

Segments: ``t`` is expected not to decrease. When it does (a restarted worker's step going back),
the series starts a new segment instead of reordering or drawing a zig-zag: the finished segment
is reduced to at most ``capacity // 8`` buckets and kept (the newest :data:`MAX_OLD_SEGMENTS`
finished segments are kept, older ones dropped), and the live structure starts empty.
:meth:`Series.points` reads the live segment by default; ``segment=i`` reads finished segment ``i``
(0 oldest), and :meth:`Series.segment_count` says how many there are. Draw each as its own curve.
"""

from __future__ import annotations

import itertools
import math
import sys
from array import array

import numpy as np
import numpy.typing as npt

from core.views import series_bulk

FACTOR = 4
"""Points (or buckets) merged into one bucket of the next level."""

MAX_OLD_SEGMENTS = 4
"""Finished segments (after ``t`` went backwards) kept, newest first; older ones are dropped."""

EXTEND_LOOP_BELOW = 32
"""Batches shorter than this are appended point by point: NumPy's fixed cost outweighs the loop."""

_Bucket = tuple[float, float, float, float, float, float]  # t_start, t_end, min, max, mean, count


def _merge(a: _Bucket, b: _Bucket) -> _Bucket:
    """One bucket covering both (``a`` first); NaN-free statistics weighted by count."""
    ca, cb = a[5], b[5]
    if cb == 0:
        return (a[0], b[1], a[2], a[3], a[4], ca)
    if ca == 0:
        return (a[0], b[1], b[2], b[3], b[4], cb)
    lo = a[2] if a[2] <= b[2] else b[2]
    hi = a[3] if a[3] >= b[3] else b[3]
    ma, mb = a[4], b[4]
    if ma == mb:
        mean = ma
    elif math.isfinite(ma) and math.isfinite(mb):
        mean = ma + (mb - ma) * (cb / (ca + cb))
        if not math.isfinite(mean):  # the difference overflowed
            mean = ma * (ca / (ca + cb)) + mb * (cb / (ca + cb))
    else:
        mean = (ma * ca + mb * cb) / (ca + cb)
    mean = lo if mean < lo else hi if mean > hi else mean
    return (a[0], b[1], lo, hi, mean, ca + cb)


def _bucket_of(ts: list[float], vs: list[float]) -> _Bucket:
    finite = [v for v in vs if v == v]
    if not finite:
        nan = math.nan
        return (ts[0], ts[-1], nan, nan, nan, 0.0)
    lo, hi = min(finite), max(finite)
    # With an infinity the mean is +inf, -inf or NaN, as the data says; fsum would raise on inf - inf.
    if all(math.isfinite(v) for v in finite):
        mean = series_bulk.finite_mean(finite, len(finite))
    else:
        mean = sum(finite) / len(finite)
    mean = lo if mean < lo else hi if mean > hi else mean
    return (ts[0], ts[-1], lo, hi, mean, float(len(finite)))


class _Level:
    """A ring of buckets; six parallel float64 arrays allocated once, at its first bucket."""

    __slots__ = ("capacity", "cols", "group", "head", "size", "tail_units")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # Allocated by allocate(): opening a 256-worker run made ~1,000 series, each zeroing eight
        # levels' arrays (192 KB a training series) that its few hundred points never reached.
        self.cols: tuple[array[float], ...] = ()
        self.head = 0  # index of the oldest bucket
        self.size = 0
        # The last level only: incoming buckets per bucket (doubles at each compaction), and how
        # many the newest bucket holds, so all its buckets stay about the same width.
        self.group = 1
        self.tail_units = 0

    def reset(self) -> None:
        self.head = self.size = self.tail_units = 0
        self.group = 1

    def allocate(self) -> tuple[array[float], ...]:
        """The level's columns, allocated at the first call."""
        if not self.cols:
            zeros = array("d", [0.0]) * self.capacity
            self.cols = tuple(array("d", zeros) for _ in range(6))
        return self.cols

    def push(self, bucket: _Bucket) -> None:
        i = (self.head + self.size) % self.capacity
        for col, value in zip(self.allocate(), bucket, strict=True):
            col[i] = value
        self.size += 1

    def put(self, k: int, bucket: _Bucket) -> None:
        i = (self.head + k) % self.capacity
        for col, value in zip(self.cols, bucket, strict=True):
            col[i] = value

    def push_grouped(self, bucket: _Bucket) -> None:
        """Add to the newest bucket while it holds fewer than ``group``; compact when full."""
        if self.size and self.tail_units < self.group:
            self.put(self.size - 1, _merge(self.get(self.size - 1), bucket))
            self.tail_units += 1
            return
        if self.size == self.capacity:
            self.compact()
            self.group *= 2
        self.push(bucket)
        self.tail_units = 1

    def get(self, k: int) -> _Bucket:
        i = (self.head + k) % self.capacity
        c = self.cols
        return (c[0][i], c[1][i], c[2][i], c[3][i], c[4][i], c[5][i])

    def pop_merged(self, n: int) -> _Bucket:
        merged = self.get(0)
        for k in range(1, n):
            merged = _merge(merged, self.get(k))
        self.head = (self.head + n) % self.capacity
        self.size -= n
        return merged

    def compact(self) -> None:
        """Merge neighbours in pairs: half as many buckets, each twice as wide."""
        buckets = [self.get(k) for k in range(self.size)]
        self.head, self.size = 0, 0
        for k in range(0, len(buckets), 2):
            self.push(_merge(buckets[k], buckets[k + 1]) if k + 1 < len(buckets) else buckets[k])

    def buckets(self) -> list[_Bucket]:
        return [self.get(k) for k in range(self.size)]

    def nbytes(self) -> int:
        return sum(sys.getsizeof(col) for col in self.cols) + sys.getsizeof(self)


class Series:
    """A bounded (t, value) series: the newest points exact, older ones in min/max/mean buckets.

    ``capacity`` is how many newest points are kept exactly; ``levels`` how many coarser levels of
    ``max(16, capacity // 8)`` buckets follow. Memory grows to a fixed bound as levels fill (see
    :meth:`memory_bytes`); see the module docstring for how points move down the levels and how a
    decreasing ``t`` starts a new segment.
    """

    def __init__(self, capacity: int = 2048, levels: int = 8) -> None:
        if capacity < 2 * FACTOR:
            raise ValueError(f"capacity must be at least {2 * FACTOR}, got {capacity}")
        if levels < 1:
            raise ValueError(f"levels must be at least 1, got {levels}")
        self.capacity = capacity
        self.bucket_capacity = max(16, capacity // 8)
        if self.bucket_capacity % FACTOR:
            self.bucket_capacity += FACTOR - self.bucket_capacity % FACTOR
        self._t = array("d", bytes(8 * capacity))
        self._v = array("d", bytes(8 * capacity))
        self._head = 0
        self._size = 0
        self._levels = [_Level(self.bucket_capacity) for _ in range(levels)]
        self._old_segments: list[tuple[array[float], ...]] = []
        self._last: tuple[float, float] | None = None
        self._min = math.inf
        self._max = -math.inf
        self.appended = 0
        """Points appended over the series' life."""

    def append(self, t: float, value: float) -> None:
        """Add a point. ``t`` must be finite; a ``t`` below the last one starts a new segment."""
        if not math.isfinite(t):
            raise ValueError(f"time must be finite, got {t}")
        last = self._last
        if last is not None and t < last[0]:
            self._start_segment()
        value = float(value)
        if self._size == self.capacity:
            self._evict()
        i = self._head + self._size
        if i >= self.capacity:
            i -= self.capacity
        self._t[i] = t
        self._v[i] = value
        self._size += 1
        self._last = (t, value)
        self.appended += 1
        if value < self._min:
            self._min = value
        if value > self._max:
            self._max = value

    def extend(self, ts: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """Add many points, in order: the same state as :meth:`append` for each, in one pass.

        Points that leave the raw ring go straight into level-0 buckets computed with NumPy, and
        the levels take their overflow a batch at a time; the arithmetic is the scalar code's,
        operation for operation (see :mod:`core.views.series_bulk`), so every bucket, mean and
        extreme is bit-for-bit what the appends give. ``t`` going backwards starts a new segment
        exactly where :meth:`append` would. A non-finite ``t`` anywhere raises ``ValueError``
        before anything is added (the appends would have taken the points before it).
        """
        if (
            type(ts) is list
            and type(values) is list
            and len(ts) == len(values) < EXTEND_LOOP_BELOW
            and all(type(x) is float for x in ts)
            and all(type(x) is float for x in values)
        ):
            # A live frame's few points (a host's sample, a worker's lines), already floats: no
            # arrays made for them (4.3 us a one-point extend, 1.2 us an append; 18 a host sample).
            for t in ts:
                if not math.isfinite(t):
                    raise ValueError(f"time must be finite, got {t}")
            for t, value in zip(ts, values, strict=True):
                self.append(t, value)
            return
        t_arr = np.asarray(ts, dtype=np.float64).reshape(-1)
        v_arr = np.asarray(values, dtype=np.float64).reshape(-1)
        if len(t_arr) != len(v_arr):
            raise ValueError(f"{len(t_arr)} times for {len(v_arr)} values")
        n = len(t_arr)
        if n == 0:
            return
        finite = np.isfinite(t_arr)
        if not finite.all():
            raise ValueError(f"time must be finite, got {t_arr[np.argmin(finite)]}")
        if n < EXTEND_LOOP_BELOW:
            for t, value in zip(t_arr.tolist(), v_arr.tolist(), strict=True):
                self.append(t, value)
            return
        # Runs of non-decreasing t; each one after the first starts a new segment, and so does the
        # first if it goes below the last point before the batch.
        bounds = [0, *(np.flatnonzero(t_arr[1:] < t_arr[:-1]) + 1).tolist(), n]
        runs = list(itertools.pairwise(bounds))
        break_first = self._last is not None and t_arr[0] < self._last[0]
        # The runs with more than MAX_OLD_SEGMENTS finished runs after them would be dropped as
        # soon as made (and with them what came before the batch): skip them, start afresh.
        skip = max(0, len(runs) - 1 - MAX_OLD_SEGMENTS)
        if skip:
            self._old_segments.clear()
            self._head = self._size = 0
            for level in self._levels:
                level.reset()
        for k in range(skip, len(runs)):
            if k > skip or (k == 0 and not skip and break_first):
                self._start_segment()
            a, b = runs[k]
            self._extend_run(t_arr[a:b], v_arr[a:b])
        self._last = (float(t_arr[-1]), float(v_arr[-1]))
        self.appended += n
        kept = v_arr[v_arr == v_arr]
        if len(kept):
            lo, hi = kept[np.argmin(kept)], kept[np.argmax(kept)]  # the first of equal ones, as append
            if lo < self._min:
                self._min = float(lo)
            if hi > self._max:
                self._max = float(hi)

    def _extend_run(self, ts: npt.NDArray[np.float64], vs: npt.NDArray[np.float64]) -> None:
        """Add points whose ``t`` does not go below the last one; no segment starts."""
        cap, head, size = self.capacity, self._head, self._size
        total = size + len(ts)
        evicted = 0 if total <= cap else FACTOR * -(-(total - cap) // FACTOR)
        t_buf, v_buf = np.frombuffer(self._t), np.frombuffer(self._v)
        if evicted:
            from_ring = _ring(head, min(evicted, size), cap)
            from_new = max(0, evicted - size)
            out_t = np.concatenate((t_buf[from_ring], ts[:from_new]))
            out_v = np.concatenate((v_buf[from_ring], vs[:from_new]))
            self._push_buckets(0, series_bulk.buckets_of_points(out_t, out_v, FACTOR))
        # Point p of the run (counting the ring's points first) lives at (head + p) % cap.
        first = max(size, evicted)
        slots = (head + np.arange(first, total)) % cap
        t_buf[slots] = ts[first - size :]
        v_buf[slots] = vs[first - size :]
        self._head = (head + evicted) % cap
        self._size = total - evicted

    def _push_buckets(self, k: int, buckets: series_bulk.Columns) -> None:
        """:meth:`_push_level` for many buckets, in order."""
        level = self._levels[k]
        if k + 1 == len(self._levels):
            for bucket in zip(*(col.tolist() for col in buckets), strict=True):
                level.push_grouped(bucket)
            return
        cap, head, size = level.capacity, level.head, level.size
        total = size + len(buckets[0])
        evicted = 0 if total <= cap else FACTOR * -(-(total - cap) // FACTOR)
        cols = [np.frombuffer(col) for col in level.allocate()]
        if evicted:
            from_ring = _ring(head, min(evicted, size), cap)
            from_new = max(0, evicted - size)
            out = tuple(
                np.concatenate((col[from_ring], new[:from_new])) for col, new in zip(cols, buckets, strict=True)
            )
            self._push_buckets(k + 1, series_bulk.merge_groups(out, FACTOR))  # type: ignore[arg-type]
        first = max(size, evicted)
        slots = (head + np.arange(first, total)) % cap
        for col, new in zip(cols, buckets, strict=True):
            col[slots] = new[first - size :]
        level.head = (head + evicted) % cap
        level.size = total - evicted

    def _evict(self) -> None:
        cap, head = self.capacity, self._head
        idx = [(head + k) % cap for k in range(FACTOR)]
        bucket = _bucket_of([self._t[i] for i in idx], [self._v[i] for i in idx])
        self._head = (head + FACTOR) % cap
        self._size -= FACTOR
        self._push_level(0, bucket)

    def _push_level(self, k: int, bucket: _Bucket) -> None:
        level = self._levels[k]
        if k + 1 == len(self._levels):
            level.push_grouped(bucket)
            return
        if level.size == level.capacity:
            self._push_level(k + 1, level.pop_merged(FACTOR))
        level.push(bucket)

    def _start_segment(self) -> None:
        """Keep the live segment, reduced, as a finished one; start the live one afresh."""
        ts, means, mins, maxs, counts = self._collect(None, None)
        ts, means, mins, maxs, counts = _reduce(
            ts=ts, means=means, mins=mins, maxs=maxs, counts=counts, max_points=self.bucket_capacity
        )
        self._old_segments.append(tuple(array("d", col) for col in (ts, means, mins, maxs, counts)))
        del self._old_segments[:-MAX_OLD_SEGMENTS]
        self._head = self._size = 0
        for level in self._levels:
            level.reset()

    def __len__(self) -> int:
        """Entries held in the live segment: exact points plus buckets."""
        return self._size + sum(level.size for level in self._levels)

    def segment_count(self) -> int:
        """Finished segments kept (the live one not counted)."""
        return len(self._old_segments)

    def last(self) -> tuple[float, float] | None:
        """The newest point, exactly as appended (None before the first)."""
        return self._last

    def extremes(self) -> tuple[float, float] | None:
        """Exact (min, max) of every non-NaN value ever appended, across segments."""
        return (self._min, self._max) if self._min <= self._max else None

    def points(
        self,
        t0: float | None = None,
        t1: float | None = None,
        *,
        max_points: int | None = None,
        segment: int | None = None,
    ) -> tuple[list[float], list[float], list[float], list[float]]:
        """``(t, mean, min, max)`` lists in time order, for plotting.

        Exact points and buckets merged across levels, clipped to ``[t0, t1]`` (a bucket that
        straddles a bound is kept, its time clamped to the bound), then reduced to at most
        ``max_points`` by merging neighbours (min of mins, max of maxes, weighted mean). A bucket's
        time is the middle of what it covers. ``segment`` picks a finished segment (0 oldest);
        None reads the live one.
        """
        if segment is None:
            ts, means, mins, maxs, counts = self._collect(t0, t1)
        else:
            cols = self._old_segments[segment]
            ts, means, mins, maxs, counts = self._clip_columns(cols, t0, t1)
        if max_points is not None and max_points > 0 and len(ts) > max_points:
            ts, means, mins, maxs, counts = _reduce(
                ts=ts, means=means, mins=mins, maxs=maxs, counts=counts, max_points=max_points
            )
        return ts, means, mins, maxs

    def arrays(self, segment: int | None = None) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """``(t, mean)`` as NumPy arrays: what :meth:`points` gives with no bounds and no
        ``max_points``, read without a Python loop (a plot's frame reads every curve's series)."""
        if segment is not None:
            cols = self._old_segments[segment]
            return np.array(cols[0], dtype=np.float64), np.array(cols[1], dtype=np.float64)
        ts: list[npt.NDArray[np.float64]] = []
        means: list[npt.NDArray[np.float64]] = []
        for level in reversed(self._levels):
            if level.size:
                idx = _ring(level.head, level.size, level.capacity)
                start, end = np.frombuffer(level.cols[0])[idx], np.frombuffer(level.cols[1])[idx]
                ts.append((start + end) / 2)
                means.append(np.frombuffer(level.cols[4])[idx])
        if self._size:
            idx = _ring(self._head, self._size, self.capacity)
            ts.append(np.frombuffer(self._t)[idx])
            means.append(np.frombuffer(self._v)[idx])
        if not ts:
            return np.empty(0), np.empty(0)
        return np.concatenate(ts), np.concatenate(means)

    def _collect(
        self, t0: float | None, t1: float | None
    ) -> tuple[list[float], list[float], list[float], list[float], list[float]]:
        lo = -math.inf if t0 is None else t0
        hi = math.inf if t1 is None else t1
        ts: list[float] = []
        means: list[float] = []
        mins: list[float] = []
        maxs: list[float] = []
        counts: list[float] = []
        for level in reversed(self._levels):
            for b in level.buckets():
                if b[1] < lo or b[0] > hi:
                    continue
                mid = (b[0] + b[1]) / 2
                ts.append(lo if mid < lo else hi if mid > hi else mid)
                means.append(b[4])
                mins.append(b[2])
                maxs.append(b[3])
                counts.append(b[5])
        cap = self.capacity
        for k in range(self._size):
            i = (self._head + k) % cap
            t = self._t[i]
            if lo <= t <= hi:
                v = self._v[i]
                ts.append(t)
                means.append(v)
                mins.append(v)
                maxs.append(v)
                counts.append(0.0 if v != v else 1.0)
        return ts, means, mins, maxs, counts

    @staticmethod
    def _clip_columns(
        cols: tuple[array[float], ...], t0: float | None, t1: float | None
    ) -> tuple[list[float], list[float], list[float], list[float], list[float]]:
        lo = -math.inf if t0 is None else t0
        hi = math.inf if t1 is None else t1
        keep = [k for k, t in enumerate(cols[0]) if lo <= t <= hi]
        ts, means, mins, maxs, counts = ([col[k] for k in keep] for col in cols)
        return ts, means, mins, maxs, counts

    def memory_bytes(self) -> int:
        """Bytes held by this series: its arrays (with their object headers) and itself."""
        total = sys.getsizeof(self) + sys.getsizeof(self.__dict__)
        total += sys.getsizeof(self._t) + sys.getsizeof(self._v)
        total += sum(level.nbytes() for level in self._levels)
        for cols in self._old_segments:
            total += sum(sys.getsizeof(col) for col in cols)
        return total


def _ring(head: int, size: int, capacity: int) -> npt.NDArray[np.intp]:
    """Indices of a ring's ``size`` entries from ``head``, oldest first."""
    idx = np.arange(head, head + size)
    idx[idx >= capacity] -= capacity
    return idx


def _reduce(
    *,
    ts: list[float],
    means: list[float],
    mins: list[float],
    maxs: list[float],
    counts: list[float],
    max_points: int,
) -> tuple[list[float], list[float], list[float], list[float], list[float]]:
    """Merge runs of neighbours so at most ``max_points`` remain."""
    n = len(ts)
    if n <= max_points:
        return ts, means, mins, maxs, counts
    group = -(-n // max_points)
    out: tuple[list[float], list[float], list[float], list[float], list[float]] = ([], [], [], [], [])
    for start in range(0, n, group):
        end = min(n, start + group)
        merged: _Bucket = (ts[start], ts[start], mins[start], maxs[start], means[start], counts[start])
        for k in range(start + 1, end):
            merged = _merge(merged, (ts[k], ts[k], mins[k], maxs[k], means[k], counts[k]))
        out[0].append((ts[start] + ts[end - 1]) / 2)
        out[1].append(merged[4])
        out[2].append(merged[2])
        out[3].append(merged[3])
        out[4].append(merged[5])
    return out
