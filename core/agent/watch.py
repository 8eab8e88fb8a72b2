"""One tick of the agent: reap exits, stream output, escalate stops, end roles, sample.

Functions of the agent they are given (a :class:`WatchedAgent`: :class:`~.supervisor.Agent` is
the one), split from it to keep each file to one job: the supervisor obeys commands, this watches
what the roles do.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any, Protocol

from .processes import LEFTOVER_GRACE_S, ProcTable, Role, role_tree, signal_tree
from .profile import Traces
from .protocol import now
from .pump import PUMP_STUCK_S, parse_pump_status
from .sampling import GpuSampler, GpuSource, HostSampler
from .scalars import ScalarFeed
from .simulate import Simulator

READ_BUDGET_BYTES = 1 << 20  # per role per tick, so one chatty role cannot starve the rest
CHUNK_BYTES = 64 * 1024
# A role started with skip_backlog (its log is on the controller's machine) whose unsent output
# is more than this jumps to its last SKIP_KEEP_BYTES, with a ``skipped`` event: a stop, or the
# news of an exit, takes seconds whatever the backlog of a flood; every byte is in its log.
SKIP_STOPPING_BYTES = 8 << 20  # stopping: its output is of little use now
SKIP_ENDED_BYTES = 16 << 20  # ended: the news of its exit waits for this to be sent
SKIP_BEHIND_BYTES = 64 << 20  # running: the stream is that far behind the role
SKIP_KEEP_BYTES = 256 * 1024
TREE_CHECK_S = 0.5  # how often an ended role's tree is looked for while its output is still sent


class WatchedAgent(Protocol):
    """What the watch reads and sets of the agent: its roles, its connection, its samplers."""

    roles: dict[str, Role]
    leaders: dict[int, Role]
    pumps: dict[int, Role]  # log pump pid -> its role
    ended: dict[str, dict[str, Any]]
    connected: bool
    awaiting_resume: bool
    shutting_down: bool
    finished: bool
    behind: bool
    hostname: str
    sampling: bool
    sample_period_s: float
    next_sample: float
    sample_table: ProcTable | None
    host_sampler: HostSampler
    gpu_sampler: GpuSource | None
    scalars: ScalarFeed
    traces: Traces
    simulator: Simulator | None  # roles simulated (core/agent/simulate.py), or None: real

    def emit(self, event: str, **fields: Any) -> bool: ...

    def error(self, message: str, **fields: Any) -> None: ...

    def report_exit(self, role: Role, fields: dict[str, Any]) -> None: ...


def reap(agent: WatchedAgent) -> None:
    """Collect every child that exited: log pumps, role leaders, and reparented orphans."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if agent.traces.exited(pid, status):
            continue
        pumped = agent.pumps.pop(pid, None)
        if pumped is not None:
            pumped.pump_done = True
            continue
        role = agent.leaders.pop(pid, None)
        if role is None:
            continue  # a reparented orphan of some role: reaped, nothing to report
        code = os.waitstatus_to_exitcode(status)
        role.leader_done = True
        role.proc.returncode = code  # Popen must not try to wait for it again
        if code < 0:
            role.signal = -code
        else:
            role.returncode = code


def tail(agent: WatchedAgent, role: Role) -> bool:
    """Stream new output of ``role``; True when the file is read to its end.

    A role that was read to its end is read again its ``output_period_s`` later (0.25-1 s, set by
    the controller by the cluster's size), not every tick: its output goes in one event a period
    instead of ten a second, and the controller's cost is per event (at 256 workers it took ~2,600
    output events a second). A role behind (its last read stopped at the budget), ending or
    stopping is read every tick."""
    role.reopen_log()
    if role.reader is None:
        return True
    t = now()
    if t < role.next_read_at and not (role.leader_done or role.stopping or agent.shutting_down):
        return True
    if role.skip_backlog and agent.connected and not agent.awaiting_resume:
        if role.stopping or agent.shutting_down:
            skip_backlog(agent, role, SKIP_STOPPING_BYTES)
        else:
            skip_backlog(agent, role, SKIP_ENDED_BYTES if role.leader_done else SKIP_BEHIND_BYTES)
    budget = READ_BUDGET_BYTES
    while budget > 0:
        asked = min(CHUNK_BYTES, budget)
        try:
            data = role.reader.read(asked)
        except OSError as exc:
            agent.error(f"cannot read {role.log_path}: {exc}", role=role.name)
            role.close()
            return True
        if not data:
            role.next_read_at = t + role.output_period_s
            return True
        start = role.text_end()  # a sequence split by the last read starts this chunk
        role.offset += len(data)
        budget -= len(data)
        text = role.decoder.decode(data)
        if text:
            agent.emit("output", role=role.name, attempt=role.attempt, offset=start, end=role.text_end(), data=text)
        if len(data) < asked:
            # A short read is the file's end as it was: what the pump writes after it goes in the
            # next period's read, not in a second event of this one (under load, a line written
            # between the two reads made two events 0 ms apart).
            role.next_read_at = t + role.output_period_s
            return True
    return False


