"""The agent as a Slurm step: its JSON lines over srun, a role's exit code, nothing left after."""

from __future__ import annotations

import queue
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.cluster.slurm_table import SlurmConfig
from core.slurm.client import SlurmClient
from core.slurm.transport import SlurmTransport
from tests.helpers.procs import with_marker
from tests.helpers.slurm_cluster import SlurmCluster


@pytest.fixture
def allocation(slurm: SlurmCluster) -> Iterator[tuple[SlurmClient, str]]:
    client = SlurmClient(env=slurm.env)
    job_id = client.submit(SlurmConfig(partition=slurm.partition, nodes=1), "towerdeck-transport")
    try:
        client.wait_running(job_id, timeout_s=30)
        yield client, job_id
    finally:
        client.cancel(job_id, grace_s=5)


class Events:
    def __init__(self) -> None:
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()

    def __call__(self, host: str, event: dict[str, Any]) -> None:
        self.queue.put(event)

    def wait_for(self, ev: str, timeout_s: float = 30.0, **fields: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        seen = []
        while time.monotonic() < deadline:
            try:
                event = self.queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            seen.append(event.get("ev"))
            if event.get("ev") == ev and all(event.get(k) == v for k, v in fields.items()):
                return event
        raise AssertionError(f"no {ev} {fields} event; saw {seen}")


def _transport(
    slurm: SlurmCluster, allocation: tuple[SlurmClient, str], tmp_path: Path, events: Events
) -> SlurmTransport:
    client, job_id = allocation
    return SlurmTransport("127.0.0.1", events, tmp_path / "agent.log", client=client, job_id=job_id, node=slurm.node)


def test_agent_over_srun_answers_starts_a_role_and_reports_its_exit(
    slurm: SlurmCluster, allocation: tuple[SlurmClient, str], tmp_path: Path
) -> None:
    events = Events()
    transport = _transport(slurm, allocation, tmp_path, events)
    transport.start()
    try:
        hello = events.wait_for("hello")
        assert hello["protocol"] == 1
        step = transport.find_step()
        assert step is not None and step.startswith(f"{allocation[1]}.")
        assert allocation[0].steps(allocation[1]) == [step]
        assert transport.send({"op": "ping", "id": "p1"})
        events.wait_for("pong", id="p1")
        log = tmp_path / "worker-0.log"
        role_argv = [
            sys.executable,
            "-c",
            "import os; print('on node', os.environ.get('SLURM_JOB_ID')); raise SystemExit(3)",
        ]
        transport.send(
            {
                "op": "start",
                "role": "worker:0",
                "attempt": 1,
                "argv": role_argv,
                "env": {},
                "cwd": str(tmp_path),
                "log": str(log),
            }
        )
        started = events.wait_for("started", role="worker:0")
        exited = events.wait_for("exited", role="worker:0")
        assert exited["returncode"] == 3 and exited["pid"] == started["pid"]
        # The role ran inside the allocation: Slurm's variables of the agent's step reached it.
        assert log.read_text().strip() == f"on node {allocation[1]}"
    finally:
        transport.close(timeout_s=10)
    lost = events.wait_for("agent_lost")
    assert lost["returncode"] == 0
    client, job_id = allocation
    assert client.steps(job_id) == []


def test_scancel_of_the_agent_step_leaves_no_process(
    slurm: SlurmCluster, allocation: tuple[SlurmClient, str], tmp_path: Path
) -> None:
    events = Events()
    transport = _transport(slurm, allocation, tmp_path, events)
    transport.start()
    marker = f"towerdeck-slurm-role-{tmp_path.name}"
    try:
        events.wait_for("hello")
        role_argv = [sys.executable, "-c", "import time\nwhile True: time.sleep(0.1)", marker]
        transport.send(
            {
                "op": "start",
                "role": "ps:0",
                "attempt": 1,
                "argv": role_argv,
                "env": {},
                "cwd": str(tmp_path),
                "log": str(tmp_path / "ps-0.log"),
            }
        )
        events.wait_for("started", role="ps:0")
        deadline = time.monotonic() + 30  # a loaded machine can list the new process a moment later
        while len(with_marker(marker)) != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(with_marker(marker)) == 1
        step = transport.find_step()
        assert step is not None
        client, _ = allocation
        client.cancel_step(step, graceful=False)
        lost = events.wait_for("agent_lost")
        assert lost["returncode"] != 0
        deadline = time.monotonic() + 20
        while with_marker(marker):  # slurmstepd ends the whole step: agent and role
            assert time.monotonic() < deadline, [p.cmdline() for p in with_marker(marker)]
            time.sleep(0.1)
        # ... and slurmctld forgets the step: a loaded machine still listed it once right after.
        deadline = time.monotonic() + 30
        while client.steps(allocation[1]):
            assert time.monotonic() < deadline, client.steps(allocation[1])
            time.sleep(0.2)
    finally:
        transport.close(timeout_s=5)
    assert subprocess.run(["pgrep", "-f", marker], check=False).returncode == 1
