"""One controller per launched cluster: the role state machine, restarts, stop/kill, completion.

The controller runs on its own thread. Agents' events and users' commands reach it through one
queue; every state change goes through ``_set_state`` (core/controller/lifecycle.py), which checks it, writes it to
the run directory and publishes it. Timing (back-off, start grace) is stored deadlines checked on
each tick, never a sleep. Subscribers get immutable :class:`Event` objects on the controller's
thread and must not block: the window and the CLI drop them in an inbox (core/run/inbox.py) and
read it on their own thread.

Role states (after supervisord, with Kubeflow's outcomes)::

    PENDING -> STARTING -> RUNNING -> SUCCEEDED | FAILED | STOPPING -> STOPPED
                   ^          |
                   +- BACKOFF <+   (restart policy, with exponential back-off)
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from core.cluster.spec import ClusterSpec, parse_role_id, role_id
from core.controller.base import TransportFactory
from core.controller.commands import UserCommands
from core.controller.connections import HostConnections, agent_socket
from core.controller.intake import TelemetryIntake
from core.controller.lifecycle import RoleLifecycle
from core.controller.output_intake import RECEIVED_KEY, OutputIntake
from core.controller.slurm import SlurmHosting
from core.controller.supervised import SupervisedRole
from core.diagnosis.rules import Diagnoser
from core.profiling.remote import AgentReplies, profile_through_agent
from core.remote.transport import Transport
from core.run import journal, pids
from core.run.role_view import cluster_status
from core.run.rundir import RunDir
from core.run.status import ALIVE, ClusterPhase, ClusterStatus, Event, RoleState

TICK_S = 0.1
# Items waiting for the controller thread (agent events, commands): past this the agent links wait
# (their agents' pipes buffer; nothing is dropped) and a user's command is refused, said once.
MAX_QUEUE = 100_000


class Controller(RoleLifecycle, UserCommands, OutputIntake, TelemetryIntake, HostConnections, SlurmHosting):
    """Launches ``spec`` into ``run`` and manages it until every role has ended.

    ``transport_factory`` None (the default) reaches each host's agent with
    :class:`core.remote.link.AgentLink`: locally, or over SSH for hosts the spec reaches by ssh, with
    the agent in keep mode so the roles outlive a lost connection or a killed TowerDeck.
    ``on_disconnect`` ("keep" or "stop") is what the agents do when nobody is connected any
    more. ``attach=True`` does not launch: it reattaches to the agents of a run that is still
    going (see :meth:`detach` and ``python main.py attach``). A spec with ``[slurm]`` and no
    ``transport_factory`` runs in one Slurm allocation (see :mod:`core.controller.slurm`).
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
        self._roles: dict[str, SupervisedRole] = {
            # planned_tasks: a counted job's roles (tasks = N on Slurm) exist before the allocation
            # gives them a host and a port (core/controller/slurm.py places them then).
            t.role_id: SupervisedRole(t, t.host, run.path, spec.metric_patterns)
            for t in spec.planned_tasks()
        }
        self._completion = set(spec.completion_jobs())
        self._success_policy = spec.stuck.success_policy
        self._transports: dict[str, Transport] = {}
        self._queue: queue.Queue[tuple[str, Any, Any]] = queue.Queue(MAX_QUEUE)
        self._queue_full = threading.Event()  # set by a link that found it full; said on the loop
        # Users' commands go before agents' events: a stop is not queued behind a flood's backlog.
        self._commands: queue.Queue[tuple[tuple[str, Any], Future[str] | None]] = queue.Queue(MAX_QUEUE)
        self._ticked_at = 0.0
        self._subscribers: list[Callable[[Event], None]] = []
        self._lock = threading.RLock()
        self._phase = ClusterPhase.IDLE
        self._result: str | None = None
        self._reason = ""
        self._done = threading.Event()
        self._coalesced: set[str] = set()  # roles told about coalescing (core.controller.output_intake)
        self._interrupted = threading.Event()  # stop_all/kill_all was asked (see _connect_all)
        self._thread: threading.Thread | None = None
        self._write_error_reported = False
        self._listener_errors: set[str] = set()
        self._host_states: dict[str, dict[str, Any]] = {}
        # Hosts whose agent tails the roles' TensorBoard files itself (its hello says so); the
        # others' local roles are read here, as a fallback.
        self._agent_tails_tb: dict[str, bool] = {}
        self._remote_hosts = {h for h in {t.host for t in spec.explicit_tasks()} if spec.host_config(h).remote}
        # Diagnosis (issue 13): which role waits for which, from output and state changes.
        self._diagnoser = Diagnoser(
            self._roles, spec.strategy, success_policy=spec.stuck.success_policy, phase=str(ClusterPhase.IDLE)
        )
        self._agent_replies = AgentReplies()  # profile and read_file answers (core.profiling.remote)
        if spec.slurm is not None and transport_factory is None:
            self._slurm_setup()
            self._factory = self._slurm_factory

    # ------------------------------------------------------------------ public API (any thread)

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        """Call ``callback(event)`` for every event, on the controller thread; it must not block."""
        self._subscribers.append(callback)

    def start(self) -> None:
        """Start the agents and every role (or reattach to them); returns at once."""
        self._thread = threading.Thread(target=self._loop, name="controller", daemon=True)
        self._thread.start()
        self._commands.put((("attach" if self._attaching else "launch", None), None))

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
        self._interrupted.set()  # a connection still being made (a hung ssh) is given up now
        return self._command("stop_all", None)

    def kill_all(self) -> Future[str]:
        self._interrupted.set()
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

    # The RunSource protocol (core.controller.session): a live controller runs its cluster here.
    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def controls_here(self) -> bool:
        return True

    @property
    def attachable(self) -> bool:
        return False

    def release(self) -> None:
        """Nothing to let go: the controller belongs to its launch session."""

    def status(self) -> ClusterStatus:
        """An immutable snapshot; a running role whose step time is far above the others' is
        marked as a straggler."""
        with self._lock:
            return cluster_status(self._phase, self._result, self._reason, self._roles.values(), time.time())

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

    def remote_hosts(self) -> list[str]:
        """The hosts reached through an agent over SSH."""
        return sorted(self._remote_hosts)

    def agent_hosts(self) -> list[str]:
        """The hosts whose roles are profiled by their own agent (:meth:`profile_remote`): the SSH
        hosts, and every host of a Slurm allocation (its node's agent step; the node may be this
        machine or not, and only its agent knows)."""
        return sorted(self._remote_hosts | self._slurm_hosts())

    def profile_remote(self, role: str, seconds: float, light: bool, timeout_s: float, dest: Path) -> dict[str, Any]:
        """Trace a running role of an agent host (:meth:`agent_hosts`) through its agent into
        ``dest`` (a folder of the run directory, the same path under the agent's directory there),
        waiting at most about ``timeout_s``; any thread.
        The agent's ``profiled`` event; ProfileError (one line) when it cannot be tried."""
        from core.profiling.env import ProfileError

        with self._lock:
            supervised = self._roles[self._name(role)]
            host, state, address = supervised.host_key, supervised.state, supervised.task.address
        transport = self._transports.get(host)
        if host not in self.agent_hosts() or transport is None:
            raise ProfileError(f"{role} runs on {host}, which is not reached through an agent over SSH or Slurm")
        if state != RoleState.RUNNING:
            raise ProfileError(f"{role} is {state}; only a running role can be profiled")
        command = {"role": supervised.task.role_id, "address": address, "seconds": seconds, "light": light}
        command["timeout_s"] = timeout_s
        # A Slurm node's agent works in agents/ of the run directory, which the nodes share.
        shared = agent_socket(self.run, host).parent if host in self._slurm_hosts() else None
        return profile_through_agent(self._agent_replies, host, transport.send, command, self.run.path, dest, shared)

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
        try:
            self._commands.put_nowait(((name, arg), future))
        except queue.Full:
            future.set_exception(
                RuntimeError(f"the controller is {MAX_QUEUE} events behind; {name} not queued, try again")
            )
        return future

    def _sink(self, host: str, event: dict[str, Any]) -> None:
        if self._agent_replies.offer(host, event):
            return  # a profile's answer, for the thread that waits for it
        event[RECEIVED_KEY] = time.monotonic()  # how far behind the controller is (core.controller.output_intake)
        try:
            self._queue.put_nowait(("agent", host, event))
        except queue.Full:
            self._queue_full.set()
            self._queue.put(("agent", host, event))  # the link waits: lossless, bounded

    def _publish(self, kind: str, role: str | None = None, *, at: float | None = None, **data: Any) -> None:
        event = Event(kind, round(at if at is not None else time.time(), 3), role, data)
        if journal.is_state_record(kind):
            self.run.record({"t": event.t, "kind": kind, "role": role, **data})
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
                while not self._done.is_set():
                    command, future = self._commands.get_nowait()
                    self._on_command(command, future)
            except queue.Empty:
                pass
            except Exception as exc:  # never let one bad command kill the controller
                self._publish("warning", message=f"internal error: {exc!r}")
            if self._done.is_set():
                break
            try:
                item = self._queue.get(timeout=TICK_S)
            except queue.Empty:
                item = None
            if self._queue_full.is_set():
                self._queue_full.clear()
                self._publish(
                    "warning",
                    message=f"the controller fell {MAX_QUEUE} events behind; reading from the agents waits until it "
                    "catches up (nothing is dropped)",
                )
            try:
                if item is not None:
                    kind, a, b = item
                    if kind == "agent":
                        self._on_agent_event(a, b)
                    elif kind == "slurm":
                        self._on_slurm(a)
                if item is None or time.monotonic() - self._ticked_at >= TICK_S / 2:
                    self._ticked_at = time.monotonic()  # deadlines, not every event of a flood
                    self._tick()
            except Exception as exc:  # never let one bad event kill the controller
                self._publish("warning", message=f"internal error: {exc!r}")
        for transport in self._transports.values():
            if self._detached:
                transport.detach()
            else:
                transport.close()
        self._slurm_release()

    def _run_command(self, name: str, arg: Any) -> str:
        if self._slurm is not None and name == "launch":
            return self._slurm_launch()  # the roles launch once the allocation runs
        if self._slurm is not None and name == "attach":
            self._slurm_attach()
        return super()._run_command(name, arg)

    # ------------------------------------------------------------------ events

    def _on_agent_event(self, host: str, event: dict[str, Any]) -> None:
        kind = event.get("ev")
        name = event.get("role")
        role = self._roles.get(name) if isinstance(name, str) else None
        if role is not None and event.get("attempt") not in (None, role.attempt):
            return  # late news of an earlier attempt
        if kind == "output" and role is not None:
            self._on_output(role, event)
        elif kind == "skipped" and role is not None:
            self._on_skipped(role, event)
        elif kind == "started" and role is not None:
            with self._lock:
                role.pid = int(event["pid"])
            role.pid_started = pids.start_time(role.pid)  # to tell it from a reused pid later
            transport = self._transports.get(host)
            # Journalled for a role on this machine: after a launcher is gone, whether the role
            # still runs is told by it (core.run.leftover), not by a pid that may be reused.
            here = role.pid_started if transport is not None and transport.is_local else None
            self._publish(
                "role_pid",
                role=role.task.role_id,
                pid=role.pid,
                attempt=role.attempt,
                log=str(role.log_path),
                pid_started=here,
            )
        elif kind == "start_failed" and role is not None:
            with self._lock:
                role.add_output(f"[towerdeck] {event.get('error')}\n")
                role.ended_at = time.time()
            self._set_state(role, RoleState.FAILED, str(event.get("error")))
        elif kind == "exited" and role is not None and role.state in ALIVE:  # once: a resume repeats exits
            self._take_held(role)  # its last lines first, if a flood left them unparsed
            self._on_exit(role, event.get("returncode"), event.get("signal"))
        elif kind == "sample":
            self._on_sample(host, event)
        elif kind == "gpu_status":
            self._publish("gpu_status", host=host, status=event.get("status"), count=event.get("count"))
        elif kind in ("log_write_failed", "log_write_recovered"):
            self._on_log_write(host, kind, event)
        elif kind == "agent_lost":
            self._on_agent_lost(host, event.get("returncode"), event.get("reason"), event.get("busy") is True)
        elif kind == "host_state":
            fields = {k: v for k, v in event.items() if k not in ("ev", "t")}
            with self._lock:
                self._host_states[host] = {"t": event.get("t"), **fields}
            self._publish("host_state", host=host, **fields)
        elif kind == "scalars" and role is not None:
            points = event.get("points")
            if isinstance(points, list):
                self._on_scalars(role, [p for p in points if isinstance(p, dict)])
        elif kind == "hello":
            self._agent_tails_tb[host] = event.get("tensorboard") is True
            if self._attaching:
                self._adopt(host, event)
        elif kind == "error":
            self._publish(
                "warning",
                role=name if isinstance(name, str) else None,
                message=f"agent on {host}: {event.get('message')}",
            )
