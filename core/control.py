"""Controlling a running launch from another process, through a Unix socket in the run directory.

The socket is owner-only (0600 in a 0700 directory): TowerDeck opens no network listener. A
request is one JSON line ``{"action": "stop", "role": "worker:1"}``; the answer one JSON line
``{"ok": true, "message": "..."}`` or ``{"ok": false, "error": "..."}``. Actions: ``status``,
``stop``, ``kill``, ``restart``, ``signal`` (with ``signal``), ``stop_all``, ``kill_all``,
``restart_all``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the controller (and TensorBoard behind it) only when launching: `ctl` stays quick
    from core.controller import Controller


SOCKET_NAME = "control.sock"
MAX_SUN_PATH = 100
REQUEST_LIMIT_BYTES = 64 * 1024

STATUS_TAIL_LINES = 10


def socket_path_for(run_dir: Path) -> Path:
    """The control socket: always in the run directory (see :func:`_reachable`)."""
    return run_dir / SOCKET_NAME


@contextlib.contextmanager
def _reachable(path: Path) -> Iterator[str]:
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


class ControlServer:
    def __init__(self, controller: Controller, run_dir: Path) -> None:
        self.controller = controller
        self.path = socket_path_for(run_dir)
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    def start(self) -> Path:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            if self.path.exists():
                self.path.unlink()
            with _reachable(self.path) as name:
                sock.bind(name)
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        sock.listen(8)
        sock.settimeout(0.5)
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="control", daemon=True)
        self._thread.start()
        return self.path

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    reply = self._handle(_read_line(conn))
                except (OSError, ValueError) as exc:
                    reply = {"ok": False, "error": f"bad request: {exc}"}
                with contextlib.suppress(OSError):
                    conn.sendall((json.dumps(reply) + "\n").encode())

    def _handle(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict) or not isinstance(request.get("action"), str):
            return {"ok": False, "error": 'a request is {"action": ..., "role": ...}'}
        action = request["action"]
        c = self.controller
        if action == "status":
            status = c.status()
            roles = [
                {
                    **r.to_json(),
                    # Why a role failed or restarts is usually in its last words.
                    "last_lines": c.last_lines(r.role, STATUS_TAIL_LINES),
                }
                for r in status.roles
            ]
            return {
                "ok": True,
                "phase": str(status.phase),
                "result": status.result,
                "reason": status.reason,
                "roles": roles,
                "hosts": c.host_states(),
                "slurm": c.slurm_state(),  # None unless the run is on Slurm
            }
        role = request.get("role")
        future: Future[str]
        try:
            if action in ("stop_all", "kill_all", "restart_all", "detach"):
                future = getattr(c, action)()
            elif action in ("stop", "kill", "restart"):
                if not isinstance(role, str):
                    return {"ok": False, "error": f"{action} needs a role, e.g. worker:0"}
                future = getattr(c, f"{action}_role")(role)
            elif action == "signal":
                if not isinstance(role, str) or not isinstance(request.get("signal"), str):
                    return {"ok": False, "error": "signal needs a role and a signal name"}
                future = c.signal_role(role, request["signal"])
            else:
                return {"ok": False, "error": f"unknown action {action!r}"}
            return {"ok": True, "message": future.result(timeout=10)}
        except Exception as exc:  # the controller's refusal goes back to the client as text
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            return {"ok": False, "error": str(message)}

    def close(self) -> None:
        self._closed.set()
        if self._sock is not None:
            self._sock.close()
        if self._thread is not None:
            self._thread.join(2)
        with contextlib.suppress(OSError):
            self.path.unlink()


def _read_line(conn: socket.socket) -> Any:
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
        with _reachable(socket_path) as name:
            sock.connect(name)
        sock.sendall((json.dumps(payload) + "\n").encode())
        reply = _read_line(sock)
    if not isinstance(reply, dict):
        raise OSError("the launch answered nonsense")
    return reply
