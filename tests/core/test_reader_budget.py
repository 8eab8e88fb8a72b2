"""Opening a run of hundreds of workers hands the views a budget of records for the whole run,
shared among its workers, not a plot's width of every worker: 256 day-long workers handed ~424,000
metrics records (1,656 each), most of the 30 s that opening such a run took, where their 256
curves share one plot (core/run/reader.py RUN_METRICS_RECORDS, core/run/skim.py share)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


FIGURES = st.fixed_dictionaries(
    {"cpu_percent": st.floats(0, 100), "rss_bytes": st.integers(0, 1 << 30), "alive": st.booleans()}
)
SAMPLE = st.fixed_dictionaries(
    {
        "roles": st.dictionaries(st.sampled_from(["worker:0", "worker:1", "ps:0"]), FIGURES, max_size=3),
        "gpus": st.lists(
            st.fixed_dictionaries(
                {
                    "index": st.integers(0, 3),
                    "utilization_gpu_percent": st.floats(0, 100),
                    "processes": st.lists(
                        st.fixed_dictionaries({"role": st.sampled_from(["worker:0", "worker:1"])}), max_size=2
                    ),
                }
            ),
            max_size=4,
        ),
    }
)


@settings(max_examples=200, deadline=None)
@given(records=st.lists(SAMPLE, max_size=30))
def test_applying_only_the_samples_with_a_role_s_newest_figures_leaves_the_views_as_all_do(
    records: list[dict[str, Any]],
) -> None:
    """A skimmed host file's samples go to the role views as only those holding some role's newest
    figures (reader._newest_figures): the views end as if each had been applied."""
    from core.cluster.spec import Task
    from core.run.reader import _newest_figures
    from core.run.role_view import RoleView, apply_sample

    def views() -> dict[str, RoleView]:
        tasks = [Task("worker", 0, "127.0.0.1", 2222), Task("worker", 1, "127.0.0.1", 2223), Task("ps", 0, "h", 1)]
        return {t.role_id: RoleView(t, Path("/nonexistent")) for t in tasks}

    every, newest = views(), views()
    for record in records:
        apply_sample(every, record)
    for record in _newest_figures(records):
        apply_sample(newest, record)
    fields = ("cpu_percent", "rss_bytes", "threads", "gpus", "gpu_utilization_percent")
    for role in every:
        assert [getattr(every[role], f) for f in fields] == [getattr(newest[role], f) for f in fields], role
