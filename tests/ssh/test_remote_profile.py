"""Profiling a role on another host, over a real sshd: its agent traces it with the role's own
python, and the files come back into the local run directory in TensorBoard's layout. ``ctl RUN
why`` and the window's Role > Profile and Why do the same for a remote worker: worker:1, on
127.0.0.2, sleeps in its input pipeline, so why must name input beside the local worker:0."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli_launch import Launch
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli
from tests.helpers.remote_clusters import write_remote_profile_cluster
from tests.helpers.role_profiles import why_verdict
from tests.helpers.ssh_server import SshServer, assert_nothing_left_under

pytestmark = pytest.mark.slow
TRAINERS = ROOT / "resources" / "trainers"


@pytest.fixture(scope="module")
def launch(tmp_path_factory: pytest.TempPathFactory, sshd: SshServer) -> Iterator[tuple[Launch, Path, list[int]]]:
    tmp = tmp_path_factory.mktemp("remote-profile")
    ports = [*free_ports(2), free_ports(1, "127.0.0.2")[0]]
    running = Launch(write_remote_profile_cluster(tmp, sshd, ports), tmp / "run")
    try:
        for role in ("worker:0", "worker:1"):
            running.wait_role(role, "running", timeout_s=180)
            running.wait_output(role, r"AvgTime", timeout_s=180)
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


def test_why_profiles_a_remote_straggler_on_its_host_beside_a_local_worker_and_names_input(
    launch: tuple[Launch, Path, list[int]],
) -> None:
    running, tmp, _ = launch
    result = run_cli("ctl", str(running.run_dir), "why", "worker:1", "--seconds", "2", timeout=240)
    print(result.stdout, result.stderr)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout + result.stderr
    m = re.search(r"^captured [\d.]+ s into (\S+)$", result.stdout, re.M)
    assert m, result.stdout
    capture = Path(m.group(1))
    assert capture.parent == running.run_dir / "profiles"
    record = {r["role"]: r for r in json.loads((capture / "profile.json").read_text())["roles"]}
    assert record["worker:1"]["ok"] and record["worker:0"]["ok"], record
    # worker:1's trace was written on its host and brought here, as ctl profile does.
    remote = capture / record["worker:1"]["xplane"]
    assert remote.relative_to(capture).parts[0] == "worker-1"
    assert (tmp / "host2" / "run" / remote.relative_to(running.run_dir)).read_bytes() == remote.read_bytes()
    verdict = re.search(r"^why is worker:1 slow\? (.+)$", result.stdout, re.M)
    assert verdict, result.stdout
    share, median_share = why_verdict(verdict[1])
    assert share >= 50 and median_share < share / 2, verdict[1]
    # This machine's load is worker:0's host's, never given as worker:1's (its agent traced it elsewhere).
    assert "worker:0's host 127.0.0.1:" in result.stdout and "worker:1's host" not in result.stdout, result.stdout
    for role in ("worker:0", "worker:1"):
        r = running.role(role)
        assert r["state"] == "running" and r["attempt"] == 1, r


def test_a_remote_role_that_is_not_running_is_refused_in_one_line(launch: tuple[Launch, Path, list[int]]) -> None:
    running, _, _ = launch
    assert running.ctl("stop", "worker:1").returncode == 0
    running.wait_role("worker:1", "stopped", timeout_s=60)
    result = run_cli("ctl", str(running.run_dir), "profile", "worker:1", "--seconds", "1", timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert lines == ["profile: worker:1 is stopped; only a running role can be profiled"], result.stderr
    assert "Traceback" not in result.stdout + result.stderr
