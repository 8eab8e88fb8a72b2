"""A transport to an agent that outlives the connection: local, or over SSH, with reconnects.

The agent runs in keep mode, detached, serving on an owner-only Unix socket in its host's run
directory (``agent.pyz --serve``). The transport reaches it through a relay process on stdio:

- locally: ``python agent.pyz --serve SOCK`` the first time, ``agent.pyz --attach SOCK`` after;
- remotely: ``ssh HOST python3 -c BOOTSTRAP RUNDIR --serve agent.sock`` with the agent's zipapp
  on stdin (nothing is installed), ``ssh HOST python3 -c ATTACH RUNDIR`` after.

When the connection drops, roles keep running on their host and keep writing their output to
its run directory. The transport publishes ``host_state`` events, reconnects with back-off, and
on every (re)connection tells the agent which byte offset of each role's output it has seen;
the agent sends the rest from the log files. Output already seen is dropped here, so the
controller gets every byte once, in order. Remote output is mirrored into the local run
directory (``roles/<job>-<i>/attempt-<n>.log``), appended as it arrives, so its size is what was
seen.

Events added to the agent's (``ev`` on the sink): ``host_state`` with ``state`` (``connecting``,
``connected``, ``disconnected``, ``reconnecting``, ``lost``), ``reason``, ``attempt`` and
``retry_in_s`` (when reconnecting).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from core.cluster.render import role_dir
from core.remote.endpoints import Endpoint
from core.remote.ssh import SshFailure, explain_failure
from core.remote.transport import EventSink, output_bytes, parse_event_line
from core.run import children
from core.run.children import kill_group
from core.run.journal import json_line
from core.run.rundir import host_file_name, read_parsed

HELLO_TIMEOUT_S = 30.0
BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 10.0
RECONNECT_GIVE_UP_S = 300.0  # then the host is lost (its roles may still run; `attach` later)
SEEN_SAVE_PERIOD_S = 1.0
MAX_PENDING_COMMANDS = 1024  # commands waiting for a reconnect; past it a command is refused
SHUTDOWN_GRACE_S = 5.0  # a role still running when the agent is told to shut down gets this, then SIGKILL
KEEPALIVE_S = 5.0  # a ping this often: the agent refuses another controller while it hears this one


class AgentLink:
    """One host's agent, reached through a relay process; see the module docstring."""

    def __init__(
        self,
        endpoint: Endpoint,
        sink: EventSink,
        local_run_dir: Path,
        log_path: Path,
        attach: bool = False,
        give_up_s: float = RECONNECT_GIVE_UP_S,
        gone: Callable[[], str | None] | None = None,
    ) -> None:
        self.host = endpoint.host
        # Asked (on the link's thread) before each reconnect: why the agent cannot come back (its
        # Slurm job ended, taking the step with it), or None to keep trying.
        self._gone = gone
        self.endpoint = endpoint
        self._sink = sink
        self._local_run_dir = local_run_dir
        self._log_path = log_path
        self._attach = attach
        self._give_up_s = give_up_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._connected = False
        self._lost = False
        self._closing = False
        self._bye = False
        self._attach_failed: str | None = None
        self._busy = False  # the agent refused us: another controller holds it
        self._pending: list[dict[str, Any]] = []
        self._hello = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.run_dir: str | None = None  # the run directory on the agent's host, from its hello
        self.seen: dict[str, tuple[int, int]] = {}  # role -> (attempt, byte offset seen)
        self._mirrored: dict[str, tuple[int, int]] = {}  # remote role -> (attempt, bytes mirrored here)
        self._seen_file = local_run_dir / "agents" / f"{host_file_name(self.host)}.seen.json"
        self._seen_saved_at = 0.0
        self._seen_dirty = False
        self._connected_count = 0
        self.lost_reason: str | None = None

    @property
    def is_local(self) -> bool:
        return not self.endpoint.remote

    @property
    def connected(self) -> bool:
        return self._connected

    # ------------------------------------------------------------------ Transport protocol

    def start(self) -> None:
        """Connect (starting the agent unless attaching); waits for its hello, at most 30 s.

        A failure is not raised: it arrives as ``host_state lost`` then ``agent_lost``.
        """
        self._seen_file.parent.mkdir(parents=True, exist_ok=True)
        self._load_seen()
        self._thread = threading.Thread(target=self._run, name=f"agent-link-{self.host}", daemon=True)
        self._thread.start()
        threading.Thread(target=self._keepalive, name=f"agent-keepalive-{self.host}", daemon=True).start()
        self._hello.wait(HELLO_TIMEOUT_S)

    def send(self, command: dict[str, Any]) -> bool:
        """Send a command; while reconnecting it waits in a bounded queue (RuntimeError, which the
        caller reports, when it is full). False once the host is lost."""
        with self._lock:
            if self._lost:
                return False
            if not self._connected:
                if len(self._pending) >= MAX_PENDING_COMMANDS:
                    raise RuntimeError(
                        f"{MAX_PENDING_COMMANDS} commands already wait for {self.host} to reconnect; "
                        f"{command.get('op')} {command.get('role') or ''} refused"
                    )
                self._pending.append(command)
                return True
            return self._write(command)

    def close(self, timeout_s: float = 10.0) -> None:
        """The run is over: ask the agent to end (its roles have ended), wait up to ``timeout_s`` for
        its bye (the relay ends after it), then up to ``timeout_s`` more for the relay."""
        self._end(shutdown=True, timeout_s=timeout_s)

    def detach(self, timeout_s: float = 10.0) -> None:
        """Leave: disconnect and let the agent and its roles run on (keep mode)."""
        self._end(shutdown=False, timeout_s=timeout_s)

    # ------------------------------------------------------------------ internals

    def _end(self, *, shutdown: bool, timeout_s: float) -> None:
        self._save_seen(force=True)
        with self._lock:
            self._closing = True
            connected = self._connected
            asked = shutdown and connected and self._write({"op": "shutdown", "grace_s": SHUTDOWN_GRACE_S})
            proc = self._proc
        self._stop.set()
        if proc is None:
            pass
        elif not connected:
            # Still connecting (an ssh that never answers): there is no agent to say goodbye to,
            # and its stdin may be held by the session thread, blocked writing the agent's
            # zipapp to an ssh that reads nothing yet; closing it would wait for that write, that
            # is for ssh to give up (seconds to minutes). End the relay's whole group now.
            kill_group(proc)
        else:
            if asked:
                # The agent's bye first: it hangs up after it, which ends the relay. Hanging up
                # at once, the agent might see its controller leave before it read the shutdown,
                # and a keep-mode agent left so keeps its roles' exits for a reattach (LINGER_S).
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout_s)
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        if proc is not None:
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                proc.wait()
        if self._thread is not None and self._thread.ident is not None:  # closed before it started: nothing to join
            self._thread.join(timeout_s)

    def _keepalive(self) -> None:
        while not self._stop.wait(KEEPALIVE_S):
            with self._lock:
                if self._connected:
                    self._write({"op": "ping", "id": "keepalive"})

    def _write(self, command: dict[str, Any]) -> bool:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return False
        try:
            proc.stdin.write(json_line(command).encode())
            proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def _state(self, state: str, reason: str = "", **extra: Any) -> None:
        self._sink(
            self.host, {"ev": "host_state", "t": round(time.time(), 3), "state": state, "reason": reason, **extra}
        )

    def _run(self) -> None:
        argv = self.endpoint.attach_argv if self._attach else self.endpoint.first_argv
        payload = b"" if self._attach else self.endpoint.payload
        self._state("connecting", " ".join(argv[:1]) + f" to {self.host}")
        reason = self._session(argv, payload)
        # The first connection either started the agent or it did not: from here on, attach.
        while not self._closing and not self._bye and self._attach_failed is None and self.run_dir is not None:
            self._state("disconnected", reason)
            reason = self._reconnect()
        self._hello.set()
        if self._closing or self._bye:
            return
        why = self._attach_failed or reason
        with self._lock:
            self._lost = True
            self.lost_reason = why
        self._state("lost", why)
        self._sink(self.host, {"ev": "agent_lost", "returncode": None, "reason": why, "busy": self._busy})

    def _reconnect(self) -> str:
        """Attach again with exponential back-off; returns why the last session ended."""
        deadline = time.monotonic() + self._give_up_s
        delay = BACKOFF_START_S
        attempt = 0
        reason = "connection dropped"
        while not self._closing and time.monotonic() < deadline:
            gone = self._gone() if self._gone is not None else None
            if gone:
                self.run_dir = None  # ends the outer loop: nothing to reconnect to
                return f"{reason}; not reconnecting: {gone}"
            attempt += 1
            self._state("reconnecting", reason, attempt=attempt, retry_in_s=round(delay, 2))
            if self._stop.wait(delay):
                return reason
            delay = min(delay * 2, BACKOFF_MAX_S)
            before = self._connected_count
            reason = self._session(self.endpoint.attach_argv, b"")
            if self._connected_count > before or self._attach_failed is not None or self._bye:
                return reason  # it was connected (and dropped again), or the agent is gone
        self.run_dir = None  # ends the outer loop: the host is lost
        return f"gave up reconnecting after {self._give_up_s:g} s: {reason}"

    def _session(self, argv: list[str], payload: bytes) -> str:
        """Run one relay process until its stdout ends; returns why it ended."""
        log: IO[bytes] = open(self._log_path, "ab")  # noqa: SIM115 - the child holds it
        start_offset = log.tell()
        try:
            if self.endpoint.remote:  # an ssh: it must not outlive this process (core/run/children.py)
                proc = children.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
            else:  # a local relay may be the agent itself, which keep mode leaves running
                proc = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, start_new_session=True
                )
        except OSError as exc:
            return f"cannot run {argv[0]}: {exc.strerror or exc}"
        finally:
            log.close()
        with self._lock:
            self._proc = proc
            closing = self._closing
        if closing:  # closed while this relay started: _end did not see it
            kill_group(proc)
        assert proc.stdin is not None and proc.stdout is not None
        if payload:
            with contextlib.suppress(OSError):
                proc.stdin.write(payload)
                proc.stdin.flush()
        for raw in proc.stdout:
            self._on_event(parse_event_line(raw))  # a non-event line arrives as an error event
        code = proc.wait()
        with self._lock:
            self._connected = False
        self._save_seen(force=True)
        stderr = _read_from(self._log_path, start_offset)
        if self.endpoint.config is not None and code == 255:  # ssh's own failure
            failure: SshFailure = explain_failure(self.endpoint.config, stderr, code)
            return str(failure)
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        return f"connection ended (code {code}{': ' + last if last else ''})"

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event["ev"]
        if kind == "hello":
            self.run_dir = str(event.get("run_dir") or "") or None
            self._on_hello(event)
            self._sink(self.host, event)
            return
        if kind == "attach_failed":
            if event.get("busy") and self._connected_count > 0:
                return  # our own last connection, not yet seen gone by the agent: try again
            self._attach_failed = str(event.get("message"))
            self._busy = bool(event.get("busy"))
            return
        if kind == "pong" and event.get("id") == "keepalive":
            return
        if kind == "bye":
            self._bye = True
        if kind == "output" and not self._accept_output(event):
            return
        if kind == "skipped":
            self._accept_skip(event)
        self._sink(self.host, event)

    def _on_hello(self, event: dict[str, Any]) -> None:
        """Tell the agent what was seen of each role it knows, then send what waited.

        The first connection of a reattach resumes each role where its output was parsed (the
        controller's ``parsed.json``): what a killed launcher had received but not yet parsed is
        sent again, and nothing it parsed is. A remote mirror goes on from its own size."""
        known: dict[str, Any] = {**(event.get("ended") or {}), **(event.get("roles") or {})}
        seen: dict[str, dict[str, int]] = {}
        first_of_attach = self._attach and self._connected_count == 0
        for name, info in known.items():
            attempt = int(info.get("attempt", 0))
            mine = self.seen.get(name)
            end = mine[1] if mine is not None and mine[0] == attempt else self._seen_on_disk(name, attempt)
            if first_of_attach:
                parsed = read_parsed(role_dir(self._local_run_dir, name))
                if parsed is not None and parsed[0] == attempt:
                    end = parsed[1]
            self.seen[name] = (attempt, end)
            start = min(end, self._mirror_end(name, attempt)) if self.endpoint.remote else end
            seen[name] = {"attempt": attempt, "end": start}
        with self._lock:
            self._connected = True
            self._connected_count += 1
            self._write({"op": "resume", "seen": seen})
            pending, self._pending = self._pending, []
            for command in pending:
                self._write(command)
        self._state("connected", f"agent pid {event.get('agent_pid')} on {event.get('host')}")
        self._hello.set()

    def _seen_on_disk(self, role: str, attempt: int) -> int:
        return self._mirror_end(role, attempt) if self.endpoint.remote else 0

    def _mirror_end(self, role: str, attempt: int) -> int:
        """How much of a remote role's log is mirrored here (the mirror's size)."""
        mirrored = self._mirrored.get(role)
        if mirrored is None or mirrored[0] != attempt:
            size = 0
            with contextlib.suppress(OSError):
                size = self._mirror_path(role, attempt).stat().st_size
            mirrored = self._mirrored[role] = (attempt, size)
        return mirrored[1]

    def _accept_output(self, event: dict[str, Any]) -> bool:
        """Drop output already seen; mirror remote output locally; track the offset.

        Offsets are bytes of the role's log (the original stream, whatever its encoding): the
        agent's ``data`` gives those bytes back exactly (see :func:`core.remote.transport.output_bytes`)."""
        role, attempt, data = event.get("role"), event.get("attempt"), str(event.get("data", ""))
        end = event.get("end")
        if not isinstance(role, str) or not isinstance(attempt, int) or not isinstance(end, int):
            return True
        seen = self.seen.get(role)
        seen_end = seen[1] if seen is not None and seen[0] == attempt else 0
        if seen is not None and seen[0] > attempt:
            return False
        raw = output_bytes(data)
        start = end - len(raw)
        if self.endpoint.remote:  # the mirror takes what it has not got, wherever it is seen
            self._mirror(role, attempt, raw, start=start, end=end)
        if end <= seen_end:
            return False  # already seen: a replay overlapping the live stream
        if start < seen_end:  # the chunk straddles what was seen: keep only the new part
            event["data"] = raw[seen_end - start :].decode("utf-8", "surrogateescape")
            event["offset"] = seen_end
        self.seen[role] = (attempt, end)
        self._seen_dirty = True
        self._save_seen()
        return True

    def _accept_skip(self, event: dict[str, Any]) -> None:
        """Output the agent did not send (a stopping local role far behind): seen all the same."""
        role, attempt, end = event.get("role"), event.get("attempt"), event.get("end")
        if isinstance(role, str) and isinstance(attempt, int) and isinstance(end, int):
            seen = self.seen.get(role)
            if seen is None or seen[0] < attempt or (seen[0] == attempt and seen[1] < end):
                self.seen[role] = (attempt, end)
                self._seen_dirty = True

    def _mirror(self, role: str, attempt: int, raw: bytes, *, start: int, end: int) -> None:
        mirrored = self._mirror_end(role, attempt)
        if end <= mirrored or start > mirrored:
            return  # had already, or a gap (never asked for): the mirror stays a prefix of the log
        path = self._mirror_path(role, attempt)
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as f:
                f.write(raw[mirrored - start :])
            self._mirrored[role] = (attempt, end)

    def _mirror_path(self, role: str, attempt: int) -> Path:
        return role_dir(self._local_run_dir, role) / f"attempt-{attempt}.log"

    def _load_seen(self) -> None:
        if self.endpoint.remote:
            return  # the local mirror of each log is exactly what was seen
        with contextlib.suppress(OSError, ValueError, TypeError):
            data = json.loads(self._seen_file.read_text(encoding="utf-8"))
            self.seen = {k: (int(v[0]), int(v[1])) for k, v in data.items()}

    def _save_seen(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not self._seen_dirty or (not force and now - self._seen_saved_at < SEEN_SAVE_PERIOD_S):
            return
        self._seen_saved_at = now
        self._seen_dirty = False
        with contextlib.suppress(OSError):
            tmp = self._seen_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.seen), encoding="utf-8")
            os.replace(tmp, self._seen_file)


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(64 * 1024).decode("utf-8", "replace")
    except OSError:
        return ""
