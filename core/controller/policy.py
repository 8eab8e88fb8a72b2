"""Restart and completion policy as pure functions: what a role's exit and the roles' states mean.

No processes, clocks or I/O here: the controller passes what it knows and applies the answer, and
the tests check every rule without starting anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from core.cluster.spec import RestartPolicy
from core.cluster.stuck_options import StuckOptions, chief_success
from core.run.status import TERMINAL, ClusterPhase, RoleState, exit_text


@dataclass(frozen=True)
class ExitDecision:
    """What becomes of a role that exited on its own: ``state`` with ``detail``; for BACKOFF,
    ``backoff_s`` until the restart. ``reset_budget``: a long healthy run restarts the count."""

    state: RoleState
    detail: str
    backoff_s: float | None = None
    reset_budget: bool = False


@dataclass(frozen=True, kw_only=True)
class ExitFacts:
    """What is known of an exit nobody asked for: how the process ended, how long it ran, the
    restarts the policy has made since the last healthy stretch, whether training still goes on,
    and whether the role's success completes the run (a worker or chief)."""

    returncode: int | None
    signal: int | None
    ran_s: float
    policy_restarts: int
    training_on: bool
    is_completion: bool
    error: str = ""  # the line that says why it died, said beside how it ended


def decide_exit(policy: RestartPolicy, facts: ExitFacts) -> ExitDecision:
    """The outcome of an exit nobody asked for, after Kubeflow's restart policies.

    A completion role (worker/chief) that exits 0 is done, whatever the policy; the others are
    restarted while training goes on and the budget (``max_restarts`` since the last healthy
    stretch of ``reset_after_s``) lasts, with exponential back-off.
    """
    returncode, signal = facts.returncode, facts.signal
    how = exit_text(returncode, signal) + (f" ({facts.error})" if facts.error else "")
    ok = signal is None and returncode == 0
    reset = policy.reset_after_s > 0 and facts.ran_s >= policy.reset_after_s and facts.policy_restarts > 0
    used = 0 if reset else facts.policy_restarts
    wants = policy.wants_restart(returncode, signal) and not (ok and facts.is_completion)
    training_on = facts.training_on
    if wants and training_on and used < policy.max_restarts:
        delay = policy.backoff_for(used + 1)
        detail = f"{how}; restart {used + 1} of {policy.max_restarts} in {delay:g} s ({policy.policy})"
        return ExitDecision(RoleState.BACKOFF, detail, delay, reset)
    if ok:
        return ExitDecision(RoleState.SUCCEEDED, how, None, reset)
    detail = how
    if wants and training_on:
        detail += f"; gave up after {used} restart{'s' if used != 1 else ''}"
    return ExitDecision(RoleState.FAILED, detail, None, reset)


@dataclass(frozen=True)
class PhaseDecision:
    """A new cluster phase; ``stop_rest``: stop every role not yet ended."""

    phase: ClusterPhase
    result: str | None = None
    reason: str = ""
    stop_rest: bool = False


class RoleFact(NamedTuple):
    """A role as the cluster's phase sees it."""

    role: str
    job: str
    state: RoleState
    detail: str


def evaluate(
    phase: ClusterPhase,
    roles: Iterable[RoleFact],
    *,
    completion_jobs: frozenset[str] | set[str],
    success_policy: str = "all",
) -> PhaseDecision | None:
    """What the cluster does after a role changed state; None: nothing changes.

    While running, the first failed role fails the cluster; once every completion role (workers, or
    the chief) has ended the cluster completes and the servers (ps) are stopped. Once stopping, the
    cluster is done when every role has ended.
    """
    roles = list(roles)
    if phase == ClusterPhase.RUNNING:
        failed = [r for r in roles if r.state == RoleState.FAILED]
        completion = [r for r in roles if r.job in completion_jobs]
        if failed:
            return PhaseDecision(ClusterPhase.FAILING, "failed", f"{failed[0].role} failed: {failed[0].detail}", True)
        # success_policy = "chief": the chief's success ends the run, as in TFJob.
        chief = chief_success(StuckOptions(success_policy=success_policy), {r.role: str(r.state) for r in roles})
        if chief is not None:
            reason = f'training finished: {chief} succeeded (success_policy = "chief")'
            return PhaseDecision(ClusterPhase.COMPLETING, "succeeded", reason, True)
        if completion and all(r.state in TERMINAL for r in completion):
            jobs = sorted(completion_jobs)
            if any(r.state == RoleState.SUCCEEDED for r in completion):
                reason = "training finished: " + ", ".join(jobs) + " succeeded"
                return PhaseDecision(ClusterPhase.COMPLETING, "succeeded", reason, True)
            return PhaseDecision(
                ClusterPhase.COMPLETING, "stopped", "every " + "/".join(jobs) + " role was stopped", True
            )
        return None
    if phase in (ClusterPhase.COMPLETING, ClusterPhase.FAILING, ClusterPhase.STOPPING) and all(
        r.state in TERMINAL for r in roles
    ):
        return PhaseDecision(ClusterPhase.DONE)
    return None
