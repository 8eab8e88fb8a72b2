"""The cluster at a glance: hosts as boxes, their roles inside, each with a state, its own batches/s
and its GPUs' utilisation; the run's global steps/s and examples/s (:mod:`core.views.rates`). Qt-free,
so the same model feeds the window's overview and its tests.

The model is built from whatever role statuses the source gives (:class:`RoleLike`: the
controller's ``RoleStatus`` satisfies it) and sorted the way people read role names:
``worker:2`` before ``worker:10`` (:func:`natural_key`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.views.rates import StepRates

__all__ = [
    "CATEGORY_ORDER",
    "HostBox",
    "Overview",
    "PlannedRole",
    "RoleCell",
    "RoleLike",
    "build_overview",
    "category",
    "natural_key",
    "short_role",
]

_DIGITS = re.compile(r"(\d+)")

# What a person scans for first comes first: trouble, then work, then the quiet states.
CATEGORY_ORDER = (
    "failed",
    "stalled",
    "waiting",
    "backoff",
    "straggler",
    "starting",
    "running",
    "stopping",
    "pending",
    "succeeded",
    "stopped",
)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders the digits in a name by value: ``worker:2`` < ``worker:10``,
    ``127.0.0.2`` < ``127.0.0.10``. Text and number parts never compare with each other."""
    parts: list[tuple[int, int | str]] = []
    for i, part in enumerate(_DIGITS.split(text)):
        if i % 2:
            parts.append((0, int(part)))
        elif part:
            parts.append((1, part.lower()))
    return tuple(parts)


class RoleLike(Protocol):
    """What the overview reads of a role (``core.run.status.RoleStatus`` has all of it)."""

    @property
    def role(self) -> str: ...
    @property
    def job(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def stalled(self) -> bool: ...
    @property
    def gpus(self) -> tuple[int, ...]: ...
    @property
    def gpu_utilization_percent(self) -> float | None: ...


def category(role: RoleLike) -> str:
    """The state a person cares about: a running role that made no step for a while is
    ``stalled``, one that waits on a peer (when the source knows it) is ``waiting``, one the
    straggler judge flagged is a ``straggler``."""
    state = str(role.state)
    if state == "running":
        if getattr(role, "waiting_for", None):
            return "waiting"
        if role.stalled:
            return "stalled"
        if getattr(role, "straggler", False):
            return "straggler"
    return state if state in CATEGORY_ORDER else "pending"


def short_role(role: str) -> str:
    """``worker:12`` -> ``w12``, ``ps:0`` -> ``ps0``, ``chief:0`` -> ``c0``, ``evaluator:0`` -> ``e0``."""
    job, _, index = role.partition(":")
    prefix = {"worker": "w", "chief": "c", "evaluator": "e", "ps": "ps", "master": "m"}.get(job, job[:3])
    return f"{prefix}{index}"


@dataclass(frozen=True)
class PlannedRole:
    """A role of the cluster file before a launch: pending, on its host."""

    role: str
    job: str
    host: str
    state: str = "pending"
    stalled: bool = False
    gpus: tuple[int, ...] = ()
    gpu_utilization_percent: float | None = None


@dataclass(frozen=True)
class RoleCell:
    """One role as the overview draws it."""

    role: str
    short: str
    category: str
    batches_per_s: float | None  # its own updates (core.views.rates)
    gpus: tuple[int, ...]
    gpu_utilization_percent: float | None
    note: str = ""  # why it is in its category, where the source says (a straggler's figures)


@dataclass(frozen=True)
class HostBox:
    """One host and its roles, in natural order by job then task."""

    host: str
    cells: tuple[RoleCell, ...]
    counts: tuple[tuple[str, int], ...]  # category -> roles, in CATEGORY_ORDER, non-zero only

    @property
    def worst(self) -> str:
        return self.counts[0][0] if self.counts else "pending"


@dataclass(frozen=True)
class Overview:
    hosts: tuple[HostBox, ...]
    counts: tuple[tuple[str, int], ...]  # over the whole cluster, in CATEGORY_ORDER
    rates: StepRates  # the run's global steps/s, examples/s and each worker's batches/s

    @property
    def role_count(self) -> int:
        return sum(len(h.cells) for h in self.hosts)

    def cell(self, role: str) -> RoleCell | None:
        return next((c for h in self.hosts for c in h.cells if c.role == role), None)


def _ordered_counts(categories: Iterable[str]) -> tuple[tuple[str, int], ...]:
    counts = Counter(categories)
    return tuple((c, counts[c]) for c in CATEGORY_ORDER if counts[c])


def build_overview(roles: Sequence[RoleLike], rates: StepRates | None = None) -> Overview:
    """Group roles by host (hosts in natural order), roles by job (ps, chief, worker, evaluator,
    then others) and task index; ``rates``: the run's (:func:`core.views.rates.status_rates`)."""
    rates = rates if rates is not None else StepRates()
    job_rank = {"ps": 0, "chief": 1, "master": 1, "worker": 2, "evaluator": 3}
    by_host: dict[str, list[RoleLike]] = {}
    for r in roles:
        by_host.setdefault(r.host, []).append(r)
    hosts = []
    for host in sorted(by_host, key=natural_key):
        members = sorted(by_host[host], key=lambda r: (job_rank.get(r.job, 9), natural_key(r.role)))
        cells = tuple(
            RoleCell(
                role=r.role,
                short=short_role(r.role),
                category=category(r),
                batches_per_s=rates.of(r.role),
                gpus=tuple(r.gpus),
                gpu_utilization_percent=r.gpu_utilization_percent,
                note=str(getattr(r, "straggler_detail", "") or ""),
            )
            for r in members
        )
        hosts.append(HostBox(host=host, cells=cells, counts=_ordered_counts(c.category for c in cells)))
    return Overview(
        hosts=tuple(hosts),
        counts=_ordered_counts(c.category for h in hosts for c in h.cells),
        rates=rates,
    )
