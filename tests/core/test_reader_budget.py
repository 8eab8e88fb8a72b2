"""Opening a run of hundreds of workers hands the views a budget of records for the whole run,
shared among its workers, not a plot's width of every worker: 256 day-long workers handed ~424,000
metrics records (1,656 each), most of the 30 s that opening such a run took, where their 256
curves share one plot (core/run/reader.py RUN_METRICS_RECORDS, core/run/skim.py share)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from core.run import reader as reader_module
from core.run.events import Event, Metrics
from core.run.reader import RunReader
from tests.helpers.past_run import generate_run
from tests.helpers.waits import wait_for

WORKERS, SECONDS = 256, 20_000  # compact: ~380 KB of metrics a worker, over the size that is skimmed


@pytest.mark.timeout(600)
def test_a_256_worker_run_hands_its_views_the_run_s_budget_whole_span_and_tail(tmp_path: Path) -> None:
    run = generate_run(tmp_path / "run", workers=WORKERS, seconds=SECONDS, hosts=0, compact=True)
    got: dict[str, list[dict[str, Any]]] = {}

    def take(event: Event) -> None:
        if isinstance(event.payload, Metrics) and event.role is not None:
            got.setdefault(event.role, []).extend(event.payload.samples)

    reader = RunReader(run)
    reader.subscribe(take)

    def final_steps() -> set[int | None]:
        return {r.step for r in reader.status().roles if r.role.startswith("worker")}

    reader.start()
    workers = [f"worker:{w}" for w in range(WORKERS)]
    try:
        wait_for(
            lambda: all(got.get(w) and got[w][-1]["step"] == SECONDS for w in workers) and final_steps() == {SECONDS},
            300,
            "every worker's metrics to be read to its last step, and shown in the status",
        )
    finally:
        reader.close()
    total = sum(len(records) for records in got.values())
    # Was ~264,000 (~1,030 a worker: every key frame and a 16 KB tail of ~840 lines).
    assert total <= reader_module.RUN_METRICS_RECORDS, total
    for worker in workers:
        steps = [r["step"] for r in got[worker]]
        assert steps == sorted(set(steps)), worker  # in order, none twice
        assert steps[0] <= SECONDS / 100 and steps[-1] == SECONDS  # the whole span
        tail = list(itertools.takewhile(lambda s: s > SECONDS - 100, reversed(steps)))
        assert tail == list(range(SECONDS, SECONDS - 100, -1)), worker  # the newest lines, every one
