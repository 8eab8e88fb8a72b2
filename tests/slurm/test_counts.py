"""Counted tasks on a real Slurm: hosts from the allocation, ports chosen free on the node by the
agent (a one-shot step), then a real TensorFlow cluster launched on them and trained to success."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from core.cluster.slurm_table import SlurmConfig
from core.cluster.spec import load
from core.controller.controller import Controller
from core.remote.transport import EventSink
from core.run.events import Event
from core.run.rundir import RunDir
from core.slurm.client import SlurmClient, job_name_for
from core.slurm.counts import PlacementError, free_ports_on_slurm, place_counted
from core.slurm.transport import SlurmTransport
from tests.helpers.procs import listening
from tests.helpers.project import ROOT
from tests.helpers.slurm_cluster import SlurmCluster
from tests.helpers.ssh_server import assert_nothing_left_under

pytestmark = pytest.mark.slow

CLUSTER = """
name = "counted-slurm"
strategy = "between_graph"
launch_style = "both"
workdir = "{trainers}"
command = ["python", "-u", "between_graph.py", "--train_steps=200", "--log_every=10"]
stop_grace_s = 3
[jobs.ps]
tasks = 1
[jobs.worker]
tasks = 2
[slurm]
partition = "{partition}"
time = "10"
nodes = 1
"""


@pytest.fixture
def allocation(slurm: SlurmCluster) -> Iterator[tuple[SlurmClient, str, list[str]]]:
    client = SlurmClient(env=slurm.env)
    job_id = client.submit(SlurmConfig(partition=slurm.partition, time="10", nodes=1), job_name_for("counted"))
    try:
        info = client.wait_running(job_id, timeout_s=30)
        yield client, job_id, client.hostnames(info.nodelist)
    finally:
        client.cancel(job_id, grace_s=5)


def test_the_agent_step_chooses_distinct_free_ports_on_the_node(
    slurm: SlurmCluster, allocation: tuple[SlurmClient, str, list[str]]
) -> None:
    client, job_id, nodes = allocation
    assert nodes == [slurm.node]
    ports = free_ports_on_slurm(client, job_id)(nodes[0], 4)
    assert len(set(ports)) == 4 and all(1024 <= p <= 65535 for p in ports)
    assert listening(ports) == []  # released before the answer
    assert client.steps(job_id) == []  # the one-shot step is over
    # An allocation that is gone: srun's own words, no traceback.
    with pytest.raises(ValueError, match=r"`srun` failed: .*[Ii]nvalid job id"):
        free_ports_on_slurm(client, "999999")(nodes[0], 1)


def test_counted_between_graph_placed_on_the_allocation_trains_to_success(
    slurm: SlurmCluster, allocation: tuple[SlurmClient, str, list[str]], tmp_path: Path
) -> None:
    client, job_id, nodes = allocation
    path = tmp_path / "cluster.toml"
    path.write_text(CLUSTER.format(trainers=ROOT / "resources" / "trainers", partition=slurm.partition))
    counted, problems = load(path)
    assert counted is not None, problems
    assert counted.counted_jobs() == ["ps", "worker"] and counted.role_ids() == ["ps:0", "worker:0", "worker:1"]

    spec = place_counted(counted, nodes, free_ports_on_slurm(client, job_id))
    tasks = spec.tasks()
    assert [t.host for t in tasks] == [slurm.node] * 3
    ports = [t.port for t in tasks]
    assert len(set(ports)) == 3 and listening(ports) == []
    addresses = {t.role_id: t.address for t in tasks}

    def factory(host: str, sink: EventSink, log_path: Path) -> SlurmTransport:
        return SlurmTransport(host, sink, log_path, client=client, job_id=job_id, node=host)

    seen: dict[str, tuple[list[str], dict[str, object]]] = {}
    unread: dict[str, str] = {}  # role -> why its process could not be read (the assertion says it)

    def on_event(event: Event) -> None:
        # What each role was started with, read from its process: the chosen ports must be there.
        # A few tries: a loaded machine can show the process a moment before it is readable.
        if event.kind == "role_pid" and event.role is not None:
            for _ in range(30):
                try:
                    proc = psutil.Process(int(event.payload.pid))
                    seen[event.role] = (proc.cmdline(), json.loads(proc.environ()["TF_CONFIG"]))
                    return
                except (psutil.Error, KeyError, ValueError) as exc:
                    unread[event.role] = repr(exc)
                    time.sleep(0.1)

    controller = Controller(spec, RunDir.create(spec, path=tmp_path / "run"), transport_factory=factory)
    controller.subscribe(on_event)
    controller.start()
    try:
        assert controller.wait(240), controller.status()
    finally:
        controller.close()
    status = controller.status()
    assert status.result == "succeeded", status
    assert set(seen) == {"ps:0", "worker:0", "worker:1"}, unread
    for role, (argv, tf_config) in seen.items():
        job, index = role.split(":")
        assert f"--ps_hosts={addresses['ps:0']}" in argv
        assert f"--worker_hosts={addresses['worker:0']},{addresses['worker:1']}" in argv
        assert tf_config["cluster"] == {
            "ps": [addresses["ps:0"]],
            "worker": [addresses[r] for r in ("worker:0", "worker:1")],
        }
        assert tf_config["task"] == {"type": job, "index": int(index)}
        assert f"--job_name={job}" in argv and f"--task_index={index}" in argv
    ps_log = "".join(p.read_text() for p in (tmp_path / "run" / "roles" / "ps-0").glob("*.log"))
    assert f"ps 0 serving on {addresses['ps:0']}" in ps_log
    # The run directory keeps the placed cluster: explicit node:port tasks, as launched.
    again, problems = load(tmp_path / "run" / "cluster.toml")
    assert again is not None and not again.has_counted(), problems
    assert [t.address for t in again.tasks()] == [t.address for t in tasks]
    assert client.steps(job_id) == []  # the free-ports step and the agent's step both ended
    assert_nothing_left_under(tmp_path, ports)
    assert listening(ports) == []


def test_an_allocation_that_cannot_give_ports_stops_the_placement_with_slurms_words(
    slurm: SlurmCluster, allocation: tuple[SlurmClient, str, list[str]], tmp_path: Path
) -> None:
    client, job_id, nodes = allocation
    path = tmp_path / "cluster.toml"
    path.write_text(CLUSTER.format(trainers=ROOT / "resources" / "trainers", partition=slurm.partition))
    counted, _ = load(path)
    assert counted is not None
    client.cancel(job_id, grace_s=5)  # the allocation ended (scancel, time limit) before placement
    with pytest.raises(PlacementError, match=rf"cannot get 3 free port\(s\) on node {nodes[0]}: `srun` failed"):
        place_counted(counted, nodes, free_ports_on_slurm(client, job_id))
