"""One controller per launched cluster: the role state machine, restarts, stop/kill, completion.

The controller runs on its own thread. Agents' events and users' commands reach it through one
queue; every state change goes through :meth:`Controller._set_state`, which checks it, writes it to
the run directory and publishes it. Timing (back-off, start grace) is stored deadlines checked on
each tick, never a sleep. Subscribers get immutable :class:`Event` objects on the controller's
thread and must not block; the GUI's bridge re-emits them as queued Qt signals.

Role states (after supervisord, with Kubeflow's outcomes)::

    PENDING -> STARTING -> RUNNING -> SUCCEEDED | FAILED | STOPPING -> STOPPED
                   ^          |
                   +- BACKOFF <+   (restart policy, with exponential back-off)
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import json
import os
import queue
import signal as signal_module
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from core.diagnosis import Diagnoser, Diagnosis
from core.render import render, role_dir
from core.rundir import RunDir
from core.spec import ClusterSpec, HostConfig, Task, parse_role_id, role_id
from core.stuck_options import chief_success, start_stall_detail
from core.telemetry.live import RoleTelemetry, sample_dict
from core.telemetry.metrics import MetricSample, stragglers
from core.telemetry.tbevents import ScalarTailer
from core.transport import EventSink, LocalTransport

TICK_S = 0.1
TAIL_LINES = 200
HISTORY_LIMIT = 1000
MAX_LINE_CHARS = 64 * 1024


class RoleState(enum.StrEnum):
    PENDING = "pending"
    STARTING = "starting"
    RUNNING = "running"
    BACKOFF = "backoff"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value


TERMINAL = frozenset({RoleState.SUCCEEDED, RoleState.FAILED, RoleState.STOPPED})
ALIVE = frozenset({RoleState.STARTING, RoleState.RUNNING, RoleState.STOPPING})
_ALLOWED = {
    RoleState.PENDING: {RoleState.STARTING, RoleState.STOPPED},
    RoleState.STARTING: {
        RoleState.RUNNING,
        RoleState.STOPPING,
        RoleState.BACKOFF,
        RoleState.SUCCEEDED,
        RoleState.FAILED,
        RoleState.STOPPED,
    },
    RoleState.RUNNING: {
        RoleState.STOPPING,
        RoleState.BACKOFF,
        RoleState.SUCCEEDED,
        RoleState.FAILED,
        RoleState.STOPPED,
    },
    RoleState.BACKOFF: {RoleState.STARTING, RoleState.STOPPED, RoleState.FAILED},
    RoleState.STOPPING: {RoleState.STOPPED, RoleState.STARTING, RoleState.FAILED},
    RoleState.SUCCEEDED: {RoleState.STARTING, RoleState.BACKOFF},
    RoleState.FAILED: {RoleState.STARTING},
    RoleState.STOPPED: {RoleState.STARTING},
}


class ClusterPhase(enum.StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    COMPLETING = "completing"  # training done; stopping the servers
    FAILING = "failing"  # a role failed for good; stopping the rest
    STOPPING = "stopping"  # the user stopped the cluster
    DONE = "done"
    DETACHED = "detached"  # the controller left; the roles run on (reattach from the run directory)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class RoleStatus:
    """An immutable view of one role, as the CLI and GUI show it."""

    role: str
    job: str
    index: int
    host: str
    address: str
    state: RoleState
    state_since: float
    pid: int | None
    attempt: int
    restarts: int
    returncode: int | None
    signal: int | None
    started_at: float | None
    ended_at: float | None
    detail: str
    log_path: Path | None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    threads: int | None = None
    gpus: tuple[int, ...] = ()  # GPUs on which NVML sees a process of this role
    gpu_utilization_percent: float | None = None  # mean over those GPUs
    step: int | None = None
    loss: float | None = None
    step_time_s: float | None = None
    steps_per_sec: float | None = None
    straggler: bool = False
    # No new training step for the cluster file's ``stall_after_s`` while running (hung, SIGSTOPped).
    stalled: bool = False
    stalled_for_s: float | None = None  # seconds since the last step, while stalled
    # Diagnosis (issue 13): the role this one waits for, why and the fix (core/diagnosis.py).
    waiting_for: str | None = None
    waiting_message: str = ""
    waiting_fix: str = ""

    @property
    def exit_text(self) -> str:
        return exit_text(self.returncode, self.signal)


@dataclass(frozen=True)
class ClusterStatus:
    phase: ClusterPhase
    result: str | None  # "succeeded", "failed", "stopped" once decided
    reason: str
    roles: tuple[RoleStatus, ...]

    def role(self, name: str) -> RoleStatus:
        return next(r for r in self.roles if r.role == name)


@dataclass(frozen=True)
class Event:
    """Something that happened. ``kind`` is ``role_state``, ``role_output``, ``cluster_state`` or
    ``warning``; ``data`` holds the payload (documented in each publisher)."""

    kind: str
    t: float
    role: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


def exit_text(returncode: int | None, signal: int | None) -> str:
    if signal is not None:
        try:
            return f"killed by {signal_module.Signals(signal).name}"
        except ValueError:
            return f"killed by signal {signal}"
    if returncode is None:
        return ""
    return f"exit code {returncode}"


class Transport(Protocol):
    host: str

    def start(self) -> None: ...
    def send(self, command: dict[str, Any]) -> bool: ...
    def close(self, timeout_s: float = 10.0) -> None: ...


TransportFactory = Callable[[str, EventSink, Path], Transport]


def local_transport(host: str, sink: EventSink, log_path: Path) -> Transport:
    return LocalTransport(host, sink, log_path)


class _Role:
    """Mutable role state, owned by the controller thread."""

    def __init__(self, task: Task, host_key: str, patterns: tuple[str, ...] = ()) -> None:
        self.task = task
        self.host_key = host_key
        self.state = RoleState.PENDING
        self.state_since = time.time()
        self.pid: int | None = None
        self.attempt = 0
        self.restarts = 0
        self.policy_restarts = 0
        self.returncode: int | None = None
        self.signal: int | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.detail = ""
        self.log_path: Path | None = None
        self.stop_requested = False
        self.restart_after_stop = False
        self.running_at: float | None = None
        self.backoff_until: float | None = None
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.partial = ""
        self.history: collections.deque[tuple[float, RoleState, str]] = collections.deque(maxlen=HISTORY_LIMIT)
        self.cpu_percent: float | None = None
        self.rss_bytes: int | None = None
        self.threads: int | None = None
        self.gpus: tuple[int, ...] = ()
        self.gpu_utilization_percent: float | None = None
        self.telemetry = RoleTelemetry(patterns)
        self.tensorboard: ScalarTailer | None = None
        # Stall detection: the last step seen and when it changed; reset by every (re)start.
        self.last_step: int | None = None
        self.progress_at: float | None = None
        self.stalled = False
        self.output_blocked = False  # its log cannot be written (disk full): no news is not a stall

    def status(self, straggler: bool = False) -> RoleStatus:
        t = self.task
        stats = self.telemetry.stats
        return RoleStatus(
            role=t.role_id,
            job=t.job,
            index=t.index,
            host=t.host,
            address=t.address,
            state=self.state,
            state_since=self.state_since,
            pid=self.pid,
            attempt=self.attempt,
            restarts=self.restarts,
            returncode=self.returncode,
            signal=self.signal,
            started_at=self.started_at,
            ended_at=self.ended_at,
            detail=self.detail,
            log_path=self.log_path,
            cpu_percent=self.cpu_percent,
            rss_bytes=self.rss_bytes,
            threads=self.threads,
            gpus=self.gpus,
            gpu_utilization_percent=self.gpu_utilization_percent,
            step=stats.step,
            loss=stats.loss,
            step_time_s=stats.step_time_s,
            steps_per_sec=stats.steps_per_sec,
            straggler=straggler,
            stalled=self.stalled,
            stalled_for_s=(  # from the last step, or from the start when it never printed one (issue 13)
                round(time.time() - (self.progress_at or self.started_at or time.time()), 1) if self.stalled else None
            ),
        )

    def add_output(self, text: str) -> None:
        """Keep the last lines as a terminal would show them (a carriage return redraws)."""
        text = self.partial + text
        lines = text.split("\n")
        self.partial = lines.pop()[-MAX_LINE_CHARS:]
        for line in lines:
            self.tail.append(line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r"))

    def last_lines(self, n: int) -> list[str]:
        lines = list(self.tail)
        if self.partial:
            lines.append(self.partial.rsplit("\r", 1)[-1])
        return lines[-n:]


class Controller:
    """Launches ``spec`` into ``run`` and manages it until every role has ended.

    ``transport_factory`` None (the default) reaches each host's agent with
    :class:`core.link.AgentLink`: locally, or over SSH for hosts the spec reaches by ssh, with
    the agent in keep mode so the roles outlive a lost connection or a killed TowerDeck.
    ``on_disconnect`` ("keep" or "stop") is what the agents do when nobody is connected any
    more. ``attach=True`` does not launch: it reattaches to the agents of a run that is still
    going (see :meth:`detach` and ``python main.py attach``).
    """

    def __init__(
        self,
        spec: ClusterSpec,
        run: RunDir,
        transport_factory: TransportFactory | None = None,
        on_disconnect: str = "keep",
        attach: bool = False,
    ) -> None:
        self.spec = spec
        self.run = run
        self._on_disconnect = on_disconnect
        self._attaching = attach
        self._detached = False
        self._factory: TransportFactory = transport_factory or self._link_factory
        self._roles: dict[str, _Role] = {t.role_id: _Role(t, t.host, spec.metric_patterns) for t in spec.tasks()}
        self._completion = set(spec.completion_jobs())
        self._transports: dict[str, Transport] = {}
        self._queue: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        self._subscribers: list[Callable[[Event], None]] = []
        self._lock = threading.RLock()
        self._phase = ClusterPhase.IDLE
        self._result: str | None = None
        self._reason = ""
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._write_error_reported = False
        self._listener_errors: set[str] = set()
        self._host_states: dict[str, dict[str, Any]] = {}
        # Diagnosis (issue 13): which role waits for which, from output and state changes.
        self._diagnoser = Diagnoser(
            self._roles, spec.strategy, success_policy=spec.stuck.success_policy, phase=str(ClusterPhase.IDLE)
        )

    # ------------------------------------------------------------------ public API (any thread)

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        """Call ``callback(event)`` for every event, on the controller thread; it must not block."""
        self._subscribers.append(callback)

    def start(self) -> None:
        """Start the agents and every role (or reattach to them); returns at once."""
        self._thread = threading.Thread(target=self._loop, name="controller", daemon=True)
        self._thread.start()
        self._queue.put(("cmd", ("attach" if self._attaching else "launch", None), None))

    def detach(self) -> Future[str]:
        """Leave the cluster running: disconnect from every agent, which keeps its roles going
        and their output in the run directory. The controller is done afterwards; reattach with
        ``Controller(spec, RunDir.open(path), attach=True)`` or ``python main.py attach``."""
        return self._command("detach", None)

    def host_states(self) -> dict[str, dict[str, Any]]:
        """The latest ``host_state`` of each host: {state, reason, t, ...}."""
        with self._lock:
            return {host: dict(state) for host, state in self._host_states.items()}

    def stop_role(self, role: str) -> Future[str]:
        return self._command("stop", role)

    def kill_role(self, role: str) -> Future[str]:
        return self._command("kill", role)

    def restart_role(self, role: str) -> Future[str]:
        return self._command("restart", role)

    def stop_all(self) -> Future[str]:
        return self._command("stop_all", None)

    def kill_all(self) -> Future[str]:
        return self._command("kill_all", None)

    def restart_all(self) -> Future[str]:
        return self._command("restart_all", None)

    def signal_role(self, role: str, signal_name: str) -> Future[str]:
        """Send a signal (e.g. ``STOP``, ``CONT``) to a role's process group."""
        return self._command("signal", (role, signal_name))

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until every role has ended; True if so."""
        return self._done.wait(timeout_s)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def status(self) -> ClusterStatus:
        """An immutable snapshot; a running role whose step time is far above the others' is
        marked as a straggler."""
        with self._lock:
            step_times = {
                name: r.telemetry.stats.step_time_s
                for name, r in self._roles.items()
                if r.state == RoleState.RUNNING and r.telemetry.stats.step_time_s is not None
            }
            slow = stragglers(step_times)
            roles = tuple(r.status(name in slow) for name, r in self._roles.items())
            roles = tuple(_with_wait(r, self._diagnoser.current(r.role)) for r in roles)  # diagnosis (issue 13)
            return ClusterStatus(self._phase, self._result, self._reason, roles)

    def placement(self, role: str) -> dict[str, Any]:
        """The device placement summary of ``role`` so far (see core.telemetry.placement)."""
        with self._lock:
            return self._roles[self._name(role)].telemetry.placement.summary()

    def last_lines(self, role: str, n: int = 20) -> list[str]:
        with self._lock:
            return self._roles[self._name(role)].last_lines(n)

    def history(self, role: str) -> list[tuple[float, RoleState, str]]:
        with self._lock:
            return list(self._roles[self._name(role)].history)

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop everything (if still running) and wait for the controller to finish."""
        if self._thread is None:
            return
        if not self._done.is_set():
            self.stop_all()
            if not self._done.wait(timeout_s):
                self.kill_all()
                self._done.wait(10)
        self._thread.join(timeout_s)

    # ------------------------------------------------------------------ internals

    def _name(self, role: str) -> str:
        job, index = parse_role_id(role)
        name = role_id(job, index)
        if name not in self._roles:
            raise KeyError(f"no role {role!r}; the roles are {', '.join(self._roles)}")
        return name

    def _command(self, name: str, arg: Any) -> Future[str]:
        future: Future[str] = Future()
        self._queue.put(("cmd", (name, arg), future))
        return future

    def _sink(self, host: str, event: dict[str, Any]) -> None:
        self._queue.put(("agent", host, event))

    def _publish(self, kind: str, role: str | None = None, **data: Any) -> None:
        event = Event(kind, time.time(), role, data)
        if kind != "role_output":
            self.run.record({"t": round(event.t, 3), "kind": kind, "role": role, **data})
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception as exc:  # a broken listener must not stop the cluster
                message = f"a listener failed on a {kind} event: {exc!r}"
                self.run.record({"t": time.time(), "kind": "warning", "message": message})
                if kind != "warning" and exc.__class__.__name__ not in self._listener_errors:
                    self._listener_errors.add(exc.__class__.__name__)  # say it once per kind of error
                    self._publish("warning", message=message)
        if self.run.write_error and not self._write_error_reported:
            self._write_error_reported = True
            self._publish(
                "warning",
                message=self.run.write_error
                + f"; the cluster keeps running. Fix: free space on that disk (`df -h {self.run.path}`)",
            )

    def _loop(self) -> None:
        while not self._done.is_set():
            try:
                item = self._queue.get(timeout=TICK_S)
            except queue.Empty:
                item = None
            try:
                if item is not None:
                    kind, a, b = item
                    if kind == "agent":
                        self._on_agent_event(a, b)
                    else:
                        self._on_command(a, b)
                self._tick()
            except Exception as exc:  # never let one bad event kill the controller
                self._publish("warning", message=f"internal error: {exc!r}")
        for transport in self._transports.values():
            if self._detached and hasattr(transport, "detach"):
                transport.detach()
            else:
                transport.close()

    def _transport(self, host: str) -> Transport:
        if host not in self._transports:
            log = self.run.path / f"agent-{host.replace(':', '_')}.log"
            transport = self._factory(host, self._sink, log)
            transport.start()
            self._transports[host] = transport
        return self._transports[host]

    def _connect_all(self) -> None:
        """Reach every host's agent at once: connecting (SSH) takes a while, one host after the
        other would add them up."""
        hosts = [h for h in dict.fromkeys(r.host_key for r in self._roles.values()) if h not in self._transports]
        made = {h: self._factory(h, self._sink, self.run.path / f"agent-{h.replace(':', '_')}.log") for h in hosts}
        threads = [threading.Thread(target=t.start, name=f"connect-{h}", daemon=True) for h, t in made.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self._transports.update(made)

    def _set_state(self, role: _Role, state: RoleState, detail: str = "") -> None:
        if state not in _ALLOWED[role.state] and state != role.state:
            self._publish("warning", role=role.task.role_id, message=f"ignored transition {role.state} -> {state}")
            return
        old = role.state
        now = time.time()
        with self._lock:
            role.state = state
            role.state_since = now
            role.detail = detail
            role.history.append((now, state, detail))
        self._publish(
            "role_state",
            role=role.task.role_id,
            old=str(old),
            state=str(state),
            detail=detail,
            pid=role.pid,
            attempt=role.attempt,
            restarts=role.restarts,
            returncode=role.returncode,
            signal=role.signal,
        )
        self._evaluate()
        # Diagnosis (issue 13), after _evaluate: a state that ends the run clears waits, never shows one.
        self._publish_waits(self._diagnoser.on_state(role.task.role_id, str(state), now, detail))

    def _set_phase(self, phase: ClusterPhase, result: str | None = None, reason: str = "") -> None:
        with self._lock:
            self._phase = phase
            if result is not None and self._result is None:
                self._result = result
                self._reason = reason
        self.run.update(
            state=str(phase),
            result=self._result,
            reason=self._reason,
            ended=time.time() if phase == ClusterPhase.DONE else None,
        )
        self._publish("cluster_state", phase=str(phase), result=self._result, reason=self._reason)
        self._publish_waits(self._diagnoser.on_phase(str(phase), time.time()))  # diagnosis (issue 13)

    def _publish_waits(self, diagnoses: list[Diagnosis]) -> None:
        """Diagnosis (issue 13): ``role_waiting`` events carry ``waiting`` (False: it cleared),
        ``waiting_for`` (a role), ``cause``, ``certain``, ``message``, ``fix``, ``line``, ``since``."""
        for diagnosis in diagnoses:
            self._publish("role_waiting", role=diagnosis.role, **diagnosis.event_data())

    # ------------------------------------------------------------------ starting and stopping

    def _launch_role(self, role: _Role) -> None:
        with self._lock:
            role.telemetry.new_attempt()
            role.attempt += 1
            role.pid = None
            role.returncode = None
            role.signal = None
            role.stop_requested = False
            role.started_at = time.time()
            role.ended_at = None
            role.running_at = time.time() + self.spec.start_s
            role.log_path = self.run.log_path(role.task, role.attempt)
            role.last_step = None
            role.progress_at = None
            role.output_blocked = False
        if role.stalled:
            self._set_stalled(role, False, "restarted")
        transport = self._transport(role.host_key)
        host = self.spec.host_config(role.host_key)
        host_run_dir = getattr(transport, "run_dir", None) if host.remote else None
        launch = render(self.spec, role.task, Path(host_run_dir) if host_run_dir else self.run.path)
        cwd = host.workdir if host.remote and host.workdir else str(launch.cwd)
        log = str(role.log_path)
        if host_run_dir:  # the role writes on its own machine; the transport mirrors it here
            log = str(role_dir(Path(host_run_dir), role.task) / f"attempt-{role.attempt}.log")
        self._set_state(role, RoleState.STARTING, f"attempt {role.attempt}")
        sent = (host_run_dir is not None or not host.remote) and transport.send(
            {
                "op": "start",
                "role": role.task.role_id,
                "attempt": role.attempt,
                "argv": list(launch.argv),
                "env": launch.env,
                "cwd": cwd,
                "log": log,
            }
        )
        if not sent:
            why = getattr(transport, "lost_reason", None) or "it is gone"
            self._set_state(role, RoleState.FAILED, f"no agent on {role.host_key}: {why}")

    def _stop_role(self, role: _Role, kill: bool = False, restart: bool = False) -> None:
        if role.state in (RoleState.STARTING, RoleState.RUNNING, RoleState.STOPPING):
            role.stop_requested = True
            role.restart_after_stop = restart
            op = (
                {"op": "kill", "role": role.task.role_id}
                if kill
                else {"op": "stop", "role": role.task.role_id, "grace_s": self.spec.stop_grace_s}
            )
            self._transport(role.host_key).send(op)
            if role.state != RoleState.STOPPING:
                self._set_state(
                    role,
                    RoleState.STOPPING,
                    "killing" if kill else f"SIGTERM, SIGKILL after {self.spec.stop_grace_s:g} s",
                )
        elif role.state in (RoleState.BACKOFF, RoleState.PENDING):
            role.backoff_until = None
            self._set_state(role, RoleState.STOPPED, "stopped before it started")
            if restart:
                self._launch_role(role)
        elif restart:
            self._launch_role(role)

    def _stop_rest(self, kill: bool = False) -> None:
        for role in self._roles.values():
            if role.state not in TERMINAL:
                self._stop_role(role, kill=kill)

    # ------------------------------------------------------------------ events

    def _on_command(self, command: tuple[str, Any], future: Future[str] | None) -> None:
        name, arg = command
        try:
            message = self._run_command(name, arg)
        except (KeyError, ValueError, RuntimeError) as exc:
            if future is not None:
                future.set_exception(exc)
            return
        if future is not None:
            future.set_result(message)

    def _run_command(self, name: str, arg: Any) -> str:
        if name == "attach":
            return self._reattach()
        if name == "detach":
            if self._phase == ClusterPhase.DONE:
                raise RuntimeError("the run is over; there is nothing to leave running")
            self._detached = True
            self._set_phase(ClusterPhase.DETACHED)
            self._done.set()
            return "left the cluster running; reattach with: python main.py attach " + str(self.run.path)
        if name == "launch":
            self._set_phase(ClusterPhase.RUNNING)
            self._connect_all()
            for role in self._roles.values():
                self._launch_role(role)
            return "launched"
        if self._phase == ClusterPhase.DONE:
            raise RuntimeError("the run is over; launch the cluster again")
        if name == "stop_all":
            self._set_phase(ClusterPhase.STOPPING, "stopped", "stopped by the user")
            self._stop_rest()
            return "stopping every role"
        if name == "kill_all":
            self._set_phase(ClusterPhase.STOPPING, "stopped", "killed by the user")
            self._stop_rest(kill=True)
            return "killing every role"
        if name == "restart_all":
            if self._phase != ClusterPhase.RUNNING:
                raise RuntimeError(f"the cluster is {self._phase}; it can be restarted while it runs")
            for role in self._roles.values():
                role.policy_restarts = 0
                self._user_restart(role)
            return "restarting every role"
        if name == "signal":
            role = self._roles[self._name(arg[0])]
            if role.state not in ALIVE:
                raise RuntimeError(f"{role.task.role_id} is {role.state}")
            self._transport(role.host_key).send({"op": "signal", "role": role.task.role_id, "signal": arg[1]})
            return f"sent SIG{str(arg[1]).upper().removeprefix('SIG')} to {role.task.role_id}"
        role = self._roles[self._name(arg)]
        if name == "stop":
            if role.state in TERMINAL:
                return f"{role.task.role_id} is already {role.state}"
            self._stop_role(role)
            return f"stopping {role.task.role_id}"
        if name == "kill":
            if role.state in TERMINAL:
                return f"{role.task.role_id} is already {role.state}"
            self._stop_role(role, kill=True)
            return f"killing {role.task.role_id}"
        if name == "restart":
            if self._phase != ClusterPhase.RUNNING:
                raise RuntimeError(f"the cluster is {self._phase}; a role can be restarted while it runs")
            self._user_restart(role)
            return f"restarting {role.task.role_id}"
        raise ValueError(f"unknown command {name!r}")

    def _user_restart(self, role: _Role) -> None:
        with self._lock:
            role.restarts += 1
        self._stop_role(role, restart=True)

    def _on_agent_event(self, host: str, event: dict[str, Any]) -> None:
        kind = event.get("ev")
        name = event.get("role")
        role = self._roles.get(name) if isinstance(name, str) else None
        if role is not None and event.get("attempt") not in (None, role.attempt):
            return  # late news of an earlier attempt
        if kind == "output" and role is not None:
            text = str(event.get("data", ""))
            t = float(event.get("t") or time.time())
            with self._lock:
                role.add_output(text)
                samples = role.telemetry.feed(text, t)
            self._publish(
                "role_output", role=role.task.role_id, attempt=role.attempt, offset=event.get("offset"), text=text
            )
            self._publish_waits(self._diagnoser.on_output(role.task.role_id, text, time.time()))  # diagnosis
            self._note_progress(role, samples)
            if samples:
                records = [sample_dict(s) for s in samples]
                self.run.append_metrics(role.task, records)
                self._publish("metrics", role=role.task.role_id, samples=records)
        elif kind == "started" and role is not None:
            with self._lock:
                role.pid = int(event["pid"])
            self._publish(
                "role_pid", role=role.task.role_id, pid=role.pid, attempt=role.attempt, log=str(role.log_path)
            )
        elif kind == "start_failed" and role is not None:
            with self._lock:
                role.add_output(f"[towerdeck] {event.get('error')}\n")
                role.ended_at = time.time()
            self._set_state(role, RoleState.FAILED, str(event.get("error")))
        elif kind == "exited" and role is not None:
            self._on_exit(role, event.get("returncode"), event.get("signal"))
        elif kind == "sample":
            self._on_sample(host, event)
        elif kind == "gpu_status":
            self._publish("gpu_status", host=host, status=event.get("status"), count=event.get("count"))
        elif kind in ("log_write_failed", "log_write_recovered"):
            self._on_log_write(host, kind, event)
        elif kind == "agent_lost":
            self._on_agent_lost(host, event.get("returncode"), event.get("reason"))
        elif kind == "host_state":
            fields = {k: v for k, v in event.items() if k not in ("ev", "t")}
            with self._lock:
                self._host_states[host] = {"t": event.get("t"), **fields}
            self._publish("host_state", host=host, **fields)
        elif kind == "hello" and self._attaching:
            self._adopt(host, event)
        elif kind == "error":
            self._publish(
                "warning",
                role=name if isinstance(name, str) else None,
                message=f"agent on {host}: {event.get('message')}",
            )

    def _on_exit(self, role: _Role, returncode: int | None, signal: int | None) -> None:
        self._poll_tensorboard()  # what the role wrote last, before it is forgotten
        now = time.time()
        with self._lock:
            role.pid = None
            role.returncode = returncode
            role.signal = signal
            role.ended_at = now
            role.running_at = None
        how = exit_text(returncode, signal)
        if role.stop_requested:
            if role.restart_after_stop and self._phase == ClusterPhase.RUNNING:
                role.restart_after_stop = False
                self._launch_role(role)
            else:
                self._set_state(role, RoleState.STOPPED, f"stopped ({how})")
            return
        ok = signal is None and returncode == 0
        policy = self.spec.jobs[role.task.job].restart
        ran_s = now - role.started_at if role.started_at is not None else 0.0
        if policy.reset_after_s > 0 and ran_s >= policy.reset_after_s and role.policy_restarts:
            role.policy_restarts = 0  # a long healthy stretch: this failure starts a fresh budget
        training_on = self._phase == ClusterPhase.RUNNING
        is_completion = role.task.job in self._completion
        wants = policy.wants_restart(returncode, signal) and not (ok and is_completion)
        if wants and training_on and role.policy_restarts < policy.max_restarts:
            delay = policy.backoff_for(role.policy_restarts + 1)
            role.backoff_until = now + delay
            self._set_state(
                role,
                RoleState.BACKOFF,
                f"{how}; restart {role.policy_restarts + 1} of {policy.max_restarts} in {delay:g} s ({policy.policy})",
            )
        elif ok:
            self._set_state(role, RoleState.SUCCEEDED, how)
        else:
            detail = how
            if wants and training_on:
                detail += f"; gave up after {role.policy_restarts} restart{'s' if role.policy_restarts != 1 else ''}"
            self._set_state(role, RoleState.FAILED, detail)

    def _on_sample(self, host: str, event: dict[str, Any]) -> None:
        """Keep each role's latest figures; publish the sample; keep it in the run directory.

        ``sample`` events carry ``host`` (the host name), ``t``, ``figures`` (host CPU, memory,
        load), ``roles`` (per role: alive, pids, cpu_percent, rss_bytes, threads) and ``gpus``
        (per GPU: NVML figures and the processes on it, each mapped to a role).
        """
        roles: dict[str, Any] = event["roles"] if isinstance(event.get("roles"), dict) else {}
        gpus: list[Any] = event["gpus"] if isinstance(event.get("gpus"), list) else []
        on_gpu: dict[str, set[int]] = {}
        for gpu in gpus:
            for proc in (gpu.get("processes") if isinstance(gpu, dict) else None) or []:
                if isinstance(proc, dict) and isinstance(proc.get("role"), str):
                    on_gpu.setdefault(proc["role"], set()).add(int(gpu.get("index", -1)))
        with self._lock:
            for name, figures in roles.items():
                role = self._roles.get(name)
                if role is None or not isinstance(figures, dict) or not figures.get("alive", True):
                    continue
                role.cpu_percent = figures.get("cpu_percent")
                role.rss_bytes = figures.get("rss_bytes")
                role.threads = figures.get("threads")
                role.gpus = tuple(sorted(on_gpu.get(name, ())))
                utils = [
                    g.get("utilization_gpu_percent")
                    for g in gpus
                    if isinstance(g, dict) and g.get("index") in role.gpus
                ]
                values = [u for u in utils if isinstance(u, (int, float))]
                role.gpu_utilization_percent = sum(values) / len(values) if values else None
        self._poll_tensorboard()
        record: dict[str, Any] = {
            "t": event.get("t"),
            "host": host,
            "figures": event.get("host"),
            "roles": roles,
            "gpus": gpus,
        }
        self.run.append_sample(host, record)
        self._publish("sample", **record)

    def _poll_tensorboard(self) -> None:
        """New scalars from the roles' TensorBoard directories, once per sample period.

        ``scalars`` events carry ``points``: [{tag, step, wall_time, value}] for one role.
        """
        for role in self._roles.values():
            if role.tensorboard is None:
                role.tensorboard = ScalarTailer(self.run.role_dir(role.task) / "tensorboard")
            points = role.tensorboard.poll(max_points=10_000)
            if points:
                self._publish("scalars", role=role.task.role_id, points=[dataclasses.asdict(p) for p in points])

    def _on_log_write(self, host: str, kind: str, event: dict[str, Any]) -> None:
        """A role's output cannot be written (disk full) or can again: a ``warning`` naming the
        file and the fix, with ``path`` and, on recovery, ``lost_bytes``. The role is not touched."""
        name = event.get("role") if isinstance(event.get("role"), str) else None
        path = str(event.get("log"))
        role = self._roles.get(name) if name is not None else None
        if role is not None and event.get("attempt") in (None, role.attempt):
            with self._lock:
                role.output_blocked = kind == "log_write_failed"
                if not role.output_blocked and role.progress_at is not None:
                    role.progress_at = max(role.progress_at, time.time())  # a fresh window to show a step
        folder = os.path.dirname(path)
        if kind == "log_write_failed":
            message = (
                f"{event.get('error')} (on {host}). {name} keeps training; its newest output waits in memory "
                f"and is counted as lost beyond 8 MiB. Fix: free space on that disk (`df -h {folder}`), "
                "or launch the next run with --run-dir on a disk with room"
            )
        else:
            lost = int(event.get("lost_bytes") or 0)
            how = "gave up on the last" if event.get("gave_up") else "writing again;"
            message = f"{name}'s output log {path}: {how} {lost} bytes lost (the log says where)"
        self._publish("warning", role=name, message=message, path=path, lost_bytes=event.get("lost_bytes"))

    def _on_agent_lost(self, host: str, returncode: int | None, reason: str | None = None) -> None:
        transport = self._transports.pop(host, None)
        local = getattr(transport, "is_local", True)
        lost = [r for r in self._roles.values() if r.host_key == host and r.state in ALIVE]
        if not lost and self._phase == ClusterPhase.DONE:
            return
        why = reason or f"exited (code {returncode})"
        self._publish("warning", message=f"the agent on {host} is lost: {why}")
        for role in lost:
            if local:  # a pid of another machine means nothing here
                _kill_group(role.pid)  # last resort for local roles: no orphans if the agent died
            with self._lock:
                role.ended_at = time.time()
                role.pid = None
            state = RoleState.STOPPED if role.stop_requested else RoleState.FAILED
            self._set_state(role, state, f"the agent on {host} was lost")

    def _note_progress(self, role: _Role, samples: list[MetricSample]) -> None:
        """A new step is progress; it clears a stall."""
        steps = [s.step for s in samples if s.step is not None]
        if not steps or steps[-1] == role.last_step:
            return
        previous = role.progress_at
        with self._lock:
            role.last_step = steps[-1]
            # This machine's clock, not the agent's: a remote host's clock may be off by minutes.
            role.progress_at = time.time()
        self._publish_waits(self._diagnoser.on_step(role.task.role_id, role.progress_at))  # diagnosis
        if role.stalled:
            self._set_stalled(role, False, f"step {role.last_step}", since=previous)

    def _set_stalled(self, role: _Role, stalled: bool, detail: str, since: float | None = None) -> None:
        """Mark or clear a stall and say so: ``role_stalled`` events carry ``stalled`` (bool),
        ``stalled_for_s`` (how long without a step, so far or in all), ``step`` (the last one
        seen), ``stall_after_s`` and ``detail``."""
        since = since if since is not None else role.progress_at
        with self._lock:
            role.stalled = stalled
        self._publish(
            "role_stalled",
            role=role.task.role_id,
            stalled=stalled,
            stalled_for_s=round(time.time() - since, 1) if since is not None else None,
            step=role.last_step,
            stall_after_s=self.spec.stall_after_s,
            attempt=role.attempt,
            detail=detail,
        )

    def _check_stalls(self, now: float) -> None:
        """A running role that has shown a step and none since ``stall_after_s`` is stalled.

        Roles that never print a step (ps, custom servers) are never judged: silence is their
        normal state. Leaving RUNNING clears the mark.
        """
        after_s = self.spec.stall_after_s
        for role in self._roles.values():
            if role.stalled and role.state != RoleState.RUNNING:
                self._set_stalled(role, False, f"role is {role.state}")
            elif (
                after_s > 0
                and not role.stalled
                and role.state == RoleState.RUNNING
                and not role.output_blocked
                and role.progress_at is not None
                and now - role.progress_at >= after_s
            ):
                self._set_stalled(
                    role, True, f"no new step for {now - role.progress_at:.0f} s after step {role.last_step}"
                )
            elif (  # diagnosis (issue 13): no step at all since the role started
                not role.stalled
                and role.state == RoleState.RUNNING
                and role.progress_at is None
                and role.started_at is not None
                and not role.output_blocked
                and (
                    why := start_stall_detail(
                        self.spec.stuck,
                        self.spec.strategy,
                        role.task.job,
                        now - role.started_at,
                        False,
                        role.last_lines(5),
                    )
                )
            ):
                self._set_stalled(role, True, why, since=role.started_at)

    def _tick(self) -> None:
        now = time.time()
        self._check_stalls(now)
        self._publish_waits(self._diagnoser.tick(now))  # diagnosis (issue 13)
        for role in self._roles.values():
            if (
                role.state == RoleState.STARTING
                and role.running_at is not None
                and now >= role.running_at
                and role.pid is not None
            ):
                role.running_at = None
                self._set_state(role, RoleState.RUNNING, f"pid {role.pid}")
            elif role.state == RoleState.BACKOFF and role.backoff_until is not None and now >= role.backoff_until:
                role.backoff_until = None
                with self._lock:
                    role.policy_restarts += 1
                    role.restarts += 1
                self._launch_role(role)

    def _evaluate(self) -> None:
        """Decide what the cluster does after a role changed state."""
        roles = list(self._roles.values())
        if self._phase == ClusterPhase.RUNNING:
            failed = [r for r in roles if r.state == RoleState.FAILED]
            completion = [r for r in roles if r.task.job in self._completion]
            if failed:
                first = failed[0]
                self._set_phase(ClusterPhase.FAILING, "failed", f"{first.task.role_id} failed: {first.detail}")
                self._stop_rest()
            elif chief := chief_success(self.spec.stuck, {n: str(r.state) for n, r in self._roles.items()}):
                # success_policy = "chief" (issue 13): the chief's success ends the run, as in TFJob.
                self._set_phase(
                    ClusterPhase.COMPLETING,
                    "succeeded",
                    f'training finished: {chief} succeeded (success_policy = "chief")',
                )
                self._stop_rest()
            elif completion and all(r.state in TERMINAL for r in completion):
                if any(r.state == RoleState.SUCCEEDED for r in completion):
                    self._set_phase(
                        ClusterPhase.COMPLETING,
                        "succeeded",
                        "training finished: " + ", ".join(sorted(self._completion)) + " succeeded",
                    )
                else:
                    self._set_phase(
                        ClusterPhase.COMPLETING,
                        "stopped",
                        "every " + "/".join(sorted(self._completion)) + " role was stopped",
                    )
                self._stop_rest()
        if self._phase in (ClusterPhase.COMPLETING, ClusterPhase.FAILING, ClusterPhase.STOPPING) and all(
            r.state in TERMINAL for r in roles
        ):
            self._set_phase(ClusterPhase.DONE)
            self._done.set()

    # ------------------------------------------------------------------ reaching agents, reattaching

    def _link_factory(self: Controller, host: str, sink: EventSink, log_path: Path) -> Transport:
        """An :class:`AgentLink` to ``host``'s agent: local, or over SSH per the spec's [hosts]."""
        from core.link import AgentLink, local_endpoint, remote_endpoint
        from core.ssh import ssh_config_path

        config = self.spec.host_config(host)
        if config.remote:
            endpoint = remote_endpoint(
                config, ssh_config_path(self.spec), remote_run_dir(config, self.run), self._on_disconnect
            )
        else:
            agents = self.run.path / "agents"
            agents.mkdir(exist_ok=True)
            endpoint = local_endpoint(host, agents / f"{_safe_host(host)}.sock", log_path, self._on_disconnect)
        return AgentLink(endpoint, sink, self.run.path, log_path, attach=self._attaching)

    def _reattach(self: Controller) -> str:
        """Rebuild the roles' states from events.jsonl, then reach every host's agent again; each
        agent's hello says which roles still run, and its resume sends the output not yet seen."""
        last: dict[str, dict[str, Any]] = {}
        with contextlib.suppress(OSError):
            for line in (self.run.path / "events.jsonl").read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    if record.get("kind") == "role_state" and record.get("role") in self._roles:
                        last[record["role"]] = record
        with self._lock:
            for name, record in last.items():
                role = self._roles[name]
                role.state = RoleState(record["state"])
                role.attempt = int(record.get("attempt") or 0)
                role.restarts = int(record.get("restarts") or 0)
                role.pid = record.get("pid")
                role.returncode = record.get("returncode")
                role.signal = record.get("signal")
                role.detail = str(record.get("detail", ""))
                role.log_path = self.run.log_path(role.task, role.attempt) if role.attempt else None
                # Diagnosis (issue 13): when each role reached its state, e.g. how long ago a peer exited.
                seen_at = float(record.get("t") or 0) if role.state in TERMINAL else time.time()
                self._diagnoser.on_state(name, str(role.state), seen_at or time.time(), role.detail)
        self._set_phase(ClusterPhase.RUNNING)
        self._connect_all()
        return "reattached"

    def _adopt(self: Controller, host: str, hello: dict[str, Any]) -> None:
        """Take over the roles an agent reports after a reattach."""
        live: dict[str, Any] = hello.get("roles") or {}
        ended: dict[str, Any] = hello.get("ended") or {}
        for role in self._roles.values():
            if role.host_key != host:
                continue
            name = role.task.role_id
            info = live.get(name) or ended.get(name)
            if info is not None:
                with self._lock:
                    role.attempt = int(info.get("attempt", role.attempt))
                    role.pid = info.get("pid")
                    role.log_path = self.run.log_path(role.task, role.attempt)
                    role.running_at = None
                if role.state not in ALIVE:
                    with self._lock:
                        role.state = RoleState.RUNNING
                self._set_state(role, role.state, "reattached")
            elif role.state in ALIVE:
                with self._lock:
                    role.pid = None
                    role.ended_at = time.time()
                self._set_state(
                    role, RoleState.STOPPED, f"ended while nobody watched (the agent on {host} no longer has it)"
                )


def _with_wait(status: RoleStatus, diagnosis: Diagnosis | None) -> RoleStatus:
    """Diagnosis (issue 13): a role's status with what it waits for."""
    if diagnosis is None:
        return status
    return dataclasses.replace(
        status, waiting_for=diagnosis.waiting_for, waiting_message=diagnosis.message, waiting_fix=diagnosis.fix
    )


def _kill_group(pid: int | None) -> None:
    if pid is None:
        return
    with contextlib.suppress(OSError):
        os.killpg(pid, signal_module.SIGKILL)


# ------------------------------------------------------------------------------------------
# Where agents live


def remote_run_dir(host: HostConfig, run: RunDir) -> str:
    """The run directory on a remote host: ``run_root/<run id>`` (``~`` expands there)."""
    return f"{host.run_root.rstrip('/')}/{run.path.name}"


def _safe_host(host: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in host)
