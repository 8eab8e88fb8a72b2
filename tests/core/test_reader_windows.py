"""Opening a run of hundreds of workers takes each skimmed metrics file into its role's rate window
(and straggler readings) from its last seconds only: every record of the run went through both
before, about a third of the reader's first pass over a 256-worker day-long run, where the window
keeps its last 30 s. The figures the status shows are those of the whole file read line by line,
as a live run ends with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.run import reader as reader_module
from core.run.reader import WINDOWS_HISTORY_S, RunReader, _windows_start
from core.telemetry.step_window import StepWindow
from core.telemetry.worker_stats import WorkerStats
from tests.helpers.past_run import START_T, generate_run, metrics_text
from tests.helpers.waits import wait_for

WORKERS, SECONDS = 256, 20_000  # compact: ~380 KB of metrics a worker, over the size that is skimmed


@pytest.mark.timeout(600)
def test_a_256_worker_run_feeds_its_rate_windows_the_last_seconds_with_the_live_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = generate_run(tmp_path / "run", workers=WORKERS, seconds=SECONDS, hosts=0, compact=True)
    taken = [0]
    real_take = StepWindow.take

    def counted(self: StepWindow, t: float, step: float | None, printed: float | None) -> None:
        taken[0] += 1
        real_take(self, t, step, printed)

    monkeypatch.setattr(StepWindow, "take", counted)
    reader = RunReader(run)
    workers = [f"worker:{w}" for w in range(WORKERS)]

    def statuses() -> dict[str, Any]:
        return {r.role: r for r in reader.status().roles if r.role in workers}

    reader.start()
    try:
        wait_for(
            lambda: {s.step for s in statuses().values()} == {SECONDS} and len(statuses()) == WORKERS,
            300,
            "every worker's last step in the status",
        )
        shown = statuses()
    finally:
        reader.close()
    # Was every record the reader handed on: 101,888 (398 a worker) at this size.
    assert taken[0] <= WORKERS * (WINDOWS_HISTORY_S + 2), taken[0]
    assert taken[0] < reader_module.RUN_METRICS_RECORDS // 4
    # The live figures: one worker's whole file, every line in order.
    live = WorkerStats()
    live.add_records([json.loads(line) for line in metrics_text(SECONDS).splitlines()])
    end = START_T + SECONDS - 1  # the run's newest record: where its rate window ends
    for worker, status in shown.items():
        assert status.window == live.window.sums(end), worker
        assert (status.step_time_s, status.steps_per_sec, status.loss) == (
            live.step_time_s,
            live.steps_per_sec,
            live.loss,
        ), worker


def _records(gaps: list[float], steps: list[int], printed: list[float | None]) -> list[dict[str, Any]]:
    """Metrics records in time order: each ``gap`` seconds after the last (0: the same output batch)."""
    t, records = 1000.0, []
    for gap, step, step_time in zip(gaps, steps, printed, strict=False):
        t += gap
        fields = {"t": t, "step": step, "loss": 1.0, "step_time_s": step_time, "steps_per_sec": None}
        records.append(fields | {"extra": {}, "source": "classic"})
    return records


LINE = st.tuples(
    st.sampled_from([0.0, 0.1, 0.5, 1.0, 1.7, 3.0]),  # seconds after the last line (0: the same batch)
    st.integers(-3, 20),  # the step's advance (negative: a restarted worker's going back)
    st.one_of(st.none(), st.floats(0.01, 2.0)),  # the step time printed on it
)


@settings(max_examples=100, deadline=None)
@given(lines=st.lists(LINE, min_size=1, max_size=100), spaced_every=st.integers(1, 50), tail=st.integers(0, 140))
def test_a_skimmed_file_s_window_from_its_last_seconds_is_the_whole_file_s(
    lines: list[tuple[float, int, float | None]], spaced_every: int, tail: int
) -> None:
    """A file read line by line (a live run), and the same file skimmed (a few records spaced over
    it, then its last lines whole) with the window fed from :func:`_windows_start`: the same sums
    at its end, whenever the consecutive lines reach back past the window."""
    steps, step = [], 0
    for _gap, advance, _printed in lines:
        step = max(0, step + advance)
        steps.append(step)
    gaps, printed = [gap for gap, _a, _p in lines], [p for _g, _a, p in lines]
    records = _records([1.0] * 40 + gaps, [0] * 40 + steps, [None] * 40 + printed)
    first_tail = max(0, len(records) - tail)
    newest = records[-1]["t"]
    if not any(r["t"] < newest - WINDOWS_HISTORY_S for r in records[first_tail:]):
        first_tail = max(i for i, r in enumerate(records) if r["t"] < newest - WINDOWS_HISTORY_S)
    skimmed = records[:first_tail:spaced_every]
    live, read = WorkerStats(), WorkerStats()
    live.add_records(records)
    read.add_records(
        skimmed + records[first_tail:], windows_from=_windows_start(skimmed + records[first_tail:], len(skimmed))
    )
    for end in (newest, newest + 0.5, newest + 1.0, newest + 12.0):
        assert read.window.sums(end) == live.window.sums(end), end
