"""Recovery by strategy: what a failed role's recovery restarts, the [recovery] table, and real
launches of light trainers in which a role is killed, hangs, or keeps crashing (the TensorFlow
strategies themselves, resuming from their checkpoints, are in tests/faults/test_chaos.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from core.cluster.recovery_table import RecoveryConfig, action_words, recovery_group
from core.cluster.spec import dumps, parse_text
from tests.helpers.cli_launch import Launch
from tests.helpers.clusters import write_cluster
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT
from tests.helpers.waits import wait_for

PSS = ["chief:0", "ps:0", "ps:1", "worker:0", "worker:1", "evaluator:0"]


@pytest.mark.parametrize(
    ("strategy", "mode", "failed", "group"),
    [
        ("parameter_server", "auto", "worker:1", ("worker:1",)),
        ("parameter_server", "auto", "ps:1", ("ps:1", "chief:0")),
        ("parameter_server", "auto", "chief:0", ("chief:0",)),
        ("parameter_server", "auto", "evaluator:0", ("evaluator:0",)),
        ("multi_worker_mirrored", "auto", "worker:1", ("worker:1", "chief:0", "worker:0")),
        ("multi_worker_mirrored", "auto", "evaluator:0", ("evaluator:0",)),
        ("between_graph", "auto", "ps:0", ("ps:0", "chief:0", "ps:1", "worker:0", "worker:1", "evaluator:0")),
        ("between_graph", "auto", "worker:1", ("worker:1",)),
        ("custom", "auto", "worker:1", ()),
        ("between_graph", "role", "ps:0", ()),
        ("between_graph", "gang", "worker:1", ("worker:1", "chief:0", "worker:0", "evaluator:0")),
        ("between_graph", "cluster", "worker:1", ("worker:1", "chief:0", "ps:0", "ps:1", "worker:0", "evaluator:0")),
    ],
)
def test_what_a_recovery_restarts_by_strategy(strategy: str, mode: str, failed: str, group: tuple[str, ...]) -> None:
    assert recovery_group(strategy=strategy, mode=mode, roles=PSS, failed=failed) == group


def test_a_recovery_in_words() -> None:
    assert action_words(("ps:0", "chief:0"), 6) == "restarting ps:0 and chief:0"
    assert action_words(tuple(PSS), 6) == "restarting the cluster"
    assert action_words(("worker:1", "worker:0", "worker:2", "worker:3"), 9) == "restarting 4 workers"


def test_the_recovery_table_is_checked_and_written_back() -> None:
    base = (
        'strategy = "between_graph"\ncommand = ["python", "t.py"]\n'
        '[jobs.ps]\ntasks = ["127.0.0.1:2221"]\n[jobs.worker]\ntasks = ["127.0.0.1:2222"]\n'
    )
    spec, problems = parse_text(base)
    assert spec is not None and spec.recovery == RecoveryConfig() and spec.recovery.mode == "auto"
    spec, problems = parse_text(base + '[recovery]\nmode = "gang"\nmax_recoveries = 5\nbackoff_s = 0.5\n')
    assert spec is not None and spec.recovery == RecoveryConfig("gang", 5, 0.5), problems
    assert "[recovery]" in dumps(spec) and parse_text(dumps(spec))[0] == spec
    spec, problems = parse_text(base + '[recovery]\nmode = "everything"\nbackoff_s = 1e9\nmax_recovery = 2\n')
    said = {p.format() for p in problems}
    assert any("recovery.mode" in p and "auto, role, gang, cluster" in p for p in said), said
    assert any("recovery.backoff_s" in p and "at most 600" in p for p in said), said
    assert any("max_recovery" in p for p in said), said


# ---------------------------------------------------------------- real launches of light trainers

LIGHT = """
name = "light"
strategy = "{strategy}"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps={steps}", "--rate_hz=20"]
stop_grace_s = 2
stall_after_s = {stall}
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}", "127.0.0.1:{p[3]}"]
[recovery]
max_recoveries = {recoveries}
backoff_s = 0.5
"""


def light(
    tmp_path: Path, *, strategy: str, steps: int = 0, stall: float = 0, recoveries: int = 3
) -> tuple[Path, list[int]]:
    ports = free_ports(4)
    values = {"strategy": strategy, "steps": steps, "stall": stall, "recoveries": recoveries}
    return write_cluster(tmp_path, LIGHT, ports, **values), ports


def published(tmp_path: Path) -> tuple[Any, Any, list[Any]]:
    """A light between-graph cluster's spec, and a publisher whose events are kept in the list."""
    from core.run.publish import Publisher

    cluster, _ = light(tmp_path, strategy="between_graph")
    spec, problems = parse_text(cluster.read_text())
    assert spec is not None, problems
    events: list[Any] = []
    publisher = Publisher()
    publisher.subscribe(events.append)
    return spec, publisher, events


def journal(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if r.get("kind") == kind]


def running_at_step(launch: Launch, role: str, step: int) -> dict[str, Any]:
    launch.wait_role(role, "running", timeout_s=90)
    return wait_for(
        lambda: (r := launch.role(role))["state"] == "running" and (r["step"] or 0) >= step and r,
        90,
        f"{role} running past step {step}",
    )


