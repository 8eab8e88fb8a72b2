"""``ctl RUN why`` (and so ``ctl RUN profile``, the same capture) on a run held by the real Slurm
of tests/slurm/conftest.py: each role is traced by its node's agent step (the launcher cannot know
that a node is this machine), and the files come into ``RUN/profiles/<timestamp>/<job>-<task>/``
like a local capture's, moved from the agent's folder of the shared run directory. worker:1
sleeps in its input pipeline, so the verdict must name input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.cli_launch import Launch
from tests.helpers.clusters import WHY_CLUSTER, WHY_TRAINER, toml_list
from tests.helpers.ports import free_ports
from tests.helpers.project import TRAINERS, run_cli
from tests.helpers.role_profiles import why_verdict
from tests.helpers.slurm_cluster import SlurmCluster
from tests.helpers.ssh_server import assert_nothing_left_under

pytestmark = pytest.mark.slow

SLURM = """
[slurm]
partition = "{partition}"
time = "10"
nodes = 1
"""


def test_why_traces_slurm_roles_through_their_nodes_agent_and_names_input(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path
) -> None:
    ports = free_ports(3)
    dataset = [*WHY_TRAINER, "--input=dataset"]
    cluster = tmp_path / "cluster.toml"
    slow = toml_list([*dataset, "--input_sleep_s=0.05"])
    cluster.write_text(
        WHY_CLUSTER.format(trainers=TRAINERS, p=ports, command=toml_list(dataset), slow=slow)
        + SLURM.format(partition=slurm.partition)
    )
    launch = Launch(cluster, tmp_path / "run")
    try:
        for role in ("worker:0", "worker:1"):
            launch.wait_role(role, "running", timeout_s=180)
            launch.wait_output(role, r"AvgTime", timeout_s=180)
        assert launch.status()["agent_hosts"] == ["127.0.0.1"]  # the task host, placed on the node
        result = run_cli("ctl", str(launch.run_dir), "why", "worker:1", "--seconds", "2", timeout=240)
        print(result.stdout, result.stderr)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout + result.stderr
        m = re.search(r"^captured [\d.]+ s into (\S+)$", result.stdout, re.M)
        assert m, result.stdout
        capture = Path(m[1])
        assert capture.parent == launch.run_dir / "profiles"
        record = {r["role"]: r for r in json.loads((capture / "profile.json").read_text())["roles"]}
        for role in ("worker:0", "worker:1"):
            assert record[role]["ok"], record
            here = capture / record[role]["xplane"]
            assert here.relative_to(capture).parts[:3] == (role.replace(":", "-"), "plugins", "profile")
            # The node's agent traced it under its own directory (agents/ of the shared run
            # directory: its tracer's output is there), and the file was moved here, not copied.
            traced = launch.run_dir / "agents" / capture.relative_to(launch.run_dir)
            tracer_says = (traced / f"{role.replace(':', '-')}.trace.out").read_text().splitlines()
            assert json.loads(tracer_says[-1]) == {"ok": True}, tracer_says
            assert not (traced / here.relative_to(capture)).exists()
            assert here.stat().st_size == record[role]["xplane_bytes"] > 0
        verdict = re.search(r"^why is worker:1 slow\? (.+)$", result.stdout, re.M)
        assert verdict, result.stdout
        share, median_share = why_verdict(verdict[1])
        assert share >= 50 and median_share < share / 2, verdict[1]
        for role in ("worker:0", "worker:1"):
            r = launch.role(role)
            assert r["state"] == "running" and r["restarts"] == 0, r
        assert launch.ctl("stop-all").returncode == 0
        launch.finish(120)
    finally:
        launch.kill()
    assert_nothing_left_under(tmp_path, ports, timeout_s=30)
