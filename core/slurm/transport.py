"""The per-node agent as one Slurm step: ``srun --jobid=J --nodes=1 --ntasks=1 --nodelist=NODE``.

The agent is the same program :class:`core.remote.transport.LocalTransport` starts, speaking the same
JSON lines, only over srun's stdio: srun forwards our stdin to the task and its stdout back
unbuffered. The agent then starts the roles as it does anywhere (own process groups, logs,
samples), so stop, kill, restart and stall detection work unchanged. The agent file must be
reachable on the node at the same path (a shared home or project directory, as Slurm clusters
have); the same holds for the python that runs it.

Closing the agent's stdin stops its roles and ends the step. If it does not end in time, the
step is cancelled by its id (``scancel J.S``), never by killing srun alone: a SIGKILLed srun
leaves its step running on the node.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from core.agent import artifact_file
from core.remote.endpoints import Endpoint
from core.remote.link import AgentLink
from core.remote.transport import EventSink, LocalTransport
from core.slurm.client import SlurmClient, step_argv


def step_name_for(host: str) -> str:
    """The step's name in squeue (``towerdeck-agent-HOST``): how its id is found again."""
    return f"towerdeck-agent-{host}"


class SlurmTransport(LocalTransport):
    """The agent for ``host`` as a step of job ``job_id`` on ``node``.

    ``on_disconnect`` is passed to the agent as for a local one; ``python`` is the interpreter on
    the node (this one by default: the same path on a shared filesystem).
    """

    def __init__(
        self,
        host: str,
        sink: EventSink,
        log_path: Path,
        *,
        client: SlurmClient,
        job_id: str,
        node: str,
        on_disconnect: str = "stop",
        python: str = sys.executable,
        agent_path: Path | None = None,
    ) -> None:
        super().__init__(host, sink, log_path, on_disconnect)
        self.job_id = job_id
        self.node = node
        self._client = client
        self._python = python
        # The zipapp every transport runs; by default in the per-user cache, which a shared home
        # directory makes the same path on every node.
        self._agent_path = agent_path if agent_path is not None else artifact_file()
        self.step_id: str | None = None

    def argv(self) -> list[str]:
        """The srun command line that starts the agent on the node (through a login node if any)."""
        agent = [self._python, "-u", str(self._agent_path), "--on-disconnect", self._on_disconnect]
        # The step's name lets squeue give its id back (srun prints it only with --verbose).
        return self._client.argv(step_argv(self.job_id, self.node, agent, name=step_name_for(self.host)))

    def env(self) -> dict[str, str] | None:
        return self._client.env

    def find_step(self, timeout_s: float = 10.0, poll_s: float = 0.1) -> str | None:
        """The agent's step id (``J.S``) from squeue, once Slurm lists it; None if it never does."""
        deadline = time.monotonic() + timeout_s
        name = step_name_for(self.host)
        while True:
            step = self._client.named_steps(self.job_id).get(name)
            if step is not None:
                self.step_id = step
                return step
            if time.monotonic() > deadline or (self._proc is not None and self._proc.poll() is not None):
                return None
            time.sleep(poll_s)

    def _on_close_timeout(self, timeout_s: float) -> None:
        """The agent did not end: cancel its step (a killed srun leaves the step running), then
        kill srun if it still waits."""
        assert self._proc is not None
        step = self.step_id or self.find_step(timeout_s=1.0)
        if step is not None:
            self._client.cancel_step(step, graceful=False)
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


# ------------------------------------------------------------------------------------------
# The agent a launch uses: serving in its step, so a new step can reattach to it


def slurm_endpoint(
    client: SlurmClient,
    job_id: str,
    node: str,
    *,
    host: str,
    sock: Path,
    log: Path,
    on_disconnect: str = "keep",
    python: str = sys.executable,
    agent_path: Path | None = None,
) -> Endpoint:
    """How to start the agent for ``host`` as a step on ``node``, and how to reach it again.

    The first step runs the agent with ``--serve SOCK --in-step``: it serves on a Unix socket in
    the run directory (a shared filesystem, as for the agent file) without leaving the step, so
    scancel and the time limit reach it and its roles. The launcher talks to it through the
    step's stdio. A reattach (``attach`` after the launcher died) is another step on the same
    node, ``srun --overlap ... agent.pyz --attach SOCK``, relaying to that socket.
    """
    agent = [python, "-u", str(agent_path if agent_path is not None else artifact_file(sock.parent))]
    first = step_argv(
        job_id,
        node,
        [*agent, "--serve", str(sock), "--in-step", "--log", str(log), "--on-disconnect", on_disconnect],
        name=step_name_for(host),
    )
    attach = step_argv(job_id, node, [*agent, "--attach", str(sock)], name=f"{step_name_for(host)}-attach")
    return Endpoint(
        host,
        remote=False,
        first_argv=client.argv(first),
        attach_argv=client.argv(attach),
        extra={"job_id": job_id, "node": node},
    )


class SlurmLink(AgentLink):
    """An :class:`AgentLink` whose relay is an srun step: reconnects and reattaches as a local
    link does. ``node_is_here`` says whether the node is this machine: only then may the
    controller kill a lost role's pid itself."""

    def __init__(self, endpoint: Endpoint, *args: Any, node_is_here: bool = False, **kwargs: Any) -> None:
        super().__init__(endpoint, *args, **kwargs)
        self._node_is_here = node_is_here

    @property
    def is_local(self) -> bool:
        return self._node_is_here