@pytest.mark.slow
def test_a_killed_ps_restarts_every_role_of_a_between_graph_cluster(tmp_path: Path, launches: list[Launch]) -> None:
    cluster, ports = light(tmp_path, strategy="between_graph")
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    ps = running_at_step(launch, "ps:0", 0)
    running_at_step(launch, "worker:2", 20)
    os.kill(ps["pid"], signal.SIGKILL)
    recovered = wait_for(
        lambda: [r for r in journal(launch.run_dir, "recovery") if r["phase"] == "recovered"], 90, "recovered"
    )
    started = next(r for r in journal(launch.run_dir, "recovery") if r["phase"] == "started")
    assert started["cause"] == "ps:0 killed by SIGKILL" and started["number"] == 1 and started["of"] == 3
    assert started["action"] == "restarting the cluster" and set(started["roles"]) == {
        "ps:0",
        *(f"worker:{i}" for i in range(3)),
    }
    assert recovered[0]["resumed_step"] is not None and recovered[0]["step_before"] >= 20
    status = launch.status()
    assert status["phase"] == "running" and status["recovery"].startswith("recovered: resumed at step")
    assert all(r["attempt"] == 2 for r in status["roles"]), [(r["role"], r["attempt"]) for r in status["roles"]]
    # Every survivor was stopped as a stop always is (SIGTERM first), then started with the others.
    states = [(r["role"], r["state"]) for r in journal(launch.run_dir, "role_state")]
    assert ("worker:0", "stopping") in states and ("worker:0", "backoff") in states
    human = launch.ctl("status").stdout
    assert "recovered: resumed at step" in human, human
    assert launch.ctl("stop-all").returncode == 0
    _code, out = launch.finish(timeout_s=60)
    assert "recovering: ps:0 killed by SIGKILL; restarting the cluster (recovery 1 of 3)" in out, out
    assert_nothing_left(ports, marker=str(tmp_path))


@pytest.mark.slow
def test_a_killed_worker_of_a_mirrored_cluster_restarts_every_worker_and_not_the_ps(
    tmp_path: Path, launches: list[Launch]
) -> None:
    cluster, ports = light(tmp_path, strategy="multi_worker_mirrored")
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    worker = running_at_step(launch, "worker:1", 20)
    os.kill(worker["pid"], signal.SIGKILL)
    wait_for(lambda: [r for r in journal(launch.run_dir, "recovery") if r["phase"] == "recovered"], 90, "recovered")
    attempts = {r["role"]: r["attempt"] for r in launch.status()["roles"]}
    assert attempts == {"ps:0": 1, "worker:0": 2, "worker:1": 2, "worker:2": 2}, attempts
    assert launch.ctl("stop-all").returncode == 0
    launch.finish(timeout_s=60)
    assert_nothing_left(ports, marker=str(tmp_path))


@pytest.mark.slow
def test_a_hung_worker_is_recovered_once_its_stall_limit_passes(tmp_path: Path, launches: list[Launch]) -> None:
    cluster, ports = light(tmp_path, strategy="between_graph", stall=3)
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    worker = running_at_step(launch, "worker:1", 20)
    os.kill(worker["pid"], signal.SIGSTOP)  # hangs, never dies by itself
    try:
        wait_for(lambda: [r for r in journal(launch.run_dir, "recovery") if r["phase"] == "recovered"], 90, "recovered")
    finally:
        with contextlib.suppress(ProcessLookupError):  # killed by the recovery, as it should be
            os.kill(worker["pid"], signal.SIGCONT)
    started = next(r for r in journal(launch.run_dir, "recovery") if r["phase"] == "started")
    assert started["cause"].startswith("worker:1 stalled (no new step for"), started
    assert started["roles"] == ["worker:1"]
    assert launch.role("worker:1")["attempt"] == 2 and launch.role("worker:0")["attempt"] == 1
    assert launch.ctl("stop-all").returncode == 0
    launch.finish(timeout_s=60)
    assert_nothing_left(ports, marker=str(tmp_path))


CRASHING = """
name = "crashing"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=0", "--rate_hz=20"]
stop_grace_s = 2
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", {{ address = "127.0.0.1:{p[2]}", command = ["python", "-u", "{crasher}", "{counter}", "99"] }}]
[recovery]
max_recoveries = 2
backoff_s = 0.2
"""


@pytest.mark.slow
def test_a_trainer_that_always_crashes_ends_the_run_after_the_recoveries_in_a_row(
    tmp_path: Path, launches: list[Launch]
) -> None:
    ports = free_ports(3)
    crasher, counter = ROOT / "tests" / "helpers" / "crasher.py", tmp_path / "starts"
    cluster = write_cluster(tmp_path, CRASHING, ports, crasher=crasher, counter=counter)
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    code, out = launch.finish(timeout_s=120)
    assert code != 0
    phases = [(r["phase"], r["number"]) for r in journal(launch.run_dir, "recovery")]
    assert phases == [("started", 1), ("started", 2), ("failed", 2)], phases
    (failed,) = [r for r in journal(launch.run_dir, "recovery") if r["phase"] == "failed"]
    assert failed["detail"].startswith(
        "worker:1 exit code 1 (ZeroDivisionError: division by zero), after 2 recoveries in a row that did not get "
        "training past step"
    ), failed
    last = [r for r in journal(launch.run_dir, "role_state") if r["role"] == "worker:1"][-1]
    assert last["state"] == "failed" and last["error"] == "ZeroDivisionError: division by zero", last
    assert "recovery failed: worker:1 exit code 1 (ZeroDivisionError: division by zero)" in out, out
    assert counter.read_text() == "3"  # the first attempt and two recoveries
    assert_nothing_left(ports, marker=str(tmp_path))


