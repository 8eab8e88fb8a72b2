"""The test Slurm itself: a job runs on it and its daemons answer."""

from __future__ import annotations

import os
import subprocess

from tests.helpers.slurm_cluster import SlurmCluster


def test_srun_runs_a_task_with_its_exit_code(slurm: SlurmCluster) -> None:
    env = {**os.environ, **slurm.env}
    done = subprocess.run(
        ["srun", "--ntasks=1", "sh", "-c", "hostname -s >/dev/null; echo on-slurm; exit 3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.strip() == "on-slurm"
    assert done.returncode == 3
