"""Simulated roles: the agent's harness for tests and benchmarks at a scale this machine cannot run.

With ``TOWERDECK_SIMULATE=1`` in its environment (or ``--simulate``) the agent starts no process for
a role. A :class:`SimRole` stands in for it: it has a synthetic pid above any pid the kernel can
hand out (so no real process can ever match it, and no signal sent by it can reach one), and the
agent itself appends the role's output to the role's real log file, a tick's lines in one write,
so the agent's own tail, stream, resume and exit paths run unchanged and the bytes are on disk
before they are sent. Everything else is the real agent: protocol, link, samples at the real period.

A role's flags (``sim_trainer.py --rate_hz=10 --steps=0 --format=step ...``, see
:class:`SimFlags`) say what it prints and which fault it plays. Samples carry plausible figures for
each role and ``TOWERDECK_SIMULATE_GPUS`` (8) GPUs per host, shaped as
:meth:`core.agent.sampling.GpuSampler.sample` returns them, whose processes are the roles that the
role's ``CUDA_VISIBLE_DEVICES`` puts there. No real launch uses any of this: a figure measured with
it is a simulated figure, and is said to be one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from . import simlines
from .processes import Role
from .protocol import StartRequest

SIMULATE_VAR = "TOWERDECK_SIMULATE"
GPUS_VAR = "TOWERDECK_SIMULATE_GPUS"
DEFAULT_GPUS = 8
# The kernel's PID_MAX_LIMIT on 64-bit Linux: /proc/sys/kernel/pid_max can be raised to it, never
# past it, so no real process has a pid from here on. Kept below 2**31: os.kill takes a C int.
PID_BASE = 1 << 22
PIDS_PER_AGENT = 500  # synthetic pids of one agent: PID_BASE + (agent pid) * 500 + n
STOP_GRACE_S = 0.3  # a simulated trainer's time from SIGTERM to its exit 0
MAX_LINES_PER_TICK = 1000  # a lagging agent catches up, a tick at most this many lines a role
GIB = 1 << 30
PAUSE_SIGNALS = {signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU}
IGNORED_SIGNALS = {signal.SIGCHLD, signal.SIGWINCH, signal.SIGURG, signal.SIGCONT}


def enabled() -> bool:
    """Whether this agent simulates its roles (``TOWERDECK_SIMULATE`` set, and not ``0``)."""
    return os.environ.get(SIMULATE_VAR, "").strip() not in ("", "0")


def gpu_count() -> int:
    """GPUs a simulating agent reports (``TOWERDECK_SIMULATE_GPUS``, default 8; a bad value: 8)."""
    try:
        return max(0, min(64, int(os.environ.get(GPUS_VAR, DEFAULT_GPUS))))
    except ValueError:
        return DEFAULT_GPUS


@dataclass(frozen=True)
class SimFlags:
    """A simulated role's flags (``--name=value`` or ``--name value`` anywhere in its argv)."""

    rate_hz: float = 10.0  # step lines a second
    steps: int = 0  # steps before exiting 0; 0: forever
    format: str = "step"  # step | keras | mixed
    placement: bool = False  # device placement lines at start
    crash_at_step: int = 0  # a traceback, then exit 1
    crash_attempts: int = 1  # the attempts that crash: the first N (0: every one), so a restart can recover
    stall_at_step: int = 0  # stops printing, stays alive
    slow: float = 1.0  # the rate divided by this
    lose_host_at_s: float = 0.0  # the whole agent dies abruptly this long after the role's start
    ignore_sigterm: bool = False  # a stop ends only when the kill escalation comes
    job_name: str = ""
    task_index: int = -1


_BOOLS = {"placement", "ignore_sigterm"}
_NUMBERS: dict[str, type] = {
    "rate_hz": float,
    "steps": int,
    "crash_at_step": int,
    "crash_attempts": int,
    "stall_at_step": int,
    "slow": float,
    "lose_host_at_s": float,
    "task_index": int,
}


