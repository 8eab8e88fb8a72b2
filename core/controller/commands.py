"""Users' commands (stop, kill, restart, signal, a role or all; launch, attach, detach) as the
controller carries them out on its own thread. A mixin of :class:`core.controller.controller.Controller`."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

from core.agent.processes import SIGNAL_HINT, signal_number
from core.controller.base import ControllerBase
from core.controller.supervised import SupervisedRole
from core.run.status import ALIVE, TERMINAL, ClusterPhase, RoleState


class UserCommands(ControllerBase):
    """What users ask for, checked against the cluster's phase and the role's state."""

    def set_sampling(self, on: bool, period_s: float | None = None) -> Future[str]:
        """Turn every agent's samples (host, role and GPU figures) off or on, and optionally set
        their period (0.2 to 10 s): what the GPU proof alternates to measure their cost."""
        return self._command("sampling", (on, period_s))

    def _on_command(self, command: tuple[str, Any], future: Future[str] | None) -> None:
        name, arg = command
        if future is not None and not future.set_running_or_notify_cancel():
            return  # withdrawn: its asker heard it refused (core.controller.control_server), so not done
        # The journal keeps what users asked for: it explains the states that follow.
        self.run.record({"t": round(time.time(), 3), "kind": "command", "command": name, "arg": arg})
        try:
            message = self._run_command(name, arg)
        except (KeyError, ValueError, RuntimeError) as exc:
            if future is not None:
                future.set_exception(exc)
            return
        if future is not None:
            future.set_result(message)

    def _run_command(self, name: str, arg: Any) -> str:
        if name == "attach":
            return self._reattach()
        if name == "detach":
            if self._phase == ClusterPhase.DONE:
                raise RuntimeError("the run is over; there is nothing to leave running")
            self._detached = True
            self._set_phase(ClusterPhase.DETACHED)
            self._done.set()
            return "left the cluster running; reattach with: python main.py attach " + str(self.run.path)
        if name == "launch":
            self._set_phase(ClusterPhase.RUNNING)
            self._connect_all()
            if self._interrupted.is_set():
                return "stopped while connecting"  # the queued stop ends the roles not started
            for role in self._roles.values():
                self._launch_role(role)
            return "launched"
        if self._phase == ClusterPhase.DONE:
            raise RuntimeError("the run is over; launch the cluster again")
        if name == "stop_all":
            self._set_phase(ClusterPhase.STOPPING, "stopped", "stopped by the user")
            self._stop_rest()
            return "stopping every role"
        if name == "kill_all":
            self._set_phase(ClusterPhase.STOPPING, "stopped", "killed by the user")
            self._stop_rest(kill=True)
            return "killing every role"
        if name == "restart_all":
            if self._phase != ClusterPhase.RUNNING:
                raise RuntimeError(f"the cluster is {self._phase}; it can be restarted while it runs")
            for role in self._roles.values():
                role.policy_restarts = 0
                self._user_restart(role)
            return "restarting every role"
        if name == "sampling":
            command = {"op": "configure", "sampling": bool(arg[0])}
            if arg[1] is not None:
                command["sample_period_s"] = float(arg[1])
            sent = sum(transport.send(command) for transport in self._transports.values())
            return f"sampling {'on' if arg[0] else 'off'} on {sent} host(s)"
        if name == "signal":
            role = self._roles[self._name(arg[0])]
            if signal_number(str(arg[1])) is None:  # refused here, to the user, not only in the agent's log
                raise ValueError(f"{arg[1]!r} is not a signal: {SIGNAL_HINT}")
            if role.state not in ALIVE:
                raise RuntimeError(f"{role.task.role_id} is {role.state}")
            self._transport(role.host_key).send({"op": "signal", "role": role.task.role_id, "signal": arg[1]})
            return f"sent SIG{str(arg[1]).upper().removeprefix('SIG')} to {role.task.role_id}"
        role = self._roles[self._name(arg)]
        if name == "stop":
            if role.state in TERMINAL:
                return f"{role.task.role_id} is already {role.state}"
            self._stop_role(role)
            return f"stopping {role.task.role_id}"
        if name == "kill":
            if role.state in TERMINAL:
                return f"{role.task.role_id} is already {role.state}"
            self._stop_role(role, kill=True)
            return f"killing {role.task.role_id}"
        if name == "restart":
            if self._phase != ClusterPhase.RUNNING:
                raise RuntimeError(f"the cluster is {self._phase}; a role can be restarted while it runs")
            self._user_restart(role)
            return f"restarting {role.task.role_id}"
        raise ValueError(f"unknown command {name!r}")

    def _user_restart(self, role: SupervisedRole) -> None:
        with self._lock:
            role.restarts += 1
        self._stop_role(role, restart=True)

    def _stop_role(self, role: SupervisedRole, kill: bool = False, restart: bool = False) -> None:
        if role.state in (RoleState.STARTING, RoleState.RUNNING, RoleState.STOPPING):
            role.stop_requested = True
            role.restart_after_stop = restart
            op = (
                {"op": "kill", "role": role.task.role_id}
                if kill
                else {"op": "stop", "role": role.task.role_id, "grace_s": self.spec.stop_grace_s}
            )
            self._transport(role.host_key).send(op)
            if role.state != RoleState.STOPPING:
                self._set_state(
                    role,
                    RoleState.STOPPING,
                    "killing" if kill else f"SIGTERM, SIGKILL after {self.spec.stop_grace_s:g} s",
                )
        elif role.state in (RoleState.BACKOFF, RoleState.PENDING):
            role.backoff_until = None
            self._set_state(role, RoleState.STOPPED, "stopped before it started")
            if restart:
                self._launch_role(role)
        elif restart:
            self._launch_role(role)

    def _stop_rest(self, kill: bool = False) -> None:
        for role in self._roles.values():
            if role.state not in TERMINAL:
                self._stop_role(role, kill=kill)
