"""``ctl RUN chaos``: random kills of running roles through the control socket, each waited out until
the cluster is whole again, with the recovery times measured; bad options are one line each.

Real launches of light trainers (between-graph strategy, so recovery restarts a killed worker alone
and a killed ps with everything)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT, run_cli

CLUSTER = """
strategy = "between_graph"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=0", "--rate_hz=20", "--test_marker={marker}"]
stop_grace_s = 2
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}", "127.0.0.1:{p[3]}"]
[recovery]
backoff_s = 0.2
max_recoveries = {budget}
"""


def launch_light(tmp_path: Path, *, budget: int = 3) -> tuple[subprocess.Popen[str], Path, list[int]]:
    ports = free_ports(4)
    cluster = tmp_path / "c.toml"
    marker = f"chaos-{tmp_path.name}"
    cluster.write_text(CLUSTER.format(trainers=ROOT / "resources" / "trainers", p=ports, budget=budget, marker=marker))
    run_dir = tmp_path / "run"
    command = [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run_dir)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        reply = run_cli("ctl", str(run_dir), "status", "--json", timeout=30)
        roles = json.loads(reply.stdout)["roles"] if reply.returncode == 0 else []
        if len(roles) == 4 and all(r["state"] == "running" for r in roles):
            return proc, run_dir, ports
        time.sleep(0.3)
    proc.kill()
    raise AssertionError("the light cluster never ran")


def finish(proc: subprocess.Popen[str], run_dir: Path) -> str:
    run_cli("ctl", str(run_dir), "stop-all", timeout=30)
    out, _ = proc.communicate(timeout=60)
    return out


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_chaos_kills_random_workers_and_times_each_recovery(tmp_path: Path) -> None:
    proc, run_dir, ports = launch_light(tmp_path)
    try:
        chaos = run_cli(
            "ctl", str(run_dir), "chaos", "--count", "2", "--every", "0", "--roles", "worker", "--seed", "7",
            "--recover-within", "90", timeout=200,
        )  # fmt: skip
    finally:
        out = finish(proc, run_dir) if proc.poll() is None else proc.communicate()[0]
    assert chaos.returncode == 0, chaos.stdout + chaos.stderr
    kills = re.findall(r"chaos (\d)/2: SIGKILL (worker:\d) \(pid \d+", chaos.stdout)
    assert [n for n, _ in kills] == ["1", "2"], chaos.stdout
    assert len(re.findall(r"chaos \d/2: recovered in \d+\.\d s \(recovered: ", chaos.stdout)) == 2, chaos.stdout
    assert re.search(r"chaos: 2 of 2 kills, 2 recovered; recovery time median \d+\.\d s, max", chaos.stdout)
    # The launch saw exits it did not ask for, and recovered each: two recoveries in its journal.
    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    started = [r for r in records if r.get("kind") == "recovery" and r["phase"] == "started"]
    assert [r["cause"].split(" ")[0] for r in started] == [role for _, role in kills], started
    assert all(r["cause"].endswith("killed by SIGKILL") for r in started)
    assert "recovering: worker:" in out
    assert_nothing_left(ports, marker=f"chaos-{tmp_path.name}")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_chaos_says_so_when_the_cluster_does_not_come_back(tmp_path: Path) -> None:
    proc, run_dir, ports = launch_light(tmp_path, budget=0)  # recovery off: the first kill fails the run
    try:
        chaos = run_cli("ctl", str(run_dir), "chaos", "--roles", "ps", "--every", "0", timeout=200)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            finish(proc, run_dir)
    assert chaos.returncode == 1, chaos.stdout + chaos.stderr
    assert "chaos 1/1: SIGKILL ps:0" in chaos.stdout
    assert re.search(r"chaos 1/1: not recovered: the run is (done|failing|stopping)", chaos.stdout) or (
        "is not running" in chaos.stderr
    ), chaos.stdout + chaos.stderr
    assert "0 recovered" in chaos.stdout or "is not running" in chaos.stderr
    assert_nothing_left(ports, marker=f"chaos-{tmp_path.name}")


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--signal", "NOPE"], "chaos: --signal 'NOPE' is not a signal"),
        (["--count", "0"], "chaos: --count must be 1 or more, not 0"),
        (["--every", "nan"], "chaos: --every must be 0 or more seconds"),
    ],
)
def test_bad_chaos_options_are_one_line(tmp_path: Path, option: list[str], said: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"id": "r", "state": "running", "control_socket": "/nonexistent"}))
    result = run_cli("ctl", str(run_dir), "chaos", *option, timeout=60)
    assert result.returncode == 2, result
    assert said in result.stderr and "Traceback" not in result.stderr, result.stderr
