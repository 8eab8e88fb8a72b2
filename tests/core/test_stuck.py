"""Stuck clusters, reproduced with real TensorFlow: the issue's classic between-graph case.

The trainer's ``--ready_wait=monitored`` makes the non-chief wait the way the classic examples do
(MonitoredTrainingSession's 30 s checks), and ``--chief_start_delay_s`` makes its first check
certainly come before the chief has initialised the variables. The chief then trains briefly
and exits; the non-chief's next check needs the chief and waits for it forever.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli_launch import Launch
from tests.helpers.clusters import write_cluster
from tests.helpers.controllers import started_controller
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import run_cli
from tests.helpers.waits import wait_for

pytestmark = pytest.mark.slow

STUCK = """
name = "stuck"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "between_graph.py", "--train_steps=200", "--log_every=20", "--ready_wait=monitored",
           "--chief_start_delay_s=3", "--handshake_dir={marker}", "--tf_verbosity=info"]
stop_grace_s = 3
{extra}
[env]
TF_CPP_MIN_LOG_LEVEL = "{log_level}"
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
"""
CREATE_SESSION = re.compile(
    r"I0000 00:00:(?P<t>\d+\.\d+) .*CreateSession still waiting for response from worker: /job:worker/replica:0/task:0"
)


def stuck_cluster(tmp_path: Path, extra: str = "", log_level: int = 0) -> tuple[Path, list[int]]:
    ports = free_ports(3)
    return write_cluster(tmp_path, STUCK, ports, extra=extra, log_level=log_level), ports


def events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == kind]


def test_non_chief_waiting_for_an_exited_chief_is_diagnosed_with_the_peer_and_the_fix(
    tmp_path: Path, launches: list[Launch]
):
    cluster, ports = stuck_cluster(tmp_path)
    run_dir = tmp_path / "run"
    launch = Launch(cluster, run_dir)
    launches.append(launch)
    log = run_dir / "roles" / "worker-1" / "attempt-1.log"

    # First, the wait for the chief's variables (a Python INFO line): not yet certain.
    launch.wait_output("worker:1", r"Waiting for model to be ready", timeout_s=120)
    launch.wait_role("worker:0", "succeeded", timeout_s=120)
    early = wait_for(
        lambda: [e for e in events(run_dir, "role_waiting") if e["role"] == "worker:1" and e["waiting"]],
        15,
        "a diagnosis of worker:1 once the chief has exited",
    )[0]
    assert early["waiting_for"] == "worker:0" and early["cause"] == "model_ready" and early["certain"] is False
    assert "Waiting for model to be ready" in early["line"]

    # Then TensorFlow's own C++ line: the wait is certain, the diagnosis follows within seconds.
    match = wait_for(lambda: CREATE_SESSION.search(log.read_text(errors="replace")), 90, "CreateSession still waiting")
    printed_at = float(match["t"])  # TensorFlow's own timestamp of the line
    diagnosis = wait_for(
        lambda: [e for e in events(run_dir, "role_waiting") if e["role"] == "worker:1" and e.get("certain")],
        10,
        "the certain diagnosis",
    )[0]
    assert diagnosis["t"] - printed_at < 3.0, diagnosis["t"] - printed_at
    assert diagnosis["waiting_for"] == "worker:0" and diagnosis["cause"] == "create_session"
    exited = next(e for e in events(run_dir, "role_state") if e["role"] == "worker:0" and e["state"] == "succeeded")
    ago = re.search(
        r"worker:1 is waiting for worker:0, which exited \(succeeded, exit code 0\) (\d+) s ago; it will wait forever\.",
        diagnosis["message"],
    )
    assert ago, diagnosis["message"]
    assert abs(int(ago[1]) - (diagnosis["t"] - exited["t"])) <= 1.5
    assert "device_filters" in diagnosis["fix"] and 'success_policy = "chief"' in diagnosis["fix"]

    status = launch.role("worker:1")
    assert status["state"] == "running" and status["waiting_for"] == "worker:0"
    assert "will wait forever" in status["waiting_message"]
    human = launch.ctl("status").stdout
    assert re.search(r"WAITING +worker:1 is waiting for worker:0", human), human
    assert "fix: Stop worker:1" in human

    # The fix the message gives: stop worker:1. The run then ends, the wait cleared.
    assert launch.ctl("stop", "worker:1").returncode == 0
    code, out = launch.finish(60)
    assert code == 0, out
    assert re.search(r"worker:1 +WAITING +worker:1 is waiting for worker:0, which exited", out), out
    assert re.search(r"fix: Stop worker:1, or make the chief wait", out), out
    cleared = [e for e in events(run_dir, "role_waiting") if e["role"] == "worker:1" and not e["waiting"]]
    assert cleared, "the wait is cleared when worker:1 stops"
    assert_nothing_left(ports, marker=str(run_dir))


def test_success_policy_chief_ends_the_run_when_the_chief_succeeds(tmp_path: Path):
    cluster, ports = stuck_cluster(tmp_path, extra='success_policy = "chief"')
    result = run_cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'training finished: worker:0 succeeded (success_policy = "chief")' in result.stdout
    assert re.search(r"worker:1 +stopped", result.stdout), result.stdout
    assert not events(tmp_path / "run", "role_waiting"), "no wait is left to diagnose"
    assert_nothing_left(ports, marker=str(tmp_path / "run"))


def test_silent_wait_and_start_stall_when_tensorflow_logs_are_hidden(tmp_path: Path):
    """With TF_CPP_MIN_LOG_LEVEL=1 TensorFlow says nothing: the roles' states still tell."""
    cluster, ports = stuck_cluster(tmp_path, extra="start_stall_after_s = 40", log_level=1)
    cluster.write_text(cluster.read_text().replace(', "--tf_verbosity=info"', ""))
    controller, seen = started_controller(cluster, tmp_path / "run", ("role_waiting", "role_stalled", "role_state"))
    try:
        waiting = wait_for(
            lambda: [e for e in seen if e.kind == "role_waiting" and e.payload.waiting], 150, "a silent wait"
        )[0]
        exited = next(
            e for e in seen if e.kind == "role_state" and e.role == "worker:0" and e.payload.state == "succeeded"
        )
        assert waiting.role == "worker:1" and waiting.payload.waiting_for == "worker:0"
        assert waiting.payload.cause == "silent"
        # grace_s (10 s) after the chief exited, plus a tick or two (many on a loaded machine: 19 s seen).
        assert 9.5 <= waiting.t - exited.t < 30, waiting.t - exited.t
        assert re.search(r"has printed no step for \d+ s, and worker:0 exited \(succeeded", waiting.payload.message)
        assert controller.status().role("worker:1").waiting_for == "worker:0"

        stalled = wait_for(
            lambda: [e for e in seen if e.kind == "role_stalled" and e.role == "worker:1" and e.payload.stalled],
            60,
            "a start stall of worker:1",
        )[0]
        started = next(
            e for e in seen if e.kind == "role_state" and e.role == "worker:1" and e.payload.state == "starting"
        )
        assert stalled.role == "worker:1" and stalled.payload.step is None
        assert 40 <= stalled.t - started.t < 43, stalled.t - started.t
        # With TensorFlow's INFO logs hidden this worker may print nothing at all: its last line, if any.
        last = [line.strip() for line in controller.last_lines("worker:1", 5) if line.strip()]
        said = f"last printed: {last[-1][:300]!r}" if last else "it printed nothing"
        assert re.fullmatch(r"no step in 4\d s since it started; .*", stalled.payload.detail), stalled.payload.detail
        assert stalled.payload.detail.endswith(said)
        # The ps never trains: it is never judged (worker:0 may be, on a slow machine, until its first step).
        assert "ps:0" not in {e.role for e in seen if e.kind == "role_stalled"}
    finally:
        controller.close()
    assert_nothing_left(ports, marker=str(tmp_path / "run"))


