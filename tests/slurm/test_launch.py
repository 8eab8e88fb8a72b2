"""A real TensorFlow cluster launched through Slurm by the controller: every host's agent is a
step of one allocation, the roles run under it, and nothing is left once it is over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.cluster.slurm_table import SlurmConfig
from core.cluster.spec import load
from core.controller.controller import Controller
from core.remote.transport import EventSink
from core.run.rundir import RunDir
from core.slurm.client import SlurmClient, job_name_for
from core.slurm.transport import SlurmTransport
from tests.helpers.ports import free_ports
from tests.helpers.procs import listening
from tests.helpers.project import ROOT
from tests.helpers.slurm_cluster import SlurmCluster
from tests.helpers.ssh_server import assert_nothing_left_under

pytestmark = pytest.mark.slow

CLUSTER = """
name = "bg-slurm"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "between_graph.py", "--train_steps={steps}", "--log_every=10"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
[slurm]
partition = "{partition}"
time = "10"
nodes = 1
"""


@pytest.fixture
def allocation(slurm: SlurmCluster) -> Iterator[tuple[SlurmClient, str, list[str]]]:
    client = SlurmClient(env=slurm.env)
    job_id = client.submit(SlurmConfig(partition=slurm.partition, time="10", nodes=1), job_name_for("bg-slurm"))
    try:
        info = client.wait_running(job_id, timeout_s=30)
        yield client, job_id, client.hostnames(info.nodelist)
    finally:
        client.cancel(job_id, grace_s=5)


def test_between_graph_trains_to_success_through_slurm(
    slurm: SlurmCluster, allocation: tuple[SlurmClient, str, list[str]], tmp_path: Path
) -> None:
    client, job_id, nodes = allocation
    ports = free_ports(3)
    path = tmp_path / "cluster.toml"
    path.write_text(
        CLUSTER.format(trainers=ROOT / "resources" / "trainers", p=ports, steps=200, partition=slurm.partition)
    )
    spec, problems = load(path)
    assert spec is not None, problems
    assert spec.slurm == SlurmConfig(partition=slurm.partition, time="10", nodes=1)
    transports: list[SlurmTransport] = []

    def factory(host: str, sink: EventSink, log_path: Path) -> SlurmTransport:
        # Every task host here is 127.0.0.1, so one node of the allocation serves them all.
        transport = SlurmTransport(host, sink, log_path, client=client, job_id=job_id, node=nodes[0])
        transports.append(transport)
        return transport

    controller = Controller(spec, RunDir.create(spec, path=tmp_path / "run"), transport_factory=factory)
    controller.start()
    assert controller.wait(240)
    controller.close()
    status = controller.status()
    assert status.result == "succeeded", status
    assert [t.node for t in transports] == [slurm.node]
    log = (tmp_path / "run" / "roles" / "worker-0").glob("*.log")
    assert any("step" in p.read_text() for p in log)
    assert client.steps(job_id) == []  # the agent's step ended with the cluster
    assert_nothing_left_under(tmp_path, ports)
    assert listening(ports) == []


def test_scancel_of_the_allocation_mid_run_ends_the_cluster_and_leaves_nothing(
    slurm: SlurmCluster, allocation: tuple[SlurmClient, str, list[str]], tmp_path: Path
) -> None:
    """What a user's scancel (or Slurm's time limit) does: SIGTERM to the agent's step, which
    stops its roles in order; the controller ends instead of waiting for ever."""
    import threading

    client, job_id, nodes = allocation
    ports = free_ports(3)
    path = tmp_path / "cluster.toml"
    text = CLUSTER.format(trainers=ROOT / "resources" / "trainers", p=ports, steps=100000, partition=slurm.partition)
    path.write_text(text)
    spec, problems = load(path)
    assert spec is not None, problems
    stepping = threading.Event()
    controller = Controller(
        spec,
        RunDir.create(spec, path=tmp_path / "run"),
        transport_factory=lambda host, sink, log: SlurmTransport(
            host, sink, log, client=client, job_id=job_id, node=nodes[0]
        ),
    )
    controller.subscribe(lambda e: stepping.set() if e.kind == "metrics" and e.role == "worker:1" else None)
    controller.start()
    try:
        assert stepping.wait(180), controller.status()
        client.cancel(job_id, grace_s=10)
        assert controller.wait(60), controller.status()
    finally:
        controller.close()
    status = controller.status()
    assert status.result != "succeeded"
    assert client.run(["squeue", "-h", f"--jobs={job_id}"], check=False).strip() == ""
    end = client.job_end(job_id)
    assert end is not None and end.state == "CANCELLED"
    assert_nothing_left_under(tmp_path, ports)


PS_CLUSTER = """
name = "ps-slurm"
strategy = "parameter_server"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "parameter_server.py", "--train_steps=400", "--log_every=20"]
stop_grace_s = 3
[jobs.chief]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.ps]
tasks = ["127.0.0.1:{p[1]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[2]}", "127.0.0.1:{p[3]}"]
restart = {{ policy = "OnFailure", max_restarts = 2, backoff_s = 0.5 }}
[slurm]
partition = "{partition}"
"""


def test_tf2_parameter_server_through_slurm_restarts_a_killed_worker_and_succeeds(
    slurm: SlurmCluster, allocation: tuple[SlurmClient, str, list[str]], tmp_path: Path
) -> None:
    import os
    import signal
    import threading

    client, job_id, nodes = allocation
    ports = free_ports(4)
    path = tmp_path / "cluster.toml"
    path.write_text(PS_CLUSTER.format(trainers=ROOT / "resources" / "trainers", p=ports, partition=slurm.partition))
    spec, problems = load(path)
    assert spec is not None, problems
    chief_stepping = threading.Event()
    controller = Controller(
        spec,
        RunDir.create(spec, path=tmp_path / "run"),
        transport_factory=lambda host, sink, log: SlurmTransport(
            host, sink, log, client=client, job_id=job_id, node=nodes[0]
        ),
    )
    controller.subscribe(lambda e: chief_stepping.set() if e.kind == "metrics" and e.role == "chief:0" else None)
    controller.start()
    try:
        assert chief_stepping.wait(180), controller.status()
        worker = next(r for r in controller.status().roles if r.role == "worker:1")
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)  # a worker lost mid-training, as a node's OOM killer would
        assert controller.wait(240), controller.status()
    finally:
        controller.close()
    status = controller.status()
    assert status.result == "succeeded", status
    restarted = next(r for r in status.roles if r.role == "worker:1")
    assert restarted.restarts >= 1
    assert (tmp_path / "run" / "roles" / "worker-1" / "attempt-2.log").exists()
    assert client.steps(job_id) == []
    assert_nothing_left_under(tmp_path, ports)
