"""A past run bigger than any inbox reopens whole: every worker's curve from its first step to its
last, every state change, read from the run directory's telemetry files (not replayed per event)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cluster.spec import load
from core.controller.controller import Controller
from core.run import journal
from core.run.events import Event
from core.run.rundir import RunDir
from tests.helpers.clusters import light_cluster

pytestmark = pytest.mark.slow

WORKERS = 8
STEPS = 3000  # 8 x 3000 = 24,000 metric samples: more than the old inbox's 20,000 events


def test_a_past_run_with_more_points_than_the_inbox_held_loses_none(qtbot, tmp_path: Path):
    from gui.window.main_window import MainWindow

    spec, problems = load(light_cluster(tmp_path, workers=WORKERS, steps=STEPS, rate=2000.0))
    assert spec is not None, problems
    run = RunDir.create(spec, root=tmp_path / "runs")
    controller = Controller(spec, run)
    controller.start()
    try:
        assert controller.wait(180), "the light cluster did not finish"
    finally:
        controller.close()
    assert controller.status().result == "succeeded"
    workers = [f"worker:{i}" for i in range(WORKERS)]
    journalled = [(r["role"], r["state"]) for r in journal.iter_journal(run.path) if r.get("kind") == "role_state"]
    assert len(journalled) >= 3 * (WORKERS + 1)

    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    seen_states: list[tuple[str | None, str]] = []
    steps: dict[str, list[int]] = {w: [] for w in workers}
    dispatch = window.frame._dispatch

    def watching(event: Event) -> None:
        if event.kind == "role_state":
            seen_states.append((event.role, str(event.payload.state)))
        elif event.kind == "metrics" and event.role in steps:
            steps[event.role].extend(s["step"] for s in event.payload.samples)
        dispatch(event)

    window.frame._dispatch = watching  # type: ignore[method-assign]
    window.show()
    assert window.open_run(run.path)
    qtbot.waitUntil(lambda: all(len(s) >= STEPS for s in steps.values()), timeout=60_000)
    qtbot.waitUntil(lambda: len(seen_states) >= len(journalled), timeout=20_000)
    for worker in workers:
        assert steps[worker] == list(range(1, STEPS + 1)), worker  # every point, once, in order
        series = window.training.figures.loss[worker]
        assert series.last() is not None and series.last()[0] == STEPS
        first_t = series.points()[0][0]
        assert first_t < STEPS / 100, (worker, first_t)  # the curve starts near step 1, not half-way
    assert seen_states == journalled  # every state change, in order
    assert json.loads((run.path / "run.json").read_text())["state"] == "done"
