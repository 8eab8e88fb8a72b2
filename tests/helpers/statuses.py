"""Role statuses as tests write them: a role's name and the fields the test is about."""

from __future__ import annotations

from typing import Any

from core.run.status import RoleState, RoleStatus


def role_status(role: str, **fields: Any) -> RoleStatus:
    """A :class:`RoleStatus` of ``role`` (``worker:3``): running on 127.0.0.1 unless ``fields`` say
    otherwise; ``state`` may be given as text."""
    job, _, index = role.partition(":")
    values: dict[str, Any] = {
        "role": role,
        "job": job,
        "index": int(index or 0),
        "host": "127.0.0.1",
        "address": "",
        "state": RoleState.RUNNING,
        "state_since": 0.0,
        "pid": None,
        "attempt": 1,
        "restarts": 0,
        "returncode": None,
        "signal": None,
        "started_at": None,
        "ended_at": None,
        "detail": "",
        "log_path": None,
    }
    values.update(fields)
    values["state"] = RoleState(str(values["state"]))
    values["gpus"] = tuple(values.get("gpus") or ())
    return RoleStatus(**values)


def hosted_status(role: str, host: str, state: RoleState = RoleState.RUNNING, **fields: Any) -> RoleStatus:
    """A :class:`RoleStatus` of ``role`` on ``host`` (its port 2222), started at time 0 as pid 1."""
    return role_status(role, host=host, address=f"{host}:2222", state=state, pid=1, started_at=0.0, **fields)
