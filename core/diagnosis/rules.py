"""Say why a cluster is stuck: TensorFlow's waiting states, related to the other roles.

The commonest failure of a distributed TensorFlow run is not a crash but a wait that never ends:
a classic non-chief worker whose session needs a task that has already exited prints
``CreateSession still waiting for response from worker: /job:worker/replica:0/task:0`` every
10 s forever, and looks like a healthy ``running`` role. This module is pure (no processes, no
Qt, no TensorFlow): :func:`recognise` (in :mod:`core.diagnosis.lines`) reads one output line,
and a :class:`Diagnoser` is fed
output lines, training steps and role state changes with timestamps, and says which role waits
for which, what that peer is doing, and the fix.

Every recognised line was captured from a real TensorFlow 2.21 run (see ``tests/core/fixtures``,
``tests/core/test_stuck.py`` and ``tests/core/test_stuck_coordination.py``):

- ``master.cc:278] CreateSession still waiting for response from worker: /job:J/replica:0/task:N``
  (TensorFlow's C++ INFO log: hidden by ``TF_CPP_MIN_LOG_LEVEL`` >= 1);
- ``INFO:tensorflow:Waiting for model to be ready.  Ready_for_local_init_op: ...`` (the
  SessionManager of ``MonitoredTrainingSession``'s non-chief; a Python INFO log, shown only with
  ``tf.compat.v1.logging.set_verbosity(INFO)``);
- ``coordination_service.cc:502] Waiting for 1/2 tasks to connect.`` then
  ``coordination_service.cc:505] Example stragglers:`` and ``/job:worker/replica:0/task:1`` on
  the next line (MultiWorkerMirroredStrategy's coordination-service leader, whose peer has not
  started its strategy; a C++ INFO log, printed once per task that connects, nothing after);
- ``ERROR:tensorflow:Worker /job:worker/replica:0/task:0 failed with UnavailableError():...``
  (ParameterServerStrategy's ClusterCoordinator, on the chief, losing a worker: it waits for it
  to come back; a Python ERROR log, shown by default);
- ``INFO:tensorflow:An error was raised. This may be due to a preemption in a connected worker or
  parameter server. The current session will be closed and a new session will be created. ...``
  followed by the error whose gRPC details name the peer (``from remote target
  /job:ps/replica:0/task:0``): MonitoredSession recreating its session (TF 2.21's form of a
  "Recovering session" loop; a Python INFO log).

When those logs are hidden, the same wait is still found from the roles' states: a
between-graph worker that has printed no step since the chief (or a ps) ended is waiting for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from core.cluster.roles import chief_of
from core.diagnosis.lines import (
    COORDINATION_CONNECT,
    CREATE_SESSION,
    MODEL_READY,
    RECOVERING,
    REMOTE_TARGET,
    SILENT,
    STRAGGLERS,
    TASK_NAME,
    TASKS_TO_CONNECT,
    WORKER_LOST,
    WORKER_RECOVERED,
    WaitSign,
    recognise,
)
from core.diagnosis.wording import ago, how_it_ended

TERMINAL_STATES = frozenset({"succeeded", "failed", "stopped"})
ALIVE_STATES = frozenset({"starting", "running", "stopping"})
MAX_PARTIAL_CHARS = 64 * 1024  # a line longer than this is judged by its last 64 KiB


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """What one role is waiting for, or (``waiting`` False) that it no longer waits.

    ``certain`` is True when the wait can never end by itself (the peer it needs has exited and
    TensorFlow itself says it is waiting for it)."""

    role: str
    waiting: bool
    waiting_for: str | None
    cause: str  # create_session, model_ready, coordination_connect, worker_lost, recovering or silent
    certain: bool
    message: str
    fix: str
    line: str
    since: float

    def event_data(self) -> dict[str, Any]:
        """The payload of a ``role_waiting`` event (without ``role``, which the event carries)."""
        data = asdict(self)
        del data["role"]
        return data


@dataclass
class _Wait:
    sign: WaitSign
    first_t: float
    last_t: float


@dataclass
class _State:
    state: str
    since: float
    detail: str


class Diagnoser:
    """Relates roles' waiting states to the other roles.

    Feed it with :meth:`on_output`, :meth:`on_step`, :meth:`on_state` and :meth:`tick`; each
    returns the diagnoses that changed (a new or different wait, or a cleared one), which the
    caller publishes as ``role_waiting`` events; waits are only judged while :meth:`on_phase` (or
    ``phase``) says the cluster is ``running``. ``grace_s`` is how long a role may print no step
    after the peer it needs ended before a silent wait is inferred; ``long_wait_s`` is how long a
    role may wait for a peer that is alive before that is worth saying.
    """

    def __init__(
        self,
        roles: Iterable[str],
        strategy: str = "between_graph",
        grace_s: float = 10.0,
        long_wait_s: float = 120.0,
        success_policy: str = "all",
        phase: str = "running",
    ) -> None:
        self._roles = list(dict.fromkeys(roles))
        # The roles never change after this: a set to ask "is it one of ours?" and the ps tasks a
        # worker's session needs, found once. Scanning the list for both in every judgement made a
        # tick O(roles^2): at 1,024 simulated workers a million string tests ten times a second,
        # and a launch (every role's state judges every role) O(roles^3).
        self._known = frozenset(self._roles)
        self._ps = tuple(r for r in self._roles if r.startswith("ps:"))
        self._strategy = strategy
        self._chief = chief_of(self._roles)
        self.grace_s = grace_s
        self.long_wait_s = long_wait_s
        self._success_policy = success_policy
        self._partial: dict[str, str] = {}
        self._stragglers: dict[str, str] = {}  # role -> its last "Waiting for K/N tasks" line, until named
        self._waits: dict[str, _Wait] = {}
        self._last_step_t: dict[str, float] = {}
        self._step_gap_s: dict[str, float] = {}  # between a role's last two step lines
        self._states: dict[str, _State] = {}
        self._current: dict[str, Diagnosis] = {}
        self._attempt_start: dict[str, float] = {}
        self._active = phase == "running"  # the cluster's phase: waits are judged while it runs

    # ------------------------------------------------------------------ inputs

    def on_output(self, role: str, text: str, t: float) -> list[Diagnosis]:
        """Output of ``role`` at ``t`` (any chunk: lines may be split anywhere)."""
        if role not in self._known:
            return []
        text = self._partial.get(role, "") + text
        lines = text.split("\n")
        self._partial[role] = lines.pop()[-MAX_PARTIAL_CHARS:]
        changed = False
        for raw in lines:
            line = raw.rsplit("\r", 1)[-1]
            if self._coordination(role, line):
                changed = True
                continue
            sign = self._straggler(role, line) or recognise(line)
            if sign is None:
                continue
            wait = self._waits.get(role)
            if wait is not None and wait.sign.kind == sign.kind and wait.sign.peer == sign.peer:
                wait.last_t = t
                wait.sign = sign
            else:
                self._waits[role] = _Wait(sign, t, t)
            changed = True
        return self._judge(t, [role]) if changed else []

    def _coordination(self, role: str, line: str) -> bool:
        """Note the coordination service's "Waiting for K/N tasks to connect" (the stragglers are
        named on the lines after "Example stragglers:"); True when every task has now connected
        and ``role``'s wait for one of them ended."""
        wait = self._waits.get(role)
        if wait is not None and wait.sign.kind == RECOVERING and wait.sign.peer is None and "remote target" in line:
            m = REMOTE_TARGET.search(line)
            if m is not None and (peer := f"{m['job']}:{int(m['index'])}") != role:
                wait.sign = WaitSign(RECOVERING, peer, wait.sign.line)  # the error's gRPC details name it
                return True
        if "has been recovered" in line and WORKER_RECOVERED.search(line):
            wait = self._waits.get(role)
            if wait is not None and wait.sign.kind == WORKER_LOST:
                del self._waits[role]
                return True
        elif "tasks to connect" in line and (m := TASKS_TO_CONNECT.search(line)) is not None:
            self._stragglers[role] = line.strip()
            wait = self._waits.get(role)
            if int(m["left"]) == 0 and wait is not None and wait.sign.kind == COORDINATION_CONNECT:
                del self._waits[role]
                return True
        elif "Example stragglers" in line and role in self._stragglers and STRAGGLERS.search(line):
            self._stragglers[role] += " " + line.strip().split("] ", 1)[-1]
        return False

    def _straggler(self, role: str, line: str) -> WaitSign | None:
        """The first straggler named after "Example stragglers:" (the others wait behind it)."""
        said = self._stragglers.get(role)
        if said is None or not said.endswith("Example stragglers:"):
            return None
        m = TASK_NAME.match(line)
        if m is None:
            return None
        del self._stragglers[role]
        return WaitSign(COORDINATION_CONNECT, f"{m['job']}:{int(m['index'])}", f"{said} {line.strip()}")

    def on_step(self, role: str, t: float) -> list[Diagnosis]:
        """``role`` printed a new training step: whatever it waited for, it no longer does."""
        if role not in self._known:
            return []
        previous = self._last_step_t.get(role)
        if previous is not None and t > previous:
            self._step_gap_s[role] = t - previous
        self._last_step_t[role] = t
        self._waits.pop(role, None)
        return self._judge(t, [role])

    def on_state(self, role: str, state: str, t: float, *, detail: str = "") -> list[Diagnosis]:
        """``role`` entered ``state`` (a RoleState value) at ``t``; ``detail`` says how (exit code)."""
        if role not in self._known:
            return []
        previous = self._states.get(role)
        self._states[role] = _State(state, t, detail)
        self._attempt_start.setdefault(role, t)  # first seen (e.g. on reattach): judged from then
        if state == "starting" or (previous is not None and previous.state in TERMINAL_STATES):
            # A new attempt: its waits and steps start afresh.
            self._waits.pop(role, None)
            self._last_step_t.pop(role, None)
            self._step_gap_s.pop(role, None)
            self._partial.pop(role, None)
            self._stragglers.pop(role, None)
            self._attempt_start[role] = t
        return self._judge(t, self._roles)

    def on_phase(self, phase: str, t: float) -> list[Diagnosis]:
        """The cluster's phase (a ClusterPhase value): waits are only judged while it is
        ``running``; completing, stopping or failing clears them (the roles are being stopped)."""
        self._active = phase == "running"
        return self._judge(t, self._roles)

    def tick(self, now: float) -> list[Diagnosis]:
        """Re-judge every role (silent waits and long waits become due with time alone)."""
        return self._judge(now, self._roles)

    def current(self, role: str) -> Diagnosis | None:
        """The wait ``role`` is in now, or None."""
        return self._current.get(role)

    # ------------------------------------------------------------------ judging

    def _judge(self, now: float, roles: Iterable[str]) -> list[Diagnosis]:
        changed: list[Diagnosis] = []
        for role in roles:
            new = self._diagnose(role, now)
            old = self._current.get(role)
            if new is None:
                if old is not None:
                    del self._current[role]
                    changed.append(
                        Diagnosis(
                            role=role,
                            waiting=False,
                            waiting_for=old.waiting_for,
                            cause=old.cause,
                            certain=False,
                            message=f"{role} no longer waits",
                            fix="",
                            line="",
                            since=now,
                        )
                    )
            elif old is None or (old.waiting_for, old.cause, old.certain) != (new.waiting_for, new.cause, new.certain):
                self._current[role] = new
                changed.append(new)
        return changed

    def _state(self, role: str) -> _State | None:
        return self._states.get(role)

    def _diagnose(self, role: str, now: float) -> Diagnosis | None:
        own = self._state(role)
        if not self._active or own is None or own.state not in ("starting", "running"):
            return None
        wait = self._waits.get(role)
        if wait is not None:
            peer = wait.sign.peer or self._chief
            if peer is not None and peer != role and peer in self._known:
                return self._explicit(role, peer, wait, now=now)
        return self._silent(role, now)

    def _explicit(self, role: str, peer: str, wait: _Wait, *, now: float) -> Diagnosis | None:
        kind = wait.sign.kind
        theirs = self._state(peer)
        state = theirs.state if theirs is not None else "pending"
        what = {
            MODEL_READY: "initialise the model",
            COORDINATION_CONNECT: "connect to the coordination service",
            WORKER_LOST: "come back",
        }.get(kind, "answer its CreateSession")
        if kind == WORKER_LOST:
            return self._worker_lost(role, peer, wait, now=now)
        if kind == RECOVERING:
            return self._recovering(role, peer, wait, now=now)
        if theirs is not None and state in TERMINAL_STATES:
            how = how_it_ended(theirs.state, theirs.detail)
            since = ago(now - theirs.since)
            if kind == COORDINATION_CONNECT:
                # The leader waits for every task to register before any collective can run: a
                # task that has exited never will (a new attempt of it would).
                message = (
                    f"{role} is waiting for {peer} to {what}, and {peer} exited ({how}) {since} ago; "
                    "it will wait forever."
                )
                certain = True
            elif kind == CREATE_SESSION:
                message = f"{role} is waiting for {peer}, which exited ({how}) {since} ago; it will wait forever."
                certain = True
            else:
                message = (
                    f"{role} is waiting for {peer} to {what}, and {peer} exited ({how}) {since} ago; "
                    f"its next check needs {peer} too and will wait forever."
                )
                certain = False  # a session with device_filters would not need the chief
            return Diagnosis(
                role=role,
                waiting=True,
                waiting_for=peer,
                cause=kind,
                certain=certain,
                message=message,
                fix=self._fix(role, peer, state),
                line=wait.sign.line,
                since=wait.first_t,
            )
        if state in ALIVE_STATES and now - wait.first_t < self.long_wait_s:
            return None  # the normal start-up wait
        if state in ALIVE_STATES:
            message = f"{role} has waited {ago(now - wait.first_t)} for {peer} to {what}; {peer} is {state}."
            fix = f"Check {peer}'s log: is it training, or waiting itself? Check that {role} can reach it."
        else:
            message = f"{role} is waiting for {peer} to {what}; {peer} is {state}."
            fix = f"{peer} must start for {role} to go on: see its state and log."
        return Diagnosis(
            role=role,
            waiting=True,
            waiting_for=peer,
            cause=kind,
            certain=False,
            message=message,
            fix=fix,
            line=wait.sign.line,
            since=wait.first_t,
        )

    def _recovering(self, role: str, peer: str, wait: _Wait, *, now: float) -> Diagnosis | None:
        """MonitoredSession lost ``peer`` and recreates its session, which needs ``peer`` again."""
        if wait.sign.peer is None:
            return None  # the error's details have not named the peer (yet)
        theirs = self._state(peer)
        if theirs is None or theirs.state not in TERMINAL_STATES:
            if now - wait.first_t < self.long_wait_s:
                return None  # a restarted ps: the new session comes up and steps resume
            state = theirs.state if theirs is not None else "pending"
            message = (
                f"{role} lost {peer} {ago(now - wait.first_t)} ago and has not trained since (it recreates its "
                f"session, which needs {peer}); {peer} is {state}."
            )
            fix = f"Check {peer}'s log: is it serving? Check that {role} can reach it."
            return Diagnosis(
                role=role,
                waiting=True,
                waiting_for=peer,
                cause=RECOVERING,
                certain=False,
                message=message,
                fix=fix,
                line=wait.sign.line,
                since=wait.first_t,
            )
        message = (
            f"{role} lost {peer} and recreates its session, which needs {peer}; {peer} exited "
            f"({how_it_ended(theirs.state, theirs.detail)}) {ago(now - theirs.since)} ago: it will wait forever."
        )
        return Diagnosis(
            role=role,
            waiting=True,
            waiting_for=peer,
            cause=RECOVERING,
            certain=True,
            message=message,
            fix=self._fix(role, peer, theirs.state),
            line=wait.sign.line,
            since=wait.first_t,
        )

    def _worker_lost(self, role: str, peer: str, wait: _Wait, *, now: float) -> Diagnosis | None:
        """ParameterServerStrategy's chief lost ``peer``: it trains on with the other workers, and
        waits for ``peer`` to come back; with no worker left alive it waits forever."""
        theirs = self._state(peer)
        job = peer.split(":", 1)[0]
        alive = [r for r in self._roles if r.split(":", 1)[0] == job and self._state(r) is not None]
        alive = [r for r in alive if self._states[r].state not in TERMINAL_STATES]
        if theirs is None or theirs.state not in TERMINAL_STATES:
            if now - wait.first_t < self.long_wait_s:
                return None  # it is coming back (a restart), or TensorFlow's error was transient
            state = theirs.state if theirs is not None else "pending"
            message = (
                f"{role} lost {peer} {ago(now - wait.first_t)} ago and waits for it to come back; {peer} is {state}."
            )
            fix = f"Check {peer}'s log and that {role} can reach it."
            return Diagnosis(
                role=role,
                waiting=True,
                waiting_for=peer,
                cause=WORKER_LOST,
                certain=False,
                message=message,
                fix=fix,
                line=wait.sign.line,
                since=wait.first_t,
            )
        if alive:
            return None  # the others train on
        message = (
            f"{role} lost {peer}, which exited ({how_it_ended(theirs.state, theirs.detail)}) {ago(now - theirs.since)} ago, and no {job} is left: "
            f"it waits for {peer} to come back, forever (TensorFlow's ClusterCoordinator waits an hour at a time)."
        )
        fix = (
            f'Restart {peer} (the chief takes it back; or give the {job} job restart = {{ policy = "OnFailure" }} '
            f"so it comes back by itself), or stop {role}."
        )
        return Diagnosis(
            role=role,
            waiting=True,
            waiting_for=peer,
            cause=WORKER_LOST,
            certain=True,
            message=message,
            fix=fix,
            line=wait.sign.line,
            since=wait.first_t,
        )

    def _silent(self, role: str, now: float) -> Diagnosis | None:
        """A between-graph worker that printed no step since a role its session needs ended."""
        if self._strategy != "between_graph" or not role.startswith("worker:"):
            return None
        own_start = self._attempt_start.get(role, self._states[role].since)
        last_step = self._last_step_t.get(role)
        needed = list(self._ps)
        if self._chief is not None and self._chief != role:
            needed.insert(0, self._chief)
        for peer in needed:
            theirs = self._state(peer)
            if theirs is None or theirs.state not in TERMINAL_STATES:
                continue
            # Silent for long enough since whichever came last: the peer's end, this attempt's
            # start, its last step (a step in flight may land just after the peer went). A role
            # that prints a step a minute gets three of its own gaps.
            quiet_since = max(theirs.since, own_start, last_step if last_step is not None else own_start)
            if now - quiet_since < max(self.grace_s, 3 * self._step_gap_s.get(role, 0.0)):
                continue
            how = how_it_ended(theirs.state, theirs.detail)
            message = (
                f"{role} has printed no step for {ago(now - (last_step if last_step is not None else own_start))}, "
                f"and {peer} exited ({how}) {ago(now - theirs.since)} ago: "
                f"it is most likely waiting for {peer}, forever (TensorFlow says so in INFO logs: "
                "TF_CPP_MIN_LOG_LEVEL=0)."
            )
            return Diagnosis(
                role=role,
                waiting=True,
                waiting_for=peer,
                cause=SILENT,
                certain=False,
                message=message,
                fix=self._fix(role, peer, theirs.state),
                line="",
                since=theirs.since,
            )
        return None

    def _fix(self, role: str, peer: str, peer_state: str) -> str:
        if peer == self._chief and peer_state == "succeeded":
            fix = f"Stop {role}, or make the chief wait for the others (device_filters / a final barrier)"
            if self._success_policy != "chief":
                fix += (
                    ", or set success_policy = \"chief\" so the chief's success ends the run (as Kubeflow's TFJob does)"
                )
            return fix + "."
        return (
            f'Restart {peer} (or give its job restart = {{ policy = "OnFailure" }} so it comes back by itself), '
            f"or stop {role}."
        )
