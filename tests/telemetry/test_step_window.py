"""A role's rate window (core/telemetry/step_window.py): its sums are those of its buckets, and
taking them while the role trains is no pass over the buckets."""

from __future__ import annotations

import collections
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.telemetry.step_window import BUCKET_S, StepWindow


def reference_sums(records: list[tuple[float, float | None, float | None]], end: float, window_s: float) -> tuple:
    """The window's sums from its definition: each record's forward step advance and printed step
    time into its one-second bucket (a record older than the newest bucket into the newest; a
    bucket more than the window before the newest dropped), then the buckets of the window ending
    at ``end`` added up."""
    buckets: collections.OrderedDict[int, list[float]] = collections.OrderedDict()
    prev: tuple[float, float] | None = None
    span = math.ceil(window_s / BUCKET_S)
    for t, step, printed in records:
        key = math.floor(t / BUCKET_S)
        if key not in buckets:
            if buckets and key < next(reversed(buckets)):
                key = next(reversed(buckets))
            else:
                buckets[key] = [0.0, 0.0, 0, 0.0]
                for old in [k for k in buckets if k < key - span]:
                    del buckets[old]
        b = buckets[key]
        if printed is not None and math.isfinite(printed) and printed > 0:
            b[2] += 1
            b[3] += printed
        if step is None:
            continue
        if prev is not None and step > prev[0] and t >= prev[1]:
            b[0] += step - prev[0]
            b[1] += t - prev[1]
        prev = (step, t)
    last = math.floor(end / BUCKET_S)
    inside = [b for k, b in buckets.items() if last - span < k <= last]
    return (sum(b[0] for b in inside), sum(b[1] for b in inside), sum(b[2] for b in inside), sum(b[3] for b in inside))


RECORD = st.tuples(
    st.floats(0, 5),  # seconds after the record before (a late one goes back: see below)
    st.one_of(st.none(), st.integers(0, 50)),  # the step's advance, or a line without a step
    st.one_of(st.none(), st.floats(-1, 2), st.just(math.nan)),
    st.booleans(),  # late: stamped up to 40 s before the newest
)


@settings(max_examples=300, deadline=None)
@given(raw=st.lists(RECORD, max_size=120), window_s=st.sampled_from([30.0, 5.0, 2.5]), ends=st.lists(st.floats(-3, 60)))
def test_the_sums_are_those_of_the_window_s_buckets(raw: list, window_s: float, ends: list[float]) -> None:
    window = StepWindow(window_s)
    records: list[tuple[float, float | None, float | None]] = []
    t, step = 1000.0, 0
    for gap, advance, printed, late in raw:
        t += gap
        step = step + advance if advance is not None else step
        stamped = t - gap * 8 if late else t
        records.append((stamped, step if advance is not None else None, printed))
        window.take(stamped, step if advance is not None else None, printed)
        newest = max(r[0] for r in records)
        for end in [newest, newest + 0.5, *(newest + e for e in ends)]:
            got = window.sums(end)
            want = reference_sums(records, end, window_s)
            assert (got.steps, got.steps_s, got.timed, got.timed_s) == pytest.approx(want, rel=1e-9, abs=1e-9)


class _CountedBuckets(collections.OrderedDict):  # type: ignore[type-arg]
    passes = 0

    def items(self):  # type: ignore[no-untyped-def, override]
        _CountedBuckets.passes += 1
        return super().items()

    def values(self):  # type: ignore[no-untyped-def, override]
        _CountedBuckets.passes += 1
        return super().values()


def test_the_sums_of_a_training_role_take_no_pass_over_its_buckets() -> None:
    """The status rebuild asks every role's sums a few times a second (257 roles at 256 workers):
    for a role whose newest record is in the window's last second, that is no pass over its 30
    buckets but the first after a bucket started: at most one a second per role."""
    window = StepWindow()
    window._buckets = _CountedBuckets()
    _CountedBuckets.passes = 0
    t = 1000.0
    for step in range(600):  # a minute at 10 steps a second, the status asked after each record
        t = 1000.0 + step / 10
        window.take(t, step, 0.1)
        window.sums(t)
    passes_taking = _CountedBuckets.passes
    assert passes_taking <= 61  # one a second, as each bucket starts
    for _ in range(1000):
        sums = window.sums(t)
    assert _CountedBuckets.passes == passes_taking
    assert sums.steps == pytest.approx(300) and sums.timed == 300


def test_the_sums_of_a_role_a_second_behind_the_cluster_take_no_pass_over_its_buckets() -> None:
    """The run's window ends at its newest record: a role whose newest record is still in the
    second before (one in a few at any moment at 10 steps a second, most of a loaded run's) walked
    its 30 buckets at every status rebuild, 4 times a second; now once after its bucket started."""
    window = StepWindow()
    window._buckets = _CountedBuckets()
    _CountedBuckets.passes = 0
    t = 1000.0
    for step in range(600):
        t = 1000.0 + step / 10
        window.take(t, step, 0.1)
    passes_taking = _CountedBuckets.passes
    end = math.floor(t) + 1.2  # the cluster's newest record, a second on
    for _ in range(1000):
        sums = window.sums(end)
    assert _CountedBuckets.passes <= passes_taking + 1
    want = reference_sums([(1000.0 + s / 10, s, 0.1) for s in range(600)], end, 30.0)
    assert (sums.steps, sums.steps_s, sums.timed, sums.timed_s) == pytest.approx(want, rel=1e-9)


def test_records_taken_without_their_sums_asked_take_no_pass_over_the_buckets() -> None:
    """A reopened run hands over a worker's records in one batch (~450 each of 256 workers for a
    day-long run) and its window is asked once, after: a pass over the 30 buckets as each bucket
    started was ~40 % of the CPU spent opening it. The sums come out the same (the property above)."""
    window = StepWindow()
    window._buckets = _CountedBuckets()
    _CountedBuckets.passes = 0
    for second in range(600):  # ten minutes of a 1 Hz worker: a bucket a record
        window.take(1000.0 + second, second + 1, 0.98)
    assert _CountedBuckets.passes == 0  # was 600: one as each bucket started
    sums = window.sums(1599.0)
    assert _CountedBuckets.passes == 1
    assert sums.steps == pytest.approx(30) and sums.timed == 30
