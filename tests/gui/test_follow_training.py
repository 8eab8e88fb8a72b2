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
from gui.window.frame import FRAME_OWN_TELEMETRY_POINTS, FRAME_TELEMETRY_POINTS
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


def test_a_minute_of_256_workers_backlog_reaches_every_worker_within_a_few_drains() -> None:
    """A window opened a minute into a live 256-worker run (32 hosts) finds 600 lines queued per
    worker and 60 samples per host: every worker has points after a few of the window's drains,
    each still as full as its budget. Before, a key's turn took its whole backlog: a drain of 2,000
    points served 3 workers, and at load 15 the window showed 61 of 256 curves after 10 s."""
    workers, hosts, lines, samples = 256, 32, 600, 60
    budget = FRAME_TELEMETRY_POINTS
    assert budget is not None
    inbox = EventInbox()
    for t in range(samples):
        for h in range(hosts):
            inbox.put(make_event("sample", float(t), None, {"host": f"gpu-{h}", "t": float(t), "gpus": []}))
    for w in range(workers):
        records = [{"step": s, "loss": 1.0} for s in range(lines)]
        inbox.put(make_event("metrics", 1.0, f"worker:{w}", {"samples": records}))
    total = workers * lines + hosts * samples * SAMPLE_POINTS
    served: set[str] = set()
    steps: dict[str, list[int]] = {}
    drains = 0
    while len(served) < workers and drains < 100:
        pending = inbox.pending()
        events, _ = inbox.drain(budget)
        drains += 1
        points = 0
        for event in events:
            if isinstance(event.payload, Metrics) and event.role:
                served.add(event.role)
                steps.setdefault(event.role, []).extend(int(r["step"]) for r in event.payload.samples)
                points += len(event.payload.samples)
            else:
                points += SAMPLE_POINTS
        assert pending == 0 or points >= min(budget, total) - SAMPLE_POINTS, (
            f"drain {drains} took {points} points with a backlog left"
        )
        total -= points
    assert len(served) == workers and drains <= 4, f"{len(served)} of {workers} workers served after {drains} drains"
    assert all(s == list(range(len(s))) for s in steps.values()), "a worker's points out of order"
