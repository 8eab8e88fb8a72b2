"""Cluster files whose roles run on other hosts over the test sshd (tests/helpers/ssh_server.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers.clusters import toml_list
from tests.helpers.ports import free_ports
from tests.helpers.project import TRAINERS
from tests.helpers.ssh_server import SshServer

REMOTE_BETWEEN_GRAPH = """
name = "remote-bg"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["{python}", "-u", "between_graph.py", "--train_steps={steps}", "--step_sleep={sleep}", "--log_every=10"]
stop_grace_s = 3
{ssh_config_line}

[env]
TF_CPP_MIN_LOG_LEVEL = "1"

[hosts."127.0.0.2"]
ssh = "127.0.0.2"
python = "{python}"
run_root = "{root2}"

[hosts."127.0.0.3"]
ssh = "node3"
python = "{python}"
run_root = "{root3}"

[jobs.ps]
tasks = ["127.0.0.2:{p[0]}"]

[jobs.worker]
tasks = ["127.0.0.2:{p[1]}", "127.0.0.3:{p[2]}"]
"""


def write_remote_cluster(
    tmp_path: Path, sshd: SshServer, steps: int = 100, sleep: float = 0.0, config: bool = True
) -> tuple[Path, list[int]]:
    """A between-graph cluster over ssh: ps and worker:0 on 127.0.0.2, worker:1 on 127.0.0.3 (alias node3)."""
    ports = [free_ports(1, "127.0.0.2")[0], free_ports(1, "127.0.0.2")[0], free_ports(1, "127.0.0.3")[0]]
    while ports[0] == ports[1]:
        ports[1] = free_ports(1, "127.0.0.2")[0]
    text = REMOTE_BETWEEN_GRAPH.format(
        trainers=TRAINERS,
        python=sys.executable,
        steps=steps,
        sleep=sleep,
        p=ports,
        root2=tmp_path / "host2",
        root3=tmp_path / "host3",
        ssh_config_line=f'ssh_config = "{sshd.config}"' if config else "",
    )
    path = tmp_path / "cluster.toml"
    path.write_text(text)
    return path, ports


REMOTE_PROFILE = """
name = "remote-profile"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = {command}
stop_grace_s = 3
ssh_config = "{ssh_config}"

[env]
TF_CPP_MIN_LOG_LEVEL = "1"

[hosts."127.0.0.2"]
ssh = "127.0.0.2"
python = "{python}"
run_root = "{root2}"

[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]

[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", {{ address = "127.0.0.2:{p[2]}", command = {slow} }}]
"""


REMOTE_TRAINER = [sys.executable, "-u", "between_graph.py", "--train_steps=100000000", "--log_every=50"]


DATASET = [*REMOTE_TRAINER, "--step_sleep=0.005", "--input=dataset"]


SLOW = [*DATASET, "--input_sleep_s=0.05"]  # worker:1, the remote one, waits for its input


def write_remote_profile_cluster(tmp: Path, sshd: SshServer, ports: list[int]) -> Path:
    """The "why" cluster with worker:1 on 127.0.0.2 over ssh, waiting for its input."""
    cluster = tmp / "cluster.toml"
    cluster.write_text(
        REMOTE_PROFILE.format(
            trainers=TRAINERS,
            python=sys.executable,
            ssh_config=sshd.config,
            root2=tmp / "host2",
            p=ports,
            command=toml_list(DATASET),
            slow=toml_list(SLOW),
        )
    )
    return cluster
