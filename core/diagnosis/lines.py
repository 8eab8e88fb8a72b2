"""The output lines of TensorFlow's waiting states, as TensorFlow 2.21 prints them (each one
captured from a real run: see ``tests/core/fixtures``). Pure: :func:`recognise` reads one line;
:class:`core.diagnosis.rules.Diagnoser` relates what it finds to the other roles."""

from __future__ import annotations

import re
from dataclasses import dataclass

_CREATE_SESSION = re.compile(
    r"CreateSession still waiting for response from worker: /job:(?P<job>[A-Za-z0-9_]+)/replica:\d+/task:(?P<index>\d+)"
)
_MODEL_READY = re.compile(r"Waiting for model to be ready\b")
# The coordination service's leader (MultiWorkerMirroredStrategy's worker:0 or chief:0) says once
# per task that connects how many it still waits for, then names them on the lines that follow:
#   coordination_service.cc:502] Waiting for 1/2 tasks to connect.
#   coordination_service.cc:505] Example stragglers:
#   /job:worker/replica:0/task:1
TASKS_TO_CONNECT = re.compile(
    r"coordination_service\.cc:\d+\] Waiting for (?P<left>\d+)/(?P<total>\d+) tasks to connect"
)
STRAGGLERS = re.compile(r"coordination_service\.cc:\d+\] Example stragglers:")
# ParameterServerStrategy's ClusterCoordinator (on the chief) losing a worker, e.g.
#   ERROR:tensorflow:Worker /job:worker/replica:0/task:0 failed with UnavailableError():recvmsg:Connection reset by peer
# then waits for it to come back (up to an hour per closure), printing nothing more.
_WORKER_LOST = re.compile(
    r"Worker /job:(?P<job>[A-Za-z0-9_]+)/replica:\d+/task:(?P<index>\d+) failed with (?P<error>\w+)"
)
WORKER_RECOVERED = re.compile(r"\bWorker /job:[A-Za-z0-9_]+/replica:\d+/task:\d+ has been recovered")
# MonitoredSession recreating its session after an error from a peer (TF 2.21 has no "Recovering
# session" line): a Python INFO log, then the error, whose gRPC details name the peer, e.g.
#   INFO:tensorflow:An error was raised. This may be due to a preemption in a connected worker or parameter server. ...
#   Additional GRPC error information from remote target /job:ps/replica:0/task:0 while calling ...
_RECOVERING = re.compile(
    r"An error was raised(?: while a session was being created)?\. This may be due to a preemption"
)
REMOTE_TARGET = re.compile(r"from remote target /job:(?P<job>[A-Za-z0-9_]+)/replica:\d+/task:(?P<index>\d+)")
TASK_NAME = re.compile(r"^\s*/job:(?P<job>[A-Za-z0-9_]+)/replica:\d+/task:(?P<index>\d+)\s*$")

# Kinds of wait, as ``role_waiting`` events name them.
CREATE_SESSION = "create_session"  # the line names the peer
MODEL_READY = "model_ready"  # a non-chief waits for the chief to initialise the variables
COORDINATION_CONNECT = "coordination_connect"  # the leader names a task that has not connected
RECOVERING = "recovering"  # MonitoredSession recreates its session after a peer's error
WORKER_LOST = "worker_lost"  # ParameterServerStrategy's coordinator lost the worker the line names
SILENT = "silent"  # no line (TensorFlow's INFO logs hidden): inferred from the roles' states


@dataclass(frozen=True)
class WaitSign:
    """One output line that shows a role waiting. ``peer`` is the role the line names
    (``worker:0``), or None when the diagnoser must work it out (the chief)."""

    kind: str
    peer: str | None
    line: str


def recognise(line: str) -> WaitSign | None:
    """The waiting state ``line`` shows, or None. Never raises, whatever the line."""
    if "CreateSession" in line:
        m = _CREATE_SESSION.search(line)
        if m:
            return WaitSign(CREATE_SESSION, f"{m['job']}:{int(m['index'])}", line.strip())
    if "Waiting for model" in line and _MODEL_READY.search(line):
        return WaitSign(MODEL_READY, None, line.strip())
    if "An error was raised" in line and _RECOVERING.search(line):
        return WaitSign(RECOVERING, None, line.strip())
    if "failed with" in line:
        m = _WORKER_LOST.search(line)
        if m:
            return WaitSign(WORKER_LOST, f"{m['job']}:{int(m['index'])}", line.strip())
    return None
