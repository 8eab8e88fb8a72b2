"""Profiling a role on another host, over a real sshd: its agent traces it with the role's own
python, and the files come back into the local run directory in TensorBoard's layout."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_ports, run_cli
from tests.core.test_launch import Launch
from tests.ssh.conftest import SshServer, assert_nothing_left_under

pytestmark = pytest.mark.slow
TRAINERS = ROOT / "resources" / "trainers"

CLUSTER = """
name = "remote-profile"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["{python}", "-u", "between_graph.py", "--train_steps=100000000", "--log_every=50", "--step_sleep=0.005"]
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
tasks = ["127.0.0.1:{p[1]}", "127.0.0.2:{p[2]}"]
"""


@pytest.fixture(scope="module")
def launch(tmp_path_factory: pytest.TempPathFactory, sshd: SshServer) -> Iterator[tuple[Launch, Path, list[int]]]:
    tmp = tmp_path_factory.mktemp("remote-profile")
    ports = [*free_ports(2), free_ports(1, "127.0.0.2")[0]]
    cluster = tmp / "cluster.toml"
    cluster.write_text(
        CLUSTER.format(trainers=TRAINERS, python=sys.executable, ssh_config=sshd.config, root2=tmp / "host2", p=ports)
    )
    running = Launch(cluster, tmp / "run")
    try:
        running.wait_role("worker:1", "running", timeout_s=180)
        running.wait_output("worker:1", r"Step: \d+", timeout_s=180)
        yield running, tmp, ports
    finally:
        try:
            if running.proc.poll() is None and running.ctl("stop-all").returncode == 0:
                running.finish(90)
        finally:
            running.kill()
    assert_nothing_left_under(tmp, ports, timeout_s=30)


def test_a_remote_worker_is_profiled_on_its_host_and_its_files_come_back(
    launch: tuple[Launch, Path, list[int]],
) -> None:
    running, tmp, _ = launch
    result = run_cli("ctl", str(running.run_dir), "profile", "worker:1", "--seconds", "1", "--light", timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    m = re.search(r"captured [\d.]+ s into (\S+) ", result.stdout)
    assert m, result.stdout
    capture = Path(m.group(1))
    assert capture.parent == running.run_dir / "profiles"
    record = json.loads((capture / "profile.json").read_text())
    (entry,) = record["roles"]
    assert entry["ok"] and entry["role"] == "worker:1", record
    local = capture / entry["xplane"]
    port = running.role("worker:1")["address"].rsplit(":", 1)[1]
    # TensorBoard's layout under worker-1/, the same bytes as the role wrote on its host.
    assert local.relative_to(capture).parts[:3] == ("worker-1", "plugins", "profile"), local
    assert local.name.endswith(f"_{port}.xplane.pb") and local.stat().st_size > 0
    on_host = tmp / "host2" / "run" / local.relative_to(running.run_dir)
    assert on_host.read_bytes() == local.read_bytes()
    assert not list(capture.rglob("*.part"))
    # The stored capture summarises like a local one: the trainer marks its steps.
    summary = run_cli("profile-summary", str(capture))
    assert summary.returncode == 0, summary.stderr
    steps = next(line for line in summary.stdout.splitlines() if line.strip().startswith("steps captured"))
    assert int(steps.split()[-1]) > 0, summary.stdout
    role = running.role("worker:1")
    assert role["state"] == "running" and role["attempt"] == 1, role


def test_a_remote_role_that_is_not_running_is_refused_in_one_line(launch: tuple[Launch, Path, list[int]]) -> None:
    running, _, _ = launch
    assert running.ctl("stop", "worker:1").returncode == 0
    running.wait_role("worker:1", "stopped", timeout_s=60)
    result = run_cli("ctl", str(running.run_dir), "profile", "worker:1", "--seconds", "1", timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert lines == ["profile: worker:1 is stopped; only a running role can be profiled"], result.stderr
    assert "Traceback" not in result.stdout + result.stderr
