"""Supervision: what a role's end means (the restart policy), the deadlines kept on the tick (start
grace, back-off), a lost agent, and the cluster's phase, from running to done.

The rules are pure functions in :mod:`core.controller.policy`; this part applies them to the roles
through the state machine and the role operations, on the controller's thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from core.cluster.spec import ClusterSpec
from core.controller import policy
from core.controller.crashloop import CrashLoops
from core.controller.ops import RoleOps
from core.controller.recovery import Recovery
from core.controller.roles import RoleMachine
from core.controller.stalls import StallWatch
from core.controller.supervised import SupervisedRole
from core.diagnosis.rules import Diagnoser
from core.run import pids
from core.run.events import ClusterStateChanged, Event, warning
from core.run.publish import Publisher
from core.run.rundir import RunDir
from core.run.status import ALIVE, ClusterPhase, RoleState, exit_text
from core.telemetry.errors import error_line

ERROR_LINES = 60  # of a failed attempt's last lines, where its traceback is looked for
# The judges that look at every role (stalls, crash loops, the diagnosis's waits) run at most this
# often, not at every tick: a flood ticks 20 times a second, and at 256 simulated workers judging
# every role at each tick was ~7 % of the controller's thread. Their limits are seconds long
# (``stall_after_s``, a silent wait), so half a second later is no later for anyone.
JUDGE_EVERY_S = 0.5


class Supervisor:
    """The cluster's phase and the roles' restarts; ``done`` is set once every role has ended.

    ``check_ending``: whether something outside the run ended it (a Slurm job ended or cancelled),
    asked when a role ends unasked or an agent is lost: the words for it, or None; ``ended_by``:
    those words once known, without asking."""

    def __init__(
        self,
        spec: Callable[[], ClusterSpec],
        run: RunDir,
        roles: RoleMachine,
        ops: RoleOps,
        stalls: StallWatch,
        crash_loops: CrashLoops,
        recovery: Recovery,
        publisher: Publisher,
        diagnoser: Diagnoser,
        *,
        check_ending: Callable[[], str | None],
        ended_by: Callable[[], str | None],
        before_exit: Callable[[], None],
    ) -> None:
        self._spec = spec
        self._run = run
        self._roles = roles
        self._ops = ops
        self._stalls = stalls
        self._crash_loops = crash_loops
        self._recovery = recovery
        self._publisher = publisher
        self._diagnoser = diagnoser
        self._check_ending = check_ending
        self._ended_by = ended_by
        self._before_exit = before_exit  # what a role wrote last is read before its end is judged
        cluster = spec()
        self._completion = frozenset(cluster.completion_jobs())  # the jobs whose success completes the run
        self._success_policy = cluster.stuck.success_policy  # "all" or "chief" (core.cluster.stuck_options)
        self.phase = ClusterPhase.IDLE
        self.result: str | None = None  # the run's result, once decided, and why
        self.reason = ""
        self.done = threading.Event()
        self._judged_at = -float("inf")

    # ------------------------------------------------------------------ the cluster's phase

    def set_phase(self, phase: ClusterPhase, result: str | None = None, reason: str = "") -> None:
        self.phase = phase
        if result is not None and self.result is None:
            self.result = result
            self.reason = reason
        self._run.update(
            state=str(phase),
            result=self.result,
            reason=self.reason,
            ended=time.time() if phase == ClusterPhase.DONE else None,
        )
        self._roles.set_phase(phase, self.result, self.reason)
        if phase != ClusterPhase.RUNNING:
            self._recovery.abandon(f"the cluster is {phase}")
        payload = ClusterStateChanged(phase, self.result, self.reason)
        self._publisher.publish(Event(round(time.time(), 3), None, payload))
        self._roles.waits(self._diagnoser.on_phase(str(phase), time.time()))

    def end(self, phase: ClusterPhase = ClusterPhase.DONE) -> None:
        """The controller is done: DONE when every role has ended, DETACHED when left running."""
        self.set_phase(phase)
        self.done.set()

    def after_change(self, role: SupervisedRole, now: float) -> None:
        """A role changed state (the state machine's hook): a crash loop that state ends, the
        cluster's phase, then the diagnosis (a state that ends the run clears waits, never shows one)."""
        self._crash_loops.settled(role)
        self._evaluate()
        self._roles.waits(self._diagnoser.on_state(role.task.role_id, str(role.state), now, detail=role.detail))

    def _evaluate(self) -> None:
        """Decide what the cluster does after a role changed state (see :func:`policy.evaluate`)."""
        decision = self._decide()
        if decision is not None and decision.phase != ClusterPhase.DONE:
            self.set_phase(decision.phase, decision.result, decision.reason)
            if decision.stop_rest:
                self._ops.stop_rest()
            decision = self._decide()
        if decision is not None and decision.phase == ClusterPhase.DONE and self.phase != ClusterPhase.DONE:
            self.end()

    def _decide(self) -> policy.PhaseDecision | None:
        facts = [policy.RoleFact(r.task.role_id, r.task.job, r.state, r.detail) for r in self._roles]
        return policy.evaluate(self.phase, facts, completion_jobs=self._completion, success_policy=self._success_policy)

    # ------------------------------------------------------------------ roles' ends

    def on_exit(self, role: SupervisedRole, returncode: int | None, signal: int | None) -> None:
        """The role's process ended: stopped as asked (or restarted, if asked), else as the
        restart policy says."""
        self._before_exit()
        now = time.time()
        self._roles.exited(role, returncode, signal, now=now)
        how = exit_text(returncode, signal)
        if not role.stop_requested:
            # Slurm ending the job (scancel, time limit) stops the roles. Asked at a clean exit
            # too: a trainer that saves and exits 0 on SIGTERM (PreemptionCheckpointHandler's way)
            # would otherwise read as one that finished. Outside Slurm this asks nothing.
            self._check_ending()
        if role.stop_requested:
            if role.restart_after_stop and self.phase == ClusterPhase.RUNNING:
                role.restart_after_stop = False
                self._ops.launch(role)
            elif self._recovery.holds(role) and role.held_for_recovery:
                self._roles.settle(role, RoleState.BACKOFF, f"stopped ({how}) for the recovery; starts with its group")
            else:
                self._roles.settle(role, RoleState.STOPPED, f"{self._ended_by() or 'stopped'} ({how})")
            return
        failed = returncode != 0 or signal is not None
        # Its traceback's last word; a process killed by a signal said nothing more than its last line.
        error = error_line(role.last_lines(ERROR_LINES), last_line=signal is None) if failed else ""
        said = how + (f" ({error})" if error else "")
        # A failure is the recovery's to take (a new one, or its peer's under way); an end that is no
        # failure waits for its group if a recovery holds it.
        taken = self._recovery.on_failure(role, f"{role.task.role_id} {said}") if failed else self._recovery.holds(role)
        if taken:
            # Held for the recovery: it waits between attempts until its whole group has ended.
            left = self._recovery.attempts_left()
            attempts = role.attempt + 1 + left if failed else None  # this recovery's attempt, and those left
            if failed:
                self._crash_loops.failed(
                    role, exit=how, error=error, restarting=True, next_attempt_at=None, attempts=attempts
                )
            self._roles.settle(role, RoleState.BACKOFF, f"{said}; recovering", error=error)
            return
        decision = policy.decide_exit(
            self._spec().jobs[role.task.job].restart,
            policy.ExitFacts(
                returncode=returncode,
                signal=signal,
                ran_s=now - role.started_at if role.started_at is not None else 0.0,
                policy_restarts=role.policy_restarts,
                training_on=self.phase == ClusterPhase.RUNNING,
                is_completion=role.task.job in self._completion,
                error=error,
            ),
        )
        if decision.reset_budget:
            role.policy_restarts = 0  # a long healthy stretch: this failure starts a fresh budget
        backoff_until = now + decision.backoff_s if decision.backoff_s is not None else None
        if failed:
            restarting = decision.state == RoleState.BACKOFF
            self._crash_loops.failed(role, exit=how, error=error, restarting=restarting, next_attempt_at=backoff_until)
        self._roles.settle(role, decision.state, decision.detail, backoff_until=backoff_until, error=error)

    def on_agent_lost(self, host: str, *, local: bool, busy: bool, why: str) -> None:
        """``host``'s agent is gone, and its roles with it."""
        lost = [r for r in self._roles.on_host(host) if r.state in ALIVE]
        if not lost and self.phase == ClusterPhase.DONE:
            return
        ending = self._check_ending()
        self._publisher.publish(warning(f"the agent on {host} is lost: {why}", round(time.time(), 3)))
        for role in lost:
            # Last resort for local roles (no orphans if the agent died; a pid of another machine
            # means nothing here; a busy agent runs them), unless that pid is another process by
            # now: the link may have been lost for minutes.
            if local and not busy and role.pid is not None and not pids.kill_group_if_same(role.pid, role.pid_started):
                message = f"{role.task.role_id}: pid {role.pid} is another process now; not killed"
                self._publisher.publish(warning(message, round(time.time(), 3)))
            self._roles.lost(role, ending or f"the agent on {host} was lost")

    # ------------------------------------------------------------------ the tick

    def tick(self, now: float) -> None:
        """Deadlines: the start grace and back-offs ending (each tick), and every
        :data:`JUDGE_EVERY_S` the stalls, the crash loops and the diagnosis's own."""
        judge = not 0 <= now - self._judged_at < JUDGE_EVERY_S  # due, or the clock went back
        if judge:
            self._judged_at = now
            self._stalls.check(now)
            self._crash_loops.tick(now)
        self._recovery.tick(now)
        if judge:
            self._roles.waits(self._diagnoser.tick(now))
        for role in self._roles:
            if (
                role.state == RoleState.STARTING
                and role.running_at is not None
                and now >= role.running_at
                and role.pid is not None
            ):
                self._roles.run(role)
            elif role.state == RoleState.BACKOFF and role.backoff_until is not None and now >= role.backoff_until:
                role.backoff_until = None
                with self._roles.lock:
                    role.policy_restarts += 1
                    role.restarts += 1
                self._ops.launch(role)
