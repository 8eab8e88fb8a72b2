"""A worker that printed a step and then lost its ps, both in one read of its output, is waiting
for the ps: the step came before the wait and must not clear it. CI read exactly that chunk once
(a step line, then MonitoredSession's "An error was raised ... remote target /job:ps/..."), and the
step, handled after the chunk's wait, cleared it. Real processes and a real controller; the worker
prints TensorFlow's lines itself so that the chunk is certain."""

from __future__ import annotations

import pytest

from tests.helpers.clusters import write_cluster
from tests.helpers.controllers import started_controller
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.waits import wait_for

WORKER = r"""
import os, sys, time
flag = sys.argv[1]
step = 0
while not os.path.exists(flag):
    step += 1
    print(f"Step: {step},  Epoch:  1,  Batch: {step} of 99,  Cost: 1.5,  AvgTime: 50.00ms", flush=True)
    time.sleep(0.05)
step += 1
sys.stdout.write(  # one write: one read by the agent, one chunk for the controller
    f"Step: {step},  Epoch:  1,  Batch: {step} of 99,  Cost: 1.5,  AvgTime: 50.00ms\n"
    "INFO:tensorflow:An error was raised. This may be due to a preemption in a connected worker or "
    "parameter server. The current session will be closed and a new session will be created. Error: "
    "Graph execution error:\n"
    "\n"
    "From /job:ps/replica:0/task:0:\n"
    "recvmsg:Connection reset by peer\n"
    "Additional GRPC error information from remote target /job:ps/replica:0/task:0 while calling "
    "/tensorflow.WorkerService/RunGraph:\n"
)
sys.stdout.flush()
time.sleep(600)
"""

CLUSTER = """
name = "wait-after-step"
strategy = "between_graph"
launch_style = "flags"
workdir = "{marker}"
stop_grace_s = 1
[jobs.ps]
command = ["python", "-u", "-c", "import time; time.sleep(600)"]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
command = ["python", "-u", "{marker}/worker.py", "{marker}/ps-gone"]
tasks = ["127.0.0.1:{p[1]}"]
"""


@pytest.mark.timeout(120)
def test_a_step_printed_before_the_wait_in_the_same_read_does_not_clear_it(tmp_path):

    (tmp_path / "worker.py").write_text(WORKER)
    ports = free_ports(2)
    controller, seen = started_controller(
        write_cluster(tmp_path, CLUSTER, ports), tmp_path / "run", ("role_waiting", "metrics")
    )
    try:
        wait_for(lambda: any(e.kind == "metrics" for e in seen), 60, "worker:0's first steps")
        controller.stop_role("ps:0").result(30)
        (tmp_path / "ps-gone").write_text("")
        wait_for(
            lambda: "remote target /job:ps" in "\n".join(controller.last_lines("worker:0", 10)),
            30,
            "worker:0 printing the ps's error",
        )
        waiting = wait_for(
            lambda: controller.status().role("worker:0").waiting_for,
            30,  # the chunk is judged as it is taken (a loaded machine: seconds behind)
            "worker:0 shown waiting",
            lambda: f"waits: {[e.payload for e in seen if e.kind == 'role_waiting']}",
        )
        assert waiting == "ps:0"
        waits = [e.payload for e in seen if e.kind == "role_waiting"]
        assert waits and waits[-1].waiting and waits[-1].cause == "recovering" and waits[-1].certain, waits
        assert not [w for w in waits if not w.waiting], waits  # never cleared by the step before it
    finally:
        controller.close()
    assert_nothing_left(ports, marker=str(tmp_path))
