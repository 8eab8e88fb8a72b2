"""Requests to a host's agent that another thread waits for: the agent answers ``profile`` with
``profiled`` and ``read_file`` with ``file_chunk``, each carrying the request's ``id``.

:class:`AgentRequests` sits where an agent's events arrive (the controller's sink): an answer goes
to the thread that asked, never into the controller's queue; every other event goes on as usual.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

# The agent's answers to a request, and the ops whose failure it reports as an ``error`` naming the op.
ANSWER_EVENTS = ("profiled", "file_chunk")
ASKING_OPS = ("profile", "read_file")


class AgentRequestError(RuntimeError):
    """A request got no answer, or the agent refused it; the message is one line."""


class AgentRequests:
    """Answers of agents, routed by request id to the waiting thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[str, queue.Queue[dict[str, Any]]]] = {}
        self._ids = itertools.count(1)

    def offer(self, host: str, event: dict[str, Any]) -> bool:
        """True when ``event`` is an answer (taken here); an agent's ``error`` about an asking op
        goes to every request waiting on that host (it names no id)."""
        kind = event.get("ev")
        with self._lock:
            if kind in ANSWER_EVENTS:
                waiting = self._waiting.get(str(event.get("id")))
                if waiting is not None:
                    waiting[1].put(event)
                return True  # an answer nobody waits for any more is dropped
            if kind == "error" and event.get("op") in ASKING_OPS:
                for waiting_host, answers in self._waiting.values():
                    if waiting_host == host:
                        answers.put(event)
                return True
        return False

    def ask(
        self, host: str, send: Callable[[dict[str, Any]], bool], command: dict[str, Any], *, wait_s: float
    ) -> dict[str, Any]:
        """Send ``command`` (given an id) to ``host``'s agent and wait for its answer;
        :class:`AgentRequestError` when none comes or the agent refuses."""
        request_id = f"p{os.getpid()}-{next(self._ids)}"
        answers: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            self._waiting[request_id] = (host, answers)
        try:
            if not send({**command, "id": request_id}):
                raise AgentRequestError(f"the agent on {host} is not connected")
            try:
                answer = answers.get(timeout=wait_s)
            except queue.Empty:
                raise AgentRequestError(f"no answer from the agent on {host} in {wait_s:g} s") from None
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)
        if answer.get("ev") == "error":
            message = str(answer.get("message"))
            if message.startswith("unknown op"):
                raise AgentRequestError(
                    f"the agent on {host} is too old to profile (no {command['op']!r} op); relaunch the run to update it"
                )
            raise AgentRequestError(f"the agent on {host}: {message}")
        return answer
