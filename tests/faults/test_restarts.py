"""Fault 1: SIGKILLed workers and ps, crash loops, and a lost worker under ParameterServerStrategy.

Complements tests/core/test_launch.py (a SIGKILLed worker restarted with OnFailure, or failing the
run with Never; a crash loop stopping at the maximum): here the latency of the report is measured,
the back-off is checked, and the ps and TF2 cases are covered.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli_launch import Launch, run_dir_of
from tests.helpers.clusters import between_graph, light_between_graph, write_cluster
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT, run_cli

pytestmark = pytest.mark.slow
SAMPLE_PERIOD_S = 1.0  # the agent's default sample period


def role_events(run_dir: Path, role: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e for e in events if e["kind"] == "role_state" and e["role"] == role]


def first_after(run_dir: Path, role: str, t: float, states: tuple[str, ...]) -> dict[str, Any]:
    return next(e for e in role_events(run_dir, role) if e["t"] >= t and e["state"] in states)


def test_sigkilled_worker_is_reported_within_a_sample_period_with_its_last_lines_then_backs_off(
    tmp_path: Path, launches: list[Launch]
):
    # The light trainer: the report of a killed role and its back-off are TowerDeck's (a TensorFlow
    # worker restarted into its cluster: tests/core/test_launch.py's
    # test_sigkilled_worker_is_restarted_with_on_failure_and_the_run_succeeds).
    cluster, ports = light_between_graph(tmp_path, policy="OnFailure")
    # A back-off long enough for `ctl status` (a fresh python) to see it on a loaded machine.
    cluster.write_text(cluster.read_text().replace("backoff_s = 0.5", "backoff_s = 10"))
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    worker = launch.wait_role("worker:1", "running")
    launch.wait_output("worker:1", r"Step: \d+")
    killed_at = time.time() - 0.01  # events are stamped to the millisecond
    os.kill(worker["pid"], signal.SIGKILL)
    backoff = launch.wait_role("worker:1", "backoff", timeout_s=10)
    event = first_after(launch.run_dir, "worker:1", killed_at, ("backoff", "failed"))
    latency_s = event["t"] - killed_at
    print(f"SIGKILL -> backoff published in {latency_s * 1000:.0f} ms")
    assert latency_s < SAMPLE_PERIOD_S, latency_s
    assert event["signal"] == signal.SIGKILL and event["returncode"] is None
    assert backoff["signal"] == signal.SIGKILL and backoff["pid"] is None
    # One kill of a worker that was training is a restart, not a crash loop (that takes a failure
    # before the attempt ran healthily, or a second one in a row).
    assert backoff["crash_looping"] is False, backoff
    assert backoff["detail"] == "killed by SIGKILL; restart 1 of 2 in 10 s (OnFailure)"
    assert any(line.startswith("Step:") for line in backoff["last_lines"]), backoff["last_lines"]
    human = launch.ctl("status")
    assert re.search(r"worker:1\s+backoff .*killed by SIGKILL; restart 1 of 2", human.stdout), human.stdout
    assert re.search(r"\|\s+Step: \d+", human.stdout), human.stdout  # the last lines, shown
    restarted = launch.wait_role("worker:1", "running", attempt=2)
    start_event = first_after(launch.run_dir, "worker:1", event["t"], ("starting",))
    assert start_event["t"] - event["t"] >= 4.0  # the back-off was waited out
    assert restarted["restarts"] == 1 and restarted["pid"] != worker["pid"]
    assert launch.ctl("stop-all").returncode == 0
    launch.finish()
    assert_nothing_left(ports, marker="\0never-matches\0")


def test_sigkilled_ps_fails_the_run_at_once_names_it_and_frees_every_port(tmp_path: Path, launches: list[Launch]):
    cluster, ports = between_graph(tmp_path, steps=100000, sleep=0.01)  # ps: no restart policy
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    ps = launch.wait_role("ps:0", "running")
    launch.wait_output("worker:0", r"Step: \d+")
    killed_at = time.time() - 0.01
    os.kill(ps["pid"], signal.SIGKILL)
    code, out = launch.finish()
    event = first_after(launch.run_dir, "ps:0", killed_at, ("failed",))
    latency_s = event["t"] - killed_at
    print(f"SIGKILL of the ps -> failed published in {latency_s * 1000:.0f} ms")
    assert latency_s < SAMPLE_PERIOD_S and event["signal"] == signal.SIGKILL
    assert code == 1, out
    assert "ps:0 failed: killed by SIGKILL" in out
    assert "last output of ps:0" in out and "ps 0 serving on 127.0.0.1:" in out.split("last output of ps:0")[1], out
    # The workers, which cannot train without their ps, were stopped by the launcher.
    for worker in ("worker:0", "worker:1"):
        assert role_events(launch.run_dir, worker)[-1]["state"] == "stopped"
    assert_nothing_left(ports, marker="\0never-matches\0")


def test_crash_loop_backs_off_exponentially_and_gives_up_saying_so(tmp_path: Path):
    ports = free_ports(1)
    cluster = write_cluster(
        tmp_path,
        'strategy = "custom"\ncommand = ["python", "-c", "import sys; print(\'cannot open dataset\'); sys.exit(1)"]\n'
        '[jobs.worker]\ntasks = ["127.0.0.1:{p[0]}"]\n'
        'restart = {{ policy = "OnFailure", max_restarts = 3, backoff_s = 0.4, backoff_max_s = 1.0 }}\n',
        ports,
    )
    result = run_cli("launch", str(cluster))
    assert result.returncode == 1, result.stdout
    run = run_dir_of(result)
    events = role_events(run, "worker:0")
    backoffs = [e for e in events if e["state"] == "backoff"]
    starts = [e for e in events if e["state"] == "starting"]
    assert [e["detail"] for e in backoffs] == [
        "exit code 1 (cannot open dataset); restart 1 of 3 in 0.4 s (OnFailure)",
        "exit code 1 (cannot open dataset); restart 2 of 3 in 0.8 s (OnFailure)",
        "exit code 1 (cannot open dataset); restart 3 of 3 in 1 s (OnFailure)",  # capped by backoff_max_s
    ]
    waited = [start["t"] - backoff["t"] for backoff, start in zip(backoffs, starts[1:], strict=True)]
    assert [round(w, 1) >= d for w, d in zip(waited, (0.4, 0.8, 1.0), strict=True)] == [True] * 3, waited
    assert (
        events[-1]["state"] == "failed"
        and events[-1]["detail"] == "exit code 1 (cannot open dataset); gave up after 3 restarts"
    )
    assert "worker:0 failed: exit code 1 (cannot open dataset); gave up after 3 restarts" in result.stdout
    assert "last output of worker:0" in result.stdout and "cannot open dataset" in result.stdout
    assert len(list((run / "roles" / "worker-0").glob("attempt-*.log"))) == 4


@pytest.mark.parametrize(("reset_after_s", "gives_up"), [(1.5, False), (0, True)])
def test_a_long_healthy_stretch_starts_a_fresh_restart_budget(tmp_path: Path, reset_after_s: float, gives_up: bool):
    """A week-long run with a crash a day must not add up to "gave up": a role that ran for
    ``reset_after_s`` before it failed gets its budget back. Here each attempt runs 2.5 s, then
    fails; max_restarts = 1. With the reset it is restarted every time (the test stops it after
    4 attempts); with ``reset_after_s = 0`` the second failure is final."""
    ports = free_ports(1)
    cluster = write_cluster(
        tmp_path,
        'strategy = "custom"\ncommand = ["python", "-c", "import sys, time; time.sleep(2.5); sys.exit(1)"]\n'
        "stop_grace_s = 1\n"
        '[jobs.worker]\ntasks = ["127.0.0.1:{p[0]}"]\n'
        'restart = {{ policy = "OnFailure", max_restarts = 1, backoff_s = 0.2, reset_after_s = {reset} }}\n',
        ports,
        reset=reset_after_s,
    )
    launcher = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 90
        while time.time() < deadline and launcher.poll() is None:
            logs = list((tmp_path / "run" / "roles" / "worker-0").glob("attempt-*.log"))
            if len(logs) >= 4:
                break
            time.sleep(0.2)
        if gives_up:
            assert launcher.wait(60) == 1
        else:
            assert launcher.poll() is None, "gave up although every attempt ran long enough to reset"
            launcher.send_signal(signal.SIGINT)
            launcher.wait(60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        output = launcher.communicate()[0]
    backoffs = [e["detail"] for e in role_events(tmp_path / "run", "worker:0") if e["state"] == "backoff"]
    if gives_up:
        assert backoffs == ["exit code 1; restart 1 of 1 in 0.2 s (OnFailure)"], backoffs
        assert "gave up after 1 restart" in output
    else:
        assert len(backoffs) >= 3 and set(backoffs) == {"exit code 1; restart 1 of 1 in 0.2 s (OnFailure)"}, backoffs
    assert_nothing_left(ports, marker=str(tmp_path))


@pytest.mark.parametrize(
    ("how", "expected", "detail"),
    [
        ("kill", ["starting", "backoff", "starting", "failed"], "killed by SIGKILL; gave up after 1 restart"),
        ("exit", ["starting", "failed"], "exit code 3"),  # codes 1-127 are permanent errors
    ],
)
def test_exit_code_policy_restarts_a_signal_but_not_a_permanent_error(
    tmp_path: Path, how: str, expected: list[str], detail: str
):
    ports = free_ports(1)
    code = "import os, signal, sys; os.kill(os.getpid(), signal.SIGKILL) if sys.argv[1] == 'kill' else sys.exit(3)"
    cluster = write_cluster(
        tmp_path,
        'strategy = "custom"\ncommand = ["python", "-c", "{code}", "{how}"]\n[jobs.worker]\n'
        'tasks = ["127.0.0.1:{p[0]}"]\nrestart = {{ policy = "ExitCode", max_restarts = 1, backoff_s = 0.1 }}\n',
        ports,
        code=code,
        how=how,
    )
    result = run_cli("launch", str(cluster))
    assert result.returncode == 1, result.stdout
    events = role_events(run_dir_of(result), "worker:0")
    # A python that takes longer than start_s to reach its first line (a loaded machine) counts as
    # running first: that is not what the policy decides (issue 19).
    assert [e["state"] for e in events if e["state"] != "running"] == expected
    assert events[-1]["detail"] == detail


PS_CLUSTER = """
strategy = "parameter_server"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "parameter_server.py", "--train_steps={steps}", "--log_every=20", "--step_sleep=0.01"]
stop_grace_s = 3
[jobs.chief]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.ps]
tasks = ["127.0.0.1:{p[1]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[2]}", "127.0.0.1:{p[3]}"]
restart = {{ policy = "OnFailure", max_restarts = 3, backoff_s = 1.0 }}
"""


def test_parameter_server_strategy_survives_a_sigkilled_worker_and_the_chief_succeeds(
    tmp_path: Path, launches: list[Launch]
):
    ports = free_ports(4)
    cluster = write_cluster(tmp_path, PS_CLUSTER, ports, steps=1500)
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    worker = launch.wait_role("worker:1", "running", timeout_s=90)
    launch.wait_output("chief:0", r"loss = [0-9.]+, step = \d+", timeout_s=90)
    os.kill(worker["pid"], signal.SIGKILL)
    launch.wait_role("worker:1", "running", attempt=2, timeout_s=60)
    code, out = launch.finish(timeout_s=240)
    assert code == 0, out
    assert "killed by SIGKILL; restart 1 of 3" in out and "training finished: chief succeeded" in out
    chief_log = (launch.run_dir / "roles" / "chief-0" / "attempt-1.log").read_text()
    steps = [int(s) for s in re.findall(r"loss = [0-9.]+, step = (\d+)", chief_log)]
    assert steps and steps[-1] >= 1400, steps[-5:]  # the chief went on to the end, in one attempt
    assert not (launch.run_dir / "roles" / "chief-0" / "attempt-2.log").exists()
    assert role_events(launch.run_dir, "chief:0")[-1]["state"] == "succeeded"
    assert_nothing_left(ports, marker="\0never-matches\0")
