"""A real controller started on a cluster file in a test, with the events it publishes kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def started_controller(cluster: Path, run_dir: Path, kinds: tuple[str, ...]) -> tuple[Any, list[Any]]:
    """The started Controller of ``cluster`` writing ``run_dir``, and the list its events of
    ``kinds`` are appended to as they come (the caller closes the controller)."""
    from core.cluster.spec import load
    from core.controller.controller import Controller
    from core.run.events import Event
    from core.run.rundir import RunDir

    spec, problems = load(cluster)
    assert spec is not None, problems
    controller = Controller(spec, RunDir.create(spec, path=run_dir))
    seen: list[Event] = []
    controller.subscribe(lambda e: seen.append(e) if e.kind in kinds else None)
    controller.start()
    return controller, seen