def skip_backlog(agent: WatchedAgent, role: Role, limit_bytes: int) -> None:
    """Jump over all but the last SKIP_KEEP_BYTES of a role's unsent output when there is more than
    ``limit_bytes``, to a line start, and say so with a ``skipped`` event (role, attempt, offset,
    end: the bytes skipped, log)."""
    assert role.reader is not None
    try:
        size = os.fstat(role.reader.fileno()).st_size
        if size - role.offset <= limit_bytes:
            return
        role.reader.seek(size - SKIP_KEEP_BYTES)
        newline = role.reader.read(SKIP_KEEP_BYTES).find(b"\n")
    except OSError:
        return
    end = size - SKIP_KEEP_BYTES + newline + 1 if newline >= 0 else size
    agent.emit("skipped", role=role.name, attempt=role.attempt, offset=role.text_end(), end=end, log=role.log_path)
    role.offset = end
    role.decoder.reset()
    role.reader.seek(end)


def read_pump_status(agent: WatchedAgent, role: Role) -> None:
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
    statuses, role.pump_status_buf = parse_pump_status(role.pump_status_buf + data)
    for status in statuses:
        fields = {"role": role.name, "attempt": role.attempt, "log": role.log_path}
        if "write_failed" in status:
            agent.emit("log_write_failed", error=str(status["write_failed"]), **fields)
        elif status.get("write_recovered") or status.get("gave_up"):
            agent.emit(
                "log_write_recovered",
                lost_bytes=int(status.get("lost_bytes") or 0),
                gave_up=bool(status.get("gave_up")),
                **fields,
            )


def _finish(agent: WatchedAgent, role: Role) -> None:
    """The role and its whole tree are gone and its output is read: report the exit."""
    start = role.text_end()
    tail_text = role.decoder.decode(b"", final=True)
    if tail_text:
        agent.emit("output", role=role.name, attempt=role.attempt, offset=start, end=role.offset, data=tail_text)
    role.close()
    del agent.roles[role.name]
    agent.ended[role.name] = {
        "alive": False,
        "returncode": role.returncode,
        "signal": role.signal,
        "pids": 0,
        "cpu_percent": 0.0,
        "rss_bytes": 0,
        "threads": 0,
    }
    if agent.connected and not agent.awaiting_resume:
        agent.scalars.poll(agent.emit, role.name)  # its last points before its exit
    agent.report_exit(
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


def tick(agent: WatchedAgent) -> None:
    """One round: see :mod:`.watch`."""
    reap(agent)
    t = now()
    table: ProcTable | None = None
    agent.behind = False
    for role in list(agent.roles.values()):
        at_end = tail(agent, role)
        agent.behind |= not at_end and agent.connected and not agent.awaiting_resume
        read_pump_status(agent, role)
        if not role.leader_done and not (role.stopping and role.kill_at is not None and t >= role.kill_at):
            continue
        if not at_end and t - role.tree_checked_at < TREE_CHECK_S:
            continue  # output still to send: scanning /proc every tick would slow the sending
        role.tree_checked_at = t
        table = table or ProcTable()
        tree = role_tree(role, table, scan_environ=True)
        if role.leader_done and not tree and not role.pump_done:
            # The pump still writes the last output (or waits for a full disk).
            role.tree_gone_at = role.tree_gone_at or t
            if t - role.tree_gone_at > PUMP_STUCK_S and role.pump_pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(role.pump_pid, signal.SIGKILL)
            continue
        if role.leader_done and not tree:
            if at_end:  # report the exit after the last output
                _finish(agent, role)
            continue
        if role.leader_done and not role.leftovers_signalled and not role.stopping:
            # The main process is gone; what it left behind goes with it.
            role.leftovers_signalled = True
            role.leftovers_killed = len(tree)
            role.kill_at = t + LEFTOVER_GRACE_S
            signal_tree(role, signal.SIGTERM)
        elif role.kill_at is not None and t >= role.kill_at:
            signal_tree(role, signal.SIGKILL)
            role.kill_at = t + 1.0  # and again if something survives
    if t >= agent.next_sample and agent.connected:
        agent.next_sample = t + agent.sample_period_s
        if agent.sampling:
            sample(agent, table)
        if not agent.awaiting_resume:
            agent.scalars.poll(agent.emit)
    if agent.shutting_down and not agent.roles:
        if agent.connected:
            agent.scalars.drain(agent.emit)
        agent.emit("bye")
        agent.finished = True


def sample(agent: WatchedAgent, table: ProcTable | None = None) -> None:
    """Emit one ``sample`` event: host, every role's whole tree, every GPU."""
    if agent.gpu_sampler is None:
        agent.gpu_sampler = GpuSampler(agent.hostname) if agent.simulator is None else agent.simulator.gpus
        agent.emit("gpu_status", status=agent.gpu_sampler.status, count=agent.gpu_sampler.count)
    table = table or ProcTable(agent.sample_table)
    agent.sample_table = table
    roles: dict[str, dict[str, Any]] = {}
    pid_roles: dict[int, str] = {}
    alive: set[int] = set()
    for role in agent.roles.values():
        pids = role_tree(role, table, scan_environ=False)
        alive |= pids
        pid_roles.update(dict.fromkeys(pids, role.name))
        if role.sim is not None and agent.simulator is not None:
            figures = agent.simulator.figures(role)
        else:
            figures = agent.host_sampler.role(pids)
        roles[role.name] = {
            "alive": not role.leader_done,
            "pid": role.pid,
            "attempt": role.attempt,
            **figures,
        }
    roles.update(agent.ended)
    agent.ended = {}
    agent.host_sampler.forget(alive)
    agent.emit("sample", host=agent.host_sampler.host(), roles=roles, gpus=agent.gpu_sampler.sample(pid_roles))
