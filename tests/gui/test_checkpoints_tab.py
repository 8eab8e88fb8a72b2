"""The Training tab shows the run's checkpoints: a marker on the step axis of each plot for every
checkpoint in the directory (the one a restart restores labelled) and a short list beside the
plots, live as a real (light) cluster writes them, and again when the finished run is reopened."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.cluster.spec import load
from core.run.events import CheckpointsChanged, RecoveryChanged
from core.telemetry.checkpoints import Checkpoint
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import TRAINERS

CLUSTER = """
strategy = "between_graph"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=0", "--rate_hz=20",
           "--checkpoint_dir={{run_dir}}/checkpoints", "--checkpoint_every=20"]
stop_grace_s = 2
[jobs.ps]
tasks = ["127.0.0.1:{p0}"]
[jobs.worker]
tasks = ["127.0.0.1:{p1}", "127.0.0.1:{p2}"]
"""


def shown(panel) -> tuple[list[float], list[str]]:  # type: ignore[no-untyped-def]
    """The steps marked on the loss plot, and the list's lines."""
    steps = panel.checkpoints.marker_steps(panel.loss_plot)
    lines = [panel.checkpoints.list.item(i).text() for i in range(panel.checkpoints.list.count())]
    return steps, lines


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_live_run_shows_its_checkpoints_as_markers_and_a_list_and_again_when_reopened(qtbot, tmp_path: Path) -> None:
    from gui.window.main_window import MainWindow

    p0, p1, p2 = free_ports(3)
    cluster = tmp_path / "c.toml"
    cluster.write_text(CLUSTER.format(trainers=TRAINERS, p0=p0, p1=p1, p2=p2))
    spec, problems = load(cluster)
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    window.launch()
    panel = window.training
    assert window.tabs.currentWidget() is panel
    qtbot.waitUntil(lambda: len(shown(panel)[0]) >= 3, timeout=90_000)
    steps, lines = shown(panel)
    figures = panel.checkpoints.figures
    assert steps == [float(c.step or 0) for c in figures.listed()]
    assert all(s % 20 == 0 for s in steps) and steps == sorted(steps)
    assert panel.checkpoints.heading.text() == f"Checkpoints ({len(figures.listed())})"
    assert panel.checkpoints.heading.toolTip().endswith("(from worker:0's --checkpoint_dir)")
    assert lines[0].startswith(f"step {int(steps[-1]):,} · ") and lines[0].endswith("◀")  # newest first
    # The same markers on the step-time plot, which shares the step axis.
    assert panel.checkpoints.marker_steps(panel.time_plot) == steps
    run_path = window.source.path if window.source is not None else None
    window.controller.stop_all()
    qtbot.waitUntil(lambda: window.controller.done, timeout=60_000)
    assert_nothing_left([p0, p1, p2], marker=str(tmp_path))

    # The run reopened from its directory in another window: the journal's checkpoints events draw the same.
    last = shown(panel)
    reopened = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(reopened)
    reopened.show()
    assert run_path is not None and reopened.open_run(run_path)
    qtbot.waitUntil(lambda: shown(reopened.training)[0] == last[0], timeout=60_000)
    assert len(shown(reopened.training)[1]) == len(last[1]) >= 3


def test_the_panel_keeps_to_the_directorys_checkpoints_and_shows_hostile_names_as_text(qtbot) -> None:
    from gui.run.tabs.training import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.show()

    def saved(step: int, name: str | None = None) -> Checkpoint:
        return Checkpoint(name or f"ckpt-{step}", step, 1_795_000_000.0 + step, 1536)

    hostile = "ckpt-{value}\x1b]0;owned\x07-40"
    panel.add_checkpoints(
        CheckpointsChanged("/runs/r/ckpt", "a flag", (saved(10), saved(20), saved(40, hostile)), (), hostile)
    )
    panel.refresh(force=True)
    steps, lines = shown(panel)
    assert steps == [10.0, 20.0, 40.0] and len(lines) == 3 and lines[0].endswith("1.5 KiB ◀")
    labels = [
        line.label.format for line in panel.checkpoints._markers[id(panel.loss_plot)][1] if hasattr(line, "label")
    ]
    assert labels == ["ckpt-{{value}}\x1b]0;owned\x07-40"]  # shown as text, never a format code
    # TensorFlow deleted the oldest: its marker and row go; a problem with the state file is said.
    panel.add_checkpoints(
        CheckpointsChanged("/runs/r/ckpt", "a flag", (saved(60),), ("ckpt-10",), "ckpt-60", "line 3: damaged")
    )
    panel.refresh(force=True)
    steps, lines = shown(panel)
    assert steps == [20.0, 40.0, 60.0] and lines[0].startswith("step 60 · ")
    assert panel.checkpoints.problem.text() == "line 3: damaged" and not panel.checkpoints.problem.isHidden()
    # A recovery that resumed from ckpt-40 is marked where it resumed, with the checkpoint's name;
    # the deleted ckpt-10 stays marked, faintly: the run saved it there.
    recovered = RecoveryChanged("recovered", 1, 3, "ps:0 killed by SIGKILL", resumed_step=40, checkpoint="ckpt-40")
    panel.add_checkpoints(recovered)
    panel.refresh(force=True)
    marks = panel.checkpoints.marks_on(panel.loss_plot)
    assert marks == [(10.0, "gone"), (20.0, "kept"), (40.0, "kept"), (60.0, "latest"), (40.0, "resumed")], marks
    resumed = panel.checkpoints._markers[id(panel.loss_plot)][1][-1]
    assert resumed.label.format == "resumed from ckpt-40" and resumed.label.isVisible()
    panel.clear()
    panel.refresh(force=True)
    assert shown(panel) == ([], []) and panel.checkpoints.heading.text() == "Checkpoints: none found yet"
