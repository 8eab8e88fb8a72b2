"""A role's processes: starting it in its own session, finding its whole tree, signalling it.

A role is the processes in its session or process group, their descendants, and any process
whose environment carries the role's token (which finds children that called ``setsid()``).
The agent is a child subreaper (Linux), so what a trainer forked and left behind is reparented to
it and can still be found and reaped.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import os
import signal
import subprocess
from typing import IO, NamedTuple, Protocol

from .protocol import OUTPUT_PERIOD_S

TOKEN_VAR = "TOWERDECK_ROLE_TOKEN"  # noqa: S105 - a variable name, not a secret
PR_SET_CHILD_SUBREAPER = 36
LEFTOVER_GRACE_S = 2.0
MAX_FD = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024


class ProcStat(NamedTuple):
    """The fields of /proc/PID/stat the agent uses (one read gives them all)."""

    ppid: int
    pgrp: int
    session: int
    state: str
    cpu_ticks: int  # utime + stime
    threads: int
    rss_pages: int


def parse_stat(data: bytes) -> ProcStat | None:
    """Parse one /proc/PID/stat; the command name may hold spaces and parentheses, so fields
    are counted from the last ``)``."""
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return ProcStat(
            int(fields[1]),
            int(fields[2]),
            int(fields[3]),
            fields[0].decode(),
            int(fields[11]) + int(fields[12]),
            int(fields[17]),
            int(fields[21]),
        )
    except (IndexError, ValueError):
        return None


def read_stat(pid: int) -> ProcStat | None:
    """/proc/PID/stat of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return parse_stat(f.read())
    except OSError:
        return None


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


class ProcTable:
    """A snapshot of /proc: pid -> :class:`ProcStat`.

    ``previous`` lets a sampler reuse the rows of processes it has already seen and read only
    new ones (session and group do not change without setsid, and a sample may be a tick stale);
    stopping a role always takes a fresh table.
    """

    def __init__(self, previous: ProcTable | None = None) -> None:
        self.rows: dict[int, ProcStat] = {}
        old = previous.rows if previous is not None else {}
        for pid in _pids():
            row = old.get(pid) or read_stat(pid)
            if row is not None:
                self.rows[pid] = row

    def children(self) -> dict[int, list[int]]:
        """ppid -> its children's pids."""
        out: dict[int, list[int]] = {}
        for pid, row in self.rows.items():
            out.setdefault(row.ppid, []).append(pid)
        return out


def _open_log(log_path: str) -> IO[bytes] | None:
    try:
        return open(log_path, "rb")  # the role's reader, closed in Role.close()
    except OSError:
        return None


class RoleProcess(Protocol):
    """A role's main process as a Role keeps it: a ``Popen``, or a simulated one (:mod:`.simulate`)."""

    pid: int
    returncode: int | None


class Simulated(Protocol):
    """A simulated role's stand-in (:class:`.simulate.SimRole`): signals go to it, not to a pid."""

    def signal(self, number: int) -> None: ...


