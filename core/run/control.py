"""Controlling a running launch from another process, through a Unix socket in the run directory.

The socket is owner-only (0600 in a 0700 directory): TowerDeck opens no network listener. A
request is one JSON line ``{"action": "stop", "role": "worker:1"}``; the answer one JSON line
``{"ok": true, "message": "..."}`` or ``{"ok": false, "error": "..."}``. Actions: ``status``,
``stop``, ``kill``, ``restart``, ``signal`` (with ``signal``), ``stop_all``, ``kill_all``,
``restart_all``. This module is the protocol and the client; the server is
:mod:`core.controller.control_server`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SOCKET_NAME = "control.sock"
MAX_SUN_PATH = 100
REQUEST_LIMIT_BYTES = 64 * 1024

STATUS_TAIL_LINES = 10


def socket_path_for(run_dir: Path) -> Path:
    """The control socket: always in the run directory (see :func:`reachable`)."""
    return run_dir / SOCKET_NAME


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name for ``path`` that fits a Unix socket address (~108 bytes): the path itself, or for a
    deep run directory the same file through an open descriptor of its directory (Linux's
    ``/proc/self/fd/N/NAME``), rather than a temp folder that would outlive a killed launcher."""
    if len(str(path)) < MAX_SUN_PATH or not os.path.isdir("/proc/self/fd"):
        yield str(path)
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def read_line(conn: socket.socket) -> Any:
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > REQUEST_LIMIT_BYTES:
            raise ValueError("request too long")
    return json.loads(data.split(b"\n", 1)[0] or b"null")


def request(socket_path: Path, payload: dict[str, Any], timeout_s: float = 15.0) -> dict[str, Any]:
    """Send one request to a running launch; raises OSError when nothing listens."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        with reachable(socket_path) as name:
            sock.connect(name)
        sock.sendall((json.dumps(payload) + "\n").encode())
        reply = read_line(sock)
    if not isinstance(reply, dict):
        raise OSError("the launch answered nonsense")
    return reply
