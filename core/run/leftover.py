"""What of a run may still run when no launcher holds it: its roles and its hosts' agents.

A launcher that was killed (or detached) leaves its roles running under their hosts' agents, to be
taken over by ``attach``. Deleting such a run would leave them running with nobody able to reach
them, so :func:`core.run.index.delete_run` asks here first. What the run directory records:

- the journal: each role's last state, and its pid with the process's start time
  (``pid_started``, :func:`core.run.pids.start_time`, recorded for roles on this machine) or, in
  runs from before that was recorded, the time the pid was journalled;
- ``agents/HOST.sock.pid``: the pid of each agent serving on this machine (or on a Slurm node that
  shares the run directory).

A role on this machine is running when its pid is alive and is still the same process: the same
start time, or, without one, a process that started before its pid was journalled (a pid reused
since started after the role ended). An agent is this run's while it is alive, runs the agent and
works in this run's ``agents`` folder (the same folder, by inode: a renamed run too, a copy not).
A role on another host (SSH, a Slurm node) cannot be checked cheaply from here: it counts as
possibly running unless the journal has its end, or the run's Slurm job is over.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.agent.serve import AGENT_MARKERS
from core.run import journal, pids
from core.run.lock import LOCK_FILE
from core.run.status import ALIVE

AGENT_STOP_S = 10.0  # an agent with no roles ends within a tick of SIGTERM; past this it is killed
START_SLACK_S = 1.0  # a start time from the boot time in whole seconds: this much either way
SLURM_OVER = frozenset({"ended", "cancelled", "failed"})


@dataclass
class _Role:
    state: str = "pending"
    pid: int | None = None
    pid_started: float | None = None
    pid_t: float | None = None  # when the pid was journalled


@dataclass(frozen=True)
class Agent:
    """An agent of the run that runs on this machine."""

    name: str  # its host, as its socket's file name has it
    pid: int


@dataclass(frozen=True)
class Leftovers:
    """What of a run may still run. ``running``: roles on this machine, alive (``worker:1 (pid
    123)``); ``agents``: its agents alive here; ``agent_roles``: roles on this machine with no pid
    in the journal that an agent here may be running; ``elsewhere``: roles on other hosts whose
    end the journal lacks (``worker:2 on gpu-b``); ``slurm_job``: the run's Slurm job, if not over."""

    running: tuple[str, ...] = ()
    agents: tuple[Agent, ...] = ()
    agent_roles: tuple[str, ...] = ()
    elsewhere: tuple[str, ...] = ()
    slurm_job: str | None = None
    hosts_elsewhere: tuple[str, ...] = ()

    @property
    def runs_here(self) -> bool:
        """Something of the run surely runs on this machine: a role, or an agent with a role."""
        return bool(self.running or (self.agents and self.agent_roles))

    @property
    def idle_agents(self) -> tuple[Agent, ...]:
        """Agents that run no role of the run any more (they wait for a reattach, then end)."""
        return () if self.runs_here else self.agents


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _roles(path: Path) -> dict[str, _Role]:
    """Each role's last journalled state, and the pid of its current attempt while it lives."""
    alive = {str(s) for s in ALIVE}
    roles: dict[str, _Role] = {}
    for record in journal.iter_journal(path):
        name, kind = record.get("role"), record.get("kind")
        if not isinstance(name, str) or kind not in ("role_state", "role_pid"):
            continue
        role = roles.setdefault(name, _Role())
        pid = record.get("pid")
        pid = pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None
        if kind == "role_state":
            role.state = str(record.get("state"))
            if role.state not in alive or pid is None:
                if role.state not in alive or role.state == "starting":  # ended, or a new attempt
                    role.pid = role.pid_started = role.pid_t = None
                continue
            if pid == role.pid and record.get("pid_started") is None:
                continue  # the same process, as its role_pid record had it
        role.pid, role.pid_started, role.pid_t = pid, _number(record.get("pid_started")), _number(record.get("t"))
    return roles


