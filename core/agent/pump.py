"""The log pump: a small forked process per role that copies its output to the log file.

The role never writes the log itself, so a full disk cannot make its print() raise; the pump
has its own session, so it survives the agent and a signal to the role does not reach it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from typing import Any, NamedTuple

from .processes import MAX_FD

# What the pump holds in memory while the disk refuses writes, how often it retries then, and
# how long a finished role may wait for a disk that stays full.
PUMP_BUFFER_BYTES = 8 << 20
PUMP_RETRY_S = 1.0
PUMP_EOF_RETRY_S = 5.0
PUMP_STUCK_S = 10.0  # the tree is gone but the pump still reads: something unseen holds the pipe
F_SETPIPE_SZ = 1031


def pump_output(in_fd: int, log_path: str, status_fd: int) -> None:
    """Copy a role's output from ``in_fd`` (a pipe) to the end of ``log_path`` until EOF.

    Writes that fail (ENOSPC, EIO, ...) leave the bytes in a buffer of PUMP_BUFFER_BYTES, retried
    every PUMP_RETRY_S; beyond it bytes are counted, and once writes succeed again a line in the
    log says how many were lost. The pipe is always drained, so the role never blocks on a full
    disk. Status lines (JSON) go to ``status_fd``: ``{"write_failed": MESSAGE}`` once per failure,
    ``{"write_recovered": true, "lost_bytes": N}`` when it ends.
    """
    pending = bytearray()
    lost_bytes = 0
    failing: str | None = None
    log_fd: int | None = None
    eof_at: float | None = None

    def status(**fields: Any) -> None:
        with contextlib.suppress(OSError):  # nobody listening (agent gone): the log still gets it
            os.write(status_fd, (json.dumps(fields) + "\n").encode())

    while True:
        timeout_s = PUMP_RETRY_S if pending or lost_bytes else None
        if eof_at is None:
            ready, _, _ = select.select([in_fd], [], [], timeout_s)
            if ready:
                data = os.read(in_fd, 1 << 20)
                if not data:
                    eof_at = time.monotonic()
                room = PUMP_BUFFER_BYTES - len(pending)
                pending += data[:room]
                lost_bytes += max(0, len(data) - room)
        elif pending or lost_bytes:
            time.sleep(PUMP_RETRY_S)
        try:
            if log_fd is None:
                os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
                log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            while pending:
                written = os.write(log_fd, pending[: 1 << 20])
                del pending[:written]
            if lost_bytes:
                note = f"\n[towerdeck] {lost_bytes} bytes of output lost here: {failing or 'write failed'}\n"
                os.write(log_fd, note.encode())
            if failing is not None:
                status(write_recovered=True, lost_bytes=lost_bytes)
                failing = None
            lost_bytes = 0
        except OSError as exc:
            if failing is None:
                failing = f"cannot write {log_path}: {exc.strerror or exc}"
                status(write_failed=failing)
        if eof_at is not None and (not (pending or lost_bytes) or time.monotonic() - eof_at > PUMP_EOF_RETRY_S):
            if pending or lost_bytes:
                status(gave_up=True, lost_bytes=lost_bytes + len(pending))
            return


class Pump(NamedTuple):
    """A started log pump: its pid, the pipe end the role writes its output to, the one its status is read from."""

    pid: int
    role_fd: int
    status_fd: int


def start_pump(log_path: str) -> Pump:
    """Fork a log pump for one role.

    The pump is forked (not exec'd) so it needs no file on disk, whatever way the agent was
    started; it keeps only its two pipes, so it holds neither the agent's stdio nor another role's.
    """
    out_r, out_w = os.pipe()
    status_r, status_w = os.pipe()
    with contextlib.suppress(OSError):  # a bigger pipe: fewer wake-ups under a flood
        import fcntl

        fcntl.fcntl(out_w, F_SETPIPE_SZ, 1 << 20)
    pid = os.fork()
    if pid == 0:  # the pump
        try:
            os.setsid()
            os.dup2(out_r, 0)
            os.dup2(status_w, 2)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.closerange(3, MAX_FD)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            pump_output(0, log_path, 2)
        finally:
            os._exit(0)
    os.close(out_r)
    os.close(status_w)
    os.set_blocking(status_r, False)
    return Pump(pid=pid, role_fd=out_w, status_fd=status_r)


def parse_pump_status(buf: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """Complete status lines in ``buf`` as objects, and the incomplete rest."""
    *lines, rest = buf.split(b"\n")
    out = []
    for line in lines:
        try:
            status = json.loads(line)
        except ValueError:
            continue
        if isinstance(status, dict):
            out.append(status)
    return out, rest
