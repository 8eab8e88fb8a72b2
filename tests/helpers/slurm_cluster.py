"""The test Slurm as tests see it (tests/slurm/conftest.py starts it): where its config is, its
partition and node; a cluster file launched through it, and what its run and squeue say after."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core.slurm.client import SlurmClient
from tests.helpers.ports import free_ports
from tests.helpers.project import TRAINERS


@dataclass(frozen=True)
class SlurmCluster:
    """A running test Slurm: point client commands at it with ``env``."""

    conf: Path
    dir: Path
    partition: str
    node: str
    cpus: int

    @property
    def env(self) -> dict[str, str]:
        """The variables a Slurm client command needs to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}


SLURM_BETWEEN_GRAPH = """
name = "bg-slurm-cli"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = {command}
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
[slurm]
partition = "{partition}"
time = "10"
nodes = 1
{extra}
"""


# The trainers a Slurm test cluster runs: the between-graph example (real TensorFlow), or the light
# trainer (no TensorFlow: 10 classic step lines a second) for tests of what TowerDeck and Slurm do
# with any running role, where a TensorFlow import per role only made the run slower to start.
SLURM_COMMANDS = {
    "between_graph": '["python", "-u", "between_graph.py", "--train_steps={steps}", "--log_every=10"]',
    "light": '["python", "-u", "light_trainer.py", "--steps={steps}", "--rate_hz=10"]',
}


def write_slurm_cluster(
    tmp_path: Path, slurm: SlurmCluster, steps: int, extra: str = "", *, trainer: str = "between_graph"
) -> tuple[Path, list[int]]:
    """The between-graph example (or, with ``trainer="light"``, the light trainer, ``steps`` 0 for
    ever) in one allocation of ``slurm``'s partition; ``extra`` goes in ``[slurm]``."""
    ports = free_ports(3)
    path = tmp_path / "cluster.toml"
    command = SLURM_COMMANDS[trainer].format(steps=steps)
    path.write_text(
        SLURM_BETWEEN_GRAPH.format(trainers=TRAINERS, p=ports, command=command, partition=slurm.partition, extra=extra)
    )
    return path, ports


def slurm_record(run_dir: Path) -> dict:
    """The ``slurm`` record of a run's run.json (job id, nodes ...); empty until there is one."""
    try:
        return json.loads((run_dir / "run.json").read_text()).get("slurm") or {}
    except (OSError, ValueError):
        return {}


def left_in_squeue(client: SlurmClient, job_id: str) -> str:
    """What squeue still lists of ``job_id`` (pending, running or completing): empty once it is gone."""
    return client.run(["squeue", "-h", f"--jobs={job_id}", "--states=PENDING,RUNNING,COMPLETING"], check=False)
