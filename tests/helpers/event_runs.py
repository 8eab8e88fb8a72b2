"""Finished runs with TensorBoard event files, fast: copies of a recorded run (tests/fixtures/
run_c23e87e) whose worker-0 gets a real event file written by the tensorboard package."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from tests.helpers.project import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "run_c23e87e"
FIXTURE_NAME = "light-old"  # the recorded run's name, in its cluster.toml and run.json


def run_with_events(path: Path, name: str = FIXTURE_NAME) -> Path:
    """A copy of the recorded run at ``path``, named ``name``, with worker-0's event file (a
    ``loss`` scalar at steps 0-2)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    shutil.copytree(FIXTURE, path)
    if name != FIXTURE_NAME:
        spec = path / "cluster.toml"
        spec.write_text(spec.read_text().replace(f'name = "{FIXTURE_NAME}"', f'name = "{name}"', 1))
        info = json.loads((path / "run.json").read_text())
        (path / "run.json").write_text(json.dumps({**info, "id": path.name, "name": name}))
    writer = EventFileWriter(str(path / "roles" / "worker-0" / "tensorboard"))
    for step in range(3):
        value = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])))
    writer.close()
    return path
