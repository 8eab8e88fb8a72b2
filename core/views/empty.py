"""What a view with nothing to show says instead: why it is empty, from the roles' status.

A plot with no curve, a log with no line and a tile with no rate each say why: no worker has
printed a step yet because they wait for ``ps:0``, ``worker:1`` is between attempts (and when the
next begins), it has not started, it ended. Never a sentence that is false of the run, such as "no
worker ticked" for a cluster whose workers have not reported yet.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence

from core.run.status import RoleState, RoleStatus
from core.views.conditions import crash_text, shown_attempt, trouble_text

__all__ = [
    "between_attempts_text",
    "log_placeholder",
    "no_curve_text",
    "seconds_to_next_attempt",
    "situation",
    "trainers",
]

_QUIET_JOBS = ("ps", "evaluator")  # roles that never print training steps


def trainers(roles: Iterable[RoleStatus]) -> list[RoleStatus]:
    """The roles that may print training steps (all but the ps and the evaluator)."""
    return [r for r in roles if r.job not in _QUIET_JOBS]


def seconds_to_next_attempt(role: RoleStatus, now: float) -> float | None:
    """Seconds until a role between attempts starts its next one, when the controller said."""
    if role.state != RoleState.BACKOFF or role.next_attempt_at is None:
        return None
    return max(0.0, role.next_attempt_at - now)


def between_attempts_text(role: RoleStatus, now: float) -> str:
    """``between attempts: attempt 3 of 5 in 4 s`` for a role in back-off; '' otherwise."""
    if role.state != RoleState.BACKOFF:
        return ""
    of = f" of {role.attempts}" if role.attempts else ""
    left = seconds_to_next_attempt(role, now)
    when = " next" if left is None else (f" in {left:.0f} s" if left >= 1 else " now")
    return f"between attempts: attempt {shown_attempt(role)}{of}{when}"


def situation(role: RoleStatus, now: float) -> str:
    """Why a role has no step to show, as what follows its name: ``waits for ps:0``, ``is
    crash-looping: exit 1 (...), attempt 3 of 5; next attempt in 4 s``, ``is starting``, ``failed:
    exit 1 (...)``."""
    if role.crash_looping:
        return "is " + trouble_text(role, now)
    if role.state == RoleState.BACKOFF:
        return "is " + between_attempts_text(role, now)
    if role.waiting_for and role.state == RoleState.RUNNING:
        return f"waits for {role.waiting_for}"
    if role.state == RoleState.RUNNING:
        return "runs, no step printed yet"
    if role.state == RoleState.STARTING:
        return "is starting"
    if role.state == RoleState.PENDING:
        return "has not started yet"
    if role.state == RoleState.FAILED:
        return trouble_text(role, now)
    return str(role.state)


_PLURAL = {"waits": "wait", "runs": "run", "is": "are", "has": "have"}  # a situation's first word, for several roles


def _grouped(roles: Sequence[RoleStatus], now: float) -> list[str]:
    """``worker:0, worker:1 wait for ps:0``: the roles in one situation said once, in order."""
    groups: dict[str, list[str]] = {}
    for role in roles:
        groups.setdefault(situation(role, now), []).append(role.role)
    parts = []
    for what, names in groups.items():
        if len(names) > 1:
            verb = re.match(r"\w+", what)
            if verb and verb.group() in _PLURAL:
                what = _PLURAL[verb.group()] + what[verb.end() :]
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        parts.append(f"{shown} {what}")
    return parts


def no_curve_text(roles: Sequence[RoleStatus] | None, *, plotted: Iterable[str], ticked: int, now: float) -> str:
    """What the Training tab's key says beside (or instead of) its curves: '' when every worker
    with a curve is drawn and none lacks one for a reason worth saying. ``roles``: the run's
    status (None before a launch); ``plotted``: the roles with a curve; ``ticked``: how many are
    drawn."""
    if roles is None:
        return "Not launched: each worker's loss and step time show here once it prints its steps."
    plotted = set(plotted)
    workers = trainers(roles)
    if not workers:
        return "No worker in this run: nothing here prints training steps."
    without = [r for r in workers if r.role not in plotted]
    if not plotted:
        if all(r.state in (RoleState.SUCCEEDED, RoleState.STOPPED, RoleState.FAILED) for r in without):
            return "The workers ended without printing a step: " + "; ".join(_grouped(without, now))
        return "No step from any worker yet: " + "; ".join(_grouped(without, now))
    # Some workers draw; say why the others do not, when it is news (between attempts, waiting).
    troubled = [
        r for r in without if r.crash_looping or r.state in (RoleState.BACKOFF, RoleState.FAILED) or r.waiting_for
    ]
    parts = _grouped(troubled, now)
    if not ticked:
        parts.insert(0, "no worker ticked: tick one in the Workers list")
    return "; ".join(parts)


def log_placeholder(role: str | None, status: RoleStatus | None, now: float | None = None) -> str:
    """What the Logs tab says while the shown role has printed nothing (that this window has)."""
    if role is None:
        return "Select a role, in the table or the box above, to see its output."
    if status is None:
        return f"{role} has printed nothing yet."
    now = time.time() if now is None else now
    if status.crash_looping:
        return f"{role} has printed nothing here yet: {crash_text(status)}."
    if status.state == RoleState.BACKOFF:
        return f"{role} has printed nothing yet; it is {between_attempts_text(status, now)}."
    if status.state == RoleState.PENDING:
        return f"{role} has not started yet: its output shows here once it runs."
    if status.state == RoleState.STARTING:
        return f"{role} is starting: its output shows here as it prints."
    if status.state == RoleState.RUNNING:
        wait = f"; it waits for {status.waiting_for}" if status.waiting_for else ""
        return f"{role} runs and has printed nothing yet{wait}."
    how = status.exit_text
    return f"{role} {status.state}{f' ({how})' if how else ''} without printing anything this window has."