def _started_epoch(pid: int) -> float | None:
    """When ``pid`` started, in seconds since the epoch (whole-second precision on Linux)."""
    ticks = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
    if ticks is not None:
        with contextlib.suppress(OSError, ValueError), open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return int(line.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")
    try:
        import psutil

        return float(psutil.Process(pid).create_time())
    except Exception:  # no psutil, or no such process
        return None


def role_alive(pid: int, pid_started: float | None, journalled_at: float | None) -> bool:
    """Whether ``pid`` is still the role's process on this machine."""
    if pid_started is not None:
        return pids.start_time(pid) == pid_started
    started = _started_epoch(pid)
    if started is None:
        return False
    return journalled_at is None or started <= journalled_at + START_SLACK_S


def _agent_alive(pid: int, agents_dir: Path) -> bool:
    """``pid`` is alive, runs the agent, and works in ``agents_dir`` (the same folder by inode)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        cwd = os.stat(f"/proc/{pid}/cwd")
    except OSError:
        try:
            import psutil

            process = psutil.Process(pid)
            cmdline = "\0".join(process.cmdline()).encode()
            cwd = os.stat(process.cwd())
        except Exception:  # no psutil, no such process, or not ours to look at
            return False
    try:
        here = os.stat(agents_dir)
    except OSError:
        return False
    return any(m in cmdline for m in AGENT_MARKERS) and (cwd.st_dev, cwd.st_ino) == (here.st_dev, here.st_ino)


def _agents(path: Path) -> list[Agent]:
    found = []
    agents_dir = path / "agents"
    with contextlib.suppress(OSError):
        for pid_file in sorted(agents_dir.glob("*.sock.pid")):
            try:
                pid = int(pid_file.read_text().strip())
            except (OSError, ValueError):
                continue
            if pid > 0 and pid != os.getpid() and _agent_alive(pid, agents_dir):
                found.append(Agent(pid_file.name.removesuffix(".sock.pid"), pid))
    return found


def _placement(path: Path) -> tuple[dict[str, tuple[str, bool]], bool]:
    """Each role's host and whether it is on this machine, from the run's cluster.toml; and
    whether the run is a Slurm run. Empty when the file cannot be read (every role then counts
    as elsewhere, unless its start time was recorded here)."""
    from core.run.rundir import read_run_spec

    try:
        spec, _ = read_run_spec(path)
        if spec is None:
            return {}, False
        return {t.role_id: (t.host, not spec.host_config(t.host).remote) for t in spec.tasks()}, spec.slurm is not None
    except Exception:  # a damaged file, or counted tasks never placed: nothing is known of them
        return {}, False


def _controlled_elsewhere(path: Path) -> str | None:
    """The machine the run's last controller ran on when it is not this one (the lock file keeps
    its last holder), else None: that machine's pids mean nothing here."""
    try:
        last = json.loads((path / LOCK_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    host = last.get("host") if isinstance(last, dict) else None
    return host if isinstance(host, str) and host and host != socket.gethostname() else None


def find(path: Path, info: dict[str, Any]) -> Leftovers:
    """What of the run at ``path`` (``info``: its run.json) may still run."""
    try:
        roles = _roles(path)
    except OSError:
        roles = {}
    placed, slurm = _placement(path)
    machine = _controlled_elsewhere(path)
    if machine is not None:  # run from another machine (a shared folder): nothing is checked here
        placed = {role: (f"{host} (run from {machine})", False) for role, (host, _) in placed.items()}
    job: dict[str, Any] = info["slurm"] if isinstance(info.get("slurm"), dict) else {}
    slurm_over = job.get("state") in SLURM_OVER  # the allocation is gone, and every step with it
    slurm_job = str(job["job_id"]) if job.get("job_id") and not slurm_over else None
    alive = {str(s) for s in ALIVE}
    running, agent_roles, elsewhere, hosts = [], [], [], []
    for name, role in roles.items():
        if role.state not in alive:
            continue
        host, here = placed.get(name, ("?", False))
        if slurm:
            here = False  # a node's pid means nothing here, unless its start time was recorded here
        if role.pid is not None and ((role.pid_started is not None and machine is None) or here):
            if role_alive(role.pid, role.pid_started, role.pid_t):
                running.append(f"{name} (pid {role.pid})")
        elif here:
            agent_roles.append(name)
        elif not slurm_over:
            elsewhere.append(f"{name} on {host}")
            hosts.append(host)
    return Leftovers(
        running=tuple(running),
        agents=tuple(_agents(path)),
        agent_roles=tuple(agent_roles),
        elsewhere=tuple(elsewhere),
        slurm_job=slurm_job if elsewhere else None,
        hosts_elsewhere=tuple(dict.fromkeys(hosts)),
    )


def busy_message(path: Path, left: Leftovers) -> str:
    """One line: what still runs and how to stop it."""
    attach = f"`python main.py attach {shlex.quote(str(path))}`, then Ctrl-C (it stops every role)"
    if left.runs_here:
        what = [*left.running, *(f"{r} (its pid not recorded yet)" for r in left.agent_roles)]
        what += [f"the agent of {a.name} (pid {a.pid})" for a in left.agents]
        what += [f"{r} (not checked from here)" for r in left.elsewhere]
        return f"run {path.name} still runs with no launcher: {', '.join(what)}; stop it first with {attach}"
    hosts = ", ".join(left.hosts_elsewhere) or "their hosts"
    slurm = f", or `scancel {left.slurm_job}`" if left.slurm_job else ""
    return (
        f"run {path.name} may still run: {', '.join(left.elsewhere)} never ended in its journal, and "
        f"{hosts} cannot be checked from here; stop it first with {attach}{slurm}, or delete it anyway if "
        "nothing of it runs there"
    )


def stop_agents(agents: tuple[Agent, ...], agents_dir: Path, timeout_s: float = AGENT_STOP_S) -> list[str]:
    """End agents that run no role (SIGTERM: each stops at once; SIGKILL past ``timeout_s``), each
    only while it is still this run's agent. Returns the ones still alive (``host (pid N)``)."""
    for agent in agents:
        if _agent_alive(agent.pid, agents_dir):
            with contextlib.suppress(OSError):
                os.kill(agent.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    waiting = list(agents)
    while waiting:
        waiting = [a for a in waiting if _agent_alive(a.pid, agents_dir)]
        if not waiting or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for agent in waiting:
        with contextlib.suppress(OSError):
            os.kill(agent.pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while waiting and time.monotonic() < deadline:
        waiting = [a for a in waiting if _agent_alive(a.pid, agents_dir)]
        time.sleep(0.05)
    return [f"{a.name} (pid {a.pid})" for a in waiting]
