"""A window following a run through its directory gets every worker's steps onto the Training tab
while the hosts' samples still queue: the inbox serves its keys in turns, so one host's backlog of
samples (each weighing 8 GPUs' series) never keeps the workers' metrics waiting behind it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from core.run.events import Event, Metrics
from core.run.inbox import SAMPLE_POINTS, EventInbox
from core.run.reader import RunReader
from core.views.training import TrainingFigures
from gui.window.frame import FRAME_OWN_TELEMETRY_POINTS
from tests.helpers.events import make_event
from tests.helpers.past_run import generate_run

WORKERS = 32
HOSTS = 32


def test_a_hosts_sample_backlog_does_not_hold_back_a_workers_metrics() -> None:
    inbox = EventInbox()
    for t in range(1000):  # one host's backlog: 16,000 points' worth
        inbox.put(make_event("sample", float(t), None, {"host": "gpu-0", "t": float(t), "gpus": []}))
    inbox.put(make_event("metrics", 1.0, "worker:0", {"samples": [{"step": 1}]}))
    kinds: list[str] = []
    for _ in range(2):
        events, _ = inbox.drain(FRAME_OWN_TELEMETRY_POINTS)
        kinds.extend(e.kind for e in events)
    assert "metrics" in kinds, "a worker's one step waited behind a host's thousand samples"


def test_a_sample_heavier_than_what_is_left_lets_metrics_use_the_rest() -> None:
    inbox = EventInbox()
    inbox.put(make_event("metrics", 1.0, "worker:1", {"samples": [{"step": s} for s in range(SAMPLE_POINTS - 1)]}))
    inbox.put(make_event("sample", 0.0, None, {"host": "gpu-0", "t": 0.0, "gpus": []}))
    inbox.put(make_event("metrics", 1.0, "worker:0", {"samples": [{"step": 1}]}))
    events, _ = inbox.drain(SAMPLE_POINTS)
    assert sorted(str(e.role) for e in events if e.kind == "metrics") == ["worker:0", "worker:1"]


@pytest.mark.timeout(120)
def test_training_figures_fed_through_the_reader_get_every_worker_soon(tmp_path: Path) -> None:
    """The run directory as a launcher writes it (compact telemetry, one host per loopback address,
    as scripts/sim_cluster.py lays out 256 workers over 32 hosts), read by the window's reader into
    its inbox and drained in the frame's own slices: every worker the roles table shows steps for
    has points on the Training figures within a few rounds of the inbox's keys. Before, the 32
    hosts' samples, queued first, were served first at every drain until all were taken (thousands
    of drains), and the Training tab said "No step from any worker yet"."""
    run = generate_run(tmp_path / "run", workers=WORKERS, seconds=600, hosts=HOSTS, compact=True)
    reader = RunReader(run)
    inbox = EventInbox()
    published: set[str] = set()
    all_published = threading.Event()

    def take(event: Event) -> None:
        inbox.put(event)
        if isinstance(event.payload, Metrics) and event.role:
            published.add(event.role)
            if len(published) == WORKERS:
                all_published.set()

    reader.subscribe(take)
    reader.start()
    try:
        assert all_published.wait(90), f"the reader published metrics for {len(published)} of {WORKERS} workers"
        figures = TrainingFigures()
        keys = WORKERS + HOSTS  # the inbox's telemetry keys: a role's metrics, a host's samples
        drains = 0
        deadline = time.monotonic() + 60
        while len(figures.loss) < WORKERS and drains < 4 * keys and time.monotonic() < deadline:
            events, _ = inbox.drain(FRAME_OWN_TELEMETRY_POINTS)
            drains += 1
            for event in events:
                if isinstance(event.payload, Metrics) and event.role:
                    figures.add_samples(event.role, list(event.payload.samples))
    finally:
        reader.close()
    assert len(figures.loss) == WORKERS, (
        f"after {drains} drains of the frame's slice, {len(figures.loss)} of {WORKERS} workers had a loss curve"
    )
    assert all(len(series) > 0 for series in figures.loss.values())
