"""A stop is not queued behind the output backlog: with the controller far behind its agents'
output, stop_all ends every role and the run without taking that backlog one chunk at a time,
each role's exit still comes after its own last lines, and every step line becomes a metric."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.cluster.spec import load
from core.controller.controller import Controller
from core.run.events import Event, EventKind, RoleOutput, RoleStateChanged
from core.run.journal import iter_jsonl
from core.run.rundir import RunDir
from core.run.status import TERMINAL
from tests.helpers.procs import with_marker
from tests.helpers.project import ROOT
from tests.helpers.waits import wait_for

WORKERS = 6
BACKLOG = 200  # agents' events waiting when the stop is asked


@pytest.mark.timeout(240)
def test_a_stop_ends_the_run_without_taking_the_output_backlog_event_by_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = tmp_path / "sim.toml"
    generator = [sys.executable, str(ROOT / "scripts" / "sim_cluster.py")]
    subprocess.run(
        [*generator, "--workers", str(WORKERS), "--hosts", "2", "--rate-hz", "20", str(cluster)],
        check=True,
        capture_output=True,
    )
    monkeypatch.setenv("TOWERDECK_SIMULATE", "1")  # the agents the controller starts simulate their roles
    spec, problems = load(cluster)
    assert spec is not None, problems
    controller = Controller(spec, RunDir.create(spec, root=tmp_path / "runs"))
    run_dir = controller.run.path
    release = threading.Event()
    events: list[Event] = []

    def held_listener(event: Event) -> None:
        # The controller's thread held at its first output, as a controller far behind its agents:
        # their events pile up behind it (the count, not the time, says when there are enough).
        if event.kind == EventKind.ROLE_OUTPUT and threading.current_thread().name == "controller":
            release.wait(120)
        events.append(event)

    controller.subscribe(held_listener)
    controller.start()
    try:
        wait_for(lambda: controller.backlog() >= BACKLOG, 120, f"{BACKLOG} events queued behind the controller")
        stopping = controller.stop_all()
        asked_at = len(events)
        # What the roles had printed when the stop was asked: the backlog is (nearly all) of it.
        printed = {
            log.parent.name.replace("-", ":"): log.stat().st_size for log in run_dir.glob("roles/*/attempt-1.log")
        }
        release.set()
        assert stopping.result(60) == "stopping every role"
        assert controller.wait(120), "the run did not end"
    finally:
        release.set()
        controller.close()

    after = events[asked_at:]
    ended = [i for i, e in enumerate(after) if isinstance(e.payload, RoleStateChanged) and e.payload.state in TERMINAL]
    assert len(ended) == WORKERS + 1, [e.role for e in after if isinstance(e.payload, RoleStateChanged)]
    backlog_shown = [
        e
        for e in after[: max(ended)]
        if isinstance(e.payload, RoleOutput)
        and e.payload.offset is not None
        and e.payload.offset < printed.get(str(e.role), 0)
    ]
    # One event at a time, every queued chunk was published before the exits behind it; taken by
    # role while stopping, a few events a role (what was printed after the stop is not counted).
    assert len(backlog_shown) < BACKLOG / 4, f"{len(backlog_shown)} events of the backlog shown before the last exit"

    for role in controller.status().roles:
        mine = [e for e in events if e.role == role.role]
        exit_at = next(
            i for i, e in enumerate(mine) if isinstance(e.payload, RoleStateChanged) and e.payload.state in TERMINAL
        )
        shown = [e.payload for e in mine if isinstance(e.payload, RoleOutput)]
        assert all(not isinstance(e.payload, RoleOutput) for e in mine[exit_at:]), f"{role.role}: output after its exit"
        # Its last lines, shown with its exit, are the end of its log: every byte was read first.
        log = run_dir / "roles" / role.role.replace(":", "-") / "attempt-1.log"
        last = shown[-1]
        assert last.offset is not None and last.offset + len(last.text.encode()) == log.stat().st_size, role.role
        # Nothing lost: every step line in its log became a metrics record (the backlog was parsed).
        lines = sum(line.startswith("Step:") for line in log.read_text().splitlines())
        metrics = log.parent / "metrics.jsonl"
        recorded = {r["step"] for r in iter_jsonl(metrics) if isinstance(r.get("step"), int)} if lines else set()
        assert len(recorded) == lines, f"{role.role}: {lines} step lines, {len(recorded)} steps recorded"
    assert not with_marker(str(run_dir)), "an agent outlived the run"
