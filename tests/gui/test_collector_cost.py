"""The window's collector (gui/window/collector.py) makes full collections as rare as CPython would:
with a big heap (the ring buffers of 257 roles) each one is a long frame, so the next waits until
the objects that reached the oldest generation since the last one are a quarter of those it kept.
Counted in collections made, never in time."""

from __future__ import annotations

import gc

import pytest


def full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def churn(checks: int, *, keep_each: int, kept: list[list[object]]) -> None:
    """What a window's frames do to the heap between two checks of the collector: cycles that die
    young (events, parsed lines), and ``keep_each`` containers a check that live on (new points)."""
    from gui.window import collector

    assert collector._collector is not None
    for _ in range(checks):
        for _ in range(800):
            cycle: list[object] = []
            cycle.append(cycle)
        kept.append([[] for _ in range(keep_each)])
        collector._collector.check()


@pytest.mark.timeout(120)
def test_full_collections_wait_for_a_quarter_more_long_lived_objects_as_cpython_does(qtbot) -> None:
    from gui.window import collector

    hold = collector.hold()
    try:
        heap = [[i] for i in range(200_000)]  # a window's long-lived heap
        kept: list[list[object]] = []
        churn(150, keep_each=0, kept=kept)  # the first full collection measures the heap
        before = full_collections()
        # 3,000 checks: the count alone asks for a full collection every ~120 (10 gen-1 collections
        # of 10 gen-0 ones each), 25 of them; few objects live on, so CPython would make none.
        churn(3_000, keep_each=2, kept=kept)
        assert full_collections() - before == 0
        # Once a quarter more than the heap has lived on, a full collection comes: nothing starves.
        before = full_collections()
        churn(3_000, keep_each=40, kept=kept)
        assert 1 <= full_collections() - before <= 3
        assert len(heap) == 200_000
    finally:
        hold.release()
