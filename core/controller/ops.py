"""What is done to a role's process, through its host's agent: start an attempt, stop or kill it,
send it a signal. Each sends one command to the agent and moves the role through the state
machine (:mod:`core.controller.roles`); the agent's answer (``started``, ``exited``) comes back as
an event."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.agent.processes import SIGNAL_HINT, signal_number
from core.agent.protocol import output_period_for
from core.cluster.render import render, role_dir
from core.cluster.spec import ClusterSpec
from core.controller.connections import HostConnections
from core.controller.roles import RoleMachine
from core.controller.stalls import StallWatch
from core.controller.supervised import SupervisedRole
from core.run.rundir import RunDir
from core.run.status import ALIVE, TERMINAL, RoleState


class RoleOps:
    """Starting, stopping and signalling roles, on the controller's thread."""

    def __init__(
        self,
        spec: Callable[[], ClusterSpec],
        run: RunDir,
        roles: RoleMachine,
        hosts: HostConnections,
        stalls: StallWatch,
    ) -> None:
        self._spec = spec
        self._run = run
        self._roles = roles
        self._hosts = hosts
        self._stalls = stalls

    def launch(self, role: SupervisedRole) -> None:
        """Start the role's next attempt on its host."""
        spec = self._spec()
        self._roles.new_attempt(role, start_s=spec.start_s)
        if role.stalled:
            self._stalls.mark(role, stalled=False, detail="restarted")
        transport = self._hosts.transport(role.host_key)
        host = spec.host_config(role.host_key)
        host_run_dir = transport.run_dir if host.remote else None
        launch = render(spec, role.task, Path(host_run_dir) if host_run_dir else self._run.path)
        cwd = host.workdir if host.remote and host.workdir else str(launch.cwd)
        log = str(role.log_path)
        if host_run_dir:  # the role writes on its own machine; the transport mirrors it here
            log = str(role_dir(Path(host_run_dir), role.task) / f"attempt-{role.attempt}.log")
        self._roles.launch(role)
        start = {
            "op": "start",
            "role": role.task.role_id,
            "attempt": role.attempt,
            "argv": list(launch.argv),
            "env": launch.env,
            "cwd": cwd,
            "log": log,
            "tb_dir": launch.env.get("TOWERDECK_TB_DIR", ""),
            # Its log is on this machine (or shared): a stop may skip the unsent backlog.
            "skip_backlog": not host.remote,
            # How often its log is read once all is sent: less often in a large cluster, where
            # every output event costs the controller the same whatever its size.
            "output_period_s": output_period_for(len(self._roles)),
        }
        try:
            sent = (host_run_dir is not None or not host.remote) and transport.send(start)
            why = transport.lost_reason or "it is gone"
        except RuntimeError as exc:  # too many commands wait for that host to reconnect
            sent, why = False, str(exc)
        if not sent:
            self._roles.start_failed(role, f"no agent on {role.host_key}: {why}")

    def stop(self, role: SupervisedRole, *, kill: bool = False, restart: bool = False) -> None:
        """Stop (SIGTERM, SIGKILL after the grace) or kill the role; ``restart``: start it again
        once it has stopped. A role between attempts is stopped at once."""
        if role.state in (RoleState.STARTING, RoleState.RUNNING, RoleState.STOPPING):
            grace_s = self._spec().stop_grace_s
            name = role.task.role_id
            self._hosts.send(
                role.host_key,
                {"op": "kill", "role": name} if kill else {"op": "stop", "role": name, "grace_s": grace_s},
            )
            self._roles.stop(role, "killing" if kill else f"SIGTERM, SIGKILL after {grace_s:g} s", restart=restart)
        elif role.state in (RoleState.BACKOFF, RoleState.PENDING):
            self._roles.cancel(role, "stopped before it started")
            if restart:
                self.launch(role)
        elif restart:
            self.launch(role)

    def stop_rest(self, *, kill: bool = False) -> None:
        """Stop (or kill) every role that has not ended."""
        for role in self._roles:
            if role.state not in TERMINAL:
                self.stop(role, kill=kill)

    def restart(self, role: SupervisedRole) -> None:
        """A user's restart: counted, then stopped and started again."""
        with self._roles.lock:
            role.restarts += 1
        self.stop(role, restart=True)

    def signal(self, role: SupervisedRole, signal_name: str) -> str:
        """Send a signal (``STOP``, ``CONT``, ``USR1``...) to the role's process group."""
        if signal_number(signal_name) is None:  # refused here, to the user, not only in the agent's log
            raise ValueError(f"{signal_name!r} is not a signal: {SIGNAL_HINT}")
        if role.state not in ALIVE:
            raise RuntimeError(f"{role.task.role_id} is {role.state}")
        self._hosts.send(role.host_key, {"op": "signal", "role": role.task.role_id, "signal": signal_name})
        return f"sent SIG{signal_name.upper().removeprefix('SIG')} to {role.task.role_id}"
