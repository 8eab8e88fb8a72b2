"""Taking over a run whose launcher is gone: the roles' states rebuilt from the journal, then each
agent's ``hello`` says which roles it still runs, and which ended while nobody watched."""

from __future__ import annotations

import time
from typing import Any

from core.controller.ops import RoleOps
from core.controller.roles import RoleMachine
from core.diagnosis.rules import Diagnoser
from core.run import journal, pids
from core.run.events import Event
from core.run.rundir import RunDir
from core.run.status import ALIVE, TERMINAL, RoleState


def restore(run: RunDir, roles: RoleMachine, diagnoser: Diagnoser) -> None:
    """Rebuild the roles' states from the journal's last ``role_state`` of each."""
    try:
        last = journal.last_role_states(run.path, roles.names())
    except OSError:
        last = {}
    for name, record in last.items():
        role, event = roles.get(name), Event.from_record(record)
        if role is None or event is None:
            continue
        roles.restore(role, event)
        # When each role reached its state, e.g. how long ago a peer exited (the diagnosis's figures).
        seen_at = event.t if role.state in TERMINAL else time.time()
        diagnoser.on_state(name, str(role.state), seen_at or time.time(), detail=role.detail)


def adopt(run: RunDir, roles: RoleMachine, ops: RoleOps, *, host: str, hello: dict[str, Any]) -> None:
    """Take over the roles an agent reports after a reattach.

    A role it runs is taken over (one still starting goes on to running); one that ended is
    taken over until the resume sends its output and its exit, unless the journal already
    has that end; one it never heard of that had not started yet is started now."""
    live: dict[str, Any] = hello.get("roles") or {}
    ended: dict[str, Any] = hello.get("ended") or {}
    for role in roles.on_host(host):
        name = role.task.role_id
        info = live.get(name) or ended.get(name)
        if info is not None:
            attempt = int(info.get("attempt", role.attempt))
            if name not in live and role.state not in ALIVE and attempt == role.attempt:
                continue  # its end is in the journal already
            pid = info.get("pid") if isinstance(info.get("pid"), int) else None
            roles.adopt(
                role,
                attempt=attempt,
                pid=pid,
                pid_started=pids.start_time(pid) if pid is not None else None,
                log_path=run.log_path(role.task, attempt),
            )
        elif role.state in (RoleState.PENDING, RoleState.STARTING):
            # The launcher went before this role's start reached the agent: start it now.
            with roles.lock:
                role.attempt = max(0, role.attempt - 1) if role.state == RoleState.STARTING else role.attempt
            ops.launch(role)
        elif role.state in ALIVE:
            roles.vanish(role, f"ended while nobody watched (the agent on {host} no longer has it)")
