"""A derived step time is measured between output batches' ends (their lines share the time the
agent read them), never from a batch's first line back to the previous batch's last."""

from __future__ import annotations

import pytest

from core.telemetry.worker_stats import WorkerStats
from core.views.training import TrainingFigures


def _record(t: float, step: int) -> dict[str, object]:
    return {
        "t": t,
        "step": step,
        "loss": 1.0,
        "step_time_s": None,
        "steps_per_sec": None,
        "extra": {},
        "source": "classic",
    }


def _reads(period_s: float, read_every_s: float, until_s: float, *, held: tuple[float, float] | None = None):
    """Batches of a trainer stepping every ``period_s``, read every ``read_every_s`` (not while
    ``held``: from its start to its end nothing is read, then all of it at once)."""
    batches: list[list[dict[str, object]]] = []
    step, t, read_at = 0, 0.0, read_every_s
    while read_at <= until_s:
        if held is not None and held[0] <= read_at < held[1]:
            read_at = held[1]
        lines = []
        while t + period_s <= read_at:
            t += period_s
            step += 1
            lines.append(_record(read_at, step))
        batches.append(lines)
        read_at = round(read_at + read_every_s, 6)
    return batches


def test_steady_reads_of_several_lines_give_the_trainer_s_step_time() -> None:
    stats = WorkerStats()
    for batch in _reads(0.05, 0.25, 10.0):  # 5 lines a read
        stats.add_records(batch)
    # Before: a batch's first line over the previous batch's last: 0.25 s for a 50 ms step.
    assert stats.step_time_s == pytest.approx(0.05, rel=0.15)


def test_a_burst_is_one_batch_measured_to_its_end() -> None:
    figures = TrainingFigures()
    stats = WorkerStats()
    for batch in _reads(0.3, 0.25, 30.0, held=(10.0, 17.0)):  # 7 s of lines read at once
        stats.add_records(batch)
        figures.add_samples("worker:0", batch)
        assert stats.step_time_s is None or stats.step_time_s == pytest.approx(0.3, rel=0.2), batch[-1:]
    _steps, shown_ms = figures.step_time["worker:0"].arrays()
    # Before: the burst's 23 lines were drawn at 7,000 ms, the hold taken as one step.
    assert max(shown_ms) == pytest.approx(300, rel=0.2) and min(shown_ms) == pytest.approx(300, rel=0.2)


def test_measured_over_two_seconds_once_there_are_two_seconds_of_batches() -> None:
    stats = WorkerStats()
    stats.add_records([_record(100.0, 1), _record(100.0, 2)])
    assert stats.step_time_s is None
    stats.add_records([_record(101.0, 12)])
    assert stats.step_time_s == pytest.approx(0.1)  # its first second: from its oldest batch end
    stats.add_records([_record(101.5, 22)])
    assert stats.step_time_s == pytest.approx(0.075)  # (101.5 - 100) / (22 - 2)
    stats.add_records([_record(103.25, 32)])
    assert stats.step_time_s == pytest.approx(0.1125)  # (103.25 - 101) / (32 - 12): 2 s back and more
    stats.add_records([_record(104.0, 5)])  # a restart: started afresh, the last figure kept
    assert stats.step_time_s == pytest.approx(0.1125)
    stats.add_records([_record(105.0, 15)])
    assert stats.step_time_s == pytest.approx(0.1)
