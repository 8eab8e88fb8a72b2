"""One controller per launched cluster: it wires the parts that run a cluster, and dispatches to them.

The controller runs on its own thread. Users' commands reach it through a queue taken first, so a
stop is never queued behind a flood of output; agents' events through lanes
(:mod:`~core.controller.lanes`: lifecycle news first, each role's output in its own lane, taken
before that role's exit), so the news that roles ended is not queued behind other roles' output
either. It hands each to the part that owns it:

- :mod:`~core.controller.roles` (:class:`RoleMachine`): every role's state, changed only by its
  named transitions, and the status snapshot other threads read;
- :mod:`~core.controller.supervisor`: what a role's end means (the restart policy), the tick's
  deadlines, the cluster's phase;
- :mod:`~core.controller.ops`: starting, stopping and signalling a role through its agent;
- :mod:`~core.controller.connections`: one transport per host;
- :mod:`~core.controller.output_intake`, :mod:`~core.controller.intake`, :mod:`~core.controller.stalls`:
  output, samples and scalars taken in, and stalls judged; :mod:`~core.controller.stragglers`:
  straggler flags raised and cleared;
- :mod:`~core.controller.slurm`: the allocation of a run on Slurm;
- :mod:`~core.controller.reattach`: taking over a run whose launcher is gone.

Every event goes out through one :class:`~core.run.publish.Publisher` (state kinds journalled
first). Subscribers get immutable :class:`~core.run.events.Event` objects on the controller's
thread and must not block: the window and the CLI drop them in an inbox (core/run/inbox.py) and
read it on their own thread. Timing (back-off, start grace) is stored deadlines checked on each
tick, never a sleep.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from core.cluster.spec import ClusterSpec
from core.controller import reattach
from core.controller.checkpoints import CheckpointBook, CheckpointPoller, CheckpointReport
from core.controller.commands import (
    Attach,
    Command,
    Detach,
    KillAll,
    KillRole,
    Launch,
    RestartAll,
    RestartRole,
    SetSampling,
    SignalRole,
    StopAll,
    StopRole,
    journal_form,
)
from core.controller.connections import HostConnections, TransportFactory, link_factory
from core.controller.crashloop import CrashLoops
from core.controller.intake import TelemetryIntake
from core.controller.lanes import AgentEvent, EventLanes, merge_output
from core.controller.ops import RoleOps
from core.controller.output_intake import COALESCE_KEEP_CHARS, RECEIVED_KEY, OutputIntake
from core.controller.recovery import Recovery
from core.controller.roles import RoleMachine
from core.controller.slurm import SlurmHosting
from core.controller.stalls import StallWatch
from core.controller.stragglers import StragglerWatch
from core.controller.supervised import StateChange, SupervisedRole
from core.controller.supervisor import Supervisor
from core.diagnosis.rules import Diagnoser
from core.remote.agent_requests import AgentRequests
from core.run import control, pids
from core.run.events import Event, GpuStatus, HostStateChanged, warning
from core.run.publish import Publisher, Subscriber
from core.run.rundir import RunDir
from core.run.status import ALIVE, TERMINAL, ClusterPhase, ClusterStatus, RoleState

TICK_S = 0.1
STATUS_FIGURES_S = 0.25  # how often the status snapshot takes the roles' new figures (a state change: at once)
# Items waiting for the controller thread (agent events, commands): past this the agent links wait
# (their agents' pipes buffer; nothing is dropped) and a user's command is refused, said once.
MAX_QUEUE = 100_000
# While the queue stays full it is said at most once this often: every link that found it full
# used to raise a warning, and 256 workers' links behind a busy controller journalled 23,438 of
# them in a minute (4.3 MB of events.jsonl, and as many status-bar messages in the window).
BEHIND_WARNING_EVERY_S = 60.0
# A stopping role's queued output past this is taken as one chunk, parsed by its last lines, not
# line by line (core.controller.lanes): ~2,500 step lines, four minutes of a role at 10 a second.
STOP_PARSE_CHARS = 64 * 1024
_OVER = "the run is over; launch the cluster again"
_NOTHING_TO_LEAVE = "the run is over; there is nothing to leave running"


class RoleAddress(NamedTuple):
    """Where a role runs, for a request to its agent: its role id, its host, its state, its address."""

    role_id: str
    host: str
    state: RoleState
    address: str


@dataclass(frozen=True)
class SlurmReport:
    """What the Slurm allocation's watcher saw (core.slurm.allocation), for the controller's thread."""

    report: dict[str, Any]


class Controller:
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
        *,
        on_disconnect: str = "keep",
        attach: bool = False,
    ) -> None:
        self.spec = spec
        self.run = run
        self._attaching = attach
        self._detached = False
        # Agents' events and reports; while stopping, output chunks are joined up to the size the
        # output intake still parses whole: fewer, larger takes, every metric kept.
        self._lanes = EventLanes(
            MAX_QUEUE, received_key=RECEIVED_KEY, merge_chars=COALESCE_KEEP_CHARS, flood_chars=STOP_PARSE_CHARS
        )
        self._queue_full = threading.Event()  # set by a link that found it full; said on the loop
        self._behind_said_at: float | None = None  # time.monotonic() when the loop last said so
        self._commands: queue.Queue[tuple[Command, Future[str] | None]] = queue.Queue(MAX_QUEUE)
        self._ticked_at = 0.0
        self._thread: threading.Thread | None = None
        self._interrupted = threading.Event()  # stop_all/kill_all was asked: connections being made give up
        # Set once the run is over AND every agent was closed (told to shut down, its bye seen or its
        # relay gone) or left (detach): what ``done`` and ``wait`` say. A window or CLI that exits when
        # told done must not cut the closing short: an agent never told lingered for a reattach.
        self._closed = threading.Event()
        self._write_error_reported = False
        self._host_states: dict[str, dict[str, Any]] = {}
        self._host_states_lock = threading.Lock()
        self._requests = AgentRequests()  # agents' answers to requests made from other threads

        def current() -> ClusterSpec:
            return self.spec

        self._publisher = Publisher(journal=self._journal)
        self._roles = RoleMachine(
            spec,
            run.path,
            self._publisher,
            on_changed=self._on_role_changed,
            recovering=lambda peer: self._recovery.under_way(peer),
        )
        self._diagnoser = Diagnoser(
            self._roles.names(), spec.strategy, success_policy=spec.stuck.success_policy, phase=str(ClusterPhase.IDLE)
        )
        remote = frozenset(h for h in {t.host for t in spec.explicit_tasks()} if spec.host_config(h).remote)
        factory = transport_factory or link_factory(current, run, on_disconnect=on_disconnect, attaching=attach)
        self._hosts = HostConnections(run, self._sink, self._interrupted, factory=factory, remote_hosts=remote)
        self._crash_loops = CrashLoops(current, self._roles)
        self._stalls = StallWatch(
            current,
            self._roles,
            self._diagnoser,
            on_step=self._on_step,
            on_stall=self._on_stall,
            behind=lambda role: self._lanes.waiting_for(role.task.role_id),
        )
        self._stragglers = StragglerWatch(spec, self._roles)
        self._ops = RoleOps(current, run, self._roles, self._hosts, self._stalls)
        # The checkpoint directory is watched on its own thread; what changed is told on this one.
        self._checkpoints = CheckpointBook(current, run.path, self._publisher)
        self._checkpoint_poller = CheckpointPoller(
            current,
            run.path,
            lambda report: self._lanes.put(report, timeout=TICK_S * 10),  # queue.Full: told again later
            since=(run.created or time.time()) - 1.0,
        )
        self._recovery = Recovery(
            current,
            self._roles,
            self._ops,
            self._publisher,
            phase=lambda: self._supervisor.phase,
            checkpoint=self._checkpoints.saved_by,
        )
        self._telemetry = TelemetryIntake(run, self._roles, self._hosts, self._stalls, self._publisher)
        self._slurm: SlurmHosting | None = None
        if spec.slurm is not None and transport_factory is None:
            self._slurm = SlurmHosting(
                current,
                run,
                self._roles,
                self._hosts,
                self._publisher,
                report=lambda report: self._lanes.put(SlurmReport(report)),
                attaching=attach,
                on_disconnect=on_disconnect,
                place=self._place,
            )
            self._hosts.factory = self._slurm.factory
        slurm = self._slurm
        self._supervisor = Supervisor(
            current,
            run,
            self._roles,
            self._ops,
            self._stalls,
            self._crash_loops,
            self._recovery,
            self._publisher,
            self._diagnoser,
            check_ending=slurm.check_end if slurm is not None else lambda: None,
            ended_by=(lambda: slurm.ended_by) if slurm is not None else lambda: None,
            before_exit=self._telemetry.poll_tensorboard,
        )
        if self._slurm is not None:
            self._slurm.supervisor, self._slurm.ops = self._supervisor, self._ops
        self._output = OutputIntake(
            run,
            self._roles,
            self._stalls,
            self._publisher,
            self._diagnoser,
            behind_anyway=self._stopping,
            on_restored=self._recovery.on_restored,
        )

    def _place(self, spec: ClusterSpec) -> None:
        """The cluster as placed on a Slurm allocation's nodes becomes the one every part reads."""
        self.spec = spec

    def _on_role_changed(self, role: SupervisedRole, now: float) -> None:
        self._supervisor.after_change(role, now)

    def _on_step(self, role: SupervisedRole, step: int) -> None:
        self._crash_loops.healthy(role, f"attempt {role.attempt} made step {step}")
        self._recovery.on_step(role, step)
        self._checkpoints.on_step(time.time())

    def _on_stall(self, role: SupervisedRole, detail: str) -> None:
        self._recovery.on_stall(role, detail)

    def _stopping(self) -> bool:
        """A stop was asked, or the run is ending: output floods are coalesced at once."""
        return self._interrupted.is_set() or self._supervisor.phase in (ClusterPhase.STOPPING, ClusterPhase.DONE)

    # ------------------------------------------------------------------ public API (any thread)

    def subscribe(self, callback: Subscriber) -> None:
        """Call ``callback(event)`` for every event, on the controller thread; it must not block."""
        self._publisher.subscribe(callback)

    def start(self) -> None:
        """Start the agents and every role (or reattach to them); returns at once."""
        self._thread = threading.Thread(target=self._loop, name="controller", daemon=True)
        self._thread.start()
        self._commands.put((Attach() if self._attaching else Launch(), None))
        self._checkpoint_poller.start()

    def detach(self) -> Future[str]:
        """Leave the cluster running: disconnect from every agent, which keeps its roles going
        and their output in the run directory. The controller is done afterwards; reattach with
        ``Controller(spec, RunDir.open(path), attach=True)`` or ``python main.py attach``."""
        return self.command(Detach())

    def host_states(self) -> dict[str, dict[str, Any]]:
        """The latest ``host_state`` of each host: {state, reason, t, ...}."""
        with self._host_states_lock:
            return {host: dict(state) for host, state in self._host_states.items()}

    def command(self, command: Command) -> Future[str]:
        """Queue ``command`` for the controller's thread; the Future has its answer (one line), or
        the reason it was refused."""
        future: Future[str] = Future()
        if self._supervisor.done.is_set():  # its loop has ended (the agents may be closing): nobody would answer
            over = _NOTHING_TO_LEAVE if isinstance(command, Detach) else _OVER
            future.set_exception(RuntimeError(over))
            return future
        if isinstance(command, (StopAll, KillAll)):
            self._interrupted.set()  # a connection still being made (a hung ssh) is given up now
        try:
            self._commands.put_nowait((command, future))
        except queue.Full:
            future.set_exception(
                RuntimeError(
                    f"the controller is {MAX_QUEUE} events behind; {journal_form(command)[0]} not queued, try again"
                )
            )
        return future

    def stop_role(self, role: str) -> Future[str]:
        return self.command(StopRole(role))

    def kill_role(self, role: str) -> Future[str]:
        return self.command(KillRole(role))

    def restart_role(self, role: str) -> Future[str]:
        return self.command(RestartRole(role))

    def stop_all(self) -> Future[str]:
        return self.command(StopAll())

    def kill_all(self) -> Future[str]:
        return self.command(KillAll())

    def restart_all(self) -> Future[str]:
        return self.command(RestartAll())

    def signal_role(self, role: str, signal_name: str) -> Future[str]:
        """Send a signal (e.g. ``STOP``, ``CONT``) to a role's process group."""
        return self.command(SignalRole(role, signal_name))

    def set_sampling(self, *, on: bool, period_s: float | None = None) -> Future[str]:
        """Turn every agent's samples (host, role and GPU figures) off or on, and optionally set
        their period (0.2 to 10 s): what the GPU proof alternates to measure their cost."""
        return self.command(SetSampling(on, period_s))

    def backlog(self) -> int:
        """How many agents' events (and reports) wait for the controller's thread; any thread."""
        return len(self._lanes)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until every role has ended and every agent was closed (or left, on a detach); True if so."""
        return self._closed.wait(timeout_s)

    @property
    def done(self) -> bool:
        """The controller has finished: every role ended and every agent was closed, or (a detach) left running."""
        return self._closed.is_set()

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

    def control_socket(self) -> Path | None:
        """The run's control socket, while it is served (by this run's launch session)."""
        path = control.socket_path_for(self.run.path)
        return path if path.exists() and not self.done else None

    def status(self) -> ClusterStatus:
        """The latest immutable snapshot, built by the controller's thread; never waits. A running
        role the straggler judge flagged is marked as a straggler (core.controller.stragglers)."""
        return self._roles.status()

    def placement(self, role: str) -> dict[str, Any]:
        """The device placement summary of ``role`` so far (see core.telemetry.placement)."""
        with self._roles.lock:
            return self._roles.find(role).telemetry.placement.summary()

    def last_lines(self, role: str, n: int = 20) -> list[str]:
        with self._roles.lock:
            return self._roles.find(role).last_lines(n)

    def history(self, role: str) -> list[StateChange]:
        with self._roles.lock:
            return list(self._roles.find(role).history)

    def remote_hosts(self) -> list[str]:
        """The hosts reached through an agent over SSH."""
        return sorted(self._hosts.remote_hosts)

    def agent_hosts(self) -> frozenset[str]:
        """The hosts whose roles are profiled by their own agent (:meth:`ask_agent`): the SSH
        hosts, and every host of a Slurm allocation (its node's agent step; the node may be this
        machine or not, and only its agent knows)."""
        slurm = self._slurm.hosts() if self._slurm is not None else set()
        return frozenset(self._hosts.remote_hosts | slurm)

    def slurm_state(self) -> dict[str, Any] | None:
        """The run's ``slurm`` record; None for a run not on Slurm. Any thread."""
        return self._slurm.state() if self._slurm is not None else None

    def agent_of(self, role: str) -> RoleAddress:
        """Where ``role`` runs, for a request to its agent; KeyError naming the roles if there is no such role. Any thread."""
        with self._roles.lock:
            found = self._roles.find(role)
            return RoleAddress(
                role_id=found.task.role_id, host=found.host_key, state=found.state, address=found.task.address
            )

    def ask_agent(self, host: str, command: dict[str, Any], wait_s: float) -> dict[str, Any]:
        """Send ``host``'s agent a request (``profile``, ``read_file``) and wait up to ``wait_s``
        for its answer, which never goes through the controller's queue; any thread. Raises
        :class:`core.remote.agent_requests.AgentRequestError` (one line) when there is none."""
        transport = self._hosts.find(host)
        send = transport.send if transport is not None else (lambda _command: False)
        return self._requests.ask(host, send, command, wait_s=wait_s)

    def agent_shares_run_dir(self, host: str) -> Path | None:
        """The folder where ``host``'s agent works, where this machine sees it too (a Slurm node's,
        under the run directory); None when its files are only reached through the agent."""
        if self._slurm is not None and host in self._slurm.hosts():
            return self.run.path / "agents"
        return None

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop everything (if still running) and wait for the controller to finish."""
        if self._thread is None:
            return
        if not self.done:
            self.stop_all()
            if not self.wait(timeout_s):
                self.kill_all()
                self.wait(10)
        self._thread.join(timeout_s)

    # ------------------------------------------------------------------ publishing

    def _journal(self, record: dict[str, Any]) -> None:
        """A state event's record into the journal; a failing disk is told once, as a warning."""
        self.run.record(record)
        if self.run.write_error and not self._write_error_reported:
            self._write_error_reported = True
            message = (
                self.run.write_error
                + f"; the cluster keeps running. Fix: free space on that disk (`df -h {self.run.path}`)"
            )
            self._publisher.publish(warning(message, round(time.time(), 3)))

    def _sink(self, host: str, event: dict[str, Any]) -> None:
        """Where every agent's events arrive, on the link's thread."""
        if self._requests.offer(host, event):
            return  # an answer for the thread that asked, not for the controller
        if self._supervisor.done.is_set():
            # The loop has ended and reads the queue no more: a full queue must not hold the link
            # that reads the agent's last events (its bye) while the agents are being closed.
            return
        event[RECEIVED_KEY] = time.monotonic()  # how far behind the controller is (core.controller.output_intake)
        try:
            self._lanes.put_nowait(AgentEvent(host, event))
        except queue.Full:
            self._queue_full.set()
            self._lanes.put(AgentEvent(host, event))  # the link waits: lossless, bounded

    # ------------------------------------------------------------------ the controller's thread

    def _loop(self) -> None:
        done = self._supervisor.done
        while not done.is_set():
            try:
                while not done.is_set():
                    command, future = self._commands.get_nowait()
                    self._on_command(command, future)
            except queue.Empty:
                pass
            except Exception as exc:  # never let one bad command kill the controller
                self._publisher.publish(warning(f"internal error: {exc!r}", round(time.time(), 3)))
            if done.is_set():
                break
            # While stopping, a role's consecutive output chunks are taken joined: the backlog then
            # costs per line, not per chunk (core.controller.lanes).
            item: AgentEvent | SlurmReport | CheckpointReport | None = self._lanes.take(TICK_S, merged=self._stopping())
            if self._queue_full.is_set():
                self._queue_full.clear()
                said = self._behind_said_at
                if said is None or time.monotonic() - said >= BEHIND_WARNING_EVERY_S:
                    self._behind_said_at = time.monotonic()
                    message = (
                        f"the controller fell {MAX_QUEUE} events behind; reading from the agents waits until it "
                        "catches up (nothing is dropped)"
                    )
                    self._publisher.publish(warning(message, round(time.time(), 3)))
            try:
                if isinstance(item, AgentEvent):
                    self._on_agent_event(item.host, item.event)
                elif isinstance(item, SlurmReport) and self._slurm is not None:
                    self._slurm.on_report(item.report)
                elif isinstance(item, CheckpointReport):
                    self._checkpoints.on_report(item)
                if item is None or time.monotonic() - self._ticked_at >= TICK_S / 2:
                    self._ticked_at = time.monotonic()  # deadlines, not every event of a flood
                    now = time.time()
                    self._supervisor.tick(now)
                    self._checkpoints.tick(now)
                    self._stragglers.check(now)
                    self._roles.refresh_figures(now, every_s=STATUS_FIGURES_S)
            except Exception as exc:  # never let one bad event kill the controller
                self._publisher.publish(warning(f"internal error: {exc!r}", round(time.time(), 3)))
        try:
            self._checkpoint_poller.stop()
            self._hosts.close_all(detach=self._detached)
            if self._slurm is not None:
                self._slurm.release(detached=self._detached)
        finally:
            self.run.close_files()
            self._closed.set()
            self._refuse_queued()

    def _refuse_queued(self) -> None:
        """Commands queued as the loop ended get their answer: the run is over."""
        with contextlib.suppress(queue.Empty):
            while True:
                _command, future = self._commands.get_nowait()
                if future is not None and future.set_running_or_notify_cancel():
                    future.set_exception(RuntimeError(_OVER))

    def _on_command(self, command: Command, future: Future[str] | None) -> None:
        if future is not None and not future.set_running_or_notify_cancel():
            return  # withdrawn: its asker heard it refused (core.controller.control_server), so not done
        # The journal keeps what users asked for: it explains the states that follow.
        name, arg = journal_form(command)
        self.run.record({"t": round(time.time(), 3), "kind": "command", "command": name, "arg": arg})
        try:
            message = self._run_command(command)
        except (KeyError, ValueError, RuntimeError) as exc:
            if future is not None:
                future.set_exception(exc)
            return
        if future is not None:
            future.set_result(message)

    def _run_command(self, command: Command) -> str:
        """Carry out ``command``, checked against the cluster's phase and the role's state."""
        phase = self._supervisor.phase
        match command:
            case Launch():
                return self._launch()
            case Attach():
                return self._reattach()
            case Detach():
                if phase == ClusterPhase.DONE:
                    raise RuntimeError(_NOTHING_TO_LEAVE)
                self._detached = True
                self._supervisor.end(ClusterPhase.DETACHED)
                return "left the cluster running; reattach with: python main.py attach " + str(self.run.path)
        if phase == ClusterPhase.DONE:
            raise RuntimeError(_OVER)
        match command:
            case StopAll():
                self._supervisor.set_phase(ClusterPhase.STOPPING, "stopped", "stopped by the user")
                self._ops.stop_rest()
                return "stopping every role"
            case KillAll():
                self._supervisor.set_phase(ClusterPhase.STOPPING, "stopped", "killed by the user")
                self._ops.stop_rest(kill=True)
                return "killing every role"
            case RestartAll():
                if phase != ClusterPhase.RUNNING:
                    raise RuntimeError(f"the cluster is {phase}; it can be restarted while it runs")
                for role in self._roles:
                    role.policy_restarts = 0
                    self._ops.restart(role)
                return "restarting every role"
            case SetSampling(on, period_s):
                sampling: dict[str, Any] = {"op": "configure", "sampling": on}
                if period_s is not None:
                    sampling["sample_period_s"] = float(period_s)
                return f"sampling {'on' if on else 'off'} on {self._hosts.send_all(sampling)} host(s)"
            case SignalRole(name, signal_name):
                return self._ops.signal(self._roles.find(name), signal_name)
            case StopRole(name) | KillRole(name):
                role = self._roles.find(name)
                if role.state in TERMINAL:
                    return f"{role.task.role_id} is already {role.state}"
                kill = isinstance(command, KillRole)
                self._ops.stop(role, kill=kill)
                return f"{'killing' if kill else 'stopping'} {role.task.role_id}"
            case RestartRole(name):
                role = self._roles.find(name)
                if phase != ClusterPhase.RUNNING:
                    raise RuntimeError(f"the cluster is {phase}; a role can be restarted while it runs")
                self._ops.restart(role)
                return f"restarting {role.task.role_id}"
        raise ValueError(f"unknown command {command!r}")

    def _launch(self) -> str:
        if self._slurm is not None:
            return self._slurm.launch()  # the roles launch once the allocation runs
        self._supervisor.set_phase(ClusterPhase.RUNNING)
        self._hosts.connect_all([r.host_key for r in self._roles], attaching=False)
        if self._interrupted.is_set():
            return "stopped while connecting"  # the queued stop ends the roles not started
        for role in self._roles:
            self._ops.launch(role)
        return "launched"

    def _reattach(self) -> str:
        """Rebuild the roles' states from the journal, then reach every host's agent again; each
        agent's hello says which roles still run, and its resume sends the output not yet seen."""
        if self._slurm is not None:
            self._slurm.attach()
        reattach.restore(self.run, self._roles, self._diagnoser)
        self._supervisor.set_phase(ClusterPhase.RUNNING)
        self._hosts.connect_all([r.host_key for r in self._roles], attaching=True)
        return "reattached"

    def _on_agent_event(self, host: str, event: dict[str, Any]) -> None:
        kind = event.get("ev")
        name = event.get("role")
        role = self._roles.get(name)
        if role is not None and event.get("attempt") not in (None, role.attempt):
            return  # late news of an earlier attempt
        if role is not None:
            if kind == "output":
                self._output.on_output(role, event)
            elif kind == "skipped":
                self._output.on_skipped(role, event)
            elif kind == "started":
                pid = int(event["pid"])
                transport = self._hosts.find(host)
                # Its start time tells it from a reused pid; journalled for a role on this machine,
                # where, once a launcher is gone, it tells whether the role still runs (core.run.leftover).
                here = transport is not None and transport.is_local
                self._roles.started(role, pid, pid_started=pids.start_time(pid), journal_start=here)
            elif kind == "start_failed":
                self._roles.start_failed(role, str(event.get("error")), output=f"[towerdeck] {event.get('error')}\n")
            elif kind == "exited" and role.state in ALIVE:  # once: a resume repeats exits
                self._take_lane(self._lanes.take_role(role.task.role_id))  # its output before its exit
                self._output.take_held(role)  # its last lines first, if a flood left them unparsed
                self._supervisor.on_exit(role, event.get("returncode"), event.get("signal"))
            elif kind == "scalars":
                points = event.get("points")
                if isinstance(points, list):
                    self._telemetry.on_scalars(role, [p for p in points if isinstance(p, dict)])
        if kind == "sample":
            self._telemetry.on_sample(host, event)
        elif kind == "gpu_status":
            count = event.get("count")
            payload = GpuStatus(host, str(event.get("status")), count if isinstance(count, int) else None)
            self._publisher.publish(Event(round(time.time(), 3), None, payload))
        elif kind in ("log_write_failed", "log_write_recovered"):
            self._telemetry.on_log_write(host, event, failed=kind == "log_write_failed")
        elif kind == "agent_lost":
            self._on_agent_lost(host, event)
        elif kind == "host_state":
            self._on_host_state(host, event)
        elif kind == "hello":
            self._hosts.hello(host, tails_tensorboard=event.get("tensorboard") is True)
            if self._attaching:
                reattach.adopt(self.run, self._roles, self._ops, host=host, hello=event)
        elif kind == "error":
            message = f"agent on {host}: {event.get('message')}"
            self._publisher.publish(warning(message, round(time.time(), 3), name if isinstance(name, str) else None))

    def _take_lane(self, items: list[AgentEvent]) -> None:
        """Handle what waited in a lane, in order, before the news that ends it (an exit, a lost
        agent); joined while stopping, as the loop takes lanes then."""
        if self._stopping():
            items = merge_output(items, received_key=RECEIVED_KEY, max_chars=self._lanes.join_limit(items))
        for item in items:
            self._on_agent_event(item.host, item.event)

    def _on_agent_lost(self, host: str, event: dict[str, Any]) -> None:
        self._take_lane(self._lanes.take_host(host))  # its roles' output before they are lost
        transport = self._hosts.drop(host)
        local = transport.is_local if transport is not None else True
        reason = event.get("reason")
        why = str(reason) if reason else f"exited (code {event.get('returncode')})"
        self._supervisor.on_agent_lost(host, local=local, busy=event.get("busy") is True, why=why)

    def _on_host_state(self, host: str, event: dict[str, Any]) -> None:
        fields = {k: v for k, v in event.items() if k not in ("ev", "t", RECEIVED_KEY)}
        with self._host_states_lock:
            self._host_states[host] = {"t": event.get("t"), **fields}
        payload = HostStateChanged.from_record({**fields, "host": host})
        self._publisher.publish(Event(round(time.time(), 3), None, payload))