class Role:
    """One started attempt of a role, as the agent sees it."""

    def __init__(self, name: str, attempt: int, proc: RoleProcess, log_path: str, token: str) -> None:
        self.name = name
        self.attempt = attempt
        self.proc = proc
        self.pid = proc.pid
        self.sid = proc.pid  # start_new_session: the leader's pid is the session and group id
        self.log_path = log_path
        self.token = token
        # How it was started (set by the agent's start): ``profile`` runs its tracer the same way.
        self.start_argv0 = ""
        self.start_env: dict[str, str] = {}
        self.start_cwd: str | None = None
        # None while the log cannot be created (a full disk at start): the tail retries.
        self.reader: IO[bytes] | None = _open_log(log_path)
        self.log_missing = self.reader is None
        self.offset = 0
        # surrogateescape: a byte that is not UTF-8 travels as one lone surrogate (JSON ``\udcXX``),
        # so whoever reads ``output`` gets the original bytes back and counts them exactly.
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self.leader_done = False
        self.returncode: int | None = None
        self.signal: int | None = None
        self.stopping = False
        self.kill_at: float | None = None  # when SIGTERM escalates to SIGKILL
        self.leftovers_signalled = False
        self.leftovers_killed = 0
        # The log pump that writes this role's output (None: the role writes the file itself).
        self.pump_pid: int | None = None
        self.pump_done = True
        self.pump_status: int | None = None  # read end of the pump's status lines
        self.pump_status_buf = b""
        self.tree_gone_at: float | None = None
        self.tree_checked_at = 0.0  # see watch.tick
        self.skip_backlog = False  # once stopping, output far behind may be skipped (watch.tail)
        self.next_read_at = 0.0  # when its log is read again, once read to its end (watch.tail)
        self.output_period_s = OUTPUT_PERIOD_S  # how long after that (the start's output_period_s)
        # Set when the agent simulates the role: no process of it exists, so none is looked for.
        self.sim: Simulated | None = None

    def reopen_log(self) -> None:
        """Try again to open a log that could not be opened yet."""
        if self.reader is None and self.log_missing:
            self.reader = _open_log(self.log_path)
            self.log_missing = self.reader is None

    def text_end(self) -> int:
        """Byte offset just after the last character sent (a split UTF-8 sequence waits in the
        decoder and is sent with the next chunk)."""
        pending: bytes = self.decoder.getstate()[0]
        return self.offset - len(pending)

    def close(self) -> None:
        """Close the log reader and the pump's status pipe."""
        self.log_missing = False
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        if self.pump_status is not None:
            with contextlib.suppress(OSError):
                os.close(self.pump_status)
            self.pump_status = None


def has_token(pid: int, token: str) -> bool:
    """Whether the environment of ``pid`` carries the role token ``token``."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{TOKEN_VAR}={token}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def role_tree(role: Role, table: ProcTable, *, scan_environ: bool) -> set[int]:
    """Live (non-zombie) processes that belong to ``role``: its session, their descendants, and
    processes carrying its token (``scan_environ``), which finds children that called setsid()."""
    if role.sim is not None:
        return set()  # simulated: its synthetic pid is no process's
    me = os.getpid()
    members = {pid for pid, row in table.rows.items() if row.session == role.sid or row.pgrp == role.sid}
    if not role.leader_done:
        members.add(role.pid)
    if scan_environ:
        members |= {pid for pid in table.rows if pid not in members and pid != me and has_token(pid, role.token)}
    children = table.children()
    stack = list(members)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in members:
                members.add(child)
                stack.append(child)
    members.discard(me)
    return {pid for pid in members if pid in table.rows and table.rows[pid].state != "Z"}


def signal_tree(role: Role, number: int) -> None:
    """Send ``number`` to the role's process group and to every process of its tree (fresh table)."""
    if role.sim is not None:
        role.sim.signal(number)
        return
    pids = role_tree(role, ProcTable(), scan_environ=True)
    with contextlib.suppress(OSError):
        os.killpg(role.sid, number)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, number)


def spawn(argv: list[str], *, cwd: str | None, env: dict[str, str], stdout_fd: int) -> subprocess.Popen[bytes]:
    """Start a role's main process in its own session, output to ``stdout_fd`` (the pump's pipe)."""
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=stdout_fd,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        close_fds=True,
    )


def become_subreaper() -> bool:
    """Make orphans of our descendants ours (Linux ``PR_SET_CHILD_SUBREAPER``); False elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


SIGNAL_HINT = "name one, e.g. INT, TERM, HUP, USR1, STOP or CONT"


def signal_number(name: str) -> int | None:
    """``STOP``, ``SIGCONT``, ``term`` ... as a signal number; None for anything else (``0``,
    ``-9``, ``NOPE``, and ``SIG_IGN``, which the signal module holds but is no signal)."""
    name = name.strip().upper()
    try:
        return int(signal.Signals[name if name.startswith("SIG") else "SIG" + name])
    except KeyError:
        return None


def _ignored(signum: int, frame: object) -> None:
    """The agent's handler for signals it ignores (see :func:`ignore_here`)."""


def ignore_here(*signums: int) -> None:
    """Ignore ``signums`` in the agent but not in the roles it starts.

    SIG_IGN is inherited through exec, so every role got SIGINT and SIGHUP ignored (a trainer never
    saw KeyboardInterrupt, and `ctl signal worker:0 INT` did nothing). A handler is reset to the
    default by exec, so the roles start with the defaults and the agent still ignores them.
    """
    for signum in signums:
        signal.signal(signum, _ignored)
