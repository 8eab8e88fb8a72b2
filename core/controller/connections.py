"""Host connections: one transport per host (local, or an SSH :class:`~core.remote.link.AgentLink`), made
at once for every host, and taking over a run's agents again on reattach. A mixin of
:class:`core.controller.controller.Controller`; transports satisfy :class:`core.remote.transport.Transport`."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from core.cluster.spec import HostConfig
from core.controller.base import ControllerBase
from core.remote.transport import EventSink, Transport
from core.run import journal, pids
from core.run.rundir import RunDir, host_file_name
from core.run.status import ALIVE, TERMINAL, ClusterPhase, RoleState

ATTACH_CONNECT_ON_STOP_S = 10.0  # a reattach stopped while connecting: how long its connections get yet


class HostConnections(ControllerBase):
    """Reaching every host's agent, and reattaching to them."""

    def _transport(self, host: str) -> Transport:
        if host not in self._transports:
            log = self.run.path / f"agent-{host_file_name(host)}.log"
            transport = self._factory(host, self._sink, log)
            transport.start()
            self._transports[host] = transport
        return self._transports[host]

    def _connect_all(self) -> None:
        """Reach every host's agent at once: connecting (SSH) takes a while, one host after the
        other would add them up."""
        hosts = [h for h in dict.fromkeys(r.host_key for r in self._roles.values()) if h not in self._transports]
        made = {h: self._factory(h, self._sink, self.run.path / f"agent-{host_file_name(h)}.log") for h in hosts}
        threads = [threading.Thread(target=t.start, name=f"connect-{h}", daemon=True) for h, t in made.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive() and not self._interrupted.is_set():
                thread.join(0.1)
        if self._attaching:
            # Stopped while reattaching: the roles run on those agents, and only a connection can
            # stop them, so each connection being made gets a while yet (a local agent answers in
            # milliseconds). Giving up at once left the roles running and the run stopping for
            # good (a stop 50 ms after an attach; tests/core/test_reattach_stop.py).
            deadline = time.monotonic() + ATTACH_CONNECT_ON_STOP_S
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        self._transports.update(made)
        if self._interrupted.is_set():  # stopped while connecting (a hung ssh): give up at once
            # On a launch nothing has started yet. On a reattach, the hosts that answered are kept.
            given_up = [
                t for t, thread in zip(made.values(), threads, strict=True) if thread.is_alive() or not self._attaching
            ]
            closing = [threading.Thread(target=t.close, args=(1.0,), daemon=True) for t in given_up]
            for thread in closing:
                thread.start()
            for thread in closing:
                thread.join(5.0)

    def _link_factory(self, host: str, sink: EventSink, log_path: Path) -> Transport:
        """An :class:`AgentLink` to ``host``'s agent: local, or over SSH per the spec's [hosts]."""
        from core.remote.endpoints import local_endpoint, remote_endpoint
        from core.remote.link import AgentLink
        from core.remote.ssh import ssh_config_path

        config = self.spec.host_config(host)
        if config.remote:
            endpoint = remote_endpoint(
                config, ssh_config_path(self.spec), remote_run_dir(config, self.run), self._on_disconnect
            )
        else:
            endpoint = local_endpoint(host, agent_socket(self.run, host), log_path, self._on_disconnect)
        return AgentLink(endpoint, sink, self.run.path, log_path, attach=self._attaching)

    def _reattach(self) -> str:
        """Rebuild the roles' states from events.jsonl, then reach every host's agent again; each
        agent's hello says which roles still run, and its resume sends the output not yet seen."""
        try:
            last = journal.last_role_states(self.run.path, frozenset(self._roles))
        except OSError:
            last = {}
        with self._lock:
            for name, record in last.items():
                self._roles[name].apply_record(record)
                role = self._roles[name]
                # Diagnosis (issue 13): when each role reached its state, e.g. how long ago a peer exited.
                seen_at = float(record.get("t") or 0) if role.state in TERMINAL else time.time()
                self._diagnoser.on_state(name, str(role.state), seen_at or time.time(), role.detail)
        self._set_phase(ClusterPhase.RUNNING)
        self._connect_all()
        return "reattached"

    def _adopt(self, host: str, hello: dict[str, Any]) -> None:
        """Take over the roles an agent reports after a reattach.

        A role it runs is taken over (one still starting goes on to running); one that ended is
        taken over until the resume sends its output and its exit, unless the journal already
        has that end; one it never heard of that had not started yet is started now."""
        live: dict[str, Any] = hello.get("roles") or {}
        ended: dict[str, Any] = hello.get("ended") or {}
        for role in self._roles.values():
            if role.host_key != host:
                continue
            name = role.task.role_id
            info = live.get(name) or ended.get(name)
            if info is not None:
                attempt = int(info.get("attempt", role.attempt))
                if name not in live and role.state not in ALIVE and attempt == role.attempt:
                    continue  # its end is in the journal already
                with self._lock:
                    role.attempt = attempt
                    role.pid = info.get("pid")
                    role.pid_started = pids.start_time(role.pid) if isinstance(role.pid, int) else None
                    role.log_path = self.run.log_path(role.task, role.attempt)
                    # Still starting when the launcher went: it runs, say so at the next tick.
                    role.running_at = time.time() if role.state == RoleState.STARTING else None
                if role.state not in ALIVE:
                    with self._lock:
                        role.state = RoleState.RUNNING
                self._set_state(role, role.state, "reattached")
            elif role.state in (RoleState.PENDING, RoleState.STARTING):
                # The launcher went before this role's start reached the agent: start it now.
                with self._lock:
                    role.attempt = max(0, role.attempt - 1) if role.state == RoleState.STARTING else role.attempt
                self._launch_role(role)
            elif role.state in ALIVE:
                with self._lock:
                    role.pid = None
                    role.ended_at = time.time()
                self._set_state(
                    role, RoleState.STOPPED, f"ended while nobody watched (the agent on {host} no longer has it)"
                )


# ------------------------------------------------------------------------------------------
# Where agents live


def remote_run_dir(host: HostConfig, run: RunDir) -> str:
    """The run directory on a remote host: ``run_root/<run id>`` (``~`` expands there)."""
    return f"{host.run_root.rstrip('/')}/{run.path.name}"


def agent_socket(run: RunDir, host: str) -> Path:
    """Where the serving agent for ``host`` listens on this machine (or on a node that shares
    the run directory): ``agents/HOST.sock`` in the run directory, made when first asked for."""
    agents = run.path / "agents"
    agents.mkdir(exist_ok=True)
    return agents / f"{host_file_name(host)}.sock"
