"""Why is this worker slow? The straggler's profile beside the median worker's, joined with what
TowerDeck knows of each (its host's CPU, its GPUs, its recent step time), gives one sentence naming
the likely cause with the evidence, or says plainly that nothing measured explains it.

The rules, in order (each a constant below):

0. On a CPU-only host xprof's step table counts no input time: a step waiting for its tf.data
   pipeline counts as "other". There, the self time of tf.data's op types per step
   (``INPUT_OP_TYPES``), up to the step's "other" time, is moved from "other" to "input"
   (:func:`core.profiling.summary.with_input_ops`: the capture's one breakdown, which every view
   shows, is computed so already).
1. No step markers in either profile: the profiles cannot say where a step's time went.
2. The straggler is not ``SLOWER_RATIO`` times slower than the median worker (its profile, else
   TowerDeck's step time): nothing to explain.
3. The part of a step (input, host compute, communication...) whose time grew the most explains it
   when it grew by at least ``EXPLAINS_SHARE`` of the difference in step time. Where that part runs
   on the host's CPU (host compute, Python and waiting) and the straggler's host is busy
   (``BUSY_CPU_PERCENT``) while the median worker's is another, less busy host, the host is named.
   Where it runs on the GPU (``GPU_PARTS``) and the straggler's GPU is throttled (a clock-slowing
   reason, ``why_gpus.SLOWING_REASONS``) or shared with other processes while the median worker's is
   not, that GPU is named.
4. No part explains it, but the straggler's GPU is throttled or shared and the median worker's is
   not: that GPU is named as the likely cause, and said to be the likely one.
5. Otherwise: nothing TowerDeck measures explains it, with the evidence.

The GPU figures (temperature, SM clock, throttle reasons, the processes on each GPU) are one look
at the role's host's GPUs, through the agent's NVML query, as ``python main.py gpus`` shows them
(:mod:`core.profiling.why_gpus`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from core.cluster.spec import find_role
from core.profiling.env import ProfileError
from core.profiling.summary import BREAKDOWN, OPS_NOTE, OTHER_PART, RoleProfile, with_input_ops
from core.profiling.why_gpus import GpuFacts, gpu_trouble
from core.run.status import RoleState, RoleStatus

SLOWER_RATIO = 1.2  # below this, the "straggler" is as fast as the median worker
EXPLAINS_SHARE = 0.5  # a part that grew by half the step-time difference explains it
BUSY_CPU_PERCENT = 90.0  # a host's CPU this busy slows every process on it
OP_RATIO = 2.0  # an op type taking this many times longer is worth a line of evidence
OP_FLOOR_MS = 0.05
HOST_PARTS = ("host compute", OTHER_PART)
GPU_PARTS = ("device compute", "kernel launch", "communication")
PART_WORDS = {
    "communication": "communication (send/recv, collectives)",
    OTHER_PART: "Python, I/O or waiting outside TensorFlow ops",
}


@dataclass(frozen=True)
class HostFacts:
    """What TowerDeck knows of a host: its CPU and the trainers running on it."""

    host: str
    cpu_percent: float | None = None  # the whole host, 100 = every core busy
    load1: float | None = None
    cpu_count: int | None = None
    trainers: int | None = None  # TensorFlow trainer processes on the host, of any run


@dataclass(frozen=True)
class RoleFacts:
    """What TowerDeck knows of one role from its status (core/run/status.py RoleStatus)."""

    role: str
    host: str = ""
    cpu_percent: float | None = None  # of one core
    step_time_s: float | None = None  # its recent step time, from its output or TensorBoard
    gpus: tuple[int, ...] = ()
    gpu_utilization_percent: float | None = None
    host_facts: HostFacts | None = None
    gpu_facts: tuple[GpuFacts, ...] = ()  # the GPUs it uses, with their figures
    gpu_problem: str | None = None  # why its GPUs could not be looked at


@dataclass(frozen=True)
class Verdict:
    """The likely cause (``input``, ``host compute``, ..., ``host``, ``none``), the sentence naming
    it, and the evidence lines behind it."""

    cause: str
    sentence: str
    evidence: tuple[str, ...]


def _pct(part_ms: float, step_ms: float) -> str:
    return f"{100.0 * part_ms / step_ms:.0f}%" if step_ms > 0 else "-"


def _host_line(facts: RoleFacts) -> str | None:
    h = facts.host_facts
    if h is None:
        return f"{facts.role} runs on {facts.host}" if facts.host else None
    parts = []
    if h.cpu_percent is not None:
        parts.append(f"CPU {h.cpu_percent:.0f}%")
    if h.load1 is not None:
        parts.append(f"load {h.load1:.1f}" + (f" on {h.cpu_count} cores" if h.cpu_count else ""))
    if h.trainers is not None:
        parts.append(f"{h.trainers} trainer process{'es' if h.trainers != 1 else ''}")
    return f"{facts.role}'s host {h.host or facts.host}: {', '.join(parts) or 'no figures'}"


def _busy(h: HostFacts | None) -> bool:
    if h is None:
        return False
    loaded = h.load1 is not None and bool(h.cpu_count) and h.load1 >= (h.cpu_count or 0)
    return (h.cpu_percent is not None and h.cpu_percent >= BUSY_CPU_PERCENT) or loaded


def evidence_lines(
    slow: RoleProfile, median: RoleProfile, *, slow_facts: RoleFacts, median_facts: RoleFacts
) -> list[str]:
    """The facts a verdict rests on, one line each: step times, each part of a step, hosts, GPUs,
    the op types that take twice as long."""
    lines = []
    s_ms, m_ms = slow.mean_step_ms, median.mean_step_ms
    if s_ms is not None and m_ms is not None:
        lines.append(f"profiled step time: {slow.role} {s_ms:.1f} ms, {median.role} {m_ms:.1f} ms ({s_ms / m_ms:.1f}x)")
        for name, _ in BREAKDOWN:
            a, b = slow.breakdown_ms.get(name, 0.0), median.breakdown_ms.get(name, 0.0)
            if a or b:
                lines.append(
                    f"{name}: {slow.role} {a:.1f} ms ({_pct(a, s_ms)}), {median.role} {b:.1f} ms ({_pct(b, m_ms)})"
                )
    if slow_facts.step_time_s is not None and median_facts.step_time_s is not None:
        lines.append(
            f"TowerDeck's recent step time: {slow.role} {1000 * slow_facts.step_time_s:.1f} ms, "
            f"{median.role} {1000 * median_facts.step_time_s:.1f} ms"
        )
    for facts in (slow_facts, median_facts):
        if (line := _host_line(facts)) is not None:
            lines.append(line)
        if facts.gpu_utilization_percent is not None:
            lines.append(f"{facts.role}'s GPUs {list(facts.gpus)}: {facts.gpu_utilization_percent:.0f}% busy")
        lines.extend(gpu.line(facts.role) for gpu in facts.gpu_facts)
        if facts.gpu_problem:
            lines.append(f"{facts.role}'s GPUs: {facts.gpu_problem}")
    median_ops = {o.op_type for o in median.top_ops}
    for op in slow.top_ops:
        a, b = slow.op_ms(op.op_type), median.op_ms(op.op_type)
        if op.op_type in median_ops and a >= OP_FLOOR_MS and a >= OP_RATIO * b:
            lines.append(f"op {op.op_type}: {a:.2f} ms/step on {slow.role}, {b:.2f} on {median.role} ({OPS_NOTE})")
    return lines


def explain(slow: RoleProfile, median: RoleProfile, *, slow_facts: RoleFacts, median_facts: RoleFacts) -> Verdict:
    """The likely cause of ``slow`` being slower than ``median``, by the rules of this module."""
    # As stored with the capture already; the table's notes say where input was counted from
    # tf.data's ops (core.profiling.summary.input_note), so the evidence need not.
    slow, median = with_input_ops(slow), with_input_ops(median)
    evidence = tuple(evidence_lines(slow, median, slow_facts=slow_facts, median_facts=median_facts))
    s_ms, m_ms = slow.mean_step_ms, median.mean_step_ms
    if s_ms is None or m_ms is None or m_ms <= 0:
        unmarked = ", ".join(p.role for p in (slow, median) if p.mean_step_ms is None) or median.role
        return Verdict(
            "none",
            f"nothing TowerDeck measures explains it: the profile of {unmarked} has no steps, so where a step's "
            "time goes is unknown (mark the trainer's steps: see docs/guide/profiling.md, step markers)",
            evidence,
        )
    recent = (slow_facts.step_time_s or 0.0) / median_facts.step_time_s if median_facts.step_time_s else None
    if s_ms < SLOWER_RATIO * m_ms and (recent is None or recent < SLOWER_RATIO):
        return Verdict(
            "none",
            f"{slow.role} is not slower than {median.role} in this capture ({s_ms:.1f} ms vs {m_ms:.1f} ms a step)",
            evidence,
        )
    growth = {
        name: slow.breakdown_ms.get(name, 0.0) - median.breakdown_ms.get(name, 0.0)
        for name, _ in BREAKDOWN
        if name in slow.breakdown_ms or name in median.breakdown_ms
    }
    part = max(growth, key=lambda n: growth[n], default=None)
    difference = s_ms - m_ms
    gpu = gpu_trouble(slow_facts, median_facts)
    if part is None or difference <= 0 or growth[part] < EXPLAINS_SHARE * difference:
        if gpu:
            return Verdict(
                "gpu",
                f"{slow.role} takes {s_ms:.1f} ms a step ({median.role}: {m_ms:.1f} ms) and {gpu}: the likely "
                "cause, though no part of its step grew by half the difference",
                evidence,
            )
        return Verdict(
            "none",
            f"nothing TowerDeck measures explains it: {slow.role} takes {s_ms:.1f} ms a step ({median.role}: "
            f"{m_ms:.1f} ms), but no part of its step grew by half the difference",
            evidence,
        )
    a, b = slow.breakdown_ms.get(part, 0.0), median.breakdown_ms.get(part, 0.0)
    sentence = (
        f"{slow.role} spends {_pct(a, s_ms)} of each step in {PART_WORDS.get(part, part)} "
        f"(median worker {median.role}: {_pct(b, m_ms)})"
    )
    slow_host, median_host = slow_facts.host_facts, median_facts.host_facts
    other_host = slow_facts.host != median_facts.host or slow_host is None or median_host is None
    if part in HOST_PARTS and _busy(slow_host) and other_host and not _busy(median_host) and slow_host:
        busy = [f"CPU {slow_host.cpu_percent:.0f}%"] if slow_host.cpu_percent is not None else []
        if slow_host.trainers:
            busy.insert(0, f"runs {slow_host.trainers} trainer processes")
        return Verdict("host", f"{sentence}; its host {slow_host.host} is busy: {', '.join(busy)}", evidence)
    if part in GPU_PARTS and gpu:
        return Verdict("gpu", f"{sentence}; {gpu}", evidence)
    return Verdict(part, sentence, evidence)


# ------------------------------------------------------------------ the straggler and its peer


def training_workers(roles: Sequence[RoleStatus]) -> list[RoleStatus]:
    """The running workers of a run's roles."""
    return [r for r in roles if r.job == "worker" and r.state == RoleState.RUNNING]


