"""Stuck clusters, reproduced with real TensorFlow: MultiWorkerMirroredStrategy's coordination service.

worker:0, the coordination service's leader, waits for every task to connect before any
collective runs. worker:1 here is a real worker whose start is delayed (still preparing, say) and
is then stopped: worker:0 printed ``Waiting for 1/2 tasks to connect.`` / ``Example stragglers:`` /
``/job:worker/replica:0/task:1`` once, and (measured, TF 2.21) nothing more for minutes after.
"""

from __future__ import annotations

import re

import pytest

from tests.helpers.clusters import write_cluster
from tests.helpers.controllers import started_controller
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.waits import wait_for

pytestmark = pytest.mark.slow

MWMS_PEER_LATE = """
name = "mwms-peer-late"
strategy = "multi_worker_mirrored"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "multi_worker_mirrored.py", "--train_steps=200", "--log_every=20"]
stop_grace_s = 3
[env]
TF_CPP_MIN_LOG_LEVEL = "0"
[jobs.worker]
tasks = ["127.0.0.1:{p[0]}", {{ address = "127.0.0.1:{p[1]}", command = ["sh", "-c", "sleep 600; exec python -u multi_worker_mirrored.py"] }}]
"""
STRAGGLER = re.compile(r"I0000 00:00:(?P<t>\d+\.\d+) .*coordination_service\.cc:\d+\] Example stragglers:")


def test_the_leader_waiting_for_a_worker_that_never_connected_is_diagnosed(tmp_path):

    ports = free_ports(2)
    controller, seen = started_controller(
        write_cluster(tmp_path, MWMS_PEER_LATE, ports), tmp_path / "run", ("role_waiting", "role_state")
    )
    try:
        log = lambda: "\n".join(controller.last_lines("worker:0", 50))  # noqa: E731
        match = wait_for(lambda: STRAGGLER.search(log()), 120, "worker:0 naming its straggler")
        assert re.search(r"Waiting for 1/2 tasks to connect\.", log())
        # worker:1 is running (not yet TensorFlow): the normal start-up wait, nothing said.
        assert not [e for e in seen if e.kind == "role_waiting"]

        controller.stop_role("worker:1").result(30)
        stopped = wait_for(
            lambda: [
                e for e in seen if e.kind == "role_state" and e.role == "worker:1" and e.payload.state == "stopped"
            ],
            30,
            "worker:1 stopped",
        )[0]
        wait = wait_for(
            lambda: [e for e in seen if e.kind == "role_waiting" and e.payload.waiting], 15, "worker:0's wait"
        )[0]
        assert wait.role == "worker:0" and wait.payload.waiting_for == "worker:1"
        assert wait.payload.cause == "coordination_connect" and wait.payload.certain is True
        assert wait.t - stopped.t < 3.0, wait.t - stopped.t
        assert wait.payload.message.startswith(
            "worker:0 is waiting for worker:1 to connect to the coordination service, and worker:1 exited (stopped"
        ), wait.payload.message
        assert wait.payload.message.endswith("; it will wait forever.")
        assert wait.payload.line.endswith("Example stragglers: /job:worker/replica:0/task:1")
        assert wait.payload.since >= float(match["t"]) - 1.0  # when the line arrived
        assert wait.payload.fix.startswith("Restart worker:1")
        status = controller.status().role("worker:0")
        assert status.waiting_for == "worker:1"
    finally:
        controller.close()
    assert_nothing_left(ports, marker=str(tmp_path / "run"))


PS_ONE_WORKER = """
name = "ps-one-worker"
strategy = "parameter_server"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "parameter_server.py", "--train_steps=100000", "--log_every=20", "--step_sleep=0.05"]
stop_grace_s = 3
[jobs.chief]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.ps]
tasks = ["127.0.0.1:{p[1]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[2]}"]
"""


