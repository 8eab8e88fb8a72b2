"""A role's trouble in words, the same everywhere it is shown: the window's tile, row and banner,
``ctl status``, the CLI's progress lines and notifications.

A crash loop reads ``crash-looping: exit 1 (ZeroDivisionError: division by zero), attempt 3 of 5``
(the attempt running now, or the one to come while it waits), with ``next attempt in 4 s`` between
attempts; a role that failed for good reads ``failed: exit 1 (ZeroDivisionError: ...)``.
"""

from __future__ import annotations

from core.run.status import RoleState, RoleStatus


def short_exit(exit_text: str) -> str:
    """``exit code 1`` -> ``exit 1``, ``killed by SIGKILL`` -> ``SIGKILL``: how an attempt ended, short."""
    if exit_text.startswith("exit code "):
        return "exit " + exit_text.removeprefix("exit code ")
    return exit_text.removeprefix("killed by ")


def why_it_ended(role: RoleStatus) -> str:
    """How its last failed attempt ended and why: ``exit 1 (ZeroDivisionError: division by zero)``."""
    how = short_exit(role.last_exit)
    if role.last_error:
        return f"{how} ({role.last_error})" if how else role.last_error
    return how


def shown_attempt(role: RoleStatus) -> int:
    """The attempt a person means: the one running, or between attempts the one to come."""
    return role.attempt + 1 if role.state == RoleState.BACKOFF else role.attempt


def crash_text(role: RoleStatus) -> str:
    """``crash-looping: exit 1 (...), attempt 3 of 5``; '' for a role not crash-looping."""
    if not role.crash_looping:
        return ""
    of = f" of {role.attempts}" if role.attempts else ""
    why = why_it_ended(role)
    return (
        f"crash-looping: {why}, attempt {shown_attempt(role)}{of}"
        if why
        else f"crash-looping, attempt {shown_attempt(role)}{of}"
    )


def next_attempt_text(role: RoleStatus, now: float) -> str:
    """``next attempt in 4 s`` while a crash-looping role waits between attempts; else ''."""
    if role.state != RoleState.BACKOFF or role.next_attempt_at is None:
        return ""
    left = max(0.0, role.next_attempt_at - now)
    return f"next attempt in {left:.0f} s" if left >= 1 else "next attempt now"


def trouble_text(role: RoleStatus, now: float) -> str:
    """The one line that says what is wrong with a role, or '' when nothing is: a crash loop (with
    its countdown), a failure with its reason, a stall."""
    if role.crash_looping:
        countdown = next_attempt_text(role, now)
        return crash_text(role) + (f"; {countdown}" if countdown else "")
    if role.state == RoleState.FAILED:
        why = why_it_ended(role)
        return f"failed: {why}" if why else f"failed: {role.detail}"
    if role.stalled:
        return f"stalled: no new step for {role.stalled_for_s or 0:.0f} s"
    return ""
