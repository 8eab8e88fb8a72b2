"""Crash loops: a role whose attempts keep failing is in a state of its own (Kubernetes users know
it as CrashLoopBackOff), shown as such from its first failed attempt that the restart policy (or a
recovery) takes up until an attempt runs healthily.

An attempt runs healthily when it makes a training step, or lives ``reset_after_s`` (the restart
policy's own measure of a healthy stretch). A role that prints no step (a ps, a
ParameterServerStrategy worker) is judged by its time alone: :data:`UP_WITHOUT_STEPS_S`.

One failure that ends a healthy attempt (a worker that trained for an hour, then the OOM killer or
a lost machine) is a restart, not a loop: the role backs off or is recovered without the
crash-looping mark; a second failure before it runs healthily again makes it one. The loop also ends when the policy gives up (the role has failed), or when the role
is stopped or succeeds. Each start and end is a ``role_crash_loop`` event, journalled, so a run
read back shows it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from core.cluster.roles import expects_steps
from core.cluster.spec import ClusterSpec
from core.controller.roles import RoleMachine
from core.controller.supervised import SupervisedRole
from core.run.events import RoleCrashLoop
from core.run.status import RoleState

# A role that prints no step and served this long was up, not crashing at start: a ps that
# cannot start dies within seconds (a port taken, a bad flag), one lost after a minute was healthy.
UP_WITHOUT_STEPS_S = 30.0


class CrashLoops:
    """Starts and ends crash loops, on the controller's thread."""

    def __init__(self, spec: Callable[[], ClusterSpec], roles: RoleMachine) -> None:
        self._spec = spec
        self._roles = roles

    def failed(
        self,
        role: SupervisedRole,
        *,
        exit: str,
        error: str,
        restarting: bool,
        next_attempt_at: float | None,
        attempts: int | None = None,
    ) -> None:
        """An attempt of ``role`` failed on its own: it loops while the policy restarts it (the next
        attempt starts at ``next_attempt_at``); when the policy gives up, the loop ends in failure.
        ``attempts``: the attempts it gets in all when a recovery, not its policy, restarts it."""
        if restarting and role.crash is None and self._was_healthy(role):
            return  # one failure after a healthy stretch: a restart, not a loop
        if restarting:
            policy = self._spec().jobs[role.task.job].restart
            allowed = attempts_allowed(policy.max_restarts, attempt=role.attempt, policy_restarts=role.policy_restarts)
            looping = RoleCrashLoop(
                looping=True,
                attempt=role.attempt + 1,
                attempts=attempts if attempts is not None else allowed,
                exit=exit,
                error=error,
                next_attempt_at=next_attempt_at,
            )
            self._roles.note(role, looping)
        elif role.crash is not None:
            self._end(role, f"gave up: {exit}" + (f" ({error})" if error else ""))

    def _was_healthy(self, role: SupervisedRole) -> bool:
        """Whether the attempt that just ended had run healthily: made a step, or lived
        ``reset_after_s``, or (a role that prints no step) :data:`UP_WITHOUT_STEPS_S`."""
        if role.progress_at is not None:
            return True
        if role.started_at is None:
            return False
        ran_s = time.time() - role.started_at
        spec = self._spec()
        reset_after_s = spec.jobs[role.task.job].restart.reset_after_s
        if reset_after_s > 0 and ran_s >= reset_after_s:
            return True
        return not expects_steps(spec.strategy, role.task.job) and ran_s >= UP_WITHOUT_STEPS_S

    def healthy(self, role: SupervisedRole, why: str) -> None:
        """The current attempt ran healthily (``why``: made step N, ran N s): the loop is over."""
        if role.crash is not None and role.state == RoleState.RUNNING:
            self._end(role, why)

    def settled(self, role: SupervisedRole) -> None:
        """The role reached a state that ends any loop (stopped, succeeded)."""
        if role.crash is not None and role.state in (RoleState.STOPPED, RoleState.SUCCEEDED):
            self._end(role, f"{role.state}")

    def tick(self, now: float) -> None:
        """A looping role whose attempt has lived ``reset_after_s`` ran healthily, and one that prints
        no step (a ps) once it has served :data:`UP_WITHOUT_STEPS_S`."""
        spec = self._spec()
        for role in self._roles:
            if role.crash is None or role.state != RoleState.RUNNING or role.started_at is None:
                continue
            reset_after_s = spec.jobs[role.task.job].restart.reset_after_s
            ran_s = now - role.started_at
            if (reset_after_s > 0 and ran_s >= reset_after_s) or (
                not expects_steps(spec.strategy, role.task.job) and ran_s >= UP_WITHOUT_STEPS_S
            ):
                self.healthy(role, f"attempt {role.attempt} ran {ran_s:.0f} s")

    def _end(self, role: SupervisedRole, why: str) -> None:
        crash = role.crash
        attempts = crash.attempts if crash is not None else None
        self._roles.note(role, RoleCrashLoop(looping=False, attempt=role.attempt, attempts=attempts, detail=why))


def attempts_allowed(max_restarts: int, *, attempt: int, policy_restarts: int) -> int:
    """How many attempts a role gets in all: the ``attempt`` it has made, and the restarts left in
    its policy's budget (``max_restarts`` less the ``policy_restarts`` used since its last healthy
    stretch). With ``max_restarts = 4``, attempt 1 failing gives 5."""
    return attempt + max(0, max_restarts - policy_restarts)
