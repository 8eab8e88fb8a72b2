#!/usr/bin/env python3
"""TowerDeck host agent: starts, watches and stops the roles of one host.

This file runs on its own (``python3 agent.py``), with the standard library only, so it can be sent
to a remote host over SSH and run there without installing anything. It speaks JSON lines: commands
on stdin, events on stdout (the protocol is described in docs/agent-protocol.md).

Each role runs in its own session and process group. Its stdout and stderr go through a pipe to a
small forked log pump (its own session, so it survives the agent) that appends them to a log
file, so the output is on disk before anyone reads it, and a full disk costs log lines, never a
trainer crashing in print() (see :func:`pump_output`). The agent tails the file and streams what
it reads. The agent is a child subreaper (Linux), so processes a trainer
forked and left behind are reparented to it and can still be found, and every process started for
a role carries a token in its environment that identifies it even after ``setsid()``. A role is over
when its main process has exited and no process of its tree is left: stop escalates SIGTERM to
SIGKILL on the whole tree after a grace period.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import ctypes
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from typing import IO, Any

PROTOCOL = 1
TICK_S = 0.1
READ_BUDGET_BYTES = 1 << 20  # per role per tick, so one chatty role cannot starve the rest
CHUNK_BYTES = 64 * 1024
LEFTOVER_GRACE_S = 2.0
TOKEN_VAR = "TOWERDECK_ROLE_TOKEN"  # noqa: S105 - a variable name, not a secret
PR_SET_CHILD_SUBREAPER = 36
# The log pump (see pump_output): what it holds in memory while the disk refuses writes, how
# often it retries then, and how long a finished role may wait for a disk that stays full.
PUMP_BUFFER_BYTES = 8 << 20
PUMP_RETRY_S = 1.0
PUMP_EOF_RETRY_S = 5.0
PUMP_STUCK_S = 10.0  # the tree is gone but the pump still reads: something unseen holds the pipe
F_SETPIPE_SZ = 1031


def _now() -> float:
    return time.time()


def _text_end(role: Any) -> int:
    """Byte offset just after the last character sent for ``role`` (a split UTF-8 sequence waits
    in the decoder and is sent with the next chunk)."""
    pending: bytes = role.decoder.getstate()[0]
    return int(role.offset) - len(pending)


class Role:
    """One started attempt of a role, as the agent sees it."""

    def __init__(self, name: str, attempt: int, proc: subprocess.Popen[bytes], log_path: str, token: str) -> None:
        self.name = name
        self.attempt = attempt
        self.proc = proc
        self.pid = proc.pid
        self.sid = proc.pid  # start_new_session: the leader's pid is the session and group id
        self.log_path = log_path
        self.token = token
        # None while the log cannot be created (a full disk at start): tail() retries.
        self.reader: IO[bytes] | None = _open_log(log_path)
        self.log_missing = self.reader is None
        self.offset = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.leader_done = False
        self.returncode: int | None = None
        self.signal: int | None = None
        self.stopping = False
        self.kill_at: float | None = None  # when SIGTERM escalates to SIGKILL
        self.leftovers_signalled = False
        self.leftovers_killed = 0
        self.started_at = _now()
        # The log pump that writes this role's output (None: the role writes the file itself).
        self.pump_pid: int | None = None
        self.pump_done = True
        self.pump_status: int | None = None  # read end of the pump's status lines
        self.pump_status_buf = b""
        self.tree_gone_at: float | None = None

    def close(self) -> None:
        self.log_missing = False
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        if self.pump_status is not None:
            with contextlib.suppress(OSError):
                os.close(self.pump_status)
            self.pump_status = None


def _open_log(log_path: str) -> IO[bytes] | None:
    try:
        return open(log_path, "rb")  # the role's reader, closed in Role.close()
    except OSError:
        return None


def pump_output(in_fd: int, log_path: str, status_fd: int) -> None:
    """Copy a role's output from ``in_fd`` (a pipe) to the end of ``log_path`` until EOF.

    The role never writes the log itself, so a full disk cannot make its print() raise: writes
    that fail (ENOSPC, EIO, ...) leave the bytes in a buffer of PUMP_BUFFER_BYTES, retried every
    PUMP_RETRY_S; beyond it bytes are counted, and once writes succeed again a line in the log
    says how many were lost. The pipe is always drained, so the role never blocks on a full disk.
    Status lines (JSON) go to ``status_fd``: ``{"write_failed": MESSAGE}`` once per failure,
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


