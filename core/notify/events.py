"""Which of a controller's events a person wants to hear about, as :class:`Notification` objects.

The window (a desktop notification) and the ``[notify]`` command (:mod:`core.notify.notifier`) use
the same rules, so they tell the same things:

- ``run_finished``: ``cluster_state`` with phase ``done`` (result succeeded, failed or stopped);
- ``role_failed``: ``role_state`` entering ``failed``, which a role only does for good (a restart
  goes through ``backoff``);
- ``stalled``: ``role_stalled`` with ``stalled`` true, or a certain ``role_waiting`` diagnosis
  (the peer it waits for has gone and will not come back);
- ``host_lost``: ``host_state`` ``lost``, or the run's Slurm job ``ended``/``failed`` under it;
- ``crash_loop``: ``role_crash_loop`` starting (a role's first failed attempt the policy restarts),
  once per loop: its next attempts are in the window and ``ctl status``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from core.run.events import (
    ClusterStateChanged,
    Event,
    HostStateChanged,
    RecoveryChanged,
    RoleCrashLoop,
    RoleStalled,
    RoleStateChanged,
    RoleWaiting,
    SlurmChanged,
)
from core.run.status import ClusterPhase, RoleState
from core.views.conditions import short_exit

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Notification:
    """One thing to tell: its kind (see :data:`core.cluster.notify_table.NOTIFY_KINDS`), a one-line title,
    a longer message, the role or host it is about, when, and the event's own fields."""

    kind: str
    title: str
    message: str
    t: float
    role: str | None = None
    host: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def payload(
        self, run: dict[str, Any], folded: int = 0, unsent: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The JSON object the command reads on stdin (documented in docs/guide/notifications.md)."""
        out: dict[str, Any] = {
            "towerdeck_notification": SCHEMA_VERSION,
            "kind": self.kind,
            "title": self.title,
            "message": self.message,
            "t": self.t,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.t)),
            "role": self.role,
            "host": self.host,
            **run,
            "event": self.data,
            "folded": folded,
        }
        if unsent:
            out["unsent"] = unsent
        return out


def classify(event: Event) -> Notification | None:
    """The notification ``event`` is, or None for every event nobody needs to be told about."""
    p = event.payload
    data = p.to_record()  # the event's own fields, as the command reads them
    if isinstance(p, ClusterStateChanged) and p.phase == ClusterPhase.DONE:
        result = p.result or "ended"
        return Notification("run_finished", f"run {result}", p.reason or f"the run {result}", event.t, data=data)
    if isinstance(p, RoleStateChanged) and p.state == RoleState.FAILED and event.role:
        after = f" after {p.restarts} restart{'s' if p.restarts != 1 else ''}" if p.restarts else ""
        return Notification("role_failed", f"{event.role} failed{after}", p.detail, event.t, role=event.role, data=data)
    if isinstance(p, RecoveryChanged) and p.phase == "recovered":
        return Notification("recovered", f"recovered from {p.cause}", p.text(), event.t, data=data)
    if isinstance(p, RecoveryChanged) and p.phase == "failed":
        return Notification("recovery_failed", f"recovery failed: {p.cause}", p.detail, event.t, data=data)
    if isinstance(p, RoleCrashLoop) and p.looping and p.attempt == 2 and event.role:
        why = short_exit(p.exit) + (f" ({p.error})" if p.error else "")
        of = f" of {p.attempts}" if p.attempts else ""
        title = f"{event.role} is crash-looping"
        return Notification(
            "crash_loop", title, f"{why}; attempt 2{of} starts soon", event.t, role=event.role, data=data
        )
    if isinstance(p, RoleStalled) and p.stalled and event.role:
        return Notification("stalled", f"{event.role} stalled", p.detail, event.t, role=event.role, data=data)
    if isinstance(p, RoleWaiting) and p.waiting and p.certain and event.role:
        message = " ".join(part for part in (p.message, p.fix) if part).strip()
        return Notification("stalled", f"{event.role} is stuck", message, event.t, role=event.role, data=data)
    if isinstance(p, HostStateChanged) and p.state == "lost":
        host = p.host or "?"
        return Notification("host_lost", f"host {host} lost", p.reason, event.t, host=host, data=data)
    if isinstance(p, SlurmChanged) and p.state in ("ended", "failed"):
        job = p.job_id or "?"
        return Notification("host_lost", f"Slurm job {job} {p.state}", p.reason, event.t, data=data)
    return None
