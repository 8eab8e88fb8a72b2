"""One meaning of steps/s (core.views.rates): the cluster's global steps/s, each worker's own
batches/s and examples/s, defined once, over the run's last 30 s, whatever reads the records."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.cluster.batch_size import batch_size_of
from core.cluster.spec import Task
from core.run.role_view import RoleView, cluster_status
from core.run.status import ClusterPhase
from core.telemetry.step_window import RATE_WINDOW_S, StepSums, StepWindow
from core.views.rates import RateInput, cluster_text, label, rate_series, rate_text, role_text, step_rates


def record(t: float, step: int | None, step_time_s: float | None = None) -> dict[str, Any]:
    """A metrics.jsonl record, as the controller writes one per parsed line."""
    return {
        "t": t,
        "step": step,
        "loss": 1.0,
        "step_time_s": step_time_s,
        "steps_per_sec": None,
        "extra": {},
        "source": "test",
    }


def window_of(records: list[dict[str, Any]]) -> StepWindow:
    window = StepWindow()
    for r in records:
        window.take(r["t"], r["step"], r["step_time_s"])
    return window


def shared_step_run() -> dict[str, list[dict[str, Any]]]:
    """Two between-graph workers for 60 s: the global step advances 100 a second; each prints it
    every 0.5 s with its own mean step time (worker:0 30 ms, worker:1 60 ms)."""
    runs: dict[str, list[dict[str, Any]]] = {"worker:0": [], "worker:1": []}
    for i in range(120):
        t = 1000.0 + i * 0.5
        runs["worker:0"].append(record(t, int((t - 1000.0) * 100), 0.030))
        runs["worker:1"].append(record(t + 0.25, int((t + 0.25 - 1000.0) * 100), 0.060))
    return runs


def inputs(runs: dict[str, list[dict[str, Any]]], batch_size: int | None = None) -> list[RateInput]:
    windows = {role: window_of(rs) for role, rs in runs.items()}
    end = max(w.last_t for w in windows.values() if w.last_t is not None)
    return [RateInput(role, "worker", w.sums(end), batch_size) for role, w in windows.items()]


def test_between_graph_global_steps_are_the_shared_step_and_batches_each_worker_s_own() -> None:
    rates = step_rates(inputs(shared_step_run(), batch_size=32), strategy="between_graph")
    assert rates.global_steps_per_s == pytest.approx(100.0, rel=0.01)
    assert rates.of("worker:0") == pytest.approx(1 / 0.030) and rates.of("worker:1") == pytest.approx(1 / 0.060)
    assert rates.examples_per_s == pytest.approx(3200.0, rel=0.01)  # a global step is one worker's batch
    assert rates.role_examples_per_s["worker:0"] == pytest.approx(32 / 0.030)
    assert cluster_text(rates) == "100 global steps/s · 3200 examples/s (mean over the last 30 s)"
    assert role_text(rates, "worker:1") == "16.7 batches/s · 533 examples/s (its own updates, mean over the last 30 s)"


def test_a_shared_step_without_printed_times_says_no_batches_rather_than_the_cluster_s() -> None:
    runs = {role: [dict(r, step_time_s=None) for r in rs] for role, rs in shared_step_run().items()}
    rates = step_rates(inputs(runs, batch_size=32), strategy="between_graph")
    assert rates.global_steps_per_s == pytest.approx(100.0, rel=0.01)
    assert rates.of("worker:0") is None and rate_text(rates.of("worker:0")) == "-"
    assert rates.examples_per_s == pytest.approx(3200.0, rel=0.01)
    # Each worker counting its own steps (custom): the cluster's is their sum, each its own.
    own = step_rates(inputs(runs, batch_size=32), strategy="custom")
    assert own.of("worker:0") == pytest.approx(100.0, rel=0.01)
    assert own.global_steps_per_s == pytest.approx(200.0, rel=0.01)
    assert own.examples_per_s == pytest.approx(6400.0, rel=0.01)
    # Mirrored: every worker prints the same synchronous step and makes one batch per step.
    mirrored = step_rates(inputs(runs, batch_size=32), strategy="multi_worker_mirrored")
    assert mirrored.global_steps_per_s == pytest.approx(100.0, rel=0.01)
    assert mirrored.of("worker:1") == pytest.approx(100.0, rel=0.01)
    assert mirrored.examples_per_s == pytest.approx(6400.0, rel=0.01)


def test_only_the_last_30_s_count_and_a_restart_adds_no_steps() -> None:
    # 60 s at 10 steps a second, then a restart from step 0 at 20 steps a second for 40 s.
    records = [record(float(i) / 10, i) for i in range(600)]
    records += [record(60.0 + i / 20, i) for i in range(800)]
    window = window_of(records)
    assert window.last_t is not None
    sums = window.sums(window.last_t)
    assert sums.steps / sums.steps_s == pytest.approx(20.0, rel=0.01)
    assert RATE_WINDOW_S - 1 <= sums.steps_s <= RATE_WINDOW_S
    assert label("global steps/s") == "global steps/s (30 s)"


def test_batch_size_is_read_from_the_command() -> None:
    assert batch_size_of(["python", "t.py", "--batch_size=64"]) == 64
    assert batch_size_of(["python", "t.py", "--batch-size", "8", "--lr=1"]) == 8
    assert batch_size_of(["python", "t.py", "--batch_size=abc"]) is None
    assert batch_size_of(["python", "t.py", "--batch_size"]) is None
    assert batch_size_of(["python", "t.py", "--batch_sizes=3"]) is None


_records = st.lists(
    st.tuples(
        st.floats(0.0, 0.4, allow_nan=False),  # the time since the record before
        st.integers(-3, 40),  # the step's change (a restart goes back)
        st.one_of(st.none(), st.floats(0.001, 1.0)),  # a printed step time
        st.booleans(),  # a line with no step
    ),
    max_size=400,
)


def _records_of(raw: list[tuple[float, int, float | None, bool]], start: float) -> list[dict[str, Any]]:
    out, t, step = [], start, 0
    for dt, dstep, printed, no_step in raw:
        t += dt
        step = max(0, step + dstep)
        out.append(record(t, None if no_step else step, printed))
    return out


@settings(max_examples=60, deadline=None)
@given(a=_records, b=_records, strategy=st.sampled_from(["between_graph", "multi_worker_mirrored", "custom"]))
def test_every_reader_of_the_same_records_gives_the_same_figures(
    a: list[tuple[float, int, float | None, bool]],
    b: list[tuple[float, int, float | None, bool]],
    strategy: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The live status (a RoleView per role, as the controller and a reopened run keep them) and
    the compare plot's series (records merged by time) end on the same figures."""
    runs = {"worker:0": _records_of(a, 500.0), "worker:1": _records_of(b, 503.0)}
    path = tmp_path_factory.mktemp("run")
    views = {role: RoleView(Task("worker", int(role[-1]), "127.0.0.1", 2222), path) for role in runs}
    for role, rs in runs.items():
        views[role].add_metrics(rs)
    status = cluster_status(ClusterPhase.DONE, None, "", views=views.values(), now=0.0)
    live = step_rates(
        (RateInput(r.role, r.job, r.window, 16) for r in status.roles),
        strategy=strategy,
    )
    series = rate_series(runs, strategy=strategy, batch_size={r: 16 for r in runs})
    if not series:
        assert live.global_steps_per_s is None
        return
    assert series[-1].rates == live
    for figure in (live.global_steps_per_s, live.examples_per_s, *live.batches_per_s.values()):
        assert figure is None or (math.isfinite(figure) and figure >= 0)


def test_step_sums_survive_json_and_refuse_damage() -> None:
    sums = StepSums(steps=10.0, steps_s=2.0, timed=3, timed_s=0.3, last_t=5.0)
    assert StepSums.from_json(sums.to_json()) == sums
    assert StepSums.from_json({"steps": "x"}) is None and StepSums.from_json([1]) is None
    assert StepSums.from_json({**sums.to_json(), "steps": math.inf}) is None


def test_rate_text_is_one_format() -> None:
    assert [rate_text(v) for v in (None, math.nan, 0.5, 12.34, 101.9, 3456.7)] == [
        "-",
        "-",
        "0.50",
        "12.3",
        "102",
        "3457",
    ]


def test_a_role_with_no_records_is_no_figure(tmp_path: Path) -> None:
    rates = step_rates([RateInput("worker:0", "worker", None), RateInput("ps:0", "ps", None)], strategy="between_graph")
    assert rates.global_steps_per_s is None and rates.examples_per_s is None
    assert "ps:0" not in rates.batches_per_s and cluster_text(rates) == ""