def test_the_ps_chief_that_lost_its_only_worker_is_diagnosed_as_waiting_for_it(tmp_path):
    """Measured (TF 2.21): the chief prints ``Worker /job:worker/replica:0/task:0 failed with
    UnavailableError()`` (a Python ERROR log, shown by default) and then nothing, for good."""
    ports = free_ports(3)
    controller, seen = started_controller(
        write_cluster(tmp_path, PS_ONE_WORKER, ports), tmp_path / "run", ("role_waiting", "role_state", "metrics")
    )
    try:
        wait_for(lambda: [e for e in seen if e.kind == "metrics" and e.role == "chief:0"], 120, "the chief training")
        assert not [e for e in seen if e.kind == "role_waiting"]
        controller.stop_role("worker:0").result(30)
        stopped = wait_for(
            lambda: [
                e for e in seen if e.kind == "role_state" and e.role == "worker:0" and e.payload.state == "stopped"
            ],
            30,
            "worker:0 stopped",
        )[0]
        wait = wait_for(
            lambda: [e for e in seen if e.kind == "role_waiting" and e.payload.waiting], 30, "the chief's wait"
        )[0]
        assert wait.role == "chief:0" and wait.payload.waiting_for == "worker:0"
        assert wait.payload.cause == "worker_lost" and wait.payload.certain is True
        assert re.search(r"Worker /job:worker/replica:0/task:0 failed with UnavailableError", wait.payload.line), (
            wait.payload.line
        )
        # Certain once both are known: the worker's exit and the chief's line (which follows it).
        assert wait.t - max(stopped.t, wait.payload.since) < 3.0, (wait.t, stopped.t, wait.payload.since)
        assert wait.payload.message.startswith("chief:0 lost worker:0, which exited (stopped"), wait.payload.message
        assert "no worker is left" in wait.payload.message
        assert wait.payload.fix.startswith("Restart worker:0")
        assert controller.status().role("chief:0").waiting_for == "worker:0"
    finally:
        controller.close()
    assert_nothing_left(ports, marker=str(tmp_path / "run"))


def _recovering_waits(seen: list, roles: tuple[str, ...]) -> list | None:
    """Each of ``roles``' first ``recovering`` wait, once every one has one and none was cleared
    since (a later wait, on a CreateSession line say, may follow it: a cleared one may not)."""
    found = []
    for role in roles:
        events = [e for e in seen if e.kind == "role_waiting" and e.role == role]
        first = next((i for i, e in enumerate(events) if e.payload.cause == "recovering" and e.payload.waiting), None)
        if first is None or any(not e.payload.waiting for e in events[first:]):
            return None
        found.append(events[first])
    return found


RECOVERING_CLUSTER = """
name = "bg-recovering"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "between_graph.py", "--train_steps=100000", "--log_every=20", "--step_sleep=0.05",
           "--tf_verbosity=info"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
"""


def test_workers_recreating_their_session_after_the_ps_went_are_diagnosed_with_it(tmp_path):
    """With --tf_verbosity=info a classic worker whose ps is stopped says so: MonitoredSession's
    ``An error was raised. This may be due to a preemption ...`` and the error naming the ps."""
    ports = free_ports(3)
    controller, seen = started_controller(
        write_cluster(tmp_path, RECOVERING_CLUSTER, ports), tmp_path / "run", ("role_waiting", "role_state", "metrics")
    )
    try:
        wait_for(
            lambda: {e.role for e in seen if e.kind == "metrics"} == {"worker:0", "worker:1"}, 150, "both training"
        )
        controller.stop_role("ps:0").result(30)
        stopped = wait_for(
            lambda: [e for e in seen if e.kind == "role_state" and e.role == "ps:0" and e.payload.state == "stopped"],
            30,
            "ps:0 stopped",
        )[0]
        waits = wait_for(
            lambda: _recovering_waits(seen, ("worker:0", "worker:1")),
            90,  # TensorFlow's retry after the ps went, on a loaded machine (the full suite beside it: > 30 s once)
            "both workers recreating their sessions",
            lambda: "\n".join(
                [f"waits: {[(e.role, e.payload) for e in seen if e.kind == 'role_waiting']}"]
                + [f"--- {r}:\n" + "\n".join(controller.last_lines(r, 25)) for r in ("worker:0", "worker:1")]
            ),
        )
        for wait in waits:
            assert wait.payload.waiting_for == "ps:0" and wait.payload.certain is True
            assert wait.payload.line.startswith("INFO:tensorflow:An error was raised. This may be due to a preemption")
            ago = re.fullmatch(
                rf"{wait.role} lost ps:0 and recreates its session, which needs ps:0; ps:0 exited "
                r"\(stopped, killed by SIGTERM\) (\d+) s ago: it will wait forever\.",
                wait.payload.message,
            )
            assert ago and abs(int(ago[1]) - (wait.t - stopped.t)) <= 1.5, wait.payload.message
            assert wait.t - max(stopped.t, wait.payload.since) < 3.0
        assert controller.status().role("worker:1").waiting_for == "ps:0"
    finally:
        controller.close()
    assert_nothing_left(ports, marker=str(tmp_path / "run"))
