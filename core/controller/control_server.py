"""The control socket's server: a launch's controller answers ``ctl``, ``status`` and other windows
through the owner-only Unix socket of :mod:`core.run.control` (the protocol and the client).

Besides that module's actions, ``profile`` {``role``, ``dest`` (a folder under ``RUN/profiles``),
``seconds``, ``light``, ``timeout_s``} traces a role of a host reached over SSH, or of a Slurm node, through its agent
and brings the files into ``dest`` (:mod:`core.profiling.remote`); it answers ``{"ok": true,
"returncode", "reply", "stderr", "fetched"}`` (the tracer's outcome, judged by the caller as a local
capture's) or ``{"ok": false, "error"}``, from its own thread, as it takes seconds. The status
names the ``agent_hosts`` whose roles go this way."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from core.controller.controller import Controller
from core.run.control import STATUS_TAIL_LINES, reachable, read_line, socket_path_for


class ControlServer:
    def __init__(self, controller: Controller, run_dir: Path) -> None:
        self.controller = controller
        self.run_dir = run_dir
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
            with reachable(self.path) as name:
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
            conn.settimeout(5)
            try:
                request = read_line(conn)
            except (OSError, ValueError) as exc:
                self._answer(conn, {"ok": False, "error": f"bad request: {exc}"})
                continue
            if isinstance(request, dict) and request.get("action") == "profile":
                # Seconds long: answered from its own thread, so status and stop go on meanwhile.
                threading.Thread(
                    target=self._profile, args=(conn, request), name="control-profile", daemon=True
                ).start()
                continue
            self._answer(conn, self._handle(request))

    @staticmethod
    def _answer(conn: socket.socket, reply: dict[str, Any]) -> None:
        with conn, contextlib.suppress(OSError):
            conn.sendall((json.dumps(reply) + "\n").encode())

    def _profile(self, conn: socket.socket, request: dict[str, Any]) -> None:
        """``profile``: a remote role traced through its agent, its files fetched into ``dest``."""
        from core.profiling.env import ProfileError

        try:
            role, dest = str(request["role"]), Path(str(request["dest"]))
            seconds, timeout_s = float(request["seconds"]), float(request["timeout_s"])
            if not dest.resolve().is_relative_to((self.run_dir / "profiles").resolve()):
                raise ValueError(f"dest must be a folder under {self.run_dir / 'profiles'}")
            reply = self.controller.profile_remote(role, seconds, request.get("light") is True, timeout_s, dest)
            answer = {"ok": True, **{k: reply.get(k) for k in ("returncode", "reply", "stderr", "fetched")}}
        except ProfileError as exc:
            answer = {"ok": False, "error": str(exc)}
        except (KeyError, TypeError, ValueError, OSError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            answer = {"ok": False, "error": f"bad profile request: {message}"}
        self._answer(conn, answer)

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
                "remote_hosts": c.remote_hosts(),
                "agent_hosts": c.agent_hosts(),  # their roles are profiled through their agent
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
            # shutdown() wakes the accept() that waits in _serve at once (close() alone does not on
            # Linux): the window's close waited up to the 0.5 s accept timeout on the GUI thread.
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        if self._thread is not None:
            self._thread.join(2)
        with contextlib.suppress(OSError):
            self.path.unlink()