def parse_flags(argv: list[str]) -> SimFlags:
    """The simulation's flags in ``argv``; other flags (``--ps_hosts`` ...) are ignored.
    ValueError names the flag and what it takes."""
    values: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("--"):
            continue
        name, has_value, value = arg[2:].partition("=")
        name = name.replace("-", "_")
        if name in _BOOLS:
            values[name] = value.lower() not in ("0", "false", "no") if has_value else True
            continue
        if name not in _NUMBERS and name not in ("format", "job_name"):
            continue
        if not has_value:
            if i >= len(argv):
                raise ValueError(f"--{name} needs a value")
            value, i = argv[i], i + 1
        if name in ("format", "job_name"):
            values[name] = value
            continue
        try:
            values[name] = _NUMBERS[name](value)
        except ValueError:
            kind = "a whole number" if _NUMBERS[name] is int else "a number"
            raise ValueError(f"--{name}={value!r} is not {kind}: write e.g. --{name}=10") from None
    flags = SimFlags(**values)
    if flags.format not in simlines.FORMATS:
        raise ValueError(f"--format={flags.format!r} is not one of {', '.join(simlines.FORMATS)}")
    if not 0 < flags.rate_hz <= 10_000:
        raise ValueError(f"--rate_hz={flags.rate_hz:g} must be above 0 and at most 10000 lines a second")
    if not 0 < flags.slow <= 1_000_000:
        raise ValueError(f"--slow={flags.slow:g} must be above 0 (2 steps half as fast)")
    if flags.steps < 0:
        raise ValueError(f"--steps={flags.steps} must be 0 (forever) or more")
    return flags


def role_identity(flags: SimFlags, env: dict[str, str], role: str) -> tuple[str, int]:
    """(job, task index) as a trainer finds them: the classic flags, else TF_CONFIG, else the role's
    name (``worker:3``)."""
    if flags.job_name and flags.task_index >= 0:
        return flags.job_name, flags.task_index
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        task = json.loads(env.get("TF_CONFIG") or "{}").get("task") or {}
        if "type" in task:
            return str(task["type"]), int(task.get("index", 0))
    job, _, index = role.rpartition(":")
    return (job, int(index)) if job and index.isdigit() else (role, 0)


def visible_gpus(env: dict[str, str], count: int) -> list[int]:
    """The host's GPUs a role's ``CUDA_VISIBLE_DEVICES`` shows it (all when unset, as CUDA does)."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return list(range(count))
    gpus = []
    for part in value.split(","):
        if part.strip().isdigit() and int(part) < count:
            gpus.append(int(part))
        else:
            break  # CUDA stops at the first entry it cannot use
    return gpus


class SimProcess:
    """What :class:`~.processes.Role` keeps of its main process: its pid and, once ended, its code."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None


