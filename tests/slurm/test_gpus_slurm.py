"""``python main.py gpus --slurm-job J`` on a real Slurm: each node of the allocation is looked at
by an ``srun --overlap`` step running the agent's GPU query (through the NVML double), and no step
is left once it has answered or --watch has ended."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from core.cluster.slurm_table import SlurmConfig
from core.slurm.client import SlurmClient, job_name_for
from tests.helpers.project import ROOT, run_cli
from tests.helpers.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slow
DOUBLE = {"TOWERDECK_NVML_MODULE": str(ROOT / "tests" / "helpers" / "fake_nvml.py"), "FAKE_NVML_GPUS": "2"}


@pytest.fixture
def job(slurm: SlurmCluster) -> Iterator[tuple[SlurmClient, str]]:
    client = SlurmClient(env=slurm.env)
    job_id = client.submit(SlurmConfig(partition=slurm.partition, time="10", nodes=1), job_name_for("gpus"))
    try:
        client.wait_running(job_id, timeout_s=30)
        yield client, job_id
    finally:
        client.cancel(job_id, grace_s=5)


def test_every_node_of_the_allocation(slurm: SlurmCluster, job: tuple[SlurmClient, str]):
    client, job_id = job
    env = {**slurm.env, **DOUBLE}
    p = run_cli("gpus", "--slurm-job", job_id, "--json", env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    [host] = json.loads(p.stdout)["hosts"]
    assert host["host"] == slurm.node and host["destination"] == f"slurm job {job_id}"
    assert [g["pci_bus_id"] for g in host["snapshot"]["gpus"]] == ["00000000:1A:00.0", "00000000:1B:00.0"]
    assert client.steps(job_id) == []  # the one-shot step is over

    watched = run_cli("gpus", "--slurm-job", job_id, "--watch", "--interval", "0.3", "--count", "2", env=env)
    assert watched.returncode == 0, watched.stderr
    assert watched.stdout.count(f"{slurm.node} (slurm job {job_id}): 2 NVIDIA GPUs") == 2
    assert client.steps(job_id) == []  # the watching step ended with the command


def test_a_job_that_is_not_running_is_one_line(slurm: SlurmCluster):
    p = run_cli("gpus", "--slurm-job", "999999", env=slurm.env, timeout=120)
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        "error: --slurm-job: Slurm job 999999 is not in squeue (ended, or no such job); "
        "its nodes can be looked at while it runs"
    ]
    p = run_cli("gpus", "--slurm-job", "12a", env=slurm.env, timeout=120)
    assert p.returncode == 2 and "not a Slurm job id" in p.stderr
