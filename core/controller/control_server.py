"""The control socket's server: a launch's controller answers ``ctl``, ``status`` and other windows
through the owner-only Unix socket of :mod:`core.run.control` (the protocol and the client).

Besides that module's actions, ``profile`` {``role``, ``dest`` (a folder under ``RUN/profiles``),
``seconds``, ``light``, ``timeout_s``} traces a role of a host reached over SSH, or of a Slurm node, through its agent
and brings the files into ``dest`` (:mod:`core.profiling.remote`); it answers ``{"ok": true,
"returncode", "reply", "stderr", "fetched"}`` (the tracer's outcome, judged by the caller as a local
capture's) or ``{"ok": false, "error"}``, from its own thread, as it takes seconds. The status
names the ``agent_hosts`` whose roles go this way.

Each connection is served on a thread of its own, under a deadline for its whole request, so a
slow, idle or half-open client delays no other; a bad line is answered and the server goes on. A
command the controller has not taken within :data:`COMMAND_WAIT_S` is withdrawn and refused with
that reason (nothing is done later), but for ``stop_all``/``kill_all``, which act at once (a
connection being made is given up) and so are answered as under way."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from core.controller.commands import from_request
from core.controller.controller import Controller
from core.run import control
from core.run.control import STATUS_TAIL_LINES, reachable, socket_path_for

REQUEST_DEADLINE_S = 5.0  # for the whole request line, from the connection on (ctl sends it at once)
REPLY_DEADLINE_S = 10.0  # for writing the whole reply to a client that reads slowly
# How long a command may wait for the controller to take it; with the wait once taken, well
# within the client's 15 s, so the client hears the outcome rather than a timeout.
COMMAND_WAIT_S = 8.0
COMMAND_FINISH_S = 4.0
MAX_CONNECTIONS = 256  # served at once; past it, "busy" at once (each costs a thread and a descriptor)
ROLE_ARG_CHARS = 200  # a role or signal name longer than this is no name
# These act at once, before the controller takes them (a connection being made is given up), so
# they cannot be withdrawn: past the wait they are answered as under way, never as refused.
ACT_AT_ONCE = ("stop_all", "kill_all")


class ControlServer:
    """The run's control socket: one thread accepts, one thread per connection answers."""

    def __init__(
        self,
        controller: Controller,
        run_dir: Path,
        *,
        request_deadline_s: float = REQUEST_DEADLINE_S,
        command_wait_s: float = COMMAND_WAIT_S,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.controller = controller
        self.run_dir = run_dir
        self.path = socket_path_for(run_dir)
        self.request_deadline_s = request_deadline_s
        self.command_wait_s = command_wait_s
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
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
        sock.listen(socket.SOMAXCONN)
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
                if self._closed.is_set():
                    return
                # Out of descriptors (EMFILE) or the like: passes as connections end; the server stays.
                time.sleep(0.05)
                continue
            if not self._slots.acquire(blocking=False):
                self._busy(conn)
                continue
            try:
                threading.Thread(target=self._serve_one, args=(conn,), name="control-client", daemon=True).start()
            except RuntimeError:  # no thread to be had
                self._slots.release()
                self._busy(conn)

    def _busy(self, conn: socket.socket) -> None:
        conn.setblocking(False)  # the accepting thread never waits on a client
        self._send(conn, {"ok": False, "error": f"busy: {self.max_connections} requests at once; try again"})

    def _serve_one(self, conn: socket.socket) -> None:
        try:
            try:
                request = control.read_request(conn, deadline=time.monotonic() + self.request_deadline_s)
            except control.BadRequest as exc:
                answer = {"ok": False, "error": f"bad request: {exc}"}
            except OSError:  # the client broke the connection: nobody to answer
                return
            else:
                answer = self._answer(request)
            conn.settimeout(REPLY_DEADLINE_S)
            self._send(conn, answer)
        finally:
            conn.close()
            self._slots.release()

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._handle(request)
        except Exception as exc:  # a thread that dies here would leave its client without a word
            return {"ok": False, "error": f"internal error: {exc!r}"}

    @staticmethod
    def _send(conn: socket.socket, reply: dict[str, Any]) -> None:
        with conn, contextlib.suppress(OSError):  # a client that left without reading: nothing to do
            conn.sendall((json.dumps(reply) + "\n").encode())

    def _profile(self, request: dict[str, Any]) -> dict[str, Any]:
        """``profile``: a remote role traced through its agent, its files fetched into ``dest``
        (seconds long: this connection's thread waits, the others go on)."""
        from core.profiling.env import ProfileError
        from core.profiling.remote import profile_remote

        try:
            role, dest = str(request["role"]), Path(str(request["dest"]))
            seconds, timeout_s = float(request["seconds"]), float(request["timeout_s"])
            if not dest.resolve().is_relative_to((self.run_dir / "profiles").resolve()):
                raise ValueError(f"dest must be a folder under {self.run_dir / 'profiles'}")
            reply = profile_remote(
                self.controller,
                role,
                seconds=seconds,
                light=request.get("light") is True,
                timeout_s=timeout_s,
                dest=dest,
            )
            return {"ok": True, **{k: reply.get(k) for k in ("returncode", "reply", "stderr", "fetched")}}
        except ProfileError as exc:
            return {"ok": False, "error": str(exc)}
        except (KeyError, TypeError, ValueError, OSError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            return {"ok": False, "error": f"bad profile request: {message}"}

    def _status(self) -> dict[str, Any]:
        """The status, bounded by design (see :mod:`core.run.control`): whatever the roles print."""
        c = self.controller
        status = c.status()
        tail_bytes = control.status_tail_budget(len(status.roles))
        roles = [
            {
                **_cut_texts(r.to_json(), ("detail", "waiting_message", "waiting_fix")),
                # Why a role failed or restarts is usually in its last words.
                "last_lines": control.fit_lines(c.last_lines(r.role, STATUS_TAIL_LINES), tail_bytes),
            }
            for r in status.roles
        ]
        hosts = {
            host: _cut_texts(h, tuple(k for k, v in h.items() if isinstance(v, str)))
            for host, h in c.host_states().items()
        }
        return {
            "ok": True,
            "phase": str(status.phase),
            "result": status.result,
            "reason": control.cut_text(status.reason, control.STATUS_TEXT_BYTES),
            "recovery": control.cut_text(status.recovery, control.STATUS_TEXT_BYTES),
            "recovering": status.recovering,
            "roles": roles,
            "hosts": hosts,
            "slurm": c.slurm_state(),  # None unless the run is on Slurm
            "remote_hosts": c.remote_hosts(),
            "agent_hosts": sorted(c.agent_hosts()),  # their roles are profiled through their agent
        }

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        action = request.get("action")
        if not isinstance(action, str):
            return {"ok": False, "error": 'bad request: a request is {"action": ..., "role": ...}'}
        if action == "status":
            return self._status()
        if action == "profile":
            return self._profile(request)
        role, signal_name = request.get("role"), request.get("signal")
        for name, value in (("role", role), ("signal", signal_name)):
            if isinstance(value, str) and len(value) > ROLE_ARG_CHARS:
                return {"ok": False, "error": f"bad request: {name} is {len(value)} characters; a name, e.g. worker:0"}
        c = self.controller
        if c.done:  # its thread has ended: a command would wait for nobody
            return {"ok": False, "error": "this launch controls the run no more (it is over, or was detached)"}
        try:
            command = from_request(request)
        except ValueError as exc:
            return {"ok": False, "error": str(exc)}
        future = c.command(command)
        return self._outcome(action, future)

    def _outcome(self, action: str, future: Future[str]) -> dict[str, Any]:
        """A command's outcome: done, refused, or (not taken in time) withdrawn and refused, so
        that nothing the client heard refused is done later."""
        try:
            return {"ok": True, "message": future.result(timeout=self.command_wait_s)}
        except TimeoutError:
            pass
        except Exception as exc:  # the controller's refusal goes back to the client as text
            return _refusal(exc)
        if self.controller.done and future.cancel():
            return {"ok": False, "error": f"the run ended before the controller took {action}"}
        late = f"the controller has not taken {action} for {self.command_wait_s:g} s (it is busy)"
        if action in ACT_AT_ONCE:
            return {
                "ok": True,
                "message": f"{late}; connections being made are given up, and every role is stopped when it is free",
            }
        if future.cancel():  # not taken yet: it never will be (Controller skips a cancelled command)
            return {"ok": False, "error": f"{late}; withdrawn, nothing was done: try again"}
        try:  # taken meanwhile: it is being done, its word comes soon
            return {"ok": True, "message": future.result(timeout=COMMAND_FINISH_S)}
        except TimeoutError:
            return {"ok": True, "message": f"{action}: under way (the controller took it late and is still at it)"}
        except Exception as exc:
            return _refusal(exc)

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


def _refusal(exc: BaseException) -> dict[str, Any]:
    message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return {"ok": False, "error": str(message)}


def _cut_texts(record: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``record`` with the text of ``keys`` cut to :data:`core.run.control.STATUS_TEXT_BYTES`."""
    cut = {k: control.cut_text(record[k], control.STATUS_TEXT_BYTES) for k in keys if isinstance(record.get(k), str)}
    return {**record, **cut}
