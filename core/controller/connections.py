"""Host connections: one transport per host (a local agent, or one over SSH or a Slurm step), made
at once for every host, and the way to send a host's agent a command.

The transports are made and dropped on the controller's thread; other threads (a profile asked
through the control socket) only look one up, under this part's lock. Transports satisfy
:class:`core.remote.transport.Transport`; what the agents send back goes to the controller's sink.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.cluster.spec import ClusterSpec, HostConfig
from core.remote.transport import EventSink, Transport
from core.run.rundir import RunDir, host_file_name

# Closing every agent at the end of a run, together: each close waits up to 10 s for its agent's
# bye, then 10 s for its relay (core.remote.link), and is killed past that.
CLOSE_ALL_WAIT_S = 30.0
ATTACH_CONNECT_ON_STOP_S = 10.0  # a reattach stopped while connecting: how long its connections get yet

# Makes the transport that reaches one host's agent: (host, where its events go, its log file).
TransportFactory = Callable[[str, EventSink, Path], Transport]


class HostConnections:
    """Every host's transport; see the module docstring."""

    def __init__(
        self,
        run: RunDir,
        sink: EventSink,
        interrupted: threading.Event,
        *,
        factory: TransportFactory,
        remote_hosts: frozenset[str],
    ) -> None:
        self._run = run
        # The hosts reached over SSH (their roles' files are on them); a Slurm allocation's nodes
        # are reached by srun steps instead and replace them (core.controller.slurm).
        self.remote_hosts = remote_hosts
        self._sink = sink
        self._interrupted = interrupted  # set from any thread by a stop: connections being made give up
        self.factory = factory  # replaced once a Slurm allocation runs (core.controller.slurm)
        self._transports: dict[str, Transport] = {}
        self._lock = threading.Lock()  # guards the dict for the threads that look a transport up
        # Hosts whose agent tails the roles' TensorBoard files itself (its hello says so); the
        # others' local roles are read by the controller, as a fallback.
        self._tails_tensorboard: dict[str, bool] = {}

    def _log(self, host: str) -> Path:
        return self._run.path / f"agent-{host_file_name(host)}.log"

    def transport(self, host: str) -> Transport:
        """``host``'s transport, made and started if there is none yet (controller thread)."""
        found = self.find(host)
        if found is None:
            found = self.factory(host, self._sink, self._log(host))
            found.start()
            with self._lock:
                self._transports[host] = found
        return found

    def find(self, host: str) -> Transport | None:
        """``host``'s transport if it has one; any thread."""
        with self._lock:
            return self._transports.get(host)

    def send(self, host: str, command: dict[str, Any]) -> bool:
        """Send ``host``'s agent a command (its transport made if need be); False if it is gone."""
        return self.transport(host).send(command)

    def send_all(self, command: dict[str, Any]) -> int:
        """Send every connected agent a command; how many took it."""
        with self._lock:
            transports = list(self._transports.values())
        return sum(t.send(command) for t in transports)

    def drop(self, host: str) -> Transport | None:
        """Forget ``host``'s transport (its agent is lost); the one forgotten, if any."""
        with self._lock:
            return self._transports.pop(host, None)

    def hello(self, host: str, *, tails_tensorboard: bool) -> None:
        self._tails_tensorboard[host] = tails_tensorboard

    def tails_tensorboard(self, host: str) -> bool:
        """Whether ``host``'s agent reads its roles' TensorBoard files itself."""
        return self._tails_tensorboard.get(host, False)

    def connect_all(self, hosts: list[str], *, attaching: bool) -> None:
        """Reach every host's agent at once: connecting (SSH) takes a while, one host after the
        other would add them up. A stop while connecting gives up the connections being made."""
        with self._lock:
            hosts = [h for h in dict.fromkeys(hosts) if h not in self._transports]
        made = {h: self.factory(h, self._sink, self._log(h)) for h in hosts}
        threads = [threading.Thread(target=t.start, name=f"connect-{h}", daemon=True) for h, t in made.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive() and not self._interrupted.is_set():
                thread.join(0.1)
        if attaching:
            # Stopped while reattaching: the roles run on those agents, and only a connection can
            # stop them, so each connection being made gets a while yet (a local agent answers in
            # milliseconds). Giving up at once left the roles running and the run stopping for
            # good (a stop 50 ms after an attach; tests/core/test_reattach_stop.py).
            deadline = time.monotonic() + ATTACH_CONNECT_ON_STOP_S
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._transports.update(made)
        if self._interrupted.is_set():  # stopped while connecting (a hung ssh): give up at once
            # On a launch nothing has started yet. On a reattach, the hosts that answered are kept.
            given_up = [
                t for t, thread in zip(made.values(), threads, strict=True) if thread.is_alive() or not attaching
            ]
            closing = [
                threading.Thread(target=t.close, args=(1.0,), name=f"give-up-{t.host}", daemon=True) for t in given_up
            ]
            for thread in closing:
                thread.start()
            for thread in closing:
                thread.join(5.0)

    def close_all(self, *, detach: bool) -> None:
        """The controller is done: close every transport (each agent told to shut down, its bye
        seen or its relay ended), or leave the agents running (``detach``). All at once, within
        ``CLOSE_ALL_WAIT_S`` together: one after the other, each host's close was added to the last."""
        with self._lock:
            transports = list(self._transports.values())
        threads = [
            threading.Thread(
                target=transport.detach if detach else transport.close, name=f"close-{transport.host}", daemon=True
            )
            for transport in transports
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + CLOSE_ALL_WAIT_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


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


def link_factory(
    spec: Callable[[], ClusterSpec], run: RunDir, *, on_disconnect: str, attaching: bool
) -> TransportFactory:
    """Makes an :class:`~core.remote.link.AgentLink` to a host's agent: local, or over SSH per the
    cluster's [hosts] (``spec``: the cluster as it is now)."""

    def make(host: str, sink: EventSink, log_path: Path) -> Transport:
        from core.remote.endpoints import local_endpoint, remote_endpoint
        from core.remote.link import AgentLink
        from core.remote.ssh import ssh_config_path

        cluster = spec()
        config = cluster.host_config(host)
        if config.remote:
            endpoint = remote_endpoint(
                config, ssh_config_path(cluster), remote_run_dir(config, run), on_disconnect=on_disconnect
            )
        else:
            endpoint = local_endpoint(host, agent_socket(run, host), log_path, on_disconnect=on_disconnect)
        return AgentLink(endpoint, sink, run.path, log_path, attach=attaching)

    return make