def _start_pump(log_path: str) -> tuple[int, int, int]:
    """Fork a log pump for one role: returns (pump pid, write end for the role, status read end).

    The pump is forked (not exec'd) so it needs no file on disk, whatever way the agent was
    started; it gets its own session so that signals to the agent or the role do not reach it,
    and it keeps only its two pipes, so it holds neither the agent's stdio nor another role's.
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
    return pid, out_w, status_r


MAX_FD = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024


def _read_stat(pid: int) -> tuple[int, int, int, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode()
    except (IndexError, ValueError):
        return None


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


class ProcTable:
    """A snapshot of /proc: pid -> (ppid, pgrp, session, state).

    ``previous`` lets a sampler reuse the rows of processes it has already seen and read only
    new ones (session and group do not change without setsid, and a sample may be a tick stale);
    stopping a role always takes a fresh table.
    """

    def __init__(self, previous: ProcTable | None = None) -> None:
        self.rows: dict[int, tuple[int, int, int, str]] = {}
        old = previous.rows if previous is not None else {}
        for pid in _pids():
            row = old.get(pid) or _read_stat(pid)
            if row is not None:
                self.rows[pid] = row

    def children(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for pid, row in self.rows.items():
            out.setdefault(row[0], []).append(pid)
        return out


def _has_token(pid: int, token: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{TOKEN_VAR}={token}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def role_tree(role: Role, table: ProcTable, scan_environ: bool) -> set[int]:
    """Live (non-zombie) processes that belong to ``role``: its session, their descendants, and
    processes carrying its token (``scan_environ``), which finds children that called setsid()."""
    me = os.getpid()
    members = {pid for pid, row in table.rows.items() if row[2] == role.sid or row[1] == role.sid}
    if not role.leader_done:
        members.add(role.pid)
    if scan_environ:
        members |= {pid for pid in table.rows if pid not in members and pid != me and _has_token(pid, role.token)}
    children = table.children()
    stack = list(members)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in members:
                members.add(child)
                stack.append(child)
    members.discard(me)
    return {pid for pid in members if pid in table.rows and table.rows[pid][3] != "Z"}


def _load_nvml() -> Any:
    """The NVML bindings: ``pynvml`` (nvidia-ml-py), or the module at $TOWERDECK_NVML_MODULE.

    The override exists so that machines without an NVIDIA GPU can test everything above the
    NVML calls with a double of that one layer.
    """
    override = os.environ.get("TOWERDECK_NVML_MODULE")
    if override:
        import importlib.util

        spec = importlib.util.spec_from_file_location("towerdeck_nvml", override)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {override}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    import pynvml  # type: ignore[import-not-found,unused-ignore]

    return pynvml


def _decode(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class GpuSampler:
    """Per-GPU figures from NVML. Initialised once; a failing query empties one field, not the sample."""

    def __init__(self, host: str) -> None:
        self.nvml: Any = None
        self.count = 0
        self.handles: list[Any] = []
        self.static: list[dict[str, Any]] = []
        try:
            self.nvml = _load_nvml()
        except Exception as exc:
            self.status = f"no NVIDIA GPU on {host} (NVML bindings not available: {exc})"
            return
        try:
            self.nvml.nvmlInit()
            self.count = int(self.nvml.nvmlDeviceGetCount())
            self.handles = [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.count)]
        except Exception as exc:
            self.nvml = None
            self.status = f"no NVIDIA GPU on {host} ({exc or type(exc).__name__})"
            return
        self.status = f"{self.count} NVIDIA GPU{'s' if self.count != 1 else ''} on {host}"
        for index, handle in enumerate(self.handles):
            pci = self._get(self.nvml.nvmlDeviceGetPciInfo, handle)
            self.static.append(
                {
                    "index": index,
                    "name": _decode(self._get(self.nvml.nvmlDeviceGetName, handle)),
                    "uuid": _decode(self._get(self.nvml.nvmlDeviceGetUUID, handle)),
                    "pci_bus_id": _decode(getattr(pci, "busId", None)) if pci is not None else None,
                    "memory_total_bytes": getattr(self._get(self.nvml.nvmlDeviceGetMemoryInfo, handle), "total", None),
                    "power_limit_w": _milli(self._get(self.nvml.nvmlDeviceGetEnforcedPowerLimit, handle)),
                }
            )

    @staticmethod
    def _get(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:
            return None

    def sample(self, pid_roles: dict[int, str]) -> list[dict[str, Any]]:
        if self.nvml is None:
            return []
        nvml = self.nvml
        gpus = []
        for handle, static in zip(self.handles, self.static, strict=True):
            util = self._get(nvml.nvmlDeviceGetUtilizationRates, handle)
            memory = self._get(nvml.nvmlDeviceGetMemoryInfo, handle)
            temp = self._get(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
            clock = self._get(nvml.nvmlDeviceGetClockInfo, handle, getattr(nvml, "NVML_CLOCK_SM", 1))
            procs = self._get(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
            processes = []
            for proc in procs:
                pid = getattr(proc, "pid", None)
                used = getattr(proc, "usedGpuMemory", None)
                processes.append(
                    {
                        "pid": pid,
                        "used_memory_bytes": used if isinstance(used, int) and used >= 0 else None,
                        "role": pid_roles.get(pid) if isinstance(pid, int) else None,
                    }
                )
            gpus.append(
                {
                    **static,
                    "utilization_gpu_percent": getattr(util, "gpu", None),
                    "utilization_memory_percent": getattr(util, "memory", None),
                    "memory_used_bytes": getattr(memory, "used", None),
                    "memory_total_bytes": getattr(memory, "total", static["memory_total_bytes"]),
                    "temperature_c": temp,
                    "power_w": _milli(self._get(nvml.nvmlDeviceGetPowerUsage, handle)),
                    "sm_clock_mhz": clock,
                    "processes": processes,
                }
            )
        return gpus


def _milli(value: Any) -> float | None:
    return round(value / 1000.0, 3) if isinstance(value, (int, float)) else None


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _meminfo() -> dict[str, int]:
    out = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    out[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return out


class HostSampler:
    """Host figures (psutil when importable, else /proc) and per-role figures (from /proc)."""

    def __init__(self) -> None:
        try:
            import psutil

            self.psutil: Any = psutil
            psutil.cpu_percent(None)
        except ImportError:
            self.psutil = None
        self.procs: dict[int, tuple[int, float]] = {}  # pid -> (CPU ticks, monotonic time)

    def host(self) -> dict[str, Any]:
        load = os.getloadavg()
        out: dict[str, Any] = {"load1": load[0], "load5": load[1], "load15": load[2], "cpu_count": os.cpu_count()}
        if self.psutil is not None:
            vm = self.psutil.virtual_memory()
            out.update(
                cpu_percent=self.psutil.cpu_percent(None),
                memory_used_bytes=vm.total - vm.available,
                memory_total_bytes=vm.total,
            )
        return out

    def role(self, pids: set[int]) -> dict[str, Any]:
        """CPU % (of one core), RSS and threads summed over ``pids``, from one read of
        /proc/PID/stat each (utime+stime, num_threads, rss); no psutil needed."""
        now = time.monotonic()
        cpu = 0.0
        rss = 0
        threads = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    data = f.read()
                fields = data[data.rfind(b")") + 2 :].split()
                ticks = int(fields[11]) + int(fields[12])
                threads += int(fields[17])
                rss += int(fields[21]) * PAGE_BYTES
            except (OSError, IndexError, ValueError):
                continue
            previous = self.procs.get(pid)
            self.procs[pid] = (ticks, now)
            if previous is not None and now > previous[1]:
                cpu += 100.0 * (ticks - previous[0]) / CLOCK_TICKS / (now - previous[1])
        return {"pids": len(pids), "cpu_percent": round(cpu, 1), "rss_bytes": rss, "threads": threads}

    def forget(self, alive: set[int]) -> None:
        for pid in list(self.procs):
            if pid not in alive:
                del self.procs[pid]


class Agent:
    def __init__(self, out: IO[str], on_disconnect: str = "stop", sample_period_s: float = 1.0) -> None:
        self.out = out
        self.on_disconnect = on_disconnect
        self.roles: dict[str, Role] = {}
        self.leaders: dict[int, Role] = {}
        self.connected = True
        self.shutting_down = False
        self.shutdown_grace_s = 5.0
        self.finished = False
        self.inbuf = b""
        self.subreaper = _become_subreaper()
        self.hostname = socket.gethostname()
        self.sample_period_s = _clamp_period(sample_period_s)
        self.next_sample = 0.0
        self.host_sampler = HostSampler()
        self.gpu_sampler: GpuSampler | None = None
        self.ended: dict[str, dict[str, Any]] = {}  # roles that exited since the last sample
        # Exits nobody heard (the controller was away), kept for ``resume``: fields, log, end.
        self.missed_exits: dict[str, dict[str, Any]] = {}
        self.awaiting_resume = False  # serve mode: a controller attached and has not said what it saw
        self.sample_table: ProcTable | None = None
        self.pumps: dict[int, Role] = {}  # log pump pid -> its role

    # ---------------------------------------------------------------- output

    def emit(self, event: str, **fields: Any) -> None:
        if not self.connected or (self.awaiting_resume and event == "output"):
            return  # output waits for ``resume``, which reads it again from the files
        fields = {"ev": event, "t": round(_now(), 3), **fields}
        try:
            self.out.write(json.dumps(fields, separators=(",", ":")) + "\n")
            self.out.flush()
        except (BrokenPipeError, OSError, ValueError):
            self.disconnect()

    def error(self, message: str, **fields: Any) -> None:
        self.emit("error", message=message, **fields)

    # ---------------------------------------------------------------- input

    def feed(self, data: bytes) -> None:
        self.inbuf += data
        if len(self.inbuf) > 16 << 20 and b"\n" not in self.inbuf:
            self.error("command line longer than 16 MiB without a newline; discarded")
            self.inbuf = b""
            return
        while b"\n" in self.inbuf:
            line, self.inbuf = self.inbuf.split(b"\n", 1)
            if line.strip():
                self.handle_line(line)

    def handle_line(self, line: bytes) -> None:
        try:
            command = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            self.error(f"not a JSON line: {exc}", line=line[:200].decode("utf-8", "replace"))
            return
        if not isinstance(command, dict) or not isinstance(command.get("op"), str):
            self.error('a command is a JSON object with a string "op"', line=line[:200].decode("utf-8", "replace"))
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
        name = command["role"]
        attempt = int(command.get("attempt", 1))
        argv = command["argv"]
        env = command.get("env", {})
        cwd = command.get("cwd") or None
        log_path = command["log"]
        if not isinstance(name, str) or not isinstance(log_path, str):
            raise TypeError("role and log must be strings")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise TypeError("argv must be a non-empty list of strings")
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise TypeError("env must map strings to strings")
        if name in self.roles:
            self.error(f"role {name} is already running", op="start", role=name)
            return
        if self.shutting_down:
            self.error("the agent is shutting down", op="start", role=name)
            return
        token = secrets.token_hex(8)
        full_env = dict(os.environ)
        full_env.update(env)
        full_env[TOKEN_VAR] = token
        pump: tuple[int, int, int] | None = None
        try:
            os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
            open(log_path, "ab").close()  # exists before the tail opens it
        except OSError:
            pass  # a full disk must not stop a restart: the pump retries, and reports it
        try:
            pump = _start_pump(log_path)
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=pump[1],
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            if pump is not None:
                os.close(pump[1])  # the pump sees EOF and exits; reap() collects it
                os.close(pump[2])
            message = f"cannot start {argv[0]!r}: {exc.strerror or exc}"
            try:
                with open(log_path, "ab") as log:
                    log.write(f"[towerdeck] {message}\n".encode())
            except OSError:
                pass
            self.emit("start_failed", role=name, attempt=attempt, error=message)
            return
        os.close(pump[1])  # only the role holds the write end: EOF when its whole tree is gone
        role = Role(name, attempt, proc, log_path, token)
        role.pump_pid, role.pump_done, role.pump_status = pump[0], False, pump[2]
        self.pumps[pump[0]] = role
        self.roles[name] = role
        self.leaders[proc.pid] = role
        self.emit("started", role=name, attempt=attempt, pid=proc.pid, log=log_path)

    def op_stop(self, command: dict[str, Any]) -> None:
        role = self._role(command)
        if role is not None:
            self.stop(role, float(command.get("grace_s", 5.0)))

    def op_kill(self, command: dict[str, Any]) -> None:
        role = self._role(command)
        if role is not None:
            role.stopping = True
            role.kill_at = _now()
            self.signal_tree(role, signal.SIGKILL)

    def op_signal(self, command: dict[str, Any]) -> None:
        role = self._role(command)
        if role is None:
            return
        name = str(command["signal"]).upper()
        number = getattr(signal, name if name.startswith("SIG") else "SIG" + name, None)
        if not isinstance(number, int):
            self.error(f"unknown signal {command['signal']!r}", op="signal", role=role.name)
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
            missed = self.missed_exits.get(name)
            if role is not None and role.attempt == attempt:
                self.replay(name, attempt, role.log_path, start, _text_end(role))
            elif missed is not None and missed["fields"]["attempt"] == attempt:
                self.replay(name, attempt, missed["log"], start, missed["end"])
        for missed in self.missed_exits.values():
            self.emit("exited", **missed["fields"])
        self.missed_exits = {}
        self.emit("resumed", roles=sorted(self.roles))

    def replay(self, name: str, attempt: int, log_path: str, start: int, stop: int) -> None:
        """Emit ``output`` for bytes [start, stop) of a log file, as the live tail would have."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            with open(log_path, "rb") as f:
                f.seek(start)
                position = start
                while position < stop:
                    data = f.read(min(CHUNK_BYTES, stop - position))
                    if not data:
                        break
                    chunk_start = position
                    position += len(data)
                    text = decoder.decode(data, final=position >= stop)
                    if text:
                        end = position - len(decoder.getstate()[0])
                        self.emit("output", role=name, attempt=attempt, offset=chunk_start, end=end, data=text)
        except OSError as exc:
            self.error(f"cannot read {log_path} again: {exc}", role=name)

    def report_exit(self, role: Role, fields: dict[str, Any]) -> None:
        if self.connected and not self.awaiting_resume:
            self.emit("exited", **fields)
        else:
            self.missed_exits[role.name] = {"fields": fields, "log": role.log_path, "end": role.offset}

    def inventory(self) -> dict[str, Any]:
        """What a controller attaching now needs to know: live roles and exits it has not heard."""
        live = {
            r.name: {"attempt": r.attempt, "pid": r.pid, "log": r.log_path, "end": _text_end(r)}
            for r in self.roles.values()
        }
        ended = {name: {**m["fields"], "log": m["log"], "end": m["end"]} for name, m in self.missed_exits.items()}
        return {"roles": live, "ended": ended}

    def op_configure(self, command: dict[str, Any]) -> None:
        if "sample_period_s" in command:
            period = float(command["sample_period_s"])
            if not MIN_PERIOD_S <= period <= MAX_PERIOD_S:
                raise ValueError(f"sample_period_s must be from {MIN_PERIOD_S} to {MAX_PERIOD_S}, not {period}")
            self.sample_period_s = period
            self.next_sample = 0.0
        self.emit("configured", sample_period_s=self.sample_period_s)

    def op_shutdown(self, command: dict[str, Any]) -> None:
        self.shutdown(float(command.get("grace_s", 5.0)))

    # ---------------------------------------------------------------- process control

    def stop(self, role: Role, grace_s: float) -> None:
        deadline = _now() + max(0.0, grace_s)
        if role.stopping and role.kill_at is not None and role.kill_at <= deadline:
            return
        role.stopping = True
        role.kill_at = deadline
        self.signal_tree(role, signal.SIGTERM)

    def signal_tree(self, role: Role, number: int) -> None:
        table = ProcTable()
        pids = role_tree(role, table, scan_environ=True)
        with contextlib.suppress(OSError):
            os.killpg(role.sid, number)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, number)

    def shutdown(self, grace_s: float) -> None:
        self.shutting_down = True
        self.shutdown_grace_s = grace_s
        for role in list(self.roles.values()):
            self.stop(role, grace_s)

    def disconnect(self) -> None:
        """The controller went away (stdin closed or stdout broken)."""
        if not self.connected:
            return
        self.connected = False
        if self.on_disconnect == "stop":
            self.shutdown(self.shutdown_grace_s)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            pumped = self.pumps.pop(pid, None)
            if pumped is not None:
                pumped.pump_done = True
                continue
            role = self.leaders.pop(pid, None)
            if role is None:
                continue  # a reparented orphan of some role: reaped, nothing to report
            code = os.waitstatus_to_exitcode(status)
            role.leader_done = True
            role.proc.returncode = code  # Popen must not try to wait for it again
            if code < 0:
                role.signal = -code
            else:
                role.returncode = code

    def tail(self, role: Role) -> bool:
        """Stream new output of ``role``; True when the file is read to its end."""
        if role.reader is None and role.log_missing:
            role.reader = _open_log(role.log_path)
            role.log_missing = role.reader is None
        if role.reader is None:
            return True
        budget = READ_BUDGET_BYTES
        while budget > 0:
            try:
                data = role.reader.read(min(CHUNK_BYTES, budget))
            except OSError as exc:
                self.error(f"cannot read {role.log_path}: {exc}", role=role.name)
                role.close()
                return True
            if not data:
                return True
            start = role.offset
            role.offset += len(data)
            budget -= len(data)
            text = role.decoder.decode(data)
            if text:
                self.emit("output", role=role.name, attempt=role.attempt, offset=start, end=_text_end(role), data=text)
        return False

    def tick(self) -> None:
        self.reap()
        now = _now()
        table: ProcTable | None = None
        for role in list(self.roles.values()):
            at_end = self.tail(role)
            self.read_pump_status(role)
            if not role.leader_done and not (role.stopping and role.kill_at is not None and now >= role.kill_at):
                continue
            table = table or ProcTable()
            tree = role_tree(role, table, scan_environ=True)
            if role.leader_done and not tree and not role.pump_done:
                # The pump still writes the last output (or waits for a full disk).
                role.tree_gone_at = role.tree_gone_at or now
                if now - role.tree_gone_at > PUMP_STUCK_S and role.pump_pid is not None:
                    with contextlib.suppress(OSError):
                        os.kill(role.pump_pid, signal.SIGKILL)
                continue
            if role.leader_done and not tree:
                if not at_end:
                    continue  # report the exit after the last output
                tail = role.decoder.decode(b"", final=True)
                if tail:
                    self.emit(
                        "output", role=role.name, attempt=role.attempt, offset=role.offset, end=role.offset, data=tail
                    )
                role.close()
                del self.roles[role.name]
                self.ended[role.name] = {
                    "alive": False,
                    "returncode": role.returncode,
                    "signal": role.signal,
                    "pids": 0,
                    "cpu_percent": 0.0,
                    "rss_bytes": 0,
                    "threads": 0,
                }
                self.report_exit(
                    role,
                    dict(
                        role=role.name,
                        attempt=role.attempt,
                        pid=role.pid,
                        returncode=role.returncode,
                        signal=role.signal,
                        leftovers_killed=role.leftovers_killed,
                        stopped=role.stopping,
                    ),
                )
                continue
            if role.leader_done and not role.leftovers_signalled and not role.stopping:
                # The main process is gone; what it left behind goes with it.
                role.leftovers_signalled = True
                role.leftovers_killed = len(tree)
                role.kill_at = now + LEFTOVER_GRACE_S
                self.signal_tree(role, signal.SIGTERM)
            elif role.kill_at is not None and now >= role.kill_at:
                self.signal_tree(role, signal.SIGKILL)
                role.kill_at = now + 1.0  # and again if something survives
        if now >= self.next_sample and self.connected:
            self.next_sample = now + self.sample_period_s
            self.sample(table)
        if self.shutting_down and not self.roles:
            self.emit("bye")
            self.finished = True

    def read_pump_status(self, role: Role) -> None:
        """Turn the log pump's status lines into ``log_write_failed`` / ``log_write_recovered``."""
        if role.pump_status is None:
            return
        try:
            data = os.read(role.pump_status, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            os.close(role.pump_status)
            role.pump_status = None
        role.pump_status_buf += data
        *lines, role.pump_status_buf = role.pump_status_buf.split(b"\n")
        for line in lines:
            try:
                status = json.loads(line)
            except ValueError:
                continue
            if not isinstance(status, dict):
                continue
            fields = {"role": role.name, "attempt": role.attempt, "log": role.log_path}
            if "write_failed" in status:
                self.emit("log_write_failed", error=str(status["write_failed"]), **fields)
            elif status.get("write_recovered") or status.get("gave_up"):
                self.emit(
                    "log_write_recovered",
                    lost_bytes=int(status.get("lost_bytes") or 0),
                    gave_up=bool(status.get("gave_up")),
                    **fields,
                )

    def sample(self, table: ProcTable | None = None) -> None:
        """Emit one ``sample`` event: host, every role's whole tree, every GPU."""
        if self.gpu_sampler is None:
            self.gpu_sampler = GpuSampler(self.hostname)
            self.emit("gpu_status", status=self.gpu_sampler.status, count=self.gpu_sampler.count)
        table = table or ProcTable(self.sample_table)
        self.sample_table = table
        roles: dict[str, dict[str, Any]] = {}
        pid_roles: dict[int, str] = {}
        alive: set[int] = set()
        for role in self.roles.values():
            pids = role_tree(role, table, scan_environ=False)
            alive |= pids
            pid_roles.update(dict.fromkeys(pids, role.name))
            roles[role.name] = {
                "alive": not role.leader_done,
                "pid": role.pid,
                "attempt": role.attempt,
                **self.host_sampler.role(pids),
            }
        roles.update(self.ended)
        self.ended = {}
        self.host_sampler.forget(alive)
        self.emit("sample", host=self.host_sampler.host(), roles=roles, gpus=self.gpu_sampler.sample(pid_roles))

    # ---------------------------------------------------------------- main loop

    def run(self, stdin_fd: int) -> None:
        self.emit(
            "hello",
            protocol=PROTOCOL,
            agent_pid=os.getpid(),
            host=socket.gethostname(),
            python=sys.version.split()[0],
            subreaper=self.subreaper,
        )
        stdin_open = True
        while not self.finished:
            if stdin_open:
                ready, _, _ = select.select([stdin_fd], [], [], TICK_S)
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


MIN_PERIOD_S = 0.2
MAX_PERIOD_S = 10.0


def _clamp_period(period: float) -> float:
    return min(MAX_PERIOD_S, max(MIN_PERIOD_S, period))


def _become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


# ---------------------------------------------------------------- serving on a socket (keep mode)
#
# With --serve the agent outlives its controller: it runs detached from the process that started
# it and listens on an owner-only Unix socket in its run directory. Whoever started it, and
# anyone who reattaches later (``agent.py --attach SOCK``, locally or over SSH), speaks the same
# JSON lines through that socket, relayed to stdin/stdout. The socket is bound by its base name
# from inside its directory, as sun_path holds only 108 bytes and run directories can be deep.

LINGER_S = 600.0  # an agent with no roles and no controller waits this long for a reattach


def _bind_owner_only(sock_path: str) -> socket.socket:
    directory, name = os.path.split(os.path.abspath(sock_path))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    here = os.getcwd()
    try:
        os.chdir(directory)
        if os.path.exists(name):
            # Connecting to find out would take the place of the agent's controller: its pid says.
            if _pid_alive(name + ".pid"):
                raise FileExistsError(f"an agent already serves {os.path.join(directory, name)}")
            os.unlink(name)  # left by an agent that was killed: nobody serves it
        listener.bind(name)
        os.chmod(name, 0o600)
    finally:
        os.chdir(here)
        os.umask(old_umask)
    listener.listen(2)
    return listener


def _pid_alive(pid_file: str) -> bool:
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"agent.py" in f.read()
    except (OSError, ValueError):
        return False


def _connect(sock_path: str) -> socket.socket:
    directory, name = os.path.split(os.path.abspath(sock_path))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    here = os.getcwd()
    try:
        os.chdir(directory)
        conn.connect(name)
    except OSError:
        conn.close()
        raise
    finally:
        os.chdir(here)
    return conn


def serve(agent: Agent, listener: socket.socket, linger_s: float = LINGER_S) -> None:
    """Run ``agent`` for one controller at a time on ``listener`` until it has nothing left to do."""
    client: socket.socket | None = None
    agent.connected = False
    idle_since = _now()
    while not agent.finished:
        fds: list[Any] = [listener] + ([client] if client is not None else [])
        ready, _, _ = select.select(fds, [], [], TICK_S)
        if listener in ready:
            new, _ = listener.accept()
            if client is not None:  # a newer controller wins; the old connection is stale
                _hang_up(client)
            client = new
            agent.out = client.makefile("w", encoding="utf-8", newline="\n")
            agent.connected = True
            agent.awaiting_resume = True
            agent.emit(
                "hello",
                protocol=PROTOCOL,
                agent_pid=os.getpid(),
                host=socket.gethostname(),
                python=sys.version.split()[0],
                subreaper=agent.subreaper,
                serving=True,
                run_dir=os.getcwd(),
                **agent.inventory(),
            )
        elif client is not None and client in ready:
            try:
                data = client.recv(1 << 16)
            except OSError:
                data = b""
            if data:
                agent.feed(data)
            else:
                agent.disconnect()
        if client is not None and not agent.connected:
            _hang_up(client)
            client = None
        agent.tick()
        if agent.connected or agent.roles:
            idle_since = _now()
        elif agent.shutting_down or not agent.missed_exits or _now() - idle_since > linger_s:
            agent.finished = True
    if client is not None:
        _hang_up(client)
    listener.close()


def _hang_up(conn: socket.socket) -> None:
    """Close for real: the agent's output file still holds the socket, so close() alone would
    leave the relay waiting for an end that never comes."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)
    conn.close()


def relay(sock_path: str) -> int:
    """Copy stdin to the agent's socket and the socket to stdout, until either side ends."""
    try:
        conn = _connect(sock_path)
    except OSError as exc:
        line = {"ev": "attach_failed", "t": round(_now(), 3), "message": f"no agent at {sock_path}: {exc}"}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        return 3
    stdin_fd, stdout_fd = sys.stdin.fileno(), sys.stdout.fileno()
    stdin_open = True
    while True:
        fds = [conn] + ([stdin_fd] if stdin_open else [])
        ready, _, _ = select.select(fds, [], [])
        if conn in ready:
            data = conn.recv(1 << 16)
            if not data:
                return 0
            try:
                while data:
                    data = data[os.write(stdout_fd, data) :]
            except OSError:
                return 0
        if stdin_open and stdin_fd in ready:
            data = os.read(stdin_fd, 1 << 16)
            if data:
                conn.sendall(data)
            else:
                stdin_open = False
                conn.shutdown(socket.SHUT_WR)


def start_detached(args: argparse.Namespace) -> int:
    """Start the serving agent as a daemon (its own session, parent init), then relay to it."""
    try:
        listener = _bind_owner_only(args.serve)  # bound before forking: a relay can connect at once
    except OSError as exc:
        line = {"ev": "attach_failed", "t": round(_now(), 3), "message": f"cannot serve on {args.serve}: {exc}"}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        return 3
    log_path = os.path.abspath(args.log) if args.log else None
    if os.fork() == 0:
        os.setsid()
        os.chdir(os.path.dirname(os.path.abspath(args.serve)))  # the run dir: hello reports it
        if os.fork() != 0:
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        if log_path:
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(log, 2)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        agent = Agent(sys.stdout, args.on_disconnect, args.sample_period)
        signal.signal(signal.SIGTERM, lambda signum, frame: agent.shutdown(agent.shutdown_grace_s))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        name = os.path.basename(args.serve)
        with open(name + ".pid", "w") as pid_file:
            pid_file.write(f"{os.getpid()}\n")
        try:
            serve(agent, listener, args.linger)
        finally:
            for path in (name, name + ".pid"):
                with contextlib.suppress(OSError):
                    os.unlink(path)
        os._exit(0)
    listener.close()
    os.wait()  # the first child exits at once; the daemon is init's
    return relay(args.serve)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="TowerDeck host agent (JSON lines on stdin/stdout)")
    parser.add_argument(
        "--on-disconnect",
        choices=("stop", "keep"),
        default="stop",
        help="what to do with the roles when the controller goes away",
    )
    parser.add_argument(
        "--sample-period", type=float, default=1.0, help=f"seconds between samples ({MIN_PERIOD_S} to {MAX_PERIOD_S})"
    )
    parser.add_argument("--serve", metavar="SOCK", help="run detached, serving on this Unix socket, and relay to it")
    parser.add_argument("--attach", metavar="SOCK", help="relay stdin/stdout to the agent serving on this socket")
    parser.add_argument("--log", metavar="FILE", help="with --serve: where the detached agent writes its stderr")
    parser.add_argument("--linger", type=float, default=LINGER_S, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.attach:
        return relay(args.attach)
    if args.serve:
        return start_detached(args)
    agent = Agent(sys.stdout, args.on_disconnect, args.sample_period)

    def on_term(signum: int, frame: object) -> None:
        agent.shutdown(agent.shutdown_grace_s)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    agent.run(sys.stdin.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
