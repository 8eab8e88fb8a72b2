"""What the controller's parts share, declared once.

:class:`core.controller.controller.Controller` is put together from mixins (``commands``,
``connections``, ``intake``, ``output_intake``, ``lifecycle``, ``slurm``), each of which inherits
:class:`ControllerBase`: the state the controller sets up in its ``__init__`` and the methods the
parts call on one another. mypy checks every part against these declarations, and a reader finds
here what the parts have in common. The methods are declared for the type checker only: no stub
exists at run time to stand in for the real one.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.cluster.spec import ClusterSpec
from core.controller.supervised import SupervisedRole
from core.diagnosis.rules import Diagnoser, Diagnosis
from core.remote.transport import EventSink, Transport
from core.run.rundir import RunDir
from core.run.status import ClusterPhase, RoleState

# Makes the transport that reaches one host's agent: (host, where its events go, its log file).
TransportFactory = Callable[[str, EventSink, Path], Transport]


class ControllerBase:
    """The controller's shared state and the methods its parts call on one another."""

    spec: ClusterSpec
    run: RunDir
    _roles: dict[str, SupervisedRole]
    _completion: set[str]  # the jobs whose success completes the run
    _success_policy: str  # "all" or "chief" (core.cluster.stuck_options)
    _lock: threading.RLock  # guards what other threads read (roles, phase, host states)
    _phase: ClusterPhase
    _result: str | None  # the run's result, once decided, and why
    _reason: str
    _done: threading.Event
    _interrupted: threading.Event  # set by stop_all/kill_all from any thread: stop connecting
    _attaching: bool
    _detached: bool
    _on_disconnect: str
    # Agent events and Slurm reports for the controller thread: (kind, a, b).
    _queue: queue.Queue[tuple[str, Any, Any]]
    _factory: TransportFactory
    _transports: dict[str, Transport]
    _remote_hosts: set[str]
    _agent_tails_tb: dict[str, bool]
    _coalesced: set[str]  # roles told about coalescing (core.controller.output_intake)
    _diagnoser: Diagnoser
    _slurm_end: str | None = None  # how Slurm ended the job under the run (core.controller.slurm)

    if TYPE_CHECKING:
        # controller.py
        def _name(self, role: str) -> str: ...

        def _command(self, name: str, arg: Any) -> Future[str]: ...

        def _sink(self, host: str, event: dict[str, Any]) -> None: ...

        def _publish(self, kind: str, role: str | None = None, *, at: float | None = None, **data: Any) -> None: ...

        # lifecycle.py
        def _set_state(self, role: SupervisedRole, state: RoleState, detail: str = "") -> None: ...

        def _set_phase(self, phase: ClusterPhase, result: str | None = None, reason: str = "") -> None: ...

        def _publish_waits(self, diagnoses: list[Diagnosis]) -> None: ...

        def _launch_role(self, role: SupervisedRole) -> None: ...

        # commands.py
        def _stop_rest(self, kill: bool = False) -> None: ...

        # connections.py
        def _transport(self, host: str) -> Transport: ...

        def _connect_all(self) -> None: ...

        def _reattach(self) -> str: ...

        # intake.py
        def _note_progress(self, role: SupervisedRole, steps: list[int]) -> None: ...

        def _set_stalled(
            self, role: SupervisedRole, stalled: bool, detail: str, since: float | None = None
        ) -> None: ...

        def _check_stalls(self, now: float) -> None: ...

        def _poll_tensorboard(self) -> None: ...

        # slurm.py
        def _slurm_check_end(self) -> str | None: ...
