"""The roles' state machine: every role's state changes here and nowhere else.

After supervisord's ``Subprocess``: each change is a named transition (:class:`Transition`) that
leaves from the states :data:`TRANSITIONS` allows and enters one of the states it may enter; a move
outside that table is refused with a warning, never made. Each change is recorded in the role's view
and its history, rebuilds that role's line of the status snapshot, is published as a
``role_state`` event (journalled first) and is handed to ``on_changed`` (the supervisor, which
decides what the cluster does, and the diagnosis).

The machine only keeps states. What moves a role (an agent's event, a user's command, the restart
policy, a deadline on the tick) is the other parts' business; they call the transitions.

Role states (supervisord's, with Kubeflow's outcomes)::

    PENDING -> STARTING -> RUNNING -> SUCCEEDED | FAILED | STOPPING -> STOPPED
                   ^          |
                   +- BACKOFF <+   (restart policy, with exponential back-off)
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from core.cluster.render import role_dir
from core.cluster.spec import ClusterSpec, parse_role_id, role_id
from core.controller.supervised import StateChange, SupervisedRole
from core.diagnosis.rules import Diagnosis
from core.run.events import (
    Event,
    RoleCrashLoop,
    RolePid,
    RoleStalled,
    RoleStateChanged,
    RoleStraggler,
    RoleWaiting,
    warning,
)
from core.run.publish import Publisher
from core.run.role_view import StatusBoard
from core.run.status import ALIVE, ClusterPhase, ClusterStatus, RoleState


class Transition(enum.StrEnum):
    """The named moves of a role's life."""

    LAUNCH = "launch"  # an attempt is sent to the agent
    RUN = "run"  # it lived through its start grace
    STOP = "stop"  # a stop or kill was sent
    EXIT = "exit"  # it ended, on its own or as asked: the policy says into which state
    BACK_OFF = "back_off"  # it will be restarted after a delay (the policy)
    START_FAILED = "start_failed"  # the agent could not start it, or there is no agent to ask
    CANCEL = "cancel"  # stopped before it started (pending, or between attempts)
    LOST = "lost"  # its agent is gone, and the role with it
    ADOPT = "adopt"  # a reattach found it running on its agent: the agent's word is the truth
    VANISH = "vanish"  # a reattach found its agent no longer has it

    def __str__(self) -> str:
        return self.value


# The rebuild of every role's figures runs at most once every this many times the CPU it took, so it
# stays within ~5 % of the controller's thread whatever the size: at 256 simulated workers, 4 a
# second took 28 % of the thread (34 ms each), and at 1,024 it would have been the whole thread.
FIGURES_COST_FACTOR = 20.0
_ALL = frozenset(RoleState)
_ENDS = frozenset({RoleState.SUCCEEDED, RoleState.FAILED, RoleState.STOPPED, RoleState.BACKOFF})


def _from(
    states: frozenset[RoleState] | set[RoleState], enters: set[RoleState]
) -> dict[RoleState, frozenset[RoleState]]:
    return {state: frozenset(enters) for state in states}


# Each transition: the states it leaves from, and for each the states it may enter. Nothing else moves a role.
TRANSITIONS: dict[Transition, dict[RoleState, frozenset[RoleState]]] = {
    # From STARTING only on a reattach whose start never reached the agent: it is sent again.
    Transition.LAUNCH: _from(_ALL - {RoleState.RUNNING}, {RoleState.STARTING}),
    Transition.RUN: _from({RoleState.STARTING}, {RoleState.RUNNING}),
    Transition.STOP: _from({RoleState.STARTING, RoleState.RUNNING}, {RoleState.STOPPING}),
    # From STOPPING to BACKOFF: a role a recovery stopped waits for its group (core.controller.recovery).
    Transition.EXIT: {
        RoleState.STARTING: _ENDS,
        RoleState.RUNNING: _ENDS,
        RoleState.STOPPING: frozenset({RoleState.STOPPED, RoleState.FAILED, RoleState.BACKOFF}),
    },
    Transition.START_FAILED: _from({RoleState.STARTING}, {RoleState.FAILED}),
    Transition.CANCEL: _from({RoleState.PENDING, RoleState.BACKOFF}, {RoleState.STOPPED}),
    Transition.LOST: _from(ALIVE, {RoleState.FAILED, RoleState.STOPPED}),
    Transition.ADOPT: _from(_ALL, set(ALIVE)),
    Transition.VANISH: _from(ALIVE, {RoleState.STOPPED}),
}


