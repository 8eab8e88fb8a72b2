"""Profiling a role on another host through its agent, for the launcher's controller.

The agent traces the role with the role's own python (its ``profile`` op), into
``profiles/<timestamp>/<job>-<task>`` of the run directory on that host; its ``profiled`` event
lists the files, which ``read_file`` brings back in base64 chunks into the same place in the
local run directory, so the capture is in TensorBoard's layout here, as a local one is.
The controller asks and routes the answers (:mod:`core.remote.agent_requests`); this module only
needs the narrow :class:`AgentAccess` of it.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from core.profiling.env import ProfileError, WorkerResult
from core.remote.agent_requests import AgentRequestError
from core.run.status import RoleState

CHUNK_BYTES = 4 << 20
CHUNK_WAIT_S = 30.0
MAX_FETCH_BYTES = 512 << 20  # a 10 s full trace wrote 121 MB
ANSWER_SLACK_S = 10.0  # past the agent's own limit, for the way back
FETCH_SLACK_S = 120.0  # bringing the files back over SSH

# Asks a host's agent (host, request, seconds to wait) and returns its answer; AgentRequestError if none.
Ask = Callable[[str, dict[str, Any], float], dict[str, Any]]


class AgentAccess(Protocol):
    """What profiling needs of a live controller: where a role runs, and a way to ask its agent."""

    @property
    def path(self) -> Path: ...

    def agent_hosts(self) -> frozenset[str]: ...

    def agent_of(self, role: str) -> tuple[str, str, RoleState, str]: ...

    def ask_agent(self, host: str, command: dict[str, Any], wait_s: float) -> dict[str, Any]: ...

    def agent_shares_run_dir(self, host: str) -> Path | None: ...


def profile_remote(
    access: AgentAccess, role: str, *, seconds: float, light: bool, timeout_s: float, dest: Path
) -> dict[str, Any]:
    """Trace a running role of an agent host (:meth:`AgentAccess.agent_hosts`) through its agent
    into ``dest`` (a folder of the run directory, the same path under the agent's directory there),
    waiting at most about ``timeout_s``; any thread. The agent's ``profiled`` event; ProfileError
    (one line) when it cannot be tried."""
    name, host, state, address = access.agent_of(role)
    if host not in access.agent_hosts():
        raise ProfileError(f"{role} runs on {host}, which is not reached through an agent over SSH or Slurm")
    if state != RoleState.RUNNING:
        raise ProfileError(f"{role} is {state}; only a running role can be profiled")
    command = {"role": name, "address": address, "seconds": seconds, "light": light, "timeout_s": timeout_s}
    try:
        return profile_through_agent(
            access.ask_agent,
            host,
            command,
            local_run_dir=access.path,
            dest=dest,
            shared_dir=access.agent_shares_run_dir(host),
        )
    except AgentRequestError as exc:
        raise ProfileError(str(exc)) from None


def profile_through_agent(
    ask: Ask,
    host: str,
    command: dict[str, Any],
    *,
    local_run_dir: Path,
    dest: Path,
    shared_dir: Path | None = None,
) -> dict[str, Any]:
    """Have ``host``'s agent trace a role (``command``: role, address, seconds, light, timeout_s),
    into the path of ``dest`` (a folder of the local run directory) on that host, then fetch the
    files into ``dest``. ``shared_dir``: the agent's directory as this machine sees it, where it
    may share a filesystem with this one (a Slurm node's, under the run directory): a file found
    there whole is moved into ``dest`` rather than copied through the agent (a 10 s trace is
    ~121 MB, twice that on disk and in base64 otherwise). The agent's ``profiled`` event, with
    ``fetched`` (paths under ``dest``)."""
    logdir = dest.resolve().relative_to(local_run_dir.resolve()).as_posix()
    timeout_s = float(command["timeout_s"])
    reply = ask(host, {**command, "op": "profile", "logdir": logdir}, timeout_s + ANSWER_SLACK_S)
    fetched = []
    files = [f for f in reply.get("files") or [] if isinstance(f, dict) and isinstance(f.get("path"), str)]
    total = sum(int(f.get("bytes") or 0) for f in files)
    if total > MAX_FETCH_BYTES:
        raise ProfileError(
            f"the profile on {host} is {total / 1e6:.0f} MB, more than {MAX_FETCH_BYTES >> 20} MiB; it stays there, "
            f"under {logdir} of the run directory (try --light or fewer --seconds)"
        )
    for entry in files:
        relative = PurePosixPath(entry["path"]).relative_to(logdir)
        if ".." in relative.parts:
            raise ProfileError(f"the agent on {host} named a file outside the capture: {entry['path']}")
        target = dest.joinpath(*relative.parts)
        if shared_dir is None or not _move_shared(
            shared_dir / logdir / relative, int(entry.get("bytes") or -1), target
        ):
            fetch_file(ask, host, entry["path"], target=target)
        fetched.append(relative.as_posix())
    return {**reply, "fetched": fetched}


def _move_shared(source: Path, size: int, target: Path) -> bool:
    """Move ``source`` to ``target`` when it is the agent's file of ``size`` bytes seen here; False
    when it is not here whole (another filesystem, or not yet visible) or cannot be moved."""
    try:
        if source.is_symlink() or not source.is_file() or source.stat().st_size != size:
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
    except OSError:
        return False
    return True


def fetch_file(ask: Ask, host: str, remote_path: str, *, target: Path) -> None:
    """Copy one file of the agent's host here, chunk by chunk (a temporary name until complete)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    offset = 0
    with open(partial, "wb") as out:
        while True:
            chunk = ask(
                host, {"op": "read_file", "path": remote_path, "offset": offset, "length": CHUNK_BYTES}, CHUNK_WAIT_S
            )
            if chunk.get("error"):
                raise ProfileError(f"the agent on {host}: {chunk['error']}")
            data = base64.b64decode(str(chunk.get("data") or ""))
            out.write(data)
            offset += len(data)
            if not data or offset >= int(chunk.get("size") or 0):
                break
    os.replace(partial, target)


class ControllerTrace:
    """The CLI's side: one remote role's capture asked of the launcher's controller (its control
    socket's ``profile`` action), on a thread, so several roles are traced at once."""

    def __init__(self, socket_path: Path, role: str, dest: Path, seconds: float, light: bool, limit_s: float) -> None:
        self.answer: dict[str, Any] | None = None
        self.started = time.monotonic()
        self.role = role
        request = {
            "action": "profile",
            "role": role,
            "dest": str(dest),
            "seconds": seconds,
            "light": light,
            "timeout_s": limit_s,
        }
        self._thread = threading.Thread(
            target=self._ask, args=(socket_path, request, limit_s), name=f"profile-{role}", daemon=True
        )
        self._thread.start()

    def _ask(self, socket_path: Path, request: dict[str, Any], limit_s: float) -> None:
        from core.run.control import request as control_request

        try:
            # The controller's own limit covers the trace; past it, fetching the files back.
            self.answer = control_request(socket_path, request, timeout_s=limit_s + ANSWER_SLACK_S + FETCH_SLACK_S)
        except (OSError, ValueError) as exc:
            self.answer = {"ok": False, "error": f"the launcher did not answer the profile request: {exc}"}

    def result(self, wait_s: float) -> WorkerResult | str:
        """The trace's outcome as the local worker's would be, or the controller's refusal (one line)."""
        self._thread.join(max(0.0, wait_s) + ANSWER_SLACK_S + FETCH_SLACK_S)
        elapsed = time.monotonic() - self.started
        answer = self.answer
        if answer is None:
            return f"the launcher did not answer about {self.role} in {elapsed:.0f} s"
        if not answer.get("ok"):
            return str(answer.get("error"))
        returncode = answer.get("returncode")
        return WorkerResult(
            answer.get("reply"),
            str(answer.get("stderr") or ""),
            returncode if isinstance(returncode, int) else None,
            elapsed,
        )
