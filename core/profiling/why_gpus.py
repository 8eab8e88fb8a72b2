"""The GPUs in *why is this worker slow?*: what a role's GPUs were doing while it was asked
(utilisation, temperature, SM clock, NVML's clock event (throttle) reasons, the other processes on
them), and the words that name a throttled or shared GPU as the cause.

The figures are one look at each role's host's GPUs through the agent's own NVML query
(``core/agent/gpuquery.py``, run as ``python main.py gpus`` runs it: a child here, over SSH for
a host of the cluster file), never NVML in this process. A role's GPUs are those its task asks
for (``gpus = [...]``) and those NVML finds its processes on; every other process on them is
"other": another role, another run, another user.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.run.status import RoleStatus

if TYPE_CHECKING:
    from core.profiling.why import RoleFacts

# NVML's clock event reasons that slow a GPU down (gpu_idle, applications_clocks, sync_boost and
# display_clocks do not: they are settings or an idle GPU).
SLOWING_REASONS = ("hw_thermal", "sw_thermal", "hw_slowdown", "hw_power_brake", "sw_power_cap")
HOT_C = 85.0  # a GPU this hot is said to be hot in the verdict
LOOK_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class GpuFacts:
    """One GPU a role uses, as its host's NVML saw it during the question."""

    index: int
    utilization_percent: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    throttle_reasons: tuple[str, ...] | None = None  # None: NVML did not say
    others: tuple[str, ...] = ()  # the other processes on it, one short description each

    @property
    def slowed_by(self) -> tuple[str, ...]:
        return tuple(r for r in self.throttle_reasons or () if r in SLOWING_REASONS)

    def line(self, role: str) -> str:
        """Its figures in one line of evidence."""
        parts = []
        if self.utilization_percent is not None:
            parts.append(f"{self.utilization_percent:.0f}% busy")
        if self.temperature_c is not None:
            parts.append(f"{self.temperature_c:.0f} °C")
        if self.sm_clock_mhz is not None:
            parts.append(f"SM clock {self.sm_clock_mhz:.0f} MHz")
        if self.throttle_reasons is not None:
            parts.append(f"clock reasons: {', '.join(self.throttle_reasons) or 'none'}")
        others = f"{len(self.others)} other process{'es' if len(self.others) != 1 else ''}"
        parts.append(f"{others}: {'; '.join(self.others)}" if self.others else f"no {others[2:]}")
        return f"{role}'s GPU {self.index}: {', '.join(parts)}"


def _figures(gpu: GpuFacts) -> list[str]:
    figures = [f"{gpu.temperature_c:.0f} °C"] if gpu.temperature_c is not None else []
    return figures + ([f"SM clock {gpu.sm_clock_mhz:.0f} MHz"] if gpu.sm_clock_mhz is not None else [])


def gpu_trouble(slow: RoleFacts, median: RoleFacts) -> str:
    """The words naming the straggler's GPU throttled for a reason the median worker's GPUs are not,
    or shared where theirs are not ('' when there is none: what both have cannot explain their
    difference, e.g. two busy GPUs at their power cap)."""
    their_reasons = {r for g in median.gpu_facts for r in g.slowed_by}
    words = []
    for gpu in slow.gpu_facts:
        new = [r for r in gpu.slowed_by if r not in their_reasons]
        if new:
            hot = "hot and " if gpu.temperature_c is not None and gpu.temperature_c >= HOT_C else ""
            words.append(f"GPU {gpu.index} is {hot}throttled ({', '.join([*new, *_figures(gpu)])})")
    if not any(g.others for g in median.gpu_facts):
        for gpu in slow.gpu_facts:
            if gpu.others:
                n = len(gpu.others)
                more = f" and {n - 3} more" if n > 3 else ""
                words.append(
                    f"GPU {gpu.index} is shared with {n} other process{'es' if n != 1 else ''} "
                    f"({'; '.join(gpu.others[:3])}{more})"
                )
    if not words:
        return ""
    peer = "; ".join(_brief(g) for g in median.gpu_facts)
    return f"its {'; '.join(words)}" + (f" (median worker {median.role}'s {peer})" if peer else "")


def _brief(gpu: GpuFacts) -> str:
    figures = _figures(gpu)
    figures.append(f"throttled ({', '.join(gpu.slowed_by)})" if gpu.slowed_by else "not throttled")
    figures.append(f"shared with {len(gpu.others)}" if gpu.others else "not shared")
    return f"GPU {gpu.index}: {', '.join(figures)}"


# ------------------------------------------------------------------ one look at the roles' GPUs


def look_at_gpus(
    roles: Sequence[RoleStatus], run_path: Path, timeout_s: float = LOOK_TIMEOUT_S
) -> dict[str, tuple[tuple[GpuFacts, ...], str | None]]:
    """For each role: its GPUs with their figures
    now, and why they could not be looked at (None when they were, or when it has none and its host
    has no NVML: a CPU-only role). One look at this machine's GPUs serves every role on it."""
    from core.cluster.locality import is_local_host
    from core.preflight.gpus import GpuTarget, snapshot_all

    local = [r for r in roles if is_local_host(r.host or "127.0.0.1")]
    found: dict[str, tuple[tuple[GpuFacts, ...], str | None]] = {
        r.role: ((), f"not looked at: {r.host} is another host") for r in roles if r not in local and r.gpus
    }
    if not local:
        return found
    (host,) = snapshot_all([GpuTarget("local")], timeout_s=timeout_s)
    for role in local:
        name = role.role
        if host.snapshot is None or not host.snapshot.get("nvml"):
            why = host.error or str((host.snapshot or {}).get("status") or "no NVML")
            found[name] = ((), why if role.gpus else None)
        else:
            found[name] = (role_gpus(role, host.gpus, run_path), None)
    return found


def role_gpus(role: RoleStatus, gpus: Sequence[dict[str, Any]], run_path: Path) -> tuple[GpuFacts, ...]:
    """The GPUs of one host's snapshot (``core/agent/gpuquery.py``) that ``role`` asks for or runs
    on, each with the processes on it that are not the role's."""
    name = role.role
    run = os.path.realpath(run_path)

    def own(proc: dict[str, Any]) -> bool:
        run_dir = proc.get("run_dir")
        return proc.get("role") == name and (not run_dir or os.path.realpath(str(run_dir)) == run)

    asked = set(role.gpus)
    facts = []
    for gpu in gpus:
        procs = [p for p in gpu.get("processes") or [] if isinstance(p, dict)]
        index = gpu.get("index")
        if not isinstance(index, int) or (index not in asked and not any(own(p) for p in procs)):
            continue
        reasons = gpu.get("throttle_reasons")
        facts.append(
            GpuFacts(
                index,
                _number(gpu.get("utilization_gpu_percent")),
                _number(gpu.get("temperature_c")),
                _number(gpu.get("sm_clock_mhz")),
                tuple(str(r) for r in reasons) if isinstance(reasons, list) else None,
                tuple(_describe(p) for p in procs if not own(p)),
            )
        )
    return tuple(facts)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _describe(proc: dict[str, Any]) -> str:
    """One other process on a GPU, short: pid, user, and what it is (a TowerDeck role, or its command)."""
    words = f"pid {proc.get('pid')} {proc.get('user') or '?'}"
    if proc.get("role"):
        return f"{words}, {proc['role']} of run {proc.get('run') or '?'}"
    command = str(proc.get("command") or "")
    return f"{words}, {command[:40]}" if command else words
