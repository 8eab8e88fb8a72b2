"""NumPy versions of :mod:`core.views.series`' bucket arithmetic, for :meth:`Series.extend`.

Each function computes, for many buckets at once, exactly what the scalar code computes for one:
the same IEEE operations in the same order (NumPy's element-wise ``+ - * /`` round as Python's
floats do), the same ``<``/``<=`` comparisons for min, max and the clamp (so ties and signed zeros
resolve the same way), and ``math.fsum`` itself for a bucket's sum (NumPy has no correctly rounded
sum). The values are therefore bit-for-bit those of the point-by-point path; only a NaN's sign or
payload may differ, which no comparison can see.

A bucket set is a tuple of six float64 arrays: ``t_start, t_end, min, max, mean, count``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

Columns = tuple[
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
]


def buckets_of_points(ts: npt.NDArray[np.float64], vs: npt.NDArray[np.float64], factor: int) -> Columns:
    """One bucket per ``factor`` consecutive points (``len(ts)`` a multiple of it), as
    :func:`core.views.series._bucket_of` makes each: NaN left out, infinities kept."""
    t = ts.reshape(-1, factor)
    v = vs.reshape(-1, factor)
    nan = v != v
    count = (factor - nan.sum(axis=1)).astype(np.float64)
    # min() and max() of the non-NaN values, folded left to right with a strict comparison as
    # Python's builtins do (the first of equal values wins: 0.0 before -0.0 stays 0.0).
    low = np.where(nan, np.inf, v)
    high = np.where(nan, -np.inf, v)
    lo, hi = low[:, 0].copy(), high[:, 0].copy()
    for j in range(1, factor):
        lo = np.where(low[:, j] < lo, low[:, j], lo)
        hi = np.where(high[:, j] > hi, high[:, j], hi)
    # The sum: math.fsum where every value is finite (NaN as 0.0, which fsum skips like any zero);
    # with an infinity Python's sum() gives +inf, -inf or NaN whatever the finite values are.
    pos_inf = (v == np.inf).any(axis=1)
    neg_inf = (v == -np.inf).any(axis=1)
    has_inf = pos_inf | neg_inf
    finite_rows = np.where(nan | has_inf[:, None], 0.0, v)
    empty = count == 0
    safe_count = np.where(empty, 1.0, count)
    rows = finite_rows.tolist()
    try:
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.fromiter(map(math.fsum, rows), dtype=np.float64, count=len(rows)) / safe_count
    except OverflowError:  # a sum past the largest float: that row's mean the slow way
        mean = np.fromiter(map(finite_mean, rows, safe_count.tolist()), dtype=np.float64, count=len(rows))
    mean = np.where(pos_inf & neg_inf, np.nan, np.where(pos_inf, np.inf, np.where(neg_inf, -np.inf, mean)))
    mean = np.where(mean < lo, lo, np.where(mean > hi, hi, mean))
    lo = np.where(empty, np.nan, lo)
    hi = np.where(empty, np.nan, hi)
    mean = np.where(empty, np.nan, mean)
    return (t[:, 0].copy(), t[:, -1].copy(), lo, hi, mean, count)


def finite_mean(values: list[float], n: float) -> float:
    """The mean of finite ``values`` (zeros aside, ``n`` of them): their correctly rounded sum over
    ``n``; when that sum passes the largest float, the sum of each over ``n`` instead."""
    try:
        return math.fsum(values) / n
    except OverflowError:
        return math.fsum(v / n for v in values)


def merge(a: Columns, b: Columns) -> Columns:
    """Each bucket of ``a`` merged with the one of ``b`` at the same index (``a`` first), as
    :func:`core.views.series._merge` does it."""
    ca, cb = a[5], b[5]
    lo = np.where(a[2] <= b[2], a[2], b[2])
    hi = np.where(a[3] >= b[3], a[3], b[3])
    ma, mb = a[4], b[4]
    with np.errstate(all="ignore"):
        total = ca + cb
        share_b = cb / total
        mean = ma + (mb - ma) * share_b
        # The difference overflowed: weigh each mean instead.
        mean = np.where(np.isfinite(mean), mean, ma * (ca / total) + mb * share_b)
        mean = np.where(np.isfinite(ma) & np.isfinite(mb), mean, (ma * ca + mb * cb) / total)
    mean = np.where(ma == mb, ma, mean)
    mean = np.where(mean < lo, lo, np.where(mean > hi, hi, mean))
    only_a = cb == 0
    only_b = (ca == 0) & ~only_a
    pick = [np.where(only_a, a[i], np.where(only_b, b[i], merged)) for i, merged in ((2, lo), (3, hi), (4, mean))]
    return (a[0], b[1], pick[0], pick[1], pick[2], ca + cb)


def merge_groups(rows: Columns, factor: int) -> Columns:
    """One bucket per ``factor`` consecutive buckets of ``rows``, merged left to right as
    :meth:`core.views.series._Level.pop_merged` does."""
    merged: Columns = tuple(col[0::factor] for col in rows)  # type: ignore[assignment]
    for j in range(1, factor):
        merged = merge(merged, tuple(col[j::factor] for col in rows))  # type: ignore[arg-type]
    return merged
