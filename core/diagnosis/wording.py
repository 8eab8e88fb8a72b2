"""The words of a diagnosis: how long ago, how a role ended (both inside its messages), and the
lines ``launch``, ``attach`` and ``ctl status`` print for a role's wait."""

from __future__ import annotations

from typing import Any


def how_it_ended(state: str, detail: str) -> str:
    """``succeeded, exit code 0`` or ``stopped, killed by SIGTERM`` (from ``stopped (killed by SIGTERM)``)."""
    detail = detail.removeprefix(state).strip(" ()") if detail.startswith(state) else detail
    return f"{state}, {detail}" if detail else state


def ago(seconds: float) -> str:
    """A duration as a message says it: ``42 s``, ``12 min`` or ``3.5 h``."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def waiting_lines(role: str, data: dict[str, Any]) -> list[str]:
    """How ``launch``, ``attach`` and ``ctl status`` print a ``role_waiting`` event's payload (or a
    role's ``waiting_*`` status fields): the message, then the fix."""
    if not data.get("waiting", True):
        return [f"{role:<12} no longer waiting for {data.get('waiting_for') or 'another role'}"]
    lines = [f"{role:<12} WAITING    {data.get('message') or data.get('waiting_message') or ''}"]
    fix = data.get("fix") or data.get("waiting_fix")
    if fix:
        lines.append(f"{'':<12} fix: {fix}")
    return lines
