"""Profiling a role on another host through its agent, for the launcher's controller.

The agent traces the role with the role's own python (its ``profile`` op), into
``profiles/<timestamp>/<job>-<task>`` of the run directory on that host; its ``profiled`` event
lists the files, which ``read_file`` brings back in base64 chunks into the same place in the
local run directory, so the capture is in TensorBoard's layout here, as a local one is.
:class:`AgentReplies` sits where the agents' events arrive and hands these replies to whoever
waits for them, never to the controller's queue.
"""

from __future__ import annotations

import base64
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from core.profiling.env import ProfileError, WorkerResult

REPLY_EVENTS = ("profiled", "file_chunk")
ASKING_OPS = ("profile", "read_file")
CHUNK_BYTES = 4 << 20
CHUNK_WAIT_S = 30.0
MAX_FETCH_BYTES = 512 << 20  # a 10 s full trace wrote 121 MB
ANSWER_SLACK_S = 10.0  # past the agent's own limit, for the way back
FETCH_SLACK_S = 120.0  # bringing the files back over SSH


class AgentReplies:
    """Replies of agents to ``profile`` and ``read_file``, routed by request id to the waiting thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[str, queue.Queue[dict[str, Any]]]] = {}
        self._ids = itertools.count(1)

    def offer(self, host: str, event: dict[str, Any]) -> bool:
        """True when ``event`` is such a reply (taken here); an agent's ``error`` about these ops
        goes to every request waiting on that host (it names no id)."""
        kind = event.get("ev")
        with self._lock:
            if kind in REPLY_EVENTS:
                waiting = self._waiting.get(str(event.get("id")))
                if waiting is not None:
                    waiting[1].put(event)
                return True  # a reply nobody waits for any more is dropped
            if kind == "error" and event.get("op") in ASKING_OPS:
                for waiting_host, replies in self._waiting.values():
                    if waiting_host == host:
                        replies.put(event)
                return True
        return False

    def ask(
        self, host: str, send: Callable[[dict[str, Any]], bool], command: dict[str, Any], wait_s: float
    ) -> dict[str, Any]:
        """Send ``command`` (given an id) to ``host``'s agent and wait for its reply; ProfileError on none."""
        request_id = f"p{os.getpid()}-{next(self._ids)}"
        replies: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            self._waiting[request_id] = (host, replies)
        try:
            if not send({**command, "id": request_id}):
                raise ProfileError(f"the agent on {host} is not connected")
            try:
                reply = replies.get(timeout=wait_s)
            except queue.Empty:
                raise ProfileError(f"no answer from the agent on {host} in {wait_s:g} s") from None
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)
        if reply.get("ev") == "error":
            message = str(reply.get("message"))
            if message.startswith("unknown op"):
                raise ProfileError(
                    f"the agent on {host} is too old to profile (no {command['op']!r} op); relaunch the run to update it"
                )
            raise ProfileError(f"the agent on {host}: {message}")
        return reply


def profile_through_agent(
    replies: AgentReplies,
    host: str,
    send: Callable[[dict[str, Any]], bool],
    command: dict[str, Any],
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
    reply = replies.ask(host, send, {**command, "op": "profile", "logdir": logdir}, timeout_s + ANSWER_SLACK_S)
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
            fetch_file(replies, host, send, entry["path"], target)
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


def fetch_file(
    replies: AgentReplies, host: str, send: Callable[[dict[str, Any]], bool], remote_path: str, target: Path
) -> None:
    """Copy one file of the agent's host here, chunk by chunk (a temporary name until complete)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    offset = 0
    with open(partial, "wb") as out:
        while True:
            chunk = replies.ask(
                host,
                send,
                {"op": "read_file", "path": remote_path, "offset": offset, "length": CHUNK_BYTES},
                CHUNK_WAIT_S,
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