def test_a_wait_on_a_role_a_recovery_brings_back_says_so_and_is_not_certain(tmp_path: Path) -> None:
    from core.controller.roles import RoleMachine
    from core.diagnosis.rules import Diagnosis
    from core.run.events import RoleWaiting

    spec, publisher, events = published(tmp_path)
    under_way = "recovering: ps:0 killed by SIGKILL; restarting the cluster (recovery 1 of 3)"
    roles = RoleMachine(
        spec,
        tmp_path,
        publisher,
        on_changed=lambda role, now: None,
        recovering=lambda peer: under_way if peer == "ps:0" else None,
    )
    wait = Diagnosis(
        role="worker:1",
        waiting=True,
        waiting_for="ps:0",
        cause="recovering",
        certain=True,
        message="worker:1 waits for ps:0",
        fix="Restart ps:0",
        line="",
        since=1.0,
    )
    other = Diagnosis(
        role="worker:2",
        waiting=True,
        waiting_for="worker:0",
        cause="silent",
        certain=True,
        message="worker:2 waits for worker:0",
        fix="Restart it",
        line="",
        since=1.0,
    )
    roles.waits([wait, other])
    said = {e.role: e.payload for e in events if isinstance(e.payload, RoleWaiting)}
    assert said["worker:1"].fix == f"nothing to do: {under_way}" and said["worker:1"].certain is False
    assert said["worker:2"].fix == "Restart it" and said["worker:2"].certain is True


def test_a_step_read_after_the_failure_is_where_training_was_not_progress_past_it(tmp_path: Path) -> None:
    """Seen in CI: the chief's "step 90" was read after its ps's exit (one read later). That step was
    made before the failure, so it is the step the recovery lost from (``step_before``), and it does
    not start the count of recoveries in a row over: the next failure is recovery 2, not 1 again."""
    from core.controller.recovery import Recovery
    from core.controller.roles import RoleMachine
    from core.run.events import RecoveryChanged
    from core.run.status import ClusterPhase

    spec, publisher, events = published(tmp_path)
    roles = RoleMachine(spec, tmp_path, publisher, on_changed=lambda role, now: None)
    # No role runs here, so the recovery stops and starts none: it never calls its RoleOps.
    recovery = Recovery(lambda: spec, roles, None, publisher, phase=lambda: ClusterPhase.RUNNING)  # type: ignore[arg-type]
    ps, worker = roles.find("ps:0"), roles.find("worker:0")
    for role in roles:
        role.attempt = 1
    worker.last_step = 80
    assert recovery.on_failure(ps, "ps:0 killed by SIGKILL")
    recovery.on_step(worker, 90)  # attempt 1's last step, read after the ps's exit
    recovery.tick(time.time())  # none of the group runs: it is started again
    for role in roles:
        role.attempt = 2
    assert recovery.on_failure(worker, "worker:0 exit code 1")
    said = [
        (e.payload.phase, e.payload.number, e.payload.step_before)
        for e in events
        if isinstance(e.payload, RecoveryChanged)
    ]
    assert said == [("started", 1, 80), ("started", 2, 90)], said
    recovery.tick(time.time())
    for role in roles:
        role.attempt = 3
    recovery.on_step(worker, 90)  # the restarted worker back at step 90: not past where it failed
    assert recovery.attempts_left() == spec.recovery.max_recoveries - 2
    recovery.on_step(worker, 91)
    assert recovery.attempts_left() == spec.recovery.max_recoveries


def test_an_explicit_never_keeps_a_job_out_of_the_recovery_and_is_written_back(tmp_path: Path) -> None:
    """``restart = "Never"`` written on a job opts it out of the cluster's recovery (its failure
    fails the run, as written); the default, no ``restart`` at all, is recovered."""
    from core.cluster.spec import load
    from core.cluster.spec.write import to_data

    path = tmp_path / "c.toml"
    path.write_text(
        'strategy = "between_graph"\ncommand = ["python", "t.py"]\n[jobs.ps]\ntasks = ["127.0.0.1:2222"]\n'
        '[jobs.worker]\ntasks = ["127.0.0.1:2223"]\nrestart = "Never"\n'
    )
    spec, problems = load(path)
    assert spec is not None, problems
    assert spec.jobs["worker"].restart.explicit and not spec.jobs["ps"].restart.explicit
    assert to_data(spec)["jobs"]["worker"]["restart"]["policy"] == "Never"  # kept when saved
    assert "restart" not in to_data(spec)["jobs"]["ps"]
