"""core.slurm.client against the real test Slurm: allocation, pending reason, steps, cancel, end."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from core.cluster.slurm_table import SlurmConfig
from core.slurm.client import SlurmCheck, SlurmClient, SlurmError, check_slurm, job_name_for, step_argv
from tests.helpers.slurm_cluster import SlurmCluster


@pytest.fixture
def client(slurm: SlurmCluster) -> SlurmClient:
    return SlurmClient(env=slurm.env)


def _squeue_ids(slurm: SlurmCluster, client: SlurmClient) -> list[str]:
    return client.run(["squeue", "-h", "-o", "%i"]).split()


def _wait(predicate: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_allocation_runs_on_the_node_with_its_name(slurm: SlurmCluster, client: SlurmClient) -> None:
    config = SlurmConfig(partition=slurm.partition, time="10", nodes=1)
    job_id = client.submit(config, job_name_for("demo run;rm -rf"))
    try:
        info = client.wait_running(job_id, timeout_s=30)
        assert info.running and info.job_id == job_id
        assert client.hostnames(info.nodelist) == [slurm.node]
        name = client.run(["squeue", "-h", f"--jobs={job_id}", "-o", "%j"]).strip()
        assert name == "towerdeck-demo_run_rm_-rf"
        assert client.steps(job_id) == []
    finally:
        client.cancel(job_id, grace_s=5)
    assert job_id not in _squeue_ids(slurm, client)


def test_a_held_job_says_why_it_waits(slurm: SlurmCluster, client: SlurmClient) -> None:
    job_id = client.submit(SlurmConfig(extra_args=("--hold",)), "towerdeck-held")
    try:
        info = client.job(job_id)
        assert info is not None and info.pending and info.reason == "JobHeldUser"
        with pytest.raises(SlurmError, match=r"still pending after 1 s \(reason: JobHeldUser\)"):
            client.wait_running(job_id, timeout_s=1)
    finally:
        client.cancel(job_id, grace_s=1)
    end = client.job_end(job_id)
    assert end is not None and end.state == "CANCELLED"
    assert "cancelled" in end.describe()


def test_more_cpus_than_the_node_has_pends_with_a_reason(slurm: SlurmCluster, client: SlurmClient) -> None:
    job_id = client.submit(SlurmConfig(extra_args=(f"--cpus-per-task={slurm.cpus * 4}",)), "towerdeck-big")
    try:
        info = client.job(job_id)
        assert info is not None and info.pending
        assert info.reason not in ("", "None")  # Slurm names the limit (PartitionConfig, Resources, ...)
    finally:
        client.cancel(job_id, grace_s=1)


def test_a_bad_partition_is_a_clear_error(client: SlurmClient) -> None:
    with pytest.raises(SlurmError) as caught:
        client.submit(SlurmConfig(partition="no_such_partition"), "towerdeck-bad")
    assert "invalid partition" in caught.value.message.lower()
    assert "sinfo" in caught.value.fix


def test_steps_return_their_exit_code_and_run_side_by_side(slurm: SlurmCluster, client: SlurmClient) -> None:
    # One CPU allocated: two whole-node steps only run at once because they overlap.
    job_id = client.submit(SlurmConfig(partition=slurm.partition, nodes=1), "towerdeck-steps")
    try:
        client.wait_running(job_id, timeout_s=30)
        long = subprocess.Popen(step_argv(job_id, slurm.node, ["sleep", "60"]), env=client.env)
        _wait(lambda: len(client.steps(job_id)) == 1)
        done = subprocess.run(
            step_argv(job_id, slurm.node, ["sh", "-c", "echo out; exit 7"]),
            env=client.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout) == (7, "out\n")
        assert long.poll() is None  # the first step still runs: --overlap let them share the node
        client.cancel_step(client.steps(job_id)[0], graceful=False)
        assert long.wait(30) != 0
    finally:
        client.cancel(job_id, grace_s=5)


def test_cancel_is_graceful_first_and_leaves_nothing(slurm: SlurmCluster, client: SlurmClient, tmp_path: Path) -> None:
    mark = tmp_path / "term.txt"
    script = f"trap 'echo term > {mark}; exit 0' TERM; echo ready; while :; do sleep 0.1; done"
    job_id = client.submit(SlurmConfig(partition=slurm.partition), "towerdeck-cancel")
    client.wait_running(job_id, timeout_s=30)
    step = subprocess.Popen(
        step_argv(job_id, slurm.node, ["sh", "-c", script]), env=client.env, stdout=subprocess.PIPE, text=True
    )
    assert step.stdout is not None and step.stdout.readline() == "ready\n"
    client.cancel(job_id, grace_s=10)
    assert step.wait(30) is not None
    assert mark.read_text() == "term\n"  # the step's SIGTERM handler ran before the kill
    assert job_id not in _squeue_ids(slurm, client)
    assert client.run(["squeue", "-h", "--steps", f"--jobs={job_id}"], check=False).strip() == ""


def test_exact_steps_share_an_allocation_by_its_cpus(slurm: SlurmCluster, client: SlurmClient) -> None:
    job_id = client.submit(SlurmConfig(nodes=1, extra_args=("--ntasks-per-node=2",)), "towerdeck-exact")
    try:
        client.wait_running(job_id, timeout_s=30)
        argv = step_argv(job_id, slurm.node, ["sleep", "60"], exact=True, overlap=False)
        first, second = (subprocess.Popen(argv, env=client.env) for _ in range(2))
        _wait(lambda: len(client.steps(job_id)) == 2)
    finally:
        client.cancel(job_id, grace_s=5)
    assert first.wait(30) != 0 and second.wait(30) != 0
    end = client.job_end(job_id)
    assert end is not None and end.state == "CANCELLED"


def test_a_failed_job_is_reported_with_its_exit_code(client: SlurmClient) -> None:
    out = client.run(["sbatch", "--parsable", "--output=/dev/null"], stdin_text="#!/bin/sh\nexit 3\n")
    job_id = out.strip().split(";")[0]
    _wait(lambda: client.job_end(job_id) is not None)
    end = client.job_end(job_id)
    assert end is not None and (end.state, end.exit_code, end.signal) == ("FAILED", 3, 0)
    assert end.describe().startswith(f"Slurm job {job_id} failed")


@pytest.mark.slow
def test_preflight_names_a_missing_partition_and_passes_a_good_one(slurm: SlurmCluster, client: SlurmClient) -> None:
    good = check_slurm(client, SlurmConfig(partition=slurm.partition))
    assert [(c.name, c.ok) for c in good] == [
        ("sbatch", True),
        ("srun", True),
        ("squeue", True),
        ("controller", True),
        ("partition", True),
    ]
    assert good[0].detail.startswith("slurm")
    default = check_slurm(client, SlurmConfig())
    assert default[-1] == SlurmCheck("partition", ok=True, detail=f"{slurm.partition} is up")
    bad = check_slurm(client, SlurmConfig(partition="gpu"))[-1]
    assert not bad.ok and bad.detail == f"no partition 'gpu' (there are: {slurm.partition})"
    assert "set [slurm] partition" in bad.fix


def test_preflight_without_a_slurm_conf_says_what_to_set(tmp_path: Path) -> None:
    lost = SlurmClient(env={"SLURM_CONF": str(tmp_path / "missing.conf")})
    checks = check_slurm(lost, SlurmConfig())
    assert [(c.name, c.ok) for c in checks] == [("sbatch", False), ("srun", False), ("squeue", False)]
    assert "missing.conf', which does not exist" in checks[0].detail
    assert "point SLURM_CONF at your cluster's slurm.conf" in checks[0].fix


def test_the_users_slurm_environment_is_respected(slurm_env: dict[str, str]) -> None:
    # SLURM_CONF from this process's environment (no env given), and an SBATCH_* input variable.
    import os

    os.environ["SBATCH_TIMELIMIT"] = "7"
    try:
        client = SlurmClient()
        job_id = client.submit(SlurmConfig(), "towerdeck-env")
    finally:
        del os.environ["SBATCH_TIMELIMIT"]
    try:
        assert client.run(["squeue", "-h", f"--jobs={job_id}", "-o", "%l"]).strip() == "7:00"
    finally:
        client.cancel(job_id, grace_s=1)
