"""How to start an agent, and how to reach it again: the command lines of one host's relay.

Locally ``python agent.pyz --serve SOCK`` the first time and ``agent.pyz --attach SOCK`` after;
over SSH ``ssh HOST python3 -c BOOTSTRAP RUNDIR --serve agent.sock`` with the agent's zipapp on
stdin, ``ssh HOST python3 -c ATTACH RUNDIR`` after. :class:`core.remote.link.AgentLink` runs them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from core.agent import artifact_file
from core.cluster.spec import HostConfig
from core.remote.ssh import ATTACH, BOOTSTRAP, agent_payload, remote_python, ssh_argv


@dataclass(frozen=True)
class Endpoint:
    """How to start, and how to reach again, the agent of one host."""

    host: str
    _: KW_ONLY
    remote: bool
    first_argv: list[str]
    attach_argv: list[str]
    payload: bytes = b""  # written to the first connection's stdin (the agent's source)
    config: HostConfig | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """What ``attach`` needs to reach this agent again (kept in run.json)."""
        return {"host": self.host, "remote": self.remote, "attach_argv": self.attach_argv}


def linger_args() -> list[str]:
    """``--linger S`` from $TOWERDECK_AGENT_LINGER_S: how long an agent whose roles have all ended
    waits for a controller to (re)attach before it exits (the agent's default: 600 s)."""
    value = os.environ.get("TOWERDECK_AGENT_LINGER_S", "")
    try:
        seconds = float(value)
    except ValueError:
        return []
    return ["--linger", f"{seconds:g}"] if 0 <= seconds < float("inf") else []


def local_endpoint(host: str, sock: Path, log: Path, *, on_disconnect: str) -> Endpoint:
    agent = [sys.executable, "-u", str(artifact_file(sock.parent))]  # the zipapp, beside the socket
    return Endpoint(
        host,
        remote=False,
        first_argv=[*agent, "--serve", str(sock), "--log", str(log), "--on-disconnect", on_disconnect, *linger_args()],
        attach_argv=[*agent, "--attach", str(sock)],
    )


def remote_endpoint(host: HostConfig, config: Path | None, run_dir: str, *, on_disconnect: str) -> Endpoint:
    """``run_dir`` is the run directory on that host (``~`` is expanded there, by python)."""
    base = ssh_argv(host, config)
    first = remote_python(
        host,
        BOOTSTRAP,
        run_dir,
        "--serve",
        "agent.sock",
        "--log",
        "agent.log",
        "--on-disconnect",
        on_disconnect,
        *linger_args(),
    )
    attach = remote_python(host, ATTACH, run_dir)
    return Endpoint(
        host.address,
        remote=True,
        first_argv=[*base, first],
        attach_argv=[*base, attach],
        payload=agent_payload(),
        config=host,
    )