def _step_time(role: RoleStatus) -> float | None:
    value = role.step_time_s
    if value is not None and value > 0:
        return float(value)
    rate = role.steps_per_sec
    return 1.0 / rate if rate is not None and rate > 0 else None


def straggler_and_median(roles: Sequence[RoleStatus], name: str | None) -> tuple[RoleStatus, RoleStatus]:
    """The worker to explain (``name``, else the slowest by step rate) and the median of the other
    workers by step time; raises ProfileError with a one-line reason."""
    workers = training_workers(roles)
    if len(workers) < 2:
        raise ProfileError(f"why needs two or more running training workers to compare; this run has {len(workers)}")
    if name:
        role = find_role(name, [r.role for r in roles])  # worker/1 names worker:1 too
        slow = next((r for r in roles if r.role == role), None) if role else None
        if slow is None:
            raise ProfileError(f"no role {name} in this run (its roles: {', '.join(r.role for r in roles)})")
        if slow.job != "worker":
            raise ProfileError(f"{name} is not a worker; why compares a worker with the median worker")
        if slow not in workers:
            raise ProfileError(f"{name} is {slow.state}; only a running worker can be profiled")
    else:
        timed = [r for r in workers if _step_time(r) is not None]
        if not timed:
            raise ProfileError("no worker reports a step time yet; name the worker, e.g. `why worker:1`")
        slow = max(timed, key=lambda r: _step_time(r) or 0.0)
    others = sorted((r for r in workers if r is not slow), key=lambda r: (_step_time(r) is None, _step_time(r) or 0.0))
    return slow, others[(len(others) - 1) // 2]


def role_facts(
    role: RoleStatus, host: HostFacts | None = None, gpus: tuple[tuple[GpuFacts, ...], str | None] = ((), None)
) -> RoleFacts:
    """A role's facts from its status, with its host's and (:func:`core.profiling.why_gpus.look_at_gpus`)
    its GPUs'."""
    return RoleFacts(
        role=role.role,
        host=role.host,
        cpu_percent=role.cpu_percent,
        step_time_s=_step_time(role),
        gpus=role.gpus,
        gpu_utilization_percent=role.gpu_utilization_percent,
        host_facts=host,
        gpu_facts=gpus[0],
        gpu_problem=gpus[1],
    )


def local_host_facts(host: str, cpu_percent: float | None) -> HostFacts:
    """This machine's load and the trainers TowerDeck started on it (processes with TOWERDECK_ROLE
    in their environment, of any run); ``cpu_percent`` is measured by the caller over the capture."""
    import psutil

    trainers = 0
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if "TOWERDECK_ROLE" in proc.environ():
                trainers += 1
    return HostFacts(host, cpu_percent, os.getloadavg()[0], os.cpu_count(), trainers)
