"""The window runs a cluster on Slurm like any other, and its header says which job and nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.cluster.spec import load
from core.slurm.client import SlurmClient
from tests.helpers.slurm_cluster import SlurmCluster, left_in_squeue, slurm_record, write_slurm_cluster
from tests.helpers.ssh_server import assert_nothing_left_under

pytestmark = pytest.mark.slow


def test_the_window_shows_the_slurm_job_and_its_nodes_and_stop_all_cancels_it(
    qtbot, slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path
) -> None:
    from gui.window.main_window import MainWindow
    from tests.helpers.widgets import cell

    path, ports = write_slurm_cluster(tmp_path, slurm, steps=0, trainer="light")  # the window and Slurm, not TensorFlow
    spec, problems = load(path)
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    window.controls.launch.trigger()
    qtbot.waitUntil(
        lambda: all(cell(window, r, "State") == "running" for r in ("ps:0", "worker:0", "worker:1")), timeout=120_000
    )
    job_id = slurm_record(window.controller.run.path)["job_id"]
    qtbot.waitUntil(lambda: f"Slurm job {job_id} on {slurm.node}" in window.controls.phase_label.text(), timeout=5_000)
    window.controls.stop_all.trigger()
    qtbot.waitUntil(lambda: window.controller.done, timeout=60_000)
    qtbot.waitUntil(lambda: "cluster done" in window.controls.phase_label.text(), timeout=5_000)
    # The allocation is cancelled after the controller is done, on its thread.
    client = SlurmClient(env=slurm.env)
    qtbot.waitUntil(lambda: left_in_squeue(client, job_id).strip() == "", timeout=30_000)
    assert_nothing_left_under(tmp_path, ports)