class RoleMachine:
    """Every role of a run as the controller supervises it, and the one place their states change.

    Runs on the controller's thread; :meth:`status` and the locked readers are for any thread."""

    def __init__(
        self,
        spec: ClusterSpec,
        run_path: Path,
        publisher: Publisher,
        *,
        on_changed: Callable[[SupervisedRole, float], None],
        recovering: Callable[[str], str | None] = lambda _peer: None,
    ) -> None:
        """``on_changed``: told of every state change (the supervisor); ``recovering``: what the
        recovery under way does about a role, in words, or None (a wait on it says so)."""
        # planned_tasks: a counted job's roles (tasks = N on Slurm) exist before the allocation
        # gives them a host and a port (core/controller/slurm.py places them then).
        self._roles: dict[str, SupervisedRole] = {
            t.role_id: SupervisedRole(t, t.host, run_path, spec.metric_patterns) for t in spec.planned_tasks()
        }
        self._publisher = publisher
        self._on_changed = on_changed
        self._recovering = recovering
        # Guards what other threads read of the roles (their output tail, placement, history).
        self.lock = threading.RLock()
        self._board = StatusBoard(self._roles, time.time())
        self._figures_at = 0.0
        self._figures_cost_s = 0.0  # CPU the last rebuild took (see refresh_figures)

    # ------------------------------------------------------------------ the roles

    def __iter__(self) -> Iterator[SupervisedRole]:
        return iter(self._roles.values())

    def __len__(self) -> int:
        return len(self._roles)

    def names(self) -> frozenset[str]:
        return frozenset(self._roles)

    def by_name(self) -> Mapping[str, SupervisedRole]:
        return self._roles

    def get(self, name: object) -> SupervisedRole | None:
        """The role called exactly ``name`` (an agent's event names it so), or None."""
        return self._roles.get(name) if isinstance(name, str) else None

    def find(self, role: str) -> SupervisedRole:
        """The role a user names (``worker:1``, ``worker/1``...); KeyError naming the roles if none."""
        job, index = parse_role_id(role)
        name = role_id(job, index)
        if name not in self._roles:
            raise KeyError(f"no role {role!r}; the roles are {', '.join(self._roles)}")
        return self._roles[name]

    def on_host(self, host: str) -> list[SupervisedRole]:
        return [r for r in self._roles.values() if r.host_key == host]

    # ------------------------------------------------------------------ the status, for any thread

    def status(self) -> ClusterStatus:
        """The latest snapshot (with the phase the supervisor last set); never waits."""
        return self._board.current

    def set_phase(self, phase: ClusterPhase, result: str | None, reason: str) -> None:
        self._board.set_phase(phase, result, reason)

    def set_recovery(self, text: str, *, recovering: bool) -> None:
        """The recovery under way (or how the last one ended), in words, for the status."""
        self._board.set_recovery(text, recovering=recovering)

    def refresh_figures(self, now: float, *, every_s: float) -> None:
        """Rebuild every role's figures in the snapshot (steps, stragglers, process figures), at
        most once every ``every_s``, and less often when a rebuild costs more than a twentieth of
        that (FIGURES_COST_FACTOR): a state change rebuilds its own role at once."""
        if now - self._figures_at < max(every_s, self._figures_cost_s * FIGURES_COST_FACTOR):
            return
        self._figures_at = now
        started = time.thread_time()
        self._board.refresh(now)
        self._figures_cost_s = time.thread_time() - started

    # ------------------------------------------------------------------ transitions

    def new_attempt(self, role: SupervisedRole, *, start_s: float) -> None:
        """Ready the role's next attempt: its number and log, and its counters and deadlines reset
        (``start_s``: the start grace before it counts as running)."""
        with self.lock:
            role.telemetry.new_attempt()
            role.attempt += 1
            role.pid = None
            role.returncode = None
            role.signal = None
            role.stop_requested = False
            role.running_at = time.time() + start_s
            role.log_path = role_dir(role.run_path, role.task) / f"attempt-{role.attempt}.log"
            role.last_step = None
            role.progress_at = None
            role.output_blocked = False

    def launch(self, role: SupervisedRole) -> None:
        """The attempt readied by :meth:`new_attempt` is being sent to the agent: STARTING."""
        self._move(role, Transition.LAUNCH, RoleState.STARTING, detail=f"attempt {role.attempt}")

    def started(self, role: SupervisedRole, pid: int, *, pid_started: float | None, journal_start: bool) -> None:
        """The agent started the attempt: its pid and the process's start time (no state change:
        RUNNING comes after the grace). ``journal_start``: the start time goes into the journal too
        (a role on this machine, whose pid can be checked there later)."""
        with self.lock:
            role.pid = pid
            role.pid_started = pid_started
        payload = RolePid(
            pid, attempt=role.attempt, log=str(role.log_path), pid_started=pid_started if journal_start else None
        )
        self._publisher.publish(Event(round(time.time(), 3), role.task.role_id, payload))

    def run(self, role: SupervisedRole) -> None:
        role.running_at = None
        self._move(role, Transition.RUN, RoleState.RUNNING, detail=f"pid {role.pid}")

    def stop(self, role: SupervisedRole, detail: str, *, restart: bool = False) -> None:
        """A stop (or kill) was sent; ``restart``: start it again once it has stopped."""
        role.stop_requested = True
        role.restart_after_stop = restart
        if role.state != RoleState.STOPPING:
            self._move(role, Transition.STOP, RoleState.STOPPING, detail=detail)

    def exited(self, role: SupervisedRole, returncode: int | None, signal: int | None, *, now: float) -> None:
        """Its process ended: what it ended with (no state change yet: :meth:`settle` follows)."""
        with self.lock:
            role.pid = None
            role.returncode = returncode
            role.signal = signal
            role.ended_at = now
            role.running_at = None

    def settle(
        self,
        role: SupervisedRole,
        state: RoleState,
        detail: str,
        *,
        backoff_until: float | None = None,
        error: str = "",
    ) -> None:
        """Where an ended attempt leaves the role: SUCCEEDED, FAILED, STOPPED, or BACKOFF until
        ``backoff_until``; ``error``: why a failed attempt died."""
        role.backoff_until = backoff_until
        self._move(role, Transition.EXIT, state, detail=detail, error=error)

    def start_failed(self, role: SupervisedRole, detail: str, *, output: str = "") -> None:
        with self.lock:
            if output:
                role.add_output(output)
            role.ended_at = time.time()
        self._move(role, Transition.START_FAILED, RoleState.FAILED, detail=detail, error=detail)

    def cancel(self, role: SupervisedRole, detail: str) -> None:
        role.backoff_until = None
        self._move(role, Transition.CANCEL, RoleState.STOPPED, detail=detail)

    def lost(self, role: SupervisedRole, detail: str) -> None:
        with self.lock:
            role.ended_at = time.time()
            role.pid = None
        state = RoleState.STOPPED if role.stop_requested else RoleState.FAILED
        self._move(role, Transition.LOST, state, detail=detail)

    def adopt(
        self, role: SupervisedRole, *, attempt: int, pid: int | None, pid_started: float | None, log_path: Path
    ) -> None:
        """A reattach: the agent runs (or ran) this attempt; a role still starting goes on to
        running at the next tick, any other takes the agent's word that it runs."""
        with self.lock:
            role.attempt = attempt
            role.pid = pid
            role.pid_started = pid_started
            role.log_path = log_path
            role.running_at = time.time() if role.state == RoleState.STARTING else None
        state = role.state if role.state in ALIVE else RoleState.RUNNING
        self._move(role, Transition.ADOPT, state, detail="reattached")

    def vanish(self, role: SupervisedRole, detail: str) -> None:
        with self.lock:
            role.pid = None
            role.ended_at = time.time()
        self._move(role, Transition.VANISH, RoleState.STOPPED, detail=detail)

    def restore(self, role: SupervisedRole, event: Event) -> None:
        """A reattach: the state the journal last recorded for the role, as it was (not a move:
        nothing is published, the journal has it already)."""
        with self.lock:
            role.apply(event.t, event.payload)
        self._board.role_changed(role.task.role_id, time.time())

    def _move(
        self, role: SupervisedRole, transition: Transition, state: RoleState, *, detail: str, error: str = ""
    ) -> None:
        """The one place a role's state changes: checked against :data:`TRANSITIONS`, taken into the
        role's view as the journal's record of it will be when read back, then published."""
        if state not in TRANSITIONS[transition].get(role.state, frozenset()):
            message = f"ignored transition {transition} ({role.state} -> {state})"
            self._publisher.publish(warning(message, round(time.time(), 3), role.task.role_id))
            return
        now = time.time()
        payload = RoleStateChanged(
            old=role.state,
            state=state,
            detail=detail,
            pid=role.pid,
            attempt=role.attempt,
            restarts=role.restarts,
            returncode=role.returncode,
            signal=role.signal,
            error=error,
        )
        with self.lock:
            role.apply(now, payload)
            role.history.append(StateChange(since=role.state_since, state=state, detail=detail))
        self._board.role_changed(role.task.role_id, now)
        self._publisher.publish(Event(role.state_since, role.task.role_id, payload))
        self._on_changed(role, now)

    # ------------------------------------------------------------------ conditions beside the state

    def note(self, role: SupervisedRole, condition: RoleStalled | RoleWaiting | RoleCrashLoop | RoleStraggler) -> None:
        """A condition of the role that is not its state (stalled, waiting for a peer, crash-looping,
        a straggler):
        into its view and its line of the status, then published (and journalled)."""
        event = Event(round(time.time(), 3), role.task.role_id, condition)
        with self.lock:
            role.apply(event.t, event.payload)
        self._board.role_changed(role.task.role_id, event.t)
        self._publisher.publish(event)

    def waits(self, diagnoses: list[Diagnosis]) -> None:
        """What roles wait for, as the diagnosis found it."""
        for d in diagnoses:
            role = self._roles.get(d.role)
            if role is None:
                continue
            fix, certain = d.fix, d.certain
            if d.waiting and d.waiting_for and (under_way := self._recovering(d.waiting_for)):
                # The diagnosis agrees with the recovery: the peer is being brought back, the wait ends.
                fix, certain = f"nothing to do: {under_way}", False
            self.note(role, RoleWaiting(d.waiting, d.waiting_for, d.cause, certain, d.message, fix, d.line, d.since))
