"""The agent proper: obeys commands, supervises the roles of this host, streams their output.

Each role runs in its own session; its output goes through a log pump (:mod:`.pump`) to its log
file, which the agent tails and streams. A role is over when its main process has exited and no
process of its tree is left: stop escalates SIGTERM to SIGKILL on the whole tree after a grace
period, and what a finished role left behind is stopped the same way.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import secrets
import select
import signal
import socket
import time
from typing import IO, Any

from . import watch
from .processes import (
    TOKEN_VAR,
    ProcTable,
    Role,
    become_subreaper,
    signal_number,
    signal_tree,
    spawn,
)
from .profile import Traces, parse_profile, read_chunk, role_python, start_trace
from .protocol import (
    MAX_PERIOD_S,
    MIN_PERIOD_S,
    CommandError,
    LineBuffer,
    StartRequest,
    clamp_period,
    encode_event,
    hello_fields,
    now,
    parse_command,
    parse_start,
)
from .pump import Pump, start_pump
from .sampling import GpuSource, HostSampler
from .scalars import ScalarFeed
from .simulate import SIMULATE_VAR, Simulator
from .simulate import enabled as simulating

TICK_S = 0.1
CHUNK_BYTES = 64 * 1024


class Agent:
    """One host's agent; ``out`` receives the events (stdout, or the serve socket)."""

    def __init__(self, out: IO[str], on_disconnect: str = "stop", sample_period_s: float = 1.0) -> None:
        self.out = out
        self.on_disconnect = on_disconnect
        self.roles: dict[str, Role] = {}
        self.leaders: dict[int, Role] = {}
        self.connected = True
        self.shutting_down = False
        self.shutdown_grace_s = 5.0
        self.finished = False
        self.lines = LineBuffer()
        self.subreaper = become_subreaper()
        self.hostname = socket.gethostname()
        self.sample_period_s = clamp_period(sample_period_s)
        self.sampling = True  # ``configure`` turns the samples off and on (the GPU proof's A/B)
        self.next_sample = 0.0
        self.host_sampler = HostSampler()
        self.gpu_sampler: GpuSource | None = None
        self.scalars = ScalarFeed()
        self.ended: dict[str, dict[str, Any]] = {}  # roles that exited since the last sample
        # Every role's last exit (fields, log, end), kept for ``resume``: a controller that lagged
        # and was killed may not have handled one it was sent.
        self.exits: dict[str, dict[str, Any]] = {}
        self.awaiting_resume = False  # serve mode: a controller attached and has not said what it saw
        self.sample_table: ProcTable | None = None  # rows reused by the next sample
        self.pumps: dict[int, Role] = {}  # log pump pid -> its role
        self.behind = False  # some role's output is not all sent yet: the next tick comes at once
        self.traces = Traces()  # ``profile``: tracers running (core/agent/profile.py)
        # TOWERDECK_SIMULATE: roles are simulated, not forked (a harness for tests and benchmarks).
        self.simulator = Simulator(self.hostname) if simulating() else None

    # ---------------------------------------------------------------- output

    def hello(self, **serving: Any) -> None:
        """The first event of every connection (serve mode adds what an attaching controller needs)."""
        self.emit("hello", **hello_fields(subreaper=self.subreaper, tensorboard=self.scalars.available), **serving)

    def emit(self, event: str, **fields: Any) -> bool:
        """Write one event; False when it was not written (no controller, or output before ``resume``)."""
        if not self.connected or (self.awaiting_resume and event == "output"):
            return False  # output waits for ``resume``, which reads it again from the files
        try:
            self.out.write(encode_event(event, **fields))
            self.out.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            self.disconnect()
            return False

    def error(self, message: str, **fields: Any) -> None:
        self.emit("error", message=message, **fields)

    # ---------------------------------------------------------------- input

    def feed(self, data: bytes) -> None:
        """Take bytes from the controller and obey every complete command line in them."""
        lines, overflowed = self.lines.feed(data)
        if overflowed:
            self.error("command line longer than 16 MiB without a newline; discarded")
        for line in lines:
            self.handle_line(line)

    def handle_line(self, line: bytes) -> None:
        try:
            command = parse_command(line)
        except CommandError as exc:
            self.error(str(exc), line=line[:200].decode("utf-8", "replace"))
            return
        op = command["op"]
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            self.error(f"unknown op {op!r}", op=op)
            return
        try:
            handler(command)
        except (KeyError, TypeError, ValueError) as exc:
            self.error(f"bad {op} command: {exc}", op=op, role=command.get("role"))

    def _role(self, command: dict[str, Any]) -> Role | None:
        name = command.get("role")
        role = self.roles.get(name) if isinstance(name, str) else None
        if role is None:
            self.error(f"no running role {name!r}", op=command["op"], role=name)
        return role

    def op_ping(self, command: dict[str, Any]) -> None:
        self.emit("pong", id=command.get("id"))

    def op_start(self, command: dict[str, Any]) -> None:
        request = parse_start(command)
        name, attempt, log_path = request.role, request.attempt, request.log
        if name in self.roles:
            self.error(f"role {name} is already running", op="start", role=name)
            return
        if self.shutting_down:
            self.error("the agent is shutting down", op="start", role=name)
            return
        self.exits.pop(name, None)
        token = secrets.token_hex(8)
        full_env = {**os.environ, **request.env, TOKEN_VAR: token}
        pump: Pump | None = None
        try:
            os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
            open(log_path, "ab").close()  # exists before the tail opens it
        except (OSError, ValueError):
            pass  # a full disk must not stop a restart: the pump retries, and reports it
        if self.simulator is not None:
            self.start_simulated(request, token)
            return
        try:
            pump = start_pump(log_path)
            proc = spawn(request.argv, cwd=request.cwd, env=full_env, stdout_fd=pump.role_fd)
        except (OSError, ValueError) as exc:  # ValueError: a NUL in argv, env or cwd (exec cannot take it)
            if pump is not None:
                os.close(pump.role_fd)  # the pump sees EOF and exits; reap() collects it
                os.close(pump.status_fd)
            message = f"cannot start {request.argv[0]!r}: {getattr(exc, 'strerror', None) or exc}"
            with contextlib.suppress(OSError, ValueError), open(log_path, "ab") as log:
                log.write(f"[towerdeck] {message}\n".encode())
            self.emit("start_failed", role=name, attempt=attempt, error=message)
            return
        os.close(pump.role_fd)  # only the role holds the write end: EOF when its whole tree is gone
        role = Role(name, attempt, proc, log_path, token)
        _keep_request(role, request)
        role.pump_pid, role.pump_done, role.pump_status = pump.pid, False, pump.status_fd
        self.pumps[pump.pid] = role
        self.roles[name] = role
        self.leaders[proc.pid] = role
        self.emit("started", role=name, attempt=attempt, pid=proc.pid, log=log_path)
        if request.tb_dir is not None:
            problem = self.scalars.follow(name, attempt, tb_dir=request.tb_dir, cwd=request.cwd)
            if problem is not None:
                self.error(problem, op="start", role=name)

    def start_simulated(self, request: StartRequest, token: str) -> None:
        """``start`` in a simulating agent: a :class:`~.simulate.SimRole`, no process."""
        try:
            role = self.simulator.start(request, token) if self.simulator is not None else None
        except ValueError as exc:
            message = f"cannot simulate {request.role}: {exc}"
            with contextlib.suppress(OSError, ValueError), open(request.log, "ab") as log:
                log.write(f"[towerdeck] {message}\n".encode())
            self.emit("start_failed", role=request.role, attempt=request.attempt, error=message)
            return
        assert role is not None
        _keep_request(role, request)
        self.roles[role.name] = role
        self.emit("started", role=role.name, attempt=role.attempt, pid=role.pid, log=role.log_path)

    def op_stop(self, command: dict[str, Any]) -> None:
        role = self._role(command)
        if role is not None:
            self.stop(role, float(command.get("grace_s", 5.0)))

    def op_kill(self, command: dict[str, Any]) -> None:
        role = self._role(command)
        if role is not None:
            role.stopping = True
            role.kill_at = now()
            signal_tree(role, signal.SIGKILL)

    def op_signal(self, command: dict[str, Any]) -> None:
        role = self._role(command)
        if role is None:
            return
        number = signal_number(str(command["signal"]))
        if number is None:
            self.error(f"unknown signal {command['signal']!r}", op="signal", role=role.name)
            return
        if role.sim is not None:
            role.sim.signal(number)
            return
        try:
            os.killpg(role.sid, number)
        except OSError as exc:
            self.error(f"cannot signal {role.name}: {exc}", op="signal", role=role.name)

    def op_resume(self, command: dict[str, Any]) -> None:
        """A controller (re)attached: send what it missed, from the byte offsets it has seen.

        ``seen`` maps role -> {attempt, end}; output of that attempt from ``end`` on is read again
        from the log file (the file, not memory, so nothing is lost however long the gap was),
        then the exits it missed. Answers ``resumed``.
        """
        seen = command.get("seen") or {}
        if not isinstance(seen, dict):
            raise TypeError("seen must map roles to {attempt, end}")
        self.awaiting_resume = False
        for name, info in seen.items():
            attempt, start = int(info["attempt"]), int(info["end"])
            role = self.roles.get(name)
            ended = self.exits.get(name)
            if role is not None and role.attempt == attempt:
                self.replay(name, attempt, role.log_path, start=start, stop=role.text_end())
            elif ended is not None and ended["fields"]["attempt"] == attempt:
                self.replay(name, attempt, ended["log"], start=start, stop=ended["end"])
        for ended in self.exits.values():  # every one: the controller ignores those it handled
            self.emit("exited", **ended["fields"])
        self.emit("resumed", roles=sorted(self.roles))

    def replay(self, name: str, attempt: int, log_path: str, *, start: int, stop: int) -> None:
        """Emit ``output`` for bytes [start, stop) of a log file, as the live tail would have."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")  # as the live tail
        try:
            with open(log_path, "rb") as f:
                f.seek(start)
                position = chunk_start = start
                while position < stop:
                    data = f.read(min(CHUNK_BYTES, stop - position))
                    if not data:
                        break
                    position += len(data)
                    text = decoder.decode(data, final=position >= stop)
                    if text:
                        end = position - len(decoder.getstate()[0])
                        self.emit("output", role=name, attempt=attempt, offset=chunk_start, end=end, data=text)
                        chunk_start = end
        except OSError as exc:
            self.error(f"cannot read {log_path} again: {exc}", role=name)

    def report_exit(self, role: Role, fields: dict[str, Any]) -> None:
        self.exits[role.name] = {"fields": fields, "log": role.log_path, "end": role.offset}
        if self.connected and not self.awaiting_resume:
            self.emit("exited", **fields)

    def inventory(self) -> dict[str, Any]:
        """What a controller attaching now needs to know: live roles and every role's last exit."""
        live = {
            r.name: {"attempt": r.attempt, "pid": r.pid, "log": r.log_path, "end": r.text_end()}
            for r in self.roles.values()
        }
        ended = {name: {**m["fields"], "log": m["log"], "end": m["end"]} for name, m in self.exits.items()}
        return {"roles": live, "ended": ended}

    def op_configure(self, command: dict[str, Any]) -> None:
        if "sample_period_s" in command:
            period = float(command["sample_period_s"])
            if not MIN_PERIOD_S <= period <= MAX_PERIOD_S:
                raise ValueError(f"sample_period_s must be from {MIN_PERIOD_S} to {MAX_PERIOD_S}, not {period}")
            self.sample_period_s = period
            self.next_sample = 0.0
        if "sampling" in command:
            if not isinstance(command["sampling"], bool):
                raise TypeError("sampling must be true or false")
            self.sampling = command["sampling"]
            self.next_sample = 0.0
        self.emit("configured", sample_period_s=self.sample_period_s, sampling=self.sampling)

    def op_profile(self, command: dict[str, Any]) -> None:
        """Trace a running role with its own python's TensorFlow; ``profiled`` says how it went."""
        request = parse_profile(command)
        role = self._role(command)
        if role is None:
            return
        if role.sim is not None:  # no process, so no TensorFlow server to trace: say so at once
            reply = {
                "ok": False,
                "error": f"{role.name} is simulated ({SIMULATE_VAR}): there is no TensorFlow to trace",
            }
            self.emit(
                "profiled",
                id=request.id,
                role=role.name,
                ok=False,
                returncode=None,
                reply=reply,
                stderr="",
                files=[],
                elapsed_s=0.0,
            )
            return
        python = role_python(role.start_argv0)
        try:
            trace = start_trace(request, python=python, env={**os.environ, **role.start_env}, cwd=role.start_cwd)
        except OSError as exc:
            self.emit(
                "profiled",
                id=request.id,
                role=role.name,
                ok=False,
                returncode=None,
                reply={"ok": False, "error": f"cannot run {python} on {self.hostname}: {exc.strerror or exc}"},
                stderr="",
                files=[],
                elapsed_s=0.0,
            )
            return
        self.traces.running[trace.proc.pid] = trace

    def op_read_file(self, command: dict[str, Any]) -> None:
        """A chunk of a file under ``profiles/``, base64 (``file_chunk``)."""
        self.emit("file_chunk", **read_chunk(command))

    def op_shutdown(self, command: dict[str, Any]) -> None:
        self.shutdown(float(command.get("grace_s", 5.0)))

    # ---------------------------------------------------------------- process control

    def stop(self, role: Role, grace_s: float) -> None:
        deadline = now() + max(0.0, grace_s)
        if role.stopping and role.kill_at is not None and role.kill_at <= deadline:
            return
        role.stopping = True
        role.kill_at = deadline
        signal_tree(role, signal.SIGTERM)

    def shutdown(self, grace_s: float) -> None:
        self.shutting_down = True
        self.shutdown_grace_s = grace_s
        self.traces.stop_all()
        for role in list(self.roles.values()):
            self.stop(role, grace_s)

    def disconnect(self) -> None:
        """The controller went away (stdin closed or stdout broken)."""
        if not self.connected:
            return
        self.connected = False
        if self.on_disconnect == "stop":
            self.shutdown(self.shutdown_grace_s)

    # ---------------------------------------------------------------- main loop

    def tick(self) -> None:
        """One round of supervision: exits, output, pump status, stops due, samples, scalars."""
        if self.simulator is not None:
            self.simulator.tick()  # the simulated roles' lines are on disk before the tail reads them
        watch.tick(self)
        for outcome in self.traces.poll():
            self.emit("profiled", **outcome)

    def run(self, stdin_fd: int) -> None:
        """Serve one controller on ``stdin_fd`` and ``self.out`` until there is nothing left to do."""
        self.hello()
        stdin_open = True
        while not self.finished:
            if stdin_open:
                ready, _, _ = select.select([stdin_fd], [], [], 0 if self.behind else TICK_S)
                if ready:
                    data = os.read(stdin_fd, 1 << 16)
                    if data:
                        self.feed(data)
                    else:
                        stdin_open = False
                        self.disconnect()
            else:
                time.sleep(TICK_S)
            self.tick()
            if not self.connected and not self.roles:
                self.finished = True


def _keep_request(role: Role, request: StartRequest) -> None:
    """What a started role keeps of its ``start``: how it was started (``profile`` runs its tracer
    the same way), whether its backlog may be skipped, and its output period."""
    role.start_argv0, role.start_env, role.start_cwd = request.argv[0], request.env, request.cwd
    role.skip_backlog = request.skip_backlog
    role.output_period_s = request.output_period_s