def test_workers_whose_ps_was_stopped_are_diagnosed_as_waiting_for_it(tmp_path: Path):
    """A classic worker whose ps went away hangs without a word (measured: no error, no line)."""
    from tests.helpers.clusters import between_graph

    cluster, ports = between_graph(tmp_path, steps=100000, sleep=0.02)
    controller, seen = started_controller(cluster, tmp_path / "run", ("role_waiting", "role_state", "metrics"))
    try:
        wait_for(
            lambda: {e.role for e in seen if e.kind == "metrics"} == {"worker:0", "worker:1"}, 120, "both training"
        )
        assert not [e for e in seen if e.kind == "role_waiting"]
        controller.stop_role("ps:0").result(30)
        stopped = wait_for(
            lambda: [e for e in seen if e.kind == "role_state" and e.role == "ps:0" and e.payload.state == "stopped"],
            30,
            "ps:0 stopped",
        )[0]
        waits = wait_for(
            lambda: len(w := [e for e in seen if e.kind == "role_waiting" and e.payload.waiting]) == 2 and w,
            60,
            "both workers waiting",
        )
        for wait in waits:
            assert wait.payload.waiting_for == "ps:0" and wait.payload.cause == "silent"
            assert "and ps:0 exited (stopped, killed by SIGTERM)" in wait.payload.message
            assert wait.payload.fix.startswith("Restart ps:0")
            # The 10 s grace (or three of the worker's own step gaps) after its last step.
            assert 9.5 <= wait.t - stopped.t < 16, wait.t - stopped.t
        assert controller.status().role("worker:1").waiting_for == "ps:0"
    finally:
        controller.close()
    assert_nothing_left(ports, marker=str(tmp_path / "run"))
