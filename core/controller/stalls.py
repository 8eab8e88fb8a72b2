"""Stalls: a running role that has shown a step and none since ``stall_after_s``, or none at all
since it started (the cluster file's ``[stuck]`` rules), is marked stalled; a new step clears it.
Steps come from the role's output and its TensorBoard scalars; the check runs on the tick.

A step counts when the controller handles it (its own clock: a remote host's may be off by minutes),
so a controller behind its agents sees old steps late. A role whose output still waits for the
controller (``behind``) is not judged: its silence may be the controller's, not the role's. Once
that output is taken, its newest step sets the clock again, so a truly hung role is still marked
``stall_after_s`` after the controller caught up with it."""

from __future__ import annotations

import time
from collections.abc import Callable

from core.cluster.spec import ClusterSpec
from core.cluster.stuck_options import start_stall_detail
from core.controller.roles import RoleMachine
from core.controller.supervised import SupervisedRole
from core.diagnosis.rules import Diagnoser
from core.run.events import RoleStalled
from core.run.status import RoleState


class StallWatch:
    """Marks and clears stalls on the controller's thread; ``role_stalled`` events say so."""

    def __init__(
        self,
        spec: Callable[[], ClusterSpec],
        roles: RoleMachine,
        diagnoser: Diagnoser,
        *,
        on_step: Callable[[SupervisedRole, int], None],
        on_stall: Callable[[SupervisedRole, str], None],
        behind: Callable[[SupervisedRole], bool] = lambda _role: False,
    ) -> None:
        """``on_step``: told of each new step a role makes (a crash loop ends on it); ``on_stall``:
        of each role newly stalled, with why (a recovery may take it); ``behind``: whether some of
        the role's output still waits for the controller (it is then not judged)."""
        self._spec = spec
        self._roles = roles
        self._diagnoser = diagnoser
        self._on_step = on_step
        self._on_stall = on_stall
        self._behind = behind

    def progress(self, role: SupervisedRole, steps: list[int]) -> None:
        """A new step is progress; it clears a stall."""
        if not steps or steps[-1] == role.last_step:
            return
        previous = role.progress_at
        with self._roles.lock:
            role.last_step = steps[-1]
            # This machine's clock, not the agent's: a remote host's clock may be off by minutes.
            role.progress_at = time.time()
        if role.stalled:
            self.mark(role, stalled=False, detail=f"step {role.last_step}", since=previous)
        self._on_step(role, steps[-1])
        self._roles.waits(self._diagnoser.on_step(role.task.role_id, role.progress_at))

    def mark(self, role: SupervisedRole, *, stalled: bool, detail: str, since: float | None = None) -> None:
        """Mark or clear a stall and say so: ``stalled_for_s`` is how long without a step, so far
        or in all; ``step`` the last one seen."""
        since = since if since is not None else role.progress_at
        payload = RoleStalled(
            stalled=stalled,
            stalled_for_s=round(time.time() - since, 1) if since is not None else None,
            step=role.last_step,
            stall_after_s=self._spec().stall_after_s,
            attempt=role.attempt,
            detail=detail,
        )
        self._roles.note(role, payload)
        if stalled:
            self._on_stall(role, detail)

    def check(self, now: float) -> None:
        """Judge every role (the tick). Roles that never print a step (ps, custom servers) are never
        judged by ``stall_after_s``: silence is their normal state. Leaving RUNNING clears the mark.
        A role whose output waits unparsed (in the controller's lanes, or coalesced) is not judged."""
        spec = self._spec()
        after_s = spec.stall_after_s
        for role in self._roles:
            if role.stalled and role.state != RoleState.RUNNING:
                self.mark(role, stalled=False, detail=f"role is {role.state}")
            elif (
                after_s > 0
                and not role.stalled
                and role.state == RoleState.RUNNING
                and not role.output_blocked
                and role.progress_at is not None
                and now - role.progress_at >= after_s
                and not self._waiting(role)
            ):
                detail = f"no new step for {now - role.progress_at:.0f} s after step {role.last_step}"
                self.mark(role, stalled=True, detail=detail)
            elif (  # no step at all since the role started, past the [stuck] rules' limit
                not role.stalled
                and role.state == RoleState.RUNNING
                and role.progress_at is None
                and role.started_at is not None
                and not role.output_blocked
                and not self._waiting(role)
                and (
                    why := start_stall_detail(
                        spec.stuck,
                        spec.strategy,
                        role.task.job,
                        running_for_s=now - role.started_at,
                        has_step=False,
                        last_lines=role.last_lines(5),
                    )
                )
            ):
                self.mark(role, stalled=True, detail=why, since=role.started_at)

    def _waiting(self, role: SupervisedRole) -> bool:
        """Whether output of the role waits for the controller: in its lanes, or coalesced and not
        yet parsed. Asked only of a role about to be marked, so a busy tick costs nothing more."""
        return role.held_output is not None or self._behind(role)
