"""Recovery by strategy: when a role fails on its own (or hangs past the stall limit), restart what the
training's strategy needs, together, from the trainers' checkpoints (the rules:
:mod:`core.cluster.recovery_table`).

A recovery holds every role of its group: the failed one as it ends, the others once stopped the
way a stop always is (SIGTERM, then SIGKILL after ``stop_grace_s``, so that
``PreemptionCheckpointHandler`` and ``BackupAndRestore`` can save). Held roles wait between attempts
(``backoff``); once none of the group runs any more, they all start again after ``backoff_s``. The
recovery is over when they all run again and training moves on (a new step from a role that
trains, or, for a group with none, once they all run). ``max_recoveries`` in a row, without training
getting past the step it had reached when the last one started, end the run.

Each start, end and failure is a ``recovery`` event (journalled): ``ctl status``, the window's
banner and the notifications say what is under way and from which step training resumed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from core.cluster.recovery_table import action_words, recovery_group
from core.cluster.roles import expects_steps
from core.cluster.spec import ClusterSpec
from core.controller.ops import RoleOps
from core.controller.roles import RoleMachine
from core.controller.supervised import SupervisedRole
from core.run.events import Event, RecoveryChanged
from core.run.publish import Publisher
from core.run.status import ALIVE, ClusterPhase, RoleState
from core.telemetry.checkpoints import Checkpoint

RUN_WITHOUT_STEPS_S = 5.0  # a group with no role that trains is recovered once it has run this long


@dataclass
class _Recovery:
    """The recovery under way."""

    number: int
    cause: str
    group: list[str]
    step_before: int | None
    started_at: float
    attempts: dict[str, int] = field(default_factory=dict)  # each role's attempt when it was held
    relaunched: bool = False
    relaunched_at: float | None = None
    first_step: int | None = None  # the first step a restarted role made
    restored: tuple[str, int | None] | None = None  # the checkpoint a restarted role said it restored


class Recovery:
    """Recoveries of one run, on the controller's thread."""

    def __init__(
        self,
        spec: Callable[[], ClusterSpec],
        roles: RoleMachine,
        ops: RoleOps,
        publisher: Publisher,
        *,
        phase: Callable[[], ClusterPhase],
        checkpoint: Callable[[float], Checkpoint | None] = lambda _t: None,
    ) -> None:
        """``phase``: the cluster's phase (recoveries happen while it runs); ``checkpoint(t)``: the
        newest checkpoint the trainers had saved by ``t``, when known (what a restart at ``t``
        restores)."""
        self._spec = spec
        self._roles = roles
        self._ops = ops
        self._publisher = publisher
        self._phase = phase
        self._checkpoint = checkpoint
        self._active: _Recovery | None = None
        self._in_a_row = 0
        self._goal: int | None = None  # the step training must pass for the count in a row to start over
        self._goal_roles: set[str] = set()  # whose steps count for it: the roles the recoveries restarted

    # ------------------------------------------------------------------ questions

    def handles(self, role: SupervisedRole) -> bool:
        """Whether a failure of ``role`` is recovered (its job keeps no restart policy of its own,
        not even an explicit ``Never``; the mode and strategy restart something; the cluster runs)."""
        spec = self._spec()
        restart = spec.jobs[role.task.job].restart
        if self._phase() != ClusterPhase.RUNNING or restart.policy != "Never" or restart.explicit:
            return False
        return bool(self._group_of(role))

    def holds(self, role: SupervisedRole) -> bool:
        """Whether ``role`` is held by the recovery under way (it waits for the others to stop)."""
        return self._active is not None and role.task.role_id in self._active.group

    def under_way(self, role: str) -> str | None:
        """What the recovery under way does about ``role`` (``recovering: ps:0 killed by SIGKILL;
        restarting ps:0 and chief:0 (recovery 1 of 3)``), or None when it does not restart it."""
        active = self._active
        if active is None or role not in active.group:
            return None
        action = action_words(tuple(active.group), len(self._roles))
        return (
            f"recovering: {active.cause}; {action} (recovery {active.number} of {self._spec().recovery.max_recoveries})"
        )

    def attempts_left(self) -> int:
        return max(0, self._spec().recovery.max_recoveries - self._in_a_row)

    def _group_of(self, role: SupervisedRole) -> tuple[str, ...]:
        spec = self._spec()
        live = [r.task.role_id for r in self._roles if r.state != RoleState.SUCCEEDED or r is role]
        return recovery_group(strategy=spec.strategy, mode=spec.recovery.mode, roles=live, failed=role.task.role_id)

    # ------------------------------------------------------------------ what happens

    def on_failure(self, role: SupervisedRole, cause: str) -> bool:
        """``role`` failed on its own (``cause``: ``ps:0 killed by SIGKILL``). True when a recovery
        takes it (the caller holds it between attempts); False when the role's own policy decides
        (not recovered, or the recoveries in a row are spent: the run fails as it would have)."""
        if not self.handles(role):
            return False
        active = self._active
        if active is not None and not active.relaunched:  # a peer's crash cascade: its group joins
            for name in self._group_of(role):
                if name not in active.group:
                    active.group.append(name)
                    self._hold(self._roles.find(name), active, ended=name == role.task.role_id)
            return True
        # A new recovery: the first, or the next when the last did not bring its group back.
        spec = self._spec()
        of = spec.recovery.max_recoveries
        if self._in_a_row >= of:
            self._active = None
            if of == 0:
                detail = f"{cause}; recovery is off (max_recoveries = 0)"
            else:
                past = f"past step {self._goal:,}" if self._goal is not None else "on"
                detail = (
                    f"{cause}, after {self._in_a_row} recover{'ies' if self._in_a_row != 1 else 'y'} in a row that did not "
                    f"get training {past}: a crash loop, not a lost machine (see the role's log)"
                )
            self._say(RecoveryChanged("failed", self._in_a_row, of, cause, detail=detail))
            return False
        self._in_a_row += 1
        group = list(self._group_of(role))
        if active is not None:  # its roles still need to come back too
            group += [name for name in active.group if name not in group]
        step_before = active.step_before if active is not None else self._step_now(group)
        if step_before is not None:
            self._goal = max(self._goal or 0, step_before)
            self._goal_roles = set(group)
        self._active = _Recovery(self._in_a_row, cause, group, step_before, time.time())
        action = action_words(tuple(group), len(self._roles))
        self._say(RecoveryChanged("started", self._in_a_row, of, cause, action, tuple(group), step_before=step_before))
        for name in group:
            self._hold(self._roles.find(name), self._active, ended=name == role.task.role_id)
        return True

    def on_stall(self, role: SupervisedRole, detail: str) -> None:
        """A role hangs (stalled past the user's limit): recovered as a failure, after a kill (a
        SIGSTOPped or deadlocked process may never act on SIGTERM)."""
        if self.holds(role) or not self.handles(role):
            return
        if self.on_failure(role, f"{role.task.role_id} stalled ({detail})"):
            self._ops.stop(role, kill=True)

    def on_step(self, role: SupervisedRole, step: int) -> None:
        """A role made a training step: progress for the count in a row, and for the recovery.

        A step of an attempt the recovery stopped (its output taken after the failure was: the
        chief's "step 90" read after its ps's exit) was made before the failure: it is where
        training had got to (``step_before``, the steps lost), not progress past it."""
        active = self._active
        if active is not None and self._before_the_failure(active, role):
            if expects_steps(self._spec().strategy, role.task.job):
                active.step_before = max(active.step_before or step, step)
                self._goal = max(self._goal or step, step)
            return
        if self._goal is not None and step > self._goal and self._counts_for_goal(role):
            self._in_a_row, self._goal = 0, None  # training got past where it failed: the count starts over
        if active is None or not active.relaunched or role.task.role_id not in active.group:
            return
        if role.attempt > active.attempts.get(role.task.role_id, role.attempt) and active.first_step is None:
            active.first_step = step

    def on_restored(self, role: SupervisedRole, name: str, step: int | None) -> None:
        """A restarted role said which checkpoint it restored (``Restoring parameters from
        .../model.ckpt-60``): the recovery resumed from there."""
        active = self._active
        if active is None or not active.relaunched or role.task.role_id not in active.group:
            return
        if role.attempt > active.attempts.get(role.task.role_id, role.attempt) and active.restored is None:
            active.restored = (name, step)

    def tick(self, now: float) -> None:
        """Start the held group once none of it runs; end the recovery once it all runs again."""
        active = self._active
        if active is None:
            return
        if self._phase() != ClusterPhase.RUNNING:  # stopped or failing meanwhile: nothing to recover
            self._active = None
            return
        members = [self._roles.find(name) for name in active.group]
        if not active.relaunched:
            if any(r.state in ALIVE for r in members):
                return  # still stopping: the group starts together
            backoff_s = self._spec().recovery.backoff_s
            for role in members:
                role.held_for_recovery = False
                if role.state == RoleState.BACKOFF:
                    role.backoff_until = now + backoff_s  # the supervisor's tick starts it then
                elif role.state == RoleState.FAILED:  # failed before the recovery took its group
                    self._ops.launch(role)
            active.relaunched, active.relaunched_at = True, now
            return
        if not all(r.state == RoleState.RUNNING for r in members):
            return
        trains = [r for r in members if expects_steps(self._spec().strategy, r.task.job)]
        if trains and active.first_step is None:
            return
        if not trains and all((r.started_at or now) > now - RUN_WITHOUT_STEPS_S for r in members):
            return
        self._active = None
        checkpoint, resumed = self._resumed_from(active)
        lost = (
            active.step_before - resumed
            if active.step_before is not None and resumed is not None and active.step_before > resumed
            else None
        )
        self._say(
            RecoveryChanged(
                "recovered",
                active.number,
                self._spec().recovery.max_recoveries,
                active.cause,
                roles=tuple(active.group),
                step_before=active.step_before,
                resumed_step=resumed,
                lost_steps=lost,
                checkpoint=checkpoint,
                detail=f"in {now - active.started_at:.1f} s",
            )
        )

    def abandon(self, why: str) -> None:
        """The run stops or fails meanwhile: the recovery under way ends here."""
        if self._active is not None:
            active, self._active = self._active, None
            of = self._spec().recovery.max_recoveries
            self._say(RecoveryChanged("failed", active.number, of, active.cause, roles=tuple(active.group), detail=why))

    # ------------------------------------------------------------------ helpers

    def _resumed_from(self, active: _Recovery) -> tuple[str | None, int | None]:
        """The checkpoint the restarted roles resumed from and its step: what a trainer said it
        restored; else the newest checkpoint saved before the restart, unless training came back
        below its step (it did not restore it); else, with no checkpoint, the first step made."""
        if active.restored is not None:
            name, step = active.restored
            return name, step if step is not None else active.first_step
        saved = self._checkpoint(active.relaunched_at) if active.relaunched_at is not None else None
        if saved is None:
            return None, active.first_step
        if saved.step is None:
            return saved.name, active.first_step
        if active.first_step is not None and active.first_step < saved.step:
            return None, active.first_step  # started over below the checkpoint: it was not restored
        return saved.name, saved.step

    def _hold(self, role: SupervisedRole, active: _Recovery, *, ended: bool) -> None:
        """Hold ``role`` for the group: stopped if it runs (its exit then waits between attempts);
        ``ended``: it is the role whose end is being handled, nothing to stop."""
        active.attempts[role.task.role_id] = role.attempt
        role.held_for_recovery = True
        if not ended and role.state in (RoleState.STARTING, RoleState.RUNNING):
            self._ops.stop(role)

    @staticmethod
    def _before_the_failure(active: _Recovery, role: SupervisedRole) -> bool:
        """Whether ``role`` is one the recovery holds, still on the attempt it had when held."""
        held_at = active.attempts.get(role.task.role_id)
        return held_at is not None and role.attempt <= held_at

    def _counts_for_goal(self, role: SupervisedRole) -> bool:
        """Whether ``role``'s steps show that training got past the goal: a restarted role's (a
        worker's bug must not be excused by its peers' progress), or any role's when none of the
        restarted ones trains (a ps, a ParameterServerStrategy worker)."""
        strategy = self._spec().strategy
        trains = {n for n in self._goal_roles if expects_steps(strategy, n.partition(":")[0])}
        return role.task.role_id in trains if trains else True

    def _step_now(self, group: list[str]) -> int | None:
        """The step the recovered roles reached before the failure: the group's own training
        roles' (a worker restarted alone must get past its own step, not its fastest peer's), else
        the cluster's (a ps, a ParameterServerStrategy worker or a trainer that crashed before its
        first step have none)."""
        strategy = self._spec().strategy
        trains = [r for r in self._roles if r.task.role_id in group and expects_steps(strategy, r.task.job)]
        steps = [r.last_step for r in trains if r.last_step is not None]
        steps = steps or [r.last_step for r in self._roles if r.last_step is not None]
        return max(steps) if steps else None

    def _say(self, payload: RecoveryChanged) -> None:
        self._roles.set_recovery(payload.text(), recovering=payload.phase == "started")
        self._publisher.publish(Event(round(time.time(), 3), None, payload))
