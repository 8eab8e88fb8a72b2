"""The agent's JSON-lines protocol: framing, command checks and the events built in one place.

Commands arrive on stdin (or the serve socket) as one JSON object per line; events leave as one
JSON object per line with ``ev`` and ``t``. docs/agent-protocol.md is the reference.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

PROTOCOL = 1
MAX_LINE_BYTES = 16 << 20  # a command longer than this without a newline is discarded
MIN_PERIOD_S = 0.2
MAX_PERIOD_S = 10.0
# How often a role whose output is all sent is read again (``start``'s ``output_period_s``): a line
# waits at most this long. Every output event costs the controller the same whatever its size
# (~0.3 ms at 256 workers), so a large cluster's roles are read less often: the controller sets it
# from how many roles it follows (:func:`output_period_for`).
OUTPUT_PERIOD_S = 0.25  # the default, and what clusters of up to OUTPUT_EVENTS_PER_S / 4 roles get
MAX_OUTPUT_PERIOD_S = 1.0  # a line is never more than this late (a window draws a figure a second)
OUTPUT_EVENTS_PER_S = 256  # what the controller aims at: its share of output events a second


def now() -> float:
    """Wall-clock time, the ``t`` of every event (Unix seconds)."""
    return time.time()


def encode_event(ev: str, **fields: Any) -> str:
    """One event as its line (with the newline): ``{"ev": EV, "t": NOW, **fields}``.

    The agent's own copy of :func:`core.run.journal.json_line` (the agent imports nothing of core)."""
    return json.dumps({"ev": ev, "t": round(now(), 3), **fields}, separators=(",", ":")) + "\n"


class LineBuffer:
    """Splits bytes into lines; bounded (an over-long partial line is dropped, and said so)."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._buf = b""

    def feed(self, data: bytes) -> tuple[list[bytes], bool]:
        """Complete non-blank lines in ``data`` (and what came before it); the flag is True when an
        over-long partial line was discarded."""
        self._buf += data
        if len(self._buf) > self.max_line_bytes and b"\n" not in self._buf:
            self._buf = b""
            return [], True
        *lines, self._buf = self._buf.split(b"\n")
        return [line for line in lines if line.strip()], False


class CommandError(ValueError):
    """A command that cannot be obeyed; the message says which field and why."""


def parse_command(line: bytes) -> dict[str, Any]:
    """One line as a command object with a string ``op``, or :class:`CommandError`."""
    try:
        command = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CommandError(f"not a JSON line: {exc}") from None
    if not isinstance(command, dict) or not isinstance(command.get("op"), str):
        raise CommandError('a command is a JSON object with a string "op"')
    return command


@dataclass(frozen=True)
class StartRequest:
    """A checked ``start`` command."""

    role: str
    attempt: int
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    log: str
    tb_dir: str | None  # the role's TensorBoard directory on this host, tailed for ``scalars``
    skip_backlog: bool = False  # a stopping role's unsent output may be skipped (see watch.tail)
    output_period_s: float = OUTPUT_PERIOD_S  # how often its log is read once read to its end


def parse_start(command: dict[str, Any]) -> StartRequest:
    """Check a ``start`` command's fields (KeyError/TypeError name the field, as before)."""
    name = command["role"]
    log = command["log"]
    argv = command["argv"]
    env = command.get("env", {})
    tb_dir = command.get("tb_dir") or None
    if not isinstance(name, str) or not isinstance(log, str):
        raise TypeError("role and log must be strings")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError("argv must be a non-empty list of strings")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise TypeError("env must map strings to strings")
    if tb_dir is not None and not isinstance(tb_dir, str):
        raise TypeError("tb_dir must be a string (a directory on the agent's host)")
    skip = command.get("skip_backlog") is True
    period = command.get("output_period_s", OUTPUT_PERIOD_S)
    if isinstance(period, bool) or not isinstance(period, (int, float)) or not 0 < period <= MAX_OUTPUT_PERIOD_S:
        raise TypeError(f"output_period_s must be a number of seconds above 0 and at most {MAX_OUTPUT_PERIOD_S:g}")
    return StartRequest(
        name, int(command.get("attempt", 1)), argv, env, command.get("cwd") or None, log, tb_dir, skip, float(period)
    )


def output_period_for(roles: int) -> float:
    """The ``output_period_s`` for each role of a cluster of ``roles``: OUTPUT_PERIOD_S up to 64 roles,
    growing with the cluster so its output comes in about OUTPUT_EVENTS_PER_S events a second, and
    never over MAX_OUTPUT_PERIOD_S (past 256 roles the events grow again, a role's each second).
    At 256 simulated workers 0.25 s cost the controller 22.6 % of a core, 1 s 14.7 %."""
    return min(MAX_OUTPUT_PERIOD_S, max(OUTPUT_PERIOD_S, roles / OUTPUT_EVENTS_PER_S))


def clamp_period(period_s: float) -> float:
    """A sample period within what the agent accepts."""
    return min(MAX_PERIOD_S, max(MIN_PERIOD_S, period_s))


def hello_fields(*, subreaper: bool, tensorboard: bool) -> dict[str, Any]:
    """The fields of ``hello`` common to both modes (serve mode adds its own)."""
    return {
        "protocol": PROTOCOL,
        "agent_pid": os.getpid(),
        "host": socket.gethostname(),
        "python": sys.version.split()[0],
        "subreaper": subreaper,
        "tensorboard": tensorboard,
    }
