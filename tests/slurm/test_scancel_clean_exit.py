"""Slurm ending a job whose trainers exit 0 on SIGTERM: what
``PreemptionCheckpointHandler``'s save-and-exit does, and the light trainer too. Such an exit
looks like a worker that finished; only Slurm can say it was its doing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.slurm.client import SlurmClient
from tests.helpers.cli_process import Cli
from tests.helpers.slurm_cluster import SlurmCluster, left_in_squeue, slurm_record, write_slurm_cluster
from tests.helpers.ssh_server import assert_nothing_left_under, kill_strays
from tests.helpers.waits import wait_for

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_scancel_of_trainers_that_exit_0_on_sigterm_says_cancelled_by_slurm_not_succeeded(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path
) -> None:
    """Before: every role read "succeeded (exit 0)" and the run "succeeded", exit code 0."""
    path, ports = write_slurm_cluster(tmp_path, slurm, steps=0, trainer="light")
    run_dir = tmp_path / "run"
    cli = Cli("launch", str(path), "--run-dir", str(run_dir))
    try:
        log = run_dir / "roles" / "worker-1" / "attempt-1.log"
        wait_for(lambda: log.is_file() and "Step: 3," in log.read_text(), 180, "worker:1 stepping")
        job_id = slurm_record(run_dir)["job_id"]
        client = SlurmClient(env=slurm.env)
        client.run(["scancel", job_id])  # someone else's scancel (an admin, a preemption script)
        code, out = cli.finish(120)
    finally:
        cli.end()
    assert code != 0, out
    info = json.loads((run_dir / "run.json").read_text())
    assert info["reason"] == f"cancelled by Slurm (job {job_id})", info
    assert info["result"] != "succeeded", info
    ends = [line for line in out.splitlines() if line.startswith(("  ps:0", "  worker:"))]
    assert len(ends) == 3 and all("cancelled by Slurm" in line for line in ends), out
    assert "succeeded" not in "\n".join(ends), out
    assert left_in_squeue(client, job_id).strip() == ""
    assert_nothing_left_under(tmp_path, ports)
    kill_strays(tmp_path)
