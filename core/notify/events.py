"""Which of a controller's events a person wants to hear about, as :class:`Notification` objects.

The window (a desktop notification) and the ``[notify]`` command (:mod:`core.notify.notifier`) use
the same rules, so they tell the same things:

- ``run_finished``: ``cluster_state`` with phase ``done`` (result succeeded, failed or stopped);
- ``role_failed``: ``role_state`` entering ``failed``, which a role only does for good (a restart
  goes through ``backoff``);
- ``stalled``: ``role_stalled`` with ``stalled`` true, or a certain ``role_waiting`` diagnosis
  (the peer it waits for has gone and will not come back);
- ``host_lost``: ``host_state`` ``lost``, or the run's Slurm job ``ended``/``failed`` under it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from core.run.status import Event

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
        """The JSON object the command reads on stdin (documented in the README)."""
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
    d = event.data
    if event.kind == "cluster_state" and d.get("phase") == "done":
        result = d.get("result") or "ended"
        reason = str(d.get("reason") or "")
        return Notification("run_finished", f"run {result}", reason or f"the run {result}", event.t, data=dict(d))
    if event.kind == "role_state" and d.get("state") == "failed" and event.role:
        detail = str(d.get("detail") or "")
        restarts = d.get("restarts") or 0
        after = f" after {restarts} restart{'s' if restarts != 1 else ''}" if restarts else ""
        return Notification(
            "role_failed", f"{event.role} failed{after}", detail, event.t, role=event.role, data=dict(d)
        )
    if event.kind == "role_stalled" and d.get("stalled") and event.role:
        return Notification(
            "stalled", f"{event.role} stalled", str(d.get("detail") or ""), event.t, role=event.role, data=dict(d)
        )
    if event.kind == "role_waiting" and d.get("waiting") and d.get("certain") and event.role:
        message = " ".join(str(d.get(k) or "") for k in ("message", "fix")).strip()
        return Notification("stalled", f"{event.role} is stuck", message, event.t, role=event.role, data=dict(d))
    if event.kind == "host_state" and d.get("state") == "lost":
        host = str(d.get("host") or "?")
        return Notification(
            "host_lost", f"host {host} lost", str(d.get("reason") or ""), event.t, host=host, data=dict(d)
        )
    if event.kind == "slurm" and d.get("state") in ("ended", "failed"):
        job = d.get("job_id") or "?"
        return Notification(
            "host_lost", f"Slurm job {job} {d.get('state')}", str(d.get("reason") or ""), event.t, data=dict(d)
        )
    return None
