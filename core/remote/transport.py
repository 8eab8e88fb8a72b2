"""How the controller reaches a host agent: here, a local subprocess speaking JSON lines.

A transport starts the agent (the zipapp built from ``core/agent/``, the same one shipped to
remote hosts), sends it commands and hands every event it prints to a callback, on the
transport's reader thread. When the agent goes away the callback gets
``{"ev": "agent_lost", ...}`` once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

from core.agent import artifact_file
from core.run.journal import json_line

EventSink = Callable[[str, dict[str, Any]], None]


def parse_event_line(raw: str | bytes) -> dict[str, Any]:
    """One line from an agent as its event, or an ``error`` event quoting what it printed instead."""
    try:
        event = json.loads(raw)
    except ValueError:
        event = None
    if not isinstance(event, dict) or not isinstance(event.get("ev"), str):
        return {"ev": "error", "message": f"agent printed a non-event line: {raw[:200]!r}"}
    return event


def output_bytes(data: str) -> bytes:
    """The original bytes of an ``output`` event's ``data``: the agent decodes with
    ``surrogateescape``, so each byte that was not UTF-8 arrives as one lone surrogate."""
    try:
        return data.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no agent sends: count it as what a reader shows
        return data.encode("utf-8", "replace")


def readable(data: str) -> str:
    """``output`` text as a person and the parsers see it: each byte that was not UTF-8 as U+FFFD."""
    if data.isascii():
        return data
    return output_bytes(data).decode("utf-8", "replace")


class Transport(Protocol):
    """How the controller reaches one host's agent (a local child, or :class:`core.remote.link.AgentLink`).

    Events arrive through the sink given at construction, on the transport's own thread.
    """

    host: str
    # The run directory on the agent's host, from its hello (None: this machine's, or not known yet).
    run_dir: str | None
    lost_reason: str | None  # why the agent is gone, once it is

    @property
    def is_local(self) -> bool:
        """True when the agent runs on this machine (its pids mean something here)."""
        ...

    def start(self) -> None: ...
    def send(self, command: dict[str, Any]) -> bool: ...
    def close(self, timeout_s: float = 10.0) -> None: ...
    def detach(self, timeout_s: float = 10.0) -> None:
        """Disconnect and leave the roles running (where the agent can keep them)."""
        ...


class LocalTransport:
    """The agent as a child process of this one, in its own session so that a Ctrl-C in the
    terminal reaches TowerDeck (which stops the roles in order), not the agent."""

    def __init__(self, host: str, sink: EventSink, log_path: Path, on_disconnect: str = "stop") -> None:
        self.host = host
        self._sink = sink
        self._log_path = log_path
        self._on_disconnect = on_disconnect
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self.run_dir: str | None = None
        self.lost_reason: str | None = None

    @property
    def is_local(self) -> bool:
        return True

    def detach(self, timeout_s: float = 10.0) -> None:
        """A child agent cannot outlive this process's pipe: leaving is closing (per on_disconnect)."""
        self.close(timeout_s)

    def argv(self) -> list[str]:
        """The command line that starts the agent (the shipped zipapp, run by this python)."""
        return [sys.executable, "-u", str(artifact_file()), "--on-disconnect", self._on_disconnect]

    def env(self) -> dict[str, str] | None:
        """The agent's environment; None: this process's."""
        return None

    def start(self) -> None:
        log: IO[bytes] = open(self._log_path, "ab")  # noqa: SIM115 - the child holds it
        try:
            # Own session: a Ctrl-C in the terminal must reach TowerDeck (which stops the roles in
            # order), not the agent (or srun, which would cancel its step first).
            self._proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                env=self.env(),
            )
        finally:
            log.close()
        self._reader = threading.Thread(target=self._read, name=f"agent-reader-{self.host}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def send(self, command: dict[str, Any]) -> bool:
        """Send one command; False when the agent is gone (agent_lost follows)."""
        if self._proc is None or self._proc.stdin is None:
            return False
        data = json_line(command).encode()
        with self._lock:
            try:
                self._proc.stdin.write(data)
                self._proc.stdin.flush()
                return True
            except (BrokenPipeError, OSError, ValueError):
                return False

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for raw in self._proc.stdout:
            self._sink(self.host, parse_event_line(raw))
        code = self._proc.wait()
        self._sink(self.host, {"ev": "agent_lost", "returncode": code})

    def close(self, timeout_s: float = 10.0) -> None:
        """Close the agent's stdin (it stops its roles, per its on-disconnect) and wait for it."""
        if self._proc is None:
            return
        with self._lock:
            try:
                if self._proc.stdin:
                    self._proc.stdin.close()
            except OSError:
                pass
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._on_close_timeout(timeout_s)
        if self._reader is not None:
            self._reader.join(timeout_s)

    def _on_close_timeout(self, timeout_s: float) -> None:
        """The agent did not end within ``timeout_s`` of its stdin closing: kill it."""
        assert self._proc is not None
        self._proc.kill()
        self._proc.wait()
