"""Real clusters across 127.0.0.2 and 127.0.0.3 over a real sshd: launch, drops, quoting."""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from core.agent import artifact
from core.cluster.spec import parse_text
from core.controller.controller import Controller
from core.run.events import Event
from core.run.rundir import RunDir
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli
from tests.helpers.remote_clusters import write_remote_cluster
from tests.helpers.ssh_server import SshServer, assert_nothing_left_under

pytestmark = pytest.mark.slow
TRAINERS = ROOT / "resources" / "trainers"


def ssh_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if p.name() == "ssh"]


def test_launch_one_ps_two_workers_across_two_ssh_hosts_to_success(tmp_path: Path, sshd: SshServer):
    cluster, ports = write_remote_cluster(tmp_path, sshd)
    result = run_cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "succeeded" in result.stdout
    run = tmp_path / "run"
    # Each role ran on its host, writing to that host's run directory; the local copies are equal.
    for role, host in (("ps-0", "host2"), ("worker-0", "host2"), ("worker-1", "host3")):
        remote = tmp_path / host / "run" / "roles" / role / "attempt-1.log"
        assert remote.is_file(), f"{role} did not write on {host}"
        assert (run / "roles" / role / "attempt-1.log").read_bytes() == remote.read_bytes()
    worker1 = (tmp_path / "host3" / "run" / "roles" / "worker-1" / "attempt-1.log").read_text()
    assert re.search(r"step \d+", worker1), worker1[-2000:]
    # The agent was sent, not installed: it is in the remote run directory, owner-only.
    agent = tmp_path / "host3" / "run" / "agent.pyz"
    assert agent.read_bytes() == artifact()
    assert (agent.parent.stat().st_mode & 0o777) == 0o700
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    connected = {e["host"] for e in events if e["kind"] == "host_state" and e["state"] == "connected"}
    assert connected == {"127.0.0.2", "127.0.0.3"}
    samples = list((run / "telemetry").glob("samples-*.jsonl"))
    assert {p.name for p in samples} >= {"samples-127-0-0-2.jsonl", "samples-127-0-0-3.jsonl"}
    assert_nothing_left_under(tmp_path, ports)
    assert not ssh_children()


def test_killed_ssh_connection_mid_run_reconnects_without_gap_or_duplicate(tmp_path: Path, sshd: SshServer):
    cluster, ports = write_remote_cluster(tmp_path, sshd, steps=400, sleep=0.02)
    spec, problems = parse_text(cluster.read_text(), cluster)
    assert spec is not None, problems
    run = RunDir.create(spec, path=tmp_path / "run")
    controller = Controller(spec, run)
    received: dict[tuple[str, int], list[tuple[int, str]]] = {}
    host_states: list[tuple[str, str]] = []
    lock = threading.Lock()

    def on_event(event: Event) -> None:
        with lock:
            if event.kind == "role_output" and event.role:
                received.setdefault((event.role, event.payload.attempt), []).append(
                    (event.payload.offset, event.payload.text)
                )
            elif event.kind == "host_state":
                host_states.append((event.payload.host, event.payload.state))

    controller.subscribe(on_event)
    controller.start()
    try:
        # Once worker:1 (on 127.0.0.3) trains, cut every SSH connection at once.
        deadline = time.time() + 120
        while not any(re.search(r"[Ss]tep\W+\d+", t) for _, t in received.get(("worker:1", 1), [])):
            assert time.time() < deadline and not controller.done, "worker:1 never trained"
            time.sleep(0.1)
        killed = ssh_children()
        assert len(killed) == 2
        for p in killed:
            p.send_signal(signal.SIGKILL)
        assert controller.wait(240), "the run did not end"
        status = controller.status()
    finally:
        controller.close()
    assert status.result == "succeeded", status
    for host in ("127.0.0.2", "127.0.0.3"):
        states = [s for h, s in host_states if h == host]
        assert "disconnected" in states and "reconnecting" in states, states
        assert states[-1] == "connected" or states.count("connected") >= 2, states
    for role, host, name in (
        ("ps:0", "host2", "ps-0"),
        ("worker:0", "host2", "worker-0"),
        ("worker:1", "host3", "worker-1"),
    ):
        on_host = (tmp_path / host / "run" / "roles" / name / "attempt-1.log").read_text()
        got = received[(role, 1)]
        # No gap, no duplicate: chunk offsets follow each other, and the text is the file's.
        assert "".join(t for _, t in got) == on_host, role
        offsets = [o for o, _ in got]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), role
        assert (run.path / "roles" / name / "attempt-1.log").read_text() == on_host
    assert_nothing_left_under(tmp_path, ports)
    assert not ssh_children()


