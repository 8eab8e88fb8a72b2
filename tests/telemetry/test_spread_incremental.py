"""The spread at 1,024 workers: the views are worked out again only in the columns new points
touched, with the same figures as from scratch; past as many workers as the heat map has pixel
rows, neighbours share a row that shows the slowest of them."""

from __future__ import annotations

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