class SimRole:
    """One simulated attempt of a role: it steps at its rate, plays its fault, obeys signals."""

    def __init__(self, role: Role, flags: SimFlags, *, job: str, index: int, gpus: list[int], script: str) -> None:
        self.role = role
        self.flags = flags
        self.job = job
        self.index = index
        self.gpus = gpus
        self.script = script
        self.format = simlines.format_of(flags.format, index)
        attempts = flags.crash_attempts
        self.crashes = flags.crash_at_step > 0 and (attempts <= 0 or role.attempt <= attempts)
        self.steps_forever = job in ("ps", "evaluator")  # serve (ps) or wait (evaluator) until stopped
        self.period_s = flags.slow / flags.rate_hz
        self.started_at = time.monotonic()
        self.next_step_at = self.started_at + self.period_s
        self.step = 0
        self.stalled = False
        self.paused = False
        self.exit_at: float | None = None  # SIGTERM: exits 0 then
        self.ended = False
        self.pending = ""  # text to append at the next write
        self.fd: int | None = None
        self.lost_bytes = 0
        self.mid_line = False  # the log's last line is unfinished (a Keras bar being redrawn)
        with contextlib.suppress(OSError):
            self.fd = os.open(role.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    @property
    def stepping(self) -> bool:
        """Whether it trains now (its GPU busy, its CPU a core's worth)."""
        return not (self.ended or self.stalled or self.paused or self.steps_forever or self.exit_at is not None)

    def signal(self, number: int) -> None:
        """A signal, as a trainer with Python's default handlers (plus a SIGTERM handler) takes it."""
        if self.ended:
            return
        # The lines due before it first: a trainer prints on while the agent is busy (a controller
        # that lags holds the agent's writes), and a stop read late must not erase those steps.
        self.advance(time.monotonic())
        if self.ended:
            return
        if number == signal.SIGKILL:
            self.end(signal_number=signal.SIGKILL)
        elif number == signal.SIGTERM:
            if not self.flags.ignore_sigterm and self.exit_at is None:
                self.exit_at = time.monotonic() + STOP_GRACE_S
        elif number in PAUSE_SIGNALS:
            self.paused = True
        elif number == signal.SIGCONT:
            if self.paused:
                self.paused = False
                self.next_step_at = time.monotonic() + self.period_s
        elif number == signal.SIGINT:
            self.say(simlines.interrupt_text(self.script))
            self.end(signal_number=signal.SIGINT)
        elif number not in IGNORED_SIGNALS:
            self.end(signal_number=number)  # the default action of the rest: the process ends

    def advance(self, t: float) -> None:
        """Everything due by ``t``: the step lines, a fault, an exit."""
        if self.ended:
            return
        if self.exit_at is not None:
            if t >= self.exit_at and not self.paused:
                self.end(returncode=0)
            return
        if self.paused or self.stalled or self.steps_forever:
            return
        lines = 0
        while self.next_step_at <= t and lines < MAX_LINES_PER_TICK:
            self.step += 1
            lines += 1
            self.next_step_at += self.period_s
            if self.crashes and self.step >= self.flags.crash_at_step:
                self.say(simlines.traceback_text(self.script, self.step))
                self.end(returncode=1)
                return
            self.pending += simlines.step_text(
                self.format, self.step, index=self.index, period_s=self.period_s, total_steps=self.flags.steps
            )
            if self.flags.stall_at_step and self.step >= self.flags.stall_at_step:
                self.stalled = True
                return
            if self.flags.steps and self.step >= self.flags.steps:
                self.say("")
                self.end(returncode=0)
                return

    def say(self, text: str) -> None:
        """Append whole lines after whatever is pending, ending an unfinished line first (as a
        traceback on stderr starts a line of its own in a terminal after a progress bar)."""
        if self.pending:
            self.mid_line = not self.pending.endswith("\n")
        self.pending += ("\n" if self.mid_line else "") + text
        self.mid_line = False

    def write(self) -> None:
        """Append what is pending to the log in one write (a full disk loses it, counted)."""
        if not self.pending:
            return
        data = self.pending.encode()
        self.mid_line = not self.pending.endswith("\n")
        self.pending = ""
        if self.fd is None:
            self.lost_bytes += len(data)
            return
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:
            self.lost_bytes += len(data)

    def end(self, *, returncode: int | None = None, signal_number: int | None = None) -> None:
        """The simulated process is over: the agent's watch reports it once its output is sent."""
        self.ended = True
        role = self.role
        role.leader_done = True
        role.returncode, role.signal = returncode, signal_number
        role.proc.returncode = returncode if signal_number is None else -signal_number

    def close(self) -> None:
        self.write()
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None

    def figures(self, t: float) -> dict[str, Any]:
        """The role's line of a sample: CPU %, RSS and threads of one trainer process."""
        wobble = ((self.step * 7919 + self.index * 104729 + int(t)) % 100) / 100.0  # steady, varying a little
        if self.stepping:
            cpu = 92.0 + 10.0 * wobble
        elif self.paused:
            cpu = 0.0
        else:
            cpu = 0.5 + 2.0 * wobble
        rss = (1 if self.steps_forever else 2) * GIB + int(64 * (1 << 20) * wobble)
        return {"pids": 1, "cpu_percent": round(cpu, 1), "rss_bytes": rss, "threads": 37 if self.steps_forever else 61}


class SimGpus:
    """The GPUs of a simulating host, sampled as :class:`~.sampling.GpuSampler` samples NVML."""

    def __init__(self, simulator: Simulator, host: str, count: int) -> None:
        self.simulator = simulator
        self.count = count
        self.status = (
            f"{count} simulated GPU{'s' if count != 1 else ''} on {host} ({SIMULATE_VAR})"
            if count
            else f"no NVIDIA GPU on {host} (simulated with {GPUS_VAR}=0)"
        )
        tag = os.getpid() % 0xFFFFFFFF
        self.static: list[dict[str, Any]] = [
            {
                "index": k,
                "name": simlines.GPU_NAME,
                "uuid": f"GPU-{tag:08x}-51ba-4000-8000-{k:012x}",
                "pci_bus_id": simlines.bus_id(k),
                "memory_total_bytes": 80 * GIB,
                "power_limit_w": 700.0,
            }
            for k in range(count)
        ]

    def sample(self, pid_roles: dict[int, str]) -> list[dict[str, Any]]:
        """Every GPU: busy where a role on it steps, near 0 % where its roles stall or none is."""
        t = time.monotonic()
        on_gpu: dict[int, list[SimRole]] = {}
        for sim in self.simulator.live():
            for k in sim.gpus:
                on_gpu.setdefault(k, []).append(sim)
        gpus = []
        for static in self.static:
            k = static["index"]
            sims = on_gpu.get(k, [])
            wobble = ((int(t * 10) * 31 + k * 17) % 10) / 10.0
            busy = [s for s in sims if s.stepping]
            util = min(100, round(min(1.0, sum(1.0 / s.flags.slow for s in busy)) * (88 + 8 * wobble))) if busy else 0
            processes = [
                {"pid": s.role.pid, "used_memory_bytes": 18 * GIB + k * (1 << 28), "role": s.role.name} for s in sims
            ]
            used = sum(p["used_memory_bytes"] for p in processes) + (512 << 20)
            gpus.append(
                {
                    **static,
                    "utilization_gpu_percent": util,
                    "utilization_memory_percent": round(util * 0.45),
                    "memory_used_bytes": min(used, static["memory_total_bytes"]),
                    "memory_total_bytes": static["memory_total_bytes"],
                    "temperature_c": 34 + round(util * 0.33),  # busy: ~65 °C, below the views' warm mark (70)
                    "power_w": round(72.0 + 5.4 * util + 6 * wobble, 3),
                    "sm_clock_mhz": 1980 if util else 345,
                    "processes": processes,
                }
            )
        return gpus


class Simulator:
    """The simulated roles of one agent: started by ``start``, advanced and written on each tick."""

    def __init__(self, host: str) -> None:
        self.sims: dict[str, SimRole] = {}  # role name -> its live simulated attempt
        self.gpus = SimGpus(self, host, gpu_count())
        self.pid_base = PID_BASE + (os.getpid() % PID_BASE) * PIDS_PER_AGENT
        self.started = 0

    def live(self) -> list[SimRole]:
        return [s for s in self.sims.values() if not s.ended]

    def _pid(self) -> int:
        in_use = {s.role.pid for s in self.sims.values()}
        while True:
            pid = self.pid_base + self.started % PIDS_PER_AGENT
            self.started += 1
            if pid not in in_use:
                return pid

    def start(self, request: StartRequest, token: str) -> Role:
        """A simulated role for ``request``; ValueError (naming the flag) for flags it cannot take."""
        flags = parse_flags(request.argv[1:])
        job, index = role_identity(flags, request.env, request.role)
        gpus = visible_gpus(request.env, self.gpus.count)
        script = next((a for a in request.argv[1:] if a.endswith(".py")), request.argv[0])
        if request.cwd and not os.path.isabs(script):
            script = os.path.join(request.cwd, script)
        role = Role(request.role, request.attempt, SimProcess(self._pid()), request.log, token)
        sim = SimRole(role, flags, job=job, index=index, gpus=gpus, script=script)
        role.sim = sim
        self.sims[request.role] = sim
        sim.pending = f"sim trainer: {job}:{index} pid {role.pid} (simulated by the TowerDeck agent)\n"
        if job == "ps":
            sim.pending += f"Started server with target: grpc://localhost:{2222 + index} (simulated)\n"
        if flags.placement:
            sim.pending += simlines.placement_text(job, index, gpus, wall_s=time.time())
        sim.write()
        return role

    def tick(self) -> None:
        """Advance every role to now and write its lines; a host lost on purpose dies here."""
        t = time.monotonic()
        for name, sim in list(self.sims.items()):
            sim.advance(t)
            sim.write()
            lose = sim.flags.lose_host_at_s
            if lose > 0 and not sim.ended and t - sim.started_at >= lose:
                for other in self.sims.values():
                    other.write()
                os.kill(os.getpid(), signal.SIGKILL)  # a lost host: nothing said, nothing cleaned
            if sim.ended:
                sim.close()
                del self.sims[name]

    def figures(self, role: Role) -> dict[str, Any]:
        """A sample's figures for a simulated role."""
        assert isinstance(role.sim, SimRole)
        return role.sim.figures(time.monotonic())