def test_hostile_paths_are_quoted_and_run_nothing(tmp_path: Path, sshd: SshServer):
    marker = tmp_path / "pwned"
    hostile_root = f"{tmp_path}/runs; touch {marker}; echo $(touch {marker}2) `touch {marker}3`"
    text = f"""
name = "quoting"
strategy = "custom"
workdir = "{tmp_path}"
command = ["{sys.executable}", "-c", "print('hello from the far side')"]
ssh_config = "{sshd.config}"
[hosts."127.0.0.2"]
ssh = "127.0.0.2"
python = "{sys.executable}"
run_root = '{hostile_root}'
[jobs.worker]
tasks = ["127.0.0.2:{free_ports(1, "127.0.0.2")[0]}"]
"""
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(text)
    result = run_cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not any(tmp_path.glob("pwned*")), "a hostile path ran a command"
    # The directory with the hostile name exists, literally.
    literal = Path(hostile_root) / "run" / "roles" / "worker-0" / "attempt-1.log"
    assert "hello from the far side" in literal.read_text()
    assert_nothing_left_under(tmp_path, [])


@pytest.mark.parametrize(
    ("hosts_table", "task_host", "expected"),
    [
        ('[hosts."127.0.0.2"]\nssh = "-oProxyCommand=touch {m}"', "127.0.0.2", "hosts.127.0.0.2.ssh"),
        ('[hosts."127.0.0.2"]\nssh = "a;touch {m}"', "127.0.0.2", "hosts.127.0.0.2.ssh"),
        ('[hosts."a;touch {m}"]\nssh = "127.0.0.2"', "127.0.0.2", "hosts.a;touch"),
        ("", "-oProxyCommand", "jobs.worker.tasks[0]"),
        (
            '[hosts."127.0.0.2"]\nssh = "127.0.0.2"\npython = "python3; touch {m}"',
            "127.0.0.2",
            "hosts.127.0.0.2.python",
        ),
    ],
)
def test_hostile_host_names_are_refused_by_validation(tmp_path: Path, hosts_table: str, task_host: str, expected: str):
    marker = tmp_path / "pwned"
    text = f"""
name = "hostile"
strategy = "custom"
command = ["python", "-c", "pass"]
{hosts_table.format(m=marker)}
[jobs.worker]
tasks = ["{task_host}:2222"]
"""
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(text)
    result = run_cli("validate", "--remote", str(cluster), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert re.search(r":\d+", result.stderr), "the problem names its line"
    assert not marker.exists()


def test_kill_and_stop_act_on_a_remote_roles_whole_tree(tmp_path: Path, sshd: SshServer):
    ports = [free_ports(1, "127.0.0.2")[0], free_ports(1, "127.0.0.3")[0]]
    marker = f"{tmp_path}/stubborn-role"
    text = f"""
name = "stubborn"
strategy = "custom"
command = ["{sys.executable}", "{ROOT / "tests" / "helpers" / "stubborn.py"}", "{{port}}", "{marker}"]
stop_grace_s = 1
ssh_config = "{sshd.config}"
[hosts."127.0.0.2"]
python = "{sys.executable}"
run_root = "{tmp_path / "host2"}"
[hosts."127.0.0.3"]
ssh = "node3"
python = "{sys.executable}"
run_root = "{tmp_path / "host3"}"
[jobs.worker]
tasks = ["127.0.0.2:{ports[0]}", "127.0.0.3:{ports[1]}"]
"""
    spec, problems = parse_text(text, tmp_path / "cluster.toml")
    assert spec is not None, problems
    controller = Controller(spec, RunDir.create(spec, path=tmp_path / "run"))
    controller.start()

    def tree(port: str) -> list[psutil.Process]:
        """The processes of the role whose task port is ``port`` (stubborn.py PORT MARKER ...)."""
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            cmd = p.info["cmdline"] or []
            if p.info["status"] != psutil.STATUS_ZOMBIE and cmd[2:4] == [port, marker]:
                found.append(p)
        return found

    try:
        deadline = time.time() + 60
        while sum("detached=True" in "\n".join(controller.last_lines(r, 50)) for r in ("worker:0", "worker:1")) < 2:
            assert time.time() < deadline, [controller.last_lines(r) for r in ("worker:0", "worker:1")]
            time.sleep(0.1)
        assert len(tree(str(ports[1]))) == 3  # the role, a child, a setsid()'d grandchild
        controller.kill_role("worker:1").result(10)
        deadline = time.time() + 20
        while tree(str(ports[1])) or controller.status().role("worker:1").state != "stopped":
            assert time.time() < deadline, tree(str(ports[1]))
            time.sleep(0.1)
        assert len(tree(str(ports[0]))) == 3  # the other host's role runs on
        controller.stop_all().result(10)
        assert controller.wait(60)
    finally:
        controller.close()
    assert_nothing_left_under(tmp_path, ports)
