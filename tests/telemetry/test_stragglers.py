"""Straggler flags that mean something: judged on a window, held before raised, cleared with
hysteresis (core.telemetry.stragglers). Three minutes of four workers' steps on a clock the test
controls, fed through the same WorkerStats the controller keeps and judged once a second as
core.controller.stragglers does."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.telemetry.stragglers import (
    CLEAR_RATIO,
    FLAG_RATIO,
    HOLD_S,
    StepTimes,
    StragglerChange,
    StragglerJudge,
    median_without,
)
from core.telemetry.worker_stats import WorkerStats

WORKERS = [f"worker:{i}" for i in range(4)]


@dataclass(frozen=True)
class Slowdown:
    worker: str
    start_s: float
    end_s: float
    factor: float = 2.0


def steps_of(
    worker: str,
    rng: random.Random,
    *,
    seconds: float,
    base_s: float,
    slowdown: Slowdown | None = None,
) -> list[tuple[float, int, float]]:
    """One worker's steps: (when it ended, step, how long it took). Each step takes ``base_s``
    ±50 %, every 20th five times that; slowed ``factor`` times within the slowdown."""
    out: list[tuple[float, int, float]] = []
    t, step = 0.0, 0
    while t < seconds:
        step += 1
        took = base_s * rng.uniform(0.5, 1.5) * (5.0 if step % 20 == 0 else 1.0)
        if slowdown is not None and slowdown.worker == worker and slowdown.start_s <= t < slowdown.end_s:
            took *= slowdown.factor
        t += took
        out.append((t, step, took))
    return out


def judge_run(
    *,
    seconds: float,
    base_s: float,
    seed: int,
    batch_s: float,
    printed: bool,
    slowdown: Slowdown | None = None,
) -> list[tuple[float, StragglerChange]]:
    """The flags raised and cleared over a simulated run, with when. ``batch_s``: the agent sends
    a role's output in batches this far apart, its lines sharing the batch's time (0: each line
    on its own); ``printed``: the trainer prints its step time (else it is derived from steps)."""
    rng = random.Random(seed)
    records: list[tuple[float, str, int, float]] = []
    for worker in WORKERS:
        for end, step, took in steps_of(worker, rng, seconds=seconds, base_s=base_s, slowdown=slowdown):
            seen = math.ceil(end / batch_s) * batch_s if batch_s else end
            records.append((seen, worker, step, took))
    records.sort(key=lambda r: r[0])
    stats = {w: WorkerStats() for w in WORKERS}
    judge = StragglerJudge()
    changes: list[tuple[float, StragglerChange]] = []
    i = 0
    for tick in range(1, int(seconds) + 1):
        now = float(tick)
        while i < len(records) and records[i][0] <= now:
            seen, worker, step, took = records[i]
            stats[worker].take(
                seen, step, loss=1.0, step_time_s=took if printed else None, steps_per_sec=None, extra={}
            )
            i += 1
        medians = {w: s.times.median() for w, s in stats.items()}
        changes += [(now, c) for c in judge.judge(now, medians)]
    return changes


# derandomize: the same runs every time; the flag's latency is a property of the run drawn (a
# sweep of 120 seeds gave 19-29 s to flag and 18-24 s to clear), and a suite must not draw anew.
@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    base_s=st.floats(0.02, 0.5),
    batch_s=st.sampled_from([0.0, 0.1, 0.25, 0.5]),
    printed=st.booleans(),
)
def test_four_jittery_workers_with_a_5x_step_every_20_raise_no_flag_in_3_minutes(
    seed: int, base_s: float, batch_s: float, printed: bool
) -> None:
    """A reading of 5x (the old judge's trigger: one step time above 1.5x the others' latest)
    comes every 20 steps, on every worker; the windowed median does not move."""
    changes = judge_run(seconds=180, base_s=base_s, seed=seed, batch_s=batch_s, printed=printed)
    assert changes == []


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    # Steps of 20-120 ms, 40-240 ms once slowed: a window's 50 steps fit in its 30 s (a step of
    # 1 s makes the window 50 s, and no median over it turns within 30 s).
    base_s=st.floats(0.02, 0.12),
    batch_s=st.sampled_from([0.0, 0.1, 0.25, 0.5]),
    printed=st.booleans(),
)
def test_a_worker_slowed_2x_after_30_s_is_flagged_within_30_s_and_cleared_within_30_s_of_recovering(
    seed: int, base_s: float, batch_s: float, printed: bool
) -> None:
    slow = Slowdown("worker:1", start_s=30.0, end_s=100.0)
    changes = judge_run(seconds=150, base_s=base_s, seed=seed, batch_s=batch_s, printed=printed, slowdown=slow)
    assert [(c.role, c.straggler) for _t, c in changes] == [("worker:1", True), ("worker:1", False)]
    (raised_at, raised), (cleared_at, cleared) = changes
    assert slow.start_s + HOLD_S <= raised_at <= slow.start_s + 30
    assert slow.end_s + HOLD_S <= cleared_at <= slow.end_s + 30
    assert raised.ratio is not None and FLAG_RATIO <= raised.ratio <= 2.6 and raised.held_s >= HOLD_S
    assert cleared.ratio is not None and cleared.ratio < CLEAR_RATIO
    assert f"{raised.ratio:.1f}x its peers'" in raised.text()


def test_the_flag_waits_out_its_hold_and_clears_below_the_lower_threshold() -> None:
    judge = StragglerJudge(hold_s=8.0)
    peers = {"worker:0": 0.1, "worker:2": 0.1, "worker:3": 0.1}
    assert judge.judge(0.0, {**peers, "worker:1": 0.2}) == []
    assert judge.judge(7.9, {**peers, "worker:1": 0.2}) == []
    assert judge.judge(8.5, {**peers, "worker:1": 0.1}) == []  # it lapsed: the hold starts again
    assert judge.judge(9.0, {**peers, "worker:1": 0.2}) == []
    [raised] = judge.judge(17.0, {**peers, "worker:1": 0.2})
    assert raised.straggler and raised.ratio == pytest.approx(2.0) and raised.held_s == pytest.approx(8.0)
    # Between the thresholds (CLEAR_RATIO <= ratio < FLAG_RATIO) it stays flagged, however long.
    assert CLEAR_RATIO <= 1.45 < FLAG_RATIO
    assert judge.judge(30.0, {**peers, "worker:1": 0.145}) == []
    assert judge.judge(60.0, {**peers, "worker:1": 0.145}) == [] and judge.flagged == {"worker:1"}
    assert judge.judge(61.0, {**peers, "worker:1": 0.12}) == []
    [cleared] = judge.judge(69.0, {**peers, "worker:1": 0.12})
    assert not cleared.straggler and judge.flagged == set()
    # A flagged worker that is no longer judged (it stopped, stalled) is cleared at once.
    judge.flagged = {"worker:1"}
    [gone] = judge.judge(70.0, peers)
    assert not gone.straggler and gone.text() == "no longer judged (not training)"


def test_steps_printed_together_are_measured_over_two_seconds_between_batches() -> None:
    times = StepTimes()
    # Batches of 5 lines 0.5 s apart: 0.1 s a step, never 0.5 s (the time from the last line of
    # one batch to the first of the next, as if one step had taken it) nor 0 s.
    for batch in range(80):
        for step in range(batch * 5 + 1, batch * 5 + 6):
            times.take(batch * 0.5, step, None)
    assert times.median() == pytest.approx(0.1)
    # A restart (the step goes back) starts afresh: no reading spans it.
    last = times.readings()[-1]
    times.take(41.0, 1, None)
    times.take(42.0, 11, None)
    assert times.readings()[-1] == last
    times.take(43.0, 21, None)
    times.take(44.0, 31, None)  # the batch at 43 s ends a stretch of 2 s from the restart's first
    assert times.readings()[-1] == (43.0, pytest.approx(0.1))
    assert all(value == pytest.approx(0.1) for _t, value in times.readings())


def test_fewer_than_50_readings_are_not_judged_and_the_window_is_30_s_or_50_readings() -> None:
    times = StepTimes()
    for i in range(49):
        times.take(float(i), i, 1.0)
    assert times.median() is None
    times.take(49.0, 49, 1.0)
    assert times.median() == 1.0
    # 100 s of 1 s steps, then 10 s steps: 30 s of them are 3 readings, so the window is the last
    # 50 (47 s of 1 s steps outweigh 30 s of 10 s steps); then 7 (70 s outweigh 43 s).
    for i in range(50, 100):
        times.take(float(i), i, 1.0)
    for i in range(3):
        times.take(100.0 + 10 * (i + 1), 100 + i, 10.0)
    assert len(times) == 50 and times.median() == 1.0
    for i in range(3, 7):
        times.take(100.0 + 10 * (i + 1), 100 + i, 10.0)
    assert len(times) == 50 and times.median() == 10.0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(min_value=1e-6, max_value=1e3, allow_nan=False), min_size=2, max_size=40),
    st.data(),
)
def test_the_median_without_one_worker_is_statistics_median_of_the_others(values: list[float], data) -> None:
    ordered = sorted(values)
    index = data.draw(st.integers(min_value=0, max_value=len(ordered) - 1))
    others = ordered[:index] + ordered[index + 1 :]
    assert median_without(ordered, index) == statistics.median(others)


class _CountedTime(float):
    """A step time that counts the comparisons made of it (sorting is what the judge's cost is)."""

    compared = 0

    def __lt__(self, other: object) -> bool:
        _CountedTime.compared += 1
        return float(self) < float(other)  # type: ignore[arg-type]


def test_judging_n_workers_sorts_their_times_once_not_once_a_worker() -> None:
    """Each worker's peers' median came from sorting the other N - 1 times again: at 256 workers
    ~500,000 comparisons a judgement (every 0.5 s), at 1,024 ten million. One sort is N log N."""
    workers = 256
    rng = random.Random(7)
    medians = {f"worker:{i}": _CountedTime(0.1 * rng.uniform(0.9, 1.1)) for i in range(workers)}
    medians["worker:3"] = _CountedTime(0.5)  # one straggler, so the judge has something to hold
    judge = StragglerJudge()
    _CountedTime.compared = 0
    judge.judge(0.0, medians)
    changes = judge.judge(HOLD_S + 1, medians)
    assert [c.role for c in changes if c.straggler] == ["worker:3"]
    # Two judgements: a sort of 256 (~2,000 comparisons) and 256 binary searches (~2,000) each.
    assert _CountedTime.compared < 2 * 20 * workers, _CountedTime.compared
