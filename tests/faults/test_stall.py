"""Fault 2: a hung role (SIGSTOP, or a trainer stuck in a loop) is marked stalled and can be killed."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli_launch import Launch
from tests.helpers.clusters import light_between_graph, write_cluster
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left

pytestmark = pytest.mark.slow

STALL_AFTER_S = 3.0


def wait_for(predicate: Any, timeout_s: float, what: str) -> Any:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_sigstopped_worker_is_marked_stalled_unstalled_on_sigcont_and_killed_by_the_user(
    tmp_path: Path, launches: list[Launch]
):
    # The light trainer: a stall is TowerDeck's judgement of a role's output, not a TensorFlow fact
    # (the same SIGSTOP on a TensorFlow worker: tests/gui/test_main_window.py's
    # test_a_hung_worker_is_marked_stalled_and_killed_from_the_window).
    cluster, ports = light_between_graph(tmp_path)
    cluster.write_text(
        cluster.read_text().replace("stop_grace_s = 3", f"stop_grace_s = 3\nstall_after_s = {STALL_AFTER_S}")
    )
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    worker = launch.wait_role("worker:1", "running")
    launch.wait_output("worker:1", r"Step: \d+")
    wait_for(lambda: launch.role("worker:1")["step"] is not None, 30, "a step of worker:1")
    assert launch.role("worker:1")["stalled"] is False

    os.kill(worker["pid"], signal.SIGSTOP)
    stopped_at = time.time()
    stalled = wait_for(lambda: (r := launch.role("worker:1"))["stalled"] and r, 30, "worker:1 stalled")
    detected_after_s = time.time() - stopped_at
    assert stalled["state"] == "running" and stalled["stalled_for_s"] >= STALL_AFTER_S
    # Generous bound: the threshold plus the time for the last output to arrive and a poll or two.
    assert detected_after_s < STALL_AFTER_S + 5, detected_after_s
    # The other worker trains on (asynchronous updates): it is not stalled.
    assert launch.role("worker:0")["stalled"] is False
    human = launch.ctl("status")
    assert re.search(r"worker:1\s+running .* STALLED for \d+ s", human.stdout), human.stdout
    # The launch's once-a-second progress line says so too (a SIGCONT within the second the stall
    # was marked left it no line to say it in, under load).
    launch.wait_said(r"worker:1\s+step \d+ .*STALLED for \d+ s")

    os.kill(worker["pid"], signal.SIGCONT)
    wait_for(lambda: not launch.role("worker:1")["stalled"], 30, "worker:1 unstalled after SIGCONT")

    os.kill(worker["pid"], signal.SIGSTOP)
    wait_for(lambda: launch.role("worker:1")["stalled"], 30, "worker:1 stalled again")
    assert launch.ctl("kill", "worker:1").returncode == 0
    killed = launch.wait_role("worker:1", "stopped")
    assert killed["signal"] == signal.SIGKILL and killed["stalled"] is False

    assert launch.ctl("stop-all").returncode == 0
    code, out = launch.finish()
    assert code == 1, out
    assert re.search(r"worker:1\s+STALLED\s+no new step for \d+ s \(stall_after_s = 3\)", out), out
    assert re.search(r"worker:1\s+unstalled\s+step \d+", out), out
    assert re.search(r"worker:1\s+step \d+ .*STALLED for \d+ s", out), out  # the progress line
    assert "worker:0     STALLED" not in out
    assert_nothing_left(ports, marker="\0never-matches\0")


STUCK_TRAINER = """
import sys, time
for step in range(1, 21):
    print(f"iter {step} loss={1.0 / step:.4f}", flush=True)
    time.sleep(0.05)
# A hung collective: the process is alive and even prints, but no step ever comes.
while True:
    print("waiting for the other workers...", flush=True)
    time.sleep(0.5)
"""


def test_trainer_stuck_in_a_loop_is_stalled_through_the_controller_api(tmp_path: Path):
    """As the window sees it: RoleStatus.stalled / stalled_for_s and role_stalled events."""
    from core.cluster.spec import load
    from core.controller.controller import Controller
    from core.run.events import Event
    from core.run.rundir import RunDir

    trainer = tmp_path / "stuck.py"
    trainer.write_text(STUCK_TRAINER)
    ports = free_ports(2)
    cluster = write_cluster(
        tmp_path,
        'strategy = "custom"\ncommand = ["python", "-u", "{trainer}"]\nstall_after_s = 2\nstop_grace_s = 1\n'
        "metric_patterns = ['iter (?P<step>\\d+) loss=(?P<loss>[0-9.]+)']\n"
        '[jobs.worker]\ntasks = ["127.0.0.1:{p[0]}", "127.0.0.1:{p[1]}"]\n',
        ports,
        trainer=trainer,
    )
    spec, problems = load(cluster)
    assert spec is not None, problems
    assert spec.stall_after_s == 2.0
    controller = Controller(spec, RunDir.create(spec, path=tmp_path / "run"))
    events: list[Event] = []
    controller.subscribe(lambda e: events.append(e) if e.kind in ("role_stalled", "metrics") else None)
    controller.start()
    try:
        wait_for(
            lambda: sum(1 for e in events if e.kind == "role_stalled" and e.payload.stalled) == 2, 60, "both stalled"
        )
        status = controller.status()
        for role in status.roles:
            assert role.state == "running" and role.stalled and role.step == 20
            assert role.stalled_for_s is not None and role.stalled_for_s >= 2.0
        stall = next(e for e in events if e.kind == "role_stalled" and e.role == "worker:0")
        assert stall.payload.step == 20 and stall.payload.stall_after_s == 2.0 and stall.payload.stalled_for_s >= 2.0
        # Measured from the last step's metrics event: flagged at the threshold, not long after.
        last_step_t = max(e.t for e in events if e.kind == "metrics" and e.role == "worker:0")
        assert 2.0 <= stall.t - last_step_t < 4.0, stall.t - last_step_t
        assert controller.kill_role("worker:0").result(10).startswith("killing")
        wait_for(lambda: controller.status().role("worker:0").state == "stopped", 30, "worker:0 killed")
        assert not controller.status().role("worker:0").stalled
        assert controller.status().role("worker:1").stalled
    finally:
        controller.close()
    assert_nothing_left(ports, marker=str(trainer))


def test_stall_after_s_is_validated_like_the_rest(tmp_path: Path):
    from core.cluster.spec import parse_text

    base = 'strategy = "custom"\ncommand = ["python", "t.py"]\n[jobs.worker]\ntasks = ["127.0.0.1:2223"]\n'
    spec, problems = parse_text(base)
    assert spec is not None and spec.stall_after_s == 300.0
    for bad, message in (("-1", "must be at least 0"), ('"soon"', "must be a number, not a string")):
        spec, problems = parse_text(f"stall_after_s = {bad}\n" + base)
        assert spec is None
        (problem,) = problems
        assert problem.field == "stall_after_s" and message in problem.message and problem.line == 1, problem
        assert problem.hint
    spec, _ = parse_text("stall_after_s = 0\n" + base)
    assert spec is not None and spec.stall_after_s == 0.0
