"""Stragglers: the judge of :mod:`core.telemetry.stragglers` run on the controller's clock. Each
running training role's windowed median step time is compared with its peers' once a second; a flag
raised or cleared is a ``role_straggler`` event, journalled, so the CLI prints one line when a flag
starts and one when it ends, and a run read back shows the flags it showed live."""

from __future__ import annotations

from core.cluster.roles import expects_steps
from core.cluster.spec import ClusterSpec
from core.controller.roles import RoleMachine
from core.run.events import RoleStraggler
from core.run.status import RoleState
from core.telemetry.stragglers import StragglerJudge

JUDGE_EVERY_S = 1.0


class StragglerWatch:
    """Raises and clears straggler flags on the controller's thread."""

    def __init__(self, spec: ClusterSpec, roles: RoleMachine, judge: StragglerJudge | None = None) -> None:
        self._strategy = spec.strategy
        self._roles = roles
        self._judge = judge or StragglerJudge()
        self._judged_at = float("-inf")

    def check(self, now: float) -> None:
        """Judge the running workers, at most once every :data:`JUDGE_EVERY_S`. A stalled or
        waiting role, or one that left RUNNING, is not judged: its flag, if any, ends."""
        if now - self._judged_at < JUDGE_EVERY_S:
            return
        self._judged_at = now
        medians: dict[str, float | None] = {}
        for role in self._roles:
            if (
                role.state == RoleState.RUNNING
                and not role.stalled
                and role.waiting is None
                and role.task.job not in ("ps", "evaluator")
                and (expects_steps(self._strategy, role.task.job) or role.stats.step is not None)
            ):
                medians[role.task.role_id] = role.shown_stats().times.median()
        # The roles' flags are the truth (a reattach restores them from the journal).
        self._judge.flagged = {r.task.role_id for r in self._roles if r.straggler is not None}
        for change in self._judge.judge(now, medians):
            flagged = self._roles.get(change.role)
            if flagged is None:
                continue
            payload = RoleStraggler(
                straggler=change.straggler,
                step_time_s=change.step_time_s,
                peers_step_time_s=change.peers_step_time_s,
                ratio=change.ratio,
                held_s=round(change.held_s, 1),
                detail=change.text(),
            )
            self._roles.note(flagged, payload)
