"""``python main.py gpus CLUSTER`` over a real sshd: two hosts that differ (one with two GPUs of the
NVML double and a TowerDeck role on one, one without NVML), queried at once over the agent's SSH
path with host keys checked; a host that never answers holds up neither of them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT, run_cli
from tests.helpers.ssh_server import SshServer

pytestmark = pytest.mark.slow
FAKE_NVML = ROOT / "tests" / "helpers" / "fake_nvml.py"


def gpu_python(tmp_path: Path) -> Path:
    """The python of a host 'with two GPUs': the double, chosen by the host's own environment."""
    path = tmp_path / "gpu-python"
    path.write_text(
        f"#!/bin/sh\nexport TOWERDECK_NVML_MODULE={FAKE_NVML}\nexport FAKE_NVML_GPUS=2\n"
        # sshd starts the agent without this session's environment: the double's scope is passed on.
        f"export FAKE_NVML_SCOPE={os.environ['FAKE_NVML_SCOPE']}\n"
        f'exec {sys.executable} "$@"\n'
    )
    path.chmod(0o755)
    return path


def cluster(tmp_path: Path, sshd: SshServer, extra_host: str = "") -> Path:
    ports = [free_ports(1, "127.0.0.2")[0], free_ports(1, "127.0.0.3")[0]]
    path = tmp_path / "cluster.toml"
    path.write_text(
        f"""
name = "gp"
strategy = "custom"
command = ["{sys.executable}", "-c", "pass"]
ssh_config = "{sshd.config}"
[hosts."127.0.0.2"]
ssh = "127.0.0.2"
python = "{gpu_python(tmp_path)}"
[hosts."127.0.0.3"]
ssh = "node3"
python = "{sys.executable}"
{extra_host}
[jobs.worker]
tasks = [{{ address = "127.0.0.2:{ports[0]}", gpus = [1] }}, "127.0.0.3:{ports[1]}"]
"""
    )
    return path


@pytest.fixture
def role_on_gpu1(tmp_path: Path) -> Iterator[int]:
    env = {
        **os.environ,
        "TOWERDECK_ROLE": "worker:0",
        "TOWERDECK_RUN_DIR": "/r/runs/run-ssh",
        "CUDA_VISIBLE_DEVICES": "1",
    }
    env.pop("TOWERDECK_NVML_MODULE", None)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def silent_server() -> Iterator[tuple[str, int]]:
    """A TCP port that accepts and never says a word: an ssh to it hangs (no banner)."""
    server = socket.socket()
    server.bind(("127.0.0.4", 0))
    server.listen(8)
    try:
        yield "127.0.0.4", server.getsockname()[1]
    finally:
        server.close()


def test_two_hosts_that_differ_over_ssh(tmp_path: Path, sshd: SshServer, role_on_gpu1: int):
    p = run_cli("gpus", str(cluster(tmp_path, sshd)), "--json", timeout=120)
    assert p.returncode == 0, p.stderr
    hosts = {h["host"]: h for h in json.loads(p.stdout)["hosts"]}
    assert set(hosts) == {"127.0.0.2", "127.0.0.3"}
    assert hosts["127.0.0.3"]["destination"] == "node3"
    with_gpus = hosts["127.0.0.2"]["snapshot"]
    assert with_gpus["nvml"] and [g["index"] for g in with_gpus["gpus"]] == [0, 1]
    [proc] = [x for x in with_gpus["gpus"][1]["processes"] if x["pid"] == role_on_gpu1]
    assert (proc["run"], proc["role"]) == ("run-ssh", "worker:0")
    without = hosts["127.0.0.3"]["snapshot"]
    assert without["nvml"] is False and without["gpus"] == [] and "no NVML" in without["status"]

    text = run_cli("gpus", str(cluster(tmp_path, sshd)), timeout=120)
    lines = text.stdout.splitlines()
    assert [x for x in lines if x.startswith("127.0.0.3 (node3): no NVML")], text.stdout
    assert any("run run-ssh role worker:0" in x for x in lines), text.stdout


def test_an_unreachable_or_silent_host_holds_up_no_other(
    tmp_path: Path, sshd: SshServer, silent_server: tuple[str, int]
):
    host, port = silent_server
    extra = f'[hosts."silent"]\nssh = "{host}:{port}"\n[hosts."refused"]\nssh = "127.0.0.5:{port}"\n'
    started = time.monotonic()
    p = run_cli("gpus", str(cluster(tmp_path, sshd, extra)), "--json", "--timeout", "4", timeout=120)
    elapsed = time.monotonic() - started
    assert p.returncode == 1, p.stderr  # a host could not be queried
    hosts = {h["host"]: h for h in json.loads(p.stdout)["hosts"]}
    assert hosts["127.0.0.2"]["snapshot"] is not None, hosts["127.0.0.2"]
    assert hosts["127.0.0.2"]["snapshot"]["gpus"] and hosts["127.0.0.3"]["snapshot"] is not None
    assert hosts["silent"]["snapshot"] is None and "no answer within 4 s" in hosts["silent"]["error"]
    assert hosts["refused"]["snapshot"] is None and "cannot reach" in hosts["refused"]["error"]
    assert elapsed < 60  # generous: the silent host's 4 s, not ssh's own timeouts one after another


def test_unknown_host_key_is_refused(tmp_path: Path, sshd: SshServer):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = sshd.client_config("strict", known_hosts=empty)
    p = run_cli("gpus", "--hosts", "node3", "--json", env={"TOWERDECK_SSH_CONFIG": str(config)}, timeout=120)
    assert p.returncode == 1
    [host] = json.loads(p.stdout)["hosts"]
    assert "host key" in host["error"] and "known_hosts" in host["error"]


def test_watch_over_ssh_refreshes_and_leaves_nothing_on_the_host(tmp_path: Path, sshd: SshServer):
    python = str(gpu_python(tmp_path))
    env = {"TOWERDECK_SSH_CONFIG": str(sshd.config)}
    args = ("gpus", "--hosts", "node3", "--python", python, "--watch", "--interval", "0.3", "--count", "3", "--json")
    p = run_cli(*args, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    frames = [json.loads(line)["hosts"][0] for line in p.stdout.splitlines()]
    assert len(frames) == 3 and frames[-1]["destination"] == "node3"
    times = [f["snapshot"]["t"] for f in frames if f["snapshot"]]
    assert len(set(times)) >= 2  # one connection, new snapshots on it
    assert all(len(f["snapshot"]["gpus"]) == 2 for f in frames if f["snapshot"])
    # The remote query ends with the connection (at its next write at the latest).
    assert_nothing_left([], "towerdeck_member", timeout_s=20)
